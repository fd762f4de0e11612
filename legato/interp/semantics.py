"""The value semantics of Legato's tensor ops, on numpy arrays: the one definition every level
(legato, core, backend interpreters, and the emulator's VPU) calls, so all compute the same bits.

Rules (they match torch on CPU for the arithmetic ops, and stay within a bf16 ulp of it for the
transcendental ones). Floating-point elementwise ops, casts between float types and the float
reductions *call the VPU's own definition* (`legato.targets.bertha.vpu`), so the interpreters and
the emulator share one function:

* **Floating elementwise** (`bf16`, `f16`, `f32`): operands are converted exactly to float64, the
  op is applied in float64, rounded (nearest even) to float32 (the VPU's result), then to the
  result dtype. For `add sub mul div max min neg abs` (and `sqrt`) this equals one IEEE fp32
  operation, i.e. torch's bf16/f32 result bit for bit. `gelu` is the exact (erf) form, torch's
  default, `gelu_tanh` torch's tanh approximation; `rsqrt(x) = 1/sqrt(x)`,
  `sigmoid(x) = 1/(1+exp(-x))`, `silu(x) = x*sigmoid(x)`, `softplus(x) = log1p(exp(x))` (x
  above 20: x). The comparisons `eq ne lt le gt ge` give 1 or 0 in the result dtype (NaN:
  false, `ne` true). `clamp(x, lo, hi) = min(max(x, lo), hi)`, bounds rounded to x's dtype.
  The op list is `legato.opset`'s.
  `max`/`min` propagate NaN (torch.maximum semantics).
* **Integer elementwise** (`i8 i32 i64`): wrap-around `add sub mul neg abs`, `max min`, and `div`
  as floor division (torch's `//`).
* **Reductions** (`sum mean max min` over one axis): `sum` accumulates in fp32 over the axis in
  increasing index order (the order a tiled lowering keeps by carrying an fp32 accumulator),
  `mean = sum / n` in fp32; both round once to the result dtype. `max`/`min` are exact.
* **Matmul**: `legato.numerics.matmul_acc` (the MPU's passes over K chunks of 256: exact dot
  products rounded to fp32, added in fp32), then one rounding; f32
  operands: `legato.numerics.matmul_f32_split` (three bf16 passes, one f32 accumulator).
* **Cast**: float -> float rounds to nearest even; float -> int truncates toward zero and
  saturates (NaN -> 0); int -> float rounds to nearest; int -> int wraps.

Broadcasting follows numpy/torch. Every function returns a fresh array of the result dtype.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import ml_dtypes
import numpy as np

from legato import numerics, opset
from legato.targets.bertha import vpu

FLOAT_DTYPES = (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(np.float32))

UNARY_OPS = tuple(o.name for o in opset.legato_unary())
"""The legato unary ops (`legato.opset`), by legato name."""
BINARY_OPS = tuple(o.kind for o in opset.legato_binary())
"""The legato binary ops (`legato.opset`), by core kind (`max`, not `maximum`)."""
REDUCTIONS = ("sum", "mean", "max", "min")
_INT = {o.kind: o.i64 for o in opset.legato_binary() if o.i64 is not None}


def is_float(dtype) -> bool:
    return np.dtype(dtype) in FLOAT_DTYPES


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float32)


def _vpu():
    return vpu


def unary(name: str, x: np.ndarray, out_dtype=None) -> np.ndarray:
    """Elementwise `name(x)` rounded to `out_dtype` (default: x's dtype)."""
    x = np.asarray(x)
    out_dtype = np.dtype(out_dtype if out_dtype is not None else x.dtype)
    if name not in UNARY_OPS:
        raise KeyError(f"unknown unary op {name!r}")
    if is_float(x.dtype):
        return _vpu().unary(name, x, out_dtype)
    if name in ("neg", "abs"):
        return opset.BY_KIND[opset.UNARY, name].i64(x).astype(out_dtype)
    # integer operands of a transcendental op: computed like torch (as float) then cast
    return cast(unary(name, x.astype(np.float32), np.float32), out_dtype)


def binary(name: str, a: np.ndarray, b: np.ndarray, out_dtype=None) -> np.ndarray:
    """Elementwise `a name b` (numpy broadcasting), rounded to `out_dtype` (default: a's)."""
    a = np.asarray(a)
    b = np.asarray(b)
    out_dtype = np.dtype(out_dtype if out_dtype is not None else a.dtype)
    if name not in BINARY_OPS:
        raise KeyError(f"unknown binary op {name!r}")
    if is_float(a.dtype) or is_float(b.dtype):
        return _vpu().binary(name, a, b, out_dtype)
    with np.errstate(all="ignore"):
        if name == "div":
            if np.any(b == 0):
                raise ZeroDivisionError("integer division by zero")
            r = np.floor_divide(a, b)
        else:
            r = _INT[name](a, b)
    return r.astype(out_dtype)


def reduce(name: str, x: np.ndarray, axis: int, keepdims: bool = False, out_dtype=None):
    """Reduce `x` over `axis` (see the module rules), rounded to `out_dtype` (default x's)."""
    x = np.asarray(x)
    out_dtype = np.dtype(out_dtype if out_dtype is not None else x.dtype)
    axis = axis % x.ndim if x.ndim else 0
    if name not in REDUCTIONS:
        raise KeyError(f"unknown reduction {name!r}")
    n = x.shape[axis]
    if name in ("max", "min"):
        if n == 0:
            raise ValueError(f"{name} over an empty axis")
        r = (np.maximum if name == "max" else np.minimum).reduce(x, axis=axis, keepdims=keepdims)
        return cast(r, out_dtype)
    if (is_float(x.dtype) or is_float(out_dtype)) and name == "sum":
        moved = np.moveaxis(x, axis, -1)
        lead = moved.shape[:-1]
        r = _vpu().row_sum(moved.reshape(-1, n), np.float32).reshape(lead)
        if keepdims:
            r = np.expand_dims(r, axis)
        return cast(r, out_dtype)
    if is_float(x.dtype) or is_float(out_dtype):
        acc_dtype = np.float32
    else:
        acc_dtype = np.int64
    moved = np.moveaxis(x, axis, 0).astype(acc_dtype)
    acc = np.zeros(moved.shape[1:], acc_dtype)
    with np.errstate(all="ignore"):
        if n:  # sequential, increasing index (the order tiling preserves): ufunc.accumulate
            # is that loop from moved[0]; `+ 0` gives a zero sum the +0.0 the loop from 0 gives
            acc = np.add.accumulate(moved, axis=0, dtype=acc_dtype)[-1] + acc
        if name == "mean":
            if acc_dtype is np.float32:
                acc = (acc / np.float32(n)).astype(np.float32)
            else:
                acc = np.floor_divide(acc, n)
    if keepdims:
        acc = np.expand_dims(acc, axis)
    return cast(acc, out_dtype)


def matmul(a: np.ndarray, b: np.ndarray, out_dtype=None) -> np.ndarray:
    """`a @ b` for 2-D operands: `numerics.matmul_acc` (fp32), one rounding to `out_dtype`.
    f32 operands: `numerics.matmul_f32_split` (three bf16 MPU passes)."""
    a = np.asarray(a)
    out_dtype = np.dtype(out_dtype if out_dtype is not None else a.dtype)
    if a.dtype == np.float32 or np.asarray(b).dtype == np.float32:
        return numerics.round_to(numerics.matmul_f32_split(a, b), out_dtype)
    return numerics.round_to(numerics.matmul_acc(a, b), out_dtype)


def cast(x: np.ndarray, out_dtype) -> np.ndarray:
    """Convert to `out_dtype` by the module's cast rules."""
    x = np.asarray(x)
    out_dtype = np.dtype(out_dtype)
    if x.dtype == out_dtype:
        return x.copy()
    if is_float(x.dtype) and is_float(out_dtype):
        return _vpu().convert(x, out_dtype)
    if is_float(x.dtype) and not is_float(out_dtype):
        if out_dtype == np.bool_:
            return x.astype(np.float32) != 0
        return _vpu().convert(x, out_dtype)  # trunc toward zero, saturating, NaN to 0
    return x.astype(out_dtype)


def clamp(x: np.ndarray, lo=None, hi=None) -> np.ndarray:
    """`min(max(x, lo), hi)` with the bounds rounded to x's dtype (torch.clamp; NaN stays)."""
    x = np.asarray(x)
    r = x.copy()
    for name, bound in (("max", lo), ("min", hi)):
        if bound is not None:
            r = binary(name, r, full((), bound, x.dtype), x.dtype)
    return r


def full(shape, value, dtype) -> np.ndarray:
    """A constant tensor: `value` rounded to `dtype` and broadcast to `shape`."""
    return np.full(
        tuple(shape),
        cast(np.asarray(value, np.float64 if isinstance(value, float) else np.int64), dtype),
        dtype=np.dtype(dtype),
    )


ELEMENTWISE: dict[str, Callable[..., np.ndarray]] = {
    **{n: functools.partial(unary, n) for n in UNARY_OPS},
    **{n: functools.partial(binary, n) for n in BINARY_OPS},
}
