"""Lowering of runtime scalars, loops, dynamic slices, loads and synchronization (part of
`convert-legato-to-core`; same conventions as `lower_tensor_ops`).

- `arith` ops on `index` values are cloned into the program (operands mapped); `legato.dim` is
  the runtime dim the buffer carries (a `core.dim`/`core.arg` dim value, or a constant).
- `scf.for` stays an `scf.for` without iter_args: a tensor carried around the loop gets one
  accumulator buffer (allocated and filled from the initial value before the loop); each
  iteration ends by copying the yielded value into it (VPU copy, or DMA for other dtypes), and
  the loop's result is that buffer. Transfers (request_load/receive) inside a loop are refused:
  their pairing is static. The MPU weight known to be loaded survives a loop only when the body
  loads no other weight.
- `legato.dynamic_slice` is a `core.subview` with the mapped offsets and sizes.
- `legato.barrier` is `core.dma_wait` + `core.barrier 0 count <num_cores>` (every core of the
  all-cores program). `legato.signal to <ctx> sem s` is `core.dma_wait` + `core.sem_post`, and
  `legato.wait sem s` a `core.sem_wait`, on the chip-wide semaphore the kernel assigns to
  (<ctx>, s): the pairs are numbered in order of first appearance (at most 64).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, Operation, Region, SSAValue

from legato.dialects import core
from legato.dialects import legato as lg
from legato.transforms import lower_tensor_ops as T
from legato.transforms.diagnostics import error_at

if TYPE_CHECKING:
    from legato.transforms.lowering_state import Buffer as _Buffer
    from legato.transforms.lowering_state import LoweringState as _KernelLowering
    from legato.transforms.lowering_state import ProgramState as _Program

MAX_SEMAPHORES = core.MAX_SYNC_ID + 1
_VIEW_OPS = (lg.SliceOp, lg.DynamicSliceOp, lg.ReshapeOp)


def handles(op: Operation) -> bool:
    return (
        isinstance(op, lg.DimOp | lg.DynamicSliceOp | lg.BarrierOp | lg.SignalOp | lg.WaitOp)
        or isinstance(op, scf.ForOp)
        or op.name.startswith("arith.")
    )


def root_value(value: SSAValue) -> SSAValue:
    """The tensor a view (slice, dynamic slice, reshape) was taken of, transitively."""
    while isinstance(value.owner, _VIEW_OPS):
        value = value.owner.input  # type: ignore[union-attr]
    return value


def lower(L: _KernelLowering, prog: _Program, op: Operation) -> None:
    if isinstance(op, scf.ForOp):
        _for(L, prog, op)
    elif isinstance(op, lg.DimOp):
        buf = L.lookup(prog, op.input, op)
        d = buf.dims[op.dim.data]
        prog.scalars[op.result] = d if isinstance(d, SSAValue) else T.index_const(prog, d, op)
    elif isinstance(op, lg.DynamicSliceOp):
        _dynamic_slice(L, prog, op)
    elif isinstance(op, lg.BarrierOp):
        if not prog.ctx.is_all_cores:
            raise error_at(op, "legato.barrier runs in an all_cores region")
        prog.emit(core.DmaWaitOp(), op)
        prog.emit(core.BarrierOp(0, L.model.num_cores), op)
    elif isinstance(op, lg.SignalOp):
        target = op.target
        if target.is_core and target.core_index >= L.model.num_cores:
            raise error_at(
                op,
                f"legato.signal to {target.spelling}: {L.model.name} has {L.model.num_cores} cores",
            )
        prog.emit(core.DmaWaitOp(), op)
        prog.emit(core.SemPostOp(_sem_id(L, target.spelling, op.sem.data, op), op.count.data), op)
    elif isinstance(op, lg.WaitOp):
        if prog.ctx.is_all_cores:
            raise error_at(op, "legato.wait cannot run in an all_cores region; use legato.barrier")
        prog.emit(core.SemWaitOp(_sem_id(L, prog.ctx.spelling, op.sem.data, op), op.count.data), op)
    else:  # arith on index values
        try:
            mapping = {v: prog.scalars[v] for v in op.operands}
        except KeyError:
            raise error_at(
                op, f"{op.name}: an operand is not an index value of this program"
            ) from None
        new = op.clone(value_mapper=mapping)
        prog.emit(new, op)
        for old, res in zip(op.results, new.results):
            prog.scalars[old] = res


def _sem_id(L: _KernelLowering, ctx: str, sem: int, op: Operation) -> int:
    ids: dict[tuple[str, int], int] = L.__dict__.setdefault("sem_ids", {})
    key = (ctx, sem)
    if key not in ids:
        if len(ids) >= MAX_SEMAPHORES:
            raise error_at(
                op,
                f"this kernel uses more than {MAX_SEMAPHORES} (context, semaphore) pairs; "
                f"{L.model.name} has {MAX_SEMAPHORES} hardware semaphores",
            )
        ids[key] = len(ids)
    return ids[key]


def _scalar(prog: _Program, v: SSAValue, at: Operation) -> SSAValue:
    if v not in prog.scalars:
        raise error_at(at, "an index operand is not defined in this program")
    return prog.scalars[v]


def _dynamic_slice(L: _KernelLowering, prog: _Program, op: lg.DynamicSliceOp) -> None:
    buf = L.lookup(prog, op.input, op)
    rt = op.result.type
    assert isinstance(rt, lg.TensorType)
    offsets = [o if isinstance(o, int) else _scalar(prog, o, op) for o in op.mixed_offsets()]
    sizes = []
    for s, d in zip(op.mixed_sizes(), rt.dims):
        sizes.append((s, s) if isinstance(s, int) else (_scalar(prog, s, op), d.bound))
    prog.values[op.result] = T.subview(prog, buf, offsets, sizes, op)


def _copy(L: _KernelLowering, prog: _Program, src: _Buffer, dst: _Buffer, at: Operation) -> None:
    if src.type.dtype.name in T.VPU_DTYPES and src.type.space in T.LOCAL:
        src = T.contiguous(L, prog, src, at)
        prog.emit(core.VpuUnaryOp("copy", src.value, dst.value), at)
    else:
        T.copy_dma(L, prog, src, dst, at)


def _for(L: _KernelLowering, prog: _Program, op: scf.ForOp) -> None:
    for inner in op.body.walk():
        if isinstance(inner, lg.RequestLoadOp | lg.ReceiveOp | lg.ReceiveTypeOp):
            raise error_at(
                inner,
                f"{inner.name} inside a runtime loop is not supported (transfers pair "
                "statically); load tiles inside the loop with legato.load",
            )
    lb, ub, step = (_scalar(prog, v, op) for v in (op.lb, op.ub, op.step))
    accs = []
    for init, barg in zip(op.iter_args, op.body.block.args[1:]):
        ib = L.lookup(prog, init, op)
        if ib.type.space not in T.LOCAL:
            raise error_at(
                op,
                f"a tensor carried around a runtime loop must be in core memory, not "
                f"{ib.type.space}",
            )
        acc = T.alloc(L, prog, T.dimsb(ib), ib.type.element_type, ib.type.space, op)
        _copy(L, prog, ib, acc, op)
        prog.values[barg] = acc
        accs.append(acc)
    weight_before = prog.loaded_weight
    if any(isinstance(m, lg.MatmulOp) and m.rhs is not weight_before for m in op.body.walk()):
        prog.loaded_weight = None  # the body loads another weight: reload on every iteration
    block = Block(arg_types=[IndexType()])
    block.args[0].name_hint = op.body.block.args[0].name_hint
    prog.scalars[op.body.block.args[0]] = block.args[0]
    saved, prog.body = prog.body, []
    try:
        for inner in op.body.block.ops:
            if isinstance(inner, scf.YieldOp):
                for v, acc in zip(inner.operands, accs):
                    y = L.lookup(prog, v, inner)
                    if y.value is not acc.value:
                        _copy(L, prog, y, acc, inner)
            else:
                L.lower_op(prog, inner)
        body = prog.body
    finally:
        prog.body = saved
    if prog.loaded_weight is not weight_before:
        prog.loaded_weight = None  # zero iterations keep the old weight, others the body's
    for o in body:
        block.add_op(o)
    y = scf.YieldOp()
    y.location = op.location
    block.add_op(y)
    prog.emit(scf.ForOp(lb, ub, step, [], Region(block)), op)
    for res, acc in zip(op.results, accs):
        prog.values[res] = acc
