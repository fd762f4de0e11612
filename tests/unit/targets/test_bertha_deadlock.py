"""Deadlock reports give the cycle of waits (issue 17, item 4): which module waits on which
queue, semaphore or barrier, which blocked module would release it and where, with the kernel's
source lines; a wait nobody running can release is named as such."""

import pytest
from bertha_helpers import small_model

from legato.targets.bertha.abi import ArgLayout
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.deadlock import Step
from legato.targets.bertha.elf import write_elf
from legato.targets.bertha.emulator import DeadlockError
from legato.targets.bertha.runtime import run_binary

# each core waits for the other's send before sending: a cycle through two queues
CROSSED = """
.program c0 on core(0)
    qwait sram.q0
    lsa r3, core1.sram, 0
    li r4, 8
    dma r3, r3, r4, core1.sram.q0
    halt
.program c1 on core(1)
    qwait sram.q0
    lsa r3, core0.sram, 0
    li r4, 8
    dma r3, r3, r4, core0.sram.q0
    halt
"""

# core0 waits at a barrier core1 reaches only after core0's post: barrier -> semaphore -> back
BARRIER_SEM = """
.program c0 on core(0)
    barrier 0, 2
    sem.post 1, 1
    halt
.program c1 on core(1)
    sem.wait 1, 1
    barrier 0, 2
    halt
"""

LONELY = """
.program c0 on core(0)
    li r3, 1
    qwait sram.q2
    halt
.program c1 on core(1)
    halt
"""


def _deadlock(src, lines=None):
    model = small_model(cores=2)
    binary = write_elf(assemble(src), model, ArgLayout([]), lines=lines)
    with pytest.raises(DeadlockError) as ei:
        run_binary(binary, model, [])
    return ei.value


def test_crossed_queues_give_their_cycle_with_source_lines():
    lines = {
        "c0": [("k.py", 3, 5), None, None, ("k.py", 4, 9), None],
        "c1": [("k.py", 7, 5), None, None, ("k.py", 8, 9), None],
    }
    e = _deadlock(CROSSED, lines)
    assert e.cycle == [
        Step("core0", "c0", 0, "queue sram.q0 of core 0", "core1", "c1", 3),
        Step("core1", "c1", 0, "queue sram.q0 of core 1", "core0", "c0", 3),
    ]
    assert e.unreleasable == []
    msg = str(e)
    assert "  cycle of waits: core0 -> core1 -> core0" in msg
    assert (
        "    core0 waits at pc 0 (k.py:3:5) for queue sram.q0 of core 0, which core1 would "
        "release at pc 3 (k.py:8:9), but core1 is blocked" in msg
    )


def test_a_barrier_and_a_semaphore_cycle():
    e = _deadlock(BARRIER_SEM)
    assert [(s.module, s.resource, s.releaser, s.releaser_pc) for s in e.cycle] == [
        ("core0", "barrier 0 (2 modules)", "core1", 1),
        ("core1", "semaphore 1 (count 1)", "core0", 1),
    ]


def test_a_wait_nobody_can_release_is_named():
    e = _deadlock(LONELY)
    assert e.cycle == []
    assert e.unreleasable == [Step("core0", "c0", 1, "queue sram.q2 of core 0", None, None, None)]
    assert "core0 waits at pc 1 for queue sram.q2 of core 0, which no running module" in str(e)
