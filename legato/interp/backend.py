"""Interpreter of the `backend` dialect: Bertha instructions over registers, at the IR level.

Execution model (docs/isa.md, docs/architecture.md level 3):

* One task per `backend.program` (one per core for `all_cores`), each with 32 registers
  (r0 = 0; at entry r1 = the Instruction Table's address, r2 = the core index, 0 on top).
* A program is one block; `backend.label` marks branch targets, branches jump to them, `halt`
  (or falling off the end) stops the program.
* Register operands: an *allocated* register (`!backend.reg<r5>`) is read from / written to the
  register file, exactly as the hardware does; an *unallocated* one (`!backend.reg`, or xDSL's
  infinite `j` registers) is an SSA value (the last value its defining op produced). So the same
  interpreter runs the IR before and after register allocation, and a difference between the
  two runs is a register allocation bug.
* Memory, queues, MPU and barriers are `legato.interp.machine.Machine` (the machine model
  `legato.targets.bertha.arch`, shared with the core level and the emulator: address map,
  dma2d geometry, notify core selection); DMAs complete at issue.
* Numerics: MPU via `legato.numerics`, VPU via `legato.targets.bertha.vpu` (the emulator's own
  definition), so results match the emulator bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from legato import numerics
from legato.dialects import backend as B
from legato.dialects.core import ArgAttr, BufType
from legato.interp.common import BoundArg, module_name
from legato.interp.errors import InterpError, InvalidModuleError
from legato.interp.machine import Machine, run_kernel_programs
from legato.interp.memory import Memory
from legato.interp.scheduler import Scheduler
from legato.targets.bertha import isa, mpu_fast, vpu
from legato.targets.bertha.abi import ARG_NAMES_ATTR
from legato.targets.bertha.arch import debug, pim
from legato.targets.bertha.arch.address_map import core_space_base
from legato.targets.bertha.arch.bounds import ADDRESS_FIELDS, access_spans, fit_check_cause
from legato.targets.bertha.arch.bounds import check as check_bounds
from legato.targets.bertha.arch.bounds import resolve as resolve_bounds
from legato.targets.bertha.arch.dma import dma2d_geometry, select_core
from legato.targets.bertha.arch.errors import Trap
from legato.targets.bertha.arch.hazards import rows_of
from legato.targets.bertha.arch.modules import core_id
from legato.targets.bertha.arch.units import LOCAL_SPACES, check_local, check_weight_tile
from legato.types import dtype_from_name

MASK64 = (1 << 64) - 1


def s64(v: int) -> int:
    v &= MASK64
    return v - (1 << 64) if v >> 63 else v


def _np(dtype: str) -> np.dtype:
    return dtype_from_name(dtype).numpy


@dataclass
class ProgramEnv:
    name: str
    core: int | None
    regs: list[int] = field(default_factory=lambda: [0] * B.NUM_REGS)
    ssa: dict[SSAValue, int] = field(default_factory=dict)
    jump: str | None = None
    halted: bool = False


def _env(interpreter: Interpreter) -> ProgramEnv:
    return interpreter.get_data(BackendFunctions, "env", lambda: ProgramEnv("?", None))


def _reg_index(value: SSAValue) -> int | None:
    """The r-register of an allocated value, None for an SSA (unallocated / `j`) one."""
    t = value.type
    if isinstance(t, B.RegType) and t.is_allocated:
        name = t.register_name.data if hasattr(t.register_name, "data") else t.register_name
        if isinstance(name, str) and name.startswith("r"):
            return int(name[1:])
    return None


def read_operand(env: ProgramEnv, value: SSAValue, op: Operation) -> int:
    r = _reg_index(value)
    if r is not None:
        return 0 if r == 0 else env.regs[r]
    try:
        return env.ssa[value]
    except KeyError:
        raise InterpError(
            "reads an unallocated register whose defining instruction has not run", op
        ) from None


def write_result(env: ProgramEnv, value: SSAValue, v: int) -> None:
    v = s64(v)
    r = _reg_index(value)
    if r is not None and r != 0:
        env.regs[r] = v
    env.ssa[value] = v


@register_impls
@dataclass
class BackendFunctions(InterpreterFunctions):
    machine: Machine | None = None

    @property
    def mem(self) -> Memory:
        assert self.machine is not None
        return self.machine.memory

    # -- scalar -----------------------------------------------------------------------------

    @impl(B.EntryRegOp)
    def run_entry_reg(self, interpreter, op: B.EntryRegOp, args):
        env = _env(interpreter)
        return (env.regs[int(op.reg.data[1:])],)

    @impl(B.NopOp)
    def run_nop(self, interpreter, op, args):
        return ()

    @impl(B.HaltOp)
    def run_halt(self, interpreter, op, args):
        _env(interpreter).halted = True
        return ()

    @impl(B.LabelOp)
    def run_label(self, interpreter, op, args):
        return ()

    @impl(B.LiOp)
    def run_li(self, interpreter, op: B.LiOp, args):
        imm = op.imm.data & 0xFFFF_FFFF
        return (imm - (1 << 32) if imm >> 31 else imm,)

    @impl(B.LihOp)
    def run_lih(self, interpreter, op: B.LihOp, args):
        (lo,) = args
        return (((op.imm.data & 0xFFFF_FFFF) << 32) | (lo & 0xFFFF_FFFF),)

    @impl(B.LsaOp)
    def run_lsa(self, interpreter, op: B.LsaOp, args):
        core = self._select_core(interpreter, op, op.core, op.core_reg, args)
        return (core_space_base(core, op.space.data) + (op.offset.data & 0xFFFF_FFFF),)

    def _select_core(self, interpreter, op, static, reg, args) -> int:
        """The core an `lsa` or notify names (`arch.dma.select_core`): the static `core(i)`,
        the value of its core register (`args[0]`), else the running core."""
        assert self.machine is not None
        if static is not None:
            mode, field = isa.CORE_STATIC, static.data
        elif reg is not None:
            mode, field = isa.CORE_REG, 0
        else:
            mode, field = isa.CORE_SELF, 0
        try:
            return select_core(
                mode, field, args, _env(interpreter).core, self.machine.model.num_cores
            )
        except Trap as e:
            raise InterpError(e.cause, op) from None

    def _alu(self, op: Operation, mn: str, a: int, b: int) -> int:
        try:
            return isa.alu(mn, a, b)
        except (ZeroDivisionError, ValueError) as e:
            same = len(op.operands) == 2 and op.operands[0] is op.operands[1]
            raise InterpError(fit_check_cause(mn, same) or str(e), op) from None

    def _rrr(self, interpreter, op, args):
        return (self._alu(op, op.MNEMONIC, args[0], args[1]),)

    def _rri(self, interpreter, op, args):
        imm = op.imm.data & 0xFFFF_FFFF
        imm = imm - (1 << 32) if imm >> 31 else imm
        return (self._alu(op, op.MNEMONIC[:-1], args[0], imm),)

    run_add = impl(B.AddOp)(_rrr)
    run_sub = impl(B.SubOp)(_rrr)
    run_mul = impl(B.MulOp)(_rrr)
    run_div = impl(B.DivOp)(_rrr)
    run_rem = impl(B.RemOp)(_rrr)
    run_and = impl(B.AndOp)(_rrr)
    run_or = impl(B.OrOp)(_rrr)
    run_xor = impl(B.XorOp)(_rrr)
    run_shl = impl(B.ShlOp)(_rrr)
    run_shr = impl(B.ShrOp)(_rrr)
    run_sra = impl(B.SraOp)(_rrr)
    run_min = impl(B.MinOp)(_rrr)
    run_max = impl(B.MaxOp)(_rrr)
    run_slt = impl(B.SltOp)(_rrr)
    run_seq = impl(B.SeqOp)(_rrr)
    run_addi = impl(B.AddiOp)(_rri)
    run_muli = impl(B.MuliOp)(_rri)
    run_andi = impl(B.AndiOp)(_rri)
    run_shli = impl(B.ShliOp)(_rri)
    run_shri = impl(B.ShriOp)(_rri)
    run_divi = impl(B.DiviOp)(_rri)
    run_remi = impl(B.RemiOp)(_rri)

    @impl(B.LdOp)
    def run_ld(self, interpreter, op: B.LdOp, args):
        addr = args[0] + op.offset.data
        return (s64(self.mem.read_u64(addr)),)

    @impl(B.StOp)
    def run_st(self, interpreter, op: B.StOp, args):
        value, base = args
        self.mem.write_u64(base + op.offset.data, value)
        return ()

    def _branch(self, interpreter, op, args):
        a, b = args
        take = {"beq": a == b, "bne": a != b, "blt": a < b, "bge": a >= b}[op.MNEMONIC]
        if take:
            _env(interpreter).jump = op.target.data
        return ()

    run_beq = impl(B.BeqOp)(_branch)
    run_bne = impl(B.BneOp)(_branch)
    run_blt = impl(B.BltOp)(_branch)
    run_bge = impl(B.BgeOp)(_branch)

    @impl(B.JmpOp)
    def run_jmp(self, interpreter, op: B.JmpOp, args):
        _env(interpreter).jump = op.target.data
        return ()

    # -- data movement and sync -------------------------------------------------------------

    @impl(B.DmaOp)
    def run_dma(self, interpreter, op: B.DmaOp, args):
        assert self.machine is not None
        dst, src, n = args[0], args[1], args[2]
        if n < 0:
            raise InterpError(f"dma of a negative length {n}", op)
        self.mem.copy(dst, src, n)
        self.machine.dma_bytes += n
        self._notify(interpreter, op, args[3:])
        return ()

    def _notify(self, interpreter, op: B.DmaOp | B.Dma2dOp, core_reg: tuple) -> None:
        """Signal the queue a dma/dma2d names (`core_reg`: the notify core register's value,
        when the op has one)."""
        if op.notify is None:
            return
        env = _env(interpreter)
        core = self._select_core(interpreter, op, op.notify_core, op.notify_core_reg, core_reg)
        assert self.machine is not None
        assert op.notify_space is not None and op.notify_queue is not None
        self.machine.signal(
            core, op.notify_space.data, op.notify_queue.data, f"{env.name}'s {op.MNEMONIC}"
        )

    @impl(B.Dma2dOp)
    def run_dma2d(self, interpreter, op: B.Dma2dOp, args):
        assert self.machine is not None
        dst, src = args[0], args[1]
        try:
            rows, row, dstride, sstride, _, _ = dma2d_geometry(args[2], args[3])
        except Trap as e:
            raise InterpError(e.cause, op) from None
        for r in range(rows if row else 0):
            self.mem.copy(dst + r * dstride, src + r * sstride, row)
        self.machine.dma_bytes += rows * row
        self._notify(interpreter, op, args[4:])
        return ()

    @impl(B.QwaitOp)
    def run_qwait(self, interpreter, op: B.QwaitOp, args):
        env = _env(interpreter)
        assert self.machine is not None and env.core is not None
        self.machine.wait_arrival(env.core, op.space.data, op.queue.data, op)
        return ()

    @impl(B.DmaWaitOp)
    def run_dmawait(self, interpreter, op, args):
        return ()

    def _dbg(self, interpreter, op: B.DbgOp, args) -> tuple:
        """The entry of a `dbg.*` op and its value: an index register, or a tensor read from
        the address and element count registers."""
        entry = B.debug_entry(op)
        if entry.kind != "tensor":
            return entry, args[0]
        addr, count = args
        if count < 0:
            raise InterpError(f"{op.name} of negative element count {count}", op)
        return entry, debug.read_tensor(entry, self.mem.bytes(addr, entry.nbytes(count)), count)

    @impl(B.DbgPrintOp)
    def run_dbg_print(self, interpreter, op: B.DbgPrintOp, args):
        assert self.machine is not None
        entry, value = self._dbg(interpreter, op, args)
        env = _env(interpreter)
        collector = self.__dict__.setdefault("_debug", debug.Collector())
        rec = collector.add(entry, value, module_name(env.core), env.core, None)
        if rec is not None:
            self.machine.prints.append(rec)
            debug.emit(rec)
        return ()

    @impl(B.DbgAssertOp)
    def run_dbg_assert(self, interpreter, op: B.DbgAssertOp, args):
        entry, value = self._dbg(interpreter, op, args)
        core = _env(interpreter).core
        debug.check_assert(entry, value, module_name(core), core, None)
        return ()

    @impl(B.BarrierOp)
    def run_barrier(self, interpreter, op: B.BarrierOp, args):
        assert self.machine is not None
        self.machine.sync_barrier(op.sync_id.data, op.count.data, op)
        return ()

    @impl(B.SemPostOp)
    def run_sem_post(self, interpreter, op: B.SemPostOp, args):
        assert self.machine is not None
        self.machine.sem_post(op.sync_id.data, op.count.data, op)
        return ()

    @impl(B.SemWaitOp)
    def run_sem_wait(self, interpreter, op: B.SemWaitOp, args):
        assert self.machine is not None
        self.machine.sem_wait(op.sync_id.data, op.count.data, op)
        return ()

    # -- MPU --------------------------------------------------------------------------------

    def _local(self, interpreter, op, addr: int, what: str, spaces=LOCAL_SPACES) -> None:
        try:
            check_local(addr, _env(interpreter).core, what, spaces)
        except Trap as e:
            raise InterpError(e.cause, op) from None

    @impl(B.MpuLdwOp)
    def run_mpu_ldw(self, interpreter, op, args):
        assert self.machine is not None
        src, k, n = args
        try:
            check_weight_tile(self.machine.model, k, n)
        except Trap as e:
            raise InterpError(e.cause, op) from None
        self._local(interpreter, op, src, "mpu.ldw source", ("mpu_buffer",))
        w = self.mem.bytes(src, k * n * 2).view(numerics.bfloat16).reshape(k, n)
        self.machine.load_weight(_env(interpreter).core, w)  # type: ignore[arg-type]
        return ()

    @impl(B.MpuMmOp)
    def run_mpu_mm(self, interpreter, op: B.MpuMmOp, args):
        assert self.machine is not None
        dst, src, rows = args
        core = _env(interpreter).core
        w = self.machine.weight(core, op)  # type: ignore[arg-type]
        if rows < 0:
            raise InterpError(f"mpu.mm with negative row count {rows}", op)
        k, n = w.shape
        f32 = op.out_dtype.data == "f32"
        osz = 4 if f32 else 2
        self._local(interpreter, op, src, "mpu.mm source")
        self._local(interpreter, op, dst, "mpu.mm destination")
        a = self.mem.bytes(src, rows * k * 2).view(numerics.bfloat16).reshape(rows, k)
        acc = None
        if op.acc is not None:
            acc = self.mem.bytes(dst, rows * n * 4).view(np.float32).reshape(rows, n)
        res = mpu_fast.matmul(a, w, acc)
        res = res if f32 else numerics.round_to(res, numerics.bfloat16)
        self.mem.bytes(dst, rows * n * osz)[:] = (
            np.ascontiguousarray(res).view(np.uint8).reshape(-1)
        )
        return ()

    # -- PIM (docs/pim.md) ---------------------------------------------------------------

    @impl(B.PimGemvOp)
    def run_pim_gemv(self, interpreter, op: B.PimGemvOp, args):
        """`pim.gemv` as the emulator computes it (`arch.pim`: the same rules and numerics),
        without timing."""
        assert self.machine is not None
        dst, x, w, shape = args
        model = self.machine.model
        k, n = isa.dma2d_unpack(shape)
        try:
            pim.check_gemv(model, w, k, n)
        except Trap as e:
            raise InterpError(e.cause, op) from None
        self._local(interpreter, op, x, "pim.gemv x")
        self._local(interpreter, op, dst, "pim.gemv destination")
        xs = self.mem.bytes(x, k * 2).view(numerics.bfloat16)
        wt = pim.read_region(model, self.mem.bytes, w, k, n)
        acc = self.mem.bytes(dst, n * 4).view(np.float32) if op.acc is not None else None
        res = pim.gemv(xs, wt, acc)
        self.mem.bytes(dst, n * 4)[:] = res.view(np.uint8)
        return ()

    # -- VPU --------------------------------------------------------------------------------

    def _read(self, addr: int, count: int, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        return self.mem.bytes(addr, count * dtype.itemsize).view(dtype).copy()

    def _write(self, interpreter, op, addr: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data)
        self._local(interpreter, op, addr, f"{op.MNEMONIC} destination")
        self.mem.bytes(addr, data.nbytes)[:] = data.view(np.uint8).reshape(-1)

    def _vbin(self, interpreter, op, args):
        dst, s1, s2, n = args
        dt = _np(op.dtype.data)
        if n < 0:
            raise InterpError(f"{op.MNEMONIC} with negative element count {n}", op)
        self._local(interpreter, op, s1, f"{op.MNEMONIC} source")
        self._local(interpreter, op, s2, f"{op.MNEMONIC} source")
        x = self._read(s1, n, dt)
        mode = op.bcast.data if op.bcast is not None else None
        period = op.period.data if op.period is not None else 0
        if n == 0:
            y = x
        elif mode == "scalar":
            y = np.broadcast_to(self._read(s2, 1, dt), (n,))
        elif mode == "row":
            y = np.repeat(self._read(s2, -(-n // period), dt), period)[:n]
        elif mode == "col":
            y = np.resize(self._read(s2, min(n, period), dt), n)
        else:
            y = self._read(s2, n, dt)
        self._write(interpreter, op, dst, vpu.binary(op.ROW.kind, x, y, dt))
        return ()

    def _vun(self, interpreter, op, args):
        dst, src, n = args
        dt = _np(op.dtype.data)
        if n < 0:
            raise InterpError(f"{op.MNEMONIC} with negative element count {n}", op)
        self._local(interpreter, op, src, f"{op.MNEMONIC} source")
        self._write(interpreter, op, dst, vpu.unary(op.ROW.kind, self._read(src, n, dt), dt))
        return ()

    # one impl per elementwise instruction of the op table (its row names the numerics)
    for _cls in B.VPU_ELEMENTWISE_OPS.values():
        locals()[f"run_{_cls.name.removeprefix('backend.')}"] = impl(_cls)(
            _vbin if _cls.ROW.family == "binary" else _vun
        )
    del _cls

    @impl(B.VpuCvtOp)
    def run_vcvt(self, interpreter, op: B.VpuCvtOp, args):
        dst, src, n = args
        self._local(interpreter, op, src, "vpu.cvt source")
        x = self._read(src, n, _np(op.src_dtype.data))
        self._write(interpreter, op, dst, vpu.convert(x, _np(op.dst_dtype.data)))
        return ()

    @impl(B.VpuSelOp)
    def run_vsel(self, interpreter, op: B.VpuSelOp, args):
        dst, cond, src, n = args
        if n < 0:
            raise InterpError(f"vpu.sel with negative element count {n}", op)
        dt = _np(op.dtype.data)
        ct = np.dtype(np.bool_) if op.cond_dtype.data == "i1" else _np(op.cond_dtype.data)
        self._local(interpreter, op, cond, "vpu.sel condition")
        self._local(interpreter, op, src, "vpu.sel source")
        self._local(interpreter, op, dst, "vpu.sel destination")
        res = vpu.select(self._read(cond, n, ct), self._read(src, n, dt), self._read(dst, n, dt))
        self._write(interpreter, op, dst, res)
        return ()

    @impl(B.VpuFillOp)
    def run_vfill(self, interpreter, op: B.VpuFillOp, args):
        dst, n, bits = args
        dt = _np(op.dtype.data)
        raw = (bits & MASK64).to_bytes(8, "little")[: dt.itemsize]
        self._write(interpreter, op, dst, np.full(n, np.frombuffer(raw, dt)[0], dt))
        return ()

    def _v2d(self, interpreter, op, args):
        dst, src, rows, cols = args
        if rows < 0 or cols < 0:
            raise InterpError(f"{op.MNEMONIC} with negative shape [{rows}, {cols}]", op)
        dt = _np(op.dtype.data)
        self._local(interpreter, op, src, f"{op.MNEMONIC} source")
        x = self._read(src, rows * cols, dt).reshape(rows, cols)
        if op.MNEMONIC == "vpu.rsum":
            res = vpu.row_sum(x, dt)
        elif op.MNEMONIC == "vpu.rmax":
            res = vpu.row_max(x, dt)
        else:
            res = np.ascontiguousarray(x.T)
        self._write(interpreter, op, dst, res)
        return ()

    run_vrsum = impl(B.VpuRsumOp)(_v2d)
    run_vrmax = impl(B.VpuRmaxOp)(_v2d)
    run_vtranspose = impl(B.VpuTransposeOp)(_v2d)


def structural_ops() -> set[type[Operation]]:
    return {B.KernelOp, B.ProgramOp}


def kernel_specs(kernel) -> list:
    """Per argument (from the kernel's `args` descriptors): TensorSpec or scalar type."""
    args = getattr(kernel, "args", None)
    if args is None:
        raise InvalidModuleError(
            "backend.kernel has no `args` descriptors: the interpreter cannot tell the "
            "argument types (the lowering carries them from core.kernel)"
        )
    out = []
    for a in args.data:
        if not isinstance(a, ArgAttr):
            raise InvalidModuleError(f"backend.kernel args: {a} is not a #core.arg")
        out.append(a.type.to_spec() if isinstance(a.type, BufType) else a.type)
    return out


def _bounds(ops: list[Operation], machine: Machine, kernel) -> dict[int, tuple]:
    """Per op index, the extents its `legato.bounds` names (`arch.bounds.resolve`), with the
    arguments where `machine` placed them."""
    table = {}
    for i, op in enumerate(ops):
        if B.BOUNDS_ATTR in op.attributes:
            try:
                table[i] = B.op_bounds(op)
            except VerifyException as e:
                raise InvalidModuleError(str(e)) from None
    if not table:
        return {}
    names = kernel.attributes.get(ARG_NAMES_ATTR) if kernel is not None else None
    args = {}
    for i, place in enumerate(machine.args):
        if place.addr is not None:
            name = names.data[i].data if names is not None and i < len(names.data) else f"{i}"
            nbytes = place.nbytes  # what was placed (a pim_dram weight: its PIM layout)
            args[i] = (place.addr, nbytes, f"argument {name!r} ({list(place.shape)})")
    return resolve_bounds(table, args)


def _check_bounds(env: ProgramEnv, machine: Machine, op, row, inputs) -> None:
    """`op`'s bounded operands access only their extents, else InterpError at `op`."""
    info = isa.BY_MNEMONIC[op.MNEMONIC]
    fields = {"b": 0} if isinstance(op, B.LdOp) else {f: i for i, f in enumerate("abcd")}
    weight = machine.mpu_weight.get(env.core)
    try:
        spans = access_spans(
            info.format,
            info.mnemonic,
            op.immediate(),
            lambda f: inputs[fields[f]],
            weight.shape if weight is not None else None,
            machine.model,
        )
        check_bounds(row, spans, ADDRESS_FIELDS[info.format])
    except Trap as e:
        raise InterpError(e.cause, op) from None


def _hazard_step(env: ProgramEnv, machine: Machine, op, inputs) -> None:
    """Tell the hazard checker what `op` (just run) accessed: the same footprint the emulator
    sees (`arch.bounds.access_spans`; a dma2d's rows), a DMA with the queue it notified. The
    sync ops tell it themselves (`Machine`)."""
    hz = machine.hazards
    assert hz is not None
    mnemonic = getattr(op, "MNEMONIC", None)
    if mnemonic == "dmawait":
        machine.check_hazard(op, hz.dmawait)
        return
    info = isa.BY_MNEMONIC.get(mnemonic) if mnemonic else None
    if info is None or info.format not in ADDRESS_FIELDS:
        return
    fmt = info.format
    fields = {"b": 0} if isinstance(op, B.LdOp) else {f: i for i, f in enumerate("abcd")}
    weight = machine.mpu_weight.get(env.core)
    spans = access_spans(
        fmt,
        info.mnemonic,
        op.immediate(),
        lambda f: inputs[fields[f]],
        weight.shape if weight is not None else None,
        machine.model,
    )
    if fmt in ("dma", "dma2d"):
        (dst, _), (src, n) = spans["a"], spans["b"]
        if fmt == "dma2d":
            rows, row, dstride, sstride, _, _ = dma2d_geometry(inputs[2], inputs[3])
            src_r, dst_r = rows_of(src, rows, row, sstride), rows_of(dst, rows, row, dstride)
        else:
            src_r, dst_r = [(src, src + n)], [(dst, dst + n)]
        notify, machine.last_signal = machine.last_signal if op.notify is not None else None, None
        machine.check_hazard(op, hz.dma, op, src_r, dst_r, notify)
        return
    writes = ADDRESS_FIELDS[fmt]
    reads = [(a, a + n) for f, (a, n) in spans.items() if not writes[f]]
    if fmt == "vsel" or (fmt in ("mpu_mm", "pim") and op.acc is not None):
        reads.append((spans["a"][0], spans["a"][0] + spans["a"][1]))  # the kept / accumulated dst
    out = [(a, a + n) for f, (a, n) in spans.items() if writes[f]]
    machine.check_hazard(op, hz.access, op, reads, out)


def run_program(interp: Interpreter, env: ProgramEnv, prog, machine: Machine) -> None:
    ops = list(prog.body.block.ops)
    labels = {op.label.data: i for i, op in enumerate(ops) if isinstance(op, B.LabelOp)}
    bounds = _bounds(ops, machine, prog.parent_op())
    pc = 0
    while pc < len(ops) and not env.halted:
        op = ops[pc]
        inputs = tuple(read_operand(env, v, op) for v in op.operands)
        if bounds and pc in bounds:
            _check_bounds(env, machine, op, bounds[pc], inputs)
        results = interp.run_op(op, inputs)
        if machine.hazards is not None:
            _hazard_step(env, machine, op, inputs)
        for v, r in zip(op.results, results):
            write_result(env, v, r)
        if env.jump is not None:
            pc = labels[env.jump]
            env.jump = None
        else:
            pc += 1


def run_kernel(
    module,
    kernel,
    args: Sequence[Any],
    model,
    scheduler: Scheduler,
    extra_functions: Sequence[InterpreterFunctions] = (),
    listeners: Sequence[Interpreter.Listener] = (),
    hazards: bool = True,
) -> tuple[list[BoundArg], Machine]:
    """Run a backend kernel (`machine.run_kernel_programs`); `hazards`: check every access
    and sync op (`arch.hazards`), an unordered pair raising `InterpHazardError`."""

    def functions(machine: Machine, bound: list[BoundArg]) -> list[InterpreterFunctions]:
        return [BackendFunctions(machine), *extra_functions]

    def start(interp: Interpreter, machine: Machine, name: str, core: int | None, prog) -> None:
        env = ProgramEnv(name, core)
        env.regs[1] = machine.table_addr
        env.regs[2] = core_id(core)
        interp.set_data(BackendFunctions, "env", env)
        run_program(interp, env, prog, machine)

    return run_kernel_programs(
        module,
        kernel,
        kernel_specs(kernel),
        args,
        model,
        scheduler,
        functions,
        start,
        listeners,
        hazards=hazards,
    )
