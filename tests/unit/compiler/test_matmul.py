"""Matmul of any size: tiled to the MPU's 256x128 weight tile, K accumulated in f32, one
rounding; bit-identical to `legato.numerics.matmul_acc` then rounding (and the interpreter)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from compiler_helpers import assert_bit_equal, core0_kernel, rand, run_both, ttype

from legato import numerics


@pytest.mark.parametrize(
    "m,k,n,wspace",
    [
        (4, 64, 32, "mpu_buffer"),  # one tile
        (4, 64, 32, "sram"),  # one tile, staged from sram
        (3, 512, 64, "mpu_buffer"),  # K tiles: f32 accumulation
        (3, 300, 64, "mpu_buffer"),  # a partial K tile
        (5, 128, 256, "mpu_buffer"),  # N tiles: weight column blocks
        (2, 384, 160, "mpu_buffer"),  # both, partial tiles
        (2, 384, 160, "sram"),
        ((-1, 6), 320, 200, "mpu_buffer"),  # dynamic rows
    ],
)
def test_tiled_matmul(m, k, n, wspace):
    rng = np.random.default_rng(12)
    rows = m[1] if isinstance(m, tuple) else m
    wtype = "mpu_weight" if wspace == "mpu_buffer" else "sram"
    body = f"""
%w = legato.receive_type queue 1 memory {wspace} : {ttype([k, n], "bf16", wtype)}
%r = legato.matmul %x0, %w : {ttype([m, k], "bf16", "sram")}, {ttype([k, n], "bf16", wtype)} -> {ttype([m, n], "bf16", "sram")}
"""
    text = core0_kernel([([m, k], "bf16")], ([rows, n], "bf16"), body, r_shape=[m, n])
    # the weight: a second argument sent on queue 1 of `wspace`
    text = text.replace("%out : ", f"%b : {ttype([k, n], 'bf16', 'mpu_dram')}, %out : ").replace(
        "    legato.yield\n  }\n  legato.on core(0)",
        f"    legato.request_load %b to core(0) memory {wspace} queue 1 : "
        f"{ttype([k, n], 'bf16', 'mpu_dram')}\n    legato.yield\n  }}\n  legato.on core(0)",
        1,
    )
    run_rows = rows - 1 if isinstance(m, tuple) else rows
    a = rand([run_rows, k], "bf16", rng)
    w = rand([k, n], "bf16", rng)
    emu, ref, art = run_both(text, [a, w, np.zeros((rows, n), ml_dtypes.bfloat16)])
    assert_bit_equal(emu[-1], ref[-1])
    expect = numerics.round_to(numerics.matmul_acc(a, w), ml_dtypes.bfloat16)
    assert_bit_equal(emu[-1][:run_rows], expect)
    if k > 256:
        assert "acc" in art.asm and "vpu.cvt" in art.asm


@pytest.mark.parametrize("m,k,n", [(4, 64, 32), (3, 300, 160)])
def test_matmul_f32_result_is_the_accumulator(m, k, n):
    """`legato.matmul` of bf16 operands with an f32 result: the fp32 accumulator, unrounded,
    one tile or tiled; the weight computed on the core (sram, staged into mpu_buffer)."""
    rng = np.random.default_rng(5)
    body = f"""
%w = legato.transpose %x1 [1, 0] : {ttype([n, k], "bf16", "sram")} -> {ttype([k, n], "bf16", "sram")}
%r = legato.matmul %x0, %w : {ttype([m, k], "bf16", "sram")}, {ttype([k, n], "bf16", "sram")} -> {ttype([m, n], "f32", "sram")}
"""
    text = core0_kernel([([m, k], "bf16"), ([n, k], "bf16")], ([m, n], "f32"), body)
    a = rand([m, k], "bf16", rng)
    wt = rand([n, k], "bf16", rng)
    emu, ref, _ = run_both(text, [a, wt, np.zeros((m, n), np.float32)])
    assert_bit_equal(emu[-1], ref[-1])
    assert_bit_equal(emu[-1], numerics.matmul_acc(a, np.ascontiguousarray(wt.T)))


def test_matmul_f32_result_needs_bf16_operands():
    from compiler_helpers import parse
    from xdsl.utils.exceptions import VerifyException

    body = f"""
%r = legato.matmul %x0, %x1 : {ttype([4, 8], "f32", "sram")}, {ttype([8, 8], "f32", "sram")} -> {ttype([4, 8], "bf16", "sram")}
"""
    text = core0_kernel([([4, 8], "f32"), ([8, 8], "f32")], ([4, 8], "bf16"), body)
    with pytest.raises(VerifyException, match="does not match expected"):
        parse(text).verify()


@pytest.mark.parametrize(
    "m,k,n,wspace",
    [
        (4, 64, 32, "mpu_buffer"),  # one tile: three passes into the f32 result
        (4, 64, 32, "sram"),
        (3, 300, 160, "mpu_buffer"),  # K and N tiles, partial
        (2, 512, 256, "sram"),
        ((-1, 6), 320, 200, "sram"),  # dynamic rows (a 320x200 f32 weight fills mpu_buffer)
    ],
)
def test_matmul_f32_operands(m, k, n, wspace):
    """f32 @ f32: bf16 hi/lo split, three MPU passes (hi@hi, hi@lo, lo@hi) into one f32
    accumulator; bit-identical to `numerics.matmul_f32_split` at every level, ~2^-16 of torch."""
    import torch

    rng = np.random.default_rng(31)
    rows = m[1] if isinstance(m, tuple) else m
    wtype = "mpu_weight" if wspace == "mpu_buffer" else "sram"
    body = f"""
%w = legato.receive_type queue 1 memory {wspace} : {ttype([k, n], "f32", wtype)}
%r = legato.matmul %x0, %w : {ttype([m, k], "f32", "sram")}, {ttype([k, n], "f32", wtype)} -> {ttype([m, n], "f32", "sram")}
"""
    text = core0_kernel([([m, k], "f32")], ([rows, n], "f32"), body, r_shape=[m, n])
    text = text.replace("%out : ", f"%b : {ttype([k, n], 'f32', 'mpu_dram')}, %out : ").replace(
        "    legato.yield\n  }\n  legato.on core(0)",
        f"    legato.request_load %b to core(0) memory {wspace} queue 1 : "
        f"{ttype([k, n], 'f32', 'mpu_dram')}\n    legato.yield\n  }}\n  legato.on core(0)",
        1,
    )
    run_rows = rows - 1 if isinstance(m, tuple) else rows
    a = rng.standard_normal((run_rows, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    emu, ref, art = run_both(text, [a, w, np.zeros((rows, n), np.float32)])
    assert_bit_equal(emu[-1], ref[-1])
    assert_bit_equal(emu[-1][:run_rows], numerics.matmul_f32_split(a, w))
    expect = (torch.from_numpy(a) @ torch.from_numpy(w)).numpy()
    np.testing.assert_allclose(emu[-1][:run_rows], expect, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    assert art.asm.count("mpu.mm") >= 3 and "vpu.cvt" in art.asm


def test_matmul_f32_split_numerics():
    """The split is far closer to f32 than a bf16 matmul: ~2^-16 relative."""
    import torch

    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 300)).astype(np.float32)
    w = rng.standard_normal((300, 40)).astype(np.float32)
    exact = a.astype(np.float64) @ w.astype(np.float64)
    r = numerics.matmul_f32_split(a, w)
    scale = np.abs(a).astype(np.float64) @ np.abs(w).astype(np.float64)
    assert np.max(np.abs(r - exact) / scale) < 2.0**-14
    np.testing.assert_allclose(
        r, (torch.from_numpy(a) @ torch.from_numpy(w)).numpy(), rtol=1e-4, atol=1e-3
    )
