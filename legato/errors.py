"""Errors users meet. Each names the problem and the place (Python file:line:col or IR op)."""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    file: str
    line: int
    col: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class LegatoError(Exception):
    """Base of every error Legato raises on purpose."""


class UsageError(LegatoError):
    """A Legato API given a value it does not accept (an unknown type name, a malformed shape, a
    bad model parameter). Raised as `LegatoTypeError` / `LegatoValueError`, which are also the
    built-in `TypeError` / `ValueError` so that code catching those still does."""


class LegatoTypeError(UsageError, TypeError):
    pass


class LegatoValueError(UsageError, ValueError):
    pass


class CompileError(LegatoError):
    """A kernel cannot be compiled. Shows `file:line:col: error: msg`, the source line and a caret."""

    def __init__(
        self, message: str, location: SourceLocation | None = None, note: str | None = None
    ):
        self.message = message
        self.location = location
        self.note = note
        super().__init__(self.render())

    def render(self) -> str:
        if self.location is None:
            text = f"error: {self.message}"
        else:
            loc = self.location
            text = f"{loc}: error: {self.message}"
            src = linecache.getline(loc.file, loc.line)
            if src:
                src = src.rstrip("\n")
                text += f"\n    {src}\n    {' ' * max(loc.col - 1, 0)}^"
        if self.note:
            text += f"\nnote: {self.note}"
        return text


class LegatoRuntimeError(LegatoError):
    """A compiled kernel cannot run (bad arguments, refused binary, emulator fault)."""


class ArgumentError(LegatoRuntimeError, ValueError):
    """A kernel argument does not match the kernel's signature (type, dtype, rank, dims, bounds,
    writeability, aliasing). The JIT, the interpreters and the runtime all raise it
    (`legato.binding`); `ABIError` and `InterpArgumentError` are its subclasses."""


class PerformanceWarning(UserWarning):
    """The compile works, but the kernel will be slow for a reason it can name: a working set
    spilled from sram to private DRAM (`core-plan-memory`). Shown at the kernel's source line;
    `warnings.simplefilter("error", legato.PerformanceWarning)` makes it an error."""


class DeviceAssertError(LegatoRuntimeError):
    """A `legato.device_assert` failed while the kernel ran (on the emulator or an interpreter):
    the message names the assert's source line, the module and the failing elements; `loc`,
    `module`, `core`, `cycle` and `value` hold them."""
