"""The emulator's compiled MPU numerics (`mpu_fast`, issue 15) against their reference,
`numerics.MpuWeight` / `numerics.mpu_matmul`: the same weight statistics and the same output
bits on data that takes every step of the exactness proof (provably exact dot products, the
interval check, the exact fallback, infs and NaNs, zeros and subnormals), with and without an
accumulator. The reference itself is checked against exact rational arithmetic in
tests/unit/test_numerics_mpu.py.

In CI (`$CI` set) the extension must be built (scripts/bootstrap.sh builds it): both paths are
tested there; elsewhere an unbuilt extension skips the compiled side."""

import os
import zlib

import ml_dtypes
import numpy as np
import pytest

from legato import numerics
from legato.targets.bertha import mpu_fast, native

BF16 = np.dtype(ml_dtypes.bfloat16)

if native.lib is None:
    if os.environ.get("CI"):
        raise RuntimeError(
            "legato.targets.bertha._native is not built: scripts/bootstrap.sh builds it "
            "(python -m legato.targets.bertha.native_build)"
        )
    pytest.skip("the compiled helpers are not built", allow_module_level=True)


@pytest.fixture(autouse=True)
def _native_on(monkeypatch):
    monkeypatch.setattr(mpu_fast, "NATIVE", True)


def _bits(x, dt=np.uint32):
    return np.ascontiguousarray(x).view(dt)


def _data(rng, shape, kind):
    x = rng.standard_normal(shape)
    if kind == "wide":  # exponent spans no f64 sum holds exactly: steps 2 and 3
        x *= 2.0 ** rng.integers(-100, 100, shape)
    elif kind == "ties":  # few distinct magnitudes: exact cancellations and f32 ties
        x = rng.choice([0.0, 1.0, -1.0, 2.0**-24, -(2.0**-24), 3.0, 2.0**24], shape)
    elif kind == "special":
        x *= 2.0 ** rng.integers(-140, 120, shape)  # subnormals and overflowing products
        flat = x.reshape(-1)
        for v in (np.inf, -np.inf, np.nan, 0.0, -0.0):
            flat[rng.integers(0, flat.size, max(1, flat.size // 200))] = v
    elif kind == "zeros":
        x[rng.random(shape) < 0.7] = 0.0
        x[0] = -0.0  # a row (or the first weight row) of negative zeros
    return x.astype(BF16)


KINDS = ["randn", "wide", "ties", "special", "zeros"]


def _weights_equal(got, want):
    assert got.shape == want.shape
    got_f64 = mpu_fast.f64_of(got)  # (converted on demand: a few-row pass never needs it)
    np.testing.assert_array_equal(_bits(got_f64, np.uint64), _bits(want.f64, np.uint64))
    np.testing.assert_array_equal(_bits(got.cm, np.uint64), _bits(want.cm, np.uint64))
    np.testing.assert_array_equal(_bits(got.v, np.uint64), _bits(want.v, np.uint64))
    assert _bits(np.float64(got.vmax), np.uint64) == _bits(np.float64(want.vmax), np.uint64)
    assert got.finite == want.finite


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "m,k,n", [(1, 256, 128), (2, 256, 128), (32, 256, 64), (7, 13, 5), (128, 256, 64), (1, 3, 9)]
)
def test_compiled_mpu_matches_reference(kind, m, k, n):
    """Both compiled GEMMs (`mpu_small` from the tile's bits for at most `SMALL_M` rows, numpy's
    BLAS on its f64 copy above) give the reference's bits."""
    rng = np.random.default_rng(zlib.crc32(f"{kind} {m} {k} {n}".encode()))
    a, w = _data(rng, (m, k), kind), _data(rng, (k, n), kind)
    acc = rng.standard_normal((m, n)).astype(np.float32)
    acc[0, 0], acc[-1, -1] = -0.0, np.inf
    ref_w = numerics.MpuWeight(w)
    got_w = mpu_fast.weight(w)
    for c in (None, acc):
        want = numerics.mpu_matmul(a, ref_w, c)
        got = mpu_fast.matmul(a, got_w, c)
        assert got.dtype == np.float32 and got.shape == (m, n)
        np.testing.assert_array_equal(_bits(got), _bits(want))
    # the few-row passes never converted the tile; the others did, once
    assert (got_w.f64 is None) == (m <= mpu_fast.SMALL_M)
    _weights_equal(got_w, ref_w)


@pytest.mark.parametrize("kind", ["randn", "wide", "ties", "zeros"])
@pytest.mark.parametrize(
    "m,k,n", [(1, 256, 64), (1, 256, 128), (2, 256, 128), (1, 256, 200), (2, 37, 72), (1, 5, 7)]
)
def test_mpu_small_sums_are_the_sequential_f64_sums(kind, m, k, n):
    """`mpu_small`'s f64 sums (its AVX-512 code: blocks of 128, 64 and 8 columns, a scalar
    tail) are bit for bit each column's sum in increasing k from 0.0, one IEEE multiply and
    add per step (numpy's elementwise f64 ops), on finite data: the same `s` as the scalar
    loop it replaces, so the proof sees the same values."""
    rng = np.random.default_rng(zlib.crc32(f"small {kind} {m} {k} {n}".encode()))
    a, w = _data(rng, (m, k), kind), _data(rng, (k, n), kind)
    if kind == "zeros":  # a column of -0.0 products only: its sum from 0.0 is +0.0
        a, w[:, 0] = abs(a), -0.0
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    want = np.zeros((m, n))
    for kk in range(k):
        want = want + a64[:, kk : kk + 1] * w64[kk]
    ffi = native.ffi
    s = np.empty((m, n))
    wb = np.ascontiguousarray(w).view(np.uint16)
    native.lib.mpu_small(
        ffi.from_buffer("double[]", a64),
        m,
        k,
        ffi.from_buffer("uint16_t[]", wb),
        n,
        ffi.from_buffer("double[]", s),
    )
    np.testing.assert_array_equal(_bits(s, np.uint64), _bits(want, np.uint64))


def test_weight_statistics_of_every_column_block():
    """`mpu_weight`'s vector reductions (blocks of 64 and 16 columns, else the clone's loop)
    give `numerics.MpuWeight`'s statistics for widths that take each path, with a column of
    zeros, one holding an inf and one a subnormal as its lowest magnitude."""
    rng = np.random.default_rng(5)
    for n in (64, 128, 80, 16, 200, 7, 512):
        w = _data(rng, (256, n), "wide")
        w[:, 0] = 0.0
        w[3, n - 1] = np.inf
        w[5, n // 2] = np.float32(2.0**-130)
        _weights_equal(mpu_fast.weight(w), numerics.MpuWeight(w))


def test_few_and_many_row_passes_over_one_tile():
    """A tile read by a few-row pass, then a many-row one (which converts it), then a few-row
    one again (which now uses the f64 copy through BLAS): every pass gives the reference's bits,
    and a refilled tile is converted again (not its predecessor's values)."""
    rng = np.random.default_rng(11)
    w = _data(rng, (256, 128), "wide")
    got_w, ref_w = mpu_fast.weight(w), numerics.MpuWeight(w)
    for m in (1, 64, 2):
        a = _data(rng, (m, 256), "wide")
        want = numerics.mpu_matmul(a, ref_w)
        np.testing.assert_array_equal(_bits(mpu_fast.matmul(a, got_w)), _bits(want))
    w2 = _data(rng, (256, 128), "randn")
    again = mpu_fast.weight(w2, got_w)
    assert again is got_w and again.f64 is None
    a = _data(rng, (64, 256), "randn")
    want = numerics.mpu_matmul(a, numerics.MpuWeight(w2))
    np.testing.assert_array_equal(_bits(mpu_fast.matmul(a, again)), _bits(want))


def test_the_exact_fallback_runs(monkeypatch):
    """Dot products the f64 check cannot settle (an exact tie at an f32 midpoint, 1 + 2^-24,
    beside a product too small for f64 to hold the sum exactly) reach the reference's exact
    path through the compiled one, with the same bits (nearest-even: 1.0)."""
    a = np.array([[1.0, 2.0**-24, 2.0**-100, -(2.0**-100)]], BF16)
    w = np.array([[1.0], [1.0], [1.0], [1.0]], BF16)
    settled = []
    real = numerics.settle_unproved
    monkeypatch.setattr(
        numerics, "settle_unproved", lambda *args: settled.append(len(args[-1])) or real(*args)
    )
    acc = np.array([[-0.0]], np.float32)
    got = mpu_fast.matmul(a, mpu_fast.weight(w), acc)
    assert settled == [1]
    want = numerics.mpu_matmul(a, numerics.MpuWeight(w), acc)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert got[0, 0] == np.float32(1.0)


def _c_settle(a, w, acc, todo):
    """native/mpu.c's `mpu_settle` of the flat indices `todo` of a [M, K] @ w [K, N] (bf16),
    into an output whose other elements are left at a marker value."""
    ffi, lib = native.ffi, native.lib
    m, k = a.shape
    n = w.shape[1]
    rs = numerics._line_stats(a, 1)[0] * k
    cm = numerics._line_stats(w, 0)[0]
    out = np.full((m, n), 12345.0, np.float32)
    todo = np.ascontiguousarray(todo, np.int64)
    lib.mpu_settle(
        ffi.from_buffer("uint16_t[]", np.ascontiguousarray(a).view(np.uint16)),
        m,
        k,
        ffi.from_buffer("uint16_t[]", np.ascontiguousarray(w).view(np.uint16)),
        n,
        ffi.from_buffer("double[]", rs),
        ffi.from_buffer("double[]", cm),
        ffi.from_buffer("long[]", todo),
        todo.size,
        ffi.NULL if acc is None else ffi.from_buffer("float[]", acc),
        ffi.from_buffer("float[]", out),
    )
    return out


def _scaled(rng, shape, lo, hi):
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(lo, hi, shape)).astype(BF16)


@pytest.mark.parametrize("kind", [*KINDS, "overflow", "subnormal"])
@pytest.mark.parametrize("m,k,n", [(7, 256, 33), (32, 256, 64), (5, 13, 9)])
def test_compiled_exact_path_matches_reference(kind, m, k, n):
    """native/mpu.c's exact path (`mpu_settle`, the compiled loop's settling of what the proof
    leaves) run on *every* element of a pass, not only the ones the proof leaves: each is the
    definition's value (the reference's bits, with and without an accumulator holding NaNs and
    infs), on data with infs, NaNs and signed zeros, exact cancellations and f32 ties, sums
    past f32's largest value and results in f32's subnormals."""
    rng = np.random.default_rng(zlib.crc32(f"exact {kind} {m} {k} {n}".encode()))
    if kind == "overflow":
        a, w = _scaled(rng, (m, k), 60, 127), _scaled(rng, (k, n), -40, 8)
    elif kind == "subnormal":
        a, w = _scaled(rng, (m, k), -133, -60), _scaled(rng, (k, n), -80, -10)
    else:
        a, w = _data(rng, (m, k), kind), _data(rng, (k, n), kind)
    acc = rng.standard_normal((m, n)).astype(np.float32)
    flat = acc.reshape(-1)
    flat[::7], flat[3::11], flat[5::13] = np.nan, np.inf, -0.0
    every = np.arange(m * n)
    for c in (None, acc):
        with np.errstate(invalid="ignore"):
            want = numerics.mpu_matmul(a, w, c)
        np.testing.assert_array_equal(_bits(_c_settle(a, w, c, every)), _bits(want))


@pytest.mark.parametrize(
    "terms,want",
    [
        ([2.0**24, 1.0], 2.0**24),  # a tie: to even
        ([2.0**24, 1.0, 2.0**-30], 2.0**24 + 2.0),  # just past it (a sticky bit far below)
        ([2.0**24, 2.0, 1.0], 2.0**24 + 4.0),  # a tie to the even neighbour above
        ([2.0**-149, 2.0**-150], 2.0**-148),  # subnormal tie: to even
        ([2.0**-150], 0.0),  # half the smallest subnormal: to zero (+0.0)
        ([2.0**-150, 2.0**-190], 2.0**-149),  # just past it
        ([-(2.0**-150)], 0.0),  # a negative tiny sum: +0.0
        ([2.0**100, -(2.0**100)], 0.0),  # an exact cancellation: +0.0
        ([2.0**127, 2.0**127], np.inf),  # past the largest f32: inf
        # 2^128 - 2^103, half-way from the largest f32 to 2^128: to inf; just below: the largest
        ([255 * 2.0**120, 255 * 2.0**112, 255 * 2.0**104, 2.0**103], np.inf),
        ([255 * 2.0**120, 255 * 2.0**112, 255 * 2.0**104, 2.0**102], 2.0**128 - 2.0**104),
        ([-(2.0**127), -(2.0**127)], -np.inf),
    ],
)
def test_compiled_exact_path_rounds_at_the_edges(terms, want):
    """The exact sum's one rounding to f32 at its edges: ties, sticky bits, subnormals,
    overflow and zero (each term a bf16 value times 1, or times 2^-60 below bf16's range)."""
    scale = 2.0**-60 if min(abs(t) for t in terms) < 2.0**-120 else 1.0
    a = np.array([terms], np.float64) / scale
    a, w = a.astype(BF16), np.full((len(terms), 1), scale, BF16)
    assert (a.astype(np.float64) * scale).tolist() == [terms]
    got = _c_settle(a, w, None, [0])
    np.testing.assert_array_equal(_bits(got), _bits(numerics.mpu_matmul(a, w)))
    assert _bits(got)[0, 0] == _bits(np.array([[want]], np.float32))[0, 0]


def test_a_reused_weight_is_refilled_like_a_new_one():
    """`weight(values, reuse)` refills the tile an `mpu.ldw` replaces (no allocation) with what a
    new weight holds; the caller's array is copied, not kept (memory may change after ldw)."""
    rng = np.random.default_rng(7)
    first = mpu_fast.weight(_data(rng, (256, 128), "wide"))
    src = _data(rng, (256, 128), "special")
    again = mpu_fast.weight(src, first)
    assert again is first
    _weights_equal(again, numerics.MpuWeight(src.copy()))
    kept = again.values.copy()
    src[...] = 0
    np.testing.assert_array_equal(again.values.view(np.uint16), kept.view(np.uint16))
    other = mpu_fast.weight(src[:128], again)  # another shape: a new weight
    assert other is not again and other.shape == (128, 128)


def test_off_switch_runs_the_reference(monkeypatch):
    monkeypatch.setattr(mpu_fast, "NATIVE", False)
    w = np.ones((4, 3), BF16)
    assert not mpu_fast.weight(w).native
    got = mpu_fast.matmul(np.ones((2, 4), BF16), mpu_fast.weight(w))
    np.testing.assert_array_equal(got, np.full((2, 3), 4.0, np.float32))


def test_a_stale_native_build_is_refused(caplog):
    """A module built from other C sources than the tree's (an edit without a rebuild) must not
    run: the loader compares the hash the module carries with the sources' hash."""
    from types import SimpleNamespace

    from legato.targets.bertha import native

    stale_lib = SimpleNamespace(legato_source_hash=lambda: b"0" * 64)
    stale = SimpleNamespace(
        lib=stale_lib, ffi=SimpleNamespace(string=lambda s: s), __file__="_native.so"
    )
    assert not native._built_from_these_sources(stale)
    assert "stale build" in caplog.text
    old = SimpleNamespace(lib=SimpleNamespace(), ffi=None, __file__="_native.so")
    assert not native._built_from_these_sources(old)  # built before modules carried the hash
    if native._native is not None:
        assert native._built_from_these_sources(native._native)
