"""`core-transfer-rings`: a core-to-core stream of more than `RING_SLOTS` transfers cycles
through `RING_SLOTS` receive buffers, with credits.

`convert-legato-to-core` gives every transfer its own receive buffer for the whole kernel: the
sender's `core.alloc on core(i)` and the receiver's `core.alloc`, tied by their `buffer` name,
then the sender's `core.dma ... notify core(i) <space> queue <q>` and the receiver's
`core.wait_queue <space> queue <q>` (the k-th wait on a queue takes the k-th arrival: FIFO). A
*stream* is the transfers notifying one queue: (core i, space, q), or (space, q) of an
`all_cores` program's sends to a runtime core `core(%c)`.

A stream of more than `RING_SLOTS` transfers qualifies when it runs from one core program to one
core program (or within the `all_cores` program, in `sram`), every receive buffer has one static
type, and the receiver is done with transfer k - S before it receives transfer k: its last touch
of that buffer (a top-level op using it or a view of it; an op nested in a loop counts as its
loop) comes first in its program and reaches the buffer's first byte. In the SPMD program that
last touch must also come before the send of transfer k (every core runs both sides, so a credit
wait never waits on a later point of the program). A qualifying stream then uses buffer slot
k % S (`buffer = "<name>_slot<j>"`, `<name>` the first transfer's), and credits: after its last
touch of transfer k's buffer the receiver copies the buffer's first `RING_CREDIT_BYTES` bytes
onto themselves, a DMA the scoreboard holds until the unit ops reading the buffer are done, that
notifies a credit queue of the sender (its highest queue in `sram` no transfer uses); before
sending transfer k >= S the sender waits on that queue. In the SPMD program the credit goes to
the core that sends to this one (the inverse of the target permutation: another stream's target
when that is the inverse, else the target applied order - 1 times, computed at the end of the
prologue from a fresh `core.core_id`), and comes after the next MPU/VPU op following the last
touch (the core issues in order: the unit then has that op queued while the credit waits), when
that still comes before transfer k + S is received or sent. Streams that do not qualify keep one
buffer per transfer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, ModuleOp, StringAttr
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from legato.dialects import core
from legato.dialects.shared_attrs import integer_attr
from legato.model.ir import model_of
from legato.transforms.index_arith import per_core_values
from legato.transforms.ir_walk import block_ops, walk

RING_SLOTS = 3  # receive buffers of a ring stream
RING_CREDIT_BYTES = 64  # bytes a credit DMA copies onto themselves
MAX_QUEUE = 255  # queues per (core, space): credit queues are taken from the top down
SENDER_ORDER_LIMIT = 4  # the largest permutation order whose inverse is built in the prologue

StreamKey = tuple[int | None, str, int]  # (receiver core or None: a runtime core, space, queue)


def _starts_at(view: SSAValue, buf: SSAValue) -> bool:
    """`view` is `buf` or a chain of views of it at offset 0."""
    while view is not buf:
        op = view.owner
        if not isinstance(op, core.ViewOp) and not (
            isinstance(op, core.SubviewOp)
            and not op.offsets
            and all(o == 0 for o in op.static_offsets.get_values())
        ):
            return False
        view = op.source
    return True


def last_touches(ops: list[Operation]) -> dict[SSAValue, int | None]:
    """For each buffer allocated in `ops` (a block's top-level ops): the index of the last op
    touching it (or a view of it; ops nested in loops count as their loop), or None when that
    last touch does not reach the buffer's first byte (only views at a nonzero offset)."""
    root: dict[SSAValue, SSAValue] = {}
    last: dict[SSAValue, list] = {}  # buffer -> [index, touches its first byte]
    for i, top in enumerate(ops):
        for op in walk(top):
            if isinstance(op, core.AllocOp):
                root[op.result] = op.result
                continue
            hit = {root[v] for v in op.operands if v in root}
            if not hit:
                continue
            view = isinstance(op, core.SubviewOp | core.ViewOp)
            if view and len(hit) == 1:
                root[op.results[0]] = next(iter(hit))
            for v in op.operands:
                if v not in root:
                    continue
                r = root[v]
                entry = last.setdefault(r, [i, False])
                if entry[0] != i:
                    entry[0], entry[1] = i, False
                if not view:
                    entry[1] = entry[1] or _starts_at(v, r)
    return {r: (e[0] if e[1] else None) for r, e in last.items()}


def is_unit_op(op: Operation) -> bool:
    """An op the MPU or VPU runs (the core only issues it)."""
    return op.name.startswith(("core.mpu_", "core.vpu_"))


@dataclass
class _Program:
    """One program's top-level ops as the conversion left them, and the ops to insert."""

    op: core.ProgramOp
    ops: list[Operation]
    body_start: int  # the first op after the prologue (`core.arg`, `core.dim`)
    pos: dict[Operation, int]
    inserts: list[tuple[int, list[Operation]]] = field(default_factory=list)
    prologue: list[Operation] = field(default_factory=list)  # added at the prologue's end
    _touch: dict[SSAValue, int | None] | None = None
    _waits: dict[tuple[str, int], list[core.WaitQueueOp]] | None = None

    @staticmethod
    def of(op: core.ProgramOp) -> _Program:
        ops = block_ops(op.body.block)
        start = next(
            (i for i, o in enumerate(ops) if not isinstance(o, core.ArgOp | core.DimOp)), len(ops)
        )
        return _Program(op, ops, start, {o: i for i, o in enumerate(ops)})

    @property
    def touch(self) -> dict[SSAValue, int | None]:
        if self._touch is None:
            self._touch = last_touches(self.ops)
        return self._touch

    def waits(self, space: str, queue: int) -> list[core.WaitQueueOp]:
        """The program's waits on (space, queue), in program order (indexed once: the ops
        are the program's as it was read, the inserts are only planned)."""
        if self._waits is None:
            self._waits = {}
            for o in self.ops:
                if isinstance(o, core.WaitQueueOp):
                    self._waits.setdefault((o.memory.data, o.queue.data), []).append(o)
        return self._waits.get((space, queue), [])

    def body_pos(self, op: Operation) -> int | None:
        i = self.pos.get(op)
        return i if i is not None and i >= self.body_start else None

    def apply(self) -> None:
        """Insert the planned ops: from the back, so that the indices (taken before any
        insertion) stay valid; at one index, in the order they were planned."""
        ops = list(self.ops)
        for at, new in sorted(self.inserts, key=lambda x: x[0], reverse=True):
            ops[at:at] = new
        ops[self.body_start : self.body_start] = self.prologue
        block = self.op.body.block
        anchor: Operation | None = None
        for o in reversed(ops):
            if o.parent is None:
                if anchor is None:
                    block.add_op(o)
                else:
                    block.insert_op_before(o, anchor)
            anchor = o


@dataclass
class _End:
    """One end of a transfer: its program, its queue op (the sender's DMA, the receiver's
    wait) and its buffer."""

    prog: _Program
    op: Operation
    alloc: core.AllocOp


@dataclass
class _Stream:
    key: StreamKey
    sends: list[_End] = field(default_factory=list)
    recvs: list[_End] = field(default_factory=list)

    @property
    def name(self) -> str:
        attr = self.sends[0].alloc.attributes[core.BUFFER_ATTR]
        assert isinstance(attr, StringAttr)
        return attr.data


def _buffer_name(alloc: Operation) -> str | None:
    attr = alloc.attributes.get(core.BUFFER_ATTR) if isinstance(alloc, core.AllocOp) else None
    return attr.data if isinstance(attr, StringAttr) else None


def _streams(progs: list[_Program]) -> list[_Stream]:
    """Every stream of the kernel, its sends in program order, in order of first send; the
    receive ends are found for the streams that run between core programs (all of them, or
    none when a transfer's receive is not where a ring needs it)."""
    streams: dict[StreamKey, _Stream] = {}
    receives: dict[str, list[tuple[_Program, core.AllocOp]]] = {}
    for prog in progs:
        for op in prog.ops:
            if isinstance(op, core.AllocOp) and op.core is None and op.core_reg is None:
                name = _buffer_name(op)
                if name is not None:
                    receives.setdefault(name, []).append((prog, op))
            if not isinstance(op, core.DmaOp) or not op.has_notify:
                continue
            assert op.notify_space is not None and op.notify_queue is not None
            target = op.notify_core.core_index if op.notify_core is not None else None
            key = (target, op.notify_space.data, op.notify_queue.data)
            s = streams.setdefault(key, _Stream(key))
            dst = op.dst.owner
            if isinstance(dst, core.AllocOp) and _buffer_name(dst) is not None:
                s.sends.append(_End(prog, op, dst))
            else:
                s.sends.append(_End(prog, op, None))  # type: ignore[arg-type]
    for s in streams.values():
        _find_receives(s, receives)
    return list(streams.values())


def _find_receives(s: _Stream, receives: dict[str, list[tuple[_Program, core.AllocOp]]]) -> None:
    """The receive end of each send of `s`: the one receive buffer of its name, and the k-th
    wait on the stream's queue in that buffer's program; left empty unless every send has one,
    in one program, in the sends' order."""
    _, space, q = s.key
    if any(e.alloc is None for e in s.sends):
        return
    found = []
    for e in s.sends:
        rs = receives.get(_buffer_name(e.alloc) or "", [])
        if len(rs) != 1:
            return
        found.append(rs[0])
    prog = found[0][0]
    if any(p is not prog for p, _ in found):
        return
    waits = prog.waits(space, q)
    positions = [prog.pos[a] for _, a in found]
    if len(waits) != len(found) or positions != sorted(positions):
        return
    s.recvs = [_End(prog, w, a) for w, (_, a) in zip(waits, found, strict=True)]


class _Rings:
    def __init__(self, kernel: core.KernelOp, num_cores: int):
        self.num_cores = num_cores
        self.progs = [_Program.of(p) for p in kernel.programs]
        self.streams = _streams(self.progs)
        # queues a transfer notifies; credit queues are added as they are taken
        self.used: set[StreamKey] = {s.key for s in self.streams}
        # SPMD streams (space, queue) -> the target core of each core (a permutation)
        self.spmd_targets: dict[tuple[str, int], tuple[_Stream, list[int | None]]] = {}
        for s in self.streams:
            if s.key[0] is None:
                reg = s.sends[0].op.notify_core_reg  # type: ignore[attr-defined]
                per_core = per_core_values(reg, num_cores, core.CoreIdOp)
                targets = list(per_core) if per_core is not None else [None] * num_cores
                self.spmd_targets[s.key[1:]] = (s, targets)

    def run(self) -> None:
        # SPMD streams first (a kernel has either an all_cores program or core programs)
        order = [s for s in self.streams if s.key[0] is None]
        order += [s for s in self.streams if s.key[0] is not None]
        for s in order:
            if len(s.sends) <= RING_SLOTS or not s.recvs:
                continue
            if s.key[0] is None:
                self._ring_spmd(s)
            else:
                self._ring_cores(s)
        for prog in self.progs:
            prog.apply()

    def _one_static_type(self, s: _Stream) -> core.BufType | None:
        types = {e.alloc.result.type for e in s.recvs}
        t = next(iter(types))
        assert isinstance(t, core.BufType)
        return t if len(types) == 1 and t.is_static else None

    @staticmethod
    def _touches_before(s: _Stream, prog: _Program, deadlines: list[int]) -> list[int] | None:
        """The receiver's last touch of each transfer's buffer, when each reaches the buffer's
        first byte and transfer k - S's comes before `deadlines[k]` (else None)."""
        touches = [prog.touch.get(e.alloc.result) for e in s.recvs]
        if any(p is None for p in touches):
            return None
        done = [p for p in touches if p is not None]
        if any(done[k - RING_SLOTS] >= deadlines[k] for k in range(RING_SLOTS, len(done))):
            return None
        return done

    def _ring_cores(self, s: _Stream) -> None:
        """A stream from one core program to another (module docstring)."""
        sprog, rprog = s.sends[0].prog, s.recvs[0].prog
        if any(e.prog is not sprog for e in s.sends) or not sprog.op.ctx.is_core:
            return
        if not rprog.op.ctx.is_core:
            return
        t = self._one_static_type(s)
        if t is None:
            return
        n = len(s.sends)
        touches = self._touches_before(s, rprog, [rprog.pos[e.op] for e in s.recvs])
        if touches is None:
            return
        sender = sprog.op.ctx.core_index
        cq = next(q for q in range(MAX_QUEUE, -1, -1) if (sender, "sram", q) not in self.used)
        self.used.add((sender, "sram", cq))
        self._slots_and_waits(s, cq)
        nbytes = min(RING_CREDIT_BYTES, t.max_bytes)
        for k in range(n - RING_SLOTS):
            at = touches[k] + 1
            rprog.inserts.append(
                (at, self._credit(rprog, s.recvs[k].alloc, at, nbytes, sender, cq))
            )

    def _ring_spmd(self, s: _Stream) -> None:
        """A stream of an SPMD program (sends to a runtime core and the receives they pair
        with): the same slots and credits; the credit goes to the core that sends to this one,
        and the receiver's last touch of transfer k - S also comes before the send of transfer
        k (module docstring)."""
        _, space, _ = s.key
        prog = s.sends[0].prog
        if any(e.prog is not prog for e in s.sends + s.recvs) or space != "sram":
            return
        t = self._one_static_type(s)
        if t is None:
            return
        n = len(s.sends)
        waits = [prog.pos[e.op] for e in s.recvs]
        dmas = [prog.pos[e.op] for e in s.sends]
        touches = self._touches_before(s, prog, [min(w, d) for w, d in zip(waits, dmas)])
        if touches is None:
            return
        sender = self._sender_of(prog, s, touches[0] + 1)
        if sender is None:
            return
        spmd_used = {(sp, qq) for _, sp, qq in self.used}
        cq = next(x for x in range(MAX_QUEUE, -1, -1) if ("sram", x) not in spmd_used)
        self.used.add((None, "sram", cq))
        self._slots_and_waits(s, cq)
        nbytes = min(RING_CREDIT_BYTES, t.max_bytes)
        for k in range(n - RING_SLOTS):
            at = touches[k] + 1
            # The credit DMA issues once the unit ops reading the buffer are done, and the core
            # issues in order: after the next MPU/VPU op, which the unit then has queued while
            # the credit waits (if that still comes before transfer k + S is received or sent).
            limit = min(waits[k + RING_SLOTS], dmas[k + RING_SLOTS])
            nxt = next((j for j in range(at, limit) if is_unit_op(prog.ops[j])), None)
            if nxt is not None:
                at = nxt + 1
            prog.inserts.append((at, self._credit(prog, s.recvs[k].alloc, at, nbytes, sender, cq)))

    @staticmethod
    def _credit(
        prog: _Program, alloc: core.AllocOp, at: int, nbytes: int, sender, cq: int
    ) -> list[Operation]:
        """The credit of one ring buffer, placed at `at` (after the op before it)."""
        buf = alloc.result
        c = arith.ConstantOp(integer_attr(nbytes, IndexType()))
        credit = core.DmaOp(buf, buf, c.result, (sender, "sram", cq))
        for o in (c, credit):
            o.location = prog.ops[at - 1].location
        return [c, credit]

    @staticmethod
    def _slots_and_waits(s: _Stream, cq: int) -> None:
        """Put transfer k of a ring stream (both ends) in buffer slot k % RING_SLOTS, and make
        the sender wait for a credit on its queue `cq` before each send from the
        (RING_SLOTS+1)-th on."""
        base = s.name
        for k, (snd, rcv) in enumerate(zip(s.sends, s.recvs, strict=True)):
            slot = StringAttr(f"{base}_slot{k % RING_SLOTS}")
            snd.alloc.attributes[core.BUFFER_ATTR] = slot
            rcv.alloc.attributes[core.BUFFER_ATTR] = slot
        for snd in s.sends[RING_SLOTS:]:
            wait = core.WaitQueueOp("sram", cq)
            wait.location = snd.op.location
            snd.prog.inserts.append((snd.prog.pos[snd.op], [wait]))

    def _sender_of(self, prog: _Program, s: _Stream, before: int) -> SSAValue | None:
        """An `index` value of `prog` holding the core that sends to the running core under the
        permutation of stream `s`: another SPMD stream's target when it is the inverse and is
        computed in the body before `before`, else the target applied order - 1 times (order <=
        `SENDER_ORDER_LIMIT`, built in the prologue), else None."""
        targets = self.spmd_targets[s.key[1:]][1]
        if any(t is None for t in targets):
            return None
        inverse = [0] * len(targets)
        for c, t in enumerate(targets):
            inverse[t] = c  # type: ignore[index]
        for other, tg in self.spmd_targets.values():
            if tg == inverse:
                v = other.sends[0].op.notify_core_reg  # type: ignore[attr-defined]
                if isinstance(v, OpResult):
                    p = prog.body_pos(v.op)
                    if p is not None and p < before:
                        return v
        order, cur = 1, list(targets)
        while cur != list(range(len(targets))):
            cur = [targets[x] for x in cur]  # type: ignore[index]
            order += 1
            if order > SENDER_ORDER_LIMIT:
                return None
        value = s.sends[0].op.notify_core_reg  # type: ignore[attr-defined]
        x: SSAValue = core.CoreIdOp().results[0]
        prog.prologue.append(x.owner)  # type: ignore[arg-type]
        for _ in range(order - 1):
            x = self._clone_index(prog, value, x, {})
        return x

    def _clone_index(self, prog: _Program, value: SSAValue, cid: SSAValue, memo: dict) -> SSAValue:
        """`value` (computed from `core.core_id` and constants) recomputed in `prog`'s
        prologue with `cid` for core_id."""
        assert isinstance(value, OpResult)
        op = value.op
        if isinstance(op, core.CoreIdOp):
            return cid
        if value not in memo:
            operands = [self._clone_index(prog, v, cid, memo) for v in op.operands]
            new = op.clone()
            for i, v in enumerate(operands):
                new.operands[i] = v
            prog.prologue.append(new)
            memo[value] = new.results[value.index]
        return memo[value]


@dataclass(frozen=True)
class CoreTransferRingsPass(ModulePass):
    """Cycle every qualifying core-to-core stream of each `core.kernel` through `RING_SLOTS`
    receive buffers with credits (module docstring)."""

    name = "core-transfer-rings"

    target: str = "bertha"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        num_cores = model_of(op, self.target).num_cores
        for kernel in op.body.block.ops:
            if isinstance(kernel, core.KernelOp):
                _Rings(kernel, num_cores).run()
