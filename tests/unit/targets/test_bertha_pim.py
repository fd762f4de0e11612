"""PIM (docs/pim.md): the layout, the `pim.gemv` encoding, the emulator's numerics against
numpy and the MPU's definition, its timing against DESIGN section 5's formula, the PIM-aware
roofline, and the refusal of a PIM binary by a chip without PIM."""

import ml_dtypes
import numpy as np
import pytest
from bertha_helpers import tensor

from bench.pim import gemv_binary, run_gemv
from legato import numerics
from legato.model.bertha import Bertha
from legato.targets.bertha import isa, timing
from legato.targets.bertha.abi import ArgLayout
from legato.targets.bertha.arch import pim
from legato.targets.bertha.asm import AsmError, assemble
from legato.targets.bertha.elf import TargetMismatchError, write_elf
from legato.targets.bertha.emulator import EmulatorFault
from legato.targets.bertha.runtime import run_binary
from legato.types import bf16, f32

BF16 = ml_dtypes.bfloat16


def pim_model(name="bertha", cores=8, channels=8, use_pim=True):
    return Bertha(None, name, cores, use_pim, channels, 1 << 30)


def rand(rng, shape):
    return rng.standard_normal(shape).astype(BF16)


# ---- layout --------------------------------------------------------------------------------
@pytest.mark.parametrize("k, n, channels", [(300, 100, 8), (5000, 70, 8), (64, 4500, 4)])
def test_layout_puts_each_units_columns_in_its_channel(k, n, channels):
    model = pim_model(channels=channels)
    rng = np.random.default_rng(1)
    w = rand(rng, (k, n))
    layout = pim.PimLayout(k, n, channels)
    packed = layout.pack(w)
    assert packed.size == layout.nbytes
    seen = np.zeros((k, channels * layout.n_unit), bool)
    for off, k0, k1, j0, j1 in layout.tiles():
        for c in range(channels):
            start = off + c * pim.BLOCK
            assert pim.channel_of(model, start) == c
            for addr, nbytes in pim.region_rows(model, start, k1 - k0, j1 - j0):
                per = timing.channel_bytes(addr, nbytes, channels)
                assert per[c] == nbytes  # every block of the region is in channel c
            tile = pim.read_region(model, lambda a, nb: packed[a : a + nb], start, k1 - k0, j1 - j0)
            cols = slice(c * layout.n_unit + j0, c * layout.n_unit + j1)
            want = np.zeros((k1 - k0, (j1 - j0)), BF16)
            real = w[k0:k1, cols.start : min(cols.stop, n)]
            want[:, : real.shape[1]] = real
            np.testing.assert_array_equal(tile.T.view(np.uint16), want.view(np.uint16))
            seen[k0:k1, cols] = True
    assert seen.all()


# ---- encoding ------------------------------------------------------------------------------
def test_pim_gemv_encodes_strictly():
    prog = assemble(".program p on core(0)\n    pim.gemv r1, r2, r3, r4, acc\n").programs[0]
    (w,) = prog.words
    ins = isa.decode(w)
    assert (ins.mnemonic, ins.a, ins.b, ins.c, ins.d, ins.imm) == ("pim.gemv", 1, 2, 3, 4, 1)
    assert isa.encode(ins) == w
    with pytest.raises(isa.DecodeError, match="reserved flag bits"):
        isa.decode(w | 2 << 32)
    with pytest.raises(AsmError, match="unknown pim.gemv flag"):
        assemble(".program p on core(0)\n    pim.gemv r1, r2, r3, r4, bf16\n")
    with pytest.raises(AsmError, match="top has no local memory"):
        assemble(".program p on top\n    pim.gemv r1, r2, r3, r4\n")


# ---- numerics ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, channels, k, n",
    [("bertha", 8, 300, 100), ("bertha", 8, 5000, 70), ("bertha-evt1", 16, 512, 4100)],
)
def test_gemv_matches_the_mpu_definition_and_numpy(name, channels, k, n):
    model = pim_model(name, cores=channels, channels=channels)
    rng = np.random.default_rng(2)
    x, w = rand(rng, k), rand(rng, (k, n))
    y, res = run_gemv(model, x, w)
    want = numerics.matmul_acc(x[None], w)[0]
    assert y.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    ref = x.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3 * np.sqrt(k))
    # the weight's bytes, the zero columns padding N to whole units included
    assert res.pim_bytes == k * pim.PimLayout(k, n, channels).n_unit * channels * 2
    assert res.roofline == timing.roofline(model, res.dram_bytes, 0, 0, 0, res.pim_bytes)
    assert res.roofline_cycles <= res.cycles


def test_accumulate_adds_into_the_destination():
    model = pim_model(cores=1)
    rng = np.random.default_rng(3)
    k, n = 64, 8
    x, w = rand(rng, k), rand(rng, (k, n))
    packed = pim.PimLayout(k, n, 8).pack(w)
    # unit 0's columns are 0..0 (n_unit = 1): run it twice, the second time with acc
    src = "\n".join(
        [
            ".program c0 on core(0)",
            "    ld r3, 8(r1)",
            "    ld r4, 16(r1)",
            "    ld r5, 24(r1)",
            "    lsa r6, sram, 0",
            f"    li r7, {k * 2}",
            "    dma r6, r3, r7",
            "    dmawait",
            "    lsa r11, sram, 4096",
            "    li r8, 1",
            f"    lih r8, {k}",
            "    pim.gemv r11, r6, r4, r8",
            "    pim.gemv r11, r6, r4, r8, acc",
            "    li r7, 4",
            "    dma r5, r11, r7",
            "    dmawait",
            "    halt",
        ]
    )
    args = [
        tensor("x", bf16, [k]),
        tensor("w", bf16, [packed.size // 2]),
        tensor("y", f32, [1], "write"),
    ]
    y = np.zeros(1, np.float32)
    run_binary(
        write_elf(assemble(src), model, ArgLayout(args)),
        model,
        [x, packed.view(BF16), y],
    )
    once = numerics.matmul_acc(x[None], w[:, :1])
    assert y.view(np.uint32)[0] == (once + once).astype(np.float32).view(np.uint32)[0, 0]


# ---- timing --------------------------------------------------------------------------------
def _timing_program(k: int, n: int, second_core_reads: bool) -> str:
    lines = [
        ".program c0 on core(0)",
        "    ld r4, 8(r1)",  # the weight region (ready at cycle 400)
        "    lsa r11, sram, 16384",
        "    lsa r12, sram, 0",
        f"    li r8, {n}",
        f"    lih r8, {k}",
        "    pim.gemv r11, r12, r4, r8",  # issues at 400
        "    dmawait",
        "    halt",
    ]
    if second_core_reads:
        lines += [
            ".program c1 on core(1)",
            "    ld r4, 8(r1)",
            "    lsa r6, sram, 0",
            "    li r7, 256",
            "    li r9, 2000",
            "L0:",
            "    addi r9, r9, -1",
            "    bne r9, r0, L0",
            "    dma r6, r4, r7",  # channel 0, while the PIM op runs there
            "    dmawait",
            "    halt",
        ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", ["bertha", "bertha-evt1"])
def test_one_operation_costs_the_design_formula(name):
    model = pim_model(name, cores=2, channels=8)
    k, n = 4096, 512
    layout = pim.PimLayout(k, n * 8, 8)
    w = np.zeros(layout.nbytes // 2, BF16)
    binary = write_elf(
        assemble(_timing_program(k, n, False)), model, ArgLayout([tensor("w", bf16, [w.size])])
    )
    res = run_binary(binary, model, [w])
    (ev,) = [e for e in res.trace_events if e.get("name", "").startswith("pim.gemv")]
    lat, port = model.dram_latency_cycles, model.dma_port_bytes_per_cycle
    x_in = lat + max(-(-2 * k // port), -(-2 * k // 64))
    y_out = lat + max(-(-4 * n // port), -(-4 * n // 64))
    op = lat + k * n * 2 // 256  # DESIGN: the DRAM latency plus the bytes at 256 B/cycle
    assert ev["ts"] == 400 + x_in
    assert ev["dur"] == op == pim.op_cycles(model, k, n)
    assert res.cycles == 400 + x_in + op + y_out + 2  # then dmawait and halt, a cycle each
    assert res.unit_busy["core0"]["pim"] == op
    assert res.pim_bytes == k * n * 2
    assert res.dram_bytes == 2 * k + 4 * n  # x in and y out cross the channel's pins


def test_ordinary_accesses_wait_for_the_operation_on_their_channel():
    model = pim_model(cores=2, channels=8)
    k, n = 4096, 512
    w = np.zeros(pim.PimLayout(k, n * 8, 8).nbytes // 2, BF16)
    binary = write_elf(
        assemble(_timing_program(k, n, True)), model, ArgLayout([tensor("w", bf16, [w.size])])
    )
    res = run_binary(binary, model, [w], hazards=False)
    (ev,) = [e for e in res.trace_events if e.get("name", "").startswith("pim.gemv")]
    op_end = ev["ts"] + ev["dur"]
    begin, end = [e["ts"] for e in res.trace_events if e.get("pid") == 1 and e.get("cat") == "dma"]
    assert ev["ts"] < begin < op_end  # issued while the operation ran
    # its 256 bytes (4 cycles on the channel) wait for the operation and for the result's
    # transfer booked on the channel after it (4n bytes at 64 B/cycle), then the latency
    assert end == op_end + 4 * n // 64 + 4 + model.dram_latency_cycles


def test_roofline_counts_pim_bytes_at_the_internal_rate():
    model = pim_model()
    assert timing.roofline(model, 0, 0, 0, 0, 8 * 256 * 1000).dram_cycles == 1000
    assert timing.roofline(model, 8 * 64 * 1000, 0, 0, 0, 8 * 256 * 1000).dram_cycles == 2000
    assert timing.roofline(model, 8 * 64 * 1000 + 1, 0, 0, 0).dram_cycles == 1001


# ---- refusal -------------------------------------------------------------------------------
def test_a_pim_binary_is_refused_by_a_chip_without_pim():
    with_pim, without = pim_model(), pim_model(use_pim=False)
    binary = gemv_binary(with_pim, 64, 64)
    x, y = np.zeros(64, BF16), np.zeros(64, np.float32)
    w = np.zeros(pim.PimLayout(64, 64, 8).nbytes // 2, BF16)
    with pytest.raises(TargetMismatchError, match=r"chip with PIM \(8 PIM units.*has none"):
        run_binary(binary, without, [x, w, y])


def test_pim_gemv_faults_on_a_chip_without_pim():
    model = pim_model(use_pim=False)
    binary = gemv_binary(model, 64, 64)  # assembled for it: the instruction itself faults
    x, y = np.zeros(64, BF16), np.zeros(64, np.float32)
    w = np.zeros(pim.PimLayout(64, 64, 8).nbytes // 2, BF16)
    with pytest.raises(EmulatorFault, match="no PIM units"):
        run_binary(binary, model, [x, w, y])


@pytest.mark.parametrize(
    "shape, match",
    [((4097, 1), "K = 4097 outside"), ((64, 2049), "N = 2049 outside"), ((0, 4), "K = 0")],
)
def test_operands_outside_the_buffers_fault(shape, match):
    model = pim_model(cores=1)
    k, n = shape
    src = "\n".join(
        [
            ".program c0 on core(0)",
            "    ld r4, 8(r1)",
            "    lsa r11, sram, 65536",
            "    lsa r12, sram, 0",
            f"    li r8, {n}",
            f"    lih r8, {k}",
            "    pim.gemv r11, r12, r4, r8",
            "    halt",
        ]
    )
    w = np.zeros(1 << 20, BF16)
    binary = write_elf(assemble(src), model, ArgLayout([tensor("w", bf16, [w.size])]))
    with pytest.raises(EmulatorFault, match=match):
        run_binary(binary, model, [w])


def test_one_core_keeps_every_unit_busy_at_once():
    """16 units driven by one core overlap: the port's in-flight limit counts x's transfers,
    and the results' port cycles are booked at issue (`DramTiming.pim_gemv`), so no operation
    waits for another channel's."""
    model = pim_model("bertha-evt1", cores=1, channels=16)
    k, n = 4096, 16 * 256
    x, w = np.zeros(k, BF16), np.zeros((k, n), BF16)
    _, res = run_gemv(model, x, w, cores=1, trace=True)
    evs = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in res.trace_events
        if e.get("name", "").startswith("pim.gemv")
    )
    assert len(evs) == 16
    op = pim.op_cycles(model, k, 256)
    assert all(end - start == op for start, end in evs)
    assert evs[-1][0] < evs[0][1]  # the last started before the first ended
    # the operations start as fast as the one port moves each x (8 KiB) and books each result
    port = model.dma_port_bytes_per_cycle
    assert evs[-1][0] - evs[0][0] <= 15 * (-(-2 * k // port) + -(-4 * 256 // port))
