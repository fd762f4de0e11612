"""`core-barrier-waits`: a barrier waits only for the transfers other modules can observe.

`legato.barrier` lowers to `core.dma_wait` + `core.barrier` (`lower_runtime.LowerBarrier`): every
DMA the core issued completes before it arrives. That includes the next phase's weight tiles,
loaded ahead (`chip_linear.first_tiles`, `kernelgen.generate_chain`), so the prefetch's DRAM
latency is paid before the barrier instead of under it. This pass replaces such a `dma_wait`
(one directly followed by a `core.barrier`, at the top level of an `all_cores` program) by
queue waits on exactly the transfers that need them:

- A *flyer* may still be in flight at the barrier: a `core.dma` into this core's own memory (an
  alloc of the program, not a transfer's receive buffer) from a read-only kernel argument (no
  program writes it: a weight) or from this core's own memory. No other module reads what it
  writes or writes what it reads, and this core's own later accesses to those bytes are ordered
  by the scoreboard (docs/isa.md, *When data moves*), as inside a phase.
- Every other DMA without `notify` issued since the program's previous `dma_wait` or relaxed
  barrier, at its top level (a store to shared DRAM, a load from a scratch another core rewrites after the
  barrier) gets `notify` of this core's own queue (`sram`, the highest queue number the
  kernel leaves free), and the barrier is preceded by one `core.wait_queue` per such transfer;
  a DMA in an `scf.for` is waited for by a loop over the same bounds (`count` waits per
  iteration). A queue wait orders exactly that transfer (the hazard checker's streams: docs/
  isa.md, *Hazards*), so what the barrier publishes is what the `dma_wait` published.

The `dma_wait` stays when the count of those transfers is not known statically (a DMA in an
`scf.if`, in a loop whose bounds are computed inside an enclosing loop of the segment), when one
may be more than one hardware transfer (a strided copy: only its last transfer notifies), when a
DMA that already notifies is not a flyer, when the segment holds a `core.pim_gemv` (its result
transfer is a DMA `dma_wait` waits for), or when no queue is free. It runs after
`core-transfer-rings` (which takes credit queues from the top down) and before memory planning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Block, Operation, OpResult, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from legato.dialects import core
from legato.transforms.diagnostics import inherit_location
from legato.transforms.ir_walk import block_ops, ops_of, walk

#: the queue space of the barrier's waits (any core memory names a queue; docs/isa.md)
QUEUE_SPACE = "sram"
MAX_QUEUE = 255


class _Keep(Exception):
    """The segment cannot be waited for by queue waits: keep its `dma_wait`."""


@dataclass
class _Waits:
    """The waits one region owes: `count` transfers issued directly in it, and per loop in it
    (in order) the waits of that loop's body."""

    count: int = 0
    loops: list[tuple[scf.ForOp, _Waits]] = field(default_factory=list)

    def empty(self) -> bool:
        return not self.count and all(w.empty() for _l, w in self.loops)


def _root(v: SSAValue) -> SSAValue:
    while isinstance(v, OpResult) and isinstance(v.op, core.SubviewOp | core.ViewOp):
        v = v.op.source
    return v


def _contiguous(v: SSAValue) -> bool:
    """Whether the buffer `v` names is contiguous, by the rule the backend uses (a subview is
    when every dim before its last partial one has size 1); a dynamic size counts as partial
    and must then be the last partial dim, so this never says contiguous where the backend
    sees a strided view."""
    if isinstance(v, OpResult) and isinstance(v.op, core.ViewOp):
        return _contiguous(v.op.source)
    if isinstance(v, OpResult) and isinstance(v.op, core.SubviewOp):
        sub = v.op
        if not _contiguous(sub.source):
            return False
        parent = sub.source.type
        assert isinstance(parent, core.BufType)
        sizes = list(sub.static_sizes.get_values())
        dims = [None if d.is_dynamic else d.bound for d in parent.dims]
        partial = [i for i, (s, d) in enumerate(zip(sizes, dims)) if s < 0 or d is None or s != d]
        return not partial or all(sizes[k] == 1 for k in range(partial[-1]))
    return True


def _own_alloc(v: SSAValue) -> bool:
    """`v` is a buffer of this core's own memory that no other program names (no `buffer`
    attribute: not a transfer's receive buffer)."""
    r = _root(v)
    return (
        isinstance(r, OpResult)
        and isinstance(r.op, core.AllocOp)
        and r.op.core is None
        and r.op.core_reg is None
        and core.BUFFER_ATTR not in r.op.attributes
    )


def _read_only_arg(v: SSAValue, access: dict[int, str]) -> bool:
    r = _root(v)
    return (
        isinstance(r, OpResult)
        and isinstance(r.op, core.ArgOp)
        and access.get(r.op.index.data) == "read"
    )


def _defined_outside(v: SSAValue, region_op: Operation) -> bool:
    owner = v.owner if isinstance(v, OpResult) else v.block.parent_op()  # type: ignore[union-attr]
    while owner is not None:
        if owner is region_op:
            return False
        owner = owner.parent_op()
    return True


class _Segment:
    """The DMAs one barrier's `dma_wait` covers: which to notify, which waits to emit."""

    def __init__(self, access: dict[int, str]):
        self.access = access
        self.notify: list[core.DmaOp] = []

    def flyer(self, op: core.DmaOp) -> bool:
        return _own_alloc(op.dst) and (_read_only_arg(op.src, self.access) or _own_alloc(op.src))

    def collect(self, ops: list[Operation], outer: scf.ForOp | None) -> _Waits:
        waits = _Waits()
        for op in ops:
            if isinstance(op, core.PimGemvOp):
                raise _Keep
            if isinstance(op, core.DmaOp):
                if self.flyer(op):
                    continue
                if op.has_notify:
                    raise _Keep
                if op.nbytes is None and not (_contiguous(op.src) and _contiguous(op.dst)):
                    raise _Keep
                self.notify.append(op)
                waits.count += 1
            elif isinstance(op, scf.ForOp):
                if outer is not None and not all(
                    _defined_outside(b, outer) for b in (op.lb, op.ub, op.step)
                ):
                    raise _Keep
                inner = self.collect(block_ops(op.body.block), outer or op)
                if not inner.empty():
                    waits.loops.append((op, inner))
            elif op.regions:
                if any(
                    isinstance(x, core.DmaOp | core.PimGemvOp) for r in op.regions for x in r.walk()
                ):
                    raise _Keep
        return waits


def _emit_waits(waits: _Waits, at: InsertPoint, queue: int, loc_op: Operation) -> None:
    for _ in range(waits.count):
        w = core.WaitQueueOp(QUEUE_SPACE, queue)
        inherit_location(w, loc_op)
        Rewriter.insert_op(w, at)
    for loop, inner in waits.loops:
        block = Block(arg_types=[IndexType()])
        body = InsertPoint.at_end(block)
        _emit_waits(inner, body, queue, loc_op)
        Rewriter.insert_op(scf.YieldOp(), body)
        new = scf.ForOp(loop.lb, loop.ub, loop.step, [], Region(block))
        inherit_location(new, loc_op)
        Rewriter.insert_op(new, at)


def _free_queue(kernel: core.KernelOp) -> int | None:
    used = set()
    for op in walk(kernel):
        if isinstance(op, core.DmaOp) and op.has_notify and op.notify_space is not None:
            if op.notify_space.data == QUEUE_SPACE and op.notify_queue is not None:
                used.add(op.notify_queue.data)
        elif isinstance(op, core.WaitQueueOp) and op.memory.data == QUEUE_SPACE:
            used.add(op.queue.data)
    return next((q for q in range(MAX_QUEUE, -1, -1) if q not in used), None)


def relax_barrier_waits(kernel: core.KernelOp) -> int:
    """Rewrite the barriers of `kernel` as the module docstring says; the number rewritten."""
    queue = _free_queue(kernel)
    if queue is None:
        return 0
    access = {i: a.access.data for i, a in enumerate(kernel.args.data)}
    done = 0
    for prog in kernel.programs:
        if not prog.ctx.is_all_cores:
            continue
        segment: list[Operation] = []
        for op in block_ops(prog.body.block):
            nxt = op.next_op
            if isinstance(op, core.DmaWaitOp) and isinstance(nxt, core.BarrierOp):
                if _relax(op, segment, access, queue):
                    done += 1
                segment = []
            elif isinstance(op, core.DmaWaitOp):
                segment = []  # (a barrier without one orders none of this core's DMAs)
            else:
                segment.append(op)
    return done


def _relax(wait: core.DmaWaitOp, segment: list[Operation], access, queue: int) -> bool:
    seg = _Segment(access)
    try:
        waits = seg.collect(segment, None)
    except _Keep:
        return False
    for dma in seg.notify:
        cid = core.CoreIdOp()
        inherit_location(cid, dma)
        Rewriter.insert_op(cid, InsertPoint.before(dma))
        new = core.DmaOp(dma.src, dma.dst, dma.nbytes, (cid.result, QUEUE_SPACE, queue))
        new.attributes |= dma.attributes
        new.location = dma.location
        Rewriter.replace_op(dma, new)
    _emit_waits(waits, InsertPoint.before(wait), queue, wait)
    Rewriter.erase_op(wait)
    return True


@dataclass(frozen=True)
class CoreBarrierWaitsPass(ModulePass):
    """`core-barrier-waits`: the rewrite of the module docstring on every `core.kernel`."""

    name = "core-barrier-waits"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in ops_of(op, core.KernelOp):
            relax_barrier_waits(kernel)
