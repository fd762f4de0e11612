"""Compile-time evaluation of `index` arithmetic: what an `arith` op on `index` values computes
(signed, with MLIR's rounding), shared by the passes that evaluate a value per core."""

from __future__ import annotations

import operator
from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import OpResult, SSAValue

INDEX_OPS: dict[str, Callable[[int, int], int]] = {
    # the operator module's functions (C), not lambdas: `per_core_values` maps them over every
    # core of every index op of an SPMD program
    "arith.addi": operator.add,
    "arith.subi": operator.sub,
    "arith.muli": operator.mul,
    "arith.divsi": lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    "arith.remsi": lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)),
    "arith.floordivsi": operator.floordiv,
    "arith.minsi": min,
    "arith.maxsi": max,
}
DIVISIONS = ("arith.divsi", "arith.remsi", "arith.floordivsi")  # undefined for a zero divisor
#: the signed divisions on non-negative dividends and positive divisors: the floor ones (C)
_NON_NEGATIVE = {"arith.divsi": operator.floordiv, "arith.remsi": operator.mod}


def per_core_values(
    value: SSAValue | None,
    num_cores: int,
    core_id_op: type,
    memo: dict[SSAValue, tuple[int, ...] | None] | None = None,
) -> tuple[int, ...] | None:
    """`value` on each core 0..num_cores-1 when it is computed from the core-id op of its level
    (`core_id_op`: `legato.core_id` or `core.core_id`) and integer constants with `INDEX_OPS`,
    else None (also when a division by zero happens on any core).

    Evaluated once per op over all cores (memoized in `memo`), not once per core: the SSA chain
    of a target core is shared by every core and often by every send of the region."""
    if value is None or not isinstance(value, OpResult):
        return None
    if memo is None:
        memo = {}
    if value in memo:
        return memo[value]
    op = value.op
    result: tuple[int, ...] | None = None
    if isinstance(op, core_id_op):
        result = tuple(range(num_cores))
    elif isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        result = (op.value.value.data,) * num_cores
    elif (fn := INDEX_OPS.get(op.name)) is not None and len(op.operands) == 2:
        a, b = (per_core_values(v, num_cores, core_id_op, memo) for v in op.operands)
        if a is not None and b is not None and not (0 in b and op.name in DIVISIONS):
            floor = _NON_NEGATIVE.get(op.name)
            if floor is not None and a and min(a) >= 0 and min(b) > 0:
                fn = floor  # truncating and flooring agree there (`% n` of a core's ring)
            result = tuple(map(fn, a, b))
    memo[value] = result
    return result
