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


def round_to(x: np.ndarray, dtype) -> np.ndarray:
    """Round (nearest-even) to `dtype` (a numpy/ml_dtypes dtype)."""
    return np.asarray(x).astype(dtype)
