"""A static row count whose x does not fit one core's sram and that the prefill form
(`linear_rows_cols`: bf16, N in <= 128 columns per core, M in whole row pieces) does not take
runs in equal chunks of rows (`chip_linear.linear_chunks`, issue 14 item 2: a projection
larger than the chip's on-chip memory is streamed, never refused). Before, these ran eagerly:
f32 at many rows ("the chip-scale prefill form is bf16 only") and N = 4640 on 32 cores ("does
not split in <= 128 columns per core"). Results match eager; every core executes
instructions."""

import pytest
import torch

import legato.torch as lt
from legato.torch import wrapper
from legato.torch.library import chip_linear
from tests.unit.torch.torch_backend_helpers import assert_close_bf16


@pytest.mark.parametrize(
    "dtype, m, k, n, rows",
    [
        (torch.float32, 1024, 256, 512, 128),  # f32: no prefill form
        (torch.bfloat16, 1024, 512, 4640, 256),  # 145 columns per core: no prefill form
        (torch.float32, 600, 256, 512, 150),  # chunks of a divisor of M
    ],
)
def test_static_rows_past_sram_run_in_chunks(dtype, m, k, n, rows):
    torch.manual_seed(0)
    lin = torch.nn.Linear(k, n, bias=True).to(dtype)
    x = torch.randn(m, k, dtype=dtype)
    with torch.no_grad():
        y = torch.compile(lin, backend="legato", options={"legato.strict": True})(x)
        ref = lin(x)
    if dtype == torch.bfloat16:
        assert_close_bf16(y, ref)
    else:
        # (f32 on the MPU: bf16 pieces, f32 accumulation; as test_chip_fusion's f32 check)
        torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    assert "linear_chunks(" in str(s) and f"rows={rows})" in str(s), str(s)
    assert m * k * x.element_size() > 2 * 1024 * 1024 // 4  # past the decode form's share
    assert rows <= chip_linear.max_decode_rows(k, x.element_size(), 2 * 1024 * 1024)
    (mod,) = wrapper.last_wrapper().kernel_modules()
    cores = {q: v for q, v in mod.kernel.last_run.instructions.items() if q.startswith("core")}
    assert len(cores) == 32 and all(v > 0 for v in cores.values()), cores
