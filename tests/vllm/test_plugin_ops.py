"""The plugin's op kernels (`vllm_legato.ops`: SiluAndMul and the neox rotary embedding as
Legato kernels with a runtime token count) against vLLM's own native implementations, which
run on the host on stock vLLM's CPU platform; no engine is started."""

import pytest
import torch

ops = pytest.importorskip("vllm_legato.ops")
pytest.importorskip("vllm")

pytestmark = pytest.mark.vllm

DTYPES = (torch.float32, torch.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens", [1, 5, 40])
def test_silu_and_mul_is_vllms(monkeypatch, dtype, tokens):
    from vllm.model_executor.layers.activation import SiluAndMul

    monkeypatch.setenv("LEGATO_VLLM_TOKEN_BOUND", "40")
    x = torch.randn(tokens, 2 * 48, generator=torch.Generator().manual_seed(tokens)).to(dtype)
    calls = ops.STATS.calls.get("silu_and_mul", 0)
    got = torch.ops.vllm_legato.silu_and_mul(x)
    want = SiluAndMul.forward_native(x)
    assert got.shape == want.shape == (tokens, 48)
    # f32: the VPU's silu is within an ulp or two of torch's; bf16: the same bits
    tol = {torch.float32: 1e-6, torch.bfloat16: 0.0}[dtype]
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)
    assert ops.STATS.calls["silu_and_mul"] == calls + 1
    # one kernel per (dtype, token bound, width): the runtime count does not recompile
    assert (
        ops.silu_and_mul_kernel(
            {torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype], 40, 48, "bertha"
        ).last_run.cycles
        > 0
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,rot", [(1, 16), (7, 16), (33, 8)])
def test_rotary_neox_is_vllms(monkeypatch, dtype, tokens, rot):
    """Queries and keys as vLLM passes them: views of the fused qkv projection's output (a row
    stride wider than their rows); a rotary dim below the head size keeps the rest."""
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

    monkeypatch.setenv("LEGATO_VLLM_TOKEN_BOUND", "40")
    hq, hk, d, maxpos = 4, 2, 16, 64
    g = torch.Generator().manual_seed(tokens * rot)
    qkv = torch.randn(tokens, (hq + 2 * hk) * d, generator=g).to(dtype)
    q, k = qkv[:, : hq * d], qkv[:, hq * d : (hq + hk) * d]
    pos = torch.randint(0, maxpos, (tokens,), generator=g)
    cache = torch.randn(maxpos, rot, generator=g).to(dtype)
    gq, gk = torch.ops.vllm_legato.rotary_neox(pos, q, k, cache, d)
    wq, wk = RotaryEmbedding.forward_static(pos, q, k, d, rot, cache, True)
    assert torch.equal(gq, wq) and torch.equal(gk, wk)


def test_layers_are_swapped_when_registered():
    """`patches.install` (Bertha only) registers the layers in vLLM's out-of-tree registry: a
    SiluAndMul or RotaryEmbedding built afterwards is the plugin's, and runs its op."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.activation import SiluAndMul
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

    ops.register_layers()
    with set_current_vllm_config(VllmConfig()):
        act = SiluAndMul()
        rope = RotaryEmbedding(16, 16, 64, 10000.0, True, torch.float32)
    assert type(act).__name__ == "LegatoSiluAndMul"
    assert type(rope).__name__ == "LegatoRotaryEmbedding"
    x = torch.randn(3, 32)
    calls = ops.STATS.calls.get("silu_and_mul", 0)
    torch.testing.assert_close(act.forward_native(x), SiluAndMul.forward_native(x))
    assert ops.STATS.calls["silu_and_mul"] == calls + 1
    pos = torch.tensor([0, 5, 63])
    q, k = torch.randn(3, 32), torch.randn(3, 16)
    calls = ops.STATS.calls.get("rotary_neox", 0)
    got = rope.forward_native(pos, q, k)
    want = RotaryEmbedding.forward_static(pos, q, k, 16, 16, rope.cos_sin_cache, True)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert ops.STATS.calls["rotary_neox"] == calls + 1


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("tokens", [1, 8, 40])
def test_linear_is_f32_accumulated_once_rounded(monkeypatch, bias, tokens):
    """`vllm_legato::linear` (the projections neither chip_linear nor the single-core mm take:
    the tiny models' gate/up at vLLM's budget of 1024) against the f32 product rounded once to
    bf16; torch's CPU bf16 linear may round differently by an ulp."""
    monkeypatch.setenv("LEGATO_VLLM_TOKEN_BOUND", "1024")
    k, n = 64, 256
    g = torch.Generator().manual_seed(tokens + bias)
    x = torch.randn(tokens, k, generator=g).bfloat16()
    w = torch.randn(n, k, generator=g).bfloat16()
    b = torch.randn(n, generator=g).bfloat16() if bias else None
    nb = ops.column_blocks(n, ops.device_cores())
    assert nb == 16  # every core of EVT0 one block of 16 columns
    calls = ops.STATS.calls.get("linear", 0)
    got = torch.ops.vllm_legato.linear(x, ops.lay_weight(w, nb), b)
    ref = x.float() @ w.float().t() + (b.float() if bias else 0)
    ulp = ref.abs().clamp_min(1e-30).log2().floor().exp2() / 128
    assert got.shape == (tokens, n)
    assert ((got.float() - ref).abs() <= ulp).all()
    torch.testing.assert_close(got, torch.nn.functional.linear(x, w, b), atol=0.02, rtol=0.01)
    assert ops.STATS.calls["linear"] == calls + 1 and ops.STATS.macs["linear"] > 0


def test_linear_route_names_why(monkeypatch):
    """A bf16 projection is routed only when neither in-graph resolver takes it, with both
    refusals; a projection the single-core mm or chip_linear takes stays in the graph. f32 is
    routed wherever chip_linear refuses (six passes, not the single-core mm's three);
    chip_linear's stays."""
    # 120 output columns: chip_linear cannot give each of 32 cores whole columns of them; at
    # 1024 tokens the single-core mm does not fit, so chip_linear runs rows over the cores
    # (linear_row_chunks): in the graph, in both dtypes
    w = torch.zeros(120, 512, dtype=torch.bfloat16)
    assert ops.linear_route(w, 1024, "bertha") is None
    assert ops.linear_route(w.float(), 1024, "bertha") is None
    assert ops.linear_route(w, 40, "bertha") is None  # one core holds 40 rows
    assert ops.linear_route(torch.zeros(128, 64, dtype=torch.bfloat16), 1024, "bertha") is None
    # the tiny models' gate/up (K = 64, N = 256): chip_linear's, K zero-padded to a whole tile
    assert ops.linear_route(torch.zeros(256, 64, dtype=torch.bfloat16), 1024, "bertha") is None
    # f32 where one core holds the rows: chip_linear refuses (no whole columns), the
    # single-core mm's three passes would take it: routed to the six-pass kernel
    why = ops.linear_route(w.float(), 40, "bertha")
    assert "no tiling of 120 output columns" in why and "six bf16 passes" in why
    why = ops.linear_route(torch.zeros(64, 64), 1024, "bertha")  # the tiny models' o_proj
    assert "no tiling of 64 output columns" in why and "six bf16 passes" in why
    assert ops.linear_route(torch.zeros(256, 256), 40, "bertha") is None  # chip_linear's
    # bf16 refused by both resolvers (no shape of today's models is: asked through the
    # budget's resolver call, made to refuse): the reason names both refusals
    from vllm_legato import budget

    def refuse(device, k, n, dtype, bound, resolver=None):
        return "single says no" if resolver is not None else "chip says no"

    monkeypatch.setattr(budget, "accepts", refuse)
    why = ops.linear_route(w, 1024, "bertha")
    assert why == "chip_linear: chip says no; single-core mm: single says no"


def test_split3_is_exact_to_f32():
    """hi + mid + lo (bf16 parts) give back every f32 value up to 2^-24 of it (in f64), over
    random values spanning many binades."""
    import numpy as np

    g = np.random.default_rng(3)
    v = (g.standard_normal(4096) * np.exp2(g.integers(-60, 60, 4096))).astype(np.float32)
    hi, mid, lo = ops.split3(v)
    back = hi.astype(np.float64) + mid.astype(np.float64) + lo.astype(np.float64)
    assert (np.abs(back - v.astype(np.float64)) <= np.abs(v) * 2.0**-24).all()


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1, 64, 256), (37, 64, 128), (9, 128, 64)])
def test_f32_linear_six_passes(monkeypatch, bias, shape):
    """f32 `vllm_legato::linear`: the bits of `f32_linear_reference` (numpy, legato.numerics'
    MPU definition), and as close to the exact (f64) product as torch's own f32 linear: within
    2^-22 of sum |x_k w_k| (the compiler's three-pass f32 matmul is ~2^-17 off)."""
    import numpy as np

    monkeypatch.setenv("LEGATO_VLLM_TOKEN_BOUND", "1024")
    t, k, n = shape
    g = torch.Generator().manual_seed(t + k + bias)
    x = torch.randn(t, k, generator=g)
    w = torch.randn(n, k, generator=g) * 0.1
    b = torch.randn(n, generator=g) if bias else None
    calls, macs = ops.STATS.calls.get("linear", 0), ops.STATS.macs.get("linear", 0)
    got = torch.ops.vllm_legato.linear(x, ops.lay_weight(w, ops.column_blocks(n, 32)), b)
    want = ops.f32_linear_reference(x.numpy(), w.numpy(), None if b is None else b.numpy())
    assert np.array_equal(got.numpy().view(np.uint32), want.view(np.uint32))
    exact = x.double() @ w.double().t() + (b.double() if bias else 0)
    scale = x.double().abs() @ w.double().abs().t() + (b.double().abs() if bias else 0)
    assert ((got.double() - exact).abs() <= scale * 2.0**-22).all()
    # the report counts the product's MACs, not the MPU's six passes
    assert ops.STATS.calls["linear"] == calls + 1 and ops.STATS.macs["linear"] == macs + t * k * n


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("tokens", [1, 9])
def test_linear_silu_and_mul_is_linear_then_silu_and_mul(monkeypatch, bias, tokens):
    """The fused gate/up + SiluAndMul kernel gives the bits of the two plugin ops in a row."""
    monkeypatch.setenv("LEGATO_VLLM_TOKEN_BOUND", "1024")
    k, n = 64, 256
    g = torch.Generator().manual_seed(7 * tokens + bias)
    x = torch.randn(tokens, k, generator=g).bfloat16()
    wt = ops.lay_weight(torch.randn(n, k, generator=g).bfloat16(), 16)
    b = torch.randn(n, generator=g).bfloat16() if bias else None
    got = torch.ops.vllm_legato.linear_silu_and_mul(x, wt, b)
    want = torch.ops.vllm_legato.silu_and_mul(torch.ops.vllm_legato.linear(x, wt, b))
    assert got.shape == (tokens, n // 2) and torch.equal(got, want)


def test_fuse_silu_and_mul_rewrites_only_a_sole_user():
    """The graph pass: silu_and_mul(linear(...)) becomes one op; a linear with another user,
    or an odd block count, is left alone."""

    def f(x, wt, wt3):
        a = torch.ops.vllm_legato.silu_and_mul(torch.ops.vllm_legato.linear(x, wt, None))
        y = torch.ops.vllm_legato.linear(x, wt, None)
        b = torch.ops.vllm_legato.silu_and_mul(y)
        c = torch.ops.vllm_legato.silu_and_mul(torch.ops.vllm_legato.linear(x, wt3, None))
        return a, b, y, c

    gm = torch.fx.symbolic_trace(f)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.meta["val"] = torch.empty(3 if node.name == "wt3" else 16, 64, 16)
    assert ops.fuse_silu_and_mul(gm) == 1
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.vllm_legato.linear_silu_and_mul.default) == 1
    assert targets.count(torch.ops.vllm_legato.linear) == 2


def test_fold_rotary_links_only_rotaries_whose_users_are_all_legato_attention(monkeypatch):
    """`fold_rotary` folds a rotary embedding into the LEGATO_ATTN layers of the modules that
    hold it with their `attn` (the layer's impl gets it, the rotary's forward then returns q
    and k untouched); a rotary that one module holds without such an attention stays unfolded,
    and so does every one with $LEGATO_VLLM_FOLD_ROTARY=0."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding
    from vllm_legato.attention import LegatoAttentionImpl

    ops.register_layers()
    with set_current_vllm_config(VllmConfig()):
        shared = RotaryEmbedding(16, 16, 64, 10000.0, True, torch.float32)
        mixed = RotaryEmbedding(16, 16, 64, 10000.0, True, torch.float32)

    def impl(head_size=16):
        i = LegatoAttentionImpl.__new__(LegatoAttentionImpl)  # no vLLM config needed
        i.head_size, i.rope = head_size, None
        return i

    def layer(rope, attn_impl):
        m = torch.nn.Module()
        m.rotary_emb = rope
        m.attn = torch.nn.Module()
        m.attn.impl = attn_impl
        return m

    a, b, c = impl(), impl(), impl()
    model = torch.nn.ModuleList(
        [layer(shared, a), layer(shared, b), layer(mixed, c), layer(mixed, object())]
    )
    monkeypatch.setenv(ops.FOLD_ROTARY_ENV, "0")
    assert ops.fold_rotary(model) == 0 and a.rope is None
    monkeypatch.delenv(ops.FOLD_ROTARY_ENV)
    assert ops.fold_rotary(model) == 2
    assert a.rope is shared and b.rope is shared and c.rope is None
    assert not getattr(mixed, "legato_folded", False)
    q, k = torch.randn(3, 32), torch.randn(3, 16)
    calls = ops.STATS.calls.get("rotary_neox", 0)
    got = shared.forward_native(torch.tensor([0, 1, 2]), q, k)
    assert got[0] is q and got[1] is k and ops.STATS.calls.get("rotary_neox", 0) == calls
    with pytest.raises(RuntimeError, match="without a key"):
        shared.forward_native(torch.tensor([0, 1, 2]), q, None)


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_is_f_embedding(monkeypatch, dtype):
    """`vllm_legato::embedding` (all cores, a runtime token count): the rows of F.embedding,
    repeated and extreme ids included; routed only where the graph's resolver refuses the
    lookup at the bound (Llama-7B's 4096-wide table at 1024 tokens, not the tiny models')."""
    monkeypatch.setenv("LEGATO_VLLM_TOKEN_BOUND", "1024")
    g = torch.Generator().manual_seed(5)
    w = torch.randn(1000, 96, generator=g).to(dtype)
    ids = torch.tensor([[5, 999, 0], [77, 5, 998]])
    calls = ops.STATS.calls.get("embedding", 0)
    got = torch.ops.vllm_legato.embedding(ids, w)
    assert got.shape == (2, 3, 96) and torch.equal(got, torch.nn.functional.embedding(ids, w))
    assert ops.STATS.calls["embedding"] == calls + 1
    big = torch.zeros(32000, 4096, dtype=torch.bfloat16)
    assert "embedding indices and rows need" in ops.embedding_route(big, 1024, "bertha")
    assert ops.embedding_route(big, 16, "bertha") is None
    assert ops.embedding_route(torch.zeros(512, 64, dtype=dtype), 1024, "bertha") is None
