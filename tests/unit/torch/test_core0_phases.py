"""Single-core work as a core-0 phase of an all-core chain (issue 14 item 3: a decoder layer, and
a stack of layers, in as few kernels as the chip allows; `wrapper._serial_phase`,
`legato.torch.library.chip_serial`). A decode step over a runtime KV length has all-core nodes
(the KV appends and the attention) between single-core work too small for every core (the
norms, projections of a few columns, the rotary): that work now runs on core 0 inside the
chain, so the step is one kernel, where each segment between all-core nodes was a kernel of its
own (5 for the tiny 2-layer HF configs). Results are eager's (the same single-core
implementations); the split is by one core's on-chip memory, never by a failed compile."""

import logging
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import legato.torch as lt
from legato.torch import wrapper
from legato.torch.library import chip_serial

sys.path.insert(0, str(Path(__file__).parent))
from test_hf_zoo import assert_matches_eager, build  # noqa: E402

BF16, F32 = torch.bfloat16, torch.float32
H, KV, D = 4, 2, 16
HIDDEN = H * D


class Block(torch.nn.Module):
    """An attention block of a small model in decode: RMSNorm-like scaling, q/k/v projections
    of 64 columns or fewer (single-core: too narrow to split over the cores), the KV appends
    along a runtime length, SDPA, the output projection and a residual add."""

    def __init__(self, dtype):
        super().__init__()
        self.q = torch.nn.Linear(HIDDEN, H * D, bias=False, dtype=dtype)
        self.k = torch.nn.Linear(HIDDEN, KV * D, bias=False, dtype=dtype)
        self.v = torch.nn.Linear(HIDDEN, KV * D, bias=False, dtype=dtype)
        self.o = torch.nn.Linear(H * D, HIDDEN, bias=False, dtype=dtype)

    def forward(self, x, kc, vc):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        q = self.q(h).view(1, 1, H, D).transpose(1, 2)
        k = self.k(h).view(1, 1, KV, D).transpose(1, 2)
        v = self.v(h).view(1, 1, KV, D).transpose(1, 2)
        k = torch.cat([kc, k], dim=2)
        v = torch.cat([vc, v], dim=2)
        a = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return x + self.o(a.transpose(1, 2).reshape(1, HIDDEN)), k, v


def _block_args(length, dtype):
    x = torch.randn(1, HIDDEN, dtype=dtype)
    kc, vc = (torch.randn(1, KV, length, D, dtype=dtype) for _ in range(2))
    for t in (kc, vc):
        lt.mark_dynamic(t, 2, max=256)
    return x, kc, vc


def _check(got, ref, dtype):
    for g, r in zip(got, ref, strict=True):
        if dtype == BF16:
            torch.testing.assert_close(g.float(), r.float(), rtol=2**-7, atol=2**-7)
        else:
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)


def _run_against_eager(compiled, model, dtype, lengths=(7, 8)):
    """Calls of `compiled` at each KV length (the second makes it dynamic), each checked
    against eager."""
    with torch.no_grad():
        for length in lengths:
            args = _block_args(length, dtype)
            _check(compiled(*args), model(*args), dtype)


def _failed_compiles(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "fails to compile" in r.getMessage()]


@pytest.mark.parametrize("dtype", [BF16, F32], ids=["bf16", "f32"])
def test_block_is_one_kernel_with_core0_phases(dtype, caplog):
    torch.manual_seed(0)
    model = Block(dtype)
    compiled = torch.compile(model, backend="legato", options={"legato.strict": True})
    caplog.set_level(logging.WARNING, logger="legato.torch")
    _run_against_eager(compiled, model, dtype, (7, 8, 40))
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (mod,) = wrapper.last_wrapper().kernel_modules()
    # the norm and the q/k/v projections before the attention, the output projection and the
    # residual add after it: two core-0 phases around the all-core attention
    assert mod.gen.spmd and mod.gen.source.count("# core 0") == 2, mod.gen.source
    assert mod.kernel.compile_count == 1
    # the projections' t(W) are prepared once per parameter version (laid out by the kernel
    # module), not transposed in the kernel
    assert mod.layout_count > 0
    assert not _failed_compiles(caplog)


def test_block_follows_a_weight_update():
    """A prepared weight a core-0 phase reads is prepared again when the parameter changes."""
    torch.manual_seed(1)
    model = Block(F32)
    compiled = torch.compile(model, backend="legato")
    _run_against_eager(compiled, model, F32)
    with torch.no_grad():
        model.o.weight.mul_(-2.0)
    _run_against_eager(compiled, model, F32, (9,))
    assert lt.last_summary().num_kernels == 1, str(lt.last_summary())


def test_without_chains_every_segment_is_a_kernel():
    """`legato.fuse_chains: False`: a single-core kernel for each segment and one for the
    attention (what the chain saves), with the same results."""
    torch.manual_seed(0)
    model = Block(BF16)
    compiled = torch.compile(model, backend="legato", options={"legato.fuse_chains": False})
    _run_against_eager(compiled, model, BF16)
    assert lt.last_summary().num_kernels == 3, str(lt.last_summary())


def test_a_segment_over_one_cores_memory_is_a_kernel_of_its_own(monkeypatch):
    """The budget: a segment whose values and inputs do not fit one core's sram is not a core-0
    phase (simulated: its count says so); it is a single-core kernel between the chain's."""
    monkeypatch.setattr(chip_serial, "onchip_bytes", lambda inputs, steps, bound: (1 << 40, 0))
    torch.manual_seed(0)
    model = Block(BF16)
    compiled = torch.compile(model, backend="legato")
    _run_against_eager(compiled, model, BF16)
    assert lt.last_summary().num_kernels == 3, str(lt.last_summary())


def _decode_step(name, dtype, target):
    """The dynamic decode graph (DynamicCache, a runtime KV length) of a tiny HF model: the
    logits of its second call, and eager's."""
    import copy

    model, ids = build(name, dtype)
    opts = {"legato.device": target, "legato.strict": True}
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
        longer = copy.deepcopy(cache)
        model(torch.tensor([[5]]), past_key_values=longer, use_cache=True)
        g = torch.compile(model, backend="legato", options=opts)
        g(torch.tensor([[5]]), past_key_values=copy.deepcopy(cache), use_cache=True)  # static
        for _ in range(2):  # the dynamic graph, compiled, then called again
            got = g(torch.tensor([[7]]), past_key_values=copy.deepcopy(longer), use_cache=True)
        ref = model(torch.tensor([[7]]), past_key_values=copy.deepcopy(longer), use_cache=True)
    return got.logits, ref.logits


# kernels of one dynamic decode step of the tiny 2-layer configs (before core-0 phases: 5)
DECODE_KERNELS = 1


@pytest.mark.parametrize(
    ("dtype", "target"),
    [(BF16, "bertha"), (F32, "bertha"), (BF16, "bertha-evt1")],
    ids=["bf16", "f32", "bf16-evt1"],
)
def test_tiny_llama_decode_step_is_one_kernel(dtype, target, caplog):
    caplog.set_level(logging.WARNING, logger="legato.torch")
    got, ref = _decode_step("llama", dtype, target)
    assert_matches_eager(got, ref, dtype)
    s = lt.last_summary()
    assert s.num_kernels == DECODE_KERNELS and s.num_extern == 0, str(s)
    assert all(k.calls == 2 and k.eager_calls == 0 for k in s.kernels), str(s)
    # split by the budget, not by a failed compile (f32's prologue with its q/k/v weights once
    # failed and was compiled apart)
    assert not _failed_compiles(caplog)
