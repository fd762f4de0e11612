"""Contiguity of core-level buffers: a dim of size 1 has no stride that matters, so a tile
`w[0, t]` of a `[1, T, 256, 128]` argument, or a row slice `x[:, a:b]` of a `[1, K]` row, is
contiguous (the compiler views it without a copy; the core interpreter must accept the view)."""

import torch

import legato
from legato.interp.memory import Buf

bf16 = legato.types.float("bfloat16")
f32 = legato.types.float("float32")


def test_size_one_dims_do_not_break_contiguity():
    row = Buf(0, (1, 256), bf16.numpy, "sram", 0, (4096, 1))
    assert row.is_contiguous
    assert not Buf(0, (2, 256), bf16.numpy, "sram", 0, (4096, 1)).is_contiguous
    assert Buf(0, (1, 1, 128), bf16.numpy, "sram", 0, (256, 128, 1)).is_contiguous


def tt(shape, memory, dtype=bf16):
    return legato.get_model().tensor_type(dtype, shape, memory)


@legato.compile(backend="bertha")
def row_slices(
    x: tt([1, 512], "shared_dram"),
    w: tt([1, 2, 256, 128], "mpu_dram"),
    out: tt([1, 128], "shared_dram", f32),
    n: tt(((-1, 2), 1), "shared_dram"),
):
    """The MPU's left operand is a runtime-offset column slice of a [1, 512] row, its weight a
    tile w[0, t] of a 4-D argument (a [1, 1, 256, 128] slice viewed as [256, 128])."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        xs = legato.tensor.load(x)
        acc = legato.tensor.full((1, 128), 0.0, f32)
        for t in range(n.size(0)):  # a runtime loop
            wt = legato.tensor.load(w[0, t], "mpu_buffer")
            acc = acc + legato.tensor.matmul(xs[:, t * 256 : (t + 1) * 256], wt, f32)
        legato.tensor.memcpy(out, acc)


def test_runtime_row_slice_into_the_mpu_at_every_level():
    x = torch.randn(1, 512).bfloat16()
    w = torch.randn(1, 2, 256, 128).bfloat16()
    ref = x.float() @ w.reshape(512, 128).float()
    for level in ("legato", "core", "backend"):
        out = torch.zeros(1, 128)
        row_slices.interpret(x, w, out, torch.zeros(2, 1).bfloat16(), level=level)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-3)
