"""`verify_op(op)`: an op's own verifier (`op.verify_()`: its IRDL definition's checks, then the
op class's custom `verify_`), with the definition's checks remembered per op shape.

The definition's checks (xDSL's `OpDef.verify`: operand and result type constraints and
variadic sizes, the properties' and attributes' constraints, the traits) read only the op's
class, its operand and result types, its properties and attributes, and its traits; for an op
without regions or successors whose traits check nothing (`OpTrait.verify` not overridden, as
`Pure`, or an empty one), their outcome is a function of (class, operand types, result types, properties,
attributes), all immutable and hashable. That outcome is remembered once it passed, so each
distinct shape is checked once per process; a failure is never remembered (the next op of that
shape is checked again and raises the same error). The class's custom `verify_` always runs.
The frontend verifies every op it builds with this (~40% of its time on the bench GEMM's
2,400 ops, most of them the same few shapes)."""

from __future__ import annotations

import dis
from functools import cache

from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation
from xdsl.traits import OpTrait

#: shapes whose definition checks passed, per op class: (operand types, result types,
#: properties, attributes)
_PASSED: dict[type, set[tuple]] = {}


@cache
def _parts(cls: type) -> tuple | None:
    """(the definition, the custom verify or None) of an IRDL op class whose definition checks
    depend on the op's shape only, else None (verify it whole)."""
    if not issubclass(cls, IRDLOperation):
        return None
    fn = cls.verify_
    code, closure = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
    if code is None or not closure or "op_def" not in code.co_freevars:
        return None  # not the verify_ `irdl_op_definition` generates
    cells = dict(zip(code.co_freevars, closure))
    op_def = cells["op_def"].cell_contents
    if op_def is not cls.get_irdl_definition():
        return None
    if set(code.co_freevars) - {"op_def", "custom_verify"}:
        return None
    custom = cells["custom_verify"].cell_contents if "custom_verify" in cells else None
    if not all(_checks_nothing(type(t).verify) for t in op_def.traits):
        return None  # a trait that reads the op's place (parent, terminator, ...)
    return op_def, custom


@cache
def _checks_nothing(fn) -> bool:
    """Whether a trait's `verify` is `OpTrait.verify` or, like it, a body that only returns
    None (an interface's, as xDSL's folder interface)."""
    if fn is OpTrait.verify:
        return True
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    body = [i for i in dis.get_instructions(code) if i.opname not in ("RESUME", "NOP")]
    return [(i.opname, i.argval) for i in body] in (
        [("LOAD_CONST", None), ("RETURN_VALUE", None)],
        [("RETURN_CONST", None)],
    )


def verify_op(op: Operation) -> None:
    """`op.verify_()`, its definition's checks skipped for a shape that passed them before."""
    cls = type(op)
    parts = _parts(cls)
    if parts is None or op.regions or op._successors:  # noqa: SLF001 (`successors` views it)
        op.verify_()
        return
    op_def, custom = parts
    key = (
        tuple(o.type for o in op._operands),  # noqa: SLF001 (what the `operands` view reads)
        tuple(r.type for r in op.results),
        tuple(op.properties.items()),
        tuple(op.attributes.items()),
    )
    passed = _PASSED.setdefault(cls, set())
    if key not in passed:
        op_def.verify(op)
        passed.add(key)
    if custom is not None:
        custom(op)
