"""`convert-core-to-backend`: instruction selection from planned core programs to Bertha ISA ops.

Each `core.program` becomes a `backend.program`; buffers become address registers (`ld` from the
Instruction Table for arguments, `lsa` for planned core buffers), their runtime dims become
registers (`ld` of the table's dim words, or `li` of static sizes), and unit ops become their
instructions. Registers are left unallocated (`backend-allocate-registers` assigns them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from legato.dialects import backend as be
from legato.dialects import core
from legato.model.ir import model_of
from legato.targets.bertha.abi import Arg, ArgLayout
from legato.transforms.diagnostics import error_at
from legato.transforms.plan_memory import PLACEMENT_ATTR, alloc_core

ARG_NAMES_ATTR = "arg_names"


def arg_layout(kernel: core.KernelOp | be.KernelOp) -> ArgLayout:
    """The Instruction Table layout of a core (or backend) kernel's signature."""
    names_attr = kernel.attributes.get(ARG_NAMES_ATTR)
    names = (
        [n.data for n in names_attr.data] if isinstance(names_attr, ArrayAttr) else None
    )
    args = []
    assert kernel.args is not None
    for a in kernel.args.data:
        assert isinstance(a, core.ArgAttr)
        t = a.type
        if not isinstance(t, core.BufType):
            raise error_at(kernel, f"argument {a.index.data}: scalar arguments are not supported yet")
        name = names[a.index.data] if names else f"arg{a.index.data}"
        args.append(Arg(name, t.to_spec(), a.access.data))
    return ArgLayout(args)


def _placed_space(alloc: core.AllocOp) -> str:
    p = alloc.attributes.get(PLACEMENT_ATTR)
    return p.data if isinstance(p, StringAttr) else alloc.memory.data


def footprints(kernel: core.KernelOp) -> dict[int | None, dict[str, int]]:
    """Bytes used per (core or None for SPMD) and space, from the planned allocs."""
    use: dict[int | None, dict[str, int]] = {}
    for program in kernel.body.block.ops:
        if not isinstance(program, core.ProgramOp):
            continue
        for alloc in program.walk():
            if isinstance(alloc, core.AllocOp):
                if alloc.offset is None:
                    raise error_at(alloc, "core.alloc has no offset: run core-plan-memory first")
                t = alloc.result.type
                assert isinstance(t, core.BufType)
                c = alloc_core(alloc, program)
                space = _placed_space(alloc)
                end = alloc.offset.value.data + t.max_bytes
                d = use.setdefault(c, {})
                d[space] = max(d.get(space, 0), end)
    return use


@dataclass
class _Selector:
    program: core.ProgramOp
    layout: ArgLayout
    ops: list[Operation] = field(default_factory=list)
    regs: dict[SSAValue, SSAValue] = field(default_factory=dict)  # core value -> register
    dims: dict[SSAValue, list] = field(default_factory=dict)  # buffer -> [reg or int]
    consts: dict[int, SSAValue] = field(default_factory=dict)
    arg_of: dict[SSAValue, int] = field(default_factory=dict)
    table: SSAValue | None = None

    def emit(self, op: Operation, at: Operation | None = None) -> Operation:
        if at is not None:
            op.location = at.location
        self.ops.append(op)
        return op

    def const(self, value: int) -> SSAValue:
        if value not in self.consts:
            if not -(2**31) <= value < 2**32:
                raise ValueError(f"constant {value} does not fit an immediate")
            self.consts[value] = self.emit(be.LiOp(value)).results[0]
        return self.consts[value]

    def entry_table(self) -> SSAValue:
        if self.table is None:
            self.table = self.emit(be.EntryRegOp("r1")).results[0]
        return self.table

    def scalar(self, v: int | SSAValue) -> SSAValue:
        """A register holding `v` (an int, or already a register)."""
        return self.const(v) if isinstance(v, int) else v

    def nbytes(self, buf: SSAValue, at: Operation) -> SSAValue:
        """A register holding the runtime byte size of `buf`."""
        t = buf.type
        assert isinstance(t, core.BufType)
        static = t.dtype.itemsize * math.prod(d for d in self.dims[buf] if isinstance(d, int))
        dyn = [d for d in self.dims[buf] if not isinstance(d, int)]
        if not dyn:
            return self.const(static)
        acc = dyn[0]
        for d in dyn[1:]:
            acc = self.emit(be.MulOp(acc, d), at).results[0]
        if static != 1:
            acc = self.emit(be.MuliOp(acc, static), at).results[0]
        return acc

    # -- ops -----------------------------------------------------------------------------------

    def select(self, op: Operation) -> None:
        if isinstance(op, core.ArgOp):
            i = op.index.data
            addr = self.emit(be.LdOp(self.entry_table(), self.layout.address_offset(i)), op)
            self.regs[op.result] = addr.results[0]
            self.arg_of[op.result] = i
            t = op.result.type
            assert isinstance(t, core.BufType)
            dims: list = []
            for d, dim in enumerate(t.dims):
                if dim.is_dynamic:
                    r = self.emit(be.LdOp(self.entry_table(), self.layout.dim_offset(i, d)), op)
                    dims.append(r.results[0])
                else:
                    dims.append(dim.size)
            self.dims[op.result] = dims
        elif isinstance(op, core.DimOp):
            d = self.dims[op.buf][op.dim.data]
            self.regs[op.result] = self.scalar(d)
        elif isinstance(op, core.AllocOp):
            if op.offset is None:
                raise error_at(op, "core.alloc has no offset: run core-plan-memory first")
            on = None
            if op.core is not None and not (
                self.program.ctx.is_core and self.program.ctx.core_index == op.core.core_index
            ):
                on = op.core.core_index
            lsa = self.emit(be.LsaOp(_placed_space(op), op.offset.value.data, on), op)
            self.regs[op.result] = lsa.results[0]
            t = op.result.type
            assert isinstance(t, core.BufType)
            dyn = iter(op.dyn_dims)
            self.dims[op.result] = [
                self.regs[next(dyn)] if dim.is_dynamic else dim.size for dim in t.dims
            ]
        elif isinstance(op, core.DmaOp):
            length = self.regs[op.nbytes] if op.nbytes is not None else self.nbytes(op.src, op)
            notify = None
            if op.notify_core is not None:
                assert op.notify_space is not None and op.notify_queue is not None
                notify = (
                    op.notify_core.core_index,
                    op.notify_space.data,
                    op.notify_queue.data,
                )
            self.emit(be.DmaOp(self.regs[op.dst], self.regs[op.src], length, notify), op)
        elif isinstance(op, core.WaitQueueOp):
            self.emit(be.QwaitOp(op.memory.data, op.queue.data), op)
        elif isinstance(op, core.DmaWaitOp):
            self.emit(be.DmaWaitOp(), op)
        elif isinstance(op, core.MpuLoadWeightOp):
            t = op.weight.type
            assert isinstance(t, core.BufType)
            k, n = self.dims[op.weight]
            self.emit(be.MpuLdwOp(self.regs[op.weight], self.scalar(k), self.scalar(n)), op)
        elif isinstance(op, core.MpuMatmulOp):
            out_t = op.out.type
            assert isinstance(out_t, core.BufType)
            m = self.scalar(self.dims[op.input][0])
            self.emit(
                be.MpuMmOp(
                    self.regs[op.out], self.regs[op.input], m, out_t.dtype.name, op.is_accumulate
                ),
                op,
            )
        elif isinstance(op, core.EndOp):
            self.emit(be.HaltOp(), op)
        elif isinstance(op, arith.ConstantOp):
            v = op.value
            assert isinstance(v, IntegerAttr)
            self.regs[op.result] = self.const(v.value.data)
        elif isinstance(op, arith.MuliOp | arith.AddiOp | arith.SubiOp):
            cls = {arith.MuliOp: be.MulOp, arith.AddiOp: be.AddOp, arith.SubiOp: be.SubOp}[type(op)]
            r = self.emit(cls(self.regs[op.lhs], self.regs[op.rhs]), op)
            self.regs[op.result] = r.results[0]
        else:
            raise error_at(op, f"{op.name} has no instruction selection for Bertha yet")


@dataclass(frozen=True)
class ConvertCoreToBackendPass(ModulePass):
    name = "convert-core-to-backend"

    target: str = "bertha"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        model_of(op, self.target)  # validates the target
        for kernel in list(op.body.block.ops):
            if not isinstance(kernel, core.KernelOp):
                continue
            layout = arg_layout(kernel)
            use = footprints(kernel)
            programs = []
            for program in kernel.body.block.ops:
                if not isinstance(program, core.ProgramOp):
                    continue
                sel = _Selector(program, layout)
                for inner in program.body.block.ops:
                    sel.select(inner)
                mem = None
                if program.ctx.is_core:
                    mem = dict(use.get(program.ctx.core_index, {}))
                    for space, n in use.get(None, {}).items():
                        mem[space] = max(mem.get(space, 0), n)
                elif program.ctx.is_all_cores:
                    mem = {}
                    for d in use.values():
                        for space, n in d.items():
                            mem[space] = max(mem.get(space, 0), n)
                new = be.ProgramOp(program.sym_name.data, program.ctx, sel.ops, mem or None)
                new.location = program.location
                programs.append(new)
            bk = be.KernelOp(kernel.sym_name.data, programs, kernel.args)
            if ARG_NAMES_ATTR in kernel.attributes:
                bk.attributes[ARG_NAMES_ATTR] = kernel.attributes[ARG_NAMES_ATTR]
            bk.location = kernel.location
            op.body.block.insert_op_before(bk, kernel)
            op.body.block.detach_op(kernel)
            kernel.erase(safe_erase=False)
