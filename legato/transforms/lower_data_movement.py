"""Rewrite patterns lowering the data-movement ops (part of `convert-legato-to-core`;
conventions of `lowering_state`): transfers, copies and loads.

- `legato.request_load` allocates the paired receive buffer on the target core (`core.alloc on
  core(i)`, or `on core(%c)` for a runtime core of the SPMD program, named by the transfer's
  `buffer`) and DMAs the source into it, notifying the target's queue (space, q).
- `legato.receive` / `receive_type` waits on this core's queue and binds the result to the
  receive buffer of the same name; a weight received as `mpu_weight` that fits the MPU tile is
  loaded into the MPU on arrival.
- `legato.memcpy` is one DMA (into core memory not waited for: the scoreboard makes the later
  unit ops and `ld` on the copied range wait for it).
- `legato.load` allocates the result in the core's memory and copies with a DMA, not waited for
  either, so a load issued ahead of its use is a prefetch.
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from legato.dialects import core
from legato.dialects import legato as lg
from legato.transforms import lower_tensor_ops as T
from legato.transforms.diagnostics import error_at
from legato.transforms.lowering_state import Buffer, LoweringPattern, LoweringState, ProgramState


def request_load(L: LoweringState, prog: ProgramState, op: lg.RequestLoadOp) -> None:
    src = L.lookup(prog, op.src, op)
    L.note_access(op.src, "read")
    name = L.transfer_of[op]
    t = L.transfer_type[name]
    if op.target_core is not None:  # a runtime core: its copy of the SPMD receive buffer
        target = L.scalar(prog, op.target_core, op)
        dst = L.alloc(prog, t, src.dims, op, on=target, name=name)
        prog.emit(
            core.DmaOp(src.value, dst.value, None, (target, op.memory.data, op.queue.data)), op
        )
        prog.issued_dma = True
        return
    core_i = op.target.core_index
    dst = L.alloc(prog, t, src.dims, op, on=core_i, name=name)
    prog.emit(core.DmaOp(src.value, dst.value, None, (core_i, op.memory.data, op.queue.data)), op)
    prog.issued_dma = True


def receive(
    L: LoweringState, prog: ProgramState, op: lg.ReceiveOp | lg.ReceiveTypeOp
) -> tuple[Buffer, bool]:
    """The receive buffer, and whether its weight tile is now in the MPU."""
    name = L.transfer_of[op]
    t = L.transfer_type[name]
    if isinstance(op, lg.ReceiveOp):
        dims = L.lookup(prog, op.like, op).dims
    elif op.src is not None:
        dims = L.lookup(prog, op.src, op).dims
    else:
        rt = op.result.type
        assert isinstance(rt, lg.TensorType)
        if not rt.is_static:
            raise error_at(
                op,
                "receive_type of a type with dynamic dims needs its source tensor "
                "(receive_type(type, queue, src, memory)) to know the runtime sizes",
            )
        dims = [d.size for d in rt.dims]
    prog.emit(core.WaitQueueOp(op.memory.data, op.queue.data), op)
    buf = L.alloc(prog, t, dims, op, name=name)
    result_t = op.result.type
    assert isinstance(result_t, lg.TensorType)
    if result_t.space == "mpu_weight" and fits_tile(L, buf):
        load_weight(L, prog, buf, op)
        return buf, True
    # else: matmul splits it into tiles (and stages them in mpu_buffer)
    return buf, False


def fits_tile(L: LoweringState, buf: Buffer) -> bool:
    t = buf.type
    return (
        t.rank == 2
        and t.is_static
        and t.space == "mpu_buffer"
        and lg.element_type_name(t.element_type) == "bf16"  # f32: matmul splits it first
        and t.get_shape()[0] <= L.model.mpu_tile_k
        and t.get_shape()[1] <= L.model.mpu_tile_n
    )


def load_weight(L: LoweringState, prog: ProgramState, buf: Buffer, at: Operation) -> None:
    t = buf.value.type
    assert isinstance(t, core.BufType)
    k, n = t.get_bounds() if t.rank == 2 else (None, None)
    if t.rank != 2 or k > L.model.mpu_tile_k or n > L.model.mpu_tile_n:
        raise error_at(
            at,
            f"a {t.dims_str()} weight does not fit the MPU weight tile "
            f"({L.model.mpu_tile_k}x{L.model.mpu_tile_n}) of {L.model.name}; "
            "receive it into 'mpu_buffer' or 'sram' and let matmul tile it",
        )
    if not t.is_static:
        raise error_at(at, "an MPU weight must have static dims")
    if t.space != "mpu_buffer":
        raise error_at(at, f"the MPU loads weights from mpu_buffer, not {t.space}")
    prog.emit(core.MpuLoadWeightOp(buf.value), at)


def memcpy(L: LoweringState, prog: ProgramState, op: lg.MemcpyOp) -> None:
    dst = L.lookup(prog, op.dst, op)
    src = L.lookup(prog, op.src, op)
    L.note_access(op.dst, "write")
    L.note_access(op.src, "read")
    prog.emit(core.DmaOp(src.value, dst.value), op)
    prog.issued_dma = True
    # A copy into core memory is not waited for: the scoreboard makes this program's later
    # unit ops (and `ld`) on the copied range wait for it.


def load(L: LoweringState, prog: ProgramState, op: lg.LoadOp) -> Buffer:
    if prog.ctx.is_top:
        raise error_at(op, "legato.load runs in a core context, not on top")
    src = L.lookup(prog, op.input, op)
    L.note_access(op.input, "read")
    rt = op.result.type
    assert isinstance(rt, lg.TensorType)
    out = T.alloc(L, prog, T.dimsb(src), rt.element_type, rt.space, op)
    T.copy_dma(L, prog, src, out, op)
    return out


# -- patterns ----------------------------------------------------------------------------------


class LowerRequestLoad(LoweringPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.RequestLoadOp, rewriter: PatternRewriter) -> None:
        request_load(self.state, self.state.begin(op, rewriter), op)
        rewriter.erase(op)


class LowerReceive(LoweringPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: lg.ReceiveOp | lg.ReceiveTypeOp, rewriter: PatternRewriter
    ) -> None:
        prog = self.state.begin(op, rewriter)
        buf, loaded = receive(self.state, prog, op)
        value = self.state.bind(prog, op, buf, rewriter)
        if loaded:
            prog.loaded_weight = value


class LowerMemcpy(LoweringPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.MemcpyOp, rewriter: PatternRewriter) -> None:
        memcpy(self.state, self.state.begin(op, rewriter), op)
        rewriter.erase(op)


class LowerLoad(T.TensorOpPattern):
    lower = staticmethod(load)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.LoadOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


def data_movement_patterns(state: LoweringState) -> list[RewritePattern]:
    """The data-movement family's patterns over `state`."""
    return [
        LowerRequestLoad(state),
        LowerReceive(state),
        LowerMemcpy(state),
        LowerLoad(state),
    ]
