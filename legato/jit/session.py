"""JIT sessions: `legato.session(output_type, output_path)` and `legato.OutputType`, the stage a
session writes out for every kernel called inside it."""

from __future__ import annotations

import contextlib
import contextvars
import enum
from dataclasses import dataclass
from pathlib import Path

from legato.errors import LegatoError


class OutputType(enum.Enum):
    """The stage a `legato.session` writes out."""

    MLIR = "mlir"  # the legato dialect, as the frontend emits it
    CORE_IR = "core_ir"
    BACKEND_IR = "backend_ir"
    ASM = "asm"
    BINARY = "binary"  # the ELF

    @property
    def suffix(self) -> str:
        return _SUFFIX[self]


_SUFFIX = {
    OutputType.MLIR: ".mlir",
    OutputType.CORE_IR: ".core.mlir",
    OutputType.BACKEND_IR: ".backend.mlir",
    OutputType.ASM: ".s",
    OutputType.BINARY: ".elf",
}


@dataclass(frozen=True)
class Session:
    output_type: OutputType | None
    output_path: Path | None
    trace: bool = False  # record the emulator's trace events in `kernel.last_run`
    time_limit: float | None = None  # per call; None: $LEGATO_TIME_LIMIT, else the default
    cycle_limit: int | None = None
    memory_limit: int | None = None
    hazards: bool | None = None  # None: $LEGATO_HAZARDS, else off


_session: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "legato_session", default=None
)


@contextlib.contextmanager
def session(
    output_type: OutputType | str | None = None,
    output_path=None,
    *,
    trace: bool = False,
    time_limit: float | None = None,
    cycle_limit: int | None = None,
    memory_limit: int | None = None,
    hazards: bool | None = None,
):
    """JIT options for the kernel calls inside the `with`: write stage `output_type` of every
    kernel called to `output_path/<kernel><suffix>` (the kernels still run); with `trace=True`
    the emulator records its trace events (`kernel.last_run.trace_events`, `write_trace`),
    which calls outside such a session do not (they cost time to build and to release).
    `time_limit` (wall-clock seconds), `cycle_limit` (simulated cycles) and `memory_limit`
    (host bytes backing simulated memory) bound each call's run; unset, each comes from
    `$LEGATO_TIME_LIMIT` / `$LEGATO_CYCLE_LIMIT` / `$LEGATO_MEMORY_LIMIT`, else a default
    (`legato.targets.bertha.runtime.DEFAULT_LIMITS`); 0 means unbounded. Past one, the call
    raises a `LegatoRuntimeError` naming the limit, its value, the module and the PC.
    `hazards=True` makes the emulator check every call for unsynchronised accesses (a read
    before the DMA filling the buffer completed, a write to a buffer a DMA still reads, cores
    racing on shared DRAM) and raise a `HazardError` naming both accesses' source lines;
    unset, `$LEGATO_HAZARDS` (`1`/`0`) decides, else it is off (it costs host time, see
    docs/isa.md). `kernel.interpret` always checks."""
    from legato.targets.bertha.runtime import resolve_limits

    resolve_limits(time_limit, cycle_limit, memory_limit)  # refuse bad values here, not later
    if isinstance(output_type, str):
        try:
            output_type = OutputType[output_type.upper()]
        except KeyError:
            raise LegatoError(
                f"unknown output_type {output_type!r}; expected one of "
                f"{', '.join(t.name for t in OutputType)}"
            ) from None
    if output_type is not None and not isinstance(output_type, OutputType):
        raise LegatoError(f"output_type must be a legato.OutputType, got {output_type!r}")
    if output_type is not None and output_path is None:
        output_path = "."
    token = _session.set(
        Session(
            output_type,
            Path(output_path) if output_path is not None else None,
            bool(trace),
            time_limit,
            cycle_limit,
            memory_limit,
            None if hazards is None else bool(hazards),
        )
    )
    try:
        yield _session.get()
    finally:
        _session.reset(token)


def current_session() -> Session | None:
    return _session.get()
