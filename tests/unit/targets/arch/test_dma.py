"""DMA descriptor rules: dma2d geometry, notify decoding, core selectors, ports, queues."""

import pytest

from legato.targets.bertha import isa
from legato.targets.bertha.arch.dma import (
    ArrivalQueues,
    decode_notify,
    dma2d_geometry,
    dma_port,
    notify_core_reg,
    select_core,
)
from legato.targets.bertha.arch.errors import Trap


def test_dma2d_geometry_unpacks_and_spans():
    rshape = isa.dma2d_pack(4, 64)  # 4 rows of 64 bytes
    rstride = isa.dma2d_pack(256, 128)  # dst stride 256, src stride 128
    assert dma2d_geometry(rshape, rstride) == (4, 64, 256, 128, 3 * 128 + 64, 3 * 256 + 64)


def test_dma2d_empty_has_no_span_and_any_strides():
    assert dma2d_geometry(isa.dma2d_pack(0, 64), 0) == (0, 64, 0, 0, 0, 0)
    assert dma2d_geometry(isa.dma2d_pack(3, 0), 0)[4:] == (0, 0)


@pytest.mark.parametrize("dst, src", [(32, 64), (64, 32)])
def test_dma2d_stride_below_the_row_traps(dst, src):
    with pytest.raises(Trap, match=rf"strides \(src {src}, dst {dst}\) smaller than the row of 64"):
        dma2d_geometry(isa.dma2d_pack(2, 64), isa.dma2d_pack(dst, src))


def _notify(mode, space, queue, core=0):
    return isa.NOTIFY_PRESENT | (queue << 8) | (isa.SPACES[space] << 16) | (mode << 20) | core


def test_notify_decoding_of_dma_and_dma2d():
    static = _notify(isa.CORE_STATIC, "mpu_buffer", 7, core=5)
    assert decode_notify("dma", static, 0) == (isa.CORE_STATIC, 5, 2, 7)
    assert decode_notify("dma2d", static, 9) == (isa.CORE_STATIC, 5, 2, 7)
    # a register core: field d for dma, bits 7:0 for dma2d (d holds the strides there)
    assert decode_notify("dma", _notify(isa.CORE_REG, "sram", 1), 12) == (isa.CORE_REG, 12, 1, 1)
    reg2d = _notify(isa.CORE_REG, "sram", 1, core=13)
    assert decode_notify("dma2d", reg2d, 6) == (isa.CORE_REG, 13, 1, 1)
    assert notify_core_reg("dma", _notify(isa.CORE_REG, "sram", 1), 12) == 12
    assert notify_core_reg("dma2d", reg2d, 6) == 13
    assert notify_core_reg("dma", static, 0) is None
    assert decode_notify("dma", 0, 0) is None and notify_core_reg("dma", 0, 3) is None
    assert notify_core_reg("mpu_mm", reg2d, 3) is None


def test_select_core():
    regs = [0, 0, 3, 9]
    assert select_core(isa.CORE_SELF, 0, regs, 1, 4) == 1
    assert select_core(isa.CORE_STATIC, 2, regs, None, 4) == 2
    assert select_core(isa.CORE_REG, 2, regs, None, 4) == 3
    with pytest.raises(Trap, match="top has no core memory or queues of its own"):
        select_core(isa.CORE_SELF, 0, regs, None, 4)
    with pytest.raises(Trap, match=r"core index 9 out of range \(the model has 4 cores\)"):
        select_core(isa.CORE_REG, 3, regs, 0, 4)
    with pytest.raises(Trap, match="core index 4 out of range"):
        select_core(isa.CORE_STATIC, 4, regs, 0, 4)


def test_dma_port_prefers_destination_then_source_then_issuer():
    assert dma_port(None, 1, 2) == "core2"
    assert dma_port(0, 1, None) == "core1"
    assert dma_port(3, None, None) == "core3"
    assert dma_port(None, None, None) == "top"


def test_arrival_queues_are_fifo_per_key():
    q = ArrivalQueues()
    assert q.head((0, 1, 0)) is None and q.pending() == []
    q.push((1, 1, 0), "a")
    q.push((0, 1, 0), "b")
    q.push((1, 1, 0), "c")
    assert q.head((1, 1, 0)) == "a" and q.pop((1, 1, 0)) == "a" and q.head((1, 1, 0)) == "c"
    fifo = q.fifo((2, 1, 0))  # a live view: a later push shows in it
    q.push((2, 1, 0), "d")
    assert list(fifo) == ["d"]
    assert [(k, list(v)) for k, v in q.pending()] == [
        ((0, 1, 0), ["b"]),
        ((1, 1, 0), ["c"]),
        ((2, 1, 0), ["d"]),
    ]
