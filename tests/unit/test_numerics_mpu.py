"""The MPU's numerics (`legato.numerics.mpu_matmul` / `matmul_acc`) against an independent
reference: exact rational arithmetic (`fractions.Fraction`) rounded to f32 by hand.

Definition pinned here: each `mpu.mm` dot product is the *exact* sum of its products, rounded
once (nearest-even) to f32, a zero result +0.0; `acc` adds it with one f32 addition; a longer K
is chunks of `MPU_TILE_K` carried in the f32 accumulator. Neither the old definition (f32,
one k at a time) nor a sequential f64 sum gives these bits (tests below show where they differ).
"""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from legato import numerics
from legato.numerics import MPU_TILE_K, matmul_acc, mpu_matmul

BF16 = np.dtype(ml_dtypes.bfloat16)
F32_MAX = Fraction(float(np.finfo(np.float32).max))


def _round_f32(s: Fraction) -> np.float32:
    """Nearest-even f32 of an exact rational (zero -> +0.0), by comparing neighbours exactly."""
    if s == 0:
        return np.float32(0.0)
    if abs(s) >= F32_MAX + Fraction(2) ** 103:  # at or past the midpoint of max and 2^128
        return np.float32(np.inf if s > 0 else -np.inf)
    c = np.float32(float(s))
    cands = [c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(-np.inf))]
    best = None
    for x in cands:
        if not np.isfinite(x):
            continue
        key = (abs(Fraction(float(x)) - s), int(np.array(x).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, x)
    x = best[1]
    return np.float32(0.0) if x == 0 else x


def reference(a, w, acc=None):
    a, w = np.asarray(a, np.float64), np.asarray(w, np.float64)
    out = np.zeros((a.shape[0], w.shape[1]), np.float32)
    for i in range(a.shape[0]):
        for j in range(w.shape[1]):
            out[i, j] = _round_f32(sum(Fraction(x) * Fraction(y) for x, y in zip(a[i], w[:, j])))
    return out if acc is None else (np.asarray(acc, np.float32) + out).astype(np.float32)


def bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


def assert_bits(got, want):
    assert got.dtype == np.float32
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize("m,k,n,seed", [(1, 1, 1, 0), (3, 5, 4, 1), (8, 256, 16, 2), (5, 97, 3, 3)])
def test_random_against_exact_reference(m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(BF16)
    w = rng.standard_normal((k, n)).astype(BF16)
    acc = rng.standard_normal((m, n)).astype(np.float32)
    assert_bits(mpu_matmul(a, w), reference(a, w))
    assert_bits(mpu_matmul(a, w, acc), reference(a, w, acc))


def test_wide_exponent_spans_take_the_slow_paths_and_stay_exact():
    """Rows/columns with tiny and huge values are not provably exact in f64: the interval check
    and the exact fallback must still give the reference bits."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((12, 256))
    w = rng.standard_normal((256, 10))
    a[0, :8] *= 2.0**-60
    a[1, 3] = 2.0**70
    a[2, ::2] *= 2.0**40
    w[:4, 0] *= 2.0**-90
    w[7, 1] = 2.0**-120
    a, w = a.astype(BF16), w.astype(BF16)
    assert_bits(mpu_matmul(a, w), reference(a, w))


def test_exact_sum_not_sequential_f32_nor_sequential_f64():
    w = np.ones((3, 1), BF16)
    # 1 + 2^-24 + 2^-24 = 1 + 2^-23 exactly (an f32); f32 one k at a time loses both halves
    a = np.array([[1.0, 2.0**-24, 2.0**-24]], BF16)
    assert mpu_matmul(a, w)[0, 0] == np.float32(1 + 2.0**-23)
    seq32 = np.float32(0)
    for x in a[0].astype(np.float32):
        seq32 = np.float32(seq32 + x)
    assert seq32 == np.float32(1.0)  # the old definition's answer
    # 1 + 2^-24 + 2^-80: f64 rounds it onto the f32 midpoint 1 + 2^-24, which ties down to 1;
    # the exact sum is above the midpoint, so it rounds up
    a = np.array([[1.0, 2.0**-24, 2.0**-80]], BF16)
    assert float(np.float32(1.0 + 2.0**-24 + 2.0**-80)) == 1.0  # sequential f64, then f32
    assert mpu_matmul(a, w)[0, 0] == np.float32(1 + 2.0**-23)
    a = np.array([[1.0, 2.0**-24, -(2.0**-80)]], BF16)  # just below the midpoint: down
    assert mpu_matmul(a, w)[0, 0] == np.float32(1.0)


def test_near_ties_are_settled_by_the_exact_sum():
    """Sums one tiny term away from an f32 midpoint (f64 rounds them onto it): every row takes
    the exact path, and each must round by the tiny term's sign."""
    rng = np.random.default_rng(23)
    rows = []
    for _ in range(24):
        big = float(rng.integers(1, 1 << 7)) * 2.0 ** int(rng.integers(-3, 4))
        half_ulp = 2.0 ** (np.floor(np.log2(big)) - 24)
        tiny = float(rng.choice([-1.0, 1.0, 0.0])) * 2.0 ** -int(rng.integers(60, 90))
        rows.append([big, half_ulp, tiny, 0.0])
    a = np.array(rows, BF16)
    w = np.ones((4, 2), BF16)
    w[3, 1] = 1.0  # a zero term in both columns
    assert_bits(mpu_matmul(a, w), reference(a, w))
    assert_bits(mpu_matmul(a[:, [2, 0, 3, 1]], w), reference(a, w))


def test_no_summation_order():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((6, 256)).astype(BF16)
    w = rng.standard_normal((256, 5)).astype(BF16)
    a[:, :3] *= BF16.type(2.0**-50)
    p = rng.permutation(256)
    assert_bits(mpu_matmul(a, w), mpu_matmul(a[:, p], w[p]))


def test_accumulate_is_one_f32_add():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((7, 64)).astype(BF16)
    w = rng.standard_normal((64, 9)).astype(BF16)
    acc = (rng.standard_normal((7, 9)) * 1e3).astype(np.float32)
    assert_bits(mpu_matmul(a, w, acc), acc + mpu_matmul(a, w))


def test_long_k_is_chunks_of_the_mpu_tile():
    rng = np.random.default_rng(13)
    a = rng.standard_normal((4, 700)).astype(BF16)
    w = rng.standard_normal((700, 6)).astype(BF16)
    want = None
    for k0 in range(0, 700, MPU_TILE_K):
        want = mpu_matmul(a[:, k0 : k0 + MPU_TILE_K], w[k0 : k0 + MPU_TILE_K], want)
    assert_bits(matmul_acc(a, w), want)
    acc = rng.standard_normal((4, 6)).astype(np.float32)
    assert_bits(
        matmul_acc(a, w, acc),
        mpu_matmul(
            a[:, 512:],
            w[512:],
            mpu_matmul(a[:, 256:512], w[256:512], mpu_matmul(a[:, :256], w[:256], acc)),
        ),
    )


def test_f32_operands_holding_bf16_values_give_the_bf16_bits():
    rng = np.random.default_rng(17)
    a = rng.standard_normal((5, 256)).astype(BF16)
    w = rng.standard_normal((256, 4)).astype(BF16)
    assert_bits(matmul_acc(a.astype(np.float32), w.astype(np.float32)), matmul_acc(a, w))


def test_zeros_infs_and_nans():
    a = np.array(
        [
            [0.0, -0.0],
            [1.0, -1.0],
            [-(2.0**-133), 0.0],
            [np.inf, 1.0],
            [np.inf, 0.0],
            [np.nan, 1.0],
            [2.0**100, 0.0],
        ],
        BF16,
    )
    w = np.array([[1.0, -1.0, 0.0], [1.0, 1.0, 2.0]], BF16)
    r = mpu_matmul(a, w)
    assert bits(r[0]).tolist() == [0, 0, 0]  # all-zero products: +0.0
    assert bits(r[1]).tolist() == [0, 0xC0000000, 0xC0000000]  # 1 - 1 = +0.0; -2; -2
    assert bits(r[2]).tolist() == [0x80010000, 0x00010000, 0]  # +-2^-133: f32 subnormals
    tiny = mpu_matmul(np.array([[-(2.0**-133)]], BF16), np.array([[2.0**-133]], BF16))
    assert bits(tiny).tolist() == [[0]]  # -2^-266 rounds to zero: +0.0
    assert r[3, 0] == np.inf and r[3, 1] == -np.inf
    nan = 0x7FC00000
    assert int(bits(r[3])[2]) == nan  # inf * 0 + 1 * 2
    assert bits(r[4]).tolist() == [0x7F800000, 0xFF800000, nan]
    assert bits(r[5]).tolist() == [nan] * 3
    assert r[6, 0] == np.float32(2.0**100) and r[6, 1] == np.float32(-(2.0**100))
    assert mpu_matmul(np.array([[2.0**100]], BF16), np.array([[2.0**100]], BF16))[0, 0] == np.inf


def test_rejects_other_dtypes():
    with pytest.raises(ValueError):
        mpu_matmul(np.ones((2, 2)), np.ones((2, 2)))


def test_every_bertha_model_tiles_k_as_the_definition():
    from legato.model.bertha import evt0, evt1

    for model in (evt0(), evt1()):
        assert model.mpu_tile_k == MPU_TILE_K


def test_f32_split_builds_on_the_chunked_matmul():
    rng = np.random.default_rng(19)
    a = rng.standard_normal((3, 300)).astype(np.float32)
    w = rng.standard_normal((300, 5)).astype(np.float32)
    a_hi, a_lo = numerics.split_bf16(a)
    w_hi, w_lo = numerics.split_bf16(w)
    want = matmul_acc(a_lo, w_hi, matmul_acc(a_hi, w_lo, matmul_acc(a_hi, w_hi)))
    assert_bits(numerics.matmul_f32_split(a, w), want)
    np.testing.assert_allclose(
        numerics.matmul_f32_split(a, w), a.astype(np.float64) @ w, rtol=1e-4, atol=1e-3
    )


def test_a_prepared_weight_gives_the_same_bits_on_every_path():
    """`MpuWeight` (what the emulator's `mpu.ldw` builds once for its passes) must give the
    exact reference's bits, pass after pass, on the fast, interval and exact paths; with infs
    and NaNs in the weight or the rows, the bits of the unprepared path (whose classes
    `test_zeros_infs_and_nans` checks)."""
    rng = np.random.default_rng(31)
    w = rng.standard_normal((64, 9))
    w[:3, 0] *= 2.0**-90
    w[5, 1] = 2.0**-120
    w = w.astype(BF16)
    bad_w = w.copy()
    bad_w[7, 2] = np.inf
    bad_w[8, 3] = np.nan
    pw, bad_pw = numerics.MpuWeight(w), numerics.MpuWeight(bad_w)
    for seed in range(3):
        r = np.random.default_rng(seed)
        a = r.standard_normal((7, 64))
        a[0, :5] *= 2.0**-60
        a[1, 3] = 2.0**70
        a = a.astype(BF16)
        acc = r.standard_normal((7, 9)).astype(np.float32)
        assert_bits(mpu_matmul(a, pw, acc), reference(a, w, acc))
        assert_bits(mpu_matmul(a, pw), reference(a, w))
        a[2, 4] = -np.inf if seed == 1 else np.nan
        assert_bits(mpu_matmul(a, bad_pw, acc), mpu_matmul(a, bad_w, acc))
        assert_bits(mpu_matmul(a, pw), mpu_matmul(a, w))
        assert int(bits(mpu_matmul(a, pw))[2, 5]) in (0x7FC00000, 0xFF800000, 0x7F800000)
    with pytest.raises(ValueError, match="does not fit weight"):
        mpu_matmul(np.ones((2, 3), BF16), pw)
