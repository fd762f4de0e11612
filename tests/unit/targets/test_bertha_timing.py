"""Timing model sanity: every expected number is derived from the ComputeModel parameters."""

import math

import numpy as np
import pytest
from bertha_helpers import run, small_model, tensor

from legato.targets.bertha.timing import DRAM_INTERLEAVE_BYTES, channel_bytes
from legato.types import bf16, i64

ONE_DMA = """\
.program core0 on core(0)
    ld r3, 8(r1)
    lsa r4, sram, 0
    li r5, {n}
    dma r4, r3, r5
    dmawait
    halt
"""


def one_dma_cycles(model, n):
    x = np.zeros(n // 8, np.int64)
    return run(ONE_DMA.format(n=n), [tensor("x", i64, [n // 8])], [x], model=model)


def expected_one_dma(model, n):
    lat = model.dram_latency_cycles
    # ld from shared DRAM is non-blocking: lsa and li issue under its latency and the dma, which
    # reads the loaded register, waits for it (register scoreboard); the data phase is limited
    # by the narrower of the port and the channels the transfer touches
    issue = lat
    per_channel = max(channel_bytes(0x10000, n, model.num_memory_channels))
    data = max(
        math.ceil(n / model.dma_port_bytes_per_cycle),
        math.ceil(per_channel / model.dram_bytes_per_cycle_per_channel),
    )
    end = issue + data + lat
    return end + 2  # dmawait issues at the end, halt one cycle later


@pytest.mark.parametrize("name", ["bertha", "bertha-evt1"])
@pytest.mark.parametrize("n", [8, 4096, 65536])
def test_single_dma_time_follows_the_model(name, n):
    model = small_model(name)
    res = one_dma_cycles(model, n)
    assert res.cycles == expected_one_dma(model, n)
    assert res.cycles >= 2 * model.dram_latency_cycles
    assert res.dram_bytes == n


def test_larger_transfers_take_proportionally_longer():
    model = small_model()
    small, big = one_dma_cycles(model, 8192), one_dma_cycles(model, 8 * 8192)
    assert big.cycles - small.cycles == 7 * 8192 // model.dma_port_bytes_per_cycle


def test_faster_port_is_faster():
    a = one_dma_cycles(small_model("bertha"), 65536).cycles
    b = one_dma_cycles(small_model("bertha-evt1"), 65536).cycles
    assert b < a


def test_channel_interleaving():
    assert channel_bytes(0, 8 * DRAM_INTERLEAVE_BYTES, 8) == [DRAM_INTERLEAVE_BYTES] * 8
    assert channel_bytes(100, 10, 4) == [10, 0, 0, 0]
    assert channel_bytes(200, 400, 4) == [56, 256, 88, 0]
    for addr, n, c in [(12345, 99999, 8), (0, 1, 3), (255, 2, 2)]:
        assert sum(channel_bytes(addr, n, c)) == n
    model = small_model()
    res = one_dma_cycles(model, 64 * 1024)
    assert res.dram_bytes_per_channel == [64 * 1024 // model.num_memory_channels] * 8
    # achieved bandwidth: bytes over the run's cycles, never above a channel's peak
    per = 64 * 1024 // model.num_memory_channels
    assert res.dram_bandwidth_per_channel == [per / res.cycles] * 8
    assert all(b <= model.dram_bytes_per_cycle_per_channel for b in res.dram_bandwidth_per_channel)
    assert abs(res.dram_bandwidth_gbps - 64 * 1024 / res.seconds / 1e9) < 1e-9
    assert "DRAM bandwidth:" in res.summary()


CONTEND = """\
.program worker on all_cores
    ld r3, 8(r1)
    lsa r4, sram, 0
    li r5, {n}
    dma r4, r3, r5
    dmawait
    halt
"""


def test_cores_contend_for_a_channel():
    n = 16384
    one = small_model(cores=1, channels=1)
    two = small_model(cores=2, channels=1)
    x = np.zeros(n // 8, np.int64)
    r1 = run(CONTEND.format(n=n), [tensor("x", i64, [n // 8])], [x], model=one)
    r2 = run(CONTEND.format(n=n), [tensor("x", i64, [n // 8])], [x], model=two)
    # one channel at 64 B/cycle is as fast as one port: the second core waits for the channel
    assert r2.cycles - r1.cycles == n // one.dram_bytes_per_cycle_per_channel
    assert r2.dram_bytes == 2 * n
    # with as many channels as needed there is no contention
    wide = small_model(cores=2, channels=8)
    r3 = run(CONTEND.format(n=n), [tensor("x", i64, [n // 8])], [x], model=wide)
    assert r3.cycles == r1.cycles


def test_dma_in_flight_limit():
    model = small_model()
    k = model.dma_max_in_flight
    # distinct destinations, so the scoreboard does not order them (WAW)
    body = "\n".join("    dma r4, r3, r5\n    addi r4, r4, 8" for _ in range(k + 1))
    src = f".program core0 on core(0)\n    ld r3, 8(r1)\n    lsa r4, sram, 0\n    li r5, 8\n{body}\n    dmawait\n    halt\n"
    x = np.zeros(1, np.int64)
    res = run(src, [tensor("x", i64, [1])], [x], model=model)
    lat = model.dram_latency_cycles
    # the (k+1)-th DMA cannot issue before the first one completed: at least two latencies after
    # the table load
    assert res.cycles >= 3 * lat
    body_k = "\n".join("    dma r4, r3, r5\n    addi r4, r4, 8" for _ in range(k))
    src_k = src.replace(body, body_k)
    res_k = run(src_k, [tensor("x", i64, [1])], [x], model=model)
    assert res_k.cycles < 2 * lat + 3 * k + 10
    assert res.cycles > res_k.cycles + lat // 2


MPU = """\
.program core0 on core(0)
    lsa r3, mpu_buffer, 0
    li r4, {k}
    li r5, {n}
    mpu.ldw r3, r4, r5
    lsa r6, sram, 0
    lsa r7, sram, 262144
    li r8, {m}
    mpu.mm r7, r6, r8, f32
    mpu.mm r7, r6, r8, f32, acc
    halt
"""


@pytest.mark.parametrize("name", ["bertha", "bertha-evt1"])
def test_mpu_timing(name):
    model = small_model(name)
    m, k, n = 64, 256, 128
    res = run(MPU.format(m=m, k=k, n=n), model=model)
    load = math.ceil(k * n * 2 / model.mpu_weight_load_bytes_per_cycle)
    mm = math.ceil(m * k * n / model.mpu_macs_per_cycle)
    assert res.unit_busy["core0"]["mpu"] == load + 2 * mm
    # the MPU is one in-order unit: the two matmuls run back to back after the load
    assert res.cycles == 3 + load + 2 * mm
    assert res.mac_count == 2 * m * k * n


def test_scoreboard_orders_dependent_unit_ops():
    # vpu reads what the DMA is still writing: it must wait for the DMA to complete
    model = small_model()
    src = """\
.program core0 on core(0)
    ld r3, 8(r1)
    lsa r4, sram, 0
    li r5, 512
    dma r4, r3, r5
    lsa r6, sram, 4096
    li r7, 256
    vpu.exp r6, r4, r7, bf16
    halt
"""
    x = np.zeros(256, bf16.numpy)
    res = run(src, [tensor("x", bf16, [256])], [x], model=model)
    lat = model.dram_latency_cycles
    dma_end = lat + 512 // model.dma_port_bytes_per_cycle + lat  # the dma issues when r3 is loaded
    vpu = math.ceil(256 / model.vpu_transcendental_per_cycle)
    assert res.cycles == dma_end + vpu


LOADS = """\
.program core0 on core(0)
    ld r3, 8(r1)
    ld r4, 16(r1)
    ld r5, 24(r1)
    add r6, r3, r4
    add r6, r6, r5
    halt
"""

CHAIN = """\
.program core0 on core(0)
    ld r3, 8(r1)
    ld r4, 0(r3)
    ld r5, 0(r4)
    add r6, r5, r5
    halt
"""


def test_independent_loads_overlap_and_dependent_loads_wait():
    """`ld` from DRAM is non-blocking: the register is ready after the latency and only an
    instruction naming it waits (register scoreboard)."""
    model = small_model()
    lat = model.dram_latency_cycles
    xs = [np.zeros(1, np.int64) for _ in range(3)]
    res = run(LOADS, [tensor(f"x{i}", i64, [1]) for i in range(3)], xs, model=model)
    # three loads at 0, 1, 2; the first add waits for r4 (ready at lat + 1), the second for r5
    assert res.cycles == (lat + 2) + 1 + 1
    # a chain: each load's address is the previous load's value (x lies at the first shared
    # allocation, 0x10000): three full latencies
    x = np.array([0x10008, 0x10000], np.int64)
    res = run(CHAIN, [tensor("x", i64, [2])], [x], model=model)
    assert res.cycles == 3 * lat + 2


def test_an_instruction_overwriting_a_loading_register_waits():
    from legato.targets.bertha import isa
    from legato.targets.bertha.emulator import Module

    m = Module(0, "core0", None, 0, [])
    m.reg_ready = {3: 400, 4: 401}
    m.time = 10
    m.stall_on_loads(isa.make("li", a=3, imm=1))  # WAW on r3
    assert m.time == 400 and m.reg_ready == {4: 401}
    m.stall_on_loads(isa.make("li", a=7, imm=1))  # unrelated: no stall
    assert m.time == 400
    m.stall_on_loads(isa.make("add", a=8, b=4, c=0))  # RAW on r4
    assert m.time == 401 and m.reg_ready == {}


def test_a_notify_core_register_is_on_the_scoreboard():
    """dma names its notify-core register in field d, dma2d in immediate bits 7:0 (its d holds
    the strides): both wait for an in-flight load of that register."""
    from legato.targets.bertha import isa
    from legato.targets.bertha.emulator import Module

    notify = isa.NOTIFY_PRESENT | (isa.CORE_REG << 20) | (1 << 16) | (1 << 8)
    for ins in (
        isa.make("dma", a=3, b=4, c=5, d=9, imm=notify),
        isa.make("dma2d", a=3, b=4, c=5, d=6, imm=notify | 9),
    ):
        m = Module(0, "core0", None, 0, [])
        m.reg_ready = {9: 400}
        m.stall_on_loads(ins)
        assert m.time == 400, ins
