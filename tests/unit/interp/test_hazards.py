"""The backend interpreter checks hazards too (issue 17, item 3): it completes a DMA at issue,
but the checker counts the DMA in flight until a wait orders it, so the compiled backend IR of a
corpus kernel with one wait removed is reported with both ops' source lines, whatever order the
scheduler happened to run the tasks in. Every corpus kernel runs hazard-free at this level in
`test_differential.py` (the check is on by default)."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest

from legato import interp
from legato.compiler import compile_kernel
from legato.interp.differential import parse_module
from legato.interp.errors import InterpHazardError
from legato.targets.bertha.arch.hazards import ReadBeforeTransferError, SharedMemoryRaceError
from tests.corpus import runtime_kernels as rk

SOURCE = inspect.getsourcefile(rk)


@functools.cache
def _backend_ir(kernel) -> str:
    return compile_kernel(parse_module(kernel.to_mlir(), kernel.name), kernel.model).backend_ir


def _without(kernel, op: str, nth: int) -> str:
    lines = _backend_ir(kernel).splitlines()
    hits = [i for i, s in enumerate(lines) if s.strip().startswith(f"backend.{op} ")]
    del lines[hits[nth]]
    return "\n".join(lines)


def _line(text: str) -> int:
    found = [i for i, s in enumerate(open(SOURCE).read().splitlines(), 1) if text in s]
    assert len(found) == 1
    return found[0]


def _args(rows: int):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((rows, 64)).astype(np.float32), np.zeros((rows, 64), np.float32)]


@pytest.mark.parametrize(
    "kernel, op, nth, rows, cls, lines",
    [
        (
            rk.core_to_core,
            "qwait",
            0,
            rk.R,
            ReadBeforeTransferError,
            {"y = x * x", 'legato.tensor.request_load(a, device.get_core(0), "sram")'},
        ),
        (
            rk.spmd_exchange,
            "dmawait",
            0,
            rk.NC * rk.R,
            SharedMemoryRaceError,
            {
                "legato.tensor.memcpy(out[c * R : (c + 1) * R, :], legato.tensor.exp(x))",
                'y = legato.tensor.load(out[nb * R : nb * R + R, :], "sram")',
            },
        ),
        (
            rk.spmd_exchange,
            "barrier",
            1,
            rk.NC * rk.R,
            SharedMemoryRaceError,
            {
                'y = legato.tensor.load(out[nb * R : nb * R + R, :], "sram")',
                "legato.tensor.memcpy(out[c * R : (c + 1) * R, :], y + 1.0)",
            },
        ),
        (
            rk.sem_handoff,
            "sem_wait",
            0,
            rk.R,
            SharedMemoryRaceError,
            {"legato.tensor.memcpy(out, x * x)", 'y = legato.tensor.load(out, "sram")'},
        ),
    ],
    ids=["qwait", "dmawait", "barrier", "sem_wait"],
)
def test_a_removed_wait_is_reported_with_both_lines(kernel, op, nth, rows, cls, lines):
    ir = _without(kernel, op, nth)
    with pytest.raises(InterpHazardError) as ei:
        interp.run(ir, "backend", _args(rows), kernel.model)
    e = ei.value
    assert isinstance(e.hazard, cls)
    assert {e.first.source[1], e.second.source[1]} == {_line(t) for t in lines}
    assert e.first.source[0] == SOURCE and e.second.source[0] == SOURCE
    assert f"{SOURCE}:{e.second.source[1]}:" in str(e)


def test_the_intact_kernels_run_clean_and_the_check_can_be_off():
    for kernel, rows in ((rk.core_to_core, rk.R), (rk.sem_handoff, rk.R)):
        args = _args(rows)
        interp.run(_backend_ir(kernel), "backend", args, kernel.model)
        np.testing.assert_array_equal(args[1], args[0] * args[0] + np.float32(1))
    # off, the interpreter's schedule (a DMA completes at issue) decides what a racy run gives
    args = _args(rk.R)
    interp.run(
        _without(rk.sem_handoff, "sem_wait", 0),
        "backend",
        args,
        rk.sem_handoff.model,
        hazards=False,
    )
