"""A Llama-style attention block through torch.compile(backend="legato") at chip scale: the
decode step over a KV cache (its append, `aten.cat`, and the SDPA) and the causal prefill run as
all-core kernels (every core executes instructions) and match eager within bf16 tolerance; a
cache of a runtime length (mark_dynamic) runs every length in one binary."""

import pytest
import torch
import torch.nn.functional as F
from torch_backend_helpers import assert_close_bf16

import legato.torch as lt
from legato.torch import kernelgen, wrapper

pytestmark = pytest.mark.skipif(
    not hasattr(kernelgen, "generate_spmd"),
    reason="the generator of spmd kernels (issue 14's chip plumbing) is not merged",
)

BF16 = torch.bfloat16
HEADS, KV_HEADS, HD = 4, 2, 128
HIDDEN = HEADS * HD


class Attention(torch.nn.Module):
    """Llama attention (GQA, no rotary: it is not what this tests) with a KV cache passed in
    and returned, as HF's DynamicCache appends to it (cat along the sequence dim)."""

    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(HIDDEN, HEADS * HD, bias=False, dtype=BF16)
        self.k = torch.nn.Linear(HIDDEN, KV_HEADS * HD, bias=False, dtype=BF16)
        self.v = torch.nn.Linear(HIDDEN, KV_HEADS * HD, bias=False, dtype=BF16)
        self.o = torch.nn.Linear(HEADS * HD, HIDDEN, bias=False, dtype=BF16)

    def forward(self, x, k_cache, v_cache):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, HEADS, HD).transpose(1, 2)
        k = self.k(x).view(b, s, KV_HEADS, HD).transpose(1, 2)
        v = self.v(x).view(b, s, KV_HEADS, HD).transpose(1, 2)
        k = torch.cat([k_cache, k], dim=-2)
        v = torch.cat([v_cache, v], dim=-2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=s > 1, enable_gqa=True)
        return self.o(o.transpose(1, 2).reshape(b, s, HIDDEN)), k, v


def _chip_kernels(*labels):
    """The spmd kernels of the last compiled graph whose nodes' implementation names contain
    one of `labels`; asserts each ran on every core."""
    summary = str(lt.last_summary())
    for label in labels:
        assert label in summary, summary
    mods = [m for m in wrapper.last_wrapper().kernel_modules() if m.gen.spmd]
    assert mods, summary
    for m in mods:
        ins = {k: v for k, v in m.kernel.last_run.instructions.items() if k.startswith("core")}
        assert len(ins) == 32 and all(v > 0 for v in ins.values()), (m.gen.name, ins)
    return mods


def _run(model, *args):
    # one kernel per chip-scale node (chains of them: tests/unit/torch/test_chip_chains.py)
    with torch.no_grad():
        got = torch.compile(model, backend="legato", options={"legato.fuse_chains": False})(*args)
        ref = model(*args)
    return got, ref


def _close(got, ref):
    for g, r in zip(got, ref):
        assert_close_bf16(g, r, ulps=8)


def test_decode_step_over_a_kv_cache_runs_on_all_cores():
    torch.manual_seed(0)
    model = Attention()
    x = torch.randn(1, 1, HIDDEN, dtype=BF16)
    kc, vc = (torch.randn(1, KV_HEADS, 512, HD, dtype=BF16) for _ in range(2))
    got, ref = _run(model, x, kc, vc)
    _close(got, ref)
    _chip_kernels("chip decode attention + KV append")
    # the appends (whose results are returned: checked above) are computed by the attention's
    # kernel, the q/k/v views are its prologue; k and v (same input, same width) are one
    # grouped projection kernel: q, k+v, attention, o
    s = lt.last_summary()
    assert "chip cat" not in str(s) and s.num_kernels == 4 and s.num_extern == 0, str(s)
    (attn,) = [k for k in s.kernels if any("scaled_dot" in n for n in k.nodes)]
    assert sum("transpose" in n for n in attn.nodes) == 3, attn.nodes
    # 2 KV groups x 16 chunks: one work item per core, whose cached K and V rows are loaded
    # after the prologue's loads and before its steps (`Impl.preload`), not after them
    assert "preloaded" in str(s), str(s)
    (mod,) = [m for m in wrapper.last_wrapper().kernel_modules() if m.gen.name == attn.name]
    body = mod.gen.source.split("with device.get_all_cores():", 1)[1].splitlines()
    kinds = [
        "pre" if "pre_decode_append_preload(" in ln else "load" if "tensor.load(" in ln else "step"
        for ln in body
        if "= " in ln
    ]
    at = kinds.index("pre")
    assert set(kinds[:at]) == {"load"} and "step" in kinds[at:] and "load" not in kinds[at:], body


def test_causal_prefill_runs_on_all_cores():
    torch.manual_seed(1)
    model = Attention()
    x = torch.randn(1, 128, HIDDEN, dtype=BF16)
    empty = torch.zeros(1, KV_HEADS, 0, HD, dtype=BF16)  # an empty cache (first forward)
    got, ref = _run(model, x, empty, empty)
    _close(got, ref)
    # 4 heads x 8 blocks of 16 rows, one a core: the 16 cores of each KV head (GQA, 2 query
    # heads) share its K and V, 8 keys a core (rows_attention_shared)
    _chip_kernels("chip attention (16-row blocks, K/V shared by 16 cores)")


def test_decode_over_a_runtime_cache_length_one_compile():
    torch.manual_seed(2)
    model = Attention()
    compiled = torch.compile(model, backend="legato")
    for n in (300, 301, 700):
        x = torch.randn(1, 1, HIDDEN, dtype=BF16)
        kc, vc = (torch.randn(1, KV_HEADS, n, HD, dtype=BF16) for _ in range(2))
        for t in (kc, vc):
            lt.mark_dynamic(t, 2, max=1024)
        with torch.no_grad():
            got = compiled(x, kc, vc)
            ref = model(x, kc, vc)
        _close(got, ref)
        # the cache appends fused into the attention (`_dynamic_append_impl`), the projections
        # before it and after it chained: the whole block is one kernel
        mods = _chip_kernels("chip decode attention + KV append (runtime KV length")
        assert lt.last_summary().num_kernels == 1, str(lt.last_summary())
    # one graph and one binary per spmd kernel served every length
    assert all(m.kernel.compile_count == 1 for m in mods), [
        (m.gen.name, m.kernel.compile_count) for m in mods
    ]


class ScaledAttention(Attention):
    """`Attention` with elementwise prologues on the new query and key (a pre-scaled query as
    OPT / GPT-2 scale it, a scaled key standing for the rotary's elementwise ops)."""

    def forward(self, x, k_cache, v_cache):
        b, s, _ = x.shape
        q = (self.q(x) * 0.125).view(b, s, HEADS, HD).transpose(1, 2)
        k = (self.k(x) * 1.5 + 0.25).view(b, s, KV_HEADS, HD).transpose(1, 2)
        v = self.v(x).view(b, s, KV_HEADS, HD).transpose(1, 2)
        k = torch.cat([k_cache, k], dim=-2)
        v = torch.cat([v_cache, v], dim=-2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=s > 1, enable_gqa=True)
        return self.o(o.transpose(1, 2).reshape(b, s, HIDDEN)), k, v


def test_runtime_length_attention_takes_elementwise_prologues():
    """Over a runtime cache length, `q * scale` and the new key's elementwise work run in the
    attention's kernel (a fused prologue of the runtime-length attention with its appends,
    `Impl.values`): the projections, the prologue, the appends, the attention and the output
    projection are one kernel, not one per all-core node and segment between."""
    torch.manual_seed(3)
    model = ScaledAttention()
    compiled = torch.compile(model, backend="legato")
    for n in (300, 513):
        x = torch.randn(1, 1, HIDDEN, dtype=BF16)
        kc, vc = (torch.randn(1, KV_HEADS, n, HD, dtype=BF16) for _ in range(2))
        for t in (kc, vc):
            lt.mark_dynamic(t, 2, max=1024)
        with torch.no_grad():
            got = compiled(x, kc, vc)
            ref = model(x, kc, vc)
        _close(got, ref)
        _chip_kernels("chip decode attention + KV append (runtime KV length")
        s = lt.last_summary()
        assert s.num_kernels == 1 and s.num_extern == 0, str(s)
