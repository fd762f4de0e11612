"""Resolvers of `legato.torch.library.composite` (issue 13): clamp with tensor bounds, max / min
values, argmax / argmin and max.dim / min.dim with their int64 indices, cumsum, index_select,
x[idx] and x[i, j] (row gathers), pow(Tensor, Tensor), filled tensors. Each case runs wholly on Legato in
strict mode and matches eager torch in bf16 and f32."""

import inspect

import pytest
import torch
from torch_backend_helpers import assert_close_bf16, run_case_strict

import legato.torch as lt

BF16, F32 = torch.bfloat16, torch.float32
INF, NAN = float("inf"), float("nan")


def _r(*shape, dtype, scale=4.0):
    return torch.randn(*shape, dtype=dtype) * scale


# C's pow special cases (torch's CPU kernel): negative bases with integer / non-integer
# exponents, +-0 with odd and even exponents, +-inf, NaN, x = 1 and y = 0 with NaN operands
POW_X = [-2.0, -2.0, -2.0, 0.0, -0.0, -0.0, 2.0, 1.0, -1.0, -1.0, NAN, -INF, -INF, 0.5, -0.5]
POW_X += [3.0, 0.0, 1.5, 7.0, -3.0]
POW_Y = [3.0, 2.0, 0.5, 0.0, -3.0, 3.0, 2.0, NAN, INF, 0.5, 0.0, 3.0, 0.5, INF, INF]
POW_Y += [-1.5, NAN, 10.0, -4.0, 9.0]

CASES = {
    "clamp_tensors": (
        lambda x, lo, hi: torch.clamp(x * 2, lo, hi) + 1,
        lambda dt: [_r(4, 64, dtype=dt), _r(4, 64, dtype=dt) - 2, _r(64, dtype=dt) + 2],
        "clamp",
    ),
    "clamp_min_tensor": (
        lambda x, lo: torch.clamp(x * 2, min=lo),
        lambda dt: [_r(4, 64, dtype=dt), _r(1, 64, dtype=dt)],
        "clamp",
    ),
    "clamp_max_tensor_broadcasts_x": (  # the result has the bound's shape
        lambda x, hi: torch.clamp_max(x * 2, hi),
        lambda dt: [_r(64, dtype=dt), _r(4, 64, dtype=dt)],
        "clamp_max",
    ),
    "max_dim_values": (
        lambda x: (x * 2).max(dim=1).values + 1,
        lambda dt: [_r(4, 64, dtype=dt)],
        "max",
    ),
    "min_dim_keepdim_values": (
        lambda x: x - (x * 2).min(dim=-1, keepdim=True)[0],
        lambda dt: [_r(4, 64, dtype=dt)],
        "min",
    ),
    "max_all": (lambda x: torch.max(x * 2), lambda dt: [_r(4, 8, dtype=dt)], "max"),
    "min_all": (lambda x: torch.min(x * 2), lambda dt: [_r(4, 8, dtype=dt)], "min"),
    "amin_dim": (lambda x: torch.amin(x * 2, 0), lambda dt: [_r(4, 8, dtype=dt)], "amin"),
    "cumsum_last": (
        lambda x: torch.cumsum(x * 2, -1),
        lambda dt: [_r(4, 37, dtype=dt)],
        "cumsum",
    ),
    "cumsum_first": (
        lambda x: torch.cumsum(x + 1, 0),
        lambda dt: [_r(9, 3, 4, dtype=dt)],
        "cumsum",
    ),
    "index_select_dim1": (
        lambda x, i: torch.index_select(x * 2, 1, i),
        lambda dt: [_r(4, 6, 3, dtype=dt), torch.tensor([5, 0, 0, 2, 4])],
        "index_select",
    ),
    "index_select_rows": (
        lambda x, i: torch.index_select(x * 2, 0, i),
        lambda dt: [_r(7, 16, dtype=dt), torch.tensor([6, 1])],
        "index_select",
    ),
    "index_negative": (  # torch's x[:, idx] wraps a negative index (the gather's `wrap`)
        lambda x, i: (x * 2)[:, i],
        lambda dt: [_r(4, 6, dtype=dt), torch.tensor([-1, 2, -6, 5])],
        "index",
    ),
    "index_rows_2d_index": (
        lambda x, i: (x + 1)[i],
        lambda dt: [_r(5, 3, 4, dtype=dt), torch.tensor([[4, -5], [0, 2]])],
        "index",
    ),
    "index_two_tensors": (  # x[i, j]: the row 6 i + j combined on the scalar unit
        lambda x, i, j: (x * 2)[i, j],
        lambda dt: [
            _r(5, 6, 3, dtype=dt),
            torch.tensor([4, -5, 0, 2]),
            torch.tensor([-1, 5, 0, 3]),
        ],
        "index",
    ),
    "index_two_tensors_inner": (  # x[:, i, j]: the index dims stay where the indexed dims were
        lambda x, i, j: (x + 1)[:, i, j],
        lambda dt: [
            _r(2, 5, 6, 3, dtype=dt),
            torch.tensor([[4, 1], [0, 2]]),
            torch.tensor([[5, 0], [-6, 1]]),
        ],
        "index",
    ),
    "index_two_tensors_apart": (  # x[i, :, j]: not adjacent, the index dims come first
        lambda x, i, j: (x * 2)[i, :, j],
        lambda dt: [_r(5, 3, 6, dtype=dt), torch.tensor([4, 0, 2]), torch.tensor([5, 0, -1])],
        "index",
    ),
    "index_three_tensors": (
        lambda x, i: (x * 2)[i, i, i],
        lambda dt: [_r(4, 4, 4, 2, dtype=dt), torch.tensor([3, 0, -2])],
        "index",
    ),
    "index_arange_and_positions": (  # a classification head's logits[arange(b), last]
        lambda x, j: (x * 2)[torch.arange(x.shape[0]), j],
        lambda dt: [_r(3, 7, 5, dtype=dt), torch.tensor([6, 0, 3])],
        "index",
    ),
    "ones_like_input": (
        lambda x: x + torch.ones(4, 64, dtype=x.dtype),
        lambda dt: [_r(4, 64, dtype=dt)],
        "ones",
    ),
    "full_without_inputs": (  # a kernel with no tensor input
        lambda: torch.full((3, 8), -2.5, dtype=torch.get_default_dtype()) * 2,
        lambda dt: [],
        "full",
    ),
    "new_zeros": (lambda x: x.new_zeros(2, 5) - 1, lambda dt: [_r(3, dtype=dt)], "new_zeros"),
    "pow_tensors": (
        lambda x, y: torch.pow(x * 1, y),
        lambda dt: [torch.tensor(POW_X, dtype=dt), torch.tensor(POW_Y, dtype=dt)],
        "pow",
    ),
    "pow_tensors_broadcast": (
        lambda x, y: torch.pow(x.abs() + 0.1, y),
        lambda dt: [_r(4, 1, dtype=dt, scale=2.0), _r(1, 16, dtype=dt, scale=2.0)],
        "pow",
    ),
}


@pytest.mark.parametrize("dtype", [BF16, F32], ids=["bf16", "f32"])
@pytest.mark.parametrize("name", list(CASES))
def test_composite_op_on_legato_matches_eager(name, dtype):
    y, ref = run_case_strict(CASES, name, dtype, r"aten\.{op}\.")
    if dtype == BF16:
        assert_close_bf16(y, ref)
    else:
        torch.testing.assert_close(y, ref, rtol=2e-6, atol=1e-5, equal_nan=True)
    if name == "pow_tensors":  # the special cases are exact: signs, zeros, infinities, NaN
        exact = ~torch.isfinite(ref) | (ref == 0) | (ref.abs() == 1)
        assert torch.equal(y[exact].isnan(), ref[exact].isnan())
        keep = exact & ~ref.isnan()
        assert torch.equal(y[keep], ref[keep])
        assert torch.equal(torch.signbit(y[keep]), torch.signbit(ref[keep]))


def _ties_and_nans(dt):
    """[5, 300] rows that test torch's first-index rule: a NaN is the maximum (and the
    minimum), ties give the first index, -0.0 equals 0.0; 300 > 256 indices (bf16 holds no
    such integer: the index is computed in f32)."""
    x = _r(5, 300, dtype=dt)
    x[0, [7, 280]] = NAN
    x[1, :] = 1.5
    x[2, [3, 290]] = 99.0
    x[2, [4, 291]] = -99.0
    x[3, 0], x[3, 299] = -0.0, 0.0
    x[3, 1:299] = -1.0
    x[4, 270] = INF
    return x


ARG_CASES = {
    "argmax_dim": (lambda x: torch.argmax(x * 2, 1), "argmax"),
    "argmin_dim0_keepdim": (lambda x: torch.argmin(x * 2, 0, keepdim=True), "argmin"),
    "argmax_all": (lambda x: torch.argmax(x * 2), "argmax"),
    "argmin_all_keepdim": (lambda x: torch.argmin(x, keepdim=True), "argmin"),
    "max_dim": (lambda x: torch.max(x * 2, 1), "max"),
    "min_dim_keepdim": (lambda x: torch.min(x * 2, -1, keepdim=True), "min"),
    "max_dim0_indices": (lambda x: (x * 2).max(0).indices, "max"),
}


@pytest.mark.parametrize("dtype", [BF16, F32], ids=["bf16", "f32"])
@pytest.mark.parametrize("name", list(ARG_CASES))
def test_arg_reductions_on_legato_match_eager_exactly(name, dtype):
    """argmax / argmin and max.dim / min.dim with their int64 indices run on Legato (strict
    mode: nothing extern) and give torch's indices exactly, and its values bit for bit."""
    f, op = ARG_CASES[name]
    x = _ties_and_nans(dtype)
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options={"legato.strict": True})(x)
        ref = f(x)
    s = lt.last_summary()
    assert s.num_extern == 0 and f"aten.{op}." in str(s), str(s)
    ys, refs = (tuple(y), tuple(ref)) if isinstance(ref, tuple) else ((y,), (ref,))
    for a, b in zip(ys, refs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        if b.dtype == torch.int64:
            assert torch.equal(a, b), (a, b)
        else:
            assert torch.equal(a.isnan(), b.isnan())
            assert torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
            num = ~b.isnan()  # a NaN's sign is not meaningful (x * 2 of NaN may flip it)
            assert torch.equal(torch.signbit(a[num]), torch.signbit(b[num]))


@pytest.mark.parametrize("bad", [16, 31, -17])
def test_an_out_of_range_index_into_an_on_chip_table_raises_as_torch(bad):
    """x[idx] with x computed on Legato (an on-chip table): an index outside [-16, 16) is
    never a silent row (a wrap took 16 to row 0): the kernel's bounds check stops it, the call
    reruns eagerly and raises torch's IndexError; strict mode raises the bounds error."""
    from legato.targets.bertha.emulator import OutOfBoundsError

    def f(x, i):
        return (x * 2)[i]

    x = torch.randn(16, 8)
    good = torch.tensor([0, -16, 15])
    torch.testing.assert_close(torch.compile(f, backend="legato")(x, good), f(x, good))
    assert lt.last_summary().num_extern == 0
    i = torch.tensor([0, bad, 2])
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
        torch.compile(f, backend="legato")(x, i)
    torch._dynamo.reset()
    with pytest.raises(OutOfBoundsError, match="out of bounds: reads") as ei:
        torch.compile(f, backend="legato", options={"legato.strict": True})(x, i)
    _names_the_model_line(ei.value, f)


def _names_the_model_line(e, f):
    """The strict-mode error names `f`'s return line (the fx node's stack trace), not only
    the gather's line in composite.py."""
    line = f.__code__.co_firstlineno + 1  # `return ...`
    assert e.user_lines == [f"{__file__}:{line}: {inspect.getsource(f).splitlines()[1].strip()}"]
    assert f"in the model at {__file__}:{line}: return" in str(e), str(e)
    assert "composite.py" in e.source[0]  # the kernel's own line is still named


@pytest.mark.parametrize(("bad_i", "bad_j"), [(1, 6), (0, -7), (5, 0), (-6, 2)])
def test_an_index_past_its_own_dim_in_a_two_index_gather_raises_as_torch(bad_i, bad_j):
    """(x * 2)[i, j] on Legato combines the row 6 i + j: j = 6 with i = 1 is row 12, inside the
    table, and must still be torch's IndexError (default: the call reruns eagerly) or the
    bounds error (strict), never a silent row."""
    from legato.targets.bertha.emulator import OutOfBoundsError

    def f(x, i, j):
        return (x * 2)[i, j]

    x = torch.randn(5, 6, 4)
    i, j = torch.tensor([0, bad_i, 2]), torch.tensor([1, bad_j, 0])
    with pytest.raises(IndexError, match="out of bounds"):
        torch.compile(f, backend="legato")(x, i, j)
    assert lt.last_summary().num_extern == 0
    torch._dynamo.reset()
    with pytest.raises(OutOfBoundsError, match="out of bounds: reads") as ei:
        torch.compile(f, backend="legato", options={"legato.strict": True})(x, i, j)
    _names_the_model_line(ei.value, f)


@pytest.mark.parametrize(
    ("f", "why"),
    [
        # dynamo breaks the graph at a bool mask's data-dependent size (the mask is the graph's
        # output, computed on Legato as a bool); the indexing runs eagerly
        # (index tensors that broadcast run on Legato since: test_index_offsets.py)
        (lambda x, m, i: (x * 2)[m > 0], "gt (bool)"),
    ],
    ids=["bool_mask"],
)
def test_indexing_legato_does_not_take_runs_eagerly_with_the_reason(f, why):
    """A bool mask (a result shape that depends on the values) runs eagerly, with the reason
    in the summary, and gives eager's result: never a crash."""
    x, m, i = torch.randn(6, 6), torch.randn(6, 6), torch.tensor([0, 5, 2])
    with torch.no_grad():
        y = torch.compile(f, backend="legato")(x, m, i)
    torch.testing.assert_close(y, f(x, m, i))
    s = lt.last_summary()
    assert any(why in e.reason for e in s.extern) or why in str(s), s
    assert "aten.index.Tensor" not in str(s.kernels), s


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("args", [(5,), (2, 9), (-1, 2, 2), (10, -3, -3), (-300, 300, 7)])
def test_float_arange_on_legato(dt, args):
    """A float arange with integer start / step runs on Legato, equal to eager bit for bit."""
    import legato.torch as lt

    def f(x):
        return torch.arange(*args, dtype=dt) + x

    x = torch.tensor(0.5, dtype=dt)
    torch._dynamo.reset()
    got = torch.compile(f, backend="legato", dynamic=False)(x)
    s = lt.last_summary()
    assert not s.extern, s.extern
    assert torch.equal(got, f(x))


def test_fractional_arange_runs_eagerly():
    """A fractional step would round differently in f32: it falls back, with the reason."""
    import legato.torch as lt

    def f(x):
        return torch.arange(0.0, 1.0, 0.1) + x

    x = torch.tensor(0.5)
    torch._dynamo.reset()
    got = torch.compile(f, backend="legato", dynamic=False)(x)
    reasons = [e.reason for e in lt.last_summary().extern if "arange" in str(e.op)]
    assert reasons and "fractional" in reasons[0], lt.last_summary().extern
    assert torch.equal(got, f(x))
