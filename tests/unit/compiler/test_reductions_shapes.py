"""Reductions (sum/mean/amax/amin over any dim, keepdim) and shape ops (reshape, transpose,
slice, cat, broadcast_to) on the emulator, bit-identical to the legato interpreter."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from compiler_helpers import NP, assert_bit_equal, core0_kernel, rand, run_both, ttype

DTYPES = ("bf16", "f32")


def _dims(shape, dim, keep):
    out = list(shape)
    if keep:
        out[dim] = 1
    else:
        del out[dim]
    return out


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("shape,dim", [([4, 24], 1), ([4, 24], 0), ([2, 3, 8], 1), ([2, 3, 8], 0)])
@pytest.mark.parametrize("keep", [False, True])
def test_reduction(dt, op, shape, dim, keep):
    rng = np.random.default_rng(4)
    rshape = _dims(shape, dim, keep)
    kd = " keepdim" if keep else ""
    body = (
        f"%r = legato.{op} %x0 dim {dim}{kd} : {ttype(shape, dt, 'sram')} -> "
        f"{ttype(rshape, dt, 'sram')}"
    )
    text = core0_kernel([(shape, dt)], (rshape, dt), body)
    x = rand(shape, dt, rng, -4, 4)
    emu, ref, _ = run_both(text, [x, np.zeros(rshape, NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])
    t = torch.from_numpy(x.astype(np.float32))
    expect = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin}[op](
        t, dim=dim, keepdim=keep
    )
    tol = 0 if op in ("amax", "amin") else (2e-2 if dt == "bf16" else 1e-5)
    np.testing.assert_allclose(emu[-1].astype(np.float32), expect.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", DTYPES)
def test_reduction_dynamic_rows(dt):
    rng = np.random.default_rng(5)
    shape = [(-1, 8), 32]
    body = f"""
%s = legato.sum %x0 dim 1 keepdim : {ttype(shape, dt, "sram")} -> {ttype([(-1, 8), 1], dt, "sram")}
%r = legato.sub %x0, %s : {ttype(shape, dt, "sram")}, {ttype([(-1, 8), 1], dt, "sram")} -> {ttype(shape, dt, "sram")}
"""
    text = core0_kernel([(shape, dt)], ([8, 32], dt), body, r_shape=shape)
    x = rand([5, 32], dt, rng)
    emu, ref, _ = run_both(text, [x, np.zeros((8, 32), NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "shape,perm",
    [([4, 8], [1, 0]), ([2, 3, 4], [0, 2, 1]), ([2, 3, 4], [1, 2, 0]), ([2, 3, 4], [2, 0, 1])],
)
def test_transpose(dt, shape, perm):
    rng = np.random.default_rng(6)
    rshape = [shape[p] for p in perm]
    body = (
        f"%r = legato.transpose %x0 {perm} : {ttype(shape, dt, 'sram')} -> "
        f"{ttype(rshape, dt, 'sram')}"
    )
    text = core0_kernel([(shape, dt)], (rshape, dt), body)
    x = rand(shape, dt, rng)
    emu, ref, _ = run_both(text, [x, np.zeros(rshape, NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])
    assert_bit_equal(emu[-1], np.ascontiguousarray(np.transpose(x, perm)))


@pytest.mark.parametrize("dt", DTYPES)
def test_reshape_is_a_view(dt):
    rng = np.random.default_rng(7)
    body = f"""
%v = legato.reshape %x0 : {ttype([4, 6], dt, "sram")} -> {ttype([2, 12], dt, "sram")}
%r = legato.neg %v : {ttype([2, 12], dt, "sram")}
"""
    text = core0_kernel([([4, 6], dt)], ([2, 12], dt), body)
    x = rand([4, 6], dt, rng)
    emu, ref, art = run_both(text, [x, np.zeros((2, 12), NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])
    assert "core.view" in art.core_ir and "vpu.copy" not in art.asm


def test_reshape_dynamic():
    rng = np.random.default_rng(8)
    body = f"""
%v = legato.reshape %x0 : {ttype([(-1, 6), 2, 4], "f32", "sram")} -> {ttype([(-1, 6), 8], "f32", "sram")}
%r = legato.neg %v : {ttype([(-1, 6), 8], "f32", "sram")}
"""
    text = core0_kernel([([(-1, 6), 2, 4], "f32")], ([6, 8], "f32"), body, r_shape=[(-1, 6), 8])
    x = rand([3, 2, 4], "f32", rng)
    emu, ref, _ = run_both(text, [x, np.zeros((6, 8), np.float32)])
    assert_bit_equal(emu[-1], ref[-1])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("offsets,sizes", [([1, 0], [2, 8]), ([0, 2], [4, 3]), ([1, 4], [2, 4])])
def test_slice(dt, offsets, sizes):
    rng = np.random.default_rng(9)
    body = f"""
%s = legato.slice %x0 {offsets} {sizes} [1, 1] : {ttype([4, 8], dt, "sram")} -> {ttype(sizes, dt, "sram")}
%r = legato.exp %s : {ttype(sizes, dt, "sram")}
"""
    text = core0_kernel([([4, 8], dt)], (sizes, dt), body)
    x = rand([4, 8], dt, rng)
    emu, ref, _ = run_both(text, [x, np.zeros(sizes, NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_cat(dt, dim):
    rng = np.random.default_rng(10)
    a, b = [2, 3], [2, 3]
    b[dim] = 5
    r = list(a)
    r[dim] = a[dim] + b[dim]
    body = (
        f"%r = legato.cat %x0, %x1 dim {dim} : {ttype(a, dt, 'sram')}, {ttype(b, dt, 'sram')}"
        f" -> {ttype(r, dt, 'sram')}"
    )
    text = core0_kernel([(a, dt), (b, dt)], (r, dt), body)
    xa, xb = rand(a, dt, rng), rand(b, dt, rng)
    emu, ref, _ = run_both(text, [xa, xb, np.zeros(r, NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])
    assert_bit_equal(emu[-1], np.concatenate([xa, xb], axis=dim))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "src,dst", [([8], [3, 8]), ([3, 1], [3, 8]), ([], [2, 4]), ([2, 1, 4], [2, 3, 4])]
)
def test_broadcast_to(dt, src, dst):
    rng = np.random.default_rng(11)
    body = f"%r = legato.broadcast_to %x0 : {ttype(src, dt, 'sram')} -> {ttype(dst, dt, 'sram')}"
    text = core0_kernel([(src, dt)], (dst, dt), body)
    x = rand(src, dt, rng)
    emu, ref, _ = run_both(text, [x, np.zeros(dst, NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])
    assert_bit_equal(emu[-1], np.broadcast_to(x, dst))
