"""`core-verify-sync`: compile-time proofs of a kernel's synchronisation, on the core IR.

Every program's synchronisation skeleton (`core.dma ... notify`, `core.wait_queue`,
`core.sem_post`, `core.sem_wait`, `core.barrier`, the `scf.for` loops holding them and the uses
of receive buffers that more than one transfer fills) is executed abstractly, with the machine's
rules (docs/isa.md): a queue is FIFO per (core, space, queue) and its k-th wait needs a k-th
notifying DMA, a semaphore wait needs its count posted and takes it, a barrier releases when
its count of modules arrived, and arrivals naming another count fault. An `all_cores` program
runs once per core (`core.core_id` and index arithmetic on it are evaluated per core, so a DMA
to `core(%c)` has a known target), and loops with compile-time bounds run their iterations.

Waits on single-consumer queues, on semaphores one module waits for and on barriers are
determinate (a Kahn network: no schedule releases a wait another schedule leaves blocked), so
one abstract run decides, for every schedule of the machine:
- every receive has its send (a `core.wait_queue` its k-th arrival),
- every semaphore wait enough posts, in an order that can happen,
- barrier participants agree (count) and arrive (as many as the count),
- queue capacity: a receive buffer more than one transfer fills (a transfer ring's slot, a
  send in a loop) gets transfer k + 1 only after its receiver is done with transfer k: its
  last use of the buffer happens before the send, by the kernel's synchronisation (vector
  clocks over the modules' events).
A violation is a `CompileError` at the op that would block forever (or the send that would
overwrite a buffer in use), naming the other source line: the last send or post that could
have released it, or the point the module that would release it is itself blocked at.

What the run must settle instead (returned as `Unsettled`, with the op and why): waits on
queues, semaphores or barriers a loop with runtime bounds touches, or a DMA to a core the
compiler cannot compute; which wait takes which post when several modules wait for one
semaphore (run order: the emulator's deadlock report and `hazards=True` see it); a buffer
whose transfers come from several modules (which one lands first is run order).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from legato.dialects import core
from legato.dialects.core import BUFFER_ATTR
from legato.model.ir import model_of
from legato.transforms.diagnostics import error_at, source_location
from legato.transforms.index_arith import DIVISIONS, INDEX_OPS, per_core_values
from legato.transforms.ir_walk import ops_of, walk

#: abstract sync events one proof runs at most; past it the waits not yet reached are
#: left to the run (a kernel whose loops send millions of times)
MAX_EVENTS = 2_000_000


@dataclass(frozen=True)
class Unsettled:
    """A wait (or a reused buffer's send) the proof could not settle: `op` and `reason`, why.
    Left to the emulator's deadlock report and hazard checker."""

    op: Operation
    reason: str

    def __str__(self) -> str:
        return f"{self.op.name} at {line_of(self.op)} ({self.reason})"


def line_of(op: Operation) -> str:
    """`file:line` of `op` (or of the nearest enclosing op with a location)."""
    loc = source_location(op)
    if loc is not None:
        return f"{loc.file}:{loc.line}"
    prog = (
        op
        if isinstance(op, core.ProgramOp)
        else next((p for p in _parents_all(op) if isinstance(p, core.ProgramOp)), None)
    )
    where = f"program @{prog.sym_name.data}" if prog is not None else "the kernel"
    return f"{where} (no source location)"


def _parents_all(op: Operation) -> Iterator[Operation]:
    p = op.parent_op()
    while p is not None:
        yield p
        p = p.parent_op()


# -- the skeleton --------------------------------------------------------------------------------

_SEND, _RECV, _POST, _WAIT, _BARRIER, _LOOP, _TOUCH, _OPAQUE = range(8)


@dataclass(eq=False)
class _Step:
    kind: int
    op: Operation
    body: list[_Step] = field(default_factory=list)  # _LOOP, _OPAQUE: the steps inside
    buffer: str = ""  # _SEND: the destination's buffer name; _TOUCH: the buffer touched
    # the op's fields, read once (an IRDL property read costs more than the step itself):
    # _SEND (space, queue), _RECV (space, queue), sync ops (id,); `count` of sync ops;
    # `target` a _SEND's static core, `reg` its core register
    key: tuple = ()
    count: int = 0
    target: int | None = None
    reg: SSAValue | None = None
    per_core: tuple | None = None  # the register's value on each core (when loop-invariant)
    reused: bool = False  # _SEND: its buffer is one more than one transfer fills

    def __post_init__(self):
        op = self.op
        if self.kind == _SEND:
            self.key = (op.notify_space.data, op.notify_queue.data)
            if op.notify_core is not None:
                self.target = op.notify_core.core_index
            self.reg = op.notify_core_reg
        elif self.kind == _RECV:
            self.key = (op.memory.data, op.queue.data)
        elif self.kind in (_POST, _WAIT, _BARRIER):
            self.key, self.count = (op.sync_id.data,), op.count.data


def _root(v: SSAValue) -> SSAValue:
    while isinstance(v, OpResult) and isinstance(v.op, core.SubviewOp | core.ViewOp):
        v = v.op.source
    return v


def _buffer_name(v: SSAValue) -> str:
    """The receive buffer a notifying DMA into `v` fills: its `buffer` name when `v` is (a
    view of) a buffer allocated on the receiving core (`on core(i)`, `on core(%c)`), else ""
    (a DMA into the issuer's own memory, as a transfer ring's credit, fills none)."""
    v = _root(v)
    if isinstance(v, OpResult) and isinstance(v.op, core.AllocOp):
        alloc = v.op
        name = alloc.attributes.get(BUFFER_ATTR)
        if isinstance(name, StringAttr) and (alloc.core is not None or alloc.core_reg is not None):
            return name.data
    return ""


def _reused_buffers(kernel: core.KernelOp) -> set[str]:
    """Names of receive buffers more than one transfer fills: written by several notifying
    DMAs, or by one inside a loop."""
    count: dict[str, int] = {}
    for op in walk(kernel):
        if isinstance(op, core.DmaOp) and op.has_notify:
            name = _buffer_name(op.dst)
            if not name:
                continue
            looped = any(isinstance(p, scf.ForOp) for p in _parents(op))
            count[name] = count.get(name, 0) + (2 if looped else 1)
    return {n for n, c in count.items() if c > 1}


def _parents(op: Operation) -> Iterator[Operation]:
    p = op.parent_op()
    while p is not None and not isinstance(p, core.ProgramOp):
        yield p
        p = p.parent_op()


def _skeleton(block: Block, reused: set[str]) -> list[_Step]:
    steps: list[_Step] = []
    own: dict[SSAValue, str] = {}  # this program's own receive buffers that are reused
    _collect(block, reused, own, steps)
    return steps


def _collect(block: Block, reused: set[str], own: dict, steps: list[_Step]) -> None:
    for op in block.ops:
        if isinstance(op, core.AllocOp):
            name = op.attributes.get(BUFFER_ATTR)
            if (
                isinstance(name, StringAttr)
                and name.data in reused
                and op.core is None
                and op.core_reg is None
            ):
                own[op.result] = name.data
            continue
        if isinstance(op, core.SubviewOp | core.ViewOp):
            if op.source in own:
                own[op.results[0]] = own[op.source]
            continue
        # a use of a reused receive buffer comes first: a DMA out of it reads it before its
        # completion notifies anyone (a transfer ring's credit)
        for name in sorted({own[v] for v in op._operands if v in own}):  # noqa: SLF001
            steps.append(_Step(_TOUCH, op, buffer=name))
        if isinstance(op, core.DmaOp) and op.has_notify:
            name = _buffer_name(op.dst)
            steps.append(_Step(_SEND, op, buffer=name, reused=name in reused))
        elif isinstance(op, core.WaitQueueOp):
            steps.append(_Step(_RECV, op))
        elif isinstance(op, core.SemPostOp):
            steps.append(_Step(_POST, op))
        elif isinstance(op, core.SemWaitOp):
            steps.append(_Step(_WAIT, op))
        elif isinstance(op, core.BarrierOp):
            steps.append(_Step(_BARRIER, op))
        elif op.regions:
            inner: list[_Step] = []
            for region in op.regions:
                for b in region.blocks:
                    _collect(b, reused, own, inner)
            if inner:
                kind = _LOOP if isinstance(op, scf.ForOp) else _OPAQUE
                steps.append(_Step(kind, op, inner))


# -- the abstract machine ------------------------------------------------------------------------


class SyncError(Exception):
    """A proven violation: `op` is where it is reported, `message` names the other line."""

    def __init__(self, op: Operation, message: str):
        super().__init__(message)
        self.op = op


@dataclass(eq=False)
class _Instance:
    """One module running one program: `core` its index (None: top)."""

    index: int
    name: str
    core: int | None
    program: core.ProgramOp
    frames: list  # [(steps, position, loop op or None, iterations left, iv, lb, step)]
    env: dict = field(default_factory=dict)
    clock: np.ndarray | None = None  # vector clock over the modules (capacity proof only)
    blocked: _Step | None = None
    done: bool = False
    at_barrier: bool = False  # arrived at a barrier, waiting for its release
    released: bool = False  # that barrier released it


def _iter(steps: list[_Step]):
    return [steps, 0, None, 0, None, 0, 0]


class _Buffer:
    """A receive buffer more than one transfer fills (one core's copy of it)."""

    __slots__ = ("filled", "consumed", "senders", "last_touch", "touch_op", "sent_op", "unsettled")

    def __init__(self):
        self.filled = 0  # transfers sent into it
        self.consumed = 0  # transfers its receiver took (wait_queue)
        self.senders: set[int] = set()
        self.last_touch: tuple[int, int] | None = None  # (receiver instance, its clock)
        self.touch_op: Operation | None = None
        self.sent_op: Operation | None = None
        self.unsettled = False


class _Proof:
    def __init__(self, kernel: core.KernelOp, num_cores: int, like: _Proof | None = None):
        """A fresh abstract machine for `kernel`; `like`: a proof of the same kernel whose
        skeletons and value memos are taken over (its run's state is not)."""
        self.kernel, self.n = kernel, num_cores
        if like is None:
            reused = _reused_buffers(kernel)
            self.skeletons = {prog: _skeleton(prog.body.block, reused) for prog in kernel.programs}
            self._invariant: dict[SSAValue, bool] = {}
            self._per_core: dict = {}
        else:
            reused = like.reused
            self.skeletons = like.skeletons
            self._invariant = like._invariant
            self._per_core = like._per_core
        self.instances: list[_Instance] = []
        for prog in kernel.programs:
            steps = self.skeletons[prog]
            ctx = prog.ctx
            if ctx.is_all_cores:
                cores: list[int | None] = list(range(num_cores))
            elif ctx.is_core:
                cores = [ctx.core_index]
            else:
                cores = [None]
            for c in cores:
                name = "top" if c is None else f"core {c}"
                self.instances.append(_Instance(len(self.instances), name, c, prog, [_iter(steps)]))
        self.reused = reused
        self.track = bool(reused)
        for inst in self.instances:
            inst.clock = np.zeros(len(self.instances), np.int64) if self.track else None
        # queue (core, space, queue) -> arrivals not yet taken: (op, instance, clock, buffer)
        self.queues: dict[tuple, deque] = {}
        self.sent: dict[tuple, list[Operation]] = {}
        self.taken: dict[tuple, int] = {}
        self.sems: dict[int, deque] = {}  # sem -> [units, clock, op]
        self.sem_value: dict[int, int] = {}
        self.posts: dict[int, list[tuple[Operation, int]]] = {}
        self.sem_needs: dict[int, list[tuple[Operation, int]]] = {}
        self.sem_waiters: dict[int, set[int]] = {}
        self.barriers: dict[int, list[tuple[_Instance, Operation]]] = {}
        self.buffers: dict[tuple, _Buffer] = {}
        self.dynamic: dict = {}  # a key (queue, ("sem", s), ("barrier", b)) -> why
        self.any_core_dynamic: dict[tuple, str] = {}  # (space, queue) -> why
        self.unsettled: list[Unsettled] = []
        self.unsettled_ops: set[Operation] = set()
        self.events = 0
        self.relaxed = False  # after a deadlock: blocked waits are forced, to count totals
        self.forced: list[tuple[_Instance, _Step]] = []
        waits: dict[core.ProgramOp, set[int]] = {}  # which semaphores several modules wait for
        for inst in self.instances:
            if inst.program not in waits:
                waits[inst.program] = {
                    op.sync_id.data for op in walk(inst.program) if isinstance(op, core.SemWaitOp)
                }
            for sem in waits[inst.program]:
                self.sem_waiters.setdefault(sem, set()).add(inst.index)

    # -- values ---------------------------------------------------------------------------------

    def value(self, inst: _Instance, v: SSAValue | None) -> int | None:
        if v is None:
            return None
        if v in inst.env:
            return inst.env[v]
        if self.invariant(v):  # evaluated for every core at once, once for the kernel
            per_core = per_core_values(v, self.n, core.CoreIdOp, self._per_core)
            return None if per_core is None else per_core[inst.core or 0]
        result = None
        if isinstance(v, OpResult):
            op = v.op
            if isinstance(op, core.CoreIdOp):
                result = inst.core or 0
            elif isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
                result = op.value.value.data
            elif (fn := INDEX_OPS.get(op.name)) is not None and len(op.operands) == 2:
                a, b = (self.value(inst, x) for x in op.operands)
                if a is not None and b is not None and not (b == 0 and op.name in DIVISIONS):
                    result = fn(a, b)
        elif isinstance(v, BlockArgument):
            return None  # a loop's induction variable is in env while its loop runs
        return result

    def invariant(self, v: SSAValue) -> bool:
        """Whether `v` is the same in every iteration of the loops around it: it reads no
        induction variable (memoized for the kernel, not per core)."""
        known = self._invariant.get(v)
        if known is None:
            if isinstance(v, BlockArgument):
                known = False
            else:
                assert isinstance(v, OpResult)
                known = all(self.invariant(x) for x in v.op.operands)
            self._invariant[v] = known
        return known

    # -- running --------------------------------------------------------------------------------

    def tick(self, inst: _Instance) -> None:
        if self.track:
            inst.clock[inst.index] += 1

    def join(self, inst: _Instance, clock: np.ndarray | None) -> None:
        if self.track and clock is not None:
            np.maximum(inst.clock, clock, out=inst.clock)

    def snapshot(self, inst: _Instance) -> np.ndarray | None:
        return inst.clock.copy() if self.track else None

    def make_dynamic(self, key, why: str) -> None:
        self.dynamic.setdefault(key, why)

    def settle_later(self, op: Operation, reason: str) -> None:
        if op not in self.unsettled_ops:
            self.unsettled_ops.add(op)
            self.unsettled.append(Unsettled(op, reason))

    def havoc(self, inst: _Instance, steps: list[_Step], why: str) -> None:
        """The steps of a loop that runs a runtime number of times (or of unknown control
        flow): the keys they touch are left to the run."""
        for s in steps:
            if s.kind == _SEND:
                space, q = s.key
                target = self.target(inst, s)
                if target is None:
                    self.any_core_dynamic.setdefault((space, q), why)
                else:
                    self.make_dynamic((target, space, q), why)
                if s.buffer and target is not None:
                    self.buffer(target, s.buffer).unsettled = True
            elif s.kind == _RECV:
                self.make_dynamic((inst.core, *s.key), why)
            elif s.kind in (_POST, _WAIT):
                self.make_dynamic(("sem", *s.key), why)
            elif s.kind == _BARRIER:
                self.make_dynamic(("barrier", *s.key), why)
            elif s.kind == _TOUCH:
                self.buffer(inst.core, s.buffer).unsettled = True
            elif s.body:
                self.havoc(inst, s.body, why)

    def target(self, inst: _Instance, step: _Step) -> int | None:
        if step.target is not None:
            return step.target
        if step.reg is not None and self.invariant(step.reg):  # every core's, once
            if step.per_core is None:
                step.per_core = per_core_values(step.reg, self.n, core.CoreIdOp, self._per_core)
                if step.per_core is None:
                    step.per_core = ()
            return step.per_core[inst.core or 0] if step.per_core else None
        return self.value(inst, step.reg)

    def buffer(self, c, name: str) -> _Buffer:
        b = self.buffers.get((c, name))
        if b is None:
            b = self.buffers[(c, name)] = _Buffer()
        return b

    def queue_dynamic(self, key: tuple) -> str | None:
        return self.dynamic.get(key) or self.any_core_dynamic.get(key[1:])

    def run(self) -> None:
        """Run every module until each ended or every one left is blocked."""
        progress = True
        while progress:
            progress = False
            for inst in self.instances:
                if not inst.done and self.advance(inst):
                    progress = True
            if self.events > MAX_EVENTS:
                return

    def advance(self, inst: _Instance) -> bool:
        """Run `inst` until it blocks or ends; whether it made progress."""
        moved = False
        while inst.frames:
            frame = inst.frames[-1]
            steps, pos = frame[0], frame[1]
            if pos == len(steps):
                if frame[2] is None:  # the program's end
                    inst.frames.pop()
                    break
                frame[3] -= 1
                if frame[3] <= 0:
                    inst.frames.pop()
                    continue
                inst.env[frame[4]] += frame[6]
                frame[1] = 0
                continue
            step = steps[pos]
            if step.kind == _LOOP:
                frame[1] += 1
                self.enter(inst, step)
                moved = True
                continue
            if step.kind == _OPAQUE:
                frame[1] += 1
                self.havoc(inst, step.body, f"{step.op.name} at {line_of(step.op)}")
                moved = True
                continue
            kind = step.kind  # the common steps first, without `execute`'s dispatch
            if kind == _SEND:
                ok = self.send(inst, step)
            elif kind == _RECV:
                ok = self.receive(inst, step, self.relaxed and self.is_forced(inst, step))
            elif kind == _TOUCH:
                self.touch(inst, step)
                ok = True
            else:
                ok = self.execute(inst, step)
            if not ok:
                inst.blocked = step
                return moved
            inst.blocked = None
            frame[1] += 1
            moved = True
            self.events += 1
            if self.events > MAX_EVENTS:
                return moved
        inst.done = True
        inst.blocked = None
        return True

    def enter(self, inst: _Instance, step: _Step) -> None:
        loop = step.op
        assert isinstance(loop, scf.ForOp)
        lb, ub, st = (self.value(inst, v) for v in (loop.lb, loop.ub, loop.step))
        if lb is None or ub is None or st is None or st <= 0:
            self.havoc(
                inst, step.body, f"the loop at {line_of(loop)} runs a runtime number of times"
            )
            return
        trips = max(0, -(-(ub - lb) // st))
        if trips == 0:
            return
        iv = loop.body.block.args[0]
        inst.env[iv] = lb
        inst.frames.append([step.body, 0, loop, trips, iv, lb, st])

    def execute(self, inst: _Instance, step: _Step) -> bool:
        """Run one step of `inst`; False when it blocks."""
        op = step.op
        forced = self.relaxed and self.is_forced(inst, step)
        if step.kind == _SEND:
            return self.send(inst, step)
        if step.kind == _RECV:
            return self.receive(inst, step, forced)
        if step.kind == _POST:
            (sem,), n = step.key, step.count
            self.posts.setdefault(sem, []).append((op, n, inst))
            self.sem_value[sem] = self.sem_value.get(sem, 0) + n
            self.tick(inst)
            self.sems.setdefault(sem, deque()).append([n, self.snapshot(inst), op])
            return True
        if step.kind == _WAIT:
            return self.sem_wait(inst, step, forced)
        if step.kind == _BARRIER:
            return self.barrier(inst, step, forced)
        if step.kind == _TOUCH:
            self.touch(inst, step)
            return True
        raise AssertionError(step.kind)

    def is_forced(self, inst: _Instance, step: _Step) -> bool:
        """Whether `step` of `inst` is the blocked wait `_diagnose` releases next."""
        return bool(self.forced) and self.forced[-1][0] is inst and self.forced[-1][1] is step

    # The steps below run once per event (~100k in a big kernel): the field reads and clock
    # updates of `tick`, `join`, `snapshot`, `buffer` and `target` are inlined.

    def send(self, inst: _Instance, step: _Step) -> bool:
        op = step.op
        target = step.target
        if target is None:
            per_core = step.per_core
            target = per_core[inst.core or 0] if per_core else self.target(inst, step)
            if target is None:
                why = f"a dma at {line_of(op)} sends to a core computed at run time"
                self.any_core_dynamic.setdefault(step.key, why)
                return True
        if not 0 <= target < self.n:
            raise SyncError(
                op,
                f"core.dma: notifies core {target}, out of range: the model has {self.n} cores "
                f"(valid indices 0..{self.n - 1})",
            )
        key = (target, *step.key)
        clock = inst.clock
        if clock is not None:
            clock[inst.index] += 1
        reused = step.reused
        if reused:
            self.fill(inst, step, target)
        sent = self.sent.get(key)
        if sent is None:
            sent = self.sent[key] = []
            self.queues[key] = deque()
        sent.append((op, inst))
        self.queues[key].append(
            (op, inst, None if clock is None else clock.copy(), step.buffer if reused else "")
        )
        return True

    def fill(self, inst: _Instance, step: _Step, target: int) -> None:
        """A transfer into a reused receive buffer: the previous one must be done with."""
        b = self.buffers.get((target, step.buffer)) or self.buffer(target, step.buffer)
        op = step.op
        b.senders.add(inst.index)
        if b.unsettled or len(b.senders) > 1:
            if len(b.senders) > 1:
                self.settle_later(
                    op, f"buffer {step.buffer} on core {target} is filled by several modules"
                )
            b.filled += 1
            return
        if b.filled:
            prev = b.sent_op
            if b.consumed < b.filled and not self.relaxed:
                sent = "by this dma, an iteration earlier" if prev is op else f"at {line_of(prev)}"
                raise SyncError(
                    op,
                    f"core.dma: transfer {b.filled + 1} into receive buffer {step.buffer} on "
                    f"core {target} can arrive before core {target} received transfer "
                    f"{b.filled} (sent {sent}): the buffer holds one transfer, and nothing "
                    "orders this send after that receive; it would overwrite data not yet "
                    "received",
                )
            if b.last_touch is not None and not self.relaxed:
                r, t = b.last_touch
                if inst.clock[r] < t:
                    raise SyncError(
                        op,
                        f"core.dma: transfer {b.filled + 1} into receive buffer {step.buffer} "
                        f"on core {target} is not ordered after core {target}'s last use of "
                        f"transfer {b.filled} at {line_of(b.touch_op)}: it can overwrite the "
                        "buffer while it is in use (wait for a signal the receiver sends "
                        "after that use)",
                    )
        b.filled += 1
        b.sent_op = op

    def touch(self, inst: _Instance, step: _Step) -> None:
        b = self.buffers.get((inst.core, step.buffer)) or self.buffer(inst.core, step.buffer)
        if b.unsettled or len(b.senders) > 1:
            return
        if b.filled > b.consumed and b.consumed and not self.relaxed:
            raise SyncError(
                b.sent_op,
                f"core.dma: transfer {b.filled} into receive buffer {step.buffer} on core "
                f"{inst.core} is not ordered after core {inst.core}'s use of transfer "
                f"{b.consumed} at {line_of(step.op)}: it can overwrite the buffer while it is "
                "in use (wait for a signal the receiver sends after that use)",
            )
        clock = inst.clock
        if clock is not None:
            clock[inst.index] += 1
            b.last_touch = (inst.index, clock[inst.index])
        else:
            b.last_touch = None
        b.touch_op = step.op

    def receive(self, inst: _Instance, step: _Step, forced: bool) -> bool:
        op = step.op
        key = (inst.core, *step.key)
        why = self.queue_dynamic(key) if self.dynamic or self.any_core_dynamic else None
        pending = self.queues.get(key)
        if pending:
            sender_op, _sender, clock, buf = pending.popleft()
            self.taken[key] = self.taken.get(key, 0) + 1
            own = inst.clock
            if own is not None:
                if clock is not None:
                    np.maximum(own, clock, out=own)
                own[inst.index] += 1
            if buf:
                b = self.buffers.get((inst.core, buf)) or self.buffer(inst.core, buf)
                b.consumed += 1
                if own is not None:
                    b.last_touch = (inst.index, own[inst.index])
                b.touch_op = op
            if why is not None:
                self.settle_later(op, f"{key[1]} queue {key[2]}: {why}")
            return True
        if why is not None:
            self.settle_later(op, f"{key[1]} queue {key[2]}: {why}")
            return True
        if forced:
            self.taken[key] = self.taken.get(key, 0) + 1
            self.forced.pop()
            return True
        return False

    def sem_wait(self, inst: _Instance, step: _Step, forced: bool) -> bool:
        op = step.op
        (sem,), n = step.key, step.count
        why = self.dynamic.get(("sem", sem))
        racy = len(self.sem_waiters.get(sem, ())) > 1
        if self.sem_value.get(sem, 0) >= n:
            self.sem_value[sem] -= n
            self.sem_needs.setdefault(sem, []).append((op, n))
            units = self.sems[sem]
            while n:  # take the oldest units, joining their posters' clocks
                head = units[0]
                take = min(n, head[0])
                head[0] -= take
                n -= take
                self.join(inst, head[1])
                if not head[0]:
                    units.popleft()
            self.tick(inst)
            if why is not None:
                self.settle_later(op, f"{_sem(op)}: {why}")
            elif racy:
                self.settle_later(op, self.race_reason(sem))
            return True
        if why is not None:
            self.settle_later(op, f"{_sem(op)}: {why}")
            return True
        if forced:
            self.sem_needs.setdefault(sem, []).append((op, n))
            self.forced.pop()
            return True
        return False

    def race_reason(self, sem: int) -> str:
        return (
            f"semaphore {sem} is waited for by {len(self.sem_waiters[sem])} modules: which wait "
            "takes which post is decided by the run order"
        )

    def barrier(self, inst: _Instance, step: _Step, forced: bool) -> bool:
        op = step.op
        (bid,), count = step.key, step.count
        if inst.at_barrier:  # arrived earlier: released yet?
            if inst.released:
                inst.at_barrier = inst.released = False
                return True
            if forced:
                arrivals = self.barriers.get(bid, [])
                arrivals[:] = [a for a in arrivals if a[0] is not inst]
                inst.at_barrier = False
                self.forced.pop()
                return True
            return False
        why = self.dynamic.get(("barrier", bid))
        if why is not None:
            self.settle_later(op, f"barrier {bid}: {why}")
            return True
        arrivals = self.barriers.setdefault(bid, [])
        if arrivals and arrivals[0][1].count.data != count and not self.relaxed:
            first_inst, first = arrivals[0]
            raise SyncError(
                op,
                f"core.barrier {bid}: counts {first.count.data} (at {line_of(first)}, "
                f"{first_inst.name}) and {count} (here, {inst.name}) differ (the machine "
                "faults when arrivals disagree)",
            )
        arrivals.append((inst, op))
        self.tick(inst)
        if len(arrivals) < count:
            inst.at_barrier = True
            return False
        if self.track:  # released: every arrival joins every other's clock
            joined = np.maximum.reduce([a[0].clock for a in arrivals])
            for a, _op in arrivals:
                a.clock = joined.copy()
        for a, _op in arrivals:
            if a is not inst:
                a.released = True
        self.barriers[bid] = []
        return True

    # -- after the run --------------------------------------------------------------------------

    def blocked(self) -> list[_Instance]:
        return [i for i in self.instances if not i.done and i.blocked is not None]


# -- symmetry ------------------------------------------------------------------------------------


def _flat(steps: list[_Step]) -> Iterator[_Step]:
    for s in steps:
        yield s
        if s.body:
            yield from _flat(s.body)


def _symmetric_classes(p: _Proof) -> list[tuple[list[_Instance], int]] | None:
    """The kernel's modules split into independent parts, grouped into classes of parts that
    are the same up to renaming cores: [(one part's modules, how many parts its class has)],
    or None when no class has two parts (or a module's skeleton is not known statically).

    A part is a connected component of the graph whose nodes are the cores (and the top) and
    whose edges join a module's core with every core it notifies and with every semaphore and
    barrier it names: the abstract machine's state (queues and buffers by core, semaphores
    and barriers by id) never crosses parts, so the run of one part does not depend on another.
    Two parts are in one class when, numbering each part's cores by rank, their modules (in
    index order) run the same programs on cores of the same rank, notify cores of the same
    rank at every send and run their loops with the same bounds: each one's run is then the
    other's with its cores renamed. Only skeletons whose every send has a compile-time target
    per core, and with no region of unknown control flow, take part (anything else: None)."""
    n = p.n
    top = n  # the top module's node; semaphores and barriers get nodes above
    parent: list[int] = list(range(n + 1))
    extra: dict[tuple, int] = {}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def node(key: tuple) -> int:
        got = extra.get(key)
        if got is None:
            got = extra[key] = len(parent)
            parent.append(got)
        return got

    progs: dict[core.ProgramOp, list[_Instance]] = {}
    for inst in p.instances:
        progs.setdefault(inst.program, []).append(inst)
    # per program: its modules' nodes, a [sends x modules] matrix of target nodes, and the
    # loop bounds each module runs
    tables = []
    for prog, insts in progs.items():
        nodes = [top if i.core is None else i.core for i in insts]
        cols, loops, syncs = [], [], set()
        for s in _flat(p.skeletons[prog]):
            if s.kind == _SEND:
                if s.target is not None:
                    cols.append((s.target,) * n)
                elif s.reg is not None and p.invariant(s.reg):
                    per_core = per_core_values(s.reg, n, core.CoreIdOp, p._per_core)
                    if per_core is None:
                        return None
                    cols.append(per_core)
                else:
                    return None
            elif s.kind == _LOOP:
                loop = s.op
                if not all(p.invariant(v) for v in (loop.lb, loop.ub, loop.step)):
                    return None
                loops.append(
                    [tuple(p.value(i, v) for v in (loop.lb, loop.ub, loop.step)) for i in insts]
                )
            elif s.kind == _OPAQUE:
                return None
            elif s.kind in (_POST, _WAIT, _BARRIER):
                syncs.add(node(("barrier" if s.kind == _BARRIER else "sem", *s.key)))
        # row s: send s's target on each module's core, as `target` reads it (core or 0)
        targets = np.array(cols, np.int64).reshape(len(cols), n)[:, [i.core or 0 for i in insts]]
        if targets.size and not ((targets >= 0) & (targets < n)).all():
            return None  # the full run names the send out of range
        # the distinct codes in ascending order, as `np.unique` gives them (whose first call
        # imports numpy.ma: ~9 ms of a process's first compile)
        for code in sorted(set((np.asarray(nodes, np.int64) * (n + 1) + targets).ravel().tolist())):
            a, b = divmod(code, n + 1)
            parent[find(a)] = find(b)
        for x in syncs:
            for a in set(nodes):
                parent[find(a)] = find(x)
        tables.append((prog, insts, nodes, targets, loops))
    parts: dict[int, list[int]] = {}
    for x in range(n + 1):
        parts.setdefault(find(x), []).append(x)
    if len(parts) < 2:
        return None
    # each node's rank in its part, and each part's signature
    rank = np.zeros(n + 1, np.int64)
    part_of = np.zeros(n + 1, np.int64)
    for root, members in parts.items():
        for r, x in enumerate(members):
            rank[x], part_of[x] = r, root
    signature: dict[int, list] = {root: [len(members)] for root, members in parts.items()}
    modules: dict[int, list[_Instance]] = {root: [] for root in parts}
    for prog, insts, nodes, targets, loops in tables:
        where = part_of[nodes]
        ranked = rank[targets]
        for root in sorted(set(where.tolist())):  # np.unique's order, without numpy.ma
            cols = np.flatnonzero(where == root)
            sig = signature[int(root)]
            sig.append(
                (
                    prog,
                    rank[np.asarray(nodes)[cols]].tobytes(),
                    ranked[:, cols].tobytes(),
                    tuple(tuple(b[c] for c in cols) for b in loops),
                )
            )
            modules[int(root)].extend(insts[c] for c in cols)
    classes: dict[tuple, list[int]] = {}
    for root in parts:
        classes.setdefault(tuple(signature[root]), []).append(root)
    if all(len(roots) == 1 for roots in classes.values()):
        return None
    return [
        (sorted(modules[roots[0]], key=lambda i: i.index), len(roots)) for roots in classes.values()
    ]


def _symmetric_proof(p: _Proof) -> bool:
    """Whether the kernel is proven, nothing left to the run, by running one part of each
    class of `_symmetric_classes` (its modules only, in their order). False when there are no
    such classes or when that run blocks, refuses, leaves anything to the run or could pass
    `MAX_EVENTS` in the whole kernel: the caller then runs every module, which gives the
    error or the unsettled waits exactly as they are reported without this shortcut. On a
    clean run of the representatives every other part, its run the same with its cores
    renamed, is clean too."""
    classes = _symmetric_classes(p)
    if classes is None:
        return False
    p.instances = [inst for modules, _count in classes for inst in modules]
    try:
        p.run()
    except SyncError:
        return False
    most = max(count for _modules, count in classes)
    return (
        p.events * most <= MAX_EVENTS and not p.unsettled and all(inst.done for inst in p.instances)
    )


def prove(kernel: core.KernelOp, num_cores: int, symmetry: bool = True) -> list[Unsettled]:
    """The proofs of the module docstring on `kernel` (`num_cores`: the model's). Raises
    `SyncError` at the op at fault; returns what the run must settle, in program order.
    `symmetry`: first try the run of one part per class of parts that are the same up to
    renaming cores (`_symmetric_proof`); only a clean proof is taken from it."""
    for prog in kernel.programs:
        if prog.ctx.is_core and not 0 <= prog.ctx.core_index < num_cores:
            raise SyncError(
                prog,
                f"core.program: runs on core {prog.ctx.core_index}, out of range: the model "
                f"has {num_cores} cores (valid indices 0..{num_cores - 1})",
            )
    p = _Proof(kernel, num_cores)
    if symmetry:
        if _symmetric_proof(p):
            return []
        p = _Proof(kernel, num_cores, like=p)
    p.run()
    if p.events > MAX_EVENTS:
        return _stopped(p)
    stuck = p.blocked()
    if stuck:
        blocked = [i.blocked.op for i in stuck]
        error = _diagnose(p, stuck)
        if error is not None:
            raise error
        for op in blocked:  # a race this schedule lost: another may win it
            p.settle_later(op, "blocked in the proof's run order, behind a semaphore race")
    return p.unsettled


def _stopped(p: _Proof) -> list[Unsettled]:
    why = f"the proof stopped after {MAX_EVENTS} synchronisation events"
    for inst in p.instances:
        for op in inst.program.walk():
            if isinstance(op, core.WaitQueueOp | core.SemWaitOp | core.BarrierOp):
                p.settle_later(op, why)
    return p.unsettled


def _sem(op: Operation) -> str:
    """A semaphore as the user named it (`SEM_ATTR`), else by its chip id."""
    user = op.attributes.get(core.SEM_ATTR)
    if isinstance(user, StringAttr):
        return f"semaphore {user.data}"
    return f"semaphore {op.sync_id.data}"


def _arrivals(came: list[tuple[_Instance, Operation]]) -> str:
    """The modules that arrived at a barrier, grouped by source line (the first three named)."""
    lines: dict[str, list[str]] = {}
    for inst, op in came:
        lines.setdefault(line_of(op), []).append(inst.name)
    parts = []
    for where, names in lines.items():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{shown} at {where}")
    return "; ".join(parts)


def _describe_wait(inst: _Instance, op: Operation) -> str:
    if isinstance(op, core.WaitQueueOp):
        return f"{inst.name} waits at {line_of(op)} on {op.memory.data} queue {op.queue.data}"
    if isinstance(op, core.SemWaitOp):
        return f"{inst.name} waits at {line_of(op)} for {_sem(op)}"
    return f"{inst.name} waits at {line_of(op)} in barrier {op.sync_id.data}"


def _diagnose(p: _Proof, stuck: list[_Instance]) -> SyncError | None:
    """The error for a deadlocked abstract run: the first blocked wait (one on a semaphore
    several modules wait for only when no other is blocked), and why: its count is short in
    the whole kernel, or what would release it lies behind another blocked wait. None when a
    module is blocked on a semaphore several modules wait for and no semaphore is short of
    posts: which wait takes which post is run order, and another order may complete (the
    blocked waits are then left to the run)."""
    racy = {s for s, w in p.sem_waiters.items() if len(w) > 1}
    first = next(
        (
            i
            for i in stuck
            if not (isinstance(i.blocked.op, core.SemWaitOp) and i.blocked.op.sync_id.data in racy)
        ),
        stuck[0],
    )
    wait = first.blocked.op
    blocked_at = {i.index: i.blocked.op for i in stuck}
    sent_before = {k: len(v) for k, v in p.sent.items()}
    posted_before = {k: len(v) for k, v in p.posts.items()}
    came = list(p.barriers.get(wait.sync_id.data, [])) if isinstance(wait, core.BarrierOp) else []
    # the totals: release the blocked waits one at a time until every module ended
    p.relaxed = True
    for _ in range(4 * len(p.instances) + 4096):
        left = p.blocked()
        if not left or p.events > MAX_EVENTS:
            break
        p.forced.append((left[0], left[0].blocked))
        p.run()
    if any(
        isinstance(op, core.SemWaitOp) and op.sync_id.data in racy for op in blocked_at.values()
    ) and all(
        sum(n for _op, n in p.sem_needs.get(sem, []))
        <= sum(n for _op, n, _i in p.posts.get(sem, []))
        for sem in racy
    ):
        return None

    def also(*named: _Instance) -> str:
        """The other blocked modules, when there are more than the message names."""
        rest = [i for i in stuck if i is not first and all(i is not n for n in named)]
        listed = "; ".join(_describe_wait(i, blocked_at[i.index]) for i in rest[:4])
        more = f"; and {len(rest) - 4} more" if len(rest) > 4 else ""
        return f" (blocked too: {listed}{more})" if rest else ""

    def behind(inst: _Instance) -> str:
        if inst.index in blocked_at:
            return (
                f"comes after {_describe_wait(inst, blocked_at[inst.index])}, which never "
                f"returns{also(inst)}"
            )
        return f"is never reached{also()}"

    if isinstance(wait, core.WaitQueueOp):
        key = (first.core, wait.memory.data, wait.queue.data)
        sends = p.sent.get(key, [])
        k = sent_before.get(key, 0) + 1  # every earlier arrival was taken: FIFO
        if not sends:
            where = f"{wait.memory.data} queue {wait.queue.data} on core {first.core}"
            return SyncError(
                wait,
                f"core.wait_queue on core {first.core}: no dma of the kernel notifies {where}: "
                "this wait would block forever",
            )
        if len(sends) < k:
            return SyncError(
                wait,
                f"core.wait_queue: core {first.core} waits on {wait.memory.data} queue "
                f"{wait.queue.data} {p.taken.get(key, 0)} times but the kernel's DMAs notify it "
                f"only {len(sends)} time(s), the last at {line_of(sends[-1][0])}: wait {k} would "
                "block forever",
            )
        release, by = sends[k - 1]
        return SyncError(
            wait,
            f"core.wait_queue: wait {k} of core {first.core} on {wait.memory.data} queue "
            f"{wait.queue.data} would block forever: the dma that would "
            f"release it, at {line_of(release)} ({by.name}), {behind(by)}",
        )
    if isinstance(wait, core.SemWaitOp):
        sem = wait.sync_id.data
        posts = p.posts.get(sem, [])
        if not posts:
            return SyncError(
                wait,
                f"core.sem_wait: {_sem(wait)} is never posted in the kernel (no "
                "core.sem_post of it): this wait would block forever",
            )
        total = sum(n for _op, n, _i in posts)
        need = sum(n for _op, n in p.sem_needs.get(sem, []))
        if need > total:
            last = p.sem_needs[sem][-1][0]
            at = "" if last is wait else f", the last wait at {line_of(last)}"
            return SyncError(
                wait,
                f"core.sem_wait: the kernel posts {_sem(wait)} only {total} time(s), the "
                f"last post at {line_of(posts[-1][0])}, but waits for it {need} time(s){at}: "
                "a wait would block forever",
            )
        release, _n, by = posts[min(posted_before.get(sem, 0), len(posts) - 1)]
        return SyncError(
            wait,
            f"core.sem_wait: this wait of {first.name} for {_sem(wait)} would block "
            f"forever: the post that would release it, at {line_of(release)} "
            f"({by.name}), {behind(by)}",
        )
    assert isinstance(wait, core.BarrierOp)
    bid, count = wait.sync_id.data, wait.count.data
    names = _arrivals(came)
    here = {i.index for i, _o in came}
    late = [i for i in stuck if i.index not in here]
    if not late:
        return SyncError(
            wait,
            f"core.barrier {bid} waits for {count} modules but only {len(came)} arrive "
            f"({names}): it would block forever",
        )
    return SyncError(
        wait,
        f"core.barrier {bid} waits for {count} modules but only {len(came)} arrive ({names}) "
        f"and it would block forever: {_describe_wait(late[0], blocked_at[late[0].index])} "
        "before reaching it, which never returns",
    )


@dataclass(frozen=True)
class CoreVerifySyncPass(ModulePass):
    """`core-verify-sync`: the proofs of this module on every `core.kernel` (the model's core
    count from the module's `legato.model`, else the `bertha` target's). A violation is a
    compile error at the op; what is left to the run is not reported here (the compiler logs
    it on `legato.sync`)."""

    name = "core-verify-sync"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        model = model_of(op)
        for kernel in ops_of(op, core.KernelOp):
            verify(kernel, model.num_cores)


def verify(kernel: core.KernelOp, num_cores: int) -> list[Unsettled]:
    """`prove`, a violation raised as a `CompileError` located at its op."""
    try:
        return prove(kernel, num_cores)
    except SyncError as e:
        raise error_at(e.op, str(e)) from None
