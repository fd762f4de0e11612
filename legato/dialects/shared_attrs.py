"""Shared instances of the attributes the lowering builds per op: xDSL verifies an attribute
on construction (an `IntegerAttr` checks its value against its type's range: ~12 us; a
`UnitAttr` ~5 us), and attributes are immutable values, so one instance serves every op that
holds an equal one (the IR, its printed text and the binary are the same)."""

from __future__ import annotations

from functools import lru_cache

from xdsl.dialects.builtin import BoolAttr, IntegerAttr, UnitAttr
from xdsl.ir import Attribute

UNIT = UnitAttr()
TRUE, FALSE = BoolAttr.from_bool(True), BoolAttr.from_bool(False)


def bool_attr(value: bool) -> BoolAttr:
    """`BoolAttr.from_bool(value)`."""
    return TRUE if value else FALSE


@lru_cache(maxsize=1 << 14)
def integer_attr(value: int, type_: Attribute) -> IntegerAttr:
    """`IntegerAttr(value, type_)` (an out-of-range value raises xDSL's error each time)."""
    return IntegerAttr(value, type_)
