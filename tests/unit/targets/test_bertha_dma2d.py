"""`dma2d`: one strided transfer (ISA, emulator data and timing, backend interpreter, and the
compiler's use of it for column slices)."""

import math
import random

import numpy as np
import pytest
import torch
from bertha_helpers import run, small_model, tensor

import legato
from legato.targets.bertha import isa
from legato.targets.bertha.emulator import EmulatorFault
from legato.targets.bertha.timing import channel_bytes, channel_bytes_2d
from legato.types import i64

# A [rows, 16] int64 column block of x[rows, 64] (row bytes 128, src stride 512) into sram,
# then back into out[rows, 64] at column 32 (dst stride 512).
COLUMN_BLOCK = """\
.program core0 on core(0)
    ld r3, 8(r1)
    ld r10, 16(r1)
    lsa r4, sram, 0
    li r5, {rows}
    shli r5, r5, 32
    addi r5, r5, 128
    li r6, 128
    shli r6, r6, 32
    addi r6, r6, 512
    addi r3, r3, 64
    dma2d r4, r3, r5, r6, sram.q0
    qwait sram.q0
    li r6, 512
    shli r6, r6, 32
    addi r6, r6, 128
    addi r10, r10, 256
    dma2d r10, r4, r5, r6
    dmawait
    halt
"""


def _column_block(rows, model=None):
    x = np.arange(rows * 64, dtype=np.int64).reshape(rows, 64)
    out = np.zeros((rows, 64), np.int64)
    res = run(
        COLUMN_BLOCK.format(rows=rows),
        [tensor("x", i64, [rows, 64]), tensor("out", i64, [rows, 64], "write")],
        [x, out],
        model=model,
    )
    return x, out, res


def test_pack_and_unpack():
    v = isa.dma2d_pack(512, 256)
    assert v == 512 << 32 | 256 and isa.dma2d_unpack(v) == (512, 256)
    assert isa.dma2d_unpack(isa.dma2d_pack(2**32 - 1, 7)) == (2**32 - 1, 7)
    with pytest.raises(ValueError):
        isa.dma2d_pack(2**32, 0)


def test_register_notify_core_lives_in_the_low_bits():
    ins = isa.make("dma2d", 3, 4, 5, 6, isa.NOTIFY_PRESENT | 2 << 20 | 1 << 16 | 9 << 8 | 7)
    assert isa.decode(isa.encode(ins)) == ins
    with pytest.raises(isa.DecodeError, match="notify core register"):
        isa.make("dma2d", 3, 4, 5, 6, isa.NOTIFY_PRESENT | 2 << 20 | 1 << 16 | 40)
    with pytest.raises(isa.DecodeError, match="without the notify bit"):
        isa.make("dma2d", 3, 4, 5, 6, 7)


@pytest.mark.parametrize("rows", [1, 8, 37])
def test_column_block_round_trip(rows):
    x, out, res = _column_block(rows)
    ref = np.zeros_like(out)
    ref[:, 32:48] = x[:, 8:24]
    assert np.array_equal(out, ref)
    assert res.dram_bytes == 2 * rows * 128


@pytest.mark.parametrize("name", ["bertha", "bertha-evt1"])
def test_one_transfer_pays_the_latency_once(name):
    model = small_model(name)
    rows = 64
    _, _, res = _column_block(rows, model)
    lat = model.dram_latency_cycles
    n = rows * 128

    def data(addr, stride):
        per = max(channel_bytes_2d(addr, rows, 128, stride, model.num_memory_channels))
        return max(
            math.ceil(n / model.dma_port_bytes_per_cycle),
            math.ceil(per / model.dram_bytes_per_cycle_per_channel),
        )

    # two table loads (non-blocking: 7 scalar ops issue under their latency), `addi r3` waits
    # for r3 (register scoreboard), the load (latency + data), qwait, 4 scalar ops, the store
    x_addr = 0x10000  # the first shared allocation
    out_addr = x_addr + -(-rows * 512 // 4096) * 4096
    load_end = lat + 1 + data(x_addr + 64, 512) + lat
    store_end = load_end + 1 + 4 + data(out_addr + 256, 512) + lat
    assert res.cycles == store_end + 2
    # a row-by-row copy would pay the latency per row
    assert res.cycles < 2 * rows * lat


def test_channel_bytes_2d_counts_each_row():
    rnd = random.Random(0)
    for _ in range(200):
        addr, rows = rnd.randrange(1 << 20), rnd.randrange(0, 300)
        row = rnd.randrange(1, 2000)
        stride, ch = rnd.randrange(row, 20000), rnd.choice([3, 8, 16])
        ref = [0] * ch
        for r in range(rows):
            for c, b in enumerate(channel_bytes(addr + r * stride, row, ch)):
                ref[c] += b
        assert channel_bytes_2d(addr, rows, row, stride, ch) == ref
    # rows a multiple of the interleave period apart all land on the same channels
    assert channel_bytes_2d(0, 512, 512, 8192, 8) == [512 * 256, 512 * 256] + [0] * 6


def test_overlapping_rows_fault():
    src = (
        ".program core0 on core(0)\n    lsa r3, sram, 0\n    lsa r4, sram, 4096\n"
        "    li r5, 4\n    shli r5, r5, 32\n    addi r5, r5, 64\n"
        "    li r6, 32\n    shli r6, r6, 32\n    addi r6, r6, 64\n"
        "    dma2d r4, r3, r5, r6\n    halt\n"
    )
    with pytest.raises(EmulatorFault, match="smaller than the row"):
        run(src)


def test_span_past_the_end_of_an_argument_traps():
    src = COLUMN_BLOCK.format(rows=9)  # 9 rows of a [8, 64] argument
    with pytest.raises(EmulatorFault, match="runs past the end"):
        run(
            src,
            [tensor("x", i64, [8, 64]), tensor("out", i64, [8, 64], "write")],
            [np.zeros((8, 64), np.int64), np.zeros((8, 64), np.int64)],
        )


BF = legato.types.float("bfloat16")


def tt(shape):
    return legato.get_model().tensor_type(BF, shape, "shared_dram")


@legato.compile(backend="bertha")
def column_slabs(a: tt([64, 512]), out: tt([64, 512])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        t = legato.tensor.load(a[:, 128:256])
        legato.tensor.memcpy(out[:, 256:384], t + t)


def test_compiler_moves_column_slices_with_dma2d_at_every_level():
    a = torch.randn(64, 512).bfloat16()
    ref = torch.zeros(64, 512, dtype=torch.bfloat16)
    ref[:, 256:384] = a[:, 128:256] + a[:, 128:256]
    out = torch.zeros_like(ref)
    column_slabs(a, out)
    assert torch.equal(out, ref)
    asm = column_slabs.last_artifacts.asm
    assert asm.count("dma2d") == 2 and "\n    dma " not in asm
    assert column_slabs.last_run.total_instructions < 64  # not one DMA per row
    for level in ("legato", "core", "backend"):
        o = torch.zeros_like(ref)
        column_slabs.interpret(a, o, level=level)
        assert torch.equal(o, ref), level
