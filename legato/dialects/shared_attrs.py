"""Shared instances of the attributes the lowering builds per op: xDSL verifies an attribute
on construction (an `IntegerAttr` checks its value against its type's range: ~12 us; a
`UnitAttr` ~5 us), and attributes are immutable values, so one instance serves every op that
holds an equal one (the IR, its printed text and the binary are the same)."""

from __future__ import annotations

from functools import lru_cache

from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    IntAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i64,
)
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


#: the shared `IntAttr` / `StringAttr` of each value `int_attr` / `str_attr` were asked for
_INTS: dict[int, IntAttr] = {}
_STRS: dict[str, StringAttr] = {}
_MAX_SHARED = 1 << 16  # a bound on memory, not on correctness


def _shared(table: dict, value, cls: type, raw: type):
    """`cls(value)`, one instance per `raw` value in `table`; an instance of `cls` as it is, and
    a value of another type (a bool for an int: kept apart from the equal int) unshared."""
    if type(value) is not raw:
        return value if isinstance(value, cls) else cls(value)
    attr = table.get(value)
    if attr is None:
        if len(table) >= _MAX_SHARED:
            table.clear()
        attr = table[value] = cls(value)
    return attr


def int_attr(value: int | IntAttr) -> IntAttr:
    """`value` as an `IntAttr`: `IntAttr(value)`, one instance per int (the backend's
    immediates and offsets, the queues and dims of the ops, ~4k per GEMM compile of a few
    hundred values; each new one ran xDSL's `Attribute.__post_init__`)."""
    return _shared(_INTS, value, IntAttr, int)


def str_attr(value: str | StringAttr) -> StringAttr:
    """`value` as a `StringAttr`: `StringAttr(value)`, one instance per string (memory spaces,
    kinds and dtypes the ops name)."""
    return _shared(_STRS, value, StringAttr, str)


_I64_ARRAYS: dict[tuple[int, ...], DenseArrayBase] = {}


def i64_array(values) -> DenseArrayBase:
    """`DenseArrayBase.from_list(i64, values)`, one instance per tuple of ints (the static
    offsets, sizes and shapes of the ops: each new one packed its bytes and ran xDSL's
    attribute checks, ~1.5% of the GEMM's compile); a list holding anything but ints (a bool,
    equal to an int as a key) is not shared."""
    key = tuple(values)
    if not all(type(v) is int for v in key):
        return DenseArrayBase.from_list(i64, list(key))
    attr = _I64_ARRAYS.get(key)
    if attr is None:
        if len(_I64_ARRAYS) >= _MAX_SHARED:
            _I64_ARRAYS.clear()
        attr = _I64_ARRAYS[key] = DenseArrayBase.from_list(i64, list(key))
    return attr
