"""Helpers every level shares: argument binding (through `legato.binding`, the binder the JIT and
the runtime use too), scalar values, dtypes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute

from legato.binding import BoundArg, bind, check_tensor
from legato.dialects.legato import dtype_of_element_type
from legato.interp.errors import InterpArgumentError
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
