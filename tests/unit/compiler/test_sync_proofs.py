"""Compile-time proofs of missing synchronisation name both source lines (issue 18 item 4):
the wait that would block forever (the error's location) and the last post or send that could
have released it (in the message). Counts in loops are left to the emulator, and the waits so
left are logged with their lines."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import legato
from legato.model import bertha
from legato.model.ir import attach_model

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


def test_straight_line_waits_are_all_settled(caplog):
    """Without a branch every count is proven: nothing is left to the emulator, nothing logged."""
    from legato.compiler import lower_to_backend, verify_sync
    from legato.dialects import backend as be

    module = enough_posts.emit_module()
    attach_model(module, enough_posts.model)
    lower_to_backend(module, enough_posts.model)
    (kernel,) = [op for op in module.walk() if isinstance(op, be.KernelOp)]
    with caplog.at_level("INFO", logger="legato.sync"):
        assert verify_sync(kernel, enough_posts.model) == []
    assert not caplog.records


def test_waits_on_runtime_addressed_sends_are_reported_with_their_lines(caplog):
    """A send to a core computed at run time makes a queue's counts dynamic: its waits are not
    proven, and the user is told which ones (kernel, wait, source line, why) instead of the
    proof passing silently."""
    from legato.compiler import lower_to_backend, verify_sync
    from legato.dialects import backend as be
    from tests.corpus import runtime_kernels
    from tests.corpus.runtime_kernels import spmd_ring

    module = spmd_ring.emit_module()
    attach_model(module, spmd_ring.model)
    lower_to_backend(module, spmd_ring.model)
    (kernel,) = [op for op in module.walk() if isinstance(op, be.KernelOp)]
    with caplog.at_level("INFO", logger="legato.sync"):
        unsettled = verify_sync(kernel, spmd_ring.model)
    assert len(unsettled) == 2  # the two receives
    assert all(isinstance(u.op, be.QwaitOp) for u in unsettled)
    assert all("names its core in a register" in u.reason for u in unsettled)
    src = runtime_kernels.__file__
    load = _line(spmd_ring, "receive_type(")
    lines = [be.source_line(u.op) for u in unsettled]
    assert any(line.endswith(f":{load}") for line in lines), lines
    (record,) = caplog.records
    msg = record.getMessage()
    assert msg.startswith(f"kernel {kernel.sym_name.data}: {len(unsettled)} wait(s) not proven")
    assert f"{src}:{load}" in msg
