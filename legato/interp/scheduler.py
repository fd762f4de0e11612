"""Concurrent tasks for the interpreters: one task per module that has its own PC.

Each task (top, core i, ...) runs an ordinary xDSL `Interpreter` on its own thread, but only one
task runs at a time: the scheduler hands a baton to one task, which runs until it blocks (a
`receive` / `wait_queue` / `qwait` whose transfer has not arrived), finishes, fails, or uses up
its quantum of ops. Threads let a task block anywhere, even deep inside an `scf.for` body run
by xDSL's own region walker, without rewriting that walker as a generator; the baton makes the
run deterministic (round robin in spawn order) and free of data races.

When no task can run and some are blocked, the run stops with a `DeadlockError` naming each
blocked task, the op it waits in (with its source location) and what it waits for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from xdsl.interpreter import Interpreter, PythonValues
from xdsl.ir import Operation

from legato.errors import DeviceAssertError
from legato.interp.errors import DeadlockError, InterpError, StepLimitExceeded, TimeLimitExceeded

DEFAULT_QUANTUM = 2000
DEFAULT_MAX_STEPS = 50_000_000


class _Cancelled(BaseException):
    """Unwinds a task's thread when the run stops early (not an `Exception`: xDSL must not wrap
    it)."""


class TaskState(Enum):
    NEW = "new"
    READY = "ready"
    BLOCKED = "blocked"
    DONE = "done"
    FAILED = "failed"


@dataclass(eq=False)
class Task:
    """One concurrently running context. `name` is what reports call it (`top`, `core 3`)."""

    name: str
    body: Callable[[Task], Any]
    state: TaskState = TaskState.NEW
    result: Any = None
    error: BaseException | None = None
    waiting_op: Operation | None = None
    waiting_for: str = ""
    ready_when: Callable[[], bool] | None = None
    current_op: Operation | None = None
    steps: int = 0
    _go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    _thread: threading.Thread | None = None
    _cancelled: bool = False

    def runnable(self) -> bool:
        if self.state in (TaskState.NEW, TaskState.READY):
            return True
        if self.state is TaskState.BLOCKED:
            assert self.ready_when is not None
            return self.ready_when()
        return False


_TIME_CHECK_MASK = 255  # the clock is read every 256 ops (it costs more than an op's count)


class Scheduler:
    """Runs tasks to completion, one at a time, switching when a task blocks or every `quantum`
    ops (so a task spinning on memory cannot starve the others)."""

    def __init__(
        self,
        quantum: int = DEFAULT_QUANTUM,
        max_steps: int | None = DEFAULT_MAX_STEPS,
        time_limit: float | None = None,
    ):
        self.quantum = quantum
        self.max_steps = max_steps
        self.time_limit = time_limit  # wall-clock seconds for `run`, None: unbounded
        self._deadline: float | None = None
        self.tasks: list[Task] = []
        self.current: Task | None = None
        self.total_steps = 0
        self._back = threading.Semaphore(0)
        self._since_switch = 0
        self._running = False
        # Called on deadlock: extra lines for the report (e.g. transfers nobody received).
        self.deadlock_notes: Callable[[], list[str]] | None = None

    # -- building -------------------------------------------------------------------------

    def spawn(self, name: str, body: Callable[[Task], Any]) -> Task:
        """Add a task; `body(task)` runs on its own thread once `run` starts."""
        task = Task(name, body)
        self.tasks.append(task)
        return task

    # -- called from inside a task ------------------------------------------------------------

    def block_until(self, ready: Callable[[], bool], op: Operation | None, what: str) -> None:
        """Block the running task until `ready()` holds. `op`/`what` describe the wait for a
        deadlock report. Returns at once when `ready()` already holds."""
        if ready():
            return
        task = self._require_current()
        task.state = TaskState.BLOCKED
        task.ready_when = ready
        task.waiting_op = op
        task.waiting_for = what
        self._switch_out(task)
        task.state = TaskState.READY
        task.ready_when = None
        task.waiting_op = None
        task.waiting_for = ""

    def step(self, op: Operation | None = None) -> None:
        """Count one op of the running task; preempt it when its quantum is used up."""
        task = self.current
        if task is None:
            return
        task.steps += 1
        task.current_op = op
        self.total_steps += 1
        if self.max_steps is not None and self.total_steps > self.max_steps:
            raise StepLimitExceeded(
                f"more than {self.max_steps} ops executed: the kernel does not terminate "
                "(an endless loop, or tasks spinning on each other)",
                op,
                task.name,
            )
        if (
            self._deadline is not None
            and not self.total_steps & _TIME_CHECK_MASK
            and time.monotonic() > self._deadline
        ):
            raise TimeLimitExceeded(
                f"wall-clock limit of {self.time_limit} s exceeded after {self.total_steps} ops "
                "(set $LEGATO_TIME_LIMIT or legato.session(time_limit=...); 0: unbounded)",
                op,
                task.name,
            )
        self._since_switch += 1
        if self._since_switch >= self.quantum and len(self.tasks) > 1:
            self._switch_out(task)

    def yield_now(self) -> None:
        """Let other tasks run (the running task stays ready)."""
        task = self._require_current()
        self._switch_out(task)

    # -- running ----------------------------------------------------------------------------

    def run(self) -> list[Any]:
        """Run every task to completion; return their results in spawn order.

        Raises the first task's error (after stopping the others), or `DeadlockError`."""
        if self._running:
            raise RuntimeError("Scheduler.run is not reentrant")
        self._running = True
        if self.time_limit:
            self._deadline = time.monotonic() + self.time_limit
        for task in self.tasks:
            task._thread = threading.Thread(
                target=self._thread_main,
                args=(task,),
                name=f"legato-interp-{task.name}",
                daemon=True,
            )
            task._thread.start()
        try:
            cursor = 0
            n = len(self.tasks)
            while True:
                chosen = None
                for k in range(n):
                    t = self.tasks[(cursor + k) % n]
                    if t.runnable():
                        chosen = t
                        cursor = (cursor + k + 1) % n
                        break
                if chosen is None:
                    live = [t for t in self.tasks if t.state is TaskState.BLOCKED]
                    if not live:
                        return [t.result for t in self.tasks]
                    notes = self.deadlock_notes() if self.deadlock_notes else []
                    raise DeadlockError(
                        [(t.name, t.waiting_op, t.waiting_for) for t in live], notes
                    )
                self._switch_in(chosen)
                if chosen.state is TaskState.FAILED:
                    assert chosen.error is not None
                    raise chosen.error
        finally:
            self._cancel_all()
            self._running = False

    # -- internals --------------------------------------------------------------------------

    def _require_current(self) -> Task:
        if self.current is None:
            raise RuntimeError("not inside a scheduled task")
        return self.current

    def _switch_in(self, task: Task) -> None:
        if task.state is TaskState.NEW:
            task.state = TaskState.READY
        self.current = task
        self._since_switch = 0
        task._go.release()
        self._back.acquire()
        self.current = None

    def _switch_out(self, task: Task) -> None:
        self._back.release()
        task._go.acquire()
        if task._cancelled:
            raise _Cancelled()
        self.current = task

    def _thread_main(self, task: Task) -> None:
        task._go.acquire()
        try:
            if task._cancelled:
                return
            task.result = task.body(task)
            task.state = TaskState.DONE
        except _Cancelled:
            task.state = TaskState.DONE
        except BaseException as e:  # noqa: BLE001 - handed to the scheduler's thread
            task.error = _as_interp_error(e, task)
            task.state = TaskState.FAILED
        finally:
            self._back.release()

    def _cancel_all(self) -> None:
        for task in self.tasks:
            # A finished task has already handed `_back` over for its end, though its thread may
            # still be alive for a moment after that: cancelling it would wait for a second
            # hand-over that never comes. Only parked tasks (not started, ready or blocked) are
            # woken to cancel.
            if task.state in (TaskState.DONE, TaskState.FAILED):
                continue
            if task._thread is None or not task._thread.is_alive():
                continue
            task._cancelled = True
            task._go.release()
            self._back.acquire()
            task._thread.join(timeout=5)


def _as_interp_error(e: BaseException, task: Task) -> BaseException:
    """Our own errors pass through (tagged with the task's name, without the module dump xDSL
    appends as a note), and so does a failed `device_assert` (it names its source line);
    anything else becomes an `InterpError` naming the op that raised it."""
    if hasattr(e, "__notes__"):
        try:
            del e.__notes__
        except AttributeError:
            pass
    if isinstance(e, InterpError):
        if e.context is None:
            e.context = task.name
            e.args = (e.render(),)
        if e.op is None and task.current_op is not None:
            e.op = task.current_op
            e.args = (e.render(),)
        return e
    if isinstance(e, DeviceAssertError):  # the kernel's own report: its line, not an op's
        return e
    if isinstance(e, Exception):
        err = InterpError(f"{type(e).__name__}: {e}", task.current_op, task.name)
        err.__cause__ = e
        return err
    return e


class StepListener(Interpreter.Listener):
    """Counts every op a task's interpreter runs and gives the scheduler a preemption point."""

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        self.scheduler.step(op)

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        pass
