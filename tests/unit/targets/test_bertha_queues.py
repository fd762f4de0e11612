"""Queues are FIFO per (core, space, queue) in *issue* order (DESIGN section 3): the k-th `qwait`
releases when the k-th DMA notifying that queue (in global issue order) has completed, even when
a later-issued DMA completes first."""

import numpy as np
from bertha_helpers import run, tensor

from legato.types import i64

BIG = 64 * 1024  # shared DRAM -> core0 sram: DRAM latency + BIG / port rate
SMALL = 16  # core1 sram -> core1 sram: on-chip, another port, done in a cycle or two

TWO_DMAS = """\
.program top on top
    ld r3, 8(r1)
    lsa r4, core0.sram, 0
    li r5, {big}
    dma r4, r3, r5, core0.sram.q0          ; issued first, completes last
    lsa r6, core1.sram, 0
    lsa r7, core1.sram, 4096
    li r8, {small}
    dma r7, r6, r8, core0.sram.q0          ; issued second, completes first
    dmawait
    halt
.program c0 on core(0)
{waits}    halt
"""


def dma_ends(res):
    """End cycle of each DMA, in issue order (trace ids are assigned at issue)."""
    ends = {e["id"]: e["ts"] for e in res.trace_events if e.get("cat") == "dma" and e["ph"] == "e"}
    return [ends[i] for i in sorted(ends)]


def qwait_releases(res):
    return [
        e["ts"] + e["dur"]
        for e in res.trace_events
        if e.get("ph") == "X" and e["name"].startswith("qwait")
    ]


def run_two(waits: int):
    x = np.zeros(BIG // 8, np.int64)
    src = TWO_DMAS.format(big=BIG, small=SMALL, waits="    qwait sram.q0\n" * waits)
    return run(src, [tensor("x", i64, [BIG // 8])], [x])


def test_first_qwait_waits_for_the_first_issued_dma():
    res = run_two(1)
    big_end, small_end = dma_ends(res)
    assert small_end < big_end  # the test discriminates: completion order != issue order
    # the qwait issues at its release cycle, the halt one cycle later and retires the next
    (release,) = qwait_releases(res)
    assert release >= big_end
    assert res.module_cycles["core0"] == release + 2


def test_second_qwait_consumes_the_second_dma():
    res = run_two(2)
    big_end, small_end = dma_ends(res)
    first = qwait_releases(res)[0]
    second = res.module_cycles["core0"] - 2  # issued right after the first: no trace event
    assert first >= big_end
    assert second >= max(first, small_end)


def test_third_qwait_deadlocks_with_two_arrivals():
    import pytest

    from legato.targets.bertha.emulator import DeadlockError

    with pytest.raises(DeadlockError, match="queue sram.q0 of core 0"):
        run_two(3)
