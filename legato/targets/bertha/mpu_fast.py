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
        w.spare = None
    elif w.f64 is not None:
        w.spare = w.f64  # refilled by the next `f64_of`
    w.f64 = None
    np.copyto(w.values, values)
    vmax = ffi.new("double *")
    finite = lib.mpu_weight(
        ffi.from_buffer("uint16_t[]", w.values),
        k,
        n,
        ffi.NULL,
        ffi.from_buffer("double[]", w.cm),
        ffi.from_buffer("double[]", w.v),
        vmax,
    )
    w.vmax, w.finite = np.float64(vmax[0]), bool(finite)
    return w


class _Weight(numerics.MpuWeight):
    """A weight `weight` built: `f64` is None until `f64_of` fills it; `spare` is the f64
    array of the tile it replaced (reused by that fill), or None."""

    __slots__ = ("spare",)


def f64_of(w: numerics.MpuWeight) -> np.ndarray:
    """`w.f64`, the tile's f64 values, converted on the first call after its `weight`."""
    if w.f64 is None:
        buf = w.spare
        if buf is None:
            buf = np.empty(w.shape, np.float64)
        native.lib.mpu_bf16_f64(
            native.ffi.from_buffer("uint16_t[]", w.values),
            w.values.size,
            native.ffi.from_buffer("double[]", buf),
        )
        w.f64 = buf
    return w.f64


SMALL_M = 2
"""Passes of at most this many rows compute their f64 GEMM in compiled code from the tile's
bf16 bits (`mpu_small`, vectorized for the host's CPU) instead of numpy's BLAS on its f64
copy: for so few rows, converting the tile costs more than the multiply-adds (the decoder
layer's and GEMV's passes have one row; from ~4 rows BLAS on the f64 copy is as fast)."""


_scratch = threading.local()  # per thread: (name, shape) -> an array `matmul` reuses


def _buf(name: str, shape: tuple, dtype) -> np.ndarray:
    """A scratch array of `shape` for `matmul`, the same one on every call of this thread (its
    contents are consumed before the call returns)."""
    d = getattr(_scratch, "d", None)
    if d is None:
        d = _scratch.d = {}
    key = (name, shape)
    b = d.get(key)
    if b is None:
        b = d[key] = np.empty(shape, dtype)
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
    a64 = _buf("a64", (m, k), np.float64)
    rs = _buf("rs", (m,), np.float64)
    u = _buf("u", (m,), np.float64)
    lib.mpu_rows(
        ffi.from_buffer("uint16_t[]", a),
        m,
        k,
        ffi.from_buffer("double[]", a64),
        ffi.from_buffer("double[]", rs),
        ffi.from_buffer("double[]", u),
    )
    s = _buf("s", (m, n), np.float64)
    if m <= SMALL_M and w.f64 is None:
        lib.mpu_small(
            ffi.from_buffer("double[]", a64),
            m,
            k,
            ffi.from_buffer("uint16_t[]", w.values),
            n,
            ffi.from_buffer("double[]", s),
        )
    else:
        with np.errstate(invalid="ignore"):
            np.matmul(a64, f64_of(w), out=s)  # numpy's BLAS, as the reference
    out = np.empty((m, n), np.float32)
    todo = _buf("todo", (m * n,), np.int64)
    if acc is not None:
        acc = np.ascontiguousarray(acc, dtype=np.float32)
    nt = lib.mpu_finish(
        ffi.from_buffer("double[]", s),
        m,
        k,
        n,
        ffi.from_buffer("double[]", rs),
        ffi.from_buffer("double[]", u),
        ffi.from_buffer("double[]", w.cm),
        ffi.from_buffer("double[]", w.v),
        float(w.vmax),
        ffi.NULL if acc is None else ffi.from_buffer("float[]", acc),
        ffi.from_buffer("float[]", out),
        ffi.from_buffer("long[]", todo),
    )
    if nt:
        # the elements the proof left: the reference's exact path, then + 0.0 and the acc add
        ii, jj = np.divmod(todo[:nt], n)
        r = np.zeros((m, n), np.float32)
        with np.errstate(all="ignore"):
            numerics.settle_unproved(a, w, s, rs, r, ii, jj)
            vals = r[ii, jj] + np.float32(0.0)
            if acc is not None:
                vals = acc[ii, jj] + vals
        out[ii, jj] = vals
    return out
