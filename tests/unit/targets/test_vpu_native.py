"""The VPU instructions compiled in native/vpu.c (issue 15) against their definition, the numpy
of `legato.targets.bertha.vpu` as the emulator's reference path runs it: the same output bits
for every op and dtype the compiled code takes (f32, bf16), on every bf16 bit pattern, on f32
edge values (zeros, subnormals, infinities, quiet and signaling NaNs with payloads and signs,
bf16 rounding ties) crossed with each other, and on random bit patterns; every broadcast mode;
outputs overlapping inputs. And native/dram.c's DRAM channel booking against the Python loop
of `timing.DramTiming.dma`. End to end, `test_emulator_fast_paths` compares whole kernels with
`Emulator.native_vpu`
and `DramTiming.native` off.

In CI (`$CI` set) the extension must be built (scripts/bootstrap.sh builds it); elsewhere an
unbuilt extension skips these tests."""

import os

import ml_dtypes
import numpy as np
import pytest

from legato.targets.bertha import emulator, native, vpu
from legato.targets.bertha.isa import BC_COL, BC_ROW, BC_SCALAR

if native.lib is None:
    if os.environ.get("CI"):
        raise RuntimeError(
            "legato.targets.bertha._native is not built: scripts/bootstrap.sh builds it "
            "(python -m legato.targets.bertha.native_build)"
        )
    pytest.skip("the compiled helpers are not built", allow_module_level=True)

ffi, lib = native.ffi, native.lib
F32, BF16 = np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)
BITS = {F32: np.uint32, BF16: np.uint16}
BC_NONE = 0


def _p(a: np.ndarray):
    return ffi.from_buffer("char[]", a)


def _f32_edges() -> np.ndarray:
    """f32 bit patterns at every boundary of the numerics, both signs."""
    mag = [
        0x00000000, 0x00000001, 0x00000002, 0x0000FFFF, 0x00008000, 0x00018000, 0x007FFFFF,
        0x00800000, 0x00808000, 0x00818000, 0x3F800000, 0x3F808000, 0x3F818000, 0x3F807FFF,
        0x3F808001, 0x3FC00000, 0x40490FDB, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0x7F800000,
        0x7F800001, 0x7F812345, 0x7FBFFFFF, 0x7FC00000, 0x7FC00001, 0x7FD23456, 0x7FFFFFFF,
        0x3EAAAAAB, 0x33800000, 0x4B000000, 0x4B800001,
    ]  # fmt: skip
    m = np.array(mag, np.uint32)
    return np.concatenate([m, m | np.uint32(0x80000000)])


def _data(dt, n_random: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Operand pairs (x, y) of dtype `dt`: edge values crossed with each other, every bf16
    pattern against a few, and random bit patterns."""
    rng = np.random.default_rng(seed)
    if dt == F32:
        e = _f32_edges()
        x, y = np.repeat(e, e.size), np.tile(e, e.size)
        rx = rng.integers(0, 2**32, n_random, dtype=np.uint64).astype(np.uint32)
        ry = rng.integers(0, 2**32, n_random, dtype=np.uint64).astype(np.uint32)
    else:
        e = (_f32_edges() >> 16).astype(np.uint16)
        allb = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        x = np.concatenate([np.repeat(e, e.size), np.tile(allb, 4)])
        y = np.concatenate([np.tile(e, e.size), np.repeat(e[[0, 10, 20, 40]], 1 << 16)])
        rx = rng.integers(0, 2**16, n_random, dtype=np.uint32).astype(np.uint16)
        ry = rng.integers(0, 2**16, n_random, dtype=np.uint32).astype(np.uint16)
    return np.concatenate([x, rx]).view(dt), np.concatenate([y, ry]).view(dt)


def _assert_bits(got, want, dt, what):
    g, w = np.asarray(got).view(BITS[dt]), np.ascontiguousarray(want).view(BITS[dt])
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, (
        f"{what}: {bad.size} elements differ, first at {bad[0]}: got {g[bad[0]]:#x}, "
        f"want {w[bad[0]]:#x}"
    )


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("op", sorted(vpu.NATIVE_BINARY))
def test_binary_ops_give_the_numpy_bits(op, dt):
    x, y = _data(dt, 200_000, seed=len(op))
    out = np.empty_like(x)
    code = vpu.NATIVE_BINARY[op]
    assert lib.vpu_bin(code, vpu.NATIVE_DTYPES[dt], BC_NONE, 0, x.size, _p(x), _p(y), _p(out)) == 0
    _assert_bits(out, vpu.binary(op, x, y, dt), dt, f"vpu.{op} {dt}")


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("op", sorted(set(vpu.NATIVE_UNARY) - {"exp"}))
def test_unary_ops_give_the_numpy_bits(op, dt):
    x, _ = _data(dt, 300_000, seed=7)
    out = np.empty_like(x)
    assert lib.vpu_un(vpu.NATIVE_UNARY[op], vpu.NATIVE_DTYPES[dt], x.size, _p(x), _p(out)) == 0
    _assert_bits(out, vpu.unary(op, x, dt), dt, f"vpu.{op} {dt}")


def _near_a_rounding_boundary(x: np.ndarray, dt) -> np.ndarray:
    """Where exp(x) in f64 lies within 2^-40 (relative) of a point at which rounding to `dt`
    (via f32) changes: the values native/vpu.c's `exp_chunk` may not prove (it declines within
    128 f64 ulps, 2^-45)."""
    y = np.exp(x.astype(np.float64))
    with np.errstate(all="ignore"):
        lo, hi = y * (1 - 2.0**-40), y * (1 + 2.0**-40)
    return lo.astype(np.float32).astype(dt).view(BITS[dt]) != hi.astype(np.float32).astype(dt).view(
        BITS[dt]
    )


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
def test_exp_gives_the_numpy_bits_or_declines(dt):
    """`vpu.exp` (f64 exp rounded to f32, then to dt): the reference's bits on the edge values
    (NaNs quieted with their payloads, +-inf, -0.0, subnormals, overflow to inf, underflow to
    0), every bf16 pattern, random patterns and softmax's inputs (x - max: at most 0), in
    chunks; a chunk with an element the proof cannot settle is declined with nothing written,
    and only such elements decline (2^-24: exp is 2^-49 above an f32 tie)."""
    x, _ = _data(dt, 300_000, seed=7)
    soft = -np.abs(np.random.default_rng(2).standard_normal(200_000) * 6)
    x = np.concatenate([x, soft.astype(dt), np.array([-0.0, 2.0**-24, -(2.0**-25)], dt)])
    want = vpu.unary("exp", x, dt)
    code, dc = vpu.NATIVE_UNARY["exp"], vpu.NATIVE_DTYPES[dt]
    declined = []
    for s in range(0, x.size, 512):
        c = x[s : s + 512].copy()
        out = np.full_like(c, 7)
        if lib.vpu_un(code, dc, c.size, _p(c), _p(out)) == 0:
            _assert_bits(out, want[s : s + 512], dt, f"vpu.exp {dt} at {s}")
            continue
        _assert_bits(out, np.full_like(c, 7), dt, "a declined exp writes nothing")
        for i in range(c.size):
            one = np.zeros(1, dt)
            if lib.vpu_un(code, dc, 1, _p(c[i : i + 1].copy()), _p(one)) != 0:
                declined.append(s + i)
            else:
                _assert_bits(one, want[s + i : s + i + 1], dt, f"vpu.exp {dt} at {s + i}")
    declined = np.array(declined, np.int64)
    assert _near_a_rounding_boundary(x[declined], dt).all(), x[declined]
    assert len(declined) < x.size * 1e-3
    if dt == F32:
        assert x.size - 1 - 1 in declined  # 2^-24
    inplace = np.array([1.0, 2.0**-24], dt)
    before = inplace.copy()
    assert lib.vpu_un(code, dc, 2, _p(inplace), _p(inplace)) != (dt == BF16)
    if dt == F32:
        _assert_bits(inplace, before, dt, "a declined exp in place leaves its input")


def test_exp_takes_the_vector_exp_where_the_host_has_one():
    """On x86-64 with AVX2 and glibc's libmvec (this project's hosts), native/vpu.c computes
    exp(x) with libmvec's vector exp, so the test above checks that path's bits; elsewhere
    it runs libm's scalar exp."""
    import ctypes.util
    import platform

    has = platform.machine() == "x86_64" and ctypes.util.find_library("mvec") is not None
    with open("/proc/cpuinfo") as f:
        has = has and " avx2" in f.read()
    if not has:
        pytest.skip("no AVX2 and libmvec on this host")
    assert lib.vpu_exp_vector() == 1


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
def test_exp_over_several_chunks_declines_whole(dt):
    """An instruction longer than one of the C's 512-element steps: the bits of every step
    when all are proven, and nothing written when one element of a later step is not."""
    x = -np.abs(np.random.default_rng(5).standard_normal(1500) * 4).astype(dt)
    out = np.full_like(x, 7)
    code, dc = vpu.NATIVE_UNARY["exp"], vpu.NATIVE_DTYPES[dt]
    assert lib.vpu_un(code, dc, x.size, _p(x), _p(out)) == 0
    _assert_bits(out, vpu.unary("exp", x, dt), dt, "vpu.exp over 3 steps")
    if dt == F32:
        x[1200] = 2.0**-24  # (exp is 2^-49 above an f32 tie: not provable)
        out = np.full_like(x, 7)
        assert lib.vpu_un(code, dc, x.size, _p(x), _p(out)) != 0
        _assert_bits(out, np.full_like(x, 7), dt, "a declined exp writes nothing")


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 1), (4, 128), (7, 33), (32, 4096)])
def test_row_maxima_give_the_numpy_bits_or_decline(dt, rows, cols):
    """`vpu.rmax`: exact, the reference's bits (infinities, subnormals, signed zeros of one
    sign, all -inf); a NaN in the rows, or a row whose maximum is a zero of both signs,
    declines with nothing written (which of them the reference's reduction returns)."""
    x, _ = _data(dt, 200_000, seed=rows + cols)
    nan = np.isnan(x.astype(np.float32))
    clean = x[~nan]
    dc = vpu.NATIVE_DTYPES[dt]
    for start in (0, clean.size - rows * cols, 1000):
        xs = clean[start : start + rows * cols].copy()
        out = np.empty(rows, dt)
        assert lib.vpu_rmax(dc, rows, cols, _p(xs), _p(out)) == 0
        _assert_bits(out, vpu.row_max(xs.reshape(rows, cols), dt), dt, "rmax")
    for row, ok in (
        ([-np.inf, -np.inf], True),
        ([-0.0, -1.0, -0.0], True),
        ([0.0, -3.0], True),
        ([-0.0, -1.0, 0.0], False),
        ([1.0, np.nan], False),
    ):
        z = np.array(row, dt)
        out = np.full(1, 7, dt)
        assert (lib.vpu_rmax(dc, 1, z.size, _p(z), _p(out)) == 0) == ok, row
        want = vpu.row_max(z.reshape(1, -1), dt) if ok else np.full(1, 7, dt)
        _assert_bits(out, want, dt, f"rmax of {row}")


@pytest.mark.parametrize("src", [F32, BF16], ids=["from_f32", "from_bf16"])
@pytest.mark.parametrize("dst", [F32, BF16], ids=["to_f32", "to_bf16"])
def test_conversions_give_the_numpy_bits(src, dst):
    x, _ = _data(src, 300_000, seed=3)
    out = np.empty(x.size, dst)
    codes = vpu.NATIVE_DTYPES[src], vpu.NATIVE_DTYPES[dst]
    assert lib.vpu_cvt(*codes, x.size, _p(x), _p(out)) == 0
    _assert_bits(out, vpu.convert(x, dst), dst, f"vpu.cvt {src} -> {dst}")


def _broadcast_y(mode, src, n, period):
    """The second operand as the reference (`Emulator._vpu_reference`) builds it."""
    if mode == BC_SCALAR:
        return np.broadcast_to(src[:1], (n,))
    if mode == BC_ROW:
        return np.repeat(src[: -(-n // period)], period)[:n]
    return np.resize(src[: min(n, period)], n)


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("mode", [BC_SCALAR, BC_ROW, BC_COL], ids=["scalar", "row", "col"])
@pytest.mark.parametrize(
    "n,period", [(128, 8), (100, 7), (5, 8), (1, 1), (2000, 700), (1500, 512), (3000, 1)]
)
def test_broadcast_modes(mode, dt, n, period):
    x, y = _data(dt, 4096, seed=n)
    x, y = x[-n:].copy(), y[-n:].copy()
    out = np.empty_like(x)
    dc = vpu.NATIVE_DTYPES[dt]
    assert lib.vpu_bin(vpu.NATIVE_BINARY["mul"], dc, mode, period, n, _p(x), _p(y), _p(out)) == 0
    _assert_bits(out, vpu.binary("mul", x, _broadcast_y(mode, y, n, period), dt), dt, "bc")


@pytest.mark.parametrize("shift", [-3, -1, 0, 1, 5])
@pytest.mark.parametrize("mode", [BC_NONE, BC_ROW])
def test_an_output_overlapping_its_inputs_is_computed_before_it_is_stored(shift, mode):
    """Reference: the result is computed from the inputs as they were, then stored."""
    n, period = 64, 4
    buf = np.random.default_rng(1).standard_normal(3 * n).astype(np.float32)
    xo, yo, oo = n, n + 2, n + shift  # element offsets in `buf`
    ny = n if mode == BC_NONE else n // period
    y = buf[yo : yo + ny] if mode == BC_NONE else _broadcast_y(mode, buf[yo : yo + ny], n, period)
    want = buf.copy()
    want[oo : oo + n] = vpu.binary("add", buf[xo : xo + n], y, F32)
    p = _p(buf)
    assert lib.vpu_bin(0, 0, mode, period, n, p + 4 * xo, p + 4 * yo, p + 4 * oo) == 0
    _assert_bits(buf, want, F32, "overlapping add")
    buf2 = want.copy()  # a widening conversion in place (bf16 -> f32 over its own source)
    src = buf2.view(np.uint16)[2 * n : 3 * n].view(BF16).copy()
    want2 = buf2.copy()
    want2.view(np.uint8)[4 * n : 4 * n + 4 * n] = vpu.convert(src, F32).view(np.uint8)
    p2 = _p(buf2)
    assert lib.vpu_cvt(1, 0, n, p2 + 4 * n, p2 + 4 * n) == 0
    _assert_bits(buf2, want2, F32, "widening cvt in place")


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 1), (4, 128), (7, 33)])
def test_row_sums_give_the_numpy_bits(dt, rows, cols):
    x, _ = _data(dt, 20_000, seed=rows * cols)
    for start in (0, x.size - rows * cols, 1000):  # edges (NaNs, infs, -0.0), random
        xs = x[start : start + rows * cols].copy()
        out = np.empty(rows, dt)
        assert lib.vpu_rsum(vpu.NATIVE_DTYPES[dt], rows, cols, _p(xs), _p(out)) == 0
        _assert_bits(out, vpu.row_sum(xs.reshape(rows, cols), dt), dt, "rsum")
    z = np.array([-0.0, -0.0, -0.0], dt)  # a sum of -0.0s is +0.0
    out = np.empty(1, dt)
    assert lib.vpu_rsum(vpu.NATIVE_DTYPES[dt], 1, 3, _p(z), _p(out)) == 0
    _assert_bits(out, vpu.row_sum(z.reshape(1, 3), dt), dt, "rsum of -0.0")


@pytest.mark.parametrize("esize", sorted(vpu.NATIVE_ESIZES))
def test_fill_and_transpose_move_bits(esize):
    dt = np.dtype(f"u{esize}")
    bits = 0xF1E2D3C4B5A69788
    out = np.zeros(37, dt)
    assert lib.vpu_fill(esize, out.size, bits, _p(out)) == 0
    want = np.frombuffer(bits.to_bytes(8, "little")[:esize], dt)[0]
    assert (out == want).all()
    x = np.arange(5 * 7, dtype=dt).reshape(5, 7)
    t = np.empty((7, 5), dt)
    assert lib.vpu_transpose(esize, 5, 7, _p(x), _p(t)) == 0
    assert (t == x.T).all()


def test_uncovered_cases_are_refused():
    """What the compiled code does not cover returns nonzero (the emulator runs numpy)."""
    x = np.zeros(8, np.float32)
    assert lib.vpu_bin(0, 2, BC_NONE, 0, 8, _p(x), _p(x), _p(x)) != 0  # another dtype
    assert lib.vpu_bin(9, 0, BC_NONE, 0, 8, _p(x), _p(x), _p(x)) != 0  # another op
    assert lib.vpu_bin(0, 0, BC_ROW, 0, 8, _p(x), _p(x), _p(x)) != 0  # a period of 0
    assert lib.vpu_un(0, 0, 0, _p(x), _p(x)) != 0  # no elements
    assert lib.vpu_fill(3, 2, 0, _p(x)) != 0  # an element size no dtype has


def test_the_emulator_takes_the_compiled_path_for_the_hot_forms():
    """The decoder layer's hot VPU forms (f32 copy/add, bf16 mul, cvt, fill, transpose) map to
    native/vpu.c, an i32 add and a transcendental do not."""
    from legato.targets.bertha.asm import assemble

    def static(src):
        (ins,) = assemble(f".program p on core(0)\n    {src}\n").programs[0].instructions
        return emulator._VpuStatic(ins)

    assert static("vpu.copy r1, r2, r3, f32").nat[0] is lib.vpu_un
    assert static("vpu.add r1, r2, r3, r4, f32").nat[0] is lib.vpu_bin
    assert static("vpu.mul r1, r2, r3, r4, bf16").nat[1:] == (2, 1)
    assert static("vpu.cvt r1, r2, r3, bf16, f32").nat == (lib.vpu_cvt, 0, 1)
    assert static("vpu.fill r1, r2, r3, f32").nat == (lib.vpu_fill, 4)
    assert static("vpu.transpose r1, r2, r3, r4, f32").nat == (lib.vpu_transpose, 4)
    assert static("vpu.add r1, r2, r3, r4, i32").nat is None
    assert static("vpu.log r1, r2, r3, f32").nat is None


@pytest.mark.parametrize("gen", ["evt0", "evt1"])
def test_compiled_dram_booking_matches_the_python_loop(gen, monkeypatch):
    """`timing.DramTiming.dma` with native/dram.c booking contiguous shared-DRAM ranges: the
    same end times, channel timelines and bytes as its Python loop, on random transfers (one
    and two shared ends, unaligned, shorter than a granule, spanning many periods, empty)."""
    from legato.model import bertha
    from legato.targets.bertha import timing

    model = getattr(bertha, gen)()
    rng = np.random.default_rng(5)
    moves = []
    t = 0
    for _ in range(3000):
        t += int(rng.integers(0, 40))
        n = int(rng.choice([0, 1, 100, 256, 257, 4096, 65536, int(rng.integers(1, 200_000))]))
        ends = [(int(rng.integers(0, 1 << 30)), n) for _ in range(int(rng.integers(0, 3)))]
        moves.append((t, f"core{int(rng.integers(0, 4))}", n, ends, bool(rng.random() < 0.8)))

    def run(compiled):
        monkeypatch.setattr(timing.DramTiming, "native", compiled)
        d = timing.DramTiming(model)
        assert (d._book is not None) == compiled
        ends = [d.dma(*mv) for mv in moves]
        return ends, list(d.channel_free), list(d.channel_bytes)

    compiled, python = run(True), run(False)
    assert compiled == python
    assert sum(python[2]) > 0 and all(type(b) is int for b in python[2])


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
def test_row_sums_with_nan_steps_give_the_numpy_bits(dt):
    """Rows whose running sum turns NaN (a NaN operand with a payload, +inf + -inf) take
    `vpu_rsum`'s second, step-by-step pass: x86's NaN at each step, as numpy gives it."""
    f = np.float32
    nan_payload = np.array([0x7FA00001], np.uint32).view(f)[0]  # a signaling NaN
    neg_qnan = np.array([0xFFC12345], np.uint32).view(f)[0]
    rows = [
        [1.0, 2.0, np.inf, 3.0, -np.inf, 4.0],
        [1.0, nan_payload, 2.0, neg_qnan, 3.0, 4.0],
        [neg_qnan, 1.0, 2.0, 3.0, 4.0, nan_payload],
        [1.5, -2.25, 3.0, 0.5, -0.0, 8.0],
    ]
    xs = np.array(rows, f).astype(dt)
    out = np.empty(len(rows), dt)
    assert lib.vpu_rsum(vpu.NATIVE_DTYPES[dt], len(rows), 6, _p(xs), _p(out)) == 0
    _assert_bits(out, vpu.row_sum(xs, dt), dt, "rsum with NaN steps")
