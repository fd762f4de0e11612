"""Emulator faults (issue 7, item 6): an out-of-bounds access, a deadlock and a runaway loop each
raise an error naming the module, the PC and the cause; nothing is written back to the caller's
arrays; and the host process keeps working: the next run in the same process succeeds."""

import numpy as np
import pytest
from bertha_helpers import run, tensor
from seed_kernel import seed_args, seed_binary

from legato.model import bertha
from legato.targets.bertha.emulator import (
    DeadlockError,
    EmulatorError,
    EmulatorFault,
    InstructionLimitError,
)
from legato.targets.bertha.runtime import run_binary
from legato.types import i64


def seed_run_succeeds():
    model = bertha.evt0()
    args, expected = seed_args(rows=5, seed=2)
    res = run_binary(seed_binary(model), model, args)
    assert args[2].tobytes() == expected.tobytes()
    assert res.cycles > 0 and 0 < res.efficiency <= 1


OOB = """\
.program top on top
    halt
.program c1 on core(1)
    ld r3, 8(r1)             ; out (8 int64)
    li r4, 7
    st r4, 0(r3)             ; in bounds
    st r4, 64(r3)            ; one past the end: traps
    halt
"""


def test_out_of_bounds_store_names_module_pc_and_cause():
    out = np.zeros(8, np.int64)
    with pytest.raises(EmulatorFault) as ei:
        run(OOB, [tensor("out", i64, [8], "write")], [out])
    e = ei.value
    assert (e.module, e.program, e.pc) == ("core1", "c1", 3)
    assert e.instruction == "st r4, 64(r3)"
    assert "access of 8 bytes outside any allocation" in e.cause
    assert e.address is not None and e.address % 4096 == 64
    assert str(e).startswith("program 'c1' (core1) pc 3 `st r4, 64(r3)`: access of 8 bytes")
    assert out.tolist() == [0] * 8  # a faulting run writes nothing back
    seed_run_succeeds()


def test_out_of_bounds_dma_and_unmapped_address():
    with pytest.raises(EmulatorFault, match="runs past the end") as ei:
        run(
            ".program c0 on core(0)\n    ld r3, 8(r1)\n    lsa r4, sram, 0\n    li r5, 72\n"
            "    dma r4, r3, r5\n    halt\n",
            [tensor("x", i64, [8])],
            [np.zeros(8, np.int64)],
        )
    assert (ei.value.module, ei.value.pc) == ("core0", 3)
    with pytest.raises(EmulatorFault, match="outside any allocation") as ei:
        run(".program top on top\n    ld r3, 0(r0)\n    halt\n")
    assert (ei.value.module, ei.value.pc, ei.value.address) == ("top", 0, 0)
    seed_run_succeeds()


DEADLOCK = """\
.program top on top
    ld r3, 8(r1)
    lsa r4, core0.sram, 0
    li r5, 64
    dma r4, r3, r5, core0.sram.q1      ; notifies queue 1 ...
    dmawait
    halt
.program c0 on core(0)
    qwait sram.q0                      ; ... but core 0 waits on queue 0
    halt
"""


def test_deadlock_names_module_pc_and_cause():
    x = np.arange(8, dtype=np.int64)
    with pytest.raises(DeadlockError) as ei:
        run(DEADLOCK, [tensor("x", i64, [8], "readwrite")], [x])
    e = ei.value
    assert isinstance(e, EmulatorError)
    ((module, program, pc, ins, why),) = e.waits
    assert (module, program, pc, ins) == ("core0", "c0", 0, "qwait sram.q0")
    assert why == "waiting for an arrival on queue sram.q0 of core 0"
    assert "core0 (program 'c0') pc 0 `qwait sram.q0`: waiting for an arrival" in str(e)
    assert e.time > 0
    assert x.tolist() == list(range(8))
    seed_run_succeeds()


def test_instruction_limit_names_module_pc_and_cause():
    src = (
        ".program top on top\n    halt\n.program c2 on core(2)\n    li r3, 0\nL1:\n"
        "    addi r3, r3, 1\n    jmp L1\n"
    )
    with pytest.raises(InstructionLimitError) as ei:
        run(src, instruction_limit=5000)
    e = ei.value
    assert isinstance(e, EmulatorFault)
    assert (e.module, e.program) == ("core2", "c2") and e.pc in (1, 2)
    assert e.cause == "instruction limit of 5000 exceeded (runaway loop?)"
    assert "instruction limit of 5000 exceeded" in str(e)
    seed_run_succeeds()


def test_many_faults_in_a_row_leave_the_process_working():
    for _ in range(3):
        with pytest.raises(EmulatorFault):
            run(OOB, [tensor("out", i64, [8], "write")], [np.zeros(8, np.int64)])
        with pytest.raises(DeadlockError):
            run(DEADLOCK, [tensor("x", i64, [8])], [np.zeros(8, np.int64)])
        with pytest.raises(InstructionLimitError):
            run(".program top on top\nL0:\n    jmp L0\n", instruction_limit=100)
        seed_run_succeeds()


WRITE_READ_ARG = {
    "st": ".program c0 on core(0)\n    ld r3, 8(r1)\n    li r4, 7\n    st r4, 8(r3)\n    halt\n",
    "dma": (
        ".program c0 on core(0)\n    ld r3, 8(r1)\n    lsa r4, sram, 0\n    li r5, 16\n"
        "    dma r3, r4, r5\n    dmawait\n    halt\n"
    ),
    "dma2d": (
        ".program c0 on core(0)\n    ld r3, 8(r1)\n    lsa r4, sram, 0\n    li r5, 2\n"
        "    shli r5, r5, 32\n    addi r5, r5, 16\n    li r6, 32\n    shli r6, r6, 32\n"
        "    addi r6, r6, 16\n    dma2d r3, r4, r5, r6\n    dmawait\n    halt\n"
    ),
}


@pytest.mark.parametrize("how", sorted(WRITE_READ_ARG))
def test_writing_a_read_argument_traps_and_leaves_it_unchanged(how):
    """A `read` argument is mapped uncopied and read-only: a store or DMA into it faults with
    the argument's name, and the caller's array is untouched."""
    x = np.arange(8, dtype=np.int64)
    with pytest.raises(EmulatorFault, match=r"to x, which is read-only") as ei:
        run(WRITE_READ_ARG[how], [tensor("x", i64, [8])], [x])
    assert ei.value.program == "c0" and ei.value.instruction.startswith(how)
    assert x.tolist() == list(range(8))
    seed_run_succeeds()


def test_read_arguments_are_mapped_not_copied(monkeypatch):
    from legato.targets.bertha import emulator

    mapped = []
    real = emulator.Memory.map_read_only

    def spy(self, data, name):
        addr = real(self, data, name)
        mapped.append((name, self.find(addr, data.nbytes)[0].data))
        return addr

    monkeypatch.setattr(emulator.Memory, "map_read_only", spy)
    model = bertha.evt0()
    args, expected = seed_args(rows=5, seed=3)
    run_binary(seed_binary(model), model, args)
    assert args[2].tobytes() == expected.tobytes()
    names = [n for n, _ in mapped]
    assert names == ["a", "b"]
    for (_, data), arr in zip(mapped, args[:2]):
        assert np.shares_memory(data, arr) and not data.flags.writeable
