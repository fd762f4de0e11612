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
from xdsl.ir import Block, Operation, Region
from xdsl.utils.exceptions import DiagnosticException

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


def verify_error_op(
    module: Operation, e: DiagnosticException
) -> tuple[Operation, DiagnosticException]:
    """The op a verifier error `e` that `module.verify()` raised is about, with its own error:
    the first op, innermost first, whose own verifier fails (a kernel-wide check may name
    another op: its error's `op`), else the innermost op the traceback of `e` was verifying (a
    check of a block or region, which no op's own `verify` makes) with `e`."""
    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as again:
            return getattr(again, "op", None) or op, again
    found = None
    tb = e.__traceback__
    while tb is not None:
        this = tb.tb_frame.f_locals.get("self")
        if isinstance(this, Block | Region):
            this = this.parent_op()
        if isinstance(this, Operation):
            found = this
        tb = tb.tb_next
    return found or module, e


def verify_located(module: Operation, level: str) -> None:
    """`module.verify()`, a failure raised as an internal compiler error located at the failing
    op (`verify_error_op`) with xDSL's message, without its dump of the whole module."""
    try:
        module.verify()
    except DiagnosticException as e:
        op, err = verify_error_op(module, e)
        head = (str(err).strip() or "verification failed").splitlines()[0]
        raise error_at(
            op,
            f"internal compiler error: the {level} IR does not verify: {op.name}: {head}",
            "the lowering produced IR its own verifier refuses: a bug in Legato; please report it",
        ) from None


def _short(op: Operation) -> str:
    text = str(op).splitlines()[0] if op.regions else str(op)
    return text if len(text) < 200 else text[:197] + "..."
