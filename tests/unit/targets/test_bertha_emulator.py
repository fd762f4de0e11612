"""Emulator semantics of each instruction class, on hand-written assembly."""

import ml_dtypes
import numpy as np
import pytest
from bertha_helpers import BF16, build, run, tensor

from legato import numerics
from legato.targets.bertha import vpu
from legato.targets.bertha.arch.address_map import core_space_base
from legato.targets.bertha.emulator import (
    DeadlockError,
    EmulatorFault,
    InstructionLimitError,
)
from legato.targets.bertha.runtime import run_binary
from legato.types import bf16, f32, i64

MATMUL = """\
.kernel simple_matmul
.program top on top
    ld r3, 8(r1)              ; a
    ld r4, 16(r1)             ; a rows (dynamic)
    ld r5, 24(r1)             ; w
    muli r6, r4, {a_row}
    lsa r7, core0.sram, 0
    dma r7, r3, r6, core0.sram.q0
    lsa r8, core0.mpu_buffer, 0
    li r9, {w_bytes}
    dma r8, r5, r9, core0.mpu_buffer.q0
    dmawait
    halt
.program core0 on core(0)
    ld r4, 16(r1)             ; rows
    ld r10, 32(r1)            ; out
    qwait mpu_buffer.q0
    lsa r3, mpu_buffer, 0
    li r5, {k}
    li r6, {n}
    mpu.ldw r3, r5, r6
    qwait sram.q0
    lsa r7, sram, 0
    lsa r8, sram, 65536
    mpu.mm r8, r7, r4, bf16
    muli r9, r4, {out_row}
    dma r10, r8, r9
    dmawait
    halt
"""


def matmul_args(m_bound, k, n):
    return [
        tensor("a", bf16, [(-1, m_bound), k]),
        tensor("w", bf16, [k, n], memory="mpu_dram"),
        tensor("out", bf16, [(-1, m_bound), n], "write"),
    ]


@pytest.mark.parametrize("m", [1, 7, 10])
def test_hand_written_matmul_matches_numerics(m):
    rng = np.random.default_rng(m)
    k, n = 256, 128
    src = MATMUL.format(a_row=2 * k, w_bytes=2 * k * n, k=k, n=n, out_row=2 * n)
    a = rng.standard_normal((m, k)).astype(BF16)
    w = rng.standard_normal((k, n)).astype(BF16)
    out = np.zeros((m, n), BF16)
    res = run(src, matmul_args(10, k, n), [a, w, out])
    ref = numerics.round_to(numerics.matmul_acc(a, w), BF16)
    assert out.view(np.uint16).tolist() == ref.view(np.uint16).tolist()
    assert res.mac_count == m * k * n
    assert res.instructions == {"top": 11, "core0": 15}


K_TILED = """\
.program core0 on core(0)
    ld r3, 8(r1)           ; a [M, 512] bf16
    ld r4, 16(r1)          ; w [512, N] bf16
    ld r5, 24(r1)          ; out [M, N] bf16
    lsa r6, sram, 0        ; a tile buffer
    li r7, {a_bytes}
    dma r6, r3, r7, sram.q0
    lsa r8, mpu_buffer, 0
    li r9, {w_bytes}
    dma r8, r4, r9, mpu_buffer.q1
    qwait sram.q0
    qwait mpu_buffer.q1
    ; acc = f32 buffer; a is [M, 512]: first K half uses columns 0..255 (strided) -> repack
    lsa r10, sram, 131072  ; a0 [M, 256]
    lsa r11, sram, 196608  ; a1 [M, 256]
    li r12, 0              ; row
    li r13, {m}
rows:
    muli r14, r12, 1024    ; row offset in a
    add r15, r6, r14
    muli r16, r12, 512
    add r17, r10, r16
    add r18, r11, r16
    li r19, 512
    dma r17, r15, r19
    addi r15, r15, 512
    dma r18, r15, r19
    addi r12, r12, 1
    blt r12, r13, rows
    dmawait
    li r20, 256
    li r21, {n}
    mpu.ldw r8, r20, r21
    lsa r22, sram, 262144  ; acc f32
    mpu.mm r22, r10, r13, f32
    li r23, {w_half}
    add r24, r8, r23
    mpu.ldw r24, r20, r21
    mpu.mm r22, r11, r13, f32, acc
    lsa r25, sram, 393216
    muli r26, r13, {n}
    vpu.cvt r25, r22, r26, bf16, f32
    muli r27, r26, 2
    dma r5, r25, r27
    dmawait
    halt
"""


def test_k_tiled_accumulation_is_bit_exact():
    rng = np.random.default_rng(7)
    m, k, n = 5, 512, 64
    a = rng.standard_normal((m, k)).astype(BF16)
    w = rng.standard_normal((k, n)).astype(BF16)
    out = np.zeros((m, n), BF16)
    src = K_TILED.format(a_bytes=m * k * 2, w_bytes=k * n * 2, m=m, n=n, w_half=256 * n * 2)
    run(
        src,
        [
            tensor("a", bf16, [m, k]),
            tensor("w", bf16, [k, n]),
            tensor("out", bf16, [m, n], "write"),
        ],
        [a, w, out],
    )
    ref = numerics.round_to(numerics.matmul_acc(a, w), BF16)
    assert out.view(np.uint16).tolist() == ref.view(np.uint16).tolist()


SCALAR = """\
.program top on top
    ld r3, 8(r1)
    li r4, -7
    li r5, 2
    div r6, r4, r5
    st r6, 0(r3)
    rem r6, r4, r5
    st r6, 8(r3)
    shr r6, r4, r5
    st r6, 16(r3)
    sra r6, r4, r5
    st r6, 24(r3)
    li r7, 1
    lih r7, 3
    st r7, 32(r3)
    li r8, 0                ; sum 1..10
    li r9, 1
    li r10, 11
L0:
    add r8, r8, r9
    addi r9, r9, 1
    blt r9, r10, L0
    st r8, 40(r3)
    min r6, r4, r5
    max r11, r4, r5
    mul r6, r6, r11
    st r6, 48(r3)
    xor r6, r4, r5
    andi r6, r6, 255
    or r6, r6, r5
    shli r6, r6, 4
    st r6, 56(r3)
    slt r6, r4, r5
    seq r11, r5, r5
    add r6, r6, r11
    st r6, 64(r3)
    muli r6, r4, 3
    divi r6, r6, 4
    remi r11, r4, 4
    sub r6, r6, r11
    st r6, 72(r3)
    shri r6, r4, 60
    st r6, 80(r3)
    lsa r6, core2.private_dram, 16
    st r6, 88(r3)
    li r12, 2
    lsa r6, core(r12).mpu_buffer, 0
    st r6, 96(r3)
    bge r5, r4, skip
    st r0, 104(r3)
skip:
    beq r0, r0, end
    st r5, 104(r3)
end:
    ld r6, 8(r3)
    st r6, 112(r3)
    halt
"""


def test_scalar_instructions():
    out = np.full(15, 99, np.int64)
    run(SCALAR, [tensor("out", i64, [15], "write")], [out])
    expect = [
        -3,
        -1,
        (-7 % (1 << 64)) >> 2,
        -2,
        (3 << 32) | 1,
        55,
        -14,
        (((-7 ^ 2) & 255) | 2) << 4,
        2,
        (-21 // 4 + 1) - (-3),
        15,
        core_space_base(2, "private_dram") + 16,
        core_space_base(2, "mpu_buffer"),
        99,
        -1,
    ]
    expect[2] = expect[2] - (1 << 64) if expect[2] >> 63 else expect[2]
    assert out.tolist() == expect


def test_read_only_arguments_are_not_copied_back():
    src = ".program top on top\n    ld r3, 8(r1)\n    li r4, 5\n    st r4, 0(r3)\n    halt\n"
    x = np.zeros(1, np.int64)
    # a `read` argument is mapped uncopied and read-only: the store traps, x stays as it was
    with pytest.raises(EmulatorFault, match="to x, which is read-only"):
        run(src, [tensor("x", i64, [1], "read")], [x])
    assert x[0] == 0
    run(src, [tensor("x", i64, [1], "readwrite")], [x])
    assert x[0] == 5


def test_out_of_bounds_load_traps():
    src = ".program top on top\n    nop\n    li r3, 64\n    ld r4, 0(r3)\n    halt\n"
    with pytest.raises(EmulatorFault) as ei:
        run(src)
    e = ei.value
    assert (e.program, e.pc, e.address) == ("top", 2, 64)
    assert "outside any allocation" in str(e) and "`ld r4, 0(r3)`" in str(e)


def test_dma_past_the_end_of_an_argument_traps():
    src = (
        ".program core0 on core(0)\n    ld r3, 8(r1)\n    lsa r4, sram, 0\n    li r5, 17\n"
        "    dma r4, r3, r5\n    halt\n"
    )
    with pytest.raises(EmulatorFault, match="runs past the end of a") as ei:
        run(src, [tensor("a", bf16, [8])], [np.zeros(8, BF16)])
    assert ei.value.pc == 3


def test_sram_bound_and_unmapped_core_trap(model):
    sram_end = model.sram_size
    src = (
        f".program core0 on core(0)\n    lsa r4, sram, {sram_end - 8}\n    ld r5, 8(r4)\n    halt\n"
    )
    with pytest.raises(EmulatorFault, match="outside any allocation"):
        run(src)
    src = f".program core0 on core(0)\n    lsa r4, core{model.num_cores}.sram, 0\n    halt\n"
    with pytest.raises(EmulatorFault, match="core index 4 out of range"):
        run(src)


def test_unit_operands_must_be_local():
    src = (
        ".program core0 on core(0)\n    lsa r3, mpu_buffer, 0\n    li r4, 2\n"
        "    mpu.ldw r3, r4, r4\n    ld r5, 8(r1)\n    mpu.mm r5, r3, r4, bf16\n    halt\n"
    )
    with pytest.raises(
        EmulatorFault, match="mpu.mm destination must be in this core's local memory"
    ):
        run(src, [tensor("a", bf16, [8])], [np.zeros(8, BF16)])
    src = (
        ".program core0 on core(0)\n    lsa r3, sram, 0\n    li r4, 2\n"
        "    mpu.ldw r3, r4, r4\n    halt\n"
    )
    with pytest.raises(EmulatorFault, match="mpu_buffer"):
        run(src)


@pytest.mark.parametrize("k, n", [(257, 8), (8, 129), (0, 8)])
def test_weight_tile_limits(k, n):
    src = (
        f".program core0 on core(0)\n    lsa r3, mpu_buffer, 0\n    li r4, {k}\n    li r5, {n}\n"
        "    mpu.ldw r3, r4, r5\n    halt\n"
    )
    with pytest.raises(EmulatorFault, match=r"exceeds the MPU's \[256, 128\]"):
        run(src)


def test_mm_without_weights_traps():
    src = ".program core0 on core(0)\n    lsa r3, sram, 0\n    mpu.mm r3, r3, r0, f32\n    halt\n"
    with pytest.raises(EmulatorFault, match="before any mpu.ldw"):
        run(src)


def test_division_by_zero_traps():
    with pytest.raises(EmulatorFault, match="div by zero"):
        run(".program top on top\n    div r3, r3, r0\n    halt\n")


def test_deadlock_names_every_blocked_module():
    src = """\
.program top on top
    halt
.program a on core(0)
    qwait sram.q3
    halt
.program b on core(1)
    nop
    sem.wait 4, 2
    halt
"""
    with pytest.raises(DeadlockError) as ei:
        run(src)
    waits = {w[0]: w for w in ei.value.waits}
    assert set(waits) == {"core0", "core1"}
    assert waits["core0"][2:4] == (0, "qwait sram.q3")
    assert "queue sram.q3" in waits["core0"][4]
    assert waits["core1"][2:4] == (1, "sem.wait 4, 2")
    assert "semaphore 4 is 0, waiting for 2" in waits["core1"][4]
    assert "core1 (program 'b') pc 1 `sem.wait 4, 2`" in str(ei.value)


def test_barrier_deadlock_when_a_participant_is_missing():
    src = ".program s on all_cores\n    barrier 1, 5\n    halt\n"
    with pytest.raises(DeadlockError, match="4 of 5 modules arrived"):
        run(src)


def test_instruction_limit():
    with pytest.raises(InstructionLimitError, match="instruction limit of 1000") as ei:
        run(".program top on top\nL0:\n    jmp L0\n", instruction_limit=1000)
    assert ei.value.program == "top" and ei.value.pc == 0


SPMD = """\
.program top on top
    ld r3, 8(r1)
    sem.wait 0, 4            ; every core stored its id
    li r4, 0
    li r5, 0
    li r6, 4
L0:
    shli r7, r4, 3
    add r7, r7, r3
    ld r8, 0(r7)
    add r5, r5, r8
    addi r4, r4, 1
    blt r4, r6, L0
    st r5, 32(r3)
    halt
.program worker on all_cores
    ld r3, 8(r1)
    shli r4, r2, 3
    add r4, r4, r3
    addi r5, r2, 10
    st r5, 0(r4)             ; out[core] = core + 10
    barrier 0, 4
    sem.post 0, 1
    halt
"""


def test_spmd_barrier_and_semaphores():
    out = np.zeros(5, np.int64)
    res = run(SPMD, [tensor("out", i64, [5], "write")], [out])
    assert out.tolist() == [10, 11, 12, 13, 46]
    assert set(res.instructions) == {"top", "core0", "core1", "core2", "core3"}


def test_dma_notify_to_register_selected_core():
    src = """\
.program top on top
    ld r3, 8(r1)
    li r4, 3
    lsa r5, core(r4).sram, 64
    li r6, 16
    dma r5, r3, r6, core(r4).sram.q2
    halt
.program c3 on core(3)
    qwait sram.q2
    ld r3, 8(r1)
    lsa r4, sram, 64
    li r5, 16
    dma r3, r4, r5
    dmawait
    halt
"""
    x = np.array([5, 6], np.int64)
    res = run(src, [tensor("x", i64, [2], "readwrite")], [x])
    assert x.tolist() == [5, 6]
    assert "core3" in res.port_busy  # top's DMA into core 3 used core 3's port
    assert "top" not in res.port_busy


VPU = """\
.program core0 on core(0)
    ld r3, 8(r1)             ; x [4, 8] f32
    ld r4, 16(r1)            ; out [{nout}] f32
    lsa r5, sram, 0
    li r6, 128
    dma r5, r3, r6, sram.q0
    qwait sram.q0
    li r7, 32                ; elements
    li r8, 4                 ; rows
    li r9, 8                 ; cols
    lsa r10, sram, 4096      ; results, 128 bytes apart
    vpu.exp r10, r5, r7, f32
    addi r11, r10, 128
    vpu.add r11, r5, r10, r7, f32
    addi r12, r11, 128
    vpu.rmax r12, r5, r8, r9, f32
    addi r13, r12, 128
    vpu.sub r13, r5, r12, r7, f32, bc.row(8)
    addi r14, r13, 128
    vpu.mul r14, r5, r5, r7, f32, bc.col(8)
    addi r15, r14, 128
    vpu.rsum r15, r5, r8, r9, f32
    addi r16, r15, 128
    vpu.transpose r16, r5, r8, r9, f32
    addi r17, r16, 128
    vpu.cvt r17, r5, r7, bf16, f32
    vpu.cvt r17, r17, r7, f32, bf16
    addi r18, r17, 128
    li r19, 1069547520       ; bits of 1.5f
    vpu.fill r18, r7, r19, f32
    addi r20, r18, 128
    vpu.div r20, r5, r19, r7, f32, bc.scalar
    addi r21, r20, 128
    vpu.gelu r21, r5, r7, f32
    li r22, {nbytes}
    dma r4, r10, r22
    dmawait
    halt
"""


def test_vpu_instructions():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    nout = 11 * 32
    out = np.zeros(nout, np.float32)
    # vpu.div with bc.scalar reads its scalar from the *address* in r19 — use r18's fill instead
    src = VPU.format(nout=nout, nbytes=nout * 4).replace(
        "vpu.div r20, r5, r19, r7, f32, bc.scalar", "vpu.div r20, r5, r18, r7, f32, bc.scalar"
    )
    run(src, [tensor("x", f32, [4, 8]), tensor("out", f32, [nout], "write")], [x, out])
    o = out.reshape(11, 32)
    flat = x.reshape(-1)
    e = vpu.unary("exp", flat, np.float32)
    np.testing.assert_allclose(e, np.exp(flat), rtol=1e-6)
    assert o[0].tolist() == e.tolist()
    assert o[1].tolist() == (flat + e).tolist()
    mx = x.max(axis=1)
    assert o[2][:4].tolist() == mx.tolist()
    assert o[3].tolist() == (x - mx[:, None]).reshape(-1).tolist()
    assert o[4].tolist() == (x * flat[:8][None, :]).reshape(-1).tolist()
    assert o[5][:4].tolist() == vpu.row_sum(x, np.float32).tolist()
    np.testing.assert_allclose(o[5][:4], x.sum(axis=1), rtol=1e-5)
    assert o[6].tolist() == x.T.reshape(-1).tolist()
    assert o[7].tolist() == flat.astype(ml_dtypes.bfloat16).astype(np.float32).tolist()
    assert o[8].tolist() == [1.5] * 32
    assert o[9].tolist() == (flat / np.float32(1.5)).tolist()
    assert o[10].tolist() == vpu.unary("gelu", flat, np.float32).tolist()


def test_run_binary_is_reusable_and_deterministic(model):
    rng = np.random.default_rng(0)
    src = MATMUL.format(a_row=512, w_bytes=256 * 128 * 2, k=256, n=128, out_row=256)
    binary = build(src, matmul_args(10, 256, 128), model)
    a = rng.standard_normal((4, 256)).astype(BF16)
    w = rng.standard_normal((256, 128)).astype(BF16)
    o1, o2 = np.zeros((4, 128), BF16), np.zeros((4, 128), BF16)
    r1 = run_binary(binary, model, [a, w, o1])
    r2 = run_binary(binary, model, [a, w, o2])
    assert r1.cycles == r2.cycles and o1.tobytes() == o2.tobytes()
    assert r1.trace_events == r2.trace_events


def test_trace_json(tmp_path):
    import json

    src = MATMUL.format(a_row=512, w_bytes=256 * 128 * 2, k=256, n=128, out_row=256)
    a, w, o = np.zeros((2, 256), BF16), np.zeros((256, 128), BF16), np.zeros((2, 128), BF16)
    res = run(src, matmul_args(10, 256, 128), [a, w, o])
    p = tmp_path / "t.json"
    res.write_trace(p)
    d = json.loads(p.read_text())
    ev = d["traceEvents"]
    threads = {(e["pid"], e["args"]["name"]) for e in ev if e.get("name") == "thread_name"}
    assert (1, "mpu") in threads and (0, "dma") in threads
    mpu = [e for e in ev if e.get("tid") == 2 and e["ph"] == "X"]
    assert [e["name"].split()[0] for e in mpu] == ["mpu.ldw", "mpu.mm"]
    assert all(e["args"]["cycle"] + e["args"]["cycles"] <= res.cycles for e in mpu)
    assert sum(e["ph"] == "b" for e in ev) == 3  # three DMAs
    # ts/dur are microseconds at the chip's clock, not one microsecond per cycle
    us_per_cycle = 1.0 / (res.clock_ghz * 1e3)
    assert res.clock_ghz != 1e-3
    for e in mpu:
        assert e["ts"] == pytest.approx(e["args"]["cycle"] * us_per_cycle)
        assert e["dur"] == pytest.approx(e["args"]["cycles"] * us_per_cycle)
    assert d["otherData"]["time_unit"] == "us at the chip's clock"
    raw = [e for e in res.trace_events if e.get("tid") == 2 and e["ph"] == "X"]
    assert [e["ts"] for e in raw] == [e["args"]["cycle"] for e in mpu]


SEL = """\
.program core0 on core(0)
    ld r3, 8(r1)             ; cond [8] {cdt}
    ld r4, 16(r1)            ; a [8] f32
    ld r5, 24(r1)            ; out [8] f32 (holds b; written back)
    lsa r6, sram, 0
    lsa r7, sram, 64
    lsa r8, sram, 128
    li r9, {cbytes}
    li r10, 32
    dma r6, r3, r9
    dma r7, r4, r10
    dma r8, r5, r10
    dmawait
    li r11, 8
    vpu.sel r8, r6, r7, r11, f32, {cdt}
    dma r5, r8, r10
    dmawait
    halt
"""


@pytest.mark.parametrize("cdt", ["i1", "f32", "bf16"])
def test_vpu_sel_merges_where_the_condition_is_nonzero(cdt):
    """dst keeps b where cond is 0 (or -0.0) and takes a elsewhere (NaN counts as true);
    elements move bit-exactly (NaN, inf, -0.0 of a and b survive)."""
    from legato.types import DType

    a = np.array([1.0, -np.inf, np.nan, -0.0, 5.0, 6.0, 7.0, 8.0], np.float32)
    b = np.array([-1.0, -2.0, np.inf, 4.0, np.nan, -0.0, -7.0, -8.0], np.float32)
    if cdt == "i1":
        cond = np.array([1, 0, 1, 1, 0, 0, 1, 0], np.bool_)
        want = [True, False, True, True, False, False, True, False]
    else:
        np_dt = np.float32 if cdt == "f32" else ml_dtypes.bfloat16
        cond = np.array([2.0, 0.0, np.nan, -1.0, -0.0, 0.0, np.inf, 0.0], np_dt)
        want = [True, False, True, True, False, False, True, False]
    out = b.copy()
    run(
        SEL.format(cdt=cdt, cbytes=cond.nbytes),
        [
            tensor("cond", DType(cdt), [8]),
            tensor("a", f32, [8]),
            tensor("out", f32, [8], "readwrite"),
        ],
        [cond, a, out],
    )
    expect = np.where(want, a, b)
    assert out.view(np.uint32).tolist() == expect.view(np.uint32).tolist()


CVT = """\
.program core0 on core(0)
    ld r3, 8(r1)             ; x [8] f32
    ld r4, 16(r1)            ; out [8] {dt}
    lsa r6, sram, 0
    lsa r7, sram, 64
    li r9, 32
    dma r6, r3, r9
    dmawait
    li r11, 8
    vpu.cvt r7, r6, r11, {dt}, f32
    li r10, {obytes}
    dma r4, r7, r10
    dmawait
    halt
"""


@pytest.mark.parametrize("dt", ["i64", "i32"])
def test_vpu_cvt_to_an_integer_truncates_and_saturates(dt):
    """A float to i64 / i32 truncates toward zero (torch's `.to(torch.int64)`); beyond the
    type's range it saturates, and NaN gives 0 (where torch is undefined)."""
    from legato.types import DType

    x = np.array([2.7, -2.7, -0.0, 2.0**40, np.nan, np.inf, -np.inf, -1e30], np.float32)
    np_dt = np.dtype(np.int64 if dt == "i64" else np.int32)
    info = np.iinfo(np_dt)
    out = np.zeros(8, np_dt)
    run(
        CVT.format(dt=dt, obytes=out.nbytes),
        [tensor("x", f32, [8]), tensor("out", DType(dt), [8], "write")],
        [x, out],
    )
    big = 2**40 if dt == "i64" else info.max
    assert out.tolist() == [2, -2, 0, big, 0, info.max, info.min, info.min]


def test_vpu_sel_condition_types_are_validated():
    from legato.targets.bertha import isa
    from legato.targets.bertha.asm import AsmError, assemble

    with pytest.raises(AsmError, match="unknown condition type 'i8'"):
        assemble(".program core0 on core(0)\n    vpu.sel r1, r2, r3, r4, f32, i8\n")
    with pytest.raises(AsmError, match="unknown element type 'i1'"):
        assemble(".program core0 on core(0)\n    vpu.sel r1, r2, r3, r4, i1, i1\n")
    word = isa.make("vpu.sel", 1, 2, 3, 4, 2 | 4 << 4).encode()
    with pytest.raises(isa.DecodeError, match="dtype codes"):
        isa.decode(word | (6 << 4) << 32 & ~((4 << 4) << 32))


def _timing(res):
    return (
        res.cycles,
        res.module_cycles,
        res.unit_busy,
        res.port_busy,
        res.dram_bytes_per_channel,
        res.instructions,
    )


def test_trace_off_records_nothing_and_changes_no_timing(model):
    rng = np.random.default_rng(1)
    src = MATMUL.format(a_row=512, w_bytes=256 * 128 * 2, k=256, n=128, out_row=256)
    binary = build(src, matmul_args(10, 256, 128), model)
    a = rng.standard_normal((4, 256)).astype(BF16)
    w = rng.standard_normal((256, 128)).astype(BF16)
    o_on, o_off = np.zeros((4, 128), BF16), np.zeros((4, 128), BF16)
    on = run_binary(binary, model, [a, w, o_on], trace=True)
    off = run_binary(binary, model, [a, w, o_off], trace=False)
    assert off.trace_events == [] and len(on.trace_events) > 0
    assert _timing(on) == _timing(off) and o_on.tobytes() == o_off.tobytes()


def test_jit_traces_only_inside_a_tracing_session():
    import torch

    import legato
    import legato.model.bertha as bertha

    t = legato.get_model().tensor_type(legato.types.float("float32"), [4, 64], "shared_dram")

    @legato.compile(backend=bertha)
    def traced_tanh(a: t, out: t):
        device = legato.get_context().get_device()
        with device.get_core(0):
            legato.tensor.memcpy(out, legato.tensor.tanh(legato.tensor.load(a)))

    a, out = torch.randn(4, 64), torch.zeros(4, 64)
    traced_tanh(a, out)
    off = traced_tanh.last_run
    assert off.trace_events == []
    with legato.session(trace=True):
        traced_tanh(a, out)
    on = traced_tanh.last_run
    torch.testing.assert_close(out, torch.tanh(a))
    ref = run_binary(
        traced_tanh.last_artifacts.binary,
        traced_tanh.model,
        [a.numpy(), np.zeros((4, 64), np.float32)],
        trace=True,
    )
    assert on.trace_events == ref.trace_events and any(e["ph"] == "X" for e in on.trace_events)
    assert _timing(on) == _timing(off)


def test_blas_runs_on_one_thread_inside_the_emulator(model, monkeypatch):
    from threadpoolctl import threadpool_info, threadpool_limits

    from legato.targets.bertha import emulator

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    seen = []
    real = emulator.mpu_fast.matmul  # the emulator's MPU pass (its f64 GEMM is numpy's BLAS)

    def spy(*a):
        seen.append(blas_threads())
        return real(*a)

    monkeypatch.setattr(emulator.mpu_fast, "matmul", spy)
    src = MATMUL.format(a_row=512, w_bytes=256 * 128 * 2, k=256, n=128, out_row=256)
    a, w, o = np.ones((2, 256), BF16), np.ones((256, 128), BF16), np.zeros((2, 128), BF16)
    with threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        run(src, matmul_args(10, 256, 128), [a, w, o])
        after = blas_threads()
    assert before and all(n == 2 for n in before)
    assert seen and all(n == 1 for s in seen for n in s)
    assert after == before
    assert o.astype(np.float32).tolist() == np.full((2, 128), 256.0).tolist()
