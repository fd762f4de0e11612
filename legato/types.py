"""Element types and tensor types of the Legato language.

`legato.types.float("bfloat16")` names an element type; `TensorSpec` is what
`legato.get_model().tensor_type(dtype, shape, memory)` returns in a kernel signature.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from legato.errors import LegatoTypeError, LegatoValueError

MEMORY_SPACES = (
    "shared_dram",
    "virtual_dram",
    "mpu_dram",
    "pim_dram",
    "sram",
    "private_dram",
    "mpu_buffer",
    "mpu_weight",
)
# `pim_dram`: shared DRAM holding a weight in the PIM layout (docs/pim.md; a chip with use_pim)
SHARED_SPACES = ("shared_dram", "virtual_dram", "mpu_dram", "pim_dram")
CORE_SPACES = ("sram", "private_dram", "mpu_buffer", "mpu_weight")


@dataclass(frozen=True)
class DType:
    """An element type. `name` is the IR spelling (`bf16`, `f32`, `i32`, ...)."""

    name: str

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(_NUMPY[self.name])

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_float(self) -> bool:
        return self.name in ("bf16", "f16", "f32")

    @property
    def torch(self):
        import torch

        return {
            "bf16": torch.bfloat16,
            "f16": torch.float16,
            "f32": torch.float32,
            "i32": torch.int32,
            "i64": torch.int64,
            "i8": torch.int8,
            "i1": torch.bool,
        }[self.name]

    def __repr__(self) -> str:
        return f"legato.types.{self.name}"


_NUMPY = {
    "bf16": ml_dtypes.bfloat16,
    "f16": np.float16,
    "f32": np.float32,
    "i32": np.int32,
    "i64": np.int64,
    "i8": np.int8,
    "i1": np.bool_,
}

bf16 = DType("bf16")
f16 = DType("f16")
f32 = DType("f32")
i32 = DType("i32")
i64 = DType("i64")
i8 = DType("i8")
i1 = DType("i1")

_FLOAT_NAMES = {
    "bfloat16": bf16,
    "bf16": bf16,
    "float16": f16,
    "half": f16,
    "f16": f16,
    "float32": f32,
    "float": f32,
    "f32": f32,
}
_INT_NAMES = {"int32": i32, "i32": i32, "int64": i64, "i64": i64, "int8": i8, "i8": i8}


def float(name: str = "float32") -> DType:
    """`legato.types.float("bfloat16")`: a floating-point element type."""
    try:
        return _FLOAT_NAMES[name]
    except KeyError:
        raise LegatoValueError(
            f"unknown float type {name!r}; expected one of {sorted(_FLOAT_NAMES)}"
        ) from None


def int(name: str = "int32") -> DType:
    """`legato.types.int("int32")`: an integer element type."""
    try:
        return _INT_NAMES[name]
    except KeyError:
        raise LegatoValueError(
            f"unknown int type {name!r}; expected one of {sorted(_INT_NAMES)}"
        ) from None


def dtype_from_name(name: str) -> DType:
    """The DType whose IR spelling is `name` (`bf16`, `f32`, ...)."""
    if name not in _NUMPY:
        raise LegatoValueError(f"unknown element type {name!r}")
    return DType(name)


def dtype_of(array) -> DType:
    """The DType of a numpy array or torch tensor."""
    if hasattr(array, "dtype") and not isinstance(array.dtype, np.dtype):
        import torch

        table = {
            torch.bfloat16: bf16,
            torch.float16: f16,
            torch.float32: f32,
            torch.int32: i32,
            torch.int64: i64,
            torch.int8: i8,
            torch.bool: i1,
        }
        if array.dtype not in table:
            raise LegatoTypeError(f"unsupported torch dtype {array.dtype}")
        return table[array.dtype]
    for name, np_type in _NUMPY.items():
        if np.dtype(np_type) == array.dtype:
            return DType(name)
    raise LegatoTypeError(f"unsupported numpy dtype {array.dtype}")


@dataclass(frozen=True)
class Dim:
    """One dimension: static (`bound is None`, size known) or dynamic with an upper bound."""

    size: builtins.int | None  # None when dynamic
    bound: builtins.int

    @property
    def is_dynamic(self) -> bool:
        return self.size is None

    def __str__(self) -> str:
        return f"?{self.bound}" if self.is_dynamic else str(self.size)


def parse_dim(entry) -> Dim:
    """A shape entry: an int, or `(-1, bound)` for a dynamic dim with an upper bound."""
    if isinstance(entry, bool):
        raise LegatoTypeError(f"shape entry {entry!r} is not an int or (-1, bound)")
    if isinstance(entry, builtins.int):
        if entry == -1:
            raise LegatoTypeError(
                "dynamic dimension -1 has no upper bound; write (-1, bound), e.g. (-1, 128)"
            )
        if entry < 0:
            raise LegatoTypeError(f"shape entry {entry} is negative")
        return Dim(entry, entry)
    if isinstance(entry, (tuple, list)) and len(entry) == 2:
        size, bound = entry
        if size != -1:
            raise LegatoTypeError(
                f"shape entry {tuple(entry)!r}: a dynamic dim is written (-1, bound)"
            )
        if bound is None or not isinstance(bound, builtins.int) or bound <= 0:
            raise LegatoTypeError(
                f"dynamic dimension {tuple(entry)!r} has no valid upper bound; "
                "every dynamic dim needs a positive bound, e.g. (-1, 128)"
            )
        return Dim(None, bound)
    raise LegatoTypeError(f"shape entry {entry!r} is not an int or (-1, bound)")


@dataclass(frozen=True)
class TensorSpec:
    """A tensor type: element type, shape (static or bounded dynamic dims), memory space."""

    dtype: DType
    dims: tuple[Dim, ...]
    memory: str

    @staticmethod
    def make(dtype: DType, shape, memory: str) -> TensorSpec:
        if not isinstance(dtype, DType):
            raise LegatoTypeError(
                f"tensor_type: {dtype!r} is not an element type (use legato.types.float)"
            )
        if memory not in MEMORY_SPACES:
            raise LegatoValueError(
                f"unknown memory space {memory!r}; expected one of {', '.join(MEMORY_SPACES)}"
            )
        if isinstance(shape, builtins.int):
            shape = (shape,)
        return TensorSpec(dtype, tuple(parse_dim(e) for e in shape), memory)

    @property
    def rank(self) -> builtins.int:
        return len(self.dims)

    @property
    def bounds(self) -> tuple[builtins.int, ...]:
        return tuple(d.bound for d in self.dims)

    @property
    def dynamic_dims(self) -> tuple[builtins.int, ...]:
        return tuple(i for i, d in enumerate(self.dims) if d.is_dynamic)

    @property
    def max_bytes(self) -> builtins.int:
        n = self.dtype.itemsize
        for b in self.bounds:
            n *= b
        return n

    def with_memory(self, memory: str) -> TensorSpec:
        return TensorSpec(self.dtype, self.dims, memory)

    def __str__(self) -> str:
        return f"tensor<[{', '.join(map(str, self.dims))}], {self.dtype.name}, {self.memory}>"
