"""Rewrite patterns lowering runtime scalars, loops, dynamic slices and synchronization (part of
`convert-legato-to-core`; conventions of `lowering_state`).

- `arith` ops on `index` values stay as they are (their operands are already the program's core
  index values); `legato.dim` is the runtime dim the buffer carries (a `core.dim`/`core.arg` dim
  value, or a constant); `legato.core_id` is `core.core_id`.
- `scf.for` becomes an `scf.for` without iter_args: a tensor carried around the loop gets one
  accumulator buffer (allocated and filled from the initial value before the loop); each
  iteration ends by copying the yielded value into it (VPU copy, or DMA for other dtypes), and
  the loop's result is that buffer. The body's ops move into the new loop and are lowered after
  it, in order; its `scf.yield`, lowered last, writes the accumulators. Transfers
  (request_load/receive) inside a loop are refused: their pairing is static. The MPU weight known
  to be loaded survives a loop only when the body loads no other weight.
- `legato.dynamic_slice` is a `core.subview` with the mapped offsets and sizes.
- `legato.barrier` is `core.dma_wait` + `core.barrier 0 count <num_cores>` (every core of the
  all-cores program); `core-barrier-waits` then narrows that `dma_wait` to queue waits on the
  transfers other cores can observe. `legato.signal to <ctx> sem s` is `core.dma_wait` + `core.sem_post`, and
  `legato.wait sem s` a `core.sem_wait`, on the chip-wide semaphore the kernel assigns to
  (<ctx>, s): the pairs are numbered in order of first appearance (at most 64).
- `legato.device_print` / `legato.device_assert` are `core.print` / `core.assert` of the values'
  buffers (a strided view copied to a contiguous buffer first) and index values.
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.dialects.builtin import IndexType, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from legato.dialects import core
from legato.dialects import legato as lg
from legato.transforms import lower_tensor_ops as T
from legato.transforms.diagnostics import error_at
from legato.transforms.lowering_state import (
    Buffer,
    LoopState,
    LoweringPattern,
    LoweringState,
    ProgramState,
)


def dynamic_slice(L: LoweringState, prog: ProgramState, op: lg.DynamicSliceOp) -> Buffer:
    buf = L.lookup(prog, op.input, op)
    rt = op.result.type
    assert isinstance(rt, lg.TensorType)
    offsets = [o if isinstance(o, int) else L.scalar(prog, o, op) for o in op.mixed_offsets()]
    sizes = []
    for s, d in zip(op.mixed_sizes(), rt.dims):
        sizes.append((s, s) if isinstance(s, int) else (L.scalar(prog, s, op), d.bound))
    return T.subview(prog, buf, offsets, sizes, op)


def copy(L: LoweringState, prog: ProgramState, src: Buffer, dst: Buffer, at: Operation) -> None:
    """`src` into `dst`: a VPU copy when the VPU can, else a DMA."""
    if src.type.dtype.name in T.VPU_DTYPES and src.type.space in T.LOCAL:
        src = T.contiguous(L, prog, src, at)
        prog.emit(core.VpuUnaryOp("copy", src.value, dst.value), at)
    else:
        T.copy_dma(L, prog, src, dst, at)


# -- patterns ----------------------------------------------------------------------------------


class LowerIndexArith(RewritePattern):
    """`arith` on index values: kept, its results become index values of the program."""

    def __init__(self, state: LoweringState):
        self.state = state

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.dialect_name() != "arith":
            return
        prog = self.state.begin(op, rewriter)
        if any(v not in prog.scalars for v in op.operands):
            raise error_at(op, f"{op.name}: an operand is not an index value of this program")
        prog.scalars.update(op.results)


class LowerCoreId(LoweringPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.CoreIdOp, rewriter: PatternRewriter) -> None:
        prog = self.state.begin(op, rewriter)
        value = prog.emit(core.CoreIdOp(), op).results[0]
        self.state.bind_scalar(prog, op, value, rewriter)


class LowerDim(LoweringPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.DimOp, rewriter: PatternRewriter) -> None:
        prog = self.state.begin(op, rewriter)
        d = self.state.lookup(prog, op.input, op).dims[op.dim.data]
        value = d if isinstance(d, SSAValue) else T.index_const(prog, d, op)
        self.state.bind_scalar(prog, op, value, rewriter)


class LowerDynamicSlice(T.ViewOpPattern):
    lower = staticmethod(dynamic_slice)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.DynamicSliceOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerBarrier(LoweringPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.BarrierOp, rewriter: PatternRewriter) -> None:
        prog = self.state.begin(op, rewriter)
        if not prog.ctx.is_all_cores:
            raise error_at(op, "legato.barrier runs in an all_cores region")
        prog.emit(core.DmaWaitOp(), op)
        prog.emit(core.BarrierOp(0, self.state.model.num_cores), op)
        rewriter.erase(op)


class LowerSignal(LoweringPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.SignalOp, rewriter: PatternRewriter) -> None:
        L = self.state
        prog = L.begin(op, rewriter)
        target = op.target
        if target.is_core and target.core_index >= L.model.num_cores:
            raise error_at(
                op,
                f"legato.signal to {target.spelling}: {L.model.name} has {L.model.num_cores} cores",
            )
        prog.emit(core.DmaWaitOp(), op)
        sem = L.sem_id(target.spelling, op.sem.data, op)
        post = prog.emit(core.SemPostOp(sem, op.count.data), op)
        post.attributes[core.SEM_ATTR] = StringAttr(f"{op.sem.data} of {target.spelling}")
        rewriter.erase(op)


class LowerWait(LoweringPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.WaitOp, rewriter: PatternRewriter) -> None:
        L = self.state
        prog = L.begin(op, rewriter)
        if prog.ctx.is_all_cores:
            raise error_at(op, "legato.wait cannot run in an all_cores region; use legato.barrier")
        wait = core.SemWaitOp(L.sem_id(prog.ctx.spelling, op.sem.data, op), op.count.data)
        prog.emit(wait, op)
        wait.attributes[core.SEM_ATTR] = StringAttr(f"{op.sem.data} of {prog.ctx.spelling}")
        rewriter.erase(op)


class LowerFor(LoweringPattern):
    """A legato loop becomes a core loop without iter_args (module docstring); its body moves
    into the new loop, where the walker lowers it next."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        L = self.state
        for inner in op.body.walk():
            if isinstance(inner, lg.RequestLoadOp | lg.ReceiveOp | lg.ReceiveTypeOp):
                raise error_at(
                    inner,
                    f"{inner.name} inside a runtime loop is not supported (transfers pair "
                    "statically); load tiles inside the loop with legato.load",
                )
        prog = L.begin(op, rewriter)
        lb, ub, step = (L.scalar(prog, v, op) for v in (op.lb, op.ub, op.step))
        accs: list[Buffer] = []
        for init in op.iter_args:
            ib = L.lookup(prog, init, op)
            if ib.type.space not in T.LOCAL:
                raise error_at(
                    op,
                    f"a tensor carried around a runtime loop must be in core memory, not "
                    f"{ib.type.space}",
                )
            acc = T.alloc(L, prog, T.dimsb(ib), ib.type.element_type, ib.type.space, op)
            copy(L, prog, ib, acc, op)
            accs.append(acc)
        # The carried tensor, in the body and after the loop, is its accumulator.
        carried = [L.cast(prog, acc, res) for acc, res in zip(accs, op.results)]
        weight_before = prog.loaded_weight
        if any(isinstance(m, lg.MatmulOp) and m.rhs is not weight_before for m in op.body.walk()):
            prog.loaded_weight = None  # the body loads another weight: reload on every iteration
        block = Block(arg_types=[IndexType()])
        iv = block.args[0]
        iv.name_hint = op.body.block.args[0].name_hint
        prog.scalars.add(iv)
        loop = scf.ForOp(lb, ub, step, [], Region(block))
        prog.emit(loop, op)
        rewriter.inline_block(op.body.block, InsertPoint.at_end(block), [iv, *carried])
        L.loops[loop] = LoopState(accs, weight_before)
        L.replace(op, carried, rewriter)


class LowerLoopYield(LoweringPattern):
    """The end of a loop body: copy each yielded tensor into its accumulator."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.YieldOp, rewriter: PatternRewriter) -> None:
        L = self.state
        loop = op.parent_op()
        assert loop is not None
        state = L.loops.pop(loop, None)
        if state is None:
            return
        prog = L.begin(op, rewriter)
        for v, acc in zip(op.operands, state.accs):
            y = L.lookup(prog, v, op)
            if y.value is not acc.value:
                copy(L, prog, y, acc, op)
        if prog.loaded_weight is not state.weight_before:
            prog.loaded_weight = None  # zero iterations keep the old weight, others the body's
        end = scf.YieldOp()
        end.location = loop.location
        rewriter.insert(end, InsertPoint.before(op))
        rewriter.erase(op)


def debug_operand(L: LoweringState, prog: ProgramState, v: SSAValue, op: Operation) -> SSAValue:
    """A device_print / device_assert operand at the core level: an index value, or the
    buffer of a tensor (a contiguous copy of a strided view: `dbg.print` reads an address and
    an element count)."""
    if isinstance(v.type, IndexType):
        return L.scalar(prog, v, op)
    L.note_access(v, "read")
    return T.contiguous(L, prog, L.lookup(prog, v, op), op).value


class LowerDevicePrint(LoweringPattern):
    """`legato.device_print` is `core.print` of the values' buffers and index values."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.DevicePrintOp, rewriter: PatternRewriter) -> None:
        L = self.state
        prog = L.begin(op, rewriter)
        values = [debug_operand(L, prog, v, op) for v in op.values]
        prog.emit(core.PrintOp(op.message, values), op)
        rewriter.erase(op)


class LowerDeviceAssert(LoweringPattern):
    """`legato.device_assert` is `core.assert` of the condition's buffer (or index value)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.DeviceAssertOp, rewriter: PatternRewriter) -> None:
        L = self.state
        prog = L.begin(op, rewriter)
        prog.emit(core.AssertOp(debug_operand(L, prog, op.cond, op), op.message), op)
        rewriter.erase(op)


def runtime_patterns(state: LoweringState) -> list[RewritePattern]:
    """The runtime family's patterns (scalars, loops, dynamic slices, synchronization)."""
    return [
        LowerIndexArith(state),
        LowerCoreId(state),
        LowerDim(state),
        LowerDynamicSlice(state),
        LowerBarrier(state),
        LowerSignal(state),
        LowerWait(state),
        LowerDevicePrint(state),
        LowerDeviceAssert(state),
        LowerFor(state),
        LowerLoopYield(state),
    ]
