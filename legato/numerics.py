"""The one definition of Legato's numerics, shared by every interpreter and the emulator.

All levels call these functions, so a kernel computes the same bits at every level.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

bfloat16 = ml_dtypes.bfloat16


def matmul_acc(a: np.ndarray, w: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
    """fp32 `acc + a @ w`, summing over k in increasing order.

    `a` [M, K] and `w` [K, N] are bf16 (or f32); each product is formed in fp32 (exact for bf16
    inputs) and added to the running fp32 sum one k at a time. Tiling K into chunks that carry the
    fp32 accumulator therefore gives identical bits.
    """
    a32 = np.asarray(a).astype(np.float32)
    w32 = np.asarray(w).astype(np.float32)
    m, k = a32.shape
    k2, n = w32.shape
    if k != k2:
        raise ValueError(f"matmul: inner dims differ ({k} vs {k2})")
    out = np.zeros((m, n), np.float32) if acc is None else np.array(acc, dtype=np.float32)
    for i in range(k):
        out += a32[:, i : i + 1] * w32[i : i + 1, :]
    return out


def split_bf16(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`x` (f32) as `hi + lo`: `hi = bf16(x)`, `lo = bf16(x - hi)` (the subtraction in f32, exact)."""
    x32 = np.asarray(x).astype(np.float32)
    hi = x32.astype(bfloat16)
    lo = (x32 - hi.astype(np.float32)).astype(np.float32).astype(bfloat16)
    return hi, lo


def matmul_f32_split(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """fp32 `a @ w` of f32 operands on a bf16 MPU: three bf16 passes into one f32 accumulator.

    With `a = a_hi + a_lo` and `w = w_hi + w_lo` (`split_bf16`), the result is
    `a_hi @ w_hi + a_hi @ w_lo + a_lo @ w_hi`, accumulated in f32 in that fixed order, each pass
    summing k in increasing order (`matmul_acc`); `a_lo @ w_lo` is dropped. `a_hi + a_lo` keeps 16
    of f32's 24 significand bits, so the result is within about 2^-16 relative of the exact product
    (not bit-equal to a true f32 matmul). Tiling K per pass gives identical bits.
    """
    a_hi, a_lo = split_bf16(a)
    w_hi, w_lo = split_bf16(w)
    acc = matmul_acc(a_hi, w_hi)
    acc = matmul_acc(a_hi, w_lo, acc)
    return matmul_acc(a_lo, w_hi, acc)


def round_to(x: np.ndarray, dtype) -> np.ndarray:
    """Round (nearest-even) to `dtype` (a numpy/ml_dtypes dtype)."""
    return np.asarray(x).astype(dtype)
