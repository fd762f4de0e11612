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
