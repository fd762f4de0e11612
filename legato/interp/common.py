"""Helpers every level shares: argument binding and checking, scalar values, dtypes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute

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


@dataclass
class BoundArg:
    """One kernel argument as the interpreters see it: a numpy array written in place (for
    tensors), or a scalar. `writeback` copies a private copy back into the caller's object."""

    value: Any
    original: Any = None
    writeback: bool = False

    def finish(self) -> None:
        if self.writeback:
            _copy_back(self.original, self.value)


def _torch_to_numpy(t) -> tuple[np.ndarray, bool]:
    """A numpy view of a CPU torch tensor (bf16 through int16), or a copy when it has to be."""
    import torch

    if t.device.type != "cpu":
        return _torch_to_numpy(t.detach().cpu())[0], True
    x = t.detach()
    copied = not x.is_contiguous()
    if copied:
        x = x.contiguous()
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16), copied
    return x.numpy(), copied


def _copy_back(original, value: np.ndarray) -> None:
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    if torch is not None and isinstance(original, torch.Tensor):
        if original.dtype == torch.bfloat16:
            src = torch.from_numpy(value.view(np.int16).copy()).view(torch.bfloat16)
        else:
            src = torch.from_numpy(np.ascontiguousarray(value))
        with torch.no_grad():
            original.copy_(src.reshape(original.shape))
    else:
        original[...] = value


def to_array(x) -> tuple[np.ndarray, bool]:
    """(numpy array sharing the caller's memory when possible, whether it is a copy)."""
    if isinstance(x, np.ndarray):
        if x.flags.c_contiguous and x.flags.writeable:
            return x, False
        return np.ascontiguousarray(x).copy(), True
    if type(x).__module__.startswith("torch"):
        return _torch_to_numpy(x)
    raise TypeError(f"expected a numpy array or torch tensor, got {type(x).__name__}")


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
            try:
                arr, copied = to_array(arg)
            except TypeError as e:
                raise InterpArgumentError(f"kernel '{kernel_name}' argument {i}: {e}") from None
            check_tensor_arg(spec, arr, f"kernel '{kernel_name}' argument {i}")
            bound.append(BoundArg(arr, arg, copied))
        else:
            bound.append(BoundArg(_scalar_arg(spec, arg, kernel_name, i)))
    return bound


def check_tensor_arg(spec: TensorSpec, arr: np.ndarray, what: str) -> None:
    if arr.dtype != spec.dtype.numpy:
        got = arr.dtype.name if arr.dtype != np.dtype(ml_dtypes.bfloat16) else "bfloat16"
        raise InterpArgumentError(f"{what}: expected element type {spec.dtype.name}, got {got}")
    if arr.ndim != spec.rank:
        raise InterpArgumentError(
            f"{what}: expected rank {spec.rank} ({spec}), got shape {list(arr.shape)}"
        )
    for d, (dim, n) in enumerate(zip(spec.dims, arr.shape)):
        if dim.is_dynamic:
            if n > dim.bound:
                raise InterpArgumentError(
                    f"{what}: dim {d} is {n}, above its bound {dim.bound} ({spec})"
                )
        elif n != dim.size:
            raise InterpArgumentError(
                f"{what}: dim {d} must be {dim.size}, got {n} (shape {list(arr.shape)}, "
                f"expected {spec})"
            )


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
