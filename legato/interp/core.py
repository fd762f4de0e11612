"""Interpreter of the `core` dialect: programs over placed buffers, DMA, queues, MPU and VPU.

Execution model (docs/architecture.md, level 2):

* One task per program: `core.program on top`, `on core(i)`, and for `on all_cores` one task per
  core of the model (`core.core_id` = its index). Tasks run concurrently
  (`legato.interp.scheduler`); `core.wait_queue` blocks until an arrival, `core.barrier id count
  n` until n programs reached barrier id, `core.sem_wait` until its semaphore is high enough.
* Memory is `legato.interp.memory`: the machine model's (`legato.targets.bertha.arch`). A
  `!core.buf` value is a `Buf` (address, runtime shape, dtype, element strides). `core.arg i` is the caller's array,
  placed in shared DRAM. `core.alloc` with `offset` is at that byte offset of its core's space;
  without one (before planning) each alloc op gets one fixed slot per core (a bump allocator
  from the top of the space downwards, so it cannot collide with planned offsets); allocs that
  carry the same `buffer` name (the two ends of a transfer) share one slot. A `placement`
  attribute (set by `core-plan-memory` when it spills sram) names the space actually used.
* Buffers are row-major over their runtime dims; `core.subview` keeps the parent's strides.
* `core.dma` copies the runtime extent of its source (or `bytes %n`) at issue and signals its
  arrival; `core.dma_wait` never blocks (see `legato.interp.machine`).
* MPU and VPU ops compute with `legato.interp.semantics` / `legato.numerics` (the rules every
  level and the emulator share).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, IntegerType, StringAttr
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Operation

from legato import numerics
from legato.dialects import core as C
from legato.dialects.core import BUFFER_ATTR
from legato.interp import semantics
from legato.interp.common import BoundArg, as_int, debug_assert, debug_print, np_dtype
from legato.interp.errors import InterpError, MemoryFault
from legato.interp.machine import Machine, run_kernel_programs
from legato.interp.memory import Buf, Memory, row_major_strides
from legato.interp.registry import base_functions
from legato.interp.scheduler import Scheduler
from legato.targets.bertha import mpu_fast, vpu
from legato.targets.bertha.arch import pim
from legato.targets.bertha.arch.address_map import core_space_base
from legato.targets.bertha.arch.modules import core_id
from legato.transforms.plan_memory import PLACEMENT_ATTR
from legato.types import TensorSpec

ALLOC_ALIGN = 64


@dataclass
class ProgramEnv:
    name: str
    core: int | None  # None on top
    barriers: int = 0


@dataclass
class CoreState:
    machine: Machine
    # unplanned allocs: (core, space, alloc op or its `buffer` name) -> offset; per (core,
    # space) the lowest offset handed out so far
    slots: dict[tuple[int, str, Operation | str], int] = field(default_factory=dict)
    low_water: dict[tuple[int, str], int] = field(default_factory=dict)


def _env(interpreter: Interpreter) -> ProgramEnv:
    return interpreter.get_data(CoreFunctions, "env", lambda: ProgramEnv("?", None))


def _index(v: int) -> IntegerAttr:
    return IntegerAttr(v, IntegerType(64), truncate_bits=True)


def buf_type(value) -> C.BufType:
    t = value.type
    assert isinstance(t, C.BufType)
    return t


@register_impls
@dataclass
class CoreFunctions(InterpreterFunctions):
    state: CoreState | None = None

    @property
    def machine(self) -> Machine:
        assert self.state is not None
        return self.state.machine

    @property
    def memory(self) -> Memory:
        return self.machine.memory

    # -- structure --------------------------------------------------------------------------

    @impl_terminator(C.EndOp)
    def run_end(self, interpreter, op, args) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(()), ()

    @impl(C.CoreIdOp)
    def run_core_id(self, interpreter, op, args):
        return (_index(core_id(_env(interpreter).core)),)

    @impl(C.ArgOp)
    def run_arg(self, interpreter, op: C.ArgOp, args):
        i = op.index.data
        if i >= len(self.machine.args):
            raise InterpError(
                f"core.arg {i}: the kernel has {len(self.machine.args)} arguments", op
            )
        place = self.machine.args[i]
        t = op.result.type
        if isinstance(t, C.BufType):
            if place.addr is None:
                raise InterpError(f"core.arg {i} is a scalar argument, not a buffer", op)
            dtype = np_dtype(t.element_type)
            nbytes = int(np.prod(place.shape)) * dtype.itemsize
            extent = (place.addr, place.addr + nbytes, f"argument {i} {list(place.shape)}")
            return (Buf(place.addr, place.shape, dtype, t.space, extent=extent),)
        return (self.state_scalar(i),)

    def state_scalar(self, i: int):
        return self._scalars[i]

    @impl(C.DimOp)
    def run_dim(self, interpreter, op: C.DimOp, args):
        (buf,) = args
        return (_index(buf.shape[op.dim.data]),)

    # -- buffers ----------------------------------------------------------------------------

    @impl(C.AllocOp)
    def run_alloc(self, interpreter, op: C.AllocOp, args):
        t = buf_type(op.result)
        env = _env(interpreter)
        core = op.core.core_index if op.core is not None else env.core
        if op.core_reg is not None:  # another core's copy of an SPMD buffer
            core = as_int(args[-1])
            args = args[:-1]
        if core is None:
            raise InterpError(
                "core.alloc on top needs `on core(i)`: the top module has no memory of its own",
                op,
            )
        if not 0 <= core < self.machine.model.num_cores:
            raise InterpError(
                f"core.alloc on core {core}: the model has {self.machine.model.num_cores} cores", op
            )
        space = op.memory.data
        placement = op.attributes.get(PLACEMENT_ATTR)
        if isinstance(placement, StringAttr):  # core-plan-memory spilled it (sram -> private_dram)
            space = placement.data
        dyn = iter(as_int(a) for a in args)
        shape = tuple(next(dyn) if s == -1 else s for s in t.get_shape())
        for d, (s, b) in enumerate(zip(shape, t.get_bounds())):
            if s < 0 or s > b:
                raise InterpError(f"core.alloc: dim {d} is {s}, outside [0, {b}]", op)
        dtype = np_dtype(t.element_type)
        if space == "mpu_weight":
            return (Buf(-1, shape, dtype, space, core),)
        if op.offset is not None:
            offset = op.offset.value.data
        else:
            name = op.attributes.get(BUFFER_ATTR)
            key = name.data if isinstance(name, StringAttr) else op
            offset = self._slot(core, space, key, t.max_bytes)
        size = self.machine.model.memory_size(space)
        if offset + t.max_bytes > size:
            raise MemoryFault(
                f"core.alloc: {t.max_bytes} bytes at offset {offset} exceed core {core}'s "
                f"{space} ({size} bytes)",
                op,
            )
        base = core_space_base(core, space) + offset
        extent = (base, base + t.max_bytes, f"core {core}'s {space} buffer at offset {offset}")
        return (Buf(base, shape, dtype, space, core, extent=extent),)

    def _slot(self, core: int, space: str, owner: Operation | str, nbytes: int) -> int:
        assert self.state is not None
        key = (core, space, owner)
        if key not in self.state.slots:
            top = self.state.low_water.get((core, space), self.machine.model.memory_size(space))
            offset = (top - nbytes) // ALLOC_ALIGN * ALLOC_ALIGN
            if offset < 0:
                raise MemoryFault(f"unplanned core.alloc: core {core}'s {space} is full")
            self.state.low_water[(core, space)] = offset
            self.state.slots[key] = offset
        return self.state.slots[key]

    @impl(C.SubviewOp)
    def run_subview(self, interpreter, op: C.SubviewOp, args):
        src: Buf = args[0]
        n_off = len(op.offsets)
        dyn_off = iter(as_int(a) for a in args[1 : 1 + n_off])
        dyn_size = iter(as_int(a) for a in args[1 + n_off :])
        offsets = [next(dyn_off) if o == C.DYNAMIC else o for o in op.static_offsets.get_values()]
        sizes = [next(dyn_size) if s == C.DYNAMIC else s for s in op.static_sizes.get_values()]
        strides = src.strides or row_major_strides(src.shape)
        for d, (o, s, b) in enumerate(zip(offsets, sizes, buf_type(op.source).get_bounds())):
            if o < 0 or s < 0 or o + s > b:
                raise InterpError(
                    f"core.subview: dim {d}: offset {o} + size {s} is outside the source's "
                    f"bound {b}",
                    op,
                )
        addr = src.addr + sum(o * st for o, st in zip(offsets, strides)) * src.dtype.itemsize
        view = Buf(addr, tuple(sizes), src.dtype, src.space, src.core, tuple(strides), src.extent)
        return (view,)

    @impl(C.ViewOp)
    def run_view(self, interpreter, op: C.ViewOp, args):
        src: Buf = args[0]
        dyn = iter(as_int(a) for a in args[1:])
        t = buf_type(op.result)
        shape = tuple(next(dyn) if d.is_dynamic else d.size for d in t.dims)
        if not src.is_contiguous:
            raise InterpError("core.view of a non-contiguous buffer", op)
        if int(np.prod(shape)) != int(np.prod(src.shape)):
            raise InterpError(
                f"core.view: {list(src.shape)} has {int(np.prod(src.shape))} elements, the view "
                f"{list(shape)} has {int(np.prod(shape))}",
                op,
            )
        return (Buf(src.addr, shape, src.dtype, src.space, src.core, None, src.extent),)

    # -- data movement ----------------------------------------------------------------------

    @impl(C.DmaOp)
    def run_dma(self, interpreter, op: C.DmaOp, args):
        src: Buf = args[0]
        dst: Buf = args[1]
        mem = self.memory
        if op.nbytes is not None:
            n = as_int(args[2])
            if not (src.is_contiguous and dst.is_contiguous):
                raise InterpError("core.dma bytes %n needs contiguous buffers", op)
            src.check_extent(src.addr, n, False)
            dst.check_extent(dst.addr, n, True)
            mem.copy(dst.addr, src.addr, n)
        elif src.is_contiguous and dst.is_contiguous:
            if src.nbytes > dst.nbytes:
                raise InterpError(
                    f"core.dma: the source's runtime extent {list(src.shape)} ({src.nbytes} "
                    f"bytes) does not fit the destination {list(dst.shape)} ({dst.nbytes} bytes)",
                    op,
                )
            n = src.nbytes
            src.check_extent(src.addr, n, False)
            dst.check_extent(dst.addr, n, True)
            mem.copy(dst.addr, src.addr, n)
        else:
            n = src.nbytes
            data = src.read(mem)
            if data.shape != dst.shape and data.size == dst.size:
                data = data.reshape(dst.shape)
            elif data.shape != dst.shape:
                # a source with fewer rows fills the destination's first rows (a legato memcpy
                # of a shorter source); one that does not fit in every dim is refused
                if len(data.shape) != len(dst.shape) or any(
                    s > d for s, d in zip(data.shape, dst.shape)
                ):
                    raise InterpError(
                        f"core.dma: strided copy of {list(src.shape)} into {list(dst.shape)}", op
                    )
                whole = dst.read(mem)
                whole[tuple(slice(0, s) for s in data.shape)] = data
                data = whole
            dst.write(mem, data)
        machine = self.machine
        machine.dma_bytes += n
        notify = None
        if op.has_notify:
            assert op.notify_space is not None and op.notify_queue is not None
            env = _env(interpreter)
            notify = (
                op.notify_core.core_index  # type: ignore[union-attr]
                if op.notify_core is not None
                else as_int(args[-1]),
                op.notify_space.data,
                op.notify_queue.data,
            )
            machine.signal(*notify, f"{env.name}'s core.dma")
        if machine.hazards is not None:
            if op.nbytes is not None:
                src_r, dst_r = [(src.addr, src.addr + n)], [(dst.addr, dst.addr + n)]
            else:
                src_r, dst_r = src.ranges(), dst.ranges()
            machine.check_hazard(op, machine.hazards.dma, op, src_r, dst_r, notify)
        return ()

    @impl(C.WaitQueueOp)
    def run_wait_queue(self, interpreter, op: C.WaitQueueOp, args):
        env = _env(interpreter)
        if env.core is None:
            raise InterpError("core.wait_queue on top: only cores have queues", op)
        self.machine.wait_arrival(env.core, op.memory.data, op.queue.data, op)
        return ()

    @impl(C.DmaWaitOp)
    def run_dma_wait(self, interpreter, op, args):
        # DMAs complete at issue in the interpreters; the checker counts them in flight
        machine = self.machine
        if machine.hazards is not None:
            machine.check_hazard(op, machine.hazards.dmawait)
        return ()

    @impl(C.PrintOp)
    def run_print(self, interpreter, op: C.PrintOp, args):
        values = [a.read(self.memory) if isinstance(a, Buf) else a for a in args]
        debug_print(self.machine.prints, op, values, _env(interpreter).core)
        return ()

    @impl(C.AssertOp)
    def run_assert(self, interpreter, op: C.AssertOp, args):
        (a,) = args
        debug_assert(op, a.read(self.memory) if isinstance(a, Buf) else a, _env(interpreter).core)
        return ()

    @impl(C.BarrierOp)
    def run_barrier(self, interpreter, op: C.BarrierOp, args):
        self.machine.sync_barrier(op.sync_id.data, op.count.data, op)
        return ()

    @impl(C.SemPostOp)
    def run_sem_post(self, interpreter, op: C.SemPostOp, args):
        self.machine.sem_post(op.sync_id.data, op.count.data, op)
        return ()

    @impl(C.SemWaitOp)
    def run_sem_wait(self, interpreter, op: C.SemWaitOp, args):
        self.machine.sem_wait(op.sync_id.data, op.count.data, op)
        return ()

    # -- MPU --------------------------------------------------------------------------------

    @impl(C.MpuLoadWeightOp)
    def run_mpu_load_weight(self, interpreter, op, args):
        (w,) = args
        core = self._core(interpreter, op)
        self.machine.load_weight(core, w.read(self.memory))
        if self.machine.hazards is not None:
            self._accesses(op, (w,), ())
        return ()

    @impl(C.MpuMatmulOp)
    def run_mpu_matmul(self, interpreter, op: C.MpuMatmulOp, args):
        x, out = args
        core = self._core(interpreter, op)
        w = self.machine.weight(core, op)
        a = x.read(self.memory)
        a2 = a.reshape(-1, a.shape[-1])
        if a2.shape[1] != w.shape[0]:
            raise InterpError(
                f"core.mpu_matmul: input has K = {a2.shape[1]}, the weight tile {list(w.shape)}",
                op,
            )
        o = out.array(self.memory)
        o2 = o.reshape(-1, o.shape[-1]) if o.flags.c_contiguous else None
        if o.shape[-1] != w.shape[1] or int(np.prod(o.shape[:-1])) != a2.shape[0]:
            raise InterpError(
                f"core.mpu_matmul: output {list(o.shape)} does not match input "
                f"{list(a.shape)} @ weight {list(w.shape)}",
                op,
            )
        acc = (o2 if o2 is not None else o.reshape(-1, o.shape[-1])) if op.is_accumulate else None
        r = mpu_fast.matmul(a2, w, acc)
        out.write(self.memory, numerics.round_to(r, o.dtype).reshape(o.shape))
        if self.machine.hazards is not None:
            self._accesses(op, (x, out) if op.is_accumulate else (x,), (out,))
        return ()

    # -- PIM (docs/pim.md) ---------------------------------------------------------------

    @impl(C.PimGemvOp)
    def run_pim_gemv(self, interpreter, op: C.PimGemvOp, args):
        """`core.pim_gemv` as its `pim.gemv`s compute it (`arch.pim.matvec`: the layout's
        operations, the MPU's numerics), without timing."""
        x, w, out = args
        model = self.machine.model
        if not model.use_pim:
            raise InterpError(f"core.pim_gemv on {model.name}, which has no PIM units", op)
        k, n = w.shape
        y = np.array(out.read(self.memory), dtype=np.float32)
        pim.matvec(model, self.memory.bytes, x.read(self.memory), w.addr, k, n, y)
        out.write(self.memory, y)
        if self.machine.hazards is not None:
            # the product reads the weight's whole PIM-layout buffer (`w.ranges()` would cover
            # only k * n bf16 from its base: the layout pads every tile to its channels' blocks)
            span = pim.PimLayout(k, n, model.num_memory_channels).nbytes
            self._check(op, [*x.ranges(), (w.addr, w.addr + span)], out.ranges())
        return ()

    # -- VPU --------------------------------------------------------------------------------

    @impl(C.VpuBinaryOp)
    def run_vpu_binary(self, interpreter, op: C.VpuBinaryOp, args):
        a, b, out = args
        m = self.memory
        r = semantics.binary(op.kind.data, a.read(m), b.read(m), out.dtype)
        out.write(m, self._fit(op, r, out))
        if self.machine.hazards is not None:
            self._accesses(op, (a, b), (out,))
        return ()

    @impl(C.VpuUnaryOp)
    def run_vpu_unary(self, interpreter, op: C.VpuUnaryOp, args):
        x, out = args
        m = self.memory
        kind = op.kind.data
        v = x.read(m)
        if kind == "copy":
            r = v.astype(out.dtype) if v.dtype == out.dtype else semantics.cast(v, out.dtype)
        elif kind == "cast":
            r = semantics.cast(v, out.dtype)
        else:
            r = semantics.unary(kind, v, out.dtype)
        out.write(m, self._fit(op, r, out))
        if self.machine.hazards is not None:
            self._accesses(op, (x,), (out,))
        return ()

    @impl(C.VpuReduceOp)
    def run_vpu_reduce(self, interpreter, op: C.VpuReduceOp, args):
        x, out = args
        m = self.memory
        v = x.read(m)
        if v.shape[-1] == 0 and op.kind.data != "sum":
            raise InterpError(f"core.vpu_reduce {op.kind.data} over an empty row", op)
        r = semantics.reduce(op.kind.data, v, -1, False, out.dtype)
        out.write(m, r.reshape(out.shape))
        if self.machine.hazards is not None:
            self._accesses(op, (x,), (out,))
        return ()

    @impl(C.VpuTransposeOp)
    def run_vpu_transpose(self, interpreter, op: C.VpuTransposeOp, args):
        x, out = args
        v = x.read(self.memory)
        out.write(self.memory, np.ascontiguousarray(v.T).reshape(out.shape))
        if self.machine.hazards is not None:
            self._accesses(op, (x,), (out,))
        return ()

    @impl(C.VpuFillOp)
    def run_vpu_fill(self, interpreter, op: C.VpuFillOp, args):
        (out,) = args
        out.write(self.memory, semantics.full(out.shape, op.value.value.data, out.dtype))
        if self.machine.hazards is not None:
            self._accesses(op, (), (out,))
        return ()

    @impl(C.LoadIndexOp)
    def run_load_index(self, interpreter, op: C.LoadIndexOp, args):
        buf, i = args
        i = as_int(i)
        if not 0 <= i < buf.shape[0]:
            raise InterpError(
                f"core.load_index: element {i} is outside the buffer's {buf.shape[0]} elements",
                op,
            )
        if self.machine.hazards is not None:
            stride = buf.strides[0] if buf.strides else 1
            lo = buf.addr + i * stride * buf.dtype.itemsize
            self._check(op, [(lo, lo + buf.dtype.itemsize)], [])
        return (_index(int(buf.read(self.memory)[i])),)

    @impl(C.VpuSelectOp)
    def run_vpu_select(self, interpreter, op: C.VpuSelectOp, args):
        cond, src, out = args
        m = self.memory
        c, x, o = cond.read(m), src.read(m), out.read(m)
        if not (c.shape == x.shape == o.shape):
            raise InterpError(
                f"core.vpu_select: runtime shapes {list(c.shape)}, {list(x.shape)} and "
                f"{list(o.shape)} differ",
                op,
            )
        out.write(m, vpu.select(c, x, o))
        if self.machine.hazards is not None:
            self._accesses(op, (cond, src, out), (out,))
        return ()

    # -- helpers ----------------------------------------------------------------------------

    def _accesses(self, op: Operation, reads: Sequence[Buf], writes: Sequence[Buf]) -> None:
        """Tell the hazard checker (on) that `op` read the buffers `reads` and wrote `writes`."""
        self._check(
            op, [r for b in reads for r in b.ranges()], [r for b in writes for r in b.ranges()]
        )

    def _check(self, op: Operation, reads: list, writes: list) -> None:
        machine = self.machine
        assert machine.hazards is not None
        machine.check_hazard(op, machine.hazards.access, op, reads, writes)

    @staticmethod
    def _fit(op: Operation, r: np.ndarray, out: Buf) -> np.ndarray:
        try:
            return np.broadcast_to(r, out.shape)
        except ValueError:
            raise InterpError(
                f"result of runtime shape {list(r.shape)} does not broadcast to the output "
                f"{list(out.shape)}",
                op,
            ) from None

    def _core(self, interpreter, op) -> int:
        core = _env(interpreter).core
        if core is None:
            raise InterpError(f"{op.name} on top: the top module has no MPU/VPU", op)
        return core


def structural_ops() -> set[type[Operation]]:
    return {C.KernelOp, C.ProgramOp}


def kernel_specs(kernel: C.KernelOp) -> list:
    """Per argument: its TensorSpec, or the scalar type attribute."""
    out = []
    for a in kernel.args.data:
        t = a.type
        out.append(t.to_spec() if isinstance(t, C.BufType) else t)
    return out


def run_kernel(
    module,
    kernel: C.KernelOp,
    args: Sequence[Any],
    model,
    scheduler: Scheduler,
    extra_functions: Sequence[InterpreterFunctions] = (),
    listeners: Sequence[Interpreter.Listener] = (),
    hazards: bool = True,
) -> tuple[list[BoundArg], Machine]:
    """Run a core kernel (`machine.run_kernel_programs`); `hazards`: check every access and
    sync op (`arch.hazards`), an unordered pair raising `InterpHazardError`."""
    specs = kernel_specs(kernel)

    def functions(machine: Machine, bound: list[BoundArg]) -> list[InterpreterFunctions]:
        impls = CoreFunctions(CoreState(machine))
        impls._scalars = {  # type: ignore[attr-defined]
            i: b.value
            for i, (s, b) in enumerate(zip(specs, bound))
            if not isinstance(s, TensorSpec)
        }
        return [impls, *base_functions(), *extra_functions]

    def start(
        interp: Interpreter, machine: Machine, name: str, core: int | None, prog: C.ProgramOp
    ) -> None:
        interp.set_data(CoreFunctions, "env", ProgramEnv(name, core))
        interp.run_ssacfg_region(prog.body, (), f"program @{prog.sym_name.data}")

    return run_kernel_programs(
        module, kernel, specs, args, model, scheduler, functions, start, listeners, hazards
    )
