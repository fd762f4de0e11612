"""Numerics of the VPU instructions (the definition the interpreters must match).

Elementwise ops convert their inputs exactly to float64, apply the operation in float64, round
(nearest-even) to float32 and then, for a narrower dtype, from float32 to the instruction's dtype.
The float64 function of each op is its row's in `legato.opset` (defined in `legato.numerics`).
For f32 add/sub/mul/div/sqrt this equals numpy's float32 result. On i32 the VPU computes the rows
with an int64 function (`add sub mul max min`, the comparisons, `neg abs copy`) exactly, wrapping
to 32 bits. `rsum` accumulates in fp32 over columns in increasing order and rounds once; `rmax`
is exact.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from legato import opset


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float32)


# Ops computed directly in float32, bit-identical to the float64-then-round definition (the
# rows marked `f32_exact` in `legato.opset`): for + - * / and sqrt of float32 operands (bf16 and
# f16 convert exactly), rounding the f64 result to f32 gives the correctly rounded f32 result
# because 53 >= 2*24 + 2 (double rounding is innocuous; in the f32 subnormal range a sum is
# exact, and a product or quotient is farther from an f32 midpoint than f64's rounding error);
# NaNs come out with the same bits (checked on random bit patterns). Not max/min/neg/abs/copy:
# exact, but the f64 round trip quiets a signaling NaN and may pick the other NaN operand.
F32_EXACT = frozenset(o.kind for o in opset.OPS if o.f32_exact)

BINARY = {o.kind: o.f64 for o in opset.family(opset.BINARY)}
UNARY = {o.kind: o.f64 for o in opset.family(opset.UNARY)}
INT_BINARY = tuple(o.kind for o in opset.family(opset.BINARY) if o.i64 is not None)
INT_UNARY = tuple(o.kind for o in opset.family(opset.UNARY) if o.i64 is not None)
_INT_FN = {o.kind: o.i64 for o in opset.OPS if o.i64 is not None}


def _is_int(dtype) -> bool:
    return np.dtype(dtype).kind in "iu"


def binary(op: str, x: np.ndarray, y: np.ndarray, dtype) -> np.ndarray:
    if _is_int(dtype):
        if op not in INT_BINARY:
            raise ValueError(f"vpu.{op} on {np.dtype(dtype)}: integer ops are {INT_BINARY}")
        r = _INT_FN[op](np.asarray(x).astype(np.int64), np.asarray(y).astype(np.int64))
        return r.astype(dtype)  # wraps (two's complement)
    with np.errstate(all="ignore"):
        if op in F32_EXACT:
            return BINARY[op](_f32(x), _f32(y)).astype(dtype)
        return _round(BINARY[op](_f64(x), _f64(y)), dtype)


def unary(op: str, x: np.ndarray, dtype) -> np.ndarray:
    if _is_int(dtype):
        if op not in INT_UNARY:
            raise ValueError(f"vpu.{op} on {np.dtype(dtype)}: integer ops are {INT_UNARY}")
        return _INT_FN[op](np.asarray(x).astype(np.int64)).astype(dtype)
    with np.errstate(all="ignore"):
        if op in F32_EXACT:
            return UNARY[op](_f32(x)).astype(dtype)
        return _round(UNARY[op](_f64(x)), dtype)


def select(cond: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """`vpu.sel`: src where cond is nonzero (a float mask: NaN is true, -0.0 false; i1: any
    nonzero byte), else dst; elements are moved, not rounded (src and dst have one dtype)."""
    c = np.asarray(cond)
    truth = c.view(np.uint8) != 0 if c.dtype == np.bool_ else c.astype(np.float64) != 0
    return np.where(truth, np.asarray(src), np.asarray(dst)).astype(np.asarray(dst).dtype)


def _round(x: np.ndarray, dtype) -> np.ndarray:
    return np.asarray(x).astype(np.float32).astype(dtype)


def convert(x: np.ndarray, dtype) -> np.ndarray:
    """`vpu.cvt`: to a float `dtype`, round via float32 (every supported dtype converts exactly
    to float32). A float to an integer `dtype` (i32, i64: `opset.CAST_INT_RESULTS`) truncates
    toward zero as torch's `.to(torch.int64)`, saturating at the type's range, NaN to 0 (torch
    leaves those undefined; the argmax kernels convert only exact small integers)."""
    x = np.asarray(x)
    if _is_int(dtype) and not _is_int(x.dtype):
        info = np.iinfo(dtype)
        f = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0, posinf=0.0, neginf=0.0)
        # float(info.max) of int64 rounds up to 2^63, which no int64 holds: saturate apart
        lo, hi = f <= info.min, f >= float(info.max)
        r = np.where(lo | hi, 0.0, f).astype(dtype)
        r[lo | np.isneginf(x)] = info.min
        r[hi | np.isposinf(x)] = info.max
        return r
    return _round(x, dtype)


def row_sum(x: np.ndarray, dtype) -> np.ndarray:
    """x [R, C] -> [R]: fp32 sum over c in increasing order, rounded once to dtype."""
    x32 = np.asarray(x).astype(np.float32)
    if x32.shape[1] == 0:
        return np.zeros(x32.shape[0], np.float32).astype(dtype)
    # ufunc.accumulate is the sequential loop (out[c] = out[c-1] + x[c], each rounded to f32),
    # starting from x[0] instead of 0 + x[0]: the two differ only in the sign of a zero, which
    # `+ 0.0` makes +0.0 as the loop from +0.0 would (it never yields -0.0)
    acc = np.add.accumulate(x32, axis=1, dtype=np.float32)[:, -1]
    return (acc + np.float32(0.0)).astype(dtype)


def row_max(x: np.ndarray, dtype) -> np.ndarray:
    x = np.asarray(x)
    if x.shape[1] == 0:
        return np.full(x.shape[0], -np.inf, np.float32).astype(dtype)
    return _round(np.max(x.astype(np.float64), axis=1), dtype)


# ---- the compiled paths (native/vpu.c) ---------------------------------------------------------
# Codes of native/vpu.c for what it computes bit for bit as the functions above (tested in
# tests/unit/targets/test_vpu_native.py): f32 and bf16 only; anything else runs the numpy.
NATIVE_DTYPES = {np.dtype(np.float32): 0, np.dtype(ml_dtypes.bfloat16): 1}
NATIVE_BINARY = {"add": 0, "sub": 1, "mul": 2, "div": 3}
NATIVE_UNARY = {"copy": 0, "neg": 1, "abs": 2, "sqrt": 3, "rsqrt": 4, "exp": 5}
NATIVE_ESIZES = frozenset({1, 2, 4, 8})  # fill and transpose move elements of these sizes
