"""Interpreter of the `legato` dialect: value-semantics tensors as numpy arrays.

Execution model (docs/architecture.md, level 1):

* One task per module with its own PC: `top`, and `core i` for every core a `legato.on core(i)`
  names (every core of the model when an `all_cores` region exists). A task runs, in kernel
  order, each `legato.on` whose context includes it (`all_cores` regions run on every core, with
  `legato.core_id` = the core's index). Tasks run concurrently (`legato.interp.scheduler`).
* Kernel arguments are the caller's arrays (written in place by `legato.memcpy`).
* `legato.request_load` puts a *copy* of its source into the FIFO of (target core, space, queue);
  `legato.receive` / `legato.receive_type` block until that FIFO has an entry and take it.
* `legato.memcpy %dst, %src` writes the runtime extent of `%src` into `%dst`'s array in place.
* Tensor ops compute by `legato.interp.semantics` (the rules shared with the other levels).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
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

from legato import opset
from legato.dialects import legato as L
from legato.interp import semantics
from legato.interp.common import BoundArg, as_int, debug_assert, debug_print, np_dtype
from legato.interp.errors import InterpError, UnsupportedOpError, describe_op
from legato.interp.machine import HazardHooks
from legato.interp.registry import base_functions
from legato.interp.scheduler import Scheduler, StepListener
from legato.targets.bertha import vpu
from legato.targets.bertha.arch.dma import ArrivalQueues
from legato.targets.bertha.arch.hazards import HazardChecker
from legato.targets.bertha.arch.sync import Barriers, Semaphores


@dataclass
class Transfer:
    value: np.ndarray
    sender: str
    op: Operation


@dataclass
class LegatoMachine(HazardHooks):
    """State shared by every task of one legato-level run. With the hazard checker on
    (`hazards`), the arguments' bytes are its memory: argument i at `shared[i]` = (host
    address, end, checker address, name), the checker's addresses laid out as in shared DRAM."""

    scheduler: Scheduler
    num_cores: int
    # (core, space, queue) -> the transfers sent and not yet received, FIFO
    queues: ArrivalQueues = field(default_factory=ArrivalQueues)
    transfers: int = 0
    # legato.barrier: one barrier of every core; legato.signal/wait: keyed (context, sem)
    barriers: Barriers = field(default_factory=Barriers)
    semaphores: Semaphores = field(default_factory=Semaphores)
    prints: list = field(default_factory=list)  # the run's device_prints (`arch.debug`)
    hazards: HazardChecker | None = None
    task_index: dict[str, int] = field(default_factory=dict)
    shared: list[tuple[int, int, int, str]] = field(default_factory=list)

    def ranges(self, value) -> list[tuple[int, int]]:
        """The checker's byte ranges of `value` when it is (a view of) an argument's array,
        else [] (any other tensor is one task's own value, which no other task can see)."""
        if not isinstance(value, np.ndarray) or value.size == 0:
            return []
        p = value.__array_interface__["data"][0]
        span = next((a for a in self.shared if a[0] <= p < a[1]), None)
        if span is None:
            return []
        p += span[2] - span[0]
        item, shape, strides = value.itemsize, value.shape, value.strides
        if value.flags.c_contiguous:
            return [(p, p + value.nbytes)]
        if any(st < 0 for st in strides):  # (not made by any op today) its bounding span
            lo = p + sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)
            hi = p + sum((n - 1) * st for n, st in zip(shape, strides) if st > 0) + item
            return [(lo, hi)]
        inner, run = len(shape), item  # the innermost dims that are one contiguous run
        while inner > 0 and (shape[inner - 1] == 1 or strides[inner - 1] == run):
            inner -= 1
            run *= shape[inner]
        return [
            (p + o, p + o + run)
            for o in (
                sum(i * st for i, st in zip(idx, strides)) for idx in np.ndindex(*shape[:inner])
            )
        ]

    def region_name(self, addr: int, n: int) -> str:
        for lo, hi, base, name in self.shared:
            if base <= addr < base + hi - lo:
                return name
        return "?"

    def queue(self, core: int, space: str, q: int) -> deque[Transfer]:
        return self.queues.fifo((core, space, q))

    def pending(self) -> list[str]:
        """Transfers sent but never received (for deadlock reports)."""
        out = []
        for (core, space, q), fifo in self.queues.pending():
            first = fifo[0]
            out.append(
                f"core {core} memory {space} queue {q} holds {len(fifo)} unreceived "
                f"transfer(s), the first sent by {first.sender} in {describe_op(first.op)}"
            )
        return out


@dataclass
class TaskEnv:
    """Per-task data: the module's name and core index (None on top)."""

    name: str
    core: int | None


def _env(interpreter: Interpreter) -> TaskEnv:
    return interpreter.get_data(LegatoFunctions, "env", lambda: TaskEnv("?", None))


def runtime_shape_error(op: Operation, msg: str) -> InterpError:
    return InterpError(msg, op)


def _elementwise_impl(row: opset.OpKind):
    """The impl of the legato op of `row`: `semantics.binary/unary(row.kind, ...)`."""

    def run(self, interpreter, op, args):
        f = self._binary if row.family == opset.BINARY else self._unary
        return f(row.kind, op, args)

    return impl(L.ELEMENTWISE_OPS[row.name])(run)


@register_impls
@dataclass
class LegatoFunctions(InterpreterFunctions):
    machine: LegatoMachine | None = None

    @property
    def _detached_copies(self) -> set[int]:
        """ids of reshape results that are copies, not views, of a tensor (see run_reshape)."""
        return self.__dict__.setdefault("_detached_ids", set())

    @property
    def _detached_keep(self) -> list:
        return self.__dict__.setdefault("_detached_arrays", [])

    # -- structure --------------------------------------------------------------------------

    @impl_terminator(L.YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: L.YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()

    @impl_terminator(L.ReturnOp)
    def run_return(
        self, interpreter: Interpreter, op: L.ReturnOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(()), ()

    @impl(L.OnOp)
    def run_on(self, interpreter: Interpreter, op: L.OnOp, args: PythonValues) -> PythonValues:
        # Reached only when a legato.on is nested inside another region; the kernel driver runs
        # top-level ones itself (each on the tasks of its context).
        raise InterpError("legato.on must be directly inside legato.kernel", op)

    @impl(L.DevicePrintOp)
    def run_device_print(self, interpreter: Interpreter, op: L.DevicePrintOp, args):
        assert self.machine is not None
        debug_print(self.machine.prints, op, args, _env(interpreter).core)
        return ()

    @impl(L.DeviceAssertOp)
    def run_device_assert(self, interpreter: Interpreter, op: L.DeviceAssertOp, args):
        debug_assert(op, args[0], _env(interpreter).core)
        return ()

    @impl(L.CoreIdOp)
    def run_core_id(self, interpreter: Interpreter, op: L.CoreIdOp, args: PythonValues):
        env = _env(interpreter)
        if env.core is None:
            raise InterpError("legato.core_id used outside a core context", op)
        return (IntegerAttr(env.core, 64),)

    @impl(L.DimOp)
    def run_dim(self, interpreter: Interpreter, op: L.DimOp, args: PythonValues):
        return (IntegerAttr(args[0].shape[op.dim.data], 64),)

    @impl(L.DynamicSliceOp)
    def run_dynamic_slice(self, interpreter: Interpreter, op: L.DynamicSliceOp, args):
        x = args[0]
        n_off = len(op.offsets)
        dyn_off = iter(a.value.data for a in args[1 : 1 + n_off])
        dyn_size = iter(a.value.data for a in args[1 + n_off :])
        index = []
        for d, (o, s) in enumerate(
            zip(op.static_offsets.get_values(), op.static_sizes.get_values())
        ):
            o = next(dyn_off) if o == L.DYNAMIC_INDEX else o
            s = next(dyn_size) if s == L.DYNAMIC_INDEX else s
            if o < 0 or s < 0 or o + s > x.shape[d]:
                raise InterpError(
                    f"dynamic slice dim {d}: offset {o} + size {s} is outside the runtime size "
                    f"{x.shape[d]}",
                    op,
                )
            index.append(slice(o, o + s))
        # a view: a memcpy into a slice of an output writes the output (as at the core level)
        return (x[tuple(index)],)

    @impl(L.LoadOp)
    def run_load(self, interpreter: Interpreter, op: L.LoadOp, args):
        if _env(interpreter).core is None:
            raise InterpError("legato.load runs on top; only a core has memory to load into", op)
        return (np.array(args[0], copy=True),)

    @impl(L.BarrierOp)
    def run_barrier(self, interpreter: Interpreter, op: L.BarrierOp, args):
        m = self.machine
        assert m is not None
        gen, _ = m.barriers.arrive(0, m.num_cores)
        if m.hazards is not None:
            m.check_hazard(op, m.hazards.barrier_arrive, (0, gen))
        m.scheduler.block_until(
            lambda: m.barriers.passed(0, gen),
            op,
            f"barrier of all {m.num_cores} cores ({m.barriers.arrived(0)} arrived)",
        )
        if m.hazards is not None:
            m.check_hazard(op, m.hazards.barrier_release, (0, gen))
        return ()

    @staticmethod
    def _ctx_name(core: int | None) -> str:
        return "top" if core is None else f"core({core})"

    @impl(L.SignalOp)
    def run_signal(self, interpreter: Interpreter, op: L.SignalOp, args):
        m = self.machine
        assert m is not None
        key = (op.target.spelling, op.sem.data)
        if m.hazards is not None:
            m.check_hazard(op, m.hazards.sem_post, key, op.count.data)
        m.semaphores.post(key, op.count.data)
        return ()

    @impl(L.WaitOp)
    def run_wait(self, interpreter: Interpreter, op: L.WaitOp, args):
        assert self.machine is not None
        env = _env(interpreter)
        key = (self._ctx_name(env.core), op.sem.data)
        sems, count = self.machine.semaphores, op.count.data
        self.machine.scheduler.block_until(
            lambda: sems.ready(key, count),
            op,
            f"semaphore {op.sem.data} of {key[0]} >= {count} (it is {sems.value(key)})",
        )
        sems.take(key, count)
        if self.machine.hazards is not None:
            self.machine.check_hazard(op, self.machine.hazards.sem_wait, key, count)
        return ()

    # -- data movement ----------------------------------------------------------------------

    @impl(L.RequestLoadOp)
    def run_request_load(self, interpreter: Interpreter, op: L.RequestLoadOp, args):
        src = args[0]
        assert self.machine is not None
        # a runtime target (in an all_cores region): the core this instance computed
        core = as_int(args[1]) if op.target_core is not None else op.target.core_index
        if core is None or not 0 <= core < self.machine.num_cores:
            raise InterpError(
                f"request_load targets core {core}, but the model has "
                f"{self.machine.num_cores} cores",
                op,
            )
        self.machine.queue(core, op.memory.data, op.queue.data).append(
            Transfer(np.array(src, copy=True), _env(interpreter).name, op)
        )
        self.machine.transfers += 1
        m = self.machine
        if m.hazards is not None:  # a transfer reading src until the receive orders it
            key = (core, op.memory.data, op.queue.data)
            m.check_hazard(op, m.hazards.dma, op, m.ranges(src), [], key)
        return ()

    def _take(self, interpreter: Interpreter, op: Operation, space: str, q: int) -> Transfer:
        assert self.machine is not None
        env = _env(interpreter)
        if env.core is None:
            raise InterpError(f"{op.name} runs on top; only a core can receive", op)
        fifo = self.machine.queue(env.core, space, q)
        self.machine.scheduler.block_until(
            lambda: bool(fifo), op, f"a transfer on core {env.core} memory {space} queue {q}"
        )
        m = self.machine
        if m.hazards is not None:
            m.check_hazard(op, m.hazards.qwait, (env.core, space, q))
        return fifo.popleft()

    @staticmethod
    def _check_arrival(op: Operation, t: Transfer, shape: Sequence[int], dtype) -> np.ndarray:
        v = t.value
        if tuple(v.shape) != tuple(shape) or v.dtype != dtype:
            raise InterpError(
                f"received a {v.dtype} tensor of shape {list(v.shape)} (sent by {t.sender} "
                f"from '{t.op.name}'), expected {np.dtype(dtype)} of shape {list(shape)}",
                op,
            )
        return v

    @impl(L.ReceiveOp)
    def run_receive(self, interpreter: Interpreter, op: L.ReceiveOp, args):
        (like,) = args
        t = self._take(interpreter, op, op.memory.data, op.queue.data)
        return (self._check_arrival(op, t, like.shape, np_dtype(op.result.type.element_type)),)

    @impl(L.ReceiveTypeOp)
    def run_receive_type(self, interpreter: Interpreter, op: L.ReceiveTypeOp, args):
        rt = op.result.type
        assert isinstance(rt, L.TensorType)
        shape = args[0].shape if args else rt.get_shape()
        t = self._take(interpreter, op, op.memory.data, op.queue.data)
        return (self._check_arrival(op, t, shape, np_dtype(rt.element_type)),)

    @impl(L.MemcpyOp)
    def run_memcpy(self, interpreter: Interpreter, op: L.MemcpyOp, args):
        dst, src = args
        if id(dst) in self._detached_copies:
            raise InterpError(
                "memcpy into a reshape of a strided slice: the reshape is a copy, so the write "
                "would not reach the sliced tensor (memcpy into the slice itself, or reshape the "
                "source instead)",
                op,
            )
        if any(s > d for s, d in zip(src.shape, dst.shape)):
            raise InterpError(
                f"memcpy of a {list(src.shape)} tensor into a {list(dst.shape)} one: the "
                "source's runtime extent does not fit",
                op,
            )
        dst[tuple(slice(0, s) for s in src.shape)] = src
        return ()

    # -- tensor ops -------------------------------------------------------------------------

    @impl(L.MatmulOp)
    def run_matmul(self, interpreter: Interpreter, op: L.MatmulOp, args):
        a, b = args
        out_dtype = np_dtype(op.result.type.element_type)
        lead = a.shape[:-1]
        r = semantics.matmul(a.reshape(-1, a.shape[-1]), b, out_dtype)
        return (r.reshape(*lead, b.shape[1]),)

    def _binary(self, name: str, op: Operation, args):
        a, b = args
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise InterpError(
                f"runtime shapes {list(a.shape)} and {list(b.shape)} do not broadcast", op
            ) from None
        return (semantics.binary(name, a, b, np_dtype(op.result.type.element_type)),)

    def _unary(self, name: str, op: Operation, args):
        return (semantics.unary(name, args[0], np_dtype(op.result.type.element_type)),)

    # one impl per elementwise op of the op table: semantics.binary/unary by the row's kind
    for _row in (*opset.legato_binary(), *opset.legato_unary()):
        locals()[f"run_{_row.name}"] = _elementwise_impl(_row)
    del _row

    @impl(L.ClampOp)
    def run_clamp(self, interpreter, op: L.ClampOp, args):
        return (semantics.clamp(args[0], *op.bounds),)

    @impl(L.WhereOp)
    def run_where(self, interpreter, op: L.WhereOp, args):
        c, a, b = args
        try:
            shape = np.broadcast_shapes(c.shape, a.shape, b.shape)
        except ValueError:
            raise InterpError(
                f"runtime shapes {list(c.shape)}, {list(a.shape)} and {list(b.shape)} do not "
                "broadcast",
                op,
            ) from None

        def bc(x):
            return np.ascontiguousarray(np.broadcast_to(x, shape))

        return (vpu.select(bc(c), bc(a), bc(b)),)

    @impl(L.GatherOp)
    def run_gather(self, interpreter, op: L.GatherOp, args):
        table, *given = args
        picked = []
        for d, idx in enumerate(given):
            rows = table.shape[d]
            if d == 0 and op.offset is not None:  # int64, wrapping as the scalar unit's add
                idx = idx + np.int64(op.offset.value.data)
            if op.wrap is not None:
                idx = np.where(idx < 0, idx + rows, idx)
            bad = (idx < 0) | (idx >= rows)
            if bad.any():
                span = f"[{-rows}, {rows})" if op.wrap is not None else f"[0, {rows})"
                what = f"{rows} rows" if d == 0 else f"dim {d} of size {rows}"
                shift = f" + offset {op.offset.value.data}" if d == 0 and op.offset else ""
                raise InterpError(
                    f"legato.gather: index {int(given[d][bad].flat[0])}{shift} is outside the "
                    f"table's {what} (valid: {span})",
                    op,
                )
            picked.append(idx)
        return (np.ascontiguousarray(table[tuple(picked)]),)

    @impl(L.ScatterOp)
    def run_scatter(self, interpreter, op: L.ScatterOp, args):
        table, idx, rows = args
        n = table.shape[0]
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            raise InterpError(
                f"legato.scatter: index {int(idx[bad].flat[0])} is outside the table's {n} rows",
                op,
            )
        table[idx.reshape(-1)] = rows.reshape((-1, *table.shape[1:]))
        return ()

    @impl(L.CastOp)
    def run_cast(self, interpreter, op: L.CastOp, args):
        return (semantics.cast(args[0], np_dtype(op.result.type.element_type)),)

    def _reduce(self, name: str, op: L.ReductionOp, args):
        x = args[0]
        if name in ("max", "min") and x.shape[op.dim.data] == 0:
            raise InterpError(f"{op.name} over dim {op.dim.data}, which is empty at run time", op)
        return (
            semantics.reduce(
                name,
                x,
                op.dim.data,
                bool(op.keepdim.value.data),
                np_dtype(op.result.type.element_type),
            ),
        )

    @impl(L.SumOp)
    def run_sum(self, interpreter, op, args):
        return self._reduce("sum", op, args)

    @impl(L.MeanOp)
    def run_mean(self, interpreter, op, args):
        return self._reduce("mean", op, args)

    @impl(L.AmaxOp)
    def run_amax(self, interpreter, op, args):
        return self._reduce("max", op, args)

    @impl(L.AminOp)
    def run_amin(self, interpreter, op, args):
        return self._reduce("min", op, args)

    @impl(L.ReshapeOp)
    def run_reshape(self, interpreter, op: L.ReshapeOp, args):
        (x,) = args
        rt = op.result.type
        shape = list(rt.get_shape())
        dyn = [i for i, s in enumerate(shape) if s == -1]
        if len(dyn) > 1:
            raise InterpError(
                f"reshape to {rt.dims_str()} has {len(dyn)} dynamic dims; their runtime sizes "
                "cannot be inferred (at most one dynamic dim)",
                op,
            )
        static = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if dyn:
            if static == 0 or x.size % static:
                raise InterpError(
                    f"cannot reshape a runtime {list(x.shape)} tensor to {rt.dims_str()}", op
                )
            shape[dyn[0]] = x.size // static
        if int(np.prod(shape, dtype=np.int64)) != x.size:
            raise InterpError(f"cannot reshape a runtime {list(x.shape)} tensor to {shape}", op)
        # A view when numpy can make one (as a slice is), so that a memcpy into the reshape of
        # an argument's slice writes the argument. When it cannot (a strided slice), the result
        # is a copy, remembered so that a memcpy into it is refused rather than lost.
        y = x.reshape(shape)
        if x.size and not np.shares_memory(y, x):
            self._detached_copies.add(id(y))
            self._detached_keep.append(y)  # keeps the id unique while the run lasts
        return (y,)

    @impl(L.TransposeOp)
    def run_transpose(self, interpreter, op: L.TransposeOp, args):
        return (np.ascontiguousarray(np.transpose(args[0], op.perm.get_values())),)

    @impl(L.BroadcastToOp)
    def run_broadcast_to(self, interpreter, op: L.BroadcastToOp, args):
        (x,) = args
        rt = op.result.type
        shape = list(rt.get_shape())
        offset = rt.rank - x.ndim
        for i, s in enumerate(shape):
            if s == -1:
                if i < offset:
                    raise InterpError(
                        f"broadcast_to {rt.dims_str()}: new leading dim {i} is dynamic; its "
                        "runtime size is unknown",
                        op,
                    )
                shape[i] = x.shape[i - offset]
        try:
            return (np.broadcast_to(x, shape).copy(),)
        except ValueError:
            raise InterpError(
                f"cannot broadcast a runtime {list(x.shape)} tensor to {shape}", op
            ) from None

    @impl(L.SliceOp)
    def run_slice(self, interpreter, op: L.SliceOp, args):
        (x,) = args
        index = []
        for d, (o, s, st) in enumerate(
            zip(
                op.static_offsets.get_values(),
                op.static_sizes.get_values(),
                op.static_strides.get_values(),
            )
        ):
            if s == -1:
                index.append(slice(None))
                continue
            if s > 0 and o + (s - 1) * st >= x.shape[d]:
                raise InterpError(
                    f"slice dim {d}: offset {o}, size {s}, stride {st} reads past the runtime "
                    f"size {x.shape[d]}",
                    op,
                )
            index.append(slice(o, o + s * st, st) if s > 0 else slice(0, 0))
        # a view (as legato.dynamic_slice): a memcpy into a column slice of an output writes
        # the output, as at the core level
        return (x[tuple(index)],)

    @impl(L.CatOp)
    def run_cat(self, interpreter, op: L.CatOp, args):
        try:
            return (np.concatenate(args, axis=op.dim.data),)
        except ValueError as e:
            raise InterpError(f"runtime shapes do not concatenate: {e}", op) from None

    @impl(L.ConstantOp)
    def run_constant(self, interpreter, op: L.ConstantOp, args):
        rt = op.result.type
        return (semantics.full(rt.get_shape(), op.scalar, np_dtype(rt.element_type)),)


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def kernel_specs(kernel: L.KernelOp):
    """Per argument: its TensorSpec, or the scalar type attribute."""
    return [t.to_spec() if isinstance(t, L.TensorType) else t for t in kernel.function_type.inputs]


def _contexts_of(kernel: L.KernelOp, num_cores: int) -> list[tuple[str, int | None]]:
    cores: set[int] = set()
    all_cores = False
    for op in kernel.body.block.ops:
        if isinstance(op, L.OnOp):
            if op.ctx.is_core:
                idx = op.ctx.core_index
                if idx is None or idx >= num_cores:
                    raise InterpError(f"legato.on core({idx}): the model has {num_cores} cores", op)
                cores.add(idx)
            elif op.ctx.is_all_cores:
                all_cores = True
        elif not isinstance(op, L.ReturnOp):
            raise UnsupportedOpError(
                "only legato.on and legato.return may appear directly in a legato.kernel", op
            )
    if all_cores:
        cores = set(range(num_cores))
    return [("top", None)] + [(f"core {i}", i) for i in sorted(cores)]


def _runs_on(ctx: L.ContextAttr, core: int | None) -> bool:
    if ctx.is_top:
        return core is None
    if ctx.is_all_cores:
        return core is not None
    return core is not None and ctx.core_index == core


# ops whose tensor operands are not data they read: views, shapes, the sync ops, the receive's
# shape operand; a request_load's source is read by its transfer (`run_request_load`)
_READS_NOTHING = (
    L.DynamicSliceOp,
    L.SliceOp,
    L.DimOp,
    L.ReceiveOp,
    L.ReceiveTypeOp,
    L.RequestLoadOp,
    L.YieldOp,
    L.ReturnOp,
)


class HazardListener(Interpreter.Listener):
    """Tells the hazard checker what every legato op a task runs reads and writes of the
    arguments' memory (`LegatoMachine.ranges`): each tensor operand is read, except by the ops
    of `_READS_NOTHING` (a reshape reads only when it copies: a non-contiguous input);
    `memcpy` and `scatter` write their first operand, as transfers."""

    def __init__(self, machine: LegatoMachine):
        self.machine = machine

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        if not op.name.startswith("legato.") or isinstance(op, _READS_NOTHING):
            return
        m = self.machine
        writes: list = []
        copy = isinstance(op, (L.MemcpyOp, L.ScatterOp))
        if copy:
            writes, args = m.ranges(args[0]), args[1:]
        elif isinstance(op, L.ReshapeOp) and args[0].flags.c_contiguous:
            return
        reads = [r for a in args for r in m.ranges(a)]
        if reads or writes:
            assert m.hazards is not None
            # a memcpy / scatter is DMAs below this level: two of them writing the same
            # bytes are no hazard there (`HazardChecker.access`), so none here either
            m.check_hazard(op, m.hazards.access, op, reads, writes, copy)

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        pass


def run_kernel(
    module,
    kernel: L.KernelOp,
    bound: list[BoundArg],
    num_cores: int,
    scheduler: Scheduler,
    extra_functions: Sequence[InterpreterFunctions] = (),
    listeners: Sequence[Interpreter.Listener] = (),
    hazards: bool = True,
) -> LegatoMachine:
    """Run `kernel` with the bound arguments; returns the machine (for statistics).
    `hazards`: check the tasks' accesses of the arguments and their sync ops (`arch.hazards`),
    an unordered pair raising `InterpHazardError`."""

    machine = LegatoMachine(scheduler, num_cores)
    scheduler.deadlock_notes = machine.pending
    functions = LegatoFunctions(machine)
    contexts = _contexts_of(kernel, num_cores)
    arg_values = [b.value for b in bound]
    if hazards:
        base = 0
        for i, v in enumerate(arg_values):
            if isinstance(v, np.ndarray) and v.size:
                lo = v.__array_interface__["data"][0]
                span = v.nbytes  # bound arguments are contiguous (`legato.binding`)
                machine.shared.append((lo, lo + span, base, f"argument {i}"))
                base += (span + 63) // 64 * 64
        machine.start_hazards(
            [(name, kernel.sym_name.data) for name, _core in contexts], machine.region_name
        )
        listeners = (*listeners, HazardListener(machine))

    def make_body(name: str, core: int | None):
        def body(task) -> None:
            interp = Interpreter(module, listeners=(StepListener(scheduler), *listeners))
            interp.register_implementations(functions)
            for f in (*base_functions(), *extra_functions):
                interp.register_implementations(f)
            interp.set_data(LegatoFunctions, "env", TaskEnv(name, core))
            interp.set_values(zip(kernel.body.block.args, arg_values))
            results: dict[Operation, PythonValues] = {}
            for op in kernel.body.block.ops:
                if not isinstance(op, L.OnOp) or not _runs_on(op.ctx, core):
                    continue
                inputs = []
                for v in op.inputs:
                    owner = v.owner
                    assert isinstance(owner, L.OnOp)
                    inputs.append(results[owner][v.index])
                scheduler.step(op)
                out = interp.run_ssacfg_region(op.body, tuple(inputs), f"on {op.ctx.spelling}")
                results[op] = out

        return body

    for name, core in contexts:
        scheduler.spawn(name, make_body(name, core))
    scheduler.run()
    return machine


def scalar_to_python(v: Any):
    if isinstance(v, IntegerAttr):
        return v.value.data
    if isinstance(v, FloatAttr):
        return v.value.data
    return v
