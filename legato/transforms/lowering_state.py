"""The state `convert-legato-to-core` lowers a kernel over, shared by the rewrite patterns of its
op families (`lower_data_movement`, `lower_tensor_ops`, `lower_matmul`, `lower_runtime`): the
programs being built, the buffer standing for each legato tensor value, and the kernel-wide facts
(argument access, transfer pairing, semaphore numbering).

The conversion is a partial conversion in place, in the style of xDSL's `convert-*` passes: each
`legato.on` region is walked once, in program order, by a `PatternRewriteWalker`; a pattern
inserts the core ops of one legato op before it (`ProgramState.emit`) and replaces it. A tensor
result becomes a `builtin.unrealized_conversion_cast` from the core buffer to the legato type
(`LoweringState.bind`), so later patterns still see legato types on their operands; the
`Buffer` behind each such value (its runtime dims, whether it is contiguous) is kept here. Index
results are replaced by their core values. The driver erases the casts once nothing uses them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.dialects.builtin import StringAttr, UnrealizedConversionCastOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint, Rewriter

from legato.dialects import core
from legato.dialects import legato as lg
from legato.dialects.fast_build import build_flat
from legato.model.compute_model import ComputeModel
from legato.transforms.diagnostics import error_at, inherit_location

MAX_SEMAPHORES = core.MAX_SYNC_ID + 1


@dataclass
class Buffer:
    """A core-level buffer standing for a legato tensor value in one program."""

    value: SSAValue  # a !core.buf value
    dims: list  # per dim: an index SSA value (dynamic) or an int (static)
    contiguous: bool = True  # False for a strided view (a slice): copy before computing

    @property
    def type(self) -> core.BufType:
        t = self.value.type
        assert isinstance(t, core.BufType)
        return t

    @property
    def bounds(self) -> list[int]:
        return list(self.type.get_bounds())


@dataclass
class LoopState:
    """An `scf.for` being lowered: the accumulator buffer of each carried tensor and the MPU
    weight loaded before the loop (the loop's yield, lowered last, copies and settles them)."""

    accs: list[Buffer]
    weight_before: SSAValue | None


@dataclass
class ProgramState:
    """One program being built: its `core.program` op, where its next op goes (`at`), and the
    buffers and index values standing for legato values in it."""

    ctx: lg.ContextAttr
    op: core.ProgramOp
    rewriter: PatternRewriter | None = None  # the rewriter of the pattern lowering an op
    at: InsertPoint | None = None
    prologue_end: Operation | None = None  # the last argument read (`core.arg`, `core.dim`)
    args: dict[int, Buffer] = field(default_factory=dict)
    values: dict[SSAValue, Buffer] = field(default_factory=dict)
    scalars: set[SSAValue] = field(default_factory=set)  # core index values of this program
    issued_dma: bool = False
    loaded_weight: SSAValue | None = None  # the legato value whose tile is in the MPU
    source: Operation | None = None  # the op being lowered: what emitted ops are located at

    @property
    def block(self) -> Block:
        return self.op.body.block

    def emit(self, op: Operation, at: Operation | None = None) -> Operation:
        """Insert `op` where the program's next op goes (before the op being lowered, or at the
        end of the block being built), located at `at`, by default at the op being lowered
        (`source`; `diagnostics.inherit_location`)."""
        if at is not None:
            op.location = at.location
        inherit_location(op, self.source)
        assert self.rewriter is not None and self.at is not None, "emit outside a pattern"
        # Inserted without the pattern rewriter: the walker does not revisit what patterns
        # insert (`apply_recursively=False`) and no pattern matches a core op, so its insertion
        # bookkeeping was pure cost (most of what the conversion lost as RewritePatterns). The
        # pattern still reports its change: it replaces or erases the op it lowers.
        Rewriter.insert_op(op, self.at)
        return op

    @contextmanager
    def building(self, block: Block) -> Iterator[Block]:
        """Emit into the end of `block` (a loop body being built) until the `with` ends."""
        saved, self.at = self.at, InsertPoint.at_end(block)
        try:
            yield block
        finally:
            self.at = saved


def program_name(ctx: lg.ContextAttr) -> str:
    if ctx.is_top:
        return "top"
    if ctx.is_core:
        return f"core{ctx.core_index}"
    return "cores"


class LoweringState:
    """A kernel being lowered: its programs by context and the facts every op family reads."""

    def __init__(self, kernel: lg.KernelOp, model: ComputeModel):
        self.kernel = kernel
        self.model = model
        self.programs: dict[lg.ContextAttr, ProgramState] = {}
        self.access: dict[int, set[str]] = defaultdict(set)
        self.arg_index = {a: i for i, a in enumerate(kernel.args)}
        self.transfer_of: dict[Operation, str] = {}  # request_load / receive -> buffer name
        self.transfer_type: dict[str, core.BufType] = {}
        self.sem_ids: dict[tuple[str, int], int] = {}  # (context, sem) -> chip semaphore
        self.view_of: dict[SSAValue, SSAValue] = {}  # a slice/reshape result -> its source
        self.loops: dict[Operation, LoopState] = {}  # the core scf.for -> its loop state

    # -- programs ------------------------------------------------------------------------------

    def program(self, ctx: lg.ContextAttr) -> ProgramState:
        if ctx not in self.programs:
            op = core.ProgramOp(program_name(ctx), ctx)
            self.programs[ctx] = ProgramState(ctx, op)
        return self.programs[ctx]

    def begin(self, op: Operation, rewriter: PatternRewriter) -> ProgramState:
        """The program `op` (inside a `legato.on` region) lowers into, set to emit before it."""
        on = op.parent_op()
        while not isinstance(on, lg.OnOp):
            assert on is not None, f"{op.name} outside a legato.on region"
            on = on.parent_op()
        prog = self.program(on.ctx)
        prog.rewriter = rewriter
        prog.at = InsertPoint.before(op)
        prog.source = op
        return prog

    def arg(self, prog: ProgramState, i: int) -> Buffer:
        if i not in prog.args:
            t = self.kernel.function_type.inputs.data[i]
            arg = core.ArgOp(i, core.BufType.from_tensor(t))
            reads: list[Operation] = [arg]
            dims: list = []
            for d, dim in enumerate(t.dims):
                if dim.is_dynamic:
                    dop = core.DimOp(arg, d)
                    reads.append(dop)
                    dims.append(dop.result)
                else:
                    dims.append(dim.size)
            # Argument reads open the program, in the order of their first use.
            at = (
                InsertPoint.after(prog.prologue_end)
                if prog.prologue_end is not None
                else InsertPoint.at_start(prog.block)
            )
            for read in reads:  # located at the op that first reads the argument
                inherit_location(read, prog.source)
            Rewriter.insert_op(reads, at)
            prog.prologue_end = reads[-1]
            prog.args[i] = Buffer(arg.result, dims)
        return prog.args[i]

    def lookup(self, prog: ProgramState, value: SSAValue, user: Operation) -> Buffer:
        if value in self.arg_index:
            return self.arg(prog, self.arg_index[value])
        if value in prog.values:
            return prog.values[value]
        raise error_at(user, "internal: operand has no buffer (a value used out of its region?)")

    def scalar(self, prog: ProgramState, value: SSAValue, at: Operation) -> SSAValue:
        """`value`, checked to be an index value of this program."""
        if value not in prog.scalars:
            raise error_at(at, "an index operand is not defined in this program")
        return value

    def alloc(
        self,
        prog: ProgramState,
        t: core.BufType,
        dims: list,
        at: Operation,
        on: int | SSAValue | None = None,
        name: str | None = None,
    ) -> Buffer:
        dyn = [d for d in dims if isinstance(d, SSAValue)]
        op = core.AllocOp(t, dyn, core=on)
        if name is not None:
            op.attributes[core.BUFFER_ATTR] = StringAttr(name)
        prog.emit(op, at)
        return Buffer(op.result, list(dims))

    def cast(self, prog: ProgramState, buf: Buffer, like: SSAValue) -> SSAValue:
        """A value of `like`'s (legato) type standing for `buf` (an unrealized cast, erased once
        the kernel is lowered)."""
        # `build_flat` (what `create` makes, without `Operation.__init__`'s generic setters),
        # not `get`: the IRDL builder's generic argument checks were a tenth of this
        # conversion's time (one cast per tensor result), and these two lists are its whole
        # signature.
        cast = build_flat(UnrealizedConversionCastOp, [buf.value], [like.type])
        prog.emit(cast)
        result = cast.results[0]
        prog.values[result] = buf
        return result

    # -- replacing the lowered op --------------------------------------------------------------

    def bind(
        self,
        prog: ProgramState,
        op: Operation,
        buf: Buffer,
        rewriter: PatternRewriter,
        view_of: SSAValue | None = None,
    ) -> SSAValue:
        """Replace `op` (one tensor result) by `buf`; returns the value its users now read.
        `view_of`: the tensor `op`'s result is a view of (writing it writes that tensor)."""
        value = self.cast(prog, buf, op.results[0])
        if view_of is not None:
            self.view_of[value] = view_of
        self.replace(op, [value], rewriter)
        return value

    def bind_scalar(
        self, prog: ProgramState, op: Operation, value: SSAValue, rewriter: PatternRewriter
    ) -> None:
        """Replace `op` (one index result) by the core index value `value`."""
        prog.scalars.add(value)
        self.replace(op, [value], rewriter)

    @staticmethod
    def replace(op: Operation, values: list[SSAValue], rewriter: PatternRewriter) -> None:
        # Not `rewriter.replace`: it would copy the legato values' names onto the core ops.
        for old, new in zip(op.results, values, strict=True):
            rewriter.replace_all_uses_with(old, new)
        rewriter.erase(op)

    # -- kernel-wide facts ---------------------------------------------------------------------

    def note_access(self, value: SSAValue, kind: str) -> None:
        # A slice or reshape of an argument is a view of it: writing the view writes the
        # argument (the runtime copies back only arguments written).
        while value in self.view_of:
            value = self.view_of[value]
        if value in self.arg_index:
            self.access[self.arg_index[value]].add(kind)

    def sem_id(self, ctx: str, sem: int, op: Operation) -> int:
        """The chip semaphore of (context, sem): numbered in order of first appearance."""
        key = (ctx, sem)
        if key not in self.sem_ids:
            if len(self.sem_ids) >= MAX_SEMAPHORES:
                raise error_at(
                    op,
                    f"this kernel uses more than {MAX_SEMAPHORES} (context, semaphore) pairs; "
                    f"{self.model.name} has {MAX_SEMAPHORES} hardware semaphores",
                )
            self.sem_ids[key] = len(self.sem_ids)
        return self.sem_ids[key]


class LoweringPattern(RewritePattern):
    """A rewrite pattern of `convert-legato-to-core`: lowers one legato op into the program of
    its region, over the kernel's `LoweringState`."""

    def __init__(self, state: LoweringState):
        self.state = state
