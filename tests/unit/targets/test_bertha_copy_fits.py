"""A copy between two runtime sizes is checked at run time (issue 17, item 2's gap, found by
the DSL fuzzer): `memcpy(y, x)` of two sram tiles loaded from arguments of different runtime
lengths used to copy all of `x` into `y`'s planned buffer when `x` was the longer one (inside the
buffer, so no extent caught it), while the interpreters refuse the copy. The compiled code now
stops at the memcpy's line; a copy that fits runs as before, and static copies carry no check."""

from __future__ import annotations

import numpy as np
import pytest

import legato
from legato.interp.errors import InterpError
from legato.model import bertha
from legato.targets.bertha.arch.bounds import FIT_CHECK_CAUSE
from legato.targets.bertha.emulator import OutOfBoundsError

f32 = legato.types.float("float32")


def one_core(ctx):
    return bertha.Bertha(ctx, "bertha", 1, False, 4, 1 << 30)


def tt(shape, memory="shared_dram"):
    return legato.get_model().tensor_type(f32, shape, memory)


@legato.compile(backend=one_core)
def copy_tiles(a: tt([(-1, 16), 8]), b: tt([(-1, 16), 8]), out: tt([(-1, 16), 8])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        x = legato.tensor.load(a, "sram")
        y = legato.tensor.load(b, "sram")
        legato.tensor.memcpy(y, x)  # the copy between two runtime sizes
        legato.tensor.memcpy(out, y)


@legato.compile(backend=one_core)
def copy_static(a: tt([4, 8]), out: tt([4, 8])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(a, "sram"))


LINE = next(
    i
    for i, s in enumerate(open(__file__).read().splitlines(), 1)
    if "legato.tensor.memcpy(y, x)" in s
)


def _args(n_a, n_b):
    a = np.arange(n_a * 8, dtype=np.float32).reshape(n_a, 8)
    return a, np.full((n_b, 8), -1.0, np.float32), np.zeros((n_b, 8), np.float32)


def test_a_source_longer_than_its_destination_stops_at_the_copy():
    with pytest.raises(OutOfBoundsError) as ei:
        copy_tiles(*_args(10, 4))
    e = ei.value
    assert FIT_CHECK_CAUSE in str(e)
    assert e.source is not None and (e.source[0], e.source[1]) == (__file__, LINE)
    # the interpreters refuse it too, each at the same line
    for level in ("backend", "core", "legato"):
        with pytest.raises(InterpError, match=f"{__file__}:{LINE}:"):
            copy_tiles.interpret(*_args(10, 4), level=level)


@pytest.mark.parametrize("n_a, n_b", [(3, 6), (6, 6), (0, 5)])
def test_a_copy_that_fits_agrees_with_the_interpreter(n_a, n_b):
    compiled = _args(n_a, n_b)
    copy_tiles(*compiled)
    interpreted = _args(n_a, n_b)
    copy_tiles.interpret(*interpreted)
    np.testing.assert_array_equal(compiled[2], interpreted[2])
    want = np.full((n_b, 8), -1.0, np.float32)
    want[:n_a] = compiled[0]
    np.testing.assert_array_equal(compiled[2], want)


def test_only_copies_between_runtime_sizes_are_checked():
    x = np.ones((4, 8), np.float32)
    assert "div" not in copy_static.lower("asm", x, np.zeros_like(x))
    a, b, out = _args(3, 6)
    assert "div" in copy_tiles.lower("asm", a, b, out)


@legato.compile(backend=one_core)
def copy_slab(a: tt([(-1, 16), 16]), out: tt([(-1, 16), 16])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        x = legato.tensor.load(a[:, 4:12], "sram")
        legato.tensor.memcpy(out[:, 0:8], x)  # a strided copy between two runtime row counts


SLAB_LINE = next(
    i
    for i, s in enumerate(open(__file__).read().splitlines(), 1)
    if "legato.tensor.memcpy(out[:, 0:8], x)" in s
)


@pytest.mark.parametrize("n_a, n_out", [(3, 6), (5, 5), (1, 16), (0, 4), (0, 0)])
def test_a_strided_copy_of_fewer_rows_fills_the_first_rows_at_every_level(n_a, n_out):
    """Found by the lead after the dynm merge: the compiled code and the core interpreter used
    to refuse a shorter source that the legato level copies into the first rows. A zero-row
    source (0, 4): the emulator used to fault, "access of 0 bytes outside any allocation", on
    the empty load's address (column 4 of a zero-size argument, past its allocation), which the
    interpreters never look up."""
    a = np.arange(n_a * 16, dtype=np.float32).reshape(n_a, 16)
    want = np.zeros((n_out, 16), np.float32)
    want[:n_a, :8] = a[:, 4:12]
    out = np.zeros((n_out, 16), np.float32)
    copy_slab(a, out)
    np.testing.assert_array_equal(out, want)
    for level in ("backend", "core", "legato"):
        got = np.zeros((n_out, 16), np.float32)
        copy_slab.interpret(a, got, level=level)
        np.testing.assert_array_equal(got, want, err_msg=level)


def test_a_strided_copy_of_more_rows_stops_at_the_copy():
    a, out = np.ones((6, 16), np.float32), np.zeros((4, 16), np.float32)
    with pytest.raises(OutOfBoundsError) as ei:
        copy_slab(a, out)
    assert FIT_CHECK_CAUSE in str(ei.value)
    assert ei.value.source is not None and ei.value.source[:2] == (__file__, SLAB_LINE)
    for level in ("backend", "core", "legato"):
        with pytest.raises(InterpError, match=f"{__file__}:{SLAB_LINE}:"):
            copy_slab.interpret(a, np.zeros((4, 16), np.float32), level=level)
