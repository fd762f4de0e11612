"""Core-to-core streams through reused receive buffers (the `core-transfer-rings` pass) and the
MPU accumulating `acc + a @ w` in place: when they apply, when they must not, and that the
results are the same at every level."""

import torch

import legato
from legato.model import bertha

BF = legato.types.float("bfloat16")
F32 = legato.types.float("float32")


def tt(shape, memory, dtype=BF):
    return legato.get_model().tensor_type(dtype, shape, memory)


def two_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 2, False, 8, 1 << 30)


@legato.compile(backend=two_cores)
def streamed(
    a: tt([5, 8, 256], "shared_dram"),
    w: tt([256, 128], "mpu_dram"),
    out: tt([8, 128], "shared_dram", F32),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        for t in legato.static_range(5):
            legato.tensor.request_load(legato.tensor.load(a[t]), device.get_core(1), "sram", 1)
    with device.get_core(1):
        wb = legato.tensor.load(w, "mpu_buffer")
        acc = legato.tensor.full((8, 128), 0.0, F32)
        for _t in legato.static_range(5):
            x = legato.tensor.receive_type(tt([8, 256], "sram"), 1, None, "sram")
            acc = acc + legato.tensor.matmul(x, wb, F32)
        legato.tensor.memcpy(out, acc)


@legato.compile(backend=two_cores)
def hoarded(
    a: tt([4, 8, 256], "shared_dram"),
    w: tt([256, 128], "mpu_dram"),
    out: tt([8, 128], "shared_dram", F32),
):
    """The receiver takes every transfer before it uses the first: no ring (it would deadlock),
    and acc is read twice, so its add stays a VPU add."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        for t in legato.static_range(4):
            legato.tensor.request_load(legato.tensor.load(a[t]), device.get_core(1), "sram", 1)
    with device.get_core(1):
        wb = legato.tensor.load(w, "mpu_buffer")
        x0 = legato.tensor.receive_type(tt([8, 256], "sram"), 1, None, "sram")
        x1 = legato.tensor.receive_type(tt([8, 256], "sram"), 1, None, "sram")
        x2 = legato.tensor.receive_type(tt([8, 256], "sram"), 1, None, "sram")
        x3 = legato.tensor.receive_type(tt([8, 256], "sram"), 1, None, "sram")
        acc = legato.tensor.matmul(x0, wb, F32)
        twice = acc * 2.0
        acc = acc + legato.tensor.matmul(x1, wb, F32)
        acc = acc + legato.tensor.matmul(x2, wb, F32) + legato.tensor.matmul(x3, wb, F32)
        legato.tensor.memcpy(out, acc + twice)


def _args(n):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, 8, 256, generator=g).bfloat16()
    w = (torch.randn(256, 128, generator=g) / 16).bfloat16()
    return a, w


def _at_every_level(kernel, a, w):
    outs = []
    for level in ("legato", "core", "backend", None):
        out = torch.zeros(8, 128)
        if level is None:
            kernel(a, w, out)
        else:
            kernel.interpret(a, w, out, level=level)
        outs.append(out)
    for o in outs[1:]:
        assert torch.equal(o, outs[0])
    return outs[0]


def test_stream_cycles_through_three_buffers_with_credits():
    a, w = _args(5)
    out = _at_every_level(streamed, a, w)
    ref = sum(a[t].float() @ w.float() for t in range(5))
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    core_ir = streamed.last_artifacts.core_ir
    assert core_ir.count('buffer = "xfer0_slot0"') == 4  # transfers 0 and 3, both ends
    assert 'buffer = "xfer0_slot2"' in core_ir and 'buffer = "xfer3"' not in core_ir
    assert core_ir.count("wait_queue sram queue 255") == 2  # the sender, for transfers 3 and 4
    assert core_ir.count("notify core(0) sram queue 255") == 2  # credits for transfers 0 and 1
    assert core_ir.count("accumulate = true") == 5 and "vpu_binary add" not in core_ir


def test_no_ring_when_the_receiver_holds_every_transfer_and_no_fusion_when_acc_is_reused():
    a, w = _args(4)
    out = _at_every_level(hoarded, a, w)
    m = [a[t].float() @ w.float() for t in range(4)]
    torch.testing.assert_close(out, m[0] * 2 + m[0] + m[1] + m[2] + m[3], rtol=1e-4, atol=1e-4)
    core_ir = hoarded.last_artifacts.core_ir
    assert "_slot" not in core_ir and "queue 255" not in core_ir
    assert 'buffer = "xfer3"' in core_ir
    # acc (the first matmul) is read twice: its add is on the VPU; the later accumulations fuse
    assert "vpu_binary add" in core_ir and "accumulate = true" in core_ir
