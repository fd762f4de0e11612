"""The MPU numerics of the emulator's `mpu.ldw` / `mpu.mm`, through the compiled helpers when
they are built (`native_build.py`), else `legato.numerics` itself.

`numerics.MpuWeight` and `numerics.mpu_matmul` are the reference: the compiled path computes
the same statistics and runs the same proof steps over the same f64 GEMM (numpy's BLAS), and
hands the elements the proof does not settle (a few per pass) to the reference's exact path,
so both give the same bits (tests/unit/targets/test_mpu_fast.py compares them). What it saves
is the numpy calls around the GEMM: ~50 us of fixed cost per pass and ~35 us per weight tile
(issue 15's profile), on bf16 operands, the only ones the MPU has.

`$LEGATO_NATIVE=0` runs the reference even when the extension is built (`native.ENABLED`).
"""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np

from legato import numerics
from legato.targets.bertha import native

_BF16 = np.dtype(ml_dtypes.bfloat16)

NATIVE = native.ENABLED
"""Whether `weight` and `matmul` use the compiled helpers (a test may flip it)."""


def weight(values: np.ndarray, reuse: numerics.MpuWeight | None = None) -> numerics.MpuWeight:
    """`numerics.MpuWeight` of a copy of `values` (the same fields, the same bits), but for its
    f64 values: `f64` stays None until a pass needs them (`f64_of`; a tile whose passes all have
    at most `SMALL_M` rows never does: the decoder layer's and GEMV's 6688 tiles are each read
    by one 1-row pass). `reuse`: a weight this function built that nobody reads any more (the
    tile an `mpu.ldw` replaces): its arrays are refilled instead of allocated (fresh ~256 KiB
    arrays per tile cost page faults)."""
    if not (NATIVE and values.dtype == _BF16 and values.ndim == 2 and values.size):
        return numerics.MpuWeight(values.copy())
    ffi, lib = native.ffi, native.lib
    k, n = values.shape
    w = reuse
    if not isinstance(w, _Weight) or w.shape != values.shape:
        w = _Weight.__new__(_Weight)
        w.values, w.shape, w.native = np.empty((k, n), _BF16), values.shape, True
        w.cm, w.v = np.empty(n, np.float64), np.empty(n, np.float64)
        w.spare = w.spare_p = w.f64_p = None
        w.ptrs = (
            ffi.from_buffer("uint16_t[]", w.values),
            ffi.from_buffer("double[]", w.cm),
            ffi.from_buffer("double[]", w.v),
            ffi.new("double *"),
        )
    elif w.f64 is not None:
        w.spare, w.spare_p = w.f64, w.f64_p  # refilled by the next `f64_of`
    w.f64 = w.f64_p = None
    np.copyto(w.values, values)
    pv, pcm, pv2, vmax = w.ptrs
    finite = lib.mpu_weight(pv, k, n, ffi.NULL, pcm, pv2, vmax)
    w.vmax, w.finite = np.float64(vmax[0]), bool(finite)
    return w


class _Weight(numerics.MpuWeight):
    """A weight `weight` built: `f64` is None until `f64_of` fills it; `spare` is the f64
    array of the tile it replaced (reused by that fill), or None. `ptrs`: C pointers to
    `values`, `cm`, `v` and a double for `vmax` (the arrays are refilled in place, never
    replaced, so the pointers stay valid: made once per weight, not per call); `f64_p` and
    `spare_p` those of `f64` and `spare`."""

    __slots__ = ("spare", "ptrs", "f64_p", "spare_p")


def f64_of(w: numerics.MpuWeight) -> np.ndarray:
    """`w.f64`, the tile's f64 values, converted on the first call after its `weight`."""
    if w.f64 is None:
        buf, p = w.spare, w.spare_p
        if buf is None:
            buf = np.empty(w.shape, np.float64)
            p = native.ffi.from_buffer("double[]", buf)
        native.lib.mpu_bf16_f64(w.ptrs[0], w.values.size, p)
        w.f64, w.f64_p = buf, p
    return w.f64


SMALL_M = 2
"""Passes of at most this many rows compute their f64 GEMM in compiled code from the tile's
bf16 bits (`mpu_small`, vectorized for the host's CPU) instead of numpy's BLAS on its f64
copy: for so few rows, converting the tile costs more than the multiply-adds (the decoder
layer's and GEMV's passes have one row; from ~4 rows BLAS on the f64 copy is as fast)."""


_scratch = threading.local()  # per thread: (name, shape) -> an array `matmul` reuses


def _bufs(m: int, k: int, n: int) -> tuple:
    """`matmul`'s scratch arrays for an [m, k] x [k, n] pass with C pointers to them, the same
    ones on every call of this thread (their contents are consumed before the call returns):
    (a64, s, rs, u, todo, and the pointers of a64, rs, u, s, todo)."""
    d = getattr(_scratch, "d", None)
    if d is None:
        d = _scratch.d = {}
    key = (m, k, n)
    b = d.get(key)
    if b is None:
        ffi = native.ffi
        a64, s = np.empty((m, k), np.float64), np.empty((m, n), np.float64)
        rs, u = np.empty(m, np.float64), np.empty(m, np.float64)
        todo = np.empty(m * n, np.int64)
        ptrs = tuple(ffi.from_buffer("double[]", x) for x in (a64, rs, u, s))
        b = d[key] = (a64, s, rs, u, todo, *ptrs, ffi.from_buffer("long[]", todo))
    return b


def matmul(a: np.ndarray, w: numerics.MpuWeight, acc: np.ndarray | None = None) -> np.ndarray:
    """`numerics.mpu_matmul(a, w, acc)`: f32 [M, N] (the same bits)."""
    if not (
        NATIVE
        and a.dtype == _BF16
        and w.values.dtype == _BF16
        and a.ndim == 2
        and a.shape[1] == w.shape[0]
        and a.size
        and w.shape[1]
    ):
        if isinstance(w, _Weight):
            f64_of(w)  # the reference reads it
        return numerics.mpu_matmul(a, w, acc)
    ffi, lib = native.ffi, native.lib
    a = np.ascontiguousarray(a)
    m, k = a.shape
    n = w.shape[1]
    a64, s, rs, u, todo, pa64, prs, pu, ps, ptodo = _bufs(m, k, n)
    lib.mpu_rows(ffi.from_buffer("uint16_t[]", a), m, k, pa64, prs, pu)
    wp = w.ptrs if isinstance(w, _Weight) else None
    if m <= SMALL_M and w.f64 is None:
        lib.mpu_small(pa64, m, k, wp[0], n, ps)
    else:
        with np.errstate(invalid="ignore"):
            np.matmul(a64, f64_of(w), out=s)  # numpy's BLAS, as the reference
    out = np.empty((m, n), np.float32)
    if acc is not None:
        acc = np.ascontiguousarray(acc, dtype=np.float32)
    if wp is None:  # a weight `weight` did not build (numerics.MpuWeight)
        wp = (None, ffi.from_buffer("double[]", w.cm), ffi.from_buffer("double[]", w.v))
    nt = lib.mpu_finish(
        ps,
        m,
        k,
        n,
        prs,
        pu,
        wp[1],
        wp[2],
        float(w.vmax),
        ffi.NULL if acc is None else ffi.from_buffer("float[]", acc),
        ffi.from_buffer("float[]", out),
        ptodo,
    )
    if nt:
        settle(a, w, s, rs, todo[:nt], acc, out)
    return out


def settle(a, w: numerics.MpuWeight, s, rs, todo, acc, out) -> None:
    """The elements of a pass that `mpu_finish` left (flat indices `todo` of `out` [M, N], f32)
    by the reference's exact path, then + 0.0 and the `acc` add (None: none), into `out`;
    `s` and `rs` are the pass's f64 sums and row bounds. (`matmul`'s, and the emulator's for
    the passes native/loop.c runs, `Emulator._loop_settle`.)"""
    m, n = out.shape
    ii, jj = np.divmod(todo, n)
    r = np.zeros((m, n), np.float32)
    with np.errstate(all="ignore"):
        numerics.settle_unproved(a, w, s, rs, r, ii, jj)
        vals = r[ii, jj] + np.float32(0.0)
        if acc is not None:
            vals = acc[ii, jj] + vals
    out[ii, jj] = vals
