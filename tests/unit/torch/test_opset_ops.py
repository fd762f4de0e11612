"""The op table's rows added for the torch work run on Legato through torch.compile: erf, log1p
and tanh-approximated gelu (aten resolvers), matching eager in bf16."""

import torch
import torch.nn.functional as F
from torch_backend_helpers import assert_close_bf16

import legato.torch as lt


def test_new_unary_ops_are_one_kernel_and_match_eager():
    torch.manual_seed(0)
    x = torch.randn(8, 64, dtype=torch.bfloat16)

    def f(x):
        return torch.log1p(x * x) + torch.erf(x) + F.gelu(x, approximate="tanh")

    compiled = torch.compile(f, backend="legato")
    with torch.no_grad():
        y, ref = compiled(x), f(x)
    assert_close_bf16(y, ref, ulps=4)
    s = lt.last_summary()
    assert (s.num_kernels, s.num_extern) == (1, 0), str(s)
