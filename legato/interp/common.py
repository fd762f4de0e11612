"""Helpers every level shares: argument binding (through `legato.binding`, the binder the JIT and
the runtime use too), scalar values, dtypes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FileLineColLoc, FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Operation

from legato.binding import BoundArg, bind, check_tensor
from legato.dialects.legato import dtype_of_element_type
from legato.interp.errors import InterpArgumentError
from legato.targets.bertha.arch import debug
from legato.types import TensorSpec


def np_dtype(element_type: Attribute) -> np.dtype:
    """numpy dtype of a builtin element type (`bf16` -> ml_dtypes.bfloat16)."""
    return dtype_of_element_type(element_type).numpy


def as_int(value: Any) -> int:
    """A Python int from an interpreter scalar (xDSL represents them as IntegerAttr)."""
    if isinstance(value, IntegerAttr):
        return value.value.data
    if isinstance(value, (int, np.integer)):
        return int(value)
    raise TypeError(f"expected an integer scalar, got {value!r}")


def index_value(value: int, bitwidth: int = 64) -> IntegerAttr:
    """An `index` scalar as xDSL's arith/scf interpreters represent it."""
    return IntegerAttr(value, IntegerType(bitwidth), truncate_bits=True)


def bind_args(
    specs: Sequence[TensorSpec | Attribute], args: Sequence[Any], kernel_name: str
) -> list[BoundArg]:
    """Check `args` against the kernel's signature (count, dtype, static dims, dynamic bounds)
    and bind them. Tensors share the caller's memory so outputs land in place."""
    if len(args) != len(specs):
        raise InterpArgumentError(
            f"kernel '{kernel_name}' takes {len(specs)} argument(s), got {len(args)}"
        )
    bound: list[BoundArg] = []
    for i, (spec, arg) in enumerate(zip(specs, args)):
        if isinstance(spec, TensorSpec):
            check_tensor(spec, arg, f"kernel '{kernel_name}' argument {i}", InterpArgumentError)
            bound.append(bind(arg))
        else:
            bound.append(BoundArg(_scalar_arg(spec, arg, kernel_name, i)))
    return bound


def _scalar_arg(t: Attribute, arg: Any, kernel_name: str, i: int):
    if isinstance(t, IntegerType | IndexType):
        if isinstance(arg, np.ndarray) and arg.ndim == 0:
            arg = arg.item()
        if not isinstance(arg, (int, np.integer)) or isinstance(arg, bool):
            raise InterpArgumentError(
                f"kernel '{kernel_name}' argument {i}: expected an integer scalar, got {arg!r}"
            )
        width = 64 if isinstance(t, IndexType) else t.width.data
        return IntegerAttr(int(arg), IntegerType(width), truncate_bits=True)
    if isinstance(arg, (int, float, np.floating, np.integer)):
        return FloatAttr(float(arg), t)
    raise InterpArgumentError(
        f"kernel '{kernel_name}' argument {i}: expected a float scalar, got {arg!r}"
    )


# -- device_print / device_assert (every level reports them through `arch.debug`) --------------


def _debug_entry(op: Operation, kind: str, nargs: int) -> debug.Entry:
    loc = op.location
    where = (
        (loc.filename.data, loc.line.data, loc.column.data)
        if isinstance(loc, FileLineColLoc)
        else None
    )
    message = op.message.data  # type: ignore[attr-defined]
    return debug.Entry(kind, 0, message, where, 0, nargs)


def module_name(core: int | None) -> str:
    """The emulator's name of the module of `core` (None: top)."""
    return "top" if core is None else f"core{core}"


def debug_print(prints: list, op: Operation, values: Sequence[Any], core: int | None) -> None:
    """`op` (a legato or core print) ran on the module of `core` with these values (numpy
    arrays, or index scalars): record it in `prints` and print it, as the emulator does
    (without a cycle: the interpreters have no time)."""
    vals = [v.copy() if isinstance(v, np.ndarray) else as_int(v) for v in values]
    entry = _debug_entry(op, "print", len(vals))
    rec = debug.PrintRecord(module_name(core), core, None, 0, entry.message, entry.loc, vals)
    prints.append(rec)
    debug.emit(rec)


def debug_assert(op: Operation, value: Any, core: int | None) -> None:
    """`op` (a legato or core assert) ran with condition `value`: raise `DeviceAssertError`
    unless every element is nonzero."""
    v = value if isinstance(value, np.ndarray) else as_int(value)
    debug.check_assert(_debug_entry(op, "assert", 1), v, module_name(core), core, None)
