"""`kernel.interpret` is bounded in wall-clock time like a call (issue 17, item 5; found by the
audit: the interpreters had only an op budget, so a loop of large ops ran for hours): the
session's `time_limit`, else `$LEGATO_TIME_LIMIT`, else the default, checked between ops, ends
in a `TimeLimitExceeded` (a LegatoError) naming the limit and the op it reached."""

from __future__ import annotations

import inspect
import time

import numpy as np
import pytest

import legato
from legato.errors import LegatoError
from legato.interp.errors import TimeLimitExceeded
from tests.corpus.one_core import f32, one_core

HERE = inspect.getsourcefile(inspect.currentframe())  # type: ignore[arg-type]
ITERATIONS = 600


def tt(shape):
    return legato.get_model().tensor_type(f32, shape, "shared_dram")


@legato.compile(backend=one_core)
def long_loop(a: tt([4, 32]), out: tt([4, 32])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        x = legato.tensor.load(a, "sram")
        for _ in range(ITERATIONS):
            x = x + 1.0  # the loop's op
        legato.tensor.memcpy(out, x)


LINE = next(i for i, s in enumerate(open(HERE).read().splitlines(), 1) if "# the loop's op" in s)


def _args():
    a = np.zeros((4, 32), np.float32)
    return a, np.zeros_like(a)


@pytest.mark.parametrize("level", ["legato", "core"])
def test_a_session_time_limit_stops_interpret_at_the_op_it_reached(level):
    start = time.monotonic()
    with legato.session(time_limit=0.01), pytest.raises(TimeLimitExceeded) as ei:
        long_loop.interpret(*_args(), level=level)
    assert time.monotonic() - start < 60
    e = ei.value
    assert isinstance(e, LegatoError)
    assert "wall-clock limit of 0.01 s exceeded after" in str(e)
    assert f"{HERE}:{LINE}:" in str(e)


def test_the_environment_bounds_interpret_and_0_is_unbounded(monkeypatch):
    monkeypatch.setenv("LEGATO_TIME_LIMIT", "0.01")
    with pytest.raises(TimeLimitExceeded, match="limit of 0.01 s"):
        long_loop.interpret(*_args())
    a, out = _args()
    with legato.session(time_limit=0):  # the session's option wins: unbounded
        long_loop.interpret(a, out)
    np.testing.assert_array_equal(out, np.full_like(a, ITERATIONS))
