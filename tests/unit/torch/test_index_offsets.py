"""int64 index work on Legato (issue 13): OPT's learned positions `embedding(W, p + 2)` as a
gather of row p + 2 (`legato.tensor.gather(..., offset=2)`, the add on the scalar unit in 64
bits, as torch's int64 add), the float -> int64 cast before it, and gathers of huge int64
indices (whose row address once wrapped back into the table: 2^57 * 128 bytes = 0 mod 2^64)."""

import pytest
import torch

import legato
import legato.torch as lt
from legato.torch.library.composite import EMBEDDING_OFFSET

I64_MAX, I64_MIN = (1 << 63) - 1, -(1 << 63)


def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="legato", dynamic=False)


def _kernel_nodes(s):
    return {str(n.split(": ")[1].split(" ->")[0]) for k in s.kernels for n in k.nodes}


def test_positions_plus_two_gather_row_p_plus_two_for_every_int64_value():
    """The same rows as eager for p in [-2, n - 2) (p = -1, OPT's padding, reads row 1), and
    torch's IndexError (the kernel faults, the call reruns eagerly) for every p whose p + 2 is
    outside the table, including those whose int64 add wraps (I64_MAX - 1 + 2 < 0) and huge
    ones (an unclamped 2^57 * 128-byte row address is 0 mod 2^64: row 0)."""

    def f(w, p):
        return torch.nn.functional.embedding(p + 2, w) * 2.0

    w = torch.randn(16, 32)
    g = _compiled(f)
    p = torch.tensor([-2, -1, 0, 5, 13])
    assert torch.equal(g(w, p), f(w, p))
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    assert str(EMBEDDING_OFFSET) in _kernel_nodes(s), str(s)
    assert "row index + 2" in str(s)
    for bad in (14, -3, 1 << 57, (1 << 57) - 2, I64_MAX - 1, I64_MAX, I64_MIN, 1 << 62):
        with pytest.raises(IndexError):
            f(w, torch.tensor([0, bad, 1]))
        with pytest.raises(IndexError):
            g(w, torch.tensor([0, bad, 1]))
        k = lt.last_summary().kernels[0]
        assert "out of bounds" in (k.eager_reason or ""), (bad, k.eager_reason)


def test_positions_past_2_24_are_exact():
    """A table of 2^24 + 8 rows: rows 2^24 + 1 .. 2^24 + 3 are gathered exactly (an f32 add
    would round 2^24 + 1 to 2^24)."""
    n = (1 << 24) + 8

    def f(w, p):
        return torch.nn.functional.embedding(p + 2, w) * 1.0

    w = torch.randn(n, 1, generator=torch.Generator().manual_seed(0))
    p = torch.tensor([(1 << 24) - 1, 1 << 24, (1 << 24) + 1, -2, 5])
    got = _compiled(f)(w, p)
    assert torch.equal(got, f(w, p))
    assert lt.last_summary().num_extern == 0
    assert len(set(w[(1 << 24) : (1 << 24) + 4, 0].tolist())) == 4  # neighbouring rows differ
    picked = torch.tensor([(1 << 24) + 1, (1 << 24) + 2, (1 << 24) + 3, 0, 7])
    assert torch.equal(got, w[picked])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_opt_positions_run_in_the_models_kernel(dtype):
    """OPT's positions: cumsum of a mask, `(cumsum * mask - 1).long()`, `+ 2`, an embedding;
    one kernel, no extern node, eager's values (f32 and bf16)."""
    torch.manual_seed(0)
    table = torch.randn(34, 16).to(dtype)
    tok = torch.randn(128, 16).to(dtype)

    def f(ids, mask):
        pos = (torch.cumsum(mask, dim=1) * mask - 1).long()
        return torch.nn.functional.embedding(ids, tok) + torch.nn.functional.embedding(
            pos + 2, table
        )

    ids = torch.randint(0, 128, (1, 8))
    for mask in (torch.ones(1, 8), torch.tensor([[0.0, 0, 1, 1, 1, 1, 1, 1]])):  # left padding
        mask = mask.to(dtype)
        got = _compiled(f)(ids, mask)
        assert torch.equal(got, f(ids, mask))
        s = lt.last_summary()
        assert s.num_kernels == 1 and s.num_extern == 0, str(s)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_float_to_int64_matches_torchs_cpu_cast(dtype):
    """Truncated toward zero; NaN, +-inf and values outside int64 give INT64_MIN, as torch's
    CPU kernel (x86's cvttss2si) does."""
    x = torch.tensor(
        [0.0, -0.0, 1.9, -1.9, 2.5, -2.5, 1e6 + 0.5, 2.0**40, -(2.0**62), 2.0**63, -(2.0**63)]
        + [1e20, -1e20, float("inf"), float("-inf"), float("nan"), 3.0e38, -3.0e38]
    ).to(dtype)

    def f(x):
        return (x * 1.0).long()

    got = _compiled(f)(x)
    assert got.dtype == torch.int64
    assert torch.equal(got, f(x)), (got.tolist(), f(x).tolist())
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)


def test_the_fold_adds_offsets_and_keeps_an_add_that_others_read():
    """`p + 3 - 1` folds to one offset of 2; an add that another node also reads stays (its
    other reader still gets p + 3)."""

    def f(w, p):
        q = p + 3
        return torch.nn.functional.embedding(q - 1, w) * 1.0, q

    w = torch.randn(16, 8)
    p = torch.tensor([-2, 0, 13])
    got, q = _compiled(f)(w, p)
    want, wq = f(w, p)
    assert torch.equal(got, want) and torch.equal(q, wq)
    assert "row index + 2" in str(lt.last_summary())


def _i64(shape):
    return legato.get_model().tensor_type(legato.types.i64, shape, "shared_dram")


def _f32(shape):
    return legato.get_model().tensor_type(legato.types.float("float32"), shape, "shared_dram")


@legato.compile
def gather_offset(table: _f32([8, 4]), ids: _i64([3]), out: _f32([3, 4])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        i = legato.tensor.load(ids, "sram")
        legato.tensor.memcpy(out, legato.tensor.gather(table, i, offset=-3))  # OFFSET


@pytest.mark.parametrize("level", ["emulator", "backend", "core", "legato"])
def test_a_gather_offset_at_every_level(level):
    """`gather(table, i, offset=-3)` reads row i - 3 at every level; i - 3 outside [0, 8)
    (including an int64 wrap: I64_MIN - 3) stops the kernel."""
    from legato.interp.errors import InterpError
    from legato.targets.bertha.emulator import OutOfBoundsError

    def run(*ts):
        if level == "emulator":
            return gather_offset(*ts)
        return gather_offset.interpret(*ts, level=level)

    table = torch.randn(8, 4)
    out = torch.zeros(3, 4)
    run(table, torch.tensor([3, 10, 5]), out)
    assert torch.equal(out, table[[0, 7, 2]])
    for bad in (2, 11, I64_MIN, I64_MIN + 2, I64_MAX):
        with pytest.raises((OutOfBoundsError, InterpError)):
            run(table, torch.tensor([3, bad, 4]), torch.zeros(3, 4))


BROADCAST_CASES = {
    "x[i[:, None], j]": (lambda x, i, j: x[i[:, None], j] * 2, [5, 0, -2], [4, 3, 0, -1, 2]),
    "x[:, i[:, None], j]": (lambda x, i, j: x[:, i[:, None], j] * 2, [4, 0], [3, 1, -4]),
    "x[i[:, None], :, j]": (lambda x, i, j: x[i[:, None], :, j] + 1, [1, 5], [0, 3, 2]),
    "x[i, j[:, None]] (1 against 3)": (lambda x, i, j: x[i, j[:, None]] * 2, [3], [0, 4, 1]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("case", list(BROADCAST_CASES))
def test_index_tensors_that_broadcast_run_on_legato(case, dtype):
    """Index tensors that broadcast against each other are repeated to one shape on chip, then
    gathered: eager's values (negative indices wrap), one kernel, and an index past its dim
    still raises torch's IndexError."""
    f, i, j = BROADCAST_CASES[case]
    i, j = torch.tensor(i), torch.tensor(j)
    x = torch.randn(6, 5, 4, generator=torch.Generator().manual_seed(0)).to(dtype)
    g = _compiled(f)
    assert torch.equal(g(x, i, j), f(x, i, j))
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    assert "broadcast" in str(s), str(s)
    assert all(k.eager_calls == 0 for k in s.kernels), str(s)
    bad = j.clone()
    bad[-1] = 9  # past every dim of x
    with pytest.raises(IndexError):
        f(x, i, bad)
    with pytest.raises(IndexError):
        g(x, i, bad)
