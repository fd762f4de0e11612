"""Assembler: file format, labels, and errors with line:col."""

import pytest

from legato.targets.bertha.asm import AsmError, assemble, disassemble

SAMPLE = """\
; comment
.kernel simple_matmul
.program top on top
    ld r3, 8(r1)
    lsa r4, core0.sram, 0
    dma r4, r3, r5, core0.sram.q0
    dmawait
    halt
.program core0 on core(0)
loop:
    qwait sram.q0
    mpu.mm r6, r4, r7, bf16
    bne r3, r0, loop
    halt
.program spmd on all_cores
.mem sram 4096
.mem private_dram 64
    halt
"""


def test_sample_file():
    mod = assemble(SAMPLE)
    assert mod.kernel == "simple_matmul"
    assert [(p.name, p.context) for p in mod.programs] == [
        ("top", "top"),
        ("core0", "core(0)"),
        ("spmd", "all_cores"),
    ]
    core0 = mod.program("core0")
    assert core0.labels == {"loop": 0}
    assert core0.instructions[2].simm == -2  # bne back to loop
    assert mod.program("spmd").memory == {"sram": 4096, "private_dram": 64}
    canon = disassemble(mod)
    assert "L0:\n    qwait sram.q0" in canon
    assert "    bne r3, r0, L0" in canon
    assert disassemble(assemble(canon)) == canon


def test_labels_forward_and_same_line():
    mod = assemble(".program p on core(0)\n  jmp end\n  nop\nend: halt\n")
    p = mod.programs[0]
    assert p.instructions[0].simm == 2
    assert disassemble(mod).splitlines()[-2:] == ["L2:", "    halt"]


def test_branch_past_end_and_numeric_offsets():
    text = ".program p on core(0)\n    jmp L1\nL1:\n"
    mod = assemble(text)
    assert mod.programs[0].instructions[0].simm == 1
    assert disassemble(mod) == text
    mod = assemble(".program p on core(0)\n    beq r1, r2, +9\n")
    assert disassemble(mod).splitlines()[-1] == "    beq r1, r2, +9"


@pytest.mark.parametrize(
    "src, line, col, msg",
    [
        ("    add r1, r2, r3\n", 1, 5, "outside a .program"),
        (".program p on core(0)\n    add r1, r2\n", 2, 5, "takes 3 operands"),
        (".program p on core(0)\n    add r1, r2, r32\n", 2, 17, "no register 'r32'"),
        (".program p on core(0)\n    frob r1\n", 2, 5, "unknown instruction 'frob'"),
        (".program p on core(0)\n    bne r1, r0, nowhere\n", 2, 17, "undefined label 'nowhere'"),
        (".program p on core(0)\nx:\nx:\n", 3, 1, "defined twice"),
        (".program p on core(0)\n    li r1, 0x1ffffffff\n", 2, 12, "out of range"),
        (".program p on core(0)\n    addi r1, r2, 2147483648\n", 2, 18, "out of range"),
        (".program p on core(0)\n    ld r1, 8[r1]\n", 2, 12, "memory operand"),
        (".program p on core(0)\n    lsa r1, dram, 0\n", 2, 13, "unknown memory space 'dram'"),
        (".program p on core(0)\n    dma r1, r2, r3, core0.sram.x1\n", 2, 21, "queue"),
        (".program p on core(0)\n    dma r1, r2, r3, core99.sram.q0\n", 2, 21, "core index 99"),
        (".program p on top\n    qwait sram.q0\n", 2, 5, "top has no queues"),
        (".program p on top\n    dma r1, r2, r3, sram.q0\n", 2, 21, "name the core"),
        (".program p on top\n    lsa r1, sram, 0\n", 2, 13, "top has no core memory"),
        (".program p on top\n    mpu.ldw r1, r2, r3\n", 2, 5, "top has no MPU"),
        (".program p on core(0)\n    mpu.mm r1, r2, r3, bf16, acc\n", 2, 30, "acc needs an f32"),
        (".program p on core(0)\n    mpu.mm r1, r2, r3, f64\n", 2, 24, "bf16 or f32"),
        (
            ".program p on core(0)\n    vpu.add r1, r2, r3, r4, f32, bc.row\n",
            2,
            34,
            "needs a period",
        ),
        (".program p on core(0)\n    vpu.exp r1, r2, r3, i64\n", 2, 25, "unknown element type"),
        (".program p on core(0)\n    sem.post 64, 1\n", 2, 14, "id 64 out of range"),
        (".program p on nowhere\n", 1, 15, "unknown context"),
        (".program p on core(0)\n.program p on core(1)\n", 2, 1, "defined twice"),
        (".bogus 1\n", 1, 1, "unknown directive"),
        (".program p on core(0)\n.mem dram 4\n", 2, 1, ".mem takes SPACE BYTES"),
        (".program p on core(0)\n    add r1, , r3\n", 2, 13, "empty operand"),
    ],
)
def test_errors_name_line_and_column(src, line, col, msg):
    with pytest.raises(AsmError) as ei:
        assemble(src, filename="k.s")
    e = ei.value
    assert msg in e.message
    assert (e.line, e.col) == (line, col), str(e)
    assert str(e).startswith(f"k.s:{line}:{col}: ")
