"""The state `convert-legato-to-core` lowers a kernel over, shared by its op families
(`lower_data_movement`, `lower_tensor_ops`, `lower_runtime`): the programs being built, the buffer
standing for each legato value in each, and the kernel-wide facts (argument access, transfer
pairing). Each family is a set of functions `(L: LoweringState, prog: ProgramState, op)` that emit
core ops into `prog` and bind the op's results."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, OpResult, SSAValue

from legato.dialects import core
from legato.dialects import legato as lg
from legato.model.compute_model import ComputeModel
from legato.transforms.diagnostics import error_at


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
class ProgramState:
    """One program being built: its ops (`prologue`: argument reads, then `body`) and the
    buffers and index values standing for legato values in it."""

    ctx: lg.ContextAttr
    op: core.ProgramOp
    prologue: list[Operation] = field(default_factory=list)
    body: list[Operation] = field(default_factory=list)
    args: dict[int, Buffer] = field(default_factory=dict)
    values: dict[SSAValue, Buffer] = field(default_factory=dict)
    scalars: dict[SSAValue, SSAValue] = field(default_factory=dict)  # legato index -> core
    issued_dma: bool = False
    loaded_weight: SSAValue | None = None  # the legato value whose tile is in the MPU

    def emit(self, op: Operation, at: Operation | None = None) -> Operation:
        if at is not None:
            op.location = at.location
        self.body.append(op)
        return op


def program_name(ctx: lg.ContextAttr) -> str:
    if ctx.is_top:
        return "top"
    if ctx.is_core:
        return f"core{ctx.core_index}"
    return "cores"


class LoweringState:
    """A kernel being lowered: its programs by context and the facts every op family reads.
    `lower_op` lowers one op into a program (the driver's dispatch; a loop lowers its body with
    it)."""

    def __init__(self, kernel: lg.KernelOp, model: ComputeModel):
        self.kernel = kernel
        self.model = model
        self.programs: dict[lg.ContextAttr, ProgramState] = {}
        self.access: dict[int, set[str]] = defaultdict(set)
        self.arg_index = {a: i for i, a in enumerate(kernel.args)}
        self.transfer_of: dict[Operation, str] = {}  # request_load / receive -> buffer name
        self.transfer_type: dict[str, core.BufType] = {}

    def lower_op(self, prog: ProgramState, op: Operation) -> None:
        raise NotImplementedError

    # -- programs ------------------------------------------------------------------------------

    def program(self, ctx: lg.ContextAttr) -> ProgramState:
        if ctx not in self.programs:
            op = core.ProgramOp(program_name(ctx), ctx)
            self.programs[ctx] = ProgramState(ctx, op)
        return self.programs[ctx]

    def arg(self, prog: ProgramState, i: int) -> Buffer:
        if i not in prog.args:
            t = self.kernel.function_type.inputs.data[i]
            arg = core.ArgOp(i, core.BufType.from_tensor(t))
            prog.prologue.append(arg)
            dims: list = []
            for d, dim in enumerate(t.dims):
                if dim.is_dynamic:
                    dop = core.DimOp(arg, d)
                    prog.prologue.append(dop)
                    dims.append(dop.result)
                else:
                    dims.append(dim.size)
            prog.args[i] = Buffer(arg.result, dims)
        return prog.args[i]

    def lookup(self, prog: ProgramState, value: SSAValue, user: Operation) -> Buffer:
        if value in self.arg_index:
            return self.arg(prog, self.arg_index[value])
        if value in prog.values:
            return prog.values[value]
        raise error_at(user, "internal: operand has no buffer (a value used out of its region?)")

    def alloc(
        self,
        prog: ProgramState,
        t: core.BufType,
        dims: list,
        at: Operation,
        on: int | None = None,
        name: str | None = None,
    ) -> Buffer:
        dyn = [d for d in dims if isinstance(d, SSAValue)]
        op = core.AllocOp(t, dyn, core=on)
        if name is not None:
            op.attributes[core.BUFFER_ATTR] = StringAttr(name)
        prog.emit(op, at)
        return Buffer(op.result, list(dims))

    def note_access(self, value: SSAValue, kind: str) -> None:
        # A slice or reshape of an argument is a view of it: writing the view writes the
        # argument (the runtime copies back only arguments written).
        while isinstance(value, OpResult) and isinstance(
            value.op, lg.SliceOp | lg.DynamicSliceOp | lg.ReshapeOp
        ):
            value = value.op.operands[0]
        if value in self.arg_index:
            self.access[self.arg_index[value]].add(kind)
