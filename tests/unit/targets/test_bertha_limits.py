"""Bounded runs (issue 17, item 5): a wall-clock, a cycle and a host-memory limit per run, each
ending in a LegatoRuntimeError (a `LimitError`) that names the limit, its value and where
(module, program, pc); set per call (`limits=`), by `legato.session(...)` or by environment
variables, with defaults no test or benchmark comes near."""

import time

import numpy as np
import pytest
from bertha_helpers import run, tensor

import legato
from legato.errors import LegatoRuntimeError
from legato.targets.bertha import runtime
from legato.targets.bertha.emulator import (
    CycleLimitError,
    EmulatorFault,
    LimitError,
    MemoryLimitError,
    TimeLimitError,
)
from legato.targets.bertha.runtime import DEFAULT_LIMITS, Limits, resolve_limits
from legato.types import i64
from tests.corpus.one_core import double

LOOP = (
    ".program top on top\n    halt\n.program c1 on core(1)\nL1:\n    addi r3, r3, 1\n    jmp L1\n"
)
# Stores one word every MiB of core 0's private DRAM, 64 times: 64 host chunks of 1 MiB.
FILL_PRIVATE = """\
.program c0 on core(0)
    lsa r4, private_dram, 0
    li r5, 1
    shli r5, r5, 20
    li r6, 64
L1:
    st r6, 0(r4)
    add r4, r4, r5
    addi r6, r6, -1
    bne r6, r0, L1
    halt
"""


def test_cycle_limit_names_the_limit_the_value_and_the_place():
    with pytest.raises(CycleLimitError) as ei:
        run(LOOP, limits=Limits(None, 5000, None))
    e = ei.value
    assert isinstance(e, LimitError) and isinstance(e, LegatoRuntimeError)
    assert (e.limit, e.value, e.module, e.program) == ("cycle", 5000, "core1", "c1")
    assert e.pc in (0, 1)
    assert "program 'c1' (core1) pc" in str(e)
    assert "cycle limit of 5000 cycles exceeded at cycle" in str(e)
    assert "LEGATO_CYCLE_LIMIT" in str(e)


def test_cycle_limit_of_a_short_run_is_checked_at_its_end():
    # fewer instructions than the emulator runs between two checks
    run(".program top on top\n    li r3, 1\n    halt\n", limits=Limits(None, 1000, None))
    with pytest.raises(CycleLimitError, match="cycle limit of 1 cycles exceeded"):
        run(FILL_PRIVATE, limits=Limits(None, 1, None))


def test_time_limit_stops_a_runaway_loop_promptly():
    start = time.monotonic()
    with pytest.raises(TimeLimitError) as ei:
        run(LOOP, limits=Limits(0.3, None, None), instruction_limit=10**12)
    assert time.monotonic() - start < 10
    e = ei.value
    assert (e.limit, e.value, e.module) == ("time", 0.3, "core1")
    assert "wall-clock limit of 0.3 s exceeded after" in str(e) and "pc" in str(e)


def test_memory_limit_caps_host_memory_backing_private_dram():
    with pytest.raises(MemoryLimitError) as ei:
        run(FILL_PRIVATE, limits=Limits(None, None, 8 << 20))
    e = ei.value
    assert (e.limit, e.value, e.module, e.program) == ("memory", 8 << 20, "core0", "c0")
    assert e.instruction.startswith("st ")
    assert "host-memory limit of 8388608 bytes for simulated memory exceeded" in str(e)
    assert "core0.private_dram" in str(e)
    # the same program within its budget: 64 chunks of 1 MiB
    res = run(FILL_PRIVATE, limits=Limits(None, None, 64 << 20))
    assert res.instructions["core0"] == 5 + 4 * 64


def test_a_host_memory_error_becomes_a_fault(monkeypatch):
    import legato.targets.bertha.arch.memory as memory

    class NoChunks:  # numpy, except that a 1 MiB chunk cannot be allocated
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def zeros(shape, *a, **k):
            if shape == memory.LAZY_CHUNK:
                raise MemoryError
            return np.zeros(shape, *a, **k)

    monkeypatch.setattr(memory, "np", NoChunks())
    with pytest.raises(MemoryLimitError, match="the host ran out of memory backing core0"):
        run(FILL_PRIVATE, limits=Limits(None, None, None))


def test_defaults_and_environment(monkeypatch):
    for env in runtime.LIMIT_ENV.values():
        monkeypatch.delenv(env, raising=False)
    assert resolve_limits() == DEFAULT_LIMITS
    monkeypatch.setenv("LEGATO_TIME_LIMIT", "12.5")
    monkeypatch.setenv("LEGATO_CYCLE_LIMIT", "1_000")
    monkeypatch.setenv("LEGATO_MEMORY_LIMIT", "2G")
    assert resolve_limits() == Limits(12.5, 1000, 2 << 30)
    assert resolve_limits(1.0, 5, 0) == Limits(1.0, 5, None)  # given values win; 0: unbounded
    monkeypatch.setenv("LEGATO_MEMORY_LIMIT", "off")
    assert resolve_limits().memory is None
    monkeypatch.setenv("LEGATO_MEMORY_LIMIT", "512 MiB")
    assert resolve_limits().memory == 512 << 20
    for env, bad in (("LEGATO_MEMORY_LIMIT", "lots"), ("LEGATO_TIME_LIMIT", "-3")):
        monkeypatch.setenv(env, bad)
        with pytest.raises(LegatoRuntimeError, match=rf"\${env}='{bad}' is not a valid limit"):
            resolve_limits()
        monkeypatch.delenv(env)
    with pytest.raises(LegatoRuntimeError, match="cycles limit must be a non-negative number"):
        resolve_limits(cycles="many")


# ---- through the JIT ------------------------------------------------------------------------


X = np.arange(32, dtype=np.float32).reshape(4, 8)


def test_session_options_and_environment_bound_kernel_calls(monkeypatch):
    for env in runtime.LIMIT_ENV.values():
        monkeypatch.delenv(env, raising=False)
    out = np.zeros_like(X)
    double(X, out)
    cycles = double.last_run.cycles
    with legato.session(cycle_limit=cycles):
        double(X, out)  # at the limit is within it
    with legato.session(cycle_limit=cycles - 1):
        with pytest.raises(LegatoRuntimeError, match=f"cycle limit of {cycles - 1} cycles") as ei:
            double(X, out)
    assert isinstance(ei.value, EmulatorFault) and ei.value.module == "core0"
    monkeypatch.setenv("LEGATO_CYCLE_LIMIT", str(cycles - 1))
    with pytest.raises(CycleLimitError):
        double(X, out)
    with legato.session(cycle_limit=0):  # the session's option wins: unbounded
        double(X, out)
    with pytest.raises(LegatoRuntimeError, match="time limit must be a non-negative number"):
        with legato.session(time_limit=-1):
            pass
    np.testing.assert_array_equal(out, X * 2)


def test_run_binary_reads_the_environment(monkeypatch):
    monkeypatch.setenv("LEGATO_CYCLE_LIMIT", "100")
    with pytest.raises(CycleLimitError, match="cycle limit of 100 cycles"):
        run(LOOP)
    monkeypatch.setenv("LEGATO_CYCLE_LIMIT", "0")
    with pytest.raises(EmulatorFault, match="instruction limit of 3000"):
        run(LOOP, instruction_limit=3000)


def test_out_of_range_store_still_faults_normally():
    src = ".program c0 on core(0)\n    ld r3, 8(r1)\n    li r4, 7\n    st r4, 8(r3)\n    halt\n"
    with pytest.raises(EmulatorFault) as ei:
        run(src, [tensor("out", i64, [1], "write")], [np.zeros(1, np.int64)])
    assert not isinstance(ei.value, LimitError)
