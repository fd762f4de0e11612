"""The VPU's fast paths give the bits of its definition (legato/targets/bertha/vpu.py):
f32 arithmetic for + - * / sqrt equals "float64, then round to f32, then to the dtype", and
`row_sum` (numpy's accumulate) equals the sequential fp32 loop from +0.0. Inputs are random bit
patterns (every class: subnormals, infs, NaNs) and values spread over the exponent range."""

import ml_dtypes
import numpy as np
import pytest

from legato.targets.bertha import vpu

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), BF16, np.dtype(np.float16)]
UINT = {4: np.uint32, 2: np.uint16}


def _random_bits(rng, dt, n):
    u = UINT[dt.itemsize]
    return rng.integers(0, 1 << (8 * dt.itemsize), n, dtype=np.uint64).astype(u).view(dt)


def _spread(rng, dt, n):
    lo, hi = (-24, 15) if dt == np.float16 else (-140, 127)
    e = rng.integers(lo, hi, n).astype(np.float64)
    with np.errstate(over="ignore"):
        return (rng.random(n) * np.exp2(e) * rng.choice([-1.0, 1.0], n)).astype(dt)


def _bits(x):
    return np.ascontiguousarray(x).view(UINT[x.dtype.itemsize])


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_f32_arithmetic_equals_the_f64_definition(dt):
    rng = np.random.default_rng(3)
    n = 1 << 15
    for make in (_random_bits, _spread):
        x, y = make(rng, dt, n), make(rng, dt, n)
        with np.errstate(all="ignore"):
            for op in ("add", "sub", "mul", "div"):
                want = np.asarray(vpu.BINARY[op](x.astype(np.float64), y.astype(np.float64)))
                want = want.astype(np.float32).astype(dt)
                np.testing.assert_array_equal(_bits(vpu.binary(op, x, y, dt)), _bits(want), op)
            want = np.sqrt(x.astype(np.float64)).astype(np.float32).astype(dt)
            np.testing.assert_array_equal(_bits(vpu.unary("sqrt", x, dt)), _bits(want))


@pytest.mark.parametrize("shape", [(1, 4096), (5, 300), (3, 1), (2, 0)])
def test_row_sum_is_the_sequential_f32_loop(shape):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 30, shape)).astype(np.float32)
    if x.size > 6:
        x.flat[1], x.flat[4] = -0.0, np.inf
    x = np.concatenate([x, np.full((2, shape[1]), -0.0, np.float32)])
    want = np.zeros(x.shape[0], np.float32)
    with np.errstate(all="ignore"):
        for c in range(x.shape[1]):
            want += x[:, c]
        for dt in DTYPES:
            np.testing.assert_array_equal(_bits(vpu.row_sum(x, dt)), _bits(want.astype(dt)))
