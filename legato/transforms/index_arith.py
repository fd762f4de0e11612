"""Compile-time evaluation of `index` arithmetic: what an `arith` op on `index` values computes
(signed, with MLIR's rounding), shared by the passes that evaluate a value per core."""

from __future__ import annotations

from collections.abc import Callable

INDEX_OPS: dict[str, Callable[[int, int], int]] = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divsi": lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    "arith.remsi": lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)),
    "arith.floordivsi": lambda a, b: a // b,
    "arith.minsi": min,
    "arith.maxsi": max,
}
DIVISIONS = ("arith.divsi", "arith.remsi", "arith.floordivsi")  # undefined for a zero divisor
