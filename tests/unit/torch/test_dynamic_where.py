"""A `where` / `masked_fill` whose broadcast condition has a dynamic dim (issue 13: HF's causal
mask [B, 1, S, T] against the scores [B, H, S, T] in a dynamic graph). `legato.tensor.full`
takes static shapes, so the 1.0 / 0.0 mask is made from zeros filled flat at the bound and
viewed at the runtime element count; one kernel serves every length. Compared with eager
exactly (a select moves bits)."""

import pytest
import torch

import legato.torch as lt

CASES = {
    # name: (fn, condition shape, operand shape) for a length L
    "where_scalar_other": (
        lambda x, m: torch.where(m, x * 2, -1.5),
        lambda n: (1, 1, 4, n),
        lambda n: (2, 3, 4, n),
    ),
    "where_lower_rank": (
        lambda x, m: torch.where(m, x * 2, x),
        lambda n: (4, n),
        lambda n: (2, 3, 4, n),
    ),
    "where_decode_row": (
        lambda x, m: torch.where(m, x * 2, x),
        lambda n: (1, 1, 1, n),
        lambda n: (1, 4, 1, n),
    ),
    "masked_fill_inf": (
        lambda x, m: (x * 2).masked_fill(m, float("-inf")),
        lambda n: (1, n, 1),
        lambda n: (2, n, 8),
    ),
    "masked_fill_leading_dynamic": (
        lambda x, m: (x + 1).masked_fill(m, 0.25),
        lambda n: (n, 1),
        lambda n: (n, 8),
    ),
}
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_broadcast_condition_runs_on_legato(name, dn):
    f, cshape, xshape = CASES[name]
    dtype = DTYPES[dn]
    g = torch.compile(f, backend="legato", options={"legato.strict": True})
    torch.manual_seed(0)
    with torch.no_grad():
        for n in (5, 7, 9):  # the second makes the length dynamic
            x = torch.randn(*xshape(n), dtype=dtype)
            m = torch.rand(*cshape(n)) > 0.5
            y, ref = g(x, m), f(x, m)
            assert torch.equal(y, ref), (n, (y != ref).sum())
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    assert "broadcast to" in str(s), str(s)
    assert all(k.calls == 2 and k.eager_calls == 0 for k in s.kernels), str(s)


def test_two_dynamic_dims_in_a_broadcast_condition_run_eagerly():
    f = lambda x, m: torch.where(m, x, 0.5)  # noqa: E731 - a test case
    g = torch.compile(f, backend="legato")
    with torch.no_grad():
        for n in (5, 7):
            x = torch.randn(2, n, n)
            m = torch.rand(1, n, n) > 0.5
            assert torch.equal(g(x, m), f(x, m))
    s = lt.last_summary()
    assert any("several dynamic dims" in e.reason for e in s.extern), str(s)


@pytest.mark.parametrize(
    ("cshape", "xshape", "why"),
    [
        ((1, "n"), ("n", "n"), "broadcast along a dynamic dim"),
        ((2, 1, "n"), (2, 3, "n"), "broadcast between its dims"),
    ],
)
def test_dynamic_conditions_the_compiler_does_not_broadcast_are_refused(cshape, xshape, why):
    """Refused by the resolver with the reason, not a kernel that then fails to compile."""
    f = lambda x, m: x.masked_fill(m, 0.5)  # noqa: E731 - a test case
    g = torch.compile(f, backend="legato")
    with torch.no_grad():
        for n in (5, 7):
            x = torch.randn(*(n if d == "n" else d for d in xshape))
            m = torch.rand(*(n if d == "n" else d for d in cshape)) > 0.5
            assert torch.equal(g(x, m), f(x, m))
    s = lt.last_summary()
    assert any(why in e.reason and "resolver refused" in e.reason for e in s.extern), str(s)
    assert not any("kernel failed" in e.reason for e in s.extern), str(s)
