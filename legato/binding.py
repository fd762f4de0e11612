"""The one argument binder: a kernel argument against its `TensorSpec`, for the JIT
(`legato.jit.kernel`), the interpreters (`legato.interp.common`) and the runtime
(`legato.targets.bertha.runtime` / `abi`).

It checks the value (a torch tensor or numpy array), its dtype, rank, static dims and dynamic dims
against their bounds; the arguments a kernel writes for writeability and for sharing memory; and
converts a value to the C-contiguous numpy array every executor works on (`bind`). Every refusal
is an `ArgumentError` (a `LegatoRuntimeError`); a caller passes the subclass it documents
(`ABIError`, `InterpArgumentError`) as `error`, so the family is one and the messages are the same
everywhere. `what` names the argument (and the kernel) at the head of each message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from legato.arrays import copy_back, is_torch_tensor, torch_to_numpy
from legato.errors import ArgumentError
from legato.types import DType, TensorSpec, dtype_of


@dataclass
class BoundArg:
    """One argument as an executor sees it: `value` (a C-contiguous numpy array for a tensor, or
    a scalar); when `writeback`, `value` is a private copy and `finish()` copies it back into the
    caller's `original`."""

    value: Any
    original: Any = None
    writeback: bool = False

    def finish(self) -> None:
        if self.writeback:
            copy_back(self.original, self.value)


def _dtype_str(dtype: DType) -> str:
    try:
        return str(dtype.torch)
    except Exception:  # noqa: BLE001 - torch absent: numpy's name says the same
        return str(dtype.numpy)


def check_tensor(spec: TensorSpec, x, what: str, error: type[ArgumentError] = ArgumentError):
    """Raise `error` unless `x` is a CPU torch tensor or a numpy array of type `spec`."""
    if not (is_torch_tensor(x) or isinstance(x, np.ndarray)):
        raise error(
            f"{what}: expected a torch tensor or numpy array of type {spec}, got {type(x).__name__}"
        )
    if is_torch_tensor(x) and x.device.type != "cpu":
        raise error(f"{what}: tensor is on {x.device}; pass a CPU tensor")
    if is_torch_tensor(x) and str(x.layout) != "torch.strided":
        raise error(f"{what}: tensor has layout {x.layout}; pass a dense tensor (`.to_dense()`)")
    try:
        actual = dtype_of(x)
    except TypeError as e:
        raise error(f"{what}: {e}; expected {spec.dtype.name}") from None
    check_type(spec, actual, x.shape, what, error, got=f"{actual.name} ({x.dtype})")


def check_type(
    spec: TensorSpec,
    dtype: DType,
    shape: Sequence[int],
    what: str,
    error: type[ArgumentError] = ArgumentError,
    got: str | None = None,
) -> None:
    """Raise `error` unless a value of `dtype` and `shape` fits `spec` (dtype, rank, static dims,
    dynamic dims at most their bound). `got` spells the value's dtype in the message (default:
    the DType and its numpy name)."""
    if dtype != spec.dtype:
        raise error(
            f"{what}: dtype mismatch: expected {spec.dtype.name} ({_dtype_str(spec.dtype)}), "
            f"got {got or f'{dtype.name} ({dtype.numpy})'}"
        )
    shape = tuple(int(d) for d in shape)
    if len(shape) != spec.rank:
        raise error(f"{what}: expected a rank-{spec.rank} tensor {spec}, got shape {shape}")
    for i, (dim, n) in enumerate(zip(spec.dims, shape)):
        if dim.is_dynamic:
            if n > dim.bound:
                raise error(
                    f"{what}: dim {i} is {n}, above its declared upper bound {dim.bound} "
                    f"(type {spec}); the binary is sized for at most {dim.bound}"
                )
        elif n != dim.size:
            raise error(
                f"{what}: dim {i} must be {dim.size} (type {spec}), got {n} (shape {shape})"
            )


def bind(x) -> BoundArg:
    """`x` (a checked torch tensor or numpy array) as a C-contiguous numpy array: the caller's
    memory when it can be, else a copy written back by `finish()` (never into a read-only array,
    which the kernel then only reads: `check_writes` refuses it as an output)."""
    if is_torch_tensor(x):
        arr, copied = torch_to_numpy(x)
        return BoundArg(arr, x, copied)
    if x.flags.c_contiguous and x.flags.writeable:
        return BoundArg(x, x, False)
    return BoundArg(np.ascontiguousarray(x).copy(), x, bool(x.flags.writeable))


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return bool(np.shares_memory(a, b, max_work=1 << 20))
    except np.exceptions.TooHardError:  # pragma: no cover - exotic strides: be conservative
        return bool(np.may_share_memory(a, b))


def _self_overlapping(a: np.ndarray) -> bool:
    """Whether two elements of `a` share memory (a broadcast or `expand`ed view: a stride of 0,
    or strides too small for the dims inside them)."""
    dims = sorted((abs(st), n) for st, n in zip(a.strides, a.shape) if n > 1)
    need = a.itemsize
    for stride, n in dims:
        if stride < need:
            return True
        need = stride * n
    return False


def check_writes(
    written: Sequence[tuple[str, np.ndarray]], error: type[ArgumentError] = ArgumentError
) -> None:
    """Refuse a written argument that is read-only, and two written arguments that share memory
    (the result would depend on the order of the write-backs). `written`: (name, an array sharing
    the caller's memory) of every argument the kernel writes. A read argument may alias anything:
    every argument is copied in before the kernel runs and written back after it, so the kernel
    reads the values the arguments had at the call."""
    for name, arr in written:
        if not arr.flags.writeable:
            raise error(
                f"argument {name!r} is read-only but the kernel writes it; pass a writeable array"
            )
        if arr.size and _self_overlapping(arr):
            raise error(
                f"argument {name!r} has elements that share memory (strides {arr.strides} for "
                f"shape {arr.shape}: a broadcast or expanded view) and the kernel writes it; "
                "pass a tensor of its own (`.clone()`, `np.array(...)`)"
            )
    for k, (n1, a1) in enumerate(written):
        for n2, a2 in written[k + 1 :]:
            if a1.size and a2.size and _overlap(a1, a2):
                raise error(
                    f"arguments {n1!r} and {n2!r} overlap in memory and the kernel "
                    "writes both; pass separate tensors"
                )
