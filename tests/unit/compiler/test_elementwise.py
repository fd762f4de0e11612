"""Elementwise ops, casts and constants: legato -> core -> backend -> binary on the emulator,
bit-identical to the legato-level interpreter (and close to torch)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from compiler_helpers import NP, assert_bit_equal, core0_kernel, rand, run_both, ttype

DTYPES = ("bf16", "f32")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
UNARY = ("neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu")
TORCH = {"bf16": torch.bfloat16, "f32": torch.float32}


def _t(dt):
    return lambda s: ttype(s, dt, "sram")


@pytest.mark.parametrize("dt", DTYPES)
def test_every_binary_and_unary_op(dt):
    rng = np.random.default_rng(1)
    T = _t(dt)
    lines = []
    prev = "%x0"
    for i, op in enumerate(BINARY):
        lines.append(
            f"%b{i} = legato.{op} {prev}, %x1 : {T([4, 16])}, {T([4, 16])} -> {T([4, 16])}"
        )
        prev = f"%b{i}"
    # keep log/sqrt/rsqrt defined: work on exp(x) > 0
    lines.append(f"%p = legato.exp {prev} : {T([4, 16])}")
    prev = "%p"
    for i, op in enumerate(UNARY):
        lines.append(f"%u{i} = legato.{op} {prev} : {T([4, 16])}")
        lines.append(f"%v{i} = legato.add %u{i}, %x1 : {T([4, 16])}, {T([4, 16])} -> {T([4, 16])}")
        prev = f"%v{i}"
    lines.append(f"%r = legato.exp {prev} : {T([4, 16])}")
    text = core0_kernel([([4, 16], dt), ([4, 16], dt)], ([4, 16], dt), "\n".join(lines))
    x0 = rand([4, 16], dt, rng)
    x1 = rand([4, 16], dt, rng, 0.5, 1.0)
    emu, ref, _ = run_both(text, [x0, x1, np.zeros((4, 16), NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "lhs,rhs",
    [
        ([4, 8], []),  # bc.scalar
        ([4, 8], [8]),  # bc.col
        ([4, 8], [1, 8]),  # bc.col
        ([4, 8], [4, 1]),  # bc.row
        ([], [4, 8]),  # scalar lhs: swapped (commutative) or materialized
        ([4, 1], [1, 8]),  # both broadcast: outer op
        ([2, 1, 8], [2, 4, 8]),  # materialized by unrolling the leading dim
        ([(-1, 6), 8], [8]),  # dynamic rows
    ],
)
@pytest.mark.parametrize("op", ["sub", "mul"])
def test_broadcasting(dt, lhs, rhs, op):
    rng = np.random.default_rng(2)
    T = _t(dt)
    out = list(
        torch.broadcast_shapes(
            tuple(6 if isinstance(d, tuple) else d for d in lhs),
            tuple(6 if isinstance(d, tuple) else d for d in rhs),
        )
    )
    out_dims = (
        [d if isinstance(d, tuple) else d for d in lhs]
        if len(lhs) == len(out) and any(isinstance(d, tuple) for d in lhs)
        else out
    )
    body = f"%r = legato.{op} %x0, %x1 : {T(lhs)}, {T(rhs)} -> {T(out_dims)}"
    text = core0_kernel([(lhs, dt), (rhs, dt)], (out_dims, dt), body)
    shape = lambda s: [d[1] for d in [d if isinstance(d, tuple) else (0, d) for d in s]]
    a = rand(shape(lhs), dt, rng)
    b = rand(shape(rhs), dt, rng)
    emu, ref, _ = run_both(text, [a, b, np.zeros(shape(out_dims), NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])
    tr = getattr(torch, op)(
        torch.from_numpy(a.astype(np.float32)).to(TORCH[dt]),
        torch.from_numpy(b.astype(np.float32)).to(TORCH[dt]),
    )
    np.testing.assert_array_equal(emu[-1].astype(np.float32), tr.float().numpy())


@pytest.mark.parametrize(
    "src,dst", [("bf16", "f32"), ("f32", "bf16"), ("f32", "f16"), ("bf16", "bf16")]
)
def test_cast(src, dst):
    rng = np.random.default_rng(3)
    body = f"%r = legato.cast %x0 : {ttype([3, 5], src, 'sram')} -> {ttype([3, 5], dst, 'sram')}"
    text = core0_kernel([([3, 5], src)], ([3, 5], dst), body)
    emu, ref, _ = run_both(text, [rand([3, 5], src, rng, -100, 100), np.zeros((3, 5), NP[dst])])
    assert_bit_equal(emu[-1], ref[-1])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("value", ["0.1", "-3.0", "inf", "-inf"])
def test_constant(dt, value):
    T = _t(dt)
    body = f"""
%c = legato.constant {value} : {T([2, 3])}
%r = legato.add %x0, %c : {T([2, 3])}, {T([2, 3])} -> {T([2, 3])}
"""
    text = core0_kernel([([2, 3], dt)], ([2, 3], dt), body)
    emu, ref, _ = run_both(text, [np.ones((2, 3), NP[dt]), np.zeros((2, 3), NP[dt])])
    assert_bit_equal(emu[-1], ref[-1])
