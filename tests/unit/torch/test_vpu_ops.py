"""Resolvers of the VPU ops the op table added (softplus, clamp / clamp_min / clamp_max,
maximum / minimum, log_softmax): each case runs wholly on Legato in strict mode and matches
eager torch, in bf16 and f32; what the VPU has no instruction for runs eagerly with the reason."""

import pytest
import torch
import torch.nn.functional as F
from torch_backend_helpers import run_case_strict

import legato.torch as lt

BF16, F32 = torch.bfloat16, torch.float32


def _r(*shape, dtype, scale=4.0):
    return torch.randn(*shape, dtype=dtype) * scale


CASES = {
    # softplus: both sides of its threshold (x > 20 gives x)
    "softplus": (lambda x: F.softplus(x * 8) + 1, lambda dt: [_r(4, 64, dtype=dt)], "softplus"),
    "clamp": (
        lambda x: torch.clamp(x * 2, -1.5, 2.0) + 1,
        lambda dt: [_r(4, 64, dtype=dt)],
        "clamp",
    ),
    "clamp_min": (
        lambda x: (x * 2).clamp_min(0.5) + 1,
        lambda dt: [_r(4, 64, dtype=dt)],
        "clamp_min",
    ),
    "clamp_max": (
        lambda x: (x * 2).clamp_max(-0.25) + 1,
        lambda dt: [_r(4, 64, dtype=dt)],
        "clamp_max",
    ),
    "clamp_upper_only": (
        lambda x: (x * 2).clamp(max=-0.25) + 1,
        lambda dt: [_r(4, 64, dtype=dt)],
        "clamp",
    ),
    "maximum": (
        lambda a, b: torch.maximum(a * 2, b) + 1,
        lambda dt: [_r(4, 64, dtype=dt), _r(4, 64, dtype=dt)],
        "maximum",
    ),
    "minimum_broadcast": (
        lambda a, b: torch.minimum(a * 2, b) + 1,
        lambda dt: [_r(4, 64, dtype=dt), _r(64, dtype=dt)],
        "minimum",
    ),
    "log_softmax_last": (
        lambda x: F.log_softmax(x * 2, dim=-1) + 1,
        lambda dt: [_r(4, 64, dtype=dt)],
        "_log_softmax",
    ),
    "log_softmax_dim0": (
        lambda x: F.log_softmax(x * 2, dim=0) * 2,
        lambda dt: [_r(8, 32, dtype=dt)],
        "_log_softmax",
    ),
}


@pytest.mark.parametrize("dtype", [BF16, F32], ids=["bf16", "f32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_on_legato_and_matches_eager(name, dtype):
    y, ref = run_case_strict(CASES, name, dtype, r"aten\.{op}\.\w+ -> legato")
    assert lt.last_summary().num_kernels == 1
    # one bf16 ulp of the largest value (f32: 1e-5 relative)
    tol = (torch.finfo(BF16).eps if dtype == BF16 else 1e-5) * ref.float().abs().max()
    assert (y.float() - ref.float()).abs().max() <= tol


@pytest.mark.parametrize(
    "f, reason",
    [
        (lambda x: F.softplus(x * 2, beta=2.0) + 1, "softplus with beta=2.0"),
        (lambda x: F.softplus(x * 2, threshold=5.0) + 1, "threshold=5.0"),
    ],
    ids=["beta", "threshold"],
)
def test_softplus_variants_the_vpu_lacks_run_eagerly(f, reason):
    x = _r(4, 64, dtype=F32)
    with torch.no_grad():
        y = torch.compile(f, backend="legato")(x)
        ref = f(x)
    s = lt.last_summary()
    assert any(reason in e.reason for e in s.extern), str(s)
    assert torch.allclose(y, ref)
