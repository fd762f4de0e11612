"""`convert-core-to-backend`: instruction selection from planned core programs to Bertha ISA ops.

Each `core.program` becomes a `backend.program`; buffers become address registers (`ld` from the
Instruction Table for arguments, `lsa` for planned core buffers), their runtime dims become
registers (`ld` of the table's dim words, or `li` of static sizes), and unit ops become their
instructions. Registers are left unallocated (`backend-allocate-registers` assigns them).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import region_dce, would_be_trivially_dead

from legato import opset
from legato.dialects import backend as be
from legato.dialects import core
from legato.model.ir import model_of
from legato.targets.bertha import isa
from legato.targets.bertha.abi import ARG_NAMES_ATTR, ArgLayout, program_footprint
from legato.targets.bertha.arch.address_map import CORE_SPACE_OFFSET
from legato.targets.bertha.arch.bounds import ADDRESS_FIELDS, FIELDS, Extent
from legato.targets.bertha.arch.pim import PimLayout
from legato.transforms.diagnostics import error_at, inherit_location
from legato.transforms.kernel_abi import arg_layout, footprints
from legato.transforms.plan_memory import placed_space as _placed_space
from legato.transforms.vpu_shapes import broadcast_form

STRIDED_DYNAMIC = (
    "a strided copy (a slice, cat or tile) whose strides depend on a dynamic dim is not "
    "supported; only the outermost dim of a strided buffer may be dynamic"
)
"""The refusal of a strided copy with a runtime stride (legato.torch.capabilities.part_copy
answers resolvers with it before they accept such a copy)."""

_NP_DTYPES = {"bf16": ml_dtypes.bfloat16, "f32": np.float32, "f16": np.float16, "i32": np.int32}

VPU_BINARY = {o.kind: be.VPU_ELEMENTWISE_OPS[o.kind] for o in opset.family(opset.BINARY)}
"""`core.vpu_binary` kind -> its instruction's class (the op table's binary rows)."""
VPU_UNARY = {o.kind: be.VPU_ELEMENTWISE_OPS[o.kind] for o in opset.family(opset.UNARY)}
"""`core.vpu_unary` kind -> its instruction's class (`cast` is `vpu.cvt`, selected apart)."""
ARITH = {
    arith.MuliOp: be.MulOp,
    arith.AddiOp: be.AddOp,
    arith.SubiOp: be.SubOp,
    arith.DivUIOp: be.DivOp,
    arith.DivSIOp: be.DivOp,
    arith.RemUIOp: be.RemOp,
    arith.RemSIOp: be.RemOp,
    arith.MinSIOp: be.MinOp,
    arith.MaxSIOp: be.MaxOp,
}
SYNC = {core.BarrierOp: be.BarrierOp, core.SemPostOp: be.SemPostOp, core.SemWaitOp: be.SemWaitOp}
MAX_LOOP_DEPTH = 8
"""Nested runtime loops: the index of a loop at depth d is pinned to register r(31 - d)."""


def element_bits(value: float, dtype: str) -> int:
    """The bit pattern of `value` rounded (via f32, like the VPU) to `dtype`."""
    if dtype == "i32":
        return int(np.asarray(int(value), np.int64).astype(np.int32).view(np.uint32))
    x = np.asarray(value, np.float64).astype(np.float32).astype(_NP_DTYPES[dtype])
    return int(x.view({2: np.uint16, 4: np.uint32}[x.dtype.itemsize]))


def _buf_type(v: SSAValue) -> core.BufType:
    t = v.type
    assert isinstance(t, core.BufType)
    return t


def _vpu_dtype(op: Operation, t: core.BufType) -> str:
    if t.dtype.name not in _NP_DTYPES:
        raise error_at(
            op, f"{op.name}: the VPU computes on bf16, f32, f16 and i32, not {t.dtype.name}"
        )
    return t.dtype.name


def _one_strides(strides: list, one: list[bool]) -> list:
    """`strides` with each runtime stride of a size-1 dim (`one`) replaced by the stride of the
    dim inside it when that is an int (a size-1 dim is never stepped over, so any value copies
    the same bytes; static strides are kept, so static copies are planned as before)."""
    out = list(strides)
    for i in range(len(out) - 1, -1, -1):
        if one[i] and not isinstance(out[i], int) and i + 1 < len(out):
            out[i] = out[i + 1] if isinstance(out[i + 1], int) else out[i]
    return out


@dataclass
class _Selector:
    program: core.ProgramOp
    layout: ArgLayout
    ops: list[Operation] = field(default_factory=list)
    regs: dict[SSAValue, SSAValue] = field(default_factory=dict)  # core value -> register
    dims: dict[SSAValue, list] = field(default_factory=dict)  # buffer -> [reg or int]
    strides: dict[SSAValue, list] = field(default_factory=dict)  # strided views: [reg or int]
    consts: dict[int, SSAValue] = field(default_factory=dict)
    arg_of: dict[SSAValue, int] = field(default_factory=dict)
    # buffer -> the argument or planned buffer its address derives from (`arch.bounds`)
    root: dict[SSAValue, Extent] = field(default_factory=dict)
    # buffer -> its byte offset from the start of its core-buffer `root` (when static)
    base: dict[SSAValue, int] = field(default_factory=dict)
    # buffers whose address or extent depends on a runtime value: their accesses are checked
    runtime: set[SSAValue] = field(default_factory=set)
    table: SSAValue | None = None
    # the kernel's debug sites and entries so far (shared by its programs): [sites, entries]
    debug_count: list = field(default_factory=lambda: [0, 0])
    loop_depth: int = 0
    loops: int = 0  # loops emitted so far (label names)
    model: Any = None  # the target's ComputeModel (the PIM layout depends on its channels)
    source: Operation | None = None  # the core op being selected: where emitted ops are located

    def emit(self, op: Operation, at: Operation | None = None) -> Operation:
        """Append `op`, located at `at`, by default at the core op being selected (`source`;
        `diagnostics.inherit_location`)."""
        if at is not None:
            op.location = at.location
        inherit_location(op, self.source)
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

    # -- integer helpers (ints fold, registers emit) -------------------------------------------

    def mul(self, a: int | SSAValue, b: int | SSAValue, at: Operation) -> int | SSAValue:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if isinstance(a, int):
            a, b = b, a
        if isinstance(b, int):
            if b == 1:
                return a
            return self.emit(be.MuliOp(a, b), at).results[0]
        return self.emit(be.MulOp(a, b), at).results[0]

    def add(self, a: int | SSAValue, b: int | SSAValue, at: Operation) -> int | SSAValue:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if isinstance(a, int):
            a, b = b, a
        if isinstance(b, int):
            if b == 0:
                return a
            if -(2**31) <= b < 2**31:
                return self.emit(be.AddiOp(a, b), at).results[0]
            b = self.const(b)
        return self.emit(be.AddOp(a, b), at).results[0]

    def pack2(self, high: int, low: int, at: Operation) -> SSAValue:
        """A register holding `high << 32 | low` (a dma2d shape or stride pair): `li`, `shli`,
        `addi` (each half below 2^31)."""
        if not (0 <= high < 2**31 and 0 <= low < 2**31):
            raise error_at(at, f"dma2d fields {high}, {low} do not fit 31 bits")
        if high == 0:
            return self.const(low)
        hi = self.emit(be.ShliOp(self.const(high), 32), at).results[0]
        return self.scalar(self.add(hi, low, at))

    def product(self, values: list, at: Operation) -> int | SSAValue:
        acc: int | SSAValue = 1
        static = 1
        for v in values:
            if isinstance(v, int):
                static *= v
            else:
                acc = v if isinstance(acc, int) else self.mul(acc, v, at)
        return self.mul(acc, static, at) if not isinstance(acc, int) else static

    def count(self, buf: SSAValue, at: Operation) -> SSAValue:
        """A register holding the runtime element count of `buf`."""
        return self.scalar(self.product(self.dims[buf], at))

    def nbytes(self, buf: SSAValue, at: Operation) -> SSAValue:
        """A register holding the runtime byte size of `buf`."""
        t = _buf_type(buf)
        return self.scalar(self.product([*self.dims[buf], t.dtype.itemsize], at))

    def strides_of(self, buf: SSAValue, at: Operation) -> list:
        if buf in self.strides:
            return self.strides[buf]
        dims = self.dims[buf]
        out: list = [1] * len(dims)
        acc: int | SSAValue = 1
        for i in range(len(dims) - 1, -1, -1):
            out[i] = acc
            acc = self.mul(acc, dims[i], at)
        return out

    def contiguous(self, buf: SSAValue) -> bool:
        return buf not in self.strides

    def need_contiguous(self, op: Operation, *bufs: SSAValue) -> None:
        for b in bufs:
            if not self.contiguous(b):
                raise error_at(
                    op,
                    f"{op.name}: an operand is a strided view; the units read contiguous "
                    "memory (copy it into a buffer first)",
                )

    # -- ops -----------------------------------------------------------------------------------

    def select(self, op: Operation) -> None:
        """Emit the instructions of core op `op` (the handler `ISEL` names for its type)."""
        self.consts = {}  # short live ranges: constants are rematerialized per core op
        handler = ISEL.get(type(op))
        if handler is None:
            raise error_at(op, f"{op.name} has no instruction selection for Bertha yet")
        start = len(self.ops)
        self.source = op
        handler(self, op)
        if self.runtime:
            self._bound(op, start)

    def _bound(self, op: Operation, start: int) -> None:
        """Record on each instruction `op` emitted from `start` the extent of every address
        operand derived from a runtime-addressed buffer of `op` (`be.BOUNDS_ATTR`): the runtime
        checks those accesses; static ones the verifiers proved in bounds."""
        bufs = [v for v in op._operands if v in self.runtime and v in self.root]  # noqa: SLF001
        if not bufs:
            return
        by_reg = {self.regs[v]: v for v in reversed(bufs)}
        for e in self.ops[start:]:
            info = isa.BY_MNEMONIC.get(getattr(e, "MNEMONIC", ""))
            fields = ADDRESS_FIELDS.get(info.format, {}) if info else {}
            if not fields:
                continue
            operands = (
                {"b": e.operands[0]} if isinstance(e, be.LdOp) else dict(zip(FIELDS, e.operands))
            )
            marks = {}
            for f in fields:
                v = by_reg.get(operands.get(f))
                if v is None and isinstance(op, core.DmaOp):  # an unrolled strided copy
                    v = {"a": op.dst, "b": op.src}[f]
                if isinstance(op, core.PimGemvOp):  # each pim.gemv: a tile of each operand
                    v = {"a": op.out, "b": op.x, "c": op.w}[f]
                if v in self.runtime and v in self.root:
                    marks[f] = StringAttr(self.root[v].text())
            if marks:
                e.attributes[be.BOUNDS_ATTR] = DictionaryAttr(marks)

    # -- scalar unit: arguments, dims, constants, index arithmetic ------------------------------

    def _arg(self, op: core.ArgOp) -> None:
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
        self.root[op.result] = Extent(arg=i)
        if any(dim.is_dynamic for dim in t.dims):
            self.runtime.add(op.result)

    def _dim(self, op: core.DimOp) -> None:
        d = self.dims[op.buf][op.dim.data]
        self.regs[op.result] = self.scalar(d)

    def _core_id(self, op: core.CoreIdOp) -> None:
        if self.program.ctx.is_top:
            self.regs[op.result] = self.const(0)
        else:
            self.regs[op.result] = self.emit(be.EntryRegOp("r2"), op).results[0]

    def _constant(self, op: arith.ConstantOp) -> None:
        v = op.value
        assert isinstance(v, IntegerAttr)
        self.regs[op.result] = self.emit(be.LiOp(v.value.data), op).results[0]

    def _arith(self, op: Operation) -> None:
        cls = ARITH[type(op)]
        r = self.emit(cls(self.regs[op.lhs], self.regs[op.rhs]), op)  # type: ignore[attr-defined]
        self.regs[op.results[0]] = r.results[0]

    # -- memory: buffers and views (addresses), index loads --------------------------------------

    def _alloc(self, op: core.AllocOp) -> None:
        if op.offset is None:
            raise error_at(op, "core.alloc has no offset: run core-plan-memory first")
        on = None
        if op.core is not None and not (
            self.program.ctx.is_core and self.program.ctx.core_index == op.core.core_index
        ):
            on = op.core.core_index
        if op.core_reg is not None:  # `lsa rd, core(rK).SPACE, offset`: a runtime core
            on = self.regs[op.core_reg]
        lsa = self.emit(be.LsaOp(_placed_space(op), op.offset.value.data, on), op)
        self.regs[op.result] = lsa.results[0]
        t = op.result.type
        assert isinstance(t, core.BufType)
        dyn = iter(op.dyn_dims)
        self.dims[op.result] = [
            self.regs[next(dyn)] if dim.is_dynamic else dim.size for dim in t.dims
        ]
        space = _placed_space(op)
        if space in CORE_SPACE_OFFSET:
            self.root[op.result] = Extent(
                space=space, offset=op.offset.value.data, size=t.max_bytes
            )
            self.base[op.result] = 0
            if any(dim.is_dynamic for dim in t.dims):
                self.runtime.add(op.result)

    def _view(self, op: core.ViewOp) -> None:
        self.need_contiguous(op, op.source)
        self.regs[op.result] = self.regs[op.source]
        t = _buf_type(op.result)
        dyn = iter(op.dyn_dims)
        self.dims[op.result] = [
            self.regs[next(dyn)] if dim.is_dynamic else dim.size for dim in t.dims
        ]
        self._derive(op.result, op.source, any(dim.is_dynamic for dim in t.dims))
        if op.source in self.base:
            self.base[op.result] = self.base[op.source]

    def _derive(self, view: SSAValue, source: SSAValue, runtime: bool) -> None:
        """`view` addresses part of `source`'s buffer; `runtime`: at a runtime offset or
        extent."""
        if source in self.root:
            self.root[view] = self.root[source]
            if runtime or source in self.runtime:
                self.runtime.add(view)

    def _narrow(self, view: SSAValue, source: SSAValue, byte_off, sizes, strides) -> None:
        """A static subview of a core buffer bounds what is derived from it by its own bytes
        (from its first element to its last), not its buffer's: a gather from a table that is
        a slice of a larger buffer (`t[0:8]`) then traps on index 8 instead of silently reading
        the buffer's next row."""
        root, base = self.root.get(source), self.base.get(source)
        static = all(isinstance(x, int) for x in (byte_off, *sizes, *strides))
        if root is None or root.space is None or base is None or not static:
            return
        itemsize = _buf_type(source).dtype.itemsize
        last = sum((n - 1) * st for n, st in zip(sizes, strides))
        span = (last + 1) * itemsize if all(n > 0 for n in sizes) else 0
        self.root[view] = Extent(space=root.space, offset=root.offset + base + byte_off, size=span)
        self.base[view] = 0

    def _load_index(self, op: core.LoadIndexOp) -> None:
        self.need_contiguous(op, op.buf)
        off = self.mul(self.regs[op.index], 8, op)
        addr = self.scalar(self.add(self.regs[op.buf], off, op))
        self.regs[op.result] = self.emit(be.LdOp(addr, 0), op).results[0]

    # -- DMA unit and queues ---------------------------------------------------------------------

    def _wait_queue(self, op: core.WaitQueueOp) -> None:
        self.emit(be.QwaitOp(op.memory.data, op.queue.data), op)

    def _dma_wait(self, op: core.DmaWaitOp) -> None:
        self.emit(be.DmaWaitOp(), op)

    # -- MPU -------------------------------------------------------------------------------------

    def _mpu_load_weight(self, op: core.MpuLoadWeightOp) -> None:
        self.need_contiguous(op, op.weight)
        k, n = self.dims[op.weight]
        self.emit(be.MpuLdwOp(self.regs[op.weight], self.scalar(k), self.scalar(n)), op)

    def _mpu_matmul(self, op: core.MpuMatmulOp) -> None:
        self.need_contiguous(op, op.input, op.out)
        out_t = op.out.type
        assert isinstance(out_t, core.BufType)
        m = self.scalar(self.dims[op.input][0])
        self.emit(
            be.MpuMmOp(
                self.regs[op.out], self.regs[op.input], m, out_t.dtype.name, op.is_accumulate
            ),
            op,
        )

    # -- PIM (docs/pim.md) -----------------------------------------------------------------------

    def _pim_gemv(self, op: core.PimGemvOp) -> None:
        """One `pim.gemv` per operation of the weight's PIM layout (`PimLayout.operations`):
        the region of its channel, x's K tile, the unit's columns of the output."""
        self.need_contiguous(op, op.x, op.w, op.out)
        if self.model is None or not self.model.use_pim:
            raise error_at(op, "core.pim_gemv needs a target with PIM units (use_pim=True)")
        k, n = _buf_type(op.w).get_shape()
        layout = PimLayout(k, n, self.model.num_memory_channels)
        shapes: dict[tuple[int, int], SSAValue] = {}  # (K, N) -> its register, built once
        for off, c, k0, k1, j0, j1 in layout.operations():
            w = self.scalar(self.add(self.regs[op.w], off, op))
            x = self.scalar(self.add(self.regs[op.x], k0 * 2, op))
            dst = self.scalar(self.add(self.regs[op.out], (c * layout.n_unit + j0) * 4, op))
            key = (k1 - k0, j1 - j0)
            if key not in shapes:
                shapes[key] = self.pack2(*key, op)
            shape = shapes[key]
            self.emit(be.PimGemvOp(dst, x, w, shape, acc=k0 > 0), op)

    # -- VPU (elementwise kinds: the op table's rows) -------------------------------------------

    def _vpu_fill(self, op: core.VpuFillOp) -> None:
        self.need_contiguous(op, op.out)
        dt = _vpu_dtype(op, _buf_type(op.out))
        bits = self.const(element_bits(op.value.value.data, dt))
        self.emit(be.VpuFillOp(self.regs[op.out], self.count(op.out, op), bits, dt), op)

    def _vpu_select(self, op: core.VpuSelectOp) -> None:
        self.need_contiguous(op, op.cond, op.src, op.out)
        dt = _vpu_dtype(op, _buf_type(op.out))
        ct = _buf_type(op.cond).dtype.name
        if ct != "i1":
            ct = _vpu_dtype(op, _buf_type(op.cond))
        self.emit(
            be.VpuSelOp(
                self.regs[op.out],
                self.regs[op.cond],
                self.regs[op.src],
                self.count(op.out, op),
                dt,
                ct,
            ),
            op,
        )

    def _vpu_transpose(self, op: core.VpuTransposeOp) -> None:
        self.need_contiguous(op, op.input, op.out)
        dt = _vpu_dtype(op, _buf_type(op.input))
        rows, cols = self.dims[op.input]
        self.emit(
            be.VpuTransposeOp(
                self.regs[op.out], self.regs[op.input], self.scalar(rows), self.scalar(cols), dt
            ),
            op,
        )

    # -- debugging: device_print / device_assert -------------------------------------------------

    def _debug_values(self, op: Operation, values, kind: str) -> None:
        """One `dbg.<kind>` per value of `op` (one site of the kernel): the register of an
        index value (count r0's 0), or a buffer's address and element count."""
        site = self.debug_count[0]
        self.debug_count[0] += 1
        cls = be.DbgPrintOp if kind == "print" else be.DbgAssertOp
        items = list(values) or [None]  # a message alone: one entry without a value
        for arg, v in enumerate(items):
            d = {
                "op": StringAttr(kind),
                "site": IntegerAttr(site, 64),
                "message": op.message,
                "arg": IntegerAttr(arg, 64),
                "nargs": IntegerAttr(len(values), 64),
            }
            if v is None:
                d["kind"] = StringAttr("none")
                rs1 = rs2 = self.const(0)
            elif isinstance(v.type, core.BufType):
                self.need_contiguous(op, v)
                t = _buf_type(v)
                d["kind"], d["dtype"] = StringAttr("tensor"), StringAttr(t.dtype.name)
                d["shape"] = ArrayAttr(
                    [IntegerAttr(-1 if x.is_dynamic else x.size, 64) for x in t.dims]
                )
                rs1, rs2 = self.regs[v], self.count(v, op)
            else:
                d["kind"] = StringAttr("index")
                rs1, rs2 = self.regs[v], self.const(0)
            entry = self.debug_count[1]
            self.debug_count[1] += 1
            self.emit(cls(rs1, rs2, entry, DictionaryAttr(d)), op)

    def _print(self, op: core.PrintOp) -> None:
        self._debug_values(op, op.values, "print")

    def _assert(self, op: core.AssertOp) -> None:
        self._debug_values(op, [op.cond], "assert")

    # -- synchronization and control flow -------------------------------------------------------

    def _sync(self, op: core.BarrierOp | core.SemPostOp | core.SemWaitOp) -> None:
        self.emit(SYNC[type(op)](op.sync_id.data, op.count.data), op)

    def _end(self, op: core.EndOp) -> None:
        self.emit(be.HaltOp(), op)

    def _for(self, op: scf.ForOp) -> None:
        """`scf.for` (no iter_args): the index lives in a pinned register r(31 - depth);
        `bge` skips an empty loop, the body ends with `addi` + `blt` back to its label."""
        if op.iter_args:
            raise error_at(
                op,
                "scf.for with iter_args has no instruction selection (carried "
                "values live in buffers at the core level)",
            )
        if self.loop_depth >= MAX_LOOP_DEPTH:
            raise error_at(op, f"runtime loops nest at most {MAX_LOOP_DEPTH} deep on Bertha")
        step_def = op.step.owner
        if not (isinstance(step_def, arith.ConstantOp) and isinstance(step_def.value, IntegerAttr)):
            raise error_at(op, "the step of a runtime loop must be a constant")
        step = step_def.value.value.data
        pinned = be.reg(be.NUM_REGS - 1 - self.loop_depth)
        name = f"{self.program.sym_name.data}_loop{self.loops}"
        self.loops += 1
        lb, ub = self.regs[op.lb], self.regs[op.ub]
        iv = self.emit(be.AddiOp(lb, 0, pinned), op).results[0]
        self.emit(be.BgeOp(iv, ub, f"{name}_end"), op)
        self.emit(be.LabelOp(name), op)
        self.regs[op.body.block.args[0]] = iv
        self.loop_depth += 1
        for inner in op.body.block.ops:
            if not isinstance(inner, scf.YieldOp):
                self.select(inner)
        self.loop_depth -= 1
        self.consts = {}
        nxt = self.emit(be.AddiOp(iv, step, pinned), op).results[0]
        self.emit(be.BltOp(nxt, ub, name), op)
        self.emit(be.LabelOp(f"{name}_end"), op)

    def _subview(self, op: core.SubviewOp) -> None:
        src = op.source
        t = _buf_type(src)
        st = self.strides_of(src, op)
        dyn_off = iter(op.offsets)
        dyn_size = iter(op.sizes)
        offs = [
            self.regs[next(dyn_off)] if o == core.DYNAMIC else o
            for o in op.static_offsets.get_values()
        ]
        sizes = [
            self.regs[next(dyn_size)] if s == core.DYNAMIC else s
            for s in op.static_sizes.get_values()
        ]
        elem_off: int | SSAValue = 0
        for o, s in zip(offs, st):
            elem_off = self.add(elem_off, self.mul(o, s, op), op)
        byte_off = self.mul(elem_off, t.dtype.itemsize, op)
        self.regs[op.result] = self.scalar(self.add(self.regs[src], byte_off, op))
        self.dims[op.result] = sizes
        self._derive(
            op.result,
            src,
            not isinstance(byte_off, int) or any(not isinstance(x, int) for x in sizes),
        )
        self._narrow(op.result, src, byte_off, sizes, st)
        parent = self.dims[src]
        partial = [i for i, (s, p) in enumerate(zip(sizes, parent)) if s is not p and s != p]
        contiguous = self.contiguous(src) and (
            not partial or all(sizes[k] == 1 for k in range(partial[-1]))
        )
        if not contiguous:
            self.strides[op.result] = st

    def _dma(self, op: core.DmaOp) -> None:
        notify = None
        if op.notify_core is not None:
            assert op.notify_space is not None and op.notify_queue is not None
            notify = (op.notify_core.core_index, op.notify_space.data, op.notify_queue.data)
        elif op.notify_core_reg is not None:  # notify mode CORE_REG
            assert op.notify_space is not None and op.notify_queue is not None
            notify = (self.regs[op.notify_core_reg], op.notify_space.data, op.notify_queue.data)
        src, dst = op.src, op.dst
        if op.nbytes is not None or (self.contiguous(src) and self.contiguous(dst)):
            length = self.regs[op.nbytes] if op.nbytes is not None else self.nbytes(src, op)
            if op.nbytes is None:
                length = self._fits(length, src, dst, op)
            self.emit(be.DmaOp(self.regs[dst], self.regs[src], length, notify), op)
            return
        # a strided copy: one DMA per contiguous run, unrolled over the outer indices
        dims = self.dims[src]
        ss, ds = self.strides_of(src, op), self.strides_of(dst, op)
        if len(self.dims[dst]) == len(dims):
            # a dim of size 1 on both ends is never stepped over: a runtime stride of it (the
            # leading 1 of a `[1, ?M, w]` buffer) does not matter; it steps as the dim inside
            one = [a == 1 and b == 1 for a, b in zip(dims, self.dims[dst])]
            ss, ds = (_one_strides(st, one) for st in (ss, ds))
        if len(self.dims[dst]) != len(dims) or not all(isinstance(x, int) for x in (*ss, *ds)):
            raise error_at(op, STRIDED_DYNAMIC)

        def runs_from(strides: list) -> int:
            k = len(dims)
            expect = 1
            while (
                k > 0
                and isinstance(dims[k - 1], int)
                and (dims[k - 1] == 1 or strides[k - 1] == expect)
            ):
                expect *= dims[k - 1]
                k -= 1
            return k

        k = max(runs_from(ss), runs_from(ds))
        if not all(isinstance(d, int) for d in dims):
            self._dma2d_runtime(op, k, ss, ds, notify)
            return
        isz = _buf_type(src).dtype.itemsize
        run = math.prod(dims[k:]) * isz
        # The innermost outer dim becomes the rows of one `dma2d` (one transfer: the latency is
        # paid once); the dims outside it, if any, are unrolled into one dma2d each.
        rows, sstride, dstride = (dims[k - 1], ss[k - 1] * isz, ds[k - 1] * isz) if k else (1, 0, 0)
        limit = 2**31 - 1  # pack2 builds each half with li/addi immediates
        if rows > 1 and run <= sstride <= limit and run <= dstride <= limit and rows <= limit:
            shape = self.pack2(rows, run, op)
            stride = self.pack2(dstride, sstride, op)
            self._dma2d_each(op, dims[: k - 1], ss, ds, isz, shape, stride, notify)
            return
        outer = list(itertools.product(*(range(d) for d in dims[:k])))
        length = self.const(run)
        for n, idx in enumerate(outer):
            so = sum(i * s for i, s in zip(idx, ss)) * isz
            do = sum(i * s for i, s in zip(idx, ds)) * isz
            self.emit(
                be.DmaOp(
                    self.scalar(self.add(self.regs[dst], do, op)),
                    self.scalar(self.add(self.regs[src], so, op)),
                    length,
                    notify if n == len(outer) - 1 else None,
                ),
                op,
            )

    def _dma2d_runtime(self, op: core.DmaOp, k: int, ss: list, ds: list, notify) -> None:
        """A strided copy with runtime dims (`dims[k:]` the static contiguous run of both
        ends): the dims outside the run that are contiguous with each other on both ends are
        merged into the rows of one `dma2d` whose row count is a register (a `[?M, w]` column
        slab of a row-stride-K buffer is one transfer; zero rows move nothing), the static dims
        outside those unrolled into one dma2d each. A source with fewer rows than the
        destination fills the destination's first rows (a legato memcpy of a shorter source);
        more rows, or any other runtime dim that differs, fault at the copy's line (as the
        interpreters refuse the copy), before anything is written."""
        src, dst = op.src, op.dst
        dims = self.dims[src]
        bounds = _buf_type(src).get_bounds()
        isz = _buf_type(src).dtype.itemsize
        run = math.prod(dims[k:]) * isz
        lo = k - 1  # rows = dims[lo:k], merged while both ends step contiguously over them
        while lo > 0 and all(
            isinstance(dims[lo], int) and st[lo - 1] == st[lo] * dims[lo] for st in (ss, ds)
        ):
            lo -= 1
        outer = dims[:lo]
        if not all(isinstance(d, int) for d in outer):
            raise error_at(
                op,
                "a strided copy over a dynamic dim that is neither its rows nor contiguous "
                f"with them (dims {_buf_type(src).dims_str()} into "
                f"{_buf_type(dst).dims_str()}) is not supported; make the dims outside the "
                "dynamic one static",
            )
        rows = self.product(dims[lo:k], op)
        max_rows = math.prod(bounds[lo:k])
        sstride, dstride = ss[k - 1] * isz, ds[k - 1] * isz
        limit = 2**31 - 1
        if not (run <= sstride <= limit and run <= dstride <= limit and max_rows <= limit):
            raise error_at(
                op,
                f"a strided copy over a dynamic dim needs one dma2d per row set: rows of "
                f"{run} bytes at strides {sstride} (source) and {dstride} (destination), at "
                f"most {max_rows} rows; a stride below the row (a broadcast) or past 2^31 "
                "is not supported over a dynamic dim",
            )
        assert not isinstance(rows, int)  # the dynamic dim is among them (runs_from, outer)
        for i, (a, b) in enumerate(zip(dims, self.dims[dst])):
            if not (a is b or a == b):
                # rows * (ok / ok): a zero divisor unless the source fits. The leading row dim
                # (the only one that can be dynamic) may be shorter than the destination's:
                # the source's rows go to the destination's first rows, as a memcpy of a
                # shorter source does at the legato level; any other dim must match
                a_, b_ = self.scalar(a), self.scalar(b)
                if i == lo:
                    over = self.emit(be.SltOp(b_, a_), op).results[0]
                    ok = self.emit(be.SeqOp(over, self.const(0)), op).results[0]
                else:
                    ok = self.emit(be.SeqOp(a_, b_), op).results[0]
                rows = self.mul(rows, self.emit(be.DivOp(ok, ok), op).results[0], op)
        shape = self.scalar(self.add(self.emit(be.ShliOp(rows, 32), op).results[0], run, op))
        stride = self.pack2(dstride, sstride, op)
        self._dma2d_each(op, outer, ss, ds, isz, shape, stride, notify)

    def _dma2d_each(
        self, op: core.DmaOp, outer: list, ss: list, ds: list, isz: int, shape, stride, notify
    ) -> None:
        """One `dma2d` of `shape`/`stride` per index of the static `outer` dims (at the
        element strides `ss` / `ds` of the source / destination), the last one notifying."""
        src, dst = op.src, op.dst
        idxs = list(itertools.product(*(range(d) for d in outer)))
        for n, idx in enumerate(idxs):
            so = sum(i * s for i, s in zip(idx, ss)) * isz
            do = sum(i * s for i, s in zip(idx, ds)) * isz
            self.emit(
                be.Dma2dOp(
                    self.scalar(self.add(self.regs[dst], do, op)),
                    self.scalar(self.add(self.regs[src], so, op)),
                    shape,
                    stride,
                    notify if n == len(idxs) - 1 else None,
                ),
                op,
            )

    def _fits(self, length: SSAValue, src: SSAValue, dst: SSAValue, op: core.DmaOp) -> SSAValue:
        """`length` (the source's bytes), checked at run time against the destination's when
        their sizes are different runtime values (the dims of two arguments): a copy that does
        not fit faults at the copy's line (a zero divisor: `length * (ok / ok)`, ok = 0 when
        the source is larger), as the interpreters refuse it, instead of writing past the
        destination. Sizes the compiler can compare need no check (static ones are verified)."""
        sd, dd = self.dims[src], self.dims[dst]
        if len(sd) == len(dd) and all(a is b or a == b for a, b in zip(sd, dd)):
            return length
        if all(isinstance(x, int) for x in (*sd, *dd)):
            return length
        st, dt = _buf_type(src), _buf_type(dst)
        if (
            all(isinstance(x, int) for x in dd)
            and math.prod(st.get_bounds()) * st.dtype.itemsize <= math.prod(dd) * dt.dtype.itemsize
        ):
            return length  # the source's bound fits the static destination
        dst_n = self.nbytes(dst, op)
        over = self.emit(be.SltOp(dst_n, length), op).results[0]
        ok = self.emit(be.SeqOp(over, self.const(0)), op).results[0]
        one = self.emit(be.DivOp(ok, ok), op).results[0]
        return self.emit(be.MulOp(length, one), op).results[0]

    def _vpu_binary(self, op: core.VpuBinaryOp) -> None:
        self.need_contiguous(op, op.lhs, op.rhs, op.out)
        ot = _buf_type(op.out)
        dt = _vpu_dtype(op, ot)
        if broadcast_form(_buf_type(op.lhs).dims, ot.dims)[0] != "full":
            raise error_at(
                op,
                f"{op.name} {op.kind.data}: the VPU broadcasts only its second operand; the "
                f"first ({_buf_type(op.lhs).dims_str()}) must have the output's shape "
                f"({ot.dims_str()})",
            )
        form, period = broadcast_form(_buf_type(op.rhs).dims, ot.dims)
        if form is None:
            raise error_at(
                op,
                f"{op.name}: {_buf_type(op.rhs).dims_str()} does not broadcast to "
                f"{ot.dims_str()} in a form the VPU has (scalar, per row, per column); "
                "materialize it first",
            )
        self.emit(
            VPU_BINARY[op.kind.data](
                self.regs[op.out],
                self.regs[op.lhs],
                self.regs[op.rhs],
                self.count(op.out, op),
                dt,
                None if form == "full" else form,
                period,
            ),
            op,
        )

    def _vpu_unary(self, op: core.VpuUnaryOp) -> None:
        self.need_contiguous(op, op.input, op.out)
        it, ot = _buf_type(op.input), _buf_type(op.out)
        kind = op.kind.data
        if kind == "cast" and ot.dtype.name in opset.CAST_INT_RESULTS:
            dt = ot.dtype.name  # vpu.cvt's integer results (i64 is no VPU dtype otherwise)
        else:
            dt = _vpu_dtype(op, ot)
        form, period = broadcast_form(it.dims, ot.dims)
        n = self.count(op.out, op)
        dst, src = self.regs[op.out], self.regs[op.input]
        if kind == "cast" and it.element_type == ot.element_type:
            kind = "copy"
        if kind == "copy" and form not in ("full", None):
            # broadcast copy: dst = -inf, then dst = max(dst, src[bcast]) (exact, NaN kept)
            bits = self.const(element_bits(float("-inf"), dt))
            self.emit(be.VpuFillOp(dst, n, bits, dt), op)
            self.emit(be.VpuMaxOp(dst, dst, src, n, dt, form, period), op)
            return
        if form != "full":
            raise error_at(
                op,
                f"{op.name} {kind}: input {it.dims_str()} must have the output's shape "
                f"{ot.dims_str()} (only copy broadcasts)",
            )
        if kind == "cast":
            self.emit(be.VpuCvtOp(dst, src, n, dt, _vpu_dtype(op, it)), op)
        else:
            self.emit(VPU_UNARY[kind](dst, src, n, dt), op)

    def _vpu_reduce(self, op: core.VpuReduceOp) -> None:
        self.need_contiguous(op, op.input, op.out)
        it, ot = _buf_type(op.input), _buf_type(op.out)
        dt = _vpu_dtype(op, it)
        if it.element_type != ot.element_type:
            raise error_at(
                op,
                f"{op.name}: vpu.rsum/rmax write the input's dtype ({dt}); cast the input to "
                f"{ot.dtype.name} first",
            )
        kind = op.kind.data
        if kind == "min":
            raise error_at(
                op,
                "core.vpu_reduce min has no instruction (the VPU has rsum and rmax); "
                "compute -max(-x)",
            )
        dims = self.dims[op.input]
        rows = self.scalar(self.product(dims[:-1], op))
        cols = self.scalar(dims[-1])
        cls = be.VpuRsumOp if kind == "sum" else be.VpuRmaxOp
        self.emit(cls(self.regs[op.out], self.regs[op.input], rows, cols, dt), op)


_Handler = Callable[[_Selector, Any], None]
ISEL_BY_UNIT: dict[str, dict[type[Operation], _Handler]] = {
    "scalar": {
        core.ArgOp: _Selector._arg,
        core.DimOp: _Selector._dim,
        core.CoreIdOp: _Selector._core_id,
        arith.ConstantOp: _Selector._constant,
        **{cls: _Selector._arith for cls in ARITH},
    },
    "memory": {
        core.AllocOp: _Selector._alloc,
        core.SubviewOp: _Selector._subview,
        core.ViewOp: _Selector._view,
        core.LoadIndexOp: _Selector._load_index,
    },
    "dma": {
        core.DmaOp: _Selector._dma,
        core.WaitQueueOp: _Selector._wait_queue,
        core.DmaWaitOp: _Selector._dma_wait,
    },
    "mpu": {
        core.MpuLoadWeightOp: _Selector._mpu_load_weight,
        core.MpuMatmulOp: _Selector._mpu_matmul,
    },
    "pim": {core.PimGemvOp: _Selector._pim_gemv},
    "vpu": {
        core.VpuBinaryOp: _Selector._vpu_binary,
        core.VpuUnaryOp: _Selector._vpu_unary,
        core.VpuReduceOp: _Selector._vpu_reduce,
        core.VpuFillOp: _Selector._vpu_fill,
        core.VpuSelectOp: _Selector._vpu_select,
        core.VpuTransposeOp: _Selector._vpu_transpose,
    },
    "sync": {cls: _Selector._sync for cls in SYNC},
    "debug": {core.PrintOp: _Selector._print, core.AssertOp: _Selector._assert},
    "control": {core.EndOp: _Selector._end, scf.ForOp: _Selector._for},
}
"""Instruction selection, split by the unit the instructions run on: core op type -> handler."""
ISEL: dict[type[Operation], _Handler] = {
    t: h for table in ISEL_BY_UNIT.values() for t, h in table.items()
}
assert len(ISEL) == sum(len(t) for t in ISEL_BY_UNIT.values()), "an op type in two units"


def _drop_dead(region: Region) -> None:
    """What `region_dce(region)` does, for a program body (one block of ops without regions):
    an op whose results nothing reads and that has no other effect goes. One sweep from the
    end decides each op after every op that could read it (in one block a use follows its
    definition), where `region_dce`'s fixpoint walks the block at least twice and asks every
    op for its effects each time (~20% of this pass on a GEMM)."""
    (block,) = region.blocks
    if any(op.regions for op in block.ops):
        region_dce(region)
        return
    op = block.last_op
    while op is not None:
        prev = op.prev_op
        if all(r.first_use is None for r in op.results) and would_be_trivially_dead(op):
            block.erase_op(op, safe_erase=False)
        op = prev


@dataclass(frozen=True)
class ConvertCoreToBackendPass(ModulePass):
    name = "convert-core-to-backend"

    target: str = "bertha"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        model = model_of(op, self.target)  # validates the target
        for kernel in list(op.body.block.ops):
            if not isinstance(kernel, core.KernelOp):
                continue
            layout = arg_layout(kernel)
            use = footprints(kernel)
            programs = []
            debug_count = [0, 0]  # debug sites and entries are numbered per kernel
            for program in kernel.body.block.ops:
                if not isinstance(program, core.ProgramOp):
                    continue
                sel = _Selector(program, layout, debug_count=debug_count, model=model)
                for inner in program.body.block.ops:
                    sel.select(inner)
                mem = None
                if program.ctx.is_core or program.ctx.is_all_cores:
                    core_index = program.ctx.core_index if program.ctx.is_core else None
                    mem = program_footprint(use, core_index)
                new = be.ProgramOp(program.sym_name.data, program.ctx, sel.ops, mem or None)
                # drop the address and constant ops no instruction reads (Pure, or `ld`)
                _drop_dead(new.body)
                new.location = program.location
                programs.append(new)
            bk = be.KernelOp(kernel.sym_name.data, programs, kernel.args)
            if ARG_NAMES_ATTR in kernel.attributes:
                bk.attributes[ARG_NAMES_ATTR] = kernel.attributes[ARG_NAMES_ATTR]
            bk.location = kernel.location
            op.body.block.insert_op_before(bk, kernel)
            op.body.block.detach_op(kernel)
            kernel.erase(safe_erase=False)
