"""Reductions over several dims of a tensor with a dynamic dim (issue 13): when that dim is
kept and the reduced dims are static and adjacent, one kernel serves every length (the reshape
that merges the reduced dims keeps the runtime size); other cases run eagerly with their
reason. Compared with eager: bf16 exactly (one f32 reduction rounded once, as torch), f32 to a
few ulps of the partial sums."""

import pytest
import torch

import legato.torch as lt

CASES = {
    "sum": lambda x: x.sum((2, 3)) * 2,
    "amax_keepdim": lambda x: torch.amax(x * 2, (2, 3), keepdim=True),
    "mean": lambda x: (x * 2).mean((2, 3)),
}
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_kept_dynamic_dim_runs_on_legato(name, dn):
    f, dtype = CASES[name], DTYPES[dn]
    g = torch.compile(f, backend="legato", options={"legato.strict": True})
    torch.manual_seed(0)
    with torch.no_grad():
        for length in (5, 7, 9):  # the second makes the length dynamic
            x = torch.randn(2, length, 4, 8, dtype=dtype)
            y, ref = g(x), f(x)
            if dtype == torch.bfloat16:
                assert torch.equal(y, ref)
            else:
                torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    assert "over dims [2, 3]" in str(s), str(s)
    assert all(k.calls == 2 and k.eager_calls == 0 for k in s.kernels), str(s)


def test_reduced_dims_around_a_dynamic_one_run_eagerly():
    f = lambda x: (x * 2).sum((1, 3))  # noqa: E731 - a test case
    g = torch.compile(f, backend="legato")
    with torch.no_grad():
        for length in (5, 7):
            x = torch.randn(2, length, 4, 8)
            torch.testing.assert_close(g(x), f(x), rtol=1e-5, atol=1e-5)
    s = lt.last_summary()
    (e,) = s.extern
    assert "several dims of a dynamic shape" in e.reason, str(s)
