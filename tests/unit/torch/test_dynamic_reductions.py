"""Reductions over several dims of a tensor with a dynamic dim (issue 13): when that dim is
kept and the reduced dims are static and adjacent, one kernel serves every length (the reshape
that merges the reduced dims keeps the runtime size); a reduction over the dynamic dim itself,
or over dims around it, reduces one dim at a time. Compared with eager: bf16 exactly (one f32 reduction rounded once, as torch), f32 to a
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


# reductions that take the dynamic dim itself (a sum or amax over it alone is one reduction
# already), or dims around a kept dynamic one: one dim at a time (`aten.reduce_seq`), bf16 sums and means in f32 rounded once, a mean's divisor counted
# on the chip; x is [2, L, 4, 8] with L dynamic
SEQ_CASES = {
    "mean_dynamic_dim": lambda x: (x * 2).mean(1, keepdim=True),
    "sum_dynamic_and_static": lambda x: (x * 2).sum((1, 2)),
    "mean_dynamic_and_static": lambda x: (x * 2).mean((1, 3)),
    "sum_around_kept_dynamic": lambda x: (x * 2).sum((0, 2, 3)),
    "mean_around_kept_dynamic": lambda x: (x * 2).mean((0, 3), keepdim=True),
    "amax_around_kept_dynamic": lambda x: torch.amax(x * 2, (0, 3)),
    "amin_dynamic_and_static": lambda x: torch.amin(x * 2, (1, 3)),
    "sum_all": lambda x: (x * 2).sum(),
    "mean_all": lambda x: (x * 2).mean(),
}


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(SEQ_CASES))
def test_reductions_over_the_dynamic_dim_or_around_it_run_on_legato(name, dn):
    f, dtype = SEQ_CASES[name], DTYPES[dn]
    g = torch.compile(f, backend="legato", options={"legato.strict": True})
    torch.manual_seed(0)
    with torch.no_grad():
        for length in (5, 7, 9, 3):  # the second makes the length dynamic
            x = torch.randn(2, length, 4, 8, dtype=dtype)
            y, ref = g(x), f(x)
            assert y.shape == ref.shape and y.dtype == ref.dtype
            if dtype == torch.bfloat16:  # one rounding of an f32 result summed in another order
                torch.testing.assert_close(y, ref, rtol=2**-8, atol=1e-6)
            else:
                torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    assert "one dim at a time" in str(s), str(s)
    assert all(k.calls == 3 and k.eager_calls == 0 for k in s.kernels), str(s)


def test_a_dim_past_the_dynamic_one_with_kept_dims_after_it_runs_eagerly():
    """x.sum((0, 2)) of [2, L, 4, 8]: dim 2 would be moved last past dim 3 with the dynamic L
    before it, which the compiler does not do: refused by the resolver, with the reason."""
    f = lambda x: (x * 2).sum((0, 2))  # noqa: E731 - a test case
    g = torch.compile(f, backend="legato")
    with torch.no_grad():
        for length in (5, 7):
            x = torch.randn(2, length, 4, 8)
            torch.testing.assert_close(g(x), f(x), rtol=1e-5, atol=1e-5)
    s = lt.last_summary()
    (e,) = s.extern
    assert "past a dynamic dim" in e.reason, str(s)


def test_softmax_over_a_dynamic_dim_runs_eagerly():
    """Refused by its resolver (the compiler broadcasts along static dims), not a kernel that
    then fails to compile."""
    f = lambda x: torch.softmax(x * 2, 1)  # noqa: E731 - a test case
    g = torch.compile(f, backend="legato")
    with torch.no_grad():
        for length in (5, 7):
            x = torch.randn(2, length, 8)
            torch.testing.assert_close(g(x), f(x), rtol=1e-5, atol=1e-6)
    s = lt.last_summary()
    (e,) = s.extern
    assert "softmax over a dynamic dim" in e.reason, str(s)
