"""The one definition of Legato's numerics, shared by every interpreter and the emulator.

All levels call these functions, so a kernel computes the same bits at every level.

MPU (`mpu_matmul`, one `mpu.mm`): each dot product over the pass's K (<= 256) is exact, rounded
once to f32, then added to the f32 accumulator with one f32 addition. No summation order is part
of the definition, so it runs on f64 BLAS (with a per-element proof that the f64 value rounds to
the exact sum's f32, else an exact sum; `mpu_matmul`'s docstring) yet means one thing on every
machine. A matmul over a longer K (`matmul_acc`) is the MPU's passes over K chunks of
`MPU_TILE_K`, in order, as the compiler tiles it.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

bfloat16 = ml_dtypes.bfloat16


MPU_TILE_K = 256
"""The K of one MPU pass (`ComputeModel.mpu_tile_k` of every Bertha model, checked by a test): a
matmul over a longer K is defined as chunks of this many k, in increasing order."""

_BF16 = np.dtype(bfloat16)
_PRECISION = {_BF16: 8, np.dtype(np.float16): 11, np.dtype(np.float32): 24}  # significand bits
_NAN32 = np.float32(np.nan)  # the one NaN an MPU dot product returns (0x7fc00000)
_F32_TOP = 2.0**128  # where f32 would put its next value after the largest finite one


def _f32_round(p: np.ndarray) -> np.float32:
    """The exact sum of the f64 values `p` (each exact), rounded once to f32 (nearest-even)."""
    p = p.tolist()
    r = math.fsum(p)  # the exact sum rounded to f64
    with np.errstate(over="ignore"):
        x = np.float32(r)
    xv = float(x) if np.isfinite(x) else math.copysign(_F32_TOP, r)
    if xv == r:
        return x  # exact in f32
    # f32(S) can differ from f32(r) only if r, rounded from S, landed on an f32 midpoint (f64
    # holds every f32 midpoint, so rounding never carries S across one)
    y = np.nextafter(x, np.float32(np.inf if r > xv else -np.inf))  # x's neighbour across r
    mid = (xv + float(y)) / 2.0  # exact: both are f32 values
    if r != mid:
        return x
    side = math.fsum(p + [-mid])  # the sign of S - mid (exact: fsum rounds correctly)
    if side == 0.0:
        return x  # a true tie: nearest-even, as numpy rounded r
    return x if (side > 0) == (xv > float(y)) else y


def _line_stats(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row (axis=1) or column (axis=0) of `x`: max |v| (f64; inf or NaN where the line holds
    an inf or NaN), and an integer L such that every element is a multiple of 2^L (0 for an
    all-zero line)."""
    if x.dtype == _BF16:
        # bits & 0x7fff order like |v|; the smallest nonzero one has the lowest exponent field E,
        # and a bf16 with field E (1 for subnormals) is a multiple of 2^(E - 134)
        m = np.ascontiguousarray(x).view(np.uint16) & np.uint16(0x7FFF)
        hi = (m.max(axis=axis).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        lo = ((m - np.uint16(1)).min(axis=axis).astype(np.int32) + 1) & 0xFFFF
        return hi, np.where(lo == 0, 0, np.maximum(lo >> 7, 1) - 134)
    prec = _PRECISION[x.dtype]
    ax = np.abs(x.astype(np.float64))
    with np.errstate(invalid="ignore"):
        hi = ax.max(axis=axis)
        lo = np.where(ax == 0, np.inf, ax).min(axis=axis)
    fin = np.isfinite(lo)
    return hi, np.where(fin, np.frexp(np.where(fin, lo, 1.0))[1] - prec, 0)


def mpu_matmul(
    a: np.ndarray, w: np.ndarray | MpuWeight, acc: np.ndarray | None = None
) -> np.ndarray:
    """One MPU pass (`mpu.mm`): fp32 `acc + round_f32(a @ w)`, `a` [M, K], `w` [K, N] (an array,
    or an `MpuWeight` prepared once for the passes over one weight tile: the same bits).

    Definition: each dot product `S[i, j] = sum_k a[i, k] * w[k, j]` is computed exactly (as an
    infinitely wide accumulator would) and rounded once, nearest-even, to f32; a zero result
    (exact, or a tiny sum rounded to zero) is +0.0; a sum with an inf or NaN product is +-inf
    when every such product is an inf of one sign, else NaN (always the one NaN 0x7fc00000).
    With `acc` (f32 [M, N]) the result is `acc + S` as one f32 addition per element, without it
    `S` itself: `mpu.mm ..., acc` equals a non-accumulating `mpu.mm` followed by an f32 add. No
    summation order is part of it.

    How it runs on BLAS and still gives exactly these bits (products of bf16, f16 or f32 values
    are exact in f64; `s` is numpy's f64 GEMM, in whatever order and with whatever FMA it uses):
    1. `s` *is* S where every partial sum is representable: all products of row i and column j
       are multiples of 2^(La_i + Lw_j) (the lowest bit of any nonzero a[i, :], w[:, j]) and
       `K * max_k |a[i,k]| * max_k |w[k,j]| < 2^(52 + La_i + Lw_j)`; for bf16 data that holds
       unless the exponents in a row and a column span about 30 bits together (randn-like
       data: about 99% of the dot products);
    2. else `s` is within `gamma_K * sum|p|` of S; where `s - d` and `s + d` (`d` over twice that
       bound) round to the same f32, so does S;
    3. the rest (S within `d` of an f32 rounding boundary, or an exact cancellation: a few per
       [512,256]x[256,128] pass) are summed exactly (`math.fsum` plus a tie check), and the dot
       products of a row or column holding an inf or NaN get their class.
    """
    a = np.asarray(a)
    if not isinstance(w, MpuWeight):
        w = np.asarray(w)
        if a.ndim != 2 or w.ndim != 2 or a.shape[1] != w.shape[0]:
            raise ValueError(f"matmul: inner dims differ ({a.shape} @ {w.shape})")
        if a.dtype not in _PRECISION or w.dtype not in _PRECISION:
            raise ValueError(
                f"matmul: operands must be bf16, f16 or f32, got {a.dtype} @ {w.dtype}"
            )
        w = MpuWeight(w)
    elif a.ndim != 2 or a.shape[1] != w.shape[0] or a.dtype not in _PRECISION:
        raise ValueError(f"matmul: a {a.dtype} {a.shape} does not fit weight {w.shape}")
    m, k = a.shape
    n = w.shape[1]
    if m == 0 or n == 0 or k == 0:
        r = np.zeros((m, n), np.float32)
    else:
        with np.errstate(invalid="ignore"):
            s = a.astype(np.float64) @ w.f64  # numpy's BLAS
        am, la = _line_stats(a, 1)
        rs = am * k  # >= sum_k |a[i, k]|
        with np.errstate(all="ignore"):
            r = s.astype(np.float32)
            # s is exact where every product is a multiple of 2^(La+Lw) and
            # sum |p| <= rs * cm < 2^(52+La+Lw) (then every partial sum is representable)
            u = np.ldexp(rs, -la)
            rows = np.nonzero(~(u * w.vmax < 2.0**52))[0]
            if rows.size:
                ii, jj = np.nonzero(~(np.multiply.outer(u[rows], w.v) < 2.0**52))
                if ii.size:
                    settle_unproved(a, w, s, rs, r, rows[ii], jj)
            r += np.float32(0.0)  # a zero result is +0.0 (NaN keeps its bits)
    if acc is None:
        return r
    return np.add(np.asarray(acc, dtype=np.float32), r, out=r)


class MpuWeight:
    """A weight tile `values` [K, N] (bf16, f16 or f32) with what every `mpu_matmul` pass over
    it needs from it alone, computed once: its f64 values and, per column, max |w| (`cm`), the
    lowest bit `lw` and `v = cm / 2^lw` (with `vmax`, their max). `mpu.ldw` builds one, and the
    passes up to the next `ldw` share it (the emulator's GEMM runs 4-8 passes per tile)."""

    __slots__ = ("values", "shape", "f64", "cm", "v", "vmax", "finite", "native")

    def __init__(self, w: np.ndarray):
        w = np.asarray(w)
        if w.ndim != 2 or w.dtype not in _PRECISION:
            raise ValueError(
                f"matmul: a weight must be 2-D bf16, f16 or f32, got {w.dtype} {w.shape}"
            )
        self.values = w
        self.native = False  # built by the emulator's compiled helpers (`mpu_fast.weight`)
        self.shape = w.shape
        self.f64 = w.astype(np.float64)
        if w.size:
            self.cm, lw = _line_stats(w, 0)
            with np.errstate(all="ignore"):
                self.v = np.ldexp(self.cm, -lw)
                self.vmax = self.v.max()
            self.finite = bool(np.isfinite(self.cm).all())


def settle_unproved(a, w: MpuWeight, s, rs, r, ii, jj):
    """Settle `r[ii, jj]`, the dot products of `mpu_matmul`'s pass (`s = a @ w.f64`, `rs` its
    row bounds) not proved exact in f64 (the emulator's compiled proof hands them here too,
    `legato.targets.bertha.mpu_fast`). Those of a row of `a` or a
    column of `w` holding an inf or NaN: every such sum is non-finite, the f64 sum gives its
    class (the same in any order), NaN made canonical. The others: where both ends of the error
    interval of `s` round to one f32, that one; the rest (rare) summed exactly."""
    cm, wv = w.cm, w.values
    with np.errstate(all="ignore"):
        rsi, cmj = rs[ii], cm[jj]
        if not (w.finite and np.isfinite(rsi).all()):
            bad = ~(np.isfinite(rsi) & np.isfinite(cmj))
            bi, bj = ii[bad], jj[bad]
            x = (a[bi].astype(np.float64) * wv[:, bj].T.astype(np.float64)).sum(axis=1)
            x = x.astype(np.float32)
            x[np.isnan(x)] = _NAN32
            r[bi, bj] = x
            keep = ~bad
            ii, jj, rsi, cmj = ii[keep], jj[keep], rsi[keep], cmj[keep]
        # any summation order (and FMA) errs by at most gamma_K * sum|p| <= K u/(1-K u) rs*cm
        # (rs = K max|a[i, :]|);
        # d is over twice that, so [s-d, s+d] (each end rounded) still holds S
        d = (2.0 * (a.shape[1] + 2) * 2.0**-53) * rsi * cmj
        sv = s[ii, jj]
        lo = (sv - d).astype(np.float32)
        hi = (sv + d).astype(np.float32)
        same = lo.view(np.uint32) == hi.view(np.uint32)
        if same.all():
            r[ii, jj] = hi
            return
        r[ii[same], jj[same]] = hi[same]
    for i, j in zip(ii[~same], jj[~same]):
        r[i, j] = _f32_round(a[i].astype(np.float64) * wv[:, j].astype(np.float64))


def matmul_acc(
    a: np.ndarray, w: np.ndarray, acc: np.ndarray | None = None, k_tile: int = MPU_TILE_K
) -> np.ndarray:
    """fp32 `acc + a @ w` as the MPU computes it: K in chunks of `k_tile` (256, the MPU's weight
    tile) in increasing order, each chunk one `mpu_matmul` pass (f64 dot products rounded once to
    f32) added into the f32 accumulator. The compiler tiles a matmul's K exactly so (chunks of
    `mpu_tile_k` from k = 0, the accumulator carried in f32), so every level gets the same bits.

    `a` [M, K] and `w` [K, N] are bf16 (f16 and f32 values are accepted too: the definition is
    on values, so f32 arrays holding bf16 values give the bf16 bits, only slower).
    """
    a = np.asarray(a)
    w = np.asarray(w)
    m, k = a.shape
    k2, n = w.shape
    if k != k2:
        raise ValueError(f"matmul: inner dims differ ({k} vs {k2})")
    if k == 0:
        return np.zeros((m, n), np.float32) if acc is None else np.array(acc, dtype=np.float32)
    out = None if acc is None else np.asarray(acc, dtype=np.float32)
    for k0 in range(0, k, k_tile):
        out = mpu_matmul(a[:, k0 : k0 + k_tile], w[k0 : k0 + k_tile], out)
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
    over its K chunks in increasing order (`matmul_acc`: one `mpu_matmul` per chunk of
    `MPU_TILE_K`); `a_lo @ w_lo` is dropped. `a_hi + a_lo` keeps 16 of f32's 24 significand bits,
    so the result is within about 2^-16 relative of the exact product (not bit-equal to a true f32
    matmul). The lowering runs the same passes over the same K tiles, so it gets these bits.
    """
    a_hi, a_lo = split_bf16(a)
    w_hi, w_lo = split_bf16(w)
    acc = matmul_acc(a_hi, w_hi)
    acc = matmul_acc(a_hi, w_lo, acc)
    return matmul_acc(a_lo, w_hi, acc)


def round_to(x: np.ndarray, dtype) -> np.ndarray:
    """Round (nearest-even) to `dtype` (a numpy/ml_dtypes dtype)."""
    return np.asarray(x).astype(dtype)


# ---------------------------------------------------------------------------------------------
# Elementwise ops in float64 (the VPU's definition: `legato.targets.bertha.vpu` rounds each
# result to f32, then to the element type). `legato.opset` names each one in its op's row.
# ---------------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])
_GELU_TANH_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5  # torch's kBeta
_GELU_TANH_KAPPA = 0.044715
SOFTPLUS_THRESHOLD = 20.0
"""`softplus(x) = x` above this (torch's default `threshold`: beyond it log1p(exp(x)) == x in
every float type the VPU has)."""


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def rsqrt(x):
    return 1.0 / np.sqrt(x)


def erf(x):
    return _erf(x)


def gelu(x):
    """The exact (erf) form, torch's default `gelu`."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """torch's `gelu(x, approximate="tanh")`, in torch's order of operations."""
    inner = _GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * (x * x * x))
    return 0.5 * x * (1.0 + np.tanh(inner))


def softplus(x):
    """torch's `softplus` (beta 1, threshold 20): `log1p(exp(x))`, and `x` above the threshold."""
    with np.errstate(over="ignore"):
        return np.where(x > SOFTPLUS_THRESHOLD, x, np.log1p(np.exp(x)))


def identity(x):
    return x


def _mask(cmp):
    def f(a, b):
        return cmp(a, b).astype(np.float64)

    f.__name__ = cmp.__name__
    return f


def _int_mask(cmp):
    def f(a, b):
        return cmp(a, b).astype(np.int64)

    f.__name__ = cmp.__name__
    return f


# comparisons: 1 where true, 0 where false (NaN compares false, except `ne`: true)
EQ, NE, LT, LE, GT, GE = (
    _mask(f) for f in (np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal)
)
INT_EQ, INT_NE, INT_LT, INT_LE, INT_GT, INT_GE = (
    _int_mask(f)
    for f in (np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal)
)
