"""Compile errors raised by passes point at the op: its Python file:line:col when the frontend
attached one, else the op's IR text.

Locations travel down the levels by one rule (`inherit_location`): an op a pass creates takes
the location of the op it is created for. The lowering drivers' builders apply it to every op
they insert (`ProgramState.emit` in `convert-legato-to-core`, `_Selector.emit` in
`convert-core-to-backend`: the op being lowered, unless the caller names another), and the
passes that insert ops into finished IR (register spills, transfer-ring credits) apply it to
what they insert. So an error raised at any level, and every instruction's line in the binary's
line table, names the user's source line (docs/errors.md, *Locations*)."""

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


def inherit_location(op: Operation, source: Operation | None) -> Operation:
    """Give `op`, and each op nested in its regions, that has no file location of its own the
    location of `source` (the op it was created for); returns `op`."""
    if source is None or not isinstance(source.location, FileLineColLoc):
        return op
    loc = source.location
    if not isinstance(op.location, FileLineColLoc):
        op.location = loc
    if op.regions:
        for inner in op.walk():
            if not isinstance(inner.location, FileLineColLoc):
                inner.location = loc
    return op


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
