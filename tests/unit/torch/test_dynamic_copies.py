"""Strided and broadcast copies over a runtime token count through torch.compile (issue 16
item 2's SiluAndMul and rotary shapes): the column halves of a [T, 2D] activation and a
[T, 1, D] -> [T, H, D] broadcast compile to one Legato kernel for every T within the bound
(no eager node) and match eager."""

import pytest
import torch

import legato.torch as lt


def _silu_and_mul(x):
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d]) * x[..., d:]


def _rotary_mul(q, cos):
    return q * cos.unsqueeze(1) + q


@pytest.mark.parametrize(
    ("fn", "make"),
    [
        (_silu_and_mul, lambda t: (torch.randn(t, 256),)),
        (_rotary_mul, lambda t: (torch.randn(t, 4, 32), torch.randn(t, 32))),
    ],
)
def test_runtime_rows(fn, make):
    torch.manual_seed(0)
    g = torch.compile(
        fn, backend="legato", options={"legato.device": "bertha", "legato.strict": True}
    )
    for t in (3, 16, 6):
        args = make(t)
        for a in args:
            lt.mark_dynamic(a, 0, max=16)
        torch.testing.assert_close(g(*args), fn(*args), rtol=1e-5, atol=1e-6)
        s = lt.last_summary()
        assert s.num_extern == 0 and s.num_kernels == 1, str(s)
