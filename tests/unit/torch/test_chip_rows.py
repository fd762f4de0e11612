"""Row-split all-core kernels (issue 14, `legato.torch.library.chip_rows`): a prefill's norms
and elementwise chains over many rows run on every core, each core a block of rows, with the
same bits as the single-core kernel and within bf16 rounding of eager; small or not row-local
work stays on one core."""

import pytest
import torch

import legato.torch as lt
from legato.torch import wrapper
from legato.torch.library import chip_rows
from tests.unit.torch.torch_backend_helpers import assert_close_bf16

BF16 = torch.bfloat16


class NormGate(torch.nn.Module):
    """Llama's RMSNorm, then SiLU(g) * the normalized rows."""

    def __init__(self, hidden=512):
        super().__init__()
        self.w = torch.nn.Parameter(1 + torch.randn(hidden) / 8)

    def forward(self, x, g):
        xf = x.float()
        h = self.w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)
        return h, torch.nn.functional.silu(g) * h


def _run(mod, *args):
    torch._dynamo.reset()
    with torch.no_grad():
        return torch.compile(mod, backend="legato", options={"legato.strict": True})(*args)


def _core_instructions():
    (k,) = wrapper.last_wrapper().kernel_modules()
    ins = k.kernel.last_run.instructions
    return k, {c: n for c, n in ins.items() if c.startswith("core")}


def test_prefill_rmsnorm_and_gate_split_rows_over_every_core(monkeypatch):
    torch.manual_seed(0)
    mod = NormGate().to(BF16)
    x, g = (torch.randn(1, 256, 512, dtype=BF16) for _ in range(2))
    ys = _run(mod, x, g)
    k, cores = _core_instructions()
    assert k.gen.spmd and "get_all_cores" in k.gen.source
    # 256 rows in blocks of 8: one block per core, the same program on each
    assert len(cores) == 32 and len(set(cores.values())) == 1 and min(cores.values()) > 0, cores
    with torch.no_grad():
        refs = mod(x, g)
    for y, ref in zip(ys, refs, strict=True):
        assert_close_bf16(y, ref)
    split_cycles = k.kernel.last_run.cycles
    # the same partition on one core: the same bits, about ncores times the cycles
    monkeypatch.setattr(chip_rows, "MIN_BYTES", 1 << 60)
    one = _run(mod, x, g)
    k1, cores1 = _core_instructions()
    assert not k1.gen.spmd and sum(1 for n in cores1.values() if n > 0) == 1, cores1
    for a, b in zip(ys, one, strict=True):
        assert torch.equal(a, b)
    assert split_cycles * 4 < k1.kernel.last_run.cycles, (split_cycles, k1.kernel.last_run.cycles)


@pytest.mark.parametrize("dtype", [torch.float32, BF16], ids=["f32", "bf16"])
def test_prefill_layer_norm_splits_rows(dtype):
    torch.manual_seed(1)
    mod = torch.nn.LayerNorm(256).to(dtype)
    x = torch.randn(384, 256, dtype=dtype)
    y = _run(mod, x)
    k, cores = _core_instructions()
    # 384 rows in blocks of 12 (a divisor of 384, 32 blocks): every core one block
    assert k.gen.spmd and len(cores) == 32 and min(cores.values()) > 0, cores
    with torch.no_grad():
        ref = mod(x)
    if dtype == BF16:
        assert_close_bf16(y, ref)
    else:
        torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


def test_small_or_not_row_local_work_stays_on_one_core():
    torch.manual_seed(2)
    mod = NormGate().to(BF16)
    small = [torch.randn(1, 8, 512, dtype=BF16) for _ in range(2)]  # 32 KiB: below MIN_BYTES
    _run(mod, *small)
    k, _ = _core_instructions()
    assert not k.gen.spmd

    # a reduction over the rows (dim 0) mixes rows: not row-local
    def col_norm(x):
        return x / x.sum(0, keepdim=True)

    x = torch.randn(256, 512)
    y = _run(col_norm, x)
    k, _ = _core_instructions()
    assert not k.gen.spmd
    torch.testing.assert_close(y, col_norm(x), rtol=1e-4, atol=1e-4)  # (f32 sums in another order)
    assert lt.last_summary().num_extern == 0
