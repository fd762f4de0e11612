"""Errors the interpreters raise on purpose. Each names the op (and its source location)."""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc, NameLoc, UnknownLoc
from xdsl.ir import Operation

from legato.errors import ArgumentError, LegatoError


def describe_location(op: Operation | None) -> str:
    """`file:line:col` of `op`, or '' when it has none."""
    if op is None:
        return ""
    loc = getattr(op, "location", None)
    while isinstance(loc, NameLoc):
        loc = loc.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    if loc is None or isinstance(loc, UnknownLoc):
        return ""
    return str(loc)


def op_name(op: Operation) -> str:
    """The op's name as written (unregistered ops included)."""
    name = getattr(op, "op_name", None)
    return name.data if name is not None and hasattr(name, "data") else op.name


def describe_op(op: Operation | None) -> str:
    """`'legato.receive' at k.py:12:8` (the location only when the op has one)."""
    if op is None:
        return "<no op>"
    where = describe_location(op)
    return f"'{op_name(op)}'" + (f" at {where}" if where else "")


class InterpError(LegatoError):
    """Interpretation failed. `op` is the op being run (if any), `context` the task running it."""

    def __init__(self, message: str, op: Operation | None = None, context: str | None = None):
        self.message = message
        self.op = op
        self.context = context
        super().__init__(self.render())

    def render(self) -> str:
        prefix = ""
        if self.context:
            prefix += f"[{self.context}] "
        if self.op is not None:
            prefix += f"{describe_op(self.op)}: "
        return prefix + self.message


class UnsupportedOpError(InterpError):
    """The interpreter of this level has no implementation for an op."""


class InvalidModuleError(InterpError):
    """The module does not verify, or is not at the level it is run at."""


class InterpArgumentError(InterpError, ArgumentError):
    """Arguments given to a run do not match the kernel's signature (count, shape, dtype)."""


class MemoryFault(InterpError):
    """An access outside every allocation (core and backend levels)."""


class DeadlockError(InterpError):
    """No task can make progress. `blocked` lists (context, op, what it waits for)."""

    def __init__(self, blocked: list[tuple[str, Operation | None, str]], notes: list[str] = ()):
        self.blocked = blocked
        self.notes = list(notes)
        lines = ["deadlock: no context can make progress"]
        for ctx, op, what in blocked:
            lines.append(f"  {ctx}: blocked in {describe_op(op)} waiting for {what}")
        lines += [f"  note: {n}" for n in self.notes]
        super().__init__("\n".join(lines))


class InterpHazardError(InterpError):
    """The hazard checker found two accesses no wait orders (`arch.hazards`): `hazard` is the
    `HazardError` (its class says which kind), `first` and `second` its accesses, each with
    the IR op's source line."""

    def __init__(self, hazard, op: Operation | None = None):
        self.hazard, self.first, self.second = hazard, hazard.first, hazard.second
        lines = [hazard.cause]
        for a in (hazard.first, hazard.second):
            if a.source is not None:
                lines.append(f"  {a.module} ({a.access}) is at {':'.join(map(str, a.source))}")
        super().__init__("\n".join(lines), op)


class StepLimitExceeded(InterpError):
    """The run executed more ops than its budget (a livelock or an endless loop)."""


class TimeLimitExceeded(InterpError):
    """The run took longer than its wall-clock limit (`time_limit` seconds): checked between
    ops, so an op running long by itself finishes first."""
