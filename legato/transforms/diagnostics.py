"""Compile errors raised by passes point at the op: its Python file:line:col when the frontend
attached one, else the op's IR text."""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Operation

from legato.errors import CompileError, SourceLocation


def source_location(op: Operation | None) -> SourceLocation | None:
    while op is not None:
        loc = getattr(op, "location", None)
        if isinstance(loc, FileLineColLoc):
            return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
        op = op.parent_op()
    return None


def error_at(op: Operation | None, message: str, note: str | None = None) -> CompileError:
    """A CompileError located at `op` (raise it)."""
    loc = source_location(op)
    if loc is None and op is not None:
        message = f"{message}\n  at: {_short(op)}"
    err = CompileError(message, loc, note)
    err.op = op  # a tool that knows where it parsed the op (legato-opt) locates it there
    return err


def _short(op: Operation) -> str:
    text = str(op).splitlines()[0] if op.regions else str(op)
    return text if len(text) < 200 else text[:197] + "..."
