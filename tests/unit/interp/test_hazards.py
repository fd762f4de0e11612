"""Every interpreter checks hazards (issue 17, item 3): it completes a DMA at issue, but the
checker counts the DMA in flight until a wait orders it, so the compiled IR of a corpus kernel
with one wait removed is reported with both ops' source lines, at the core and the backend
level, whatever order the scheduler happened to run the tasks in. The legato level has value
semantics (a receive *is* its wait), so there the checker sees the arguments' memory: a removed
barrier or semaphore wait is a race on shared DRAM, and a write to the source of a transfer
nobody received yet is one too. Every corpus kernel runs hazard-free at every level in
`test_differential.py` (the check is on by default)."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest

import legato
from legato import interp
from legato.compiler import compile_kernel
from legato.interp.differential import parse_module
from legato.interp.errors import InterpHazardError
from legato.interp.scheduler import DEFAULT_QUANTUM
from legato.targets.bertha.arch.hazards import (
    HazardAccess,
    HazardChecker,
    ReadBeforeTransferError,
    SharedMemoryRaceError,
)
from tests.corpus import runtime_kernels as rk

SOURCE = inspect.getsourcefile(rk)
HERE = inspect.getsourcefile(inspect.currentframe())  # type: ignore[arg-type]


@functools.cache
def _ir(kernel, level: str) -> str:
    if level == "legato":
        return kernel.to_mlir()
    art = compile_kernel(parse_module(kernel.to_mlir(), kernel.name), kernel.model)
    return art.core_ir if level == "core" else art.backend_ir


def _without(kernel, level: str, op: str, nth: int) -> str:
    """`kernel`'s IR at `level` without the `nth` `op` (`<level dialect>.<op>`)."""
    lines = _ir(kernel, level).splitlines()
    name = f"{'backend' if level == 'backend' else level}.{op} "
    hits = [i for i, s in enumerate(lines) if s.strip().startswith(name)]
    del lines[hits[nth]]
    return "\n".join(lines)


def _line(text: str, source: str = SOURCE) -> int:
    """The line of `source` holding `text`; in this file, the line that ends with tag `text`."""
    lines = open(source).read().splitlines()
    if source == HERE:
        found = [i for i, s in enumerate(lines, 1) if s.endswith(text)]
    else:
        found = [i for i, s in enumerate(lines, 1) if text in s]
    assert len(found) == 1
    return found[0]


def _args(rows: int):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((rows, 64)).astype(np.float32), np.zeros((rows, 64), np.float32)]


_EXCHANGE_WRITE = "legato.tensor.memcpy(out[c * R : (c + 1) * R, :], legato.tensor.exp(x))"
_EXCHANGE_READ = 'y = legato.tensor.load(out[nb * R : nb * R + R, :], "sram")'
_EXCHANGE_REWRITE = "legato.tensor.memcpy(out[c * R : (c + 1) * R, :], y + 1.0)"
_HANDOFF = {"legato.tensor.memcpy(out, x * x)", 'y = legato.tensor.load(out, "sram")'}
# (kernel, op, nth, rows, hazard class, the two accesses' lines), per level: the op names of
# that level's dialect (core.wait_queue, backend.qwait, ...)
_CASES = {
    "qwait": (
        rk.core_to_core,
        {"core": "wait_queue", "backend": "qwait"},
        0,
        rk.R,
        ReadBeforeTransferError,
        {"y = x * x", 'legato.tensor.request_load(a, device.get_core(0), "sram")'},
    ),
    # a barrier waits for the transfers other cores observe with one queue wait each
    # (`core-barrier-waits`): without the first barrier's, the exchange's read races the store
    # before it; without the second's, the neighbour's rewrite races the read still in flight
    **{
        name: (
            rk.spmd_exchange,
            {"core": "wait_queue", "backend": "qwait"},
            nth,
            rk.NC * rk.R,
            SharedMemoryRaceError,
            lines,
        )
        for name, nth, lines in (
            ("barrier_store_wait", 0, {_EXCHANGE_WRITE, _EXCHANGE_READ}),
            ("barrier_load_wait", 1, {_EXCHANGE_READ, _EXCHANGE_REWRITE}),
        )
    },
    # without the first barrier, the exchange's read races the write before it; without the
    # second, the rewrite races that read
    **{
        name: (
            rk.spmd_exchange,
            {"core": "barrier", "backend": "barrier", "legato": "barrier"},
            nth,
            rk.NC * rk.R,
            SharedMemoryRaceError,
            lines,
        )
        for name, nth, lines in (
            ("first_barrier", 0, {_EXCHANGE_WRITE, _EXCHANGE_READ}),
            ("barrier", 1, {_EXCHANGE_READ, _EXCHANGE_REWRITE}),
        )
    },
    "sem_wait": (
        rk.sem_handoff,
        {"core": "sem_wait", "backend": "sem_wait", "legato": "wait"},
        0,
        rk.R,
        SharedMemoryRaceError,
        _HANDOFF,
    ),
}


@pytest.mark.parametrize(
    "level, case",
    [
        (level, c)
        for c, row in _CASES.items()
        for level in ("legato", "core", "backend")
        if level in row[1]
    ],
    ids=lambda v: v,
)
def test_a_removed_wait_is_reported_with_both_lines(level, case):
    kernel, ops, nth, rows, cls, lines = _CASES[case]
    ir = _without(kernel, level, ops[level], nth)
    with pytest.raises(InterpHazardError) as ei:
        interp.run(ir, level, _args(rows), kernel.model)
    e = ei.value
    assert isinstance(e.hazard, cls)
    assert {e.first.source[1], e.second.source[1]} == {_line(t) for t in lines}
    assert e.first.source[0] == SOURCE and e.second.source[0] == SOURCE
    assert f"{SOURCE}:{e.second.source[1]}:" in str(e)


@pytest.mark.parametrize("level", ["legato", "core", "backend"])
def test_the_intact_kernels_run_clean_and_the_check_can_be_off(level):
    for kernel, rows in ((rk.core_to_core, rk.R), (rk.sem_handoff, rk.R)):
        args = _args(rows)
        interp.run(_ir(kernel, level), level, args, kernel.model)
        np.testing.assert_array_equal(args[1], args[0] * args[0] + np.float32(1))
    # off, the interpreter's schedule (a DMA completes at issue) decides what a racy run gives
    args = _args(rk.R)
    ops = _CASES["sem_wait"][1]
    ir = _without(rk.sem_handoff, level, ops[level], 0)
    interp.run(ir, level, args, rk.sem_handoff.model, hazards=False)


def _tt(shape):
    return rk.tt(shape, "shared_dram")


@legato.compile(backend=rk.four_cores)
def send_then_overwrite(a: _tt([rk.R, 64]), out: _tt([rk.R, 64]), done: _tt([rk.R, 64])):
    """core 0 sends `out`'s bytes to core 1 and tells core 2 it sent them; core 2 then
    overwrites `out`. The transfer reads `out` until core 1 receives it, and core 2 is ordered
    after the send, not the receive: a write during the transfer. `done` is core 1's copy."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.request_load(out, device.get_core(1), "sram", 1)  # hz:send
        legato.sync.signal(device.get_core(2), 2)
    with device.get_core(1):
        z = legato.tensor.receive(out, 1, "sram")
        legato.tensor.memcpy(done, z + 0.0)
    with device.get_core(2):
        legato.sync.wait(2)
        legato.tensor.memcpy(out, legato.tensor.load(a, "sram"))  # hz:overwrite


@legato.compile(backend=rk.four_cores)
def send_receive_then_overwrite(a: _tt([rk.R, 64]), out: _tt([rk.R, 64]), done: _tt([rk.R, 64])):
    """`send_then_overwrite` with core 1 telling core 2 once it received: no hazard."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.request_load(out, device.get_core(1), "sram", 1)
    with device.get_core(1):
        z = legato.tensor.receive(out, 1, "sram")
        legato.tensor.memcpy(done, z + 0.0)
        legato.sync.signal(device.get_core(2), 2)
    with device.get_core(2):
        legato.sync.wait(2)
        legato.tensor.memcpy(out, legato.tensor.load(a, "sram"))


def test_a_receive_orders_the_transfer_s_source_for_whoever_it_tells():
    args = [*_args(rk.R), np.zeros((rk.R, 64), np.float32)]
    interp.run(send_receive_then_overwrite.to_mlir(), "legato", args, rk.four_cores)
    np.testing.assert_array_equal(args[1], args[0])
    np.testing.assert_array_equal(args[2], np.zeros((rk.R, 64), np.float32))


@legato.compile(backend=rk.four_cores)
def two_posters(a: _tt([rk.R, 64]), out: _tt([rk.R, 64]), res: _tt([rk.R, 64])):
    """core 2 waits for one post to semaphore 1 of core 2: core 1's (which orders nothing)
    or core 0's (after it wrote `out`), whichever comes first. When core 1's does, core 2's
    read of `out` races core 0's write."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        x = legato.tensor.load(a, "sram")
        legato.tensor.memcpy(out, x * x + 1.0)  # hz:write
        legato.sync.signal(device.get_core(2), 1)
    with device.get_core(1):
        legato.sync.signal(device.get_core(2), 1)
    with device.get_core(2):
        t = legato.tensor.load(a, "sram")  # some work, so that both posts come first
        t = legato.tensor.exp(t * t + t)
        t = legato.tensor.exp(t * t + t)
        legato.sync.wait(1)
        legato.tensor.memcpy(res, legato.tensor.load(out, "sram") + t)  # hz:read
        legato.sync.wait(1)


@pytest.mark.parametrize(
    "kernel, quantum, accesses, tags",
    [
        # a write to a transfer's source before its receive: the transfer still reads it
        (
            send_then_overwrite,
            DEFAULT_QUANTUM,
            (True, "reads", "writes"),
            ("# hz:send", "# hz:overwrite"),
        ),
        # quantum 1: the tasks take turns op by op, so core 1 posts first, core 0 second, and
        # core 2's first wait takes core 1's post. A wait that joined every post so far (the
        # checker before) was ordered after core 0's write too and missed the race.
        (two_posters, 1, (True, "writes", "reads"), ("# hz:write", "# hz:read")),
    ],
    ids=["write_during_transfer", "wait_after_the_post_it_took"],
)
def test_a_race_at_the_legato_level_is_reported_with_both_lines(kernel, quantum, accesses, tags):
    """The legato level's races on shared DRAM (class SharedMemoryRaceError), reported with
    both accesses' kinds and source lines."""
    args = [*_args(rk.R), np.zeros((rk.R, 64), np.float32)]
    with pytest.raises(InterpHazardError) as ei:
        interp.run(kernel.to_mlir(), "legato", args, rk.four_cores, quantum=quantum)
    e = ei.value
    assert isinstance(e.hazard, SharedMemoryRaceError)
    assert (e.first.transfer, e.first.access, e.second.access) == accesses
    assert (e.first.source[1], e.second.source[1]) == tuple(_line(t, HERE) for t in tags)


def test_a_semaphore_wait_joins_the_posts_whose_units_it_took():
    # the checker alone: post A (2 units, after a write), post B (1 unit); a wait of 1 takes
    # one of A's units, so it is ordered after A; a second wait of 2 takes A's last and B's
    def describe(i, site):
        return f"m{i}", "p", site, "op", None

    hz = HazardChecker(3, describe, lambda a, n: False)
    hz.access(0, 0, (), ((0, 8),))  # module 0 writes shared DRAM [0, 8)
    hz.sem_post(0, "s", 2)
    hz.sem_post(1, "s", 1)
    hz.sem_wait(2, "s", 1)
    hz.access(2, 1, ((0, 8),), ())  # ordered after module 0's write: no hazard
    hz.sem_wait(2, "s", 2)
    hz2 = HazardChecker(3, describe, lambda a, n: False)
    hz2.sem_post(1, "s", 1)
    hz2.access(0, 0, (), ((0, 8),))
    hz2.sem_post(0, "s", 1)
    hz2.sem_wait(2, "s", 1)  # takes module 1's unit, posted before module 0's
    with pytest.raises(SharedMemoryRaceError):
        hz2.access(2, 1, ((0, 8),), ())


@pytest.mark.parametrize("level", ["legato", "core", "backend"])
def test_a_report_at_a_semaphore_post_names_the_post_s_line(monkeypatch, level):
    """A report raised in the checker's `sem_post` hook names the post's line (the known limit
    "a report involving a sem_post prints '?'" does not arise: the hook records no access, and
    the machine now hands it the op, as every other hook, rather than relying on the scheduler
    to locate an op-less error)."""

    def refuse(self, mod, sid, count):
        acc = HazardAccess("m", "p", None, "x", "writes", False)
        raise SharedMemoryRaceError("hazard (a test's)", acc, acc, "shared DRAM")

    monkeypatch.setattr(HazardChecker, "sem_post", refuse)
    with pytest.raises(InterpHazardError) as ei:
        interp.run(_ir(rk.sem_handoff, level), level, _args(rk.R), rk.sem_handoff.model)
    post = _line("legato.sync.signal(device.get_core(1), 1)")
    assert ei.value.op is not None
    assert f"{SOURCE}:{post}:" in str(ei.value)
