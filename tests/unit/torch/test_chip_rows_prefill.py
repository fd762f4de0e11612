"""Prefill-shaped row-local work on every core (issue 14, `chip_rows`): norms larger than one
core's SRAM are not refused up front (`Impl.rows_only`) but split over rows, the views a
prefill puts between a norm and the next projection ([1, S, H] -> [S, H]) do not keep a norm's
partition on one core, and work whose token rows sit in another dim than the leading one (the
q/k/v head views and rotary, the cos/sin tables and the mask, the attention output's transpose
back to [S, H]) is split over tokens too. Results are checked against eager."""

import torch

import legato.torch as lt
from legato.torch import wrapper
from tests.unit.torch.torch_backend_helpers import assert_close_bf16

BF16 = torch.bfloat16


def _compile(mod, *args, strict=True):
    torch._dynamo.reset()
    opts = {"legato.strict": True} if strict else {}
    with torch.no_grad():
        return torch.compile(mod, backend="legato", options=opts)(*args)


def _cores(k) -> dict:
    ins = k.kernel.last_run.instructions
    return {c: n for c, n in ins.items() if c.startswith("core")}


def test_layer_norm_larger_than_one_cores_sram_splits_rows():
    torch.manual_seed(0)
    mod = torch.nn.LayerNorm(512)
    x = torch.randn(2048, 512)  # 4 MiB: with its result and f32 copies 16 MiB, SRAM is 2 MiB
    y = _compile(mod, x)
    assert lt.last_summary().num_extern == 0, lt.last_summary()
    (k,) = wrapper.last_wrapper().kernel_modules()
    cores = _cores(k)
    assert k.gen.spmd and len(cores) == 32 and min(cores.values()) > 0, cores
    with torch.no_grad():
        torch.testing.assert_close(y, mod(x), rtol=1e-5, atol=1e-5)


def test_rows_only_norm_is_never_a_single_core_kernel():
    # a reduction over the rows after the norm: the two are not row-local together, and the
    # norm (too large for one core) is refused by the single-core kernel instead of compiled
    # to spill; bisecting leaves the norm alone in a row-split kernel, the sum eager
    def f(x):
        return torch.nn.functional.layer_norm(x, (512,)).sum(0, keepdim=True)

    x = torch.randn(2048, 512)
    y = _compile(f, x, strict=False)
    ext = {e.node: e.reason for e in lt.last_summary().extern}
    assert list(ext) == ["sum_1"] and "split over rows" in ext["sum_1"], ext
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert k.gen.spmd and min(_cores(k).values()) > 0
    torch.testing.assert_close(y, f(x), rtol=1e-4, atol=1e-3)


class NormView(torch.nn.Module):
    """A prefill's residual add and RMSNorm, viewed to 2-d for the next projection."""

    def __init__(self, hidden=512):
        super().__init__()
        self.w = torch.nn.Parameter(1 + torch.randn(hidden) / 8)

    def forward(self, h, d):
        h = h + d
        hf = h.float()
        n = self.w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(h.dtype)
        return h, n.view(-1, n.shape[-1])


def test_norm_viewed_to_rows_splits_over_every_core():
    torch.manual_seed(1)
    mod = NormView().to(BF16)
    h, d = (torch.randn(1, 384, 512, dtype=BF16) for _ in range(2))
    ys = _compile(mod, h, d)
    (k,) = wrapper.last_wrapper().kernel_modules()
    cores = _cores(k)
    assert k.gen.spmd and "get_all_cores" in k.gen.source, k.gen.source
    assert len(cores) == 32 and min(cores.values()) > 0, cores
    with torch.no_grad():
        refs = mod(h, d)
    assert ys[1].shape == (384, 512)
    for y, ref in zip(ys, refs, strict=True):
        assert_close_bf16(y, ref)


def test_tiny_llama_prefill_norms_run_on_every_core():
    transformers = __import__("pytest").importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        hidden_size=512,
        intermediate_size=512,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=256,
        max_position_embeddings=256,
    )
    model = transformers.LlamaForCausalLM(cfg).to(BF16).eval()
    ids = torch.randint(0, 256, (1, 128), generator=torch.Generator().manual_seed(1))
    torch._dynamo.reset()
    with torch.no_grad():
        # (chains off: each row-local partition is a kernel of its own here; chained, they
        # are phases of one kernel, test_chip_chains.py::test_tiny_llama_prefill_stack_is_one_kernel)
        y = torch.compile(model, backend="legato", options={"legato.fuse_chains": False})(
            ids, use_cache=False
        ).logits
        ref = model(ids, use_cache=False).logits
    assert lt.last_summary().num_extern == 0, lt.last_summary()
    # the three norms (the layer's two, with the views to [128, 512] for the next projection,
    # and the final one): each a row-split kernel on every core; the first is cut from the
    # rotary's cos/sin and the mask, which are independent of it (`wrapper._split_rows`)
    kms = wrapper.last_wrapper().kernel_modules()
    norms = [k for k in kms if any("mean" in n for n in k.info.nodes)]
    split = [k for k in norms if k.gen.spmd and len(_cores(k)) == 32 and min(_cores(k).values())]
    assert len(split) == len(norms) == 3, [(k.info.name, k.gen.spmd, k.info.nodes) for k in norms]
    # and every other kernel too: the rotary (with the q/k/v head views), its cos/sin tables
    # with the mask (in the first norm's kernel), the attention output's transpose
    one = [k.info.name for k in kms if not (k.gen.spmd and min(_cores(k).values()) > 0)]
    assert not one and all(len(_cores(k)) == 32 for k in kms), one
    rotary = [k for k in kms if any(n.startswith("neg") for n in k.info.nodes)]
    assert len(rotary) == 1 and "get_all_cores" in rotary[0].gen.source
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)


def _rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


def _heads_rotary(q, k, v, cos, sin):
    """transformers Llama's attention prologue in prefill: [1, S, H] -> [1, heads, S, d] and
    the rotary of q and k (cos/sin [1, S, d])."""
    s = q.shape[1]
    q, k, v = (t.view(1, s, -1, 128).transpose(1, 2) for t in (q, k, v))
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin, v


def test_head_views_and_rotary_split_over_tokens():
    torch.manual_seed(3)
    q, k, v = (torch.randn(1, 128, 512, dtype=BF16) for _ in range(3))
    cos, sin = (torch.randn(1, 128, 128, dtype=BF16) for _ in range(2))
    ys = _compile(_heads_rotary, q, k, v, cos, sin)
    (km,) = wrapper.last_wrapper().kernel_modules()
    cores = _cores(km)
    assert km.gen.spmd and len(cores) == 32 and min(cores.values()) > 0, cores
    # each core's block of 4 tokens, from every head: q[:, r0:r0+4, :] in, out[:, :, r0:r0+4, :]
    assert "r0 : r0 + 4, :]" in km.gen.source and "[:, :, r0 : r0 + 4, :]" in km.gen.source
    for y, ref in zip(ys, _heads_rotary(q, k, v, cos, sin), strict=True):
        assert_close_bf16(y, ref)
    torch.testing.assert_close(ys[2], v.view(1, 128, 4, 128).transpose(1, 2), rtol=0, atol=0)


def test_attention_output_transpose_split_over_tokens():
    def back(o):
        return o.transpose(1, 2).reshape(1, 128, 512).view(128, 512)

    o = torch.randn(1, 4, 128, 128, dtype=BF16)
    y = _compile(back, o)
    (km,) = wrapper.last_wrapper().kernel_modules()
    assert km.gen.spmd and min(_cores(km).values()) > 0
    torch.testing.assert_close(y, back(o), rtol=0, atol=0)  # data movement: exact


def test_cos_sin_tables_and_mask_split_over_tokens():
    # the rotary embedding's tables from the positions, and the causal mask as a where
    def tables(pos, inv_freq, causal):
        f = pos.float()[:, :, None] * inv_freq.float()
        emb = torch.cat((f, f), dim=-1)
        mask = torch.where(causal, torch.tensor(0.0, dtype=BF16), torch.tensor(-1e4, dtype=BF16))
        return emb.cos().to(BF16), emb.sin().to(BF16), mask

    pos = torch.arange(256, dtype=torch.float32).view(1, 256)
    inv = 1.0 / (10000 ** (torch.arange(0, 128, 2, dtype=torch.float32) / 128))
    causal = torch.ones(256, 256, dtype=torch.bool).tril().view(1, 1, 256, 256)
    ys = _compile(tables, pos, inv, causal)
    (km,) = wrapper.last_wrapper().kernel_modules()
    assert km.gen.spmd and len(_cores(km)) == 32 and min(_cores(km).values()) > 0
    for y, ref in zip(ys, tables(pos, inv, causal), strict=True):
        assert_close_bf16(y, ref)


def test_rows_moved_into_the_last_dim_stay_on_one_core():
    # the tokens' dim transposed into the last one: each core's block would be a column strip
    # (one narrow strided piece per row); and a softmax over the tokens mixes them
    def f(x):
        return x.transpose(1, 2) * 2

    def g(x):
        return torch.softmax(x.float(), dim=1).to(x.dtype)

    x = torch.randn(1, 128, 128, dtype=BF16)
    for fn in (f, g):
        y = _compile(fn, x)
        (km,) = wrapper.last_wrapper().kernel_modules()
        assert not km.gen.spmd, (fn.__name__, km.gen.source)
        assert_close_bf16(y, fn(x))


def test_heads_split_when_the_tokens_cannot_be():
    # with heads, the same transpose splits over them (the first output dim that is row-local)
    def f(x):
        return x.transpose(2, 3) * 2

    x = torch.randn(1, 4, 128, 128, dtype=BF16)
    y = _compile(f, x)
    (km,) = wrapper.last_wrapper().kernel_modules()
    assert km.gen.spmd and "[:, r0 : r0 + 1, :, :]" in km.gen.source, km.gen.source
    assert sum(1 for n in _cores(km).values() if n > 0) >= 4
    torch.testing.assert_close(y, f(x), rtol=0, atol=0)  # one rounding of an exact product
