"""The task scheduler: blocking, FIFO hand-off, deadlock reports, errors, preemption."""

from __future__ import annotations

import threading
from collections import deque

import pytest

from legato.interp.errors import DeadlockError, InterpError, StepLimitExceeded
from legato.interp.scheduler import Scheduler


def test_consumer_blocks_until_producer_sends():
    s = Scheduler()
    q: deque[int] = deque()
    log: list[str] = []

    def consumer(task):
        for _ in range(3):
            s.block_until(lambda: bool(q), None, "queue 0")
            log.append(f"got {q.popleft()}")
        return "consumed"

    def producer(task):
        for i in range(3):
            q.append(i)
            log.append(f"sent {i}")
        return "produced"

    s.spawn("core 0", consumer)
    s.spawn("top", producer)
    assert s.run() == ["consumed", "produced"]
    assert [e for e in log if e.startswith("got")] == ["got 0", "got 1", "got 2"]


def test_deadlock_names_every_blocked_task():
    s = Scheduler()
    s.spawn("core 0", lambda t: s.block_until(lambda: False, None, "core 0 sram queue 0"))
    s.spawn("core 1", lambda t: s.block_until(lambda: False, None, "core 1 sram queue 3"))
    s.spawn("top", lambda t: None)
    with pytest.raises(DeadlockError) as e:
        s.run()
    msg = str(e.value)
    assert "core 0" in msg and "core 0 sram queue 0" in msg
    assert "core 1 sram queue 3" in msg
    assert "top" not in msg
    assert len(e.value.blocked) == 2


def test_task_error_stops_the_run_and_names_the_task():
    s = Scheduler()
    s.spawn("core 0", lambda t: s.block_until(lambda: False, None, "forever"))

    def bad(task):
        raise ValueError("boom")

    s.spawn("top", bad)
    with pytest.raises(InterpError, match=r"\[top\].*ValueError: boom"):
        s.run()


def test_a_failed_task_whose_thread_is_still_exiting_does_not_hang_the_cancel(monkeypatch):
    # The failing task's thread hands control back in its `finally` and is alive for a moment
    # after; `_cancel_all` ran in that window once (a suite run hung in test_bertha_bounds).
    # Hold every thread "alive" to make the window certain.
    monkeypatch.setattr(threading.Thread, "is_alive", lambda self: True)
    s = Scheduler()
    s.spawn("core 0", lambda t: s.block_until(lambda: False, None, "forever"))

    def bad(task):
        raise ValueError("boom")

    s.spawn("top", bad)
    outcome, ended = [], threading.Event()

    def run():
        try:
            s.run()
        except InterpError as e:
            outcome.append(e)
        ended.set()

    threading.Thread(target=run, daemon=True).start()
    # a hang, not a speed bound: the run itself takes milliseconds
    assert ended.wait(timeout=60), "the scheduler's cancel waited on a task that had ended"
    assert outcome and "boom" in str(outcome[0])


def test_no_threads_left_behind():
    before = threading.active_count()
    s = Scheduler()
    for i in range(8):
        s.spawn(f"core {i}", lambda t: s.block_until(lambda: False, None, "x"))
    with pytest.raises(DeadlockError):
        s.run()
    assert threading.active_count() == before


def test_quantum_preempts_spinning_task():
    s = Scheduler(quantum=10)
    flag = []

    def spinner(task):
        while not flag:
            s.step()
        return "saw flag"

    s.spawn("core 0", spinner)
    s.spawn("top", lambda t: flag.append(1))
    assert s.run()[0] == "saw flag"


def test_step_limit_reports_endless_loop():
    s = Scheduler(max_steps=1000)

    def spin(task):
        while True:
            s.step()

    s.spawn("core 0", spin)
    with pytest.raises(StepLimitExceeded, match="core 0"):
        s.run()
