"""The all-core (spmd) attention and KV-cache cat of `legato.torch.library.chip_attention`,
called inside `get_all_cores()` on shared-DRAM arguments as the generated kernel calls them;
compared with torch's eager SDPA (and its CPU flash op's logsumexp), every core must execute
instructions. The resolver's choices (split-KV, row blocks, refusals) are checked on fx nodes."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch_backend_helpers import assert_close_bf16

import legato
import legato.model.bertha as bertha
from legato.torch.library import chip_attention as ca

NC = 4
F32 = legato.types.float("float32")
DT = {torch.bfloat16: legato.types.float("bfloat16"), torch.float32: F32}


def four_cores(ctx):
    return bertha.Bertha(ctx, "bertha", NC, False, 8, 1 << 30)


def tt(t):
    """The shared-DRAM tensor type of torch tensor t."""
    return legato.get_model().tensor_type(DT[t.dtype], list(t.shape), "shared_dram")


def _all_cores_ran(kernel):
    ins = kernel.last_run.instructions
    cores = {m: n for m, n in ins.items() if m.startswith("core")}
    assert len(cores) == NC and all(n > 0 for n in cores.values()), ins


def _reference(q, k, v, mask=None, causal=False):
    """(out, lse) of torch's CPU flash op (GQA by repeating the KV heads), and eager SDPA."""
    rep = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, kk, vv, is_causal=causal, attn_mask=mask
    )[:2]
    eager = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True
    )
    assert torch.equal(out, eager)  # the op the backend sees is the eager path
    return out, lse


def _single_core(q, k, v, mask=None, causal=False):
    """The single-core `aten.attention` of the backend (these shapes are below CHIP_MIN_BYTES)."""
    import legato.torch as lt

    def f(q, k, v, m):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=m, is_causal=causal, enable_gqa=True
        )

    with torch.no_grad():
        y = torch.compile(f, backend="legato", options={"legato.strict": True})(q, k, v, mask)
    assert "chip" not in str(lt.last_summary()) and lt.last_summary().num_extern == 0
    return y


def _check(out, lse, ref, ref_lse, ulps=2):
    if out.dtype == torch.bfloat16:
        assert_close_bf16(out, ref, ulps=ulps)
    else:
        assert (out - ref).abs().max() <= 1e-5 * ref.abs().max()
    # torch sums exp(s - max) with a vectorized exp approximation: equal to ~1e-5 relative
    torch.testing.assert_close(lse, ref_lse, rtol=5e-5, atol=5e-5)


def run_decode(q, k, v, mask, split, mask_b=False, mask_h=False):
    nb, nh, _, d = q.shape
    groups, rep = nb * k.shape[1], nh // k.shape[1]
    out, lse = torch.zeros_like(q), torch.zeros(nb, nh, 1)
    tail = k.shape[2] % 512 if split > 1 else 0  # the last partial KV block: one more slot
    part = torch.zeros(groups, split + (tail > 0), rep, 2 + d)
    m = mask if mask is not None else torch.zeros(1, dtype=q.dtype)
    has_mask, scale, kb = mask is not None, 1 / math.sqrt(d), min(k.shape[2], 512)

    @legato.compile(backend=four_cores)
    def decode(qa: tt(q), ka: tt(k), va: tt(v), ma: tt(m), o: tt(out), ls: tt(lse), p: tt(part)):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            if split == 1:
                ca.decode_attention_unsplit(
                    qa, ka, va, ma, scale, has_mask, mask_b, mask_h, kb, o, ls
                )
            else:
                ca.decode_attention(
                    qa, ka, va, ma, scale, has_mask, mask_b, mask_h, split, kb, o, ls, p
                )

    decode(q, k, v, m, out, lse, part)
    _all_cores_ran(decode)
    return out, lse


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_split_kv_decode_gqa_matches_torch(dtype):
    # 2 KV groups on 4 cores: each group's 1024 keys split over 2 cores (a KV block of 512
    # each), combined through the scratch
    torch.manual_seed(0)
    q = torch.randn(1, 8, 1, 64, dtype=dtype)
    k, v = (torch.randn(1, 2, 1024, 64, dtype=dtype) for _ in range(2))
    out, lse = run_decode(q, k, v, None, split=2)
    _check(out, lse, *_reference(q, k, v))


def test_split_kv_decode_with_the_new_token_as_a_tail_block():
    # 1025 keys (a cache of 1024 and the new token): 2 cores x 512 keys and a 1-key partial
    torch.manual_seed(8)
    dt = torch.bfloat16
    q = torch.randn(1, 4, 1, 64, dtype=dt)
    k, v = (torch.randn(1, 2, 1025, 64, dtype=dt) for _ in range(2))
    out, lse = run_decode(q, k, v, None, split=2)
    _check(out, lse, *_reference(q, k, v))


def test_decode_more_groups_than_cores_loops():
    # 8 groups on 4 cores, one core per group (no split): each core loops over two groups
    torch.manual_seed(1)
    q = torch.randn(2, 4, 1, 32, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 4, 384, 32, dtype=torch.bfloat16) for _ in range(2))
    out, lse = run_decode(q, k, v, None, split=1)
    _check(out, lse, *_reference(q, k, v))


def test_decode_loop_over_groups_with_long_chunks():
    # 8 groups on 4 cores over 1024 keys (no split: 8 groups > 4 cores): each core's loop
    # body folds 4 V tiles of 256 x 128 (64 KiB each, 256 KiB with q^T more than mpu_buffer),
    # which fits as each tile is dead after its p @ V
    torch.manual_seed(10)
    q = torch.randn(2, 4, 1, 128, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 4, 1024, 128, dtype=torch.bfloat16) for _ in range(2))
    out, lse = run_decode(q, k, v, None, split=1)
    _check(out, lse, *_reference(q, k, v))


def test_decode_padding_mask_masks_a_whole_chunk():
    # batch 1 masks its first 600 keys (left padding): its first chunk (512 keys) is fully
    # masked, whose partial must weigh 0 in the combine (not NaN)
    torch.manual_seed(2)
    dt = torch.bfloat16
    q = torch.randn(2, 2, 1, 64, dtype=dt)
    k, v = (torch.randn(2, 1, 1024, 64, dtype=dt) for _ in range(2))
    mask = torch.zeros(2, 1, 1, 1024, dtype=dt)
    mask[1, :, :, :600] = -math.inf
    out, lse = run_decode(q, k, v, mask, split=2, mask_b=True)
    assert not out.isnan().any()
    _check(out, lse, *_reference(q, k, v, mask))


def test_decode_additive_mask_per_head():
    torch.manual_seed(3)
    dt = torch.bfloat16
    q = torch.randn(1, 4, 1, 64, dtype=dt)
    k, v = (torch.randn(1, 2, 256, 64, dtype=dt) for _ in range(2))
    mask = torch.randn(1, 4, 1, 256, dtype=dt)
    out, lse = run_decode(q, k, v, mask, split=1, mask_h=True)  # 2 groups: cores 2, 3 idle
    _check(out, lse, *_reference(q, k, v, mask))


@pytest.mark.parametrize("split", [1, 2])
def test_decode_dynamic_kv_length_one_binary(split):
    # k/v [1, 2, ?L, 64] (L <= 2048): every L runs in one binary, the last KV tile partial;
    # split 2: core r of a group takes the tiles r, r + 2, ...
    dt = torch.bfloat16
    q = torch.randn(1, 4, 1, 64, dtype=dt)
    kv = legato.get_model().tensor_type(DT[dt], (1, 2, (-1, 2048), 64), "shared_dram")
    out, lse = torch.zeros_like(q), torch.zeros(1, 4, 1)
    part = torch.zeros(2, split, 2, 66)
    scale = 1 / 8

    @legato.compile(backend=four_cores)
    def decode(qa: tt(q), ka: kv, va: kv, o: tt(out), ls: tt(lse), p: tt(part)):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            if split == 1:
                ca.decode_attention_dynamic_unsplit(qa, ka, va, scale, 512, o, ls)
            else:
                ca.decode_attention_dynamic(qa, ka, va, scale, split, 512, o, ls, p)

    for n in (1, 300, 512, 1100):
        torch.manual_seed(n)
        q.copy_(torch.randn(1, 4, 1, 64, dtype=dt))
        k, v = (torch.randn(1, 2, n, 64, dtype=dt) for _ in range(2))
        decode(q, k, v, out, lse, part)
        _check(out, lse, *_reference(q, k, v))
        _all_cores_ran(decode)
    assert decode.compile_count == 1
    # the whole KV tiles' V blocks (static slices of the runtime length) are MPU weights
    ir = decode.to_mlir(debuginfo=False)
    assert "[256, 64], bf16, shared_dram> -> !legato.tensor<[256, 64], bf16, mpu_buffer>" in ir


def run_rows(q, k, v, mask, causal, rows, mask_b=False, mask_h=False):
    nb, nh, s, d = q.shape
    out, lse = torch.zeros_like(q), torch.zeros(nb, nh, s)
    m = mask if mask is not None else torch.zeros(1, dtype=q.dtype)
    has_mask, scale, kb = mask is not None, 1 / math.sqrt(d), min(k.shape[2], 512)

    @legato.compile(backend=four_cores)
    def prefill(qa: tt(q), ka: tt(k), va: tt(v), ma: tt(m), o: tt(out), ls: tt(lse)):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            ca.rows_attention(
                qa, ka, va, ma, scale, causal, has_mask, mask_b, mask_h, rows, kb, o, ls
            )

    prefill(q, k, v, m, out, lse)
    _all_cores_ran(prefill)
    return out, lse


def _check_prefill(out, lse, q, k, v, mask, causal):
    # eager rounds a few p of these multi-row blocks differently (exp, summation order; up to
    # ~6 ulps here): the single-core implementation differs from it as much, and in bf16 the
    # chip one equals it bit for bit (f32: the MPU's bf16 split passes sum in another order)
    _check(out, lse, *_reference(q, k, v, mask, causal), ulps=8)
    if out.dtype == torch.bfloat16:
        assert torch.equal(out, _single_core(q, k, v, mask, causal))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_causal_prefill_gqa_matches_torch(dtype):
    # 2 heads x 4 blocks of 16 rows over 4 cores, the causal rows at runtime offsets
    torch.manual_seed(4)
    q = torch.randn(1, 2, 64, 32, dtype=dtype)
    k, v = (torch.randn(1, 1, 64, 32, dtype=dtype) for _ in range(2))
    out, lse = run_rows(q, k, v, None, True, rows=16)
    _check_prefill(out, lse, q, k, v, None, True)


def test_causal_prefill_more_queries_than_keys():
    # torch's is_causal is top-left aligned: rows >= L see every key
    torch.manual_seed(5)
    dt = torch.bfloat16
    q = torch.randn(1, 2, 48, 32, dtype=dt)
    k, v = (torch.randn(1, 2, 32, 32, dtype=dt) for _ in range(2))
    out, lse = run_rows(q, k, v, None, True, rows=8)
    _check_prefill(out, lse, q, k, v, None, True)


def test_prefill_loop_over_more_items_than_cores_with_long_v():
    # 2 heads x 32 blocks of 2 rows: 4 items of 8 blocks per head, 8 items over 4 cores (a
    # runtime loop); each block's V tile (256 keys x 64, 32 KiB) is dead after its p @ V, so
    # the loop body's 8 tiles (256 KiB, with K and the weights more than mpu_buffer) fit
    # one after the other in each iteration
    torch.manual_seed(9)
    dt = torch.bfloat16
    q = torch.randn(1, 2, 64, 64, dtype=dt)
    k, v = (torch.randn(1, 2, 256, 64, dtype=dt) for _ in range(2))
    out, lse = run_rows(q, k, v, None, False, rows=2)
    # (above CHIP_MIN_BYTES: no single-core comparison; eager's own rounding as the others)
    _check(out, lse, *_reference(q, k, v), ulps=8)


def test_prefill_with_additive_mask_per_batch():
    torch.manual_seed(6)
    dt = torch.bfloat16
    q = torch.randn(2, 2, 32, 32, dtype=dt)
    k, v = (torch.randn(2, 2, 40, 32, dtype=dt) for _ in range(2))
    mask = torch.randn(2, 1, 32, 40, dtype=dt)
    out, lse = run_rows(q, k, v, mask, False, rows=8, mask_b=True)
    _check_prefill(out, lse, q, k, v, mask, False)


def test_kv_cache_cat_on_all_cores():
    torch.manual_seed(7)
    cache = torch.randn(1, 4, 100, 64, dtype=torch.bfloat16)
    new = torch.randn(1, 4, 1, 64, dtype=torch.bfloat16)
    out = torch.zeros(1, 4, 101, 64, dtype=torch.bfloat16)

    @legato.compile(backend=four_cores)
    def append(x: tt(cache), y: tt(new), o: tt(out)):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            ca.cat_rows((x, y), (32, 1), o)  # 3 pieces of 32 rows, a tail of 4, the new row

    append(cache, new, out)
    assert torch.equal(out, torch.cat([cache, new], 2))
    _all_cores_ran(append)


def run_append(q, ko, kn, vo, vn, split, mask=None, on_chip=False):
    """`decode_attention_append` on four cores: (out, lse, k_all, v_all, the run). `on_chip`:
    q and the appended rows are loaded first and passed as on-chip values (as a fused
    prologue passes them)."""
    nb, nh, _, d = q.shape
    groups, rep = nb * ko.shape[1], nh // ko.shape[1]
    out, lse = torch.zeros_like(q), torch.zeros(nb, nh, 1)
    k_all = torch.zeros(nb, ko.shape[1], ko.shape[2] + kn.shape[2], d, dtype=q.dtype)
    v_all = torch.zeros_like(k_all)
    part = torch.zeros(groups, split, rep, 2 + d)
    m = mask if mask is not None else torch.zeros(1, dtype=q.dtype)
    flags, scale, kb = (mask is not None, False, False), 1 / math.sqrt(d), 512

    @legato.compile(backend=four_cores)
    def decode(
        qa: tt(q),
        koa: tt(ko),
        kna: tt(kn),
        voa: tt(vo),
        vna: tt(vn),
        ma: tt(m),
        o: tt(out),
        ls: tt(lse),
        ka: tt(k_all),
        va: tt(v_all),
        p: tt(part),
    ):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            # one item per core: the cached rows are loaded first, as the resolver's
            # `Impl.preload` does (before a fused prologue's steps)
            pre = None
            if groups * split == device.num_cores:
                pre = ca.decode_append_preload(koa, voa, split)
            qq, kk, vv = qa, kna, vna
            if on_chip:
                qq = legato.tensor.load(qa)
                kk = legato.tensor.load(kna)
                vv = legato.tensor.load(vna)
            if split == 1:
                ca.decode_attention_append_unsplit(
                    qq, koa, kk, voa, vv, ma, scale, flags, kb, o, ls, ka, va, pre
                )
            else:
                ca.decode_attention_append(
                    qq, koa, kk, voa, vv, ma, scale, flags, split, kb, o, ls, ka, va, p, pre
                )

    decode(q, ko, kn, vo, vn, m, out, lse, k_all, v_all, part)
    _all_cores_ran(decode)
    return out, lse, k_all, v_all, decode.last_run


@pytest.mark.parametrize(
    ("split", "on_chip"),
    [(2, False), (2, True), (1, True)],
    ids=["split2", "split2-onchip", "unsplit"],
)
def test_decode_with_its_kv_append_fused(split, on_chip):
    # 2 KV groups (GQA, 2 query heads each) of a 96-token cache and one new token: the
    # appended caches are exact, the attention matches torch's over the appended keys, and
    # every cached row is read once (for the copy and the attention) and written once
    torch.manual_seed(11)
    dt = torch.bfloat16
    q = torch.randn(1, 4, 1, 64, dtype=dt)
    ko, vo = (torch.randn(1, 2, 96, 64, dtype=dt) for _ in range(2))
    kn, vn = (torch.randn(1, 2, 1, 64, dtype=dt) for _ in range(2))
    out, lse, k_all, v_all, run = run_append(q, ko, kn, vo, vn, split, on_chip=on_chip)
    k, v = torch.cat([ko, kn], 2), torch.cat([vo, vn], 2)
    assert torch.equal(k_all, k) and torch.equal(v_all, v)
    # the partials' own maxima round p differently from torch's one block: a few ulps
    _check(out, lse, *_reference(q, k, v), ulps=4)
    cache = 2 * ko.numel() * 2  # K and V, bf16
    # (apart, the append reads and writes the cache and the attention reads it again: 3x)
    assert 2 * cache <= run.dram_bytes < 2 * cache + cache // 4, run.dram_bytes


def test_decode_with_its_kv_append_and_a_padding_mask():
    # 4 groups on 4 cores, no split; the additive mask spans the appended keys (the first 10
    # cached keys masked out, as left padding)
    torch.manual_seed(12)
    dt = torch.bfloat16
    q = torch.randn(1, 4, 1, 64, dtype=dt)
    ko, vo = (torch.randn(1, 4, 40, 64, dtype=dt) for _ in range(2))
    kn, vn = (torch.randn(1, 4, 1, 64, dtype=dt) for _ in range(2))
    mask = torch.zeros(1, 1, 1, 41, dtype=dt)
    mask[..., :10] = -math.inf
    out, lse, *_ = run_append(q, ko, kn, vo, vn, 1, mask=mask)
    k, v = torch.cat([ko, kn], 2), torch.cat([vo, vn], 2)
    ref, ref_lse = _reference(q, k, v, mask=mask)
    # the new key is a fold of its own (torch folds all 41 keys at once): other elements round
    # differently, but the result is as close to the exact attention as torch's
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), mask.double())
    assert (out.double() - exact).abs().max() <= (ref.double() - exact).abs().max() * 1.25
    _check(out, lse, ref, ref_lse, ulps=8)


def _exact_memcpys(monkeypatch):
    """Make the legato-level interpreter refuse a memcpy whose destination's runtime extent
    differs from its source's (the documented copy copies the source's extent; a destination
    that extends past it is what a bounds check flags). Returns the list of copied shapes."""
    from xdsl.interpreter import _IMPL_DICT_KEY

    from legato.dialects import legato as L
    from legato.interp.legato import LegatoFunctions

    table = getattr(LegatoFunctions, _IMPL_DICT_KEY)
    plain = table[L.MemcpyOp]
    shapes = []

    def exact(ft, interpreter, op, values):
        dst, src = values
        assert dst.shape == src.shape, f"memcpy of {src.shape} into {dst.shape} at {op.location}"
        shapes.append(src.shape)
        return plain(ft, interpreter, op, values)

    monkeypatch.setitem(table, L.MemcpyOp, exact)
    return shapes


def test_kv_cache_cat_of_a_runtime_length_one_binary(monkeypatch):
    dt = torch.bfloat16
    cache_t = legato.get_model().tensor_type(DT[dt], (1, 4, (-1, 512), 64), "shared_dram")
    new = torch.randn(1, 4, 1, 64, dtype=dt)
    out_t = legato.get_model().tensor_type(DT[dt], (1, 4, (-1, 513), 64), "shared_dram")

    @legato.compile(backend=four_cores)
    def append(x: cache_t, y: tt(new), o: out_t):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            ca.cat_rows_dynamic((x, y), (32, 1), o)

    for n in (1, 31, 100, 512):
        torch.manual_seed(n)
        cache = torch.randn(1, 4, n, 64, dtype=dt)
        out = torch.full((1, 4, n + 1, 64), float("nan"), dtype=dt)
        append(cache, new, out)
        assert torch.equal(out, torch.cat([cache, new], 2)), n
        if n >= 100:  # 4 (b, h) x 4 pieces and 4 new rows
            _all_cores_ran(append)
    assert append.compile_count == 1
    # every copy's destination holds exactly its source's runtime rows (whole pieces of 32
    # rows, then the tail's pieces of 2^k rows: 31 = 16 + 8 + 4 + 2 + 1)
    shapes = _exact_memcpys(monkeypatch)
    for n in (1, 31, 100, 512):
        cache = torch.randn(1, 4, n, 64, dtype=dt)
        out = torch.full((1, 4, n + 1, 64), float("nan"), dtype=dt)
        append.interpret(cache, new, out, level="legato")
        assert torch.equal(out, torch.cat([cache, new], 2)), n
    rows = sorted({s[2] for s in shapes})
    assert rows == [1, 2, 4, 8, 16, 32], rows


# --------------------------------------------------------------------------------------------
# The resolvers' choices, on the nodes torch.compile produces


def _node(fn, *args, target):
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(fn, tracing_mode="fake")(*args)
    (node,) = [n for n in gm.graph.nodes if n.target == target]
    return node


def _ctx(num_cores=32, bound=None):
    from legato.model.bertha import Bertha
    from legato.torch.options import Options
    from legato.torch.registry import ResolveContext

    model = Bertha(None, "bertha", num_cores, False, 8, 1 << 30)
    return ResolveContext(model, Options(), lambda s: bound)


SDPA = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default


def _sdpa_node(q, k, v, **kw):
    return _node(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw),
        q,
        k,
        v,
        target=SDPA,
    )


def _dynamic_node(fn, args, dynamic, target):
    """The `target` node of fn traced on fake args whose dim 2 is symbolic where `dynamic[i]`
    (one symbol per distinct tensor), as dynamo traces a decode step over a mark_dynamic
    cache."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    mode = FakeTensorMode(shape_env=ShapeEnv())
    st, dyn = DimDynamic.STATIC, DimDynamic.DYNAMIC
    fakes = [
        mode.from_tensor(
            t, symbolic_context=StatelessSymbolicContext([st, st, dyn if d else st, st])
        )
        for t, d in zip(args, dynamic)
    ]
    with mode:
        gm = make_fx(fn)(*fakes)
    (node,) = [n for n in gm.graph.nodes if n.target == target]
    return node


def _dynamic_kv_sdpa_node(q, k, v, **kw):
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **kw)

    return _dynamic_node(f, (q, k, v), (False, True, True), SDPA)  # k is v: one symbol


def test_resolver_splits_decode_kv_when_heads_are_fewer_than_cores():
    q = torch.randn(1, 8, 1, 128, dtype=torch.bfloat16)
    k = torch.randn(1, 8, 1024, 128, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_sdpa_node(q, k, k), _ctx(32))
    assert impl.spmd and impl.fn is ca.decode_attention
    assert impl.args[-2:] == (2, 512)  # 32 cores / 8 groups, but whole KV blocks of 512
    assert impl.scratch == (((8, 2, 1, 130), torch.float32),)
    # 1025 keys: 2 chunks of 512 and the new token's own partial
    k1025 = torch.randn(1, 8, 1025, 128, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_sdpa_node(q, k1025, k1025), _ctx(32))
    assert impl.args[-2:] == (2, 512) and impl.scratch == (((8, 3, 1, 130), torch.float32),)
    # 513 keys (a cache of 512 and the new token): one chunk per group, no split
    k513 = torch.randn(1, 8, 513, 128, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_sdpa_node(q, k513, k513), _ctx(32))
    assert impl.fn is ca.decode_attention_unsplit and impl.args[-1] == 512
    # batch 4: 128 groups on 32 cores, each core loops over its groups' 1024-key chunks (their
    # 256 KiB of V tiles share mpu_buffer within an iteration: see the test below)
    qb = torch.randn(4, 32, 1, 128, dtype=torch.bfloat16)
    kb = torch.randn(4, 32, 1024, 128, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_sdpa_node(qb, kb, kb), _ctx(32))
    assert impl.fn is ca.decode_attention_unsplit and impl.args[-1] == 512


def test_resolver_fuses_the_kv_appends_of_its_operands():
    # SDPA over cat([cache, new], 2) for k and v: one implementation computes both appends
    # (Impl.writes) and takes q and the new rows as on-chip values (a prologue's)
    def f(q, kc, kn, vc, vn):
        k, v = torch.cat([kc, kn], 2), torch.cat([vc, vn], 2)
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True), k, v

    q = torch.randn(1, 8, 1, 128, dtype=torch.bfloat16)
    kc = torch.randn(1, 2, 1024, 128, dtype=torch.bfloat16)
    kn = torch.randn(1, 2, 1, 128, dtype=torch.bfloat16)
    node = _node(f, q, kc, kn, kc, kn, target=SDPA)
    impl = ca.resolve_chip_sdpa(node, _ctx(32))
    assert impl.fn is ca.decode_attention_append and impl.args[-2:] == (16, 512)
    cats = tuple(node.args[1:3])
    assert impl.writes == cats and all(c.target is torch.ops.aten.cat.default for c in cats)
    assert impl.values == frozenset({0, 2, 4})
    assert impl.args[1:5] == (cats[0].args[0][0], cats[0].args[0][1], *cats[1].args[0])
    assert impl.scratch == (((2, 16, 4, 130), torch.float32),)
    # 2 groups x 16 chunks: one item per core, its cached rows preloaded from the caches
    assert impl.preload == (ca.decode_append_preload, (*impl.args[1:4:2], 16))
    # 48 cores: 2 x 16 items, some cores idle: nothing preloaded
    assert ca.resolve_chip_sdpa(node, _ctx(48)).preload[0] is ca.decode_append_no_preload
    # no append (k is a graph input): the plain decode attention
    assert ca.resolve_chip_sdpa(_sdpa_node(q, kc, kc), _ctx(32)).fn is ca.decode_attention
    # an append of many rows (a prefill chunk) is not fused
    big = torch.randn(1, 2, 64, 128, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_node(f, q, kc, big, kc, big, target=SDPA), _ctx(32))
    assert impl.fn is ca.decode_attention and not impl.writes


def test_resolver_takes_a_dynamic_kv_length_in_decode_only():
    q = torch.randn(1, 8, 1, 128, dtype=torch.bfloat16)
    k = torch.randn(1, 8, 700, 128, dtype=torch.bfloat16)
    node = _dynamic_kv_sdpa_node(q, k, k)
    lk = node.args[1].meta["val"].shape[2]
    assert not isinstance(lk, int)  # symbolic tracing made the KV length a SymInt
    impl = ca.resolve_chip_sdpa(node, _ctx(32, bound=2048))
    assert impl.fn is ca.decode_attention_dynamic and impl.args[-2:] == (4, 512)
    assert impl.scratch == (((8, 4, 1, 130), torch.float32),)
    with pytest.raises(AssertionError, match="without an upper bound"):
        ca.resolve_chip_sdpa(node, _ctx(32, bound=None))
    qs = torch.randn(1, 8, 16, 128, dtype=torch.bfloat16)
    causal = _dynamic_kv_sdpa_node(qs, k, k, is_causal=True)
    with pytest.raises(AssertionError, match="the decode step's"):
        ca.resolve_chip_sdpa(causal, _ctx(32, bound=2048))


def test_resolver_prefill_row_blocks_and_refusals():
    q = torch.randn(1, 4, 256, 64, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_sdpa_node(q, q, q, is_causal=True), _ctx(32))
    # 4 heads x 8 blocks of 32 rows = one per core: each head's 8 cores share its K and V
    # (test_chip_attention_shared.py)
    assert impl.spmd and impl.fn is ca.rows_attention_shared and impl.scratch == ()
    assert impl.args[-2:] == (32, False)  # no diagonal form: is_causal, no mask
    # 3 heads x 16 blocks of 16 rows: 48 items on 32 cores (a loop), each loads its K and V
    q2 = torch.randn(1, 3, 256, 64, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_sdpa_node(q2, q2, q2, is_causal=True), _ctx(32))
    assert impl.spmd and impl.fn is ca.rows_attention and impl.args[-2:] == (16, 256)
    small = torch.randn(1, 2, 8, 16, dtype=torch.bfloat16)
    with pytest.raises(AssertionError, match="stays on one core"):
        ca.resolve_chip_sdpa(_sdpa_node(small, small, small), _ctx(32))


def test_resolver_cat_is_for_the_kv_cache_dim():
    cache = torch.randn(1, 8, 512, 64, dtype=torch.bfloat16)
    new = torch.randn(1, 8, 1, 64, dtype=torch.bfloat16)
    cat = torch.ops.aten.cat.default
    impl = ca.resolve_chip_cat(
        _node(lambda a, b: torch.cat([a, b], 2), cache, new, target=cat), _ctx(32)
    )
    assert impl.spmd and impl.args[1] == (512, 1)
    dyn = _dynamic_node(
        lambda a, b: torch.cat([a, b], 2), (cache, new), (True, False), torch.ops.aten.cat.default
    )
    assert ca.resolve_chip_cat(dyn, _ctx(32, bound=1024)).fn is ca.cat_rows_dynamic
    with pytest.raises(AssertionError, match="no upper bound"):
        ca.resolve_chip_cat(dyn, _ctx(32, bound=None))
    with pytest.raises(AssertionError, match="dim 2 of 4-d"):
        ca.resolve_chip_cat(
            _node(lambda a, b: torch.cat([a, b], 3), cache, cache, target=cat), _ctx(32)
        )
