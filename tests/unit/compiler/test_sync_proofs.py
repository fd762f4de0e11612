"""Compile-time proofs of missing synchronisation name both source lines (issue 18 item 4):
the wait that would block forever (the error's location) and the last post or send that could
have released it (in the message). Counts in loops are left to the emulator."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import legato
from legato.model import bertha

F32 = legato.types.float("float32")


@legato.compile(backend=bertha)
def short_of_posts(x: legato.get_model().tensor_type(F32, [1, 8], "shared_dram")):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.sync.signal(device.get_core(0), 0, 1)
    with device.get_core(0):
        legato.sync.wait(0, 2)


@legato.compile(backend=bertha)
def enough_posts(x: legato.get_model().tensor_type(F32, [1, 8], "shared_dram")):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.sync.signal(device.get_core(0), 0, 1)
        legato.sync.signal(device.get_core(0), 0, 1)
    with device.get_core(0):
        legato.sync.wait(0, 2)


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, t in enumerate(lines) if text in t)


def test_a_wait_without_enough_posts_names_both_lines():
    with pytest.raises(legato.CompileError) as e:
        short_of_posts.compile()
    msg = str(e.value)
    post, wait = _line(short_of_posts, "sync.signal("), _line(short_of_posts, "sync.wait(")
    assert msg.startswith(f"{__file__}:{wait}:")  # the error is at the wait
    assert f"posts semaphore 0 only 1 time(s), the last post at {__file__}:{post}" in msg
    assert f"waits for it 2 time(s), the last wait at {__file__}:{wait}" in msg


def test_enough_posts_compile_and_run():
    enough_posts(np.zeros((1, 8), np.float32))
    assert enough_posts.last_run.cycles > 0
