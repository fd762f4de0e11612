"""Prefill-shaped row-local work on every core (issue 14, `chip_rows`): norms larger than one
core's SRAM are not refused up front (`Impl.rows_only`) but split over rows, and the views a
prefill puts between a norm and the next projection ([1, S, H] -> [S, H]) do not keep a norm's
partition on one core. Results are checked against eager."""

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
        y = torch.compile(model, backend="legato")(ids, use_cache=False).logits
        ref = model(ids, use_cache=False).logits
    assert lt.last_summary().num_extern == 0, lt.last_summary()
    # the three norms (the layer's two, with the views to [128, 512] for the next projection,
    # and the final one): each a row-split kernel on every core; the first is cut from the
    # rotary's cos/sin and the mask, which are independent of it (`wrapper._split_rows`)
    norms = [
        k for k in wrapper.last_wrapper().kernel_modules() if any("mean" in n for n in k.info.nodes)
    ]
    split = [k for k in norms if k.gen.spmd and len(_cores(k)) == 32 and min(_cores(k).values())]
    assert len(split) == len(norms) == 3, [(k.info.name, k.gen.spmd, k.info.nodes) for k in norms]
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
