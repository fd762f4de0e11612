"""Runtime-size views (`scratch[0:m]`: a slice of a static dim whose size is a runtime value, a
dynamic dim bounded by the dim): every level (the legato, core and backend interpreters, the
emulator) against numpy for several m, and an m past the buffer stopping at the user's line
(OutOfBoundsError on the emulator, InterpError in the interpreters)."""

from __future__ import annotations

import numpy as np
import pytest

import legato
from legato.interp.errors import InterpError
from legato.model import bertha
from legato.targets.bertha.emulator import EmulatorFault, OutOfBoundsError

HERE = __file__
f32 = legato.types.float("float32")
bf16 = legato.types.float("bfloat16")
LEVELS = ("legato", "core", "backend", "emulator")


def tt(shape, dtype=f32):
    return legato.get_model().tensor_type(dtype, shape, "shared_dram")


def line_of(marker: str) -> int:
    return next(i for i, t in enumerate(open(HERE).read().splitlines(), 1) if t.endswith(marker))


def run(kernel, args, level):
    if level == "emulator":
        kernel(*args)
    else:
        kernel.interpret(*args, level=level)


@legato.compile(backend=bertha)
def scratch_rows(
    x: tt(((-1, 16), 32)), s: tt([18, 64]), out: tt(((-1, 16), 32)), acc_out: tt(((-1, 16), 32))
):
    """s[0:m, 0:32] = 2x, s[2:2+m, 32:64] = x + 1 (a runtime size past a static start);
    out = s[0:m, 0:32] + ones[0:m] (a view of a core buffer); acc_out = x added m times,
    carried around a runtime loop from a runtime-row view of a static zero. (s[2:2+m] of a
    [16, 64] would be refused at compile time: its bound, 14, is below x's 16.)"""
    device = legato.get_context().get_device()
    with device.get_core(0):
        m = x.size(0)
        a = legato.tensor.load(x)
        legato.tensor.memcpy(s[0:m, 0:32], a * 2.0)
        legato.tensor.memcpy(s[2 : 2 + m, 32:64], a + 1.0)
        ones = legato.tensor.full((16, 32), 1.0, f32)
        legato.tensor.memcpy(out, legato.tensor.load(s[0:m, 0:32]) + ones[0:m, :])
        zero = legato.tensor.full((16, 32), 0.0, f32)
        acc = zero[0:m, :]
        for _ in range(m):
            acc = acc + a
        legato.tensor.memcpy(acc_out, acc)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("m", [1, 5, 14])
def test_a_runtime_row_view_of_a_bound_sized_buffer(level, m):
    rng = np.random.default_rng(m)
    x = rng.standard_normal((m, 32)).astype(np.float32)
    s = np.full((18, 64), 7.0, np.float32)
    out, acc = np.zeros((m, 32), np.float32), np.zeros((m, 32), np.float32)
    run(scratch_rows, (x, s, out, acc), level)
    want = np.full((18, 64), 7.0, np.float32)
    want[0:m, 0:32] = x * 2
    want[2 : 2 + m, 32:64] = x + 1
    assert np.array_equal(s, want)  # only the view's rows were written
    assert np.array_equal(out, x * 2 + 1)
    ref = np.zeros((m, 32), np.float32)
    for _ in range(m):
        ref = ref + x
    assert np.array_equal(acc, ref)


@legato.compile(backend=bertha)
def mm_partials(x: tt(((-1, 32), 256), bf16), w: tt([256, 64], bf16), part: tt([2, 32, 64])):
    """The f32 products of x and of 2x with w written into runtime-row views part[j, 0:m] of a
    scratch sized at the bound (a split-K partial's shape)."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        m = x.size(0)
        a = legato.tensor.load(x)
        wt = legato.tensor.load(w, "mpu_buffer")
        p = legato.tensor.matmul(a, wt, f32)
        legato.tensor.memcpy(part[0, 0:m, :], p)
        legato.tensor.memcpy(part[1, 0:m, :], p * 2.0)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("m", [3, 32])
def test_matmul_partials_into_runtime_row_views(level, m):
    import ml_dtypes

    rng = np.random.default_rng(m)
    x = rng.standard_normal((m, 256)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((256, 64)).astype(ml_dtypes.bfloat16)
    part = np.zeros((2, 32, 64), np.float32)
    run(mm_partials, (x, w, part), level)
    ref = x.astype(np.float32) @ w.astype(np.float32)
    np.testing.assert_allclose(part[0, :m], ref, rtol=1e-5, atol=1e-4)
    assert np.array_equal(part[1, :m], part[0, :m] * 2)
    assert not part[:, m:].any()


@legato.compile(backend=bertha)
def past_the_end(x: tt(((-1, 16), 32)), c: tt(((-1, 4), 1)), s: tt([16, 32]), after: tt([4, 32])):
    """s[c:c+m] = x: inside s while c + m <= 16."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        m = x.size(0)
        o = c.size(0)
        legato.tensor.memcpy(s[o : o + m, :], legato.tensor.load(x))  # PAST


def _past_args(m, c):
    return (
        np.ones((m, 32), np.float32),
        np.zeros((c, 1), np.float32),
        np.zeros((16, 32), np.float32),
        np.full((4, 32), 7.0, np.float32),
    )


@pytest.mark.parametrize("level", LEVELS)
def test_a_view_past_the_buffer_stops_at_the_users_line(level):
    ok = _past_args(14, 2)
    run(past_the_end, ok, level)
    assert ok[2][2:16].all() and not ok[2][:2].any()
    bad = _past_args(15, 2)
    where = f"{HERE}:{line_of('# PAST')}"
    if level == "emulator":
        with pytest.raises(OutOfBoundsError) as ei:
            run(past_the_end, bad, level)
        assert "writes bytes [256, 2176) of argument 's' ([16, 32] f32), which has 2048" in str(
            ei.value
        )
        assert ei.value.source[:2] == (HERE, line_of("# PAST"))
    else:
        with pytest.raises(InterpError, match=r"outside|out of bounds") as ei:
            run(past_the_end, bad, level)
        assert where in str(ei.value)
    assert np.array_equal(bad[3], np.full((4, 32), 7.0, np.float32))  # never reached


@legato.compile(backend=bertha)
def negative(x: tt(((-1, 8), 32)), out: tt([8, 32])):
    """out[0:4-m] = 2 (a negative size for m > 4)."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        m = x.size(0)
        z = legato.tensor.full((8, 32), 1.0, f32)
        legato.tensor.memcpy(out[0 : 4 - m, :], z[0 : 4 - m, :] * 2.0)  # NEG


@pytest.mark.parametrize("level", LEVELS)
def test_a_negative_size_stops_at_the_users_line(level):
    out = np.zeros((8, 32), np.float32)
    run(negative, (np.zeros((3, 32), np.float32), out), level)
    assert np.array_equal(out[0], np.full(32, 2.0)) and not out[1:].any()
    out = np.zeros((8, 32), np.float32)
    run(negative, (np.zeros((4, 32), np.float32), out), level)  # zero rows: nothing written
    assert not out.any()
    expect = EmulatorFault if level == "emulator" else InterpError
    with pytest.raises(expect, match=r"negative|outside") as ei:
        run(negative, (np.zeros((6, 32), np.float32), out), level)
    assert f"{HERE}:{line_of('# NEG')}" in str(ei.value)
