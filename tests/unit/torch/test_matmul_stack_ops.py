"""`stack` (a concat of unsqueezed operands), `addmm` with alpha/beta and `baddbmm` run on
Legato in strict mode and match eager torch, in bf16 and f32."""

import pytest
import torch
from torch_backend_helpers import assert_close_bf16, run_case_strict

BF16, F32 = torch.bfloat16, torch.float32


def _r(*shape, dtype):
    return torch.randn(*shape, dtype=dtype)


CASES = {
    "stack_dim0": (
        lambda a, b: torch.stack([a * 2, b + 1]) * 2,
        lambda dt: [_r(4, 32, dtype=dt), _r(4, 32, dtype=dt)],
        "stack",
    ),
    "stack_last": (
        lambda a, b, c: torch.stack([a * 2, b + 1, c], dim=-1) * 2,
        lambda dt: [_r(4, 32, dtype=dt), _r(4, 32, dtype=dt), _r(4, 32, dtype=dt)],
        "stack",
    ),
    "addmm_alpha_beta": (
        lambda b, x, w: torch.addmm(b * 1, x * 1, w, beta=0.5, alpha=2.0) + 1,
        lambda dt: [_r(16, dtype=dt), _r(4, 32, dtype=dt), _r(32, 16, dtype=dt)],
        "addmm",
    ),
    "addmm_beta0": (
        lambda b, x, w: torch.addmm(b * 1, x * 1, w, beta=0.0, alpha=0.25) + 1,
        lambda dt: [_r(4, 16, dtype=dt), _r(4, 32, dtype=dt), _r(32, 16, dtype=dt)],
        "addmm",
    ),
    "baddbmm": (
        lambda b, x, y: torch.baddbmm(b * 1, x * 1, y * 1) + 1,
        lambda dt: [_r(2, 4, 16, dtype=dt), _r(2, 4, 32, dtype=dt), _r(2, 32, 16, dtype=dt)],
        "baddbmm",
    ),
    "baddbmm_alpha_beta_broadcast": (
        lambda b, x, y: torch.baddbmm(b * 1, x * 1, y * 1, beta=-1.5, alpha=0.5) + 1,
        lambda dt: [_r(16, dtype=dt), _r(2, 4, 32, dtype=dt), _r(2, 32, 16, dtype=dt)],
        "baddbmm",
    ),
}


@pytest.mark.parametrize("dtype", [BF16, F32], ids=["bf16", "f32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_on_legato_and_matches_eager(name, dtype):
    y, ref = run_case_strict(CASES, name, dtype, r"aten\.{op}\.default -> legato")
    if dtype == BF16:
        # both compute beta * bias + alpha * (a @ b) in f32 and round once (then the + 1)
        assert_close_bf16(y, ref)
    else:  # f32 matmul as three bf16 passes: ~2^-16 relative
        assert (y - ref).abs().max() <= 1e-4 * ref.abs().max()
