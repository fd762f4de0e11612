"""The simulated chip state shared by the core- and backend-level interpreters, on the machine
model the emulator uses too (`legato.targets.bertha.arch`):

* `memory`: the physical address space (`legato.interp.memory`), with the kernel's arguments
  placed in shared DRAM (on the caller's own arrays) and the Instruction Table after them.
* `arrivals`: per (core, space, queue), who sent each DMA completion not yet consumed
  (`core.wait_queue` / `qwait` consume one, FIFO: `arch.dma.ArrivalQueues`).
* `mpu_weight`: each core's stationary weight tile (`core.mpu_load_weight` / `mpu.ldw`).
* Barriers and semaphores (`arch.sync`).

DMA timing: the interpreters complete a DMA when it is issued (data copied, arrival signalled),
one legal schedule of the asynchronous hardware; `dma_wait` / `dmawait` therefore never block.
The emulator models the real timing; a program whose result depends on the schedule has a race,
which the hazard checker (`hazards`, `arch.hazards`; the legato level's too, `HazardHooks`) reports
whatever the schedule: it counts a DMA in flight until a wait orders it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions

from legato import numerics
from legato.dialects.legato import dtype_of_element_type
from legato.interp.common import BoundArg, bind_args
from legato.interp.errors import (
    InterpError,
    InterpHazardError,
    InvalidModuleError,
    describe_location,
    op_name,
)
from legato.interp.memory import Memory
from legato.interp.scheduler import Scheduler, StepListener
from legato.targets.bertha import mpu_fast
from legato.targets.bertha.abi import ArgLayout, ScalarSpec
from legato.targets.bertha.arch import pim
from legato.targets.bertha.arch.dma import ArrivalQueues
from legato.targets.bertha.arch.errors import Trap
from legato.targets.bertha.arch.hazards import HazardChecker, HazardError
from legato.targets.bertha.arch.modules import context_cores
from legato.targets.bertha.arch.sync import Barriers, Semaphores
from legato.types import DType, TensorSpec, i64


@dataclass
class ArgPlacement:
    spec: TensorSpec | Any
    addr: int | None  # tensors: address in shared DRAM
    shape: tuple[int, ...] | None
    nbytes: int = 0  # tensors: the bytes placed (a pim_dram weight: its PIM layout's)


class HazardHooks:
    """What both interpreters' machines (`Machine`, `legato.LegatoMachine`) share to call the
    hazard checker: `hazards` (the checker, None: off), `task_index` (each task's index in it,
    by task name) and the `scheduler` (which task is running)."""

    scheduler: Scheduler
    hazards: HazardChecker | None
    task_index: dict[str, int]

    def hazard_module(self) -> int:
        """The checker's index of the running task."""
        return self.task_index[self.scheduler.current.name]  # type: ignore[union-attr]

    def check_hazard(self, op, hook, *args) -> None:
        """Call checker `hook(running module, *args)`; a hazard becomes an `InterpHazardError`
        at `op` (the scheduler passes InterpErrors through)."""
        try:
            hook(self.hazard_module(), *args)
        except HazardError as e:
            raise InterpHazardError(e, op) from None

    def start_hazards(self, tasks: Sequence[tuple[str, str]], region_name) -> None:
        """Turn the checker on for `tasks` ((task name, program name), the checker's module
        indices in order); `region_name(address, n)` names the allocation of a report."""
        self.task_index = {name: i for i, (name, _prog) in enumerate(tasks)}

        def describe(idx: int, op) -> tuple:
            name, prog = tasks[idx]
            loc = describe_location(op) if op is not None else None
            source = None
            if loc:
                file, line, col = loc.rsplit(":", 2)
                source = (file, int(line), int(col))
            text = op_name(op) if op is not None else "?"
            return name, prog, None, text + (f" at {loc}" if loc else ""), source

        self.hazards = HazardChecker(
            len(tasks),
            describe,
            lambda a, n: False,  # the interpreters map no memory read-only
            region_name,
        )


@dataclass
class Machine(HazardHooks):
    model: Any
    scheduler: Scheduler
    memory: Memory
    args: list[ArgPlacement] = field(default_factory=list)
    table_addr: int = 0
    # per (core, space, queue): who sent each arrival not yet consumed
    arrivals: ArrivalQueues = field(default_factory=ArrivalQueues)
    mpu_weight: dict[int, numerics.MpuWeight] = field(default_factory=dict)
    barriers: Barriers = field(default_factory=Barriers)
    semaphores: Semaphores = field(default_factory=Semaphores)
    num_programs: int = 0
    transfers: int = 0
    dma_bytes: int = 0
    # the hazard checker (None: off) and each task's index in it, by task name
    hazards: HazardChecker | None = None
    task_index: dict[str, int] = field(default_factory=dict)
    last_signal: tuple | None = None  # the queue the last DMA notified (the checker's key)
    prints: list = field(default_factory=list)  # the run's device_prints (`arch.debug`)

    # -- arguments ------------------------------------------------------------------------

    def place_args(self, specs: Sequence[Any], args: Sequence[Any], kernel: str) -> list[BoundArg]:
        """Bind and check `args`, map tensors into shared DRAM, write the Instruction Table."""
        bound = bind_args(specs, args, kernel)
        for i, (spec, b) in enumerate(zip(specs, bound)):
            if isinstance(spec, TensorSpec):
                arr: np.ndarray = b.value
                raw = arr.reshape(-1).view(np.uint8) if arr.size else np.zeros(0, np.uint8)
                if spec.memory == "pim_dram":  # a weight for the PIM units (docs/pim.md)
                    raw = pim.pack_argument(self.model, arr, f"argument {i}")
                nbytes = int(raw.size)
                if raw.size == 0:
                    raw = np.zeros(8, np.uint8)  # an empty tensor still has an address
                addr = self.memory.place_shared(raw, f"argument {i}")
                self.args.append(ArgPlacement(spec, addr, tuple(arr.shape), nbytes))
            else:
                self.args.append(ArgPlacement(spec, None, None))
        self._write_table(specs, bound)
        return bound

    def _write_table(self, specs: Sequence[Any], bound: list[BoundArg]) -> None:
        layout_specs = []
        values = []
        shapes = []
        for spec, place, b in zip(specs, self.args, bound):
            if isinstance(spec, TensorSpec):
                layout_specs.append(spec)
                values.append(place.addr)
                shapes.append(place.shape)
            else:
                layout_specs.append(ScalarSpec(_scalar_dtype(spec)))
                v = b.value
                values.append(v.value.data)
                shapes.append(None)
        layout = ArgLayout(layout_specs)
        table = np.frombuffer(layout.pack(values, shapes), np.uint8).copy()
        self.table_addr = self.memory.place_shared(table, "Instruction Table")
        self.layout = layout

    # -- queues ---------------------------------------------------------------------------

    def signal(self, core: int, space: str, queue: int, source: str) -> None:
        if core >= self.model.num_cores:
            raise InterpError(
                f"DMA notifies core {core}, but the model has {self.model.num_cores} cores"
            )
        self.arrivals.push((core, space, queue), source)
        self.last_signal = (core, space, queue)
        self.transfers += 1

    def wait_arrival(self, core: int, space: str, queue: int, op) -> None:
        key = (core, space, queue)
        fifo = self.arrivals.fifo(key)
        self.scheduler.block_until(
            lambda: bool(fifo), op, f"an arrival on core {core} {space} queue {queue}"
        )
        self.arrivals.pop(key)
        if self.hazards is not None:
            self.check_hazard(op, self.hazards.qwait, key)

    def pending(self) -> list[str]:
        return [
            f"core {core} {space} queue {q} has {len(fifo)} unconsumed arrival(s), the first "
            f"from {fifo[0]}"
            for (core, space, q), fifo in self.arrivals.pending()
        ]

    # -- synchronization ------------------------------------------------------------------

    def sync_barrier(self, bid: int, count: int, op) -> None:
        """The ISA's `barrier ID, COUNT`: block until `count` modules arrived at barrier `bid`;
        the barrier then resets (`arch.sync.Barriers`)."""
        barriers = self.barriers
        try:
            gen, _ = barriers.arrive(bid, count)
        except Trap as e:
            raise InterpError(e.cause, op) from None
        if self.hazards is not None:
            self.check_hazard(op, self.hazards.barrier_arrive, (bid, gen))
        self.scheduler.block_until(
            lambda: barriers.passed(bid, gen),
            op,
            f"barrier {bid} ({count} modules; {barriers.arrived(bid)} arrived)",
        )
        if self.hazards is not None:
            self.check_hazard(op, self.hazards.barrier_release, (bid, gen))

    def sem_post(self, sid: int, count: int, op) -> None:
        """`op` (the IR op) posts `count` to semaphore `sid`; the checker's report, if any,
        names `op`'s line (as every other hook's does)."""
        if self.hazards is not None:
            self.check_hazard(op, self.hazards.sem_post, sid, count)
        self.semaphores.post(sid, count)

    def sem_wait(self, sid: int, count: int, op) -> None:
        sems = self.semaphores
        self.scheduler.block_until(
            lambda: sems.ready(sid, count), op, f"semaphore {sid} >= {count}"
        )
        sems.take(sid, count)
        if self.hazards is not None:
            self.check_hazard(op, self.hazards.sem_wait, sid, count)

    # -- MPU ------------------------------------------------------------------------------

    def load_weight(self, core: int, w: np.ndarray) -> None:
        """The tile `mpu.ldw` / `core.mpu_load_weight` loads: a copy, with the statistics every
        pass over it reads computed once (`mpu_fast.weight`, the emulator's compiled helpers:
        the same bits as `numerics.MpuWeight`)."""
        self.mpu_weight[core] = mpu_fast.weight(np.asarray(w))

    def weight(self, core: int, op) -> numerics.MpuWeight:
        if core not in self.mpu_weight:
            raise InterpError(f"core {core} runs a matmul before loading an MPU weight tile", op)
        return self.mpu_weight[core]


def _scalar_dtype(t):
    from xdsl.dialects.builtin import IndexType

    if isinstance(t, IndexType):
        return i64
    try:
        return dtype_of_element_type(t)
    except ValueError:
        return DType("f32") if "f64" in str(t) else i64


def program_tasks(kernel, num_cores: int) -> list[tuple[str, int | None, Any]]:
    """(task name, core index or None, program op) for every module that runs a program of a
    `core.kernel` or `backend.kernel` (`arch.modules.context_cores`); a program on a core the
    model lacks, or two programs on one module, is an `InvalidModuleError` at the program."""
    tasks: list[tuple[str, int | None, Any]] = []
    owner: dict[int | None, Any] = {}
    for prog in kernel.programs:
        ctx = prog.ctx
        kind = "top" if ctx.is_top else "all_cores" if ctx.is_all_cores else "core"
        if kind == "core" and (ctx.core_index is None or ctx.core_index >= num_cores):
            raise InvalidModuleError(
                f"{prog.name} @{prog.sym_name.data} runs on core {ctx.core_index}, but the "
                f"model has {num_cores} cores",
                prog,
            )
        for c in context_cores(kind, ctx.core_index, num_cores):
            if c in owner:
                raise InvalidModuleError(
                    f"{'top' if c is None else f'core {c}'} has two programs "
                    f"(@{owner[c].sym_name.data} and @{prog.sym_name.data}); a module has one PC",
                    prog,
                )
            owner[c] = prog
            tasks.append(("top" if c is None else f"core {c}", c, prog))
    return tasks


def run_kernel_programs(
    module,
    kernel,
    specs: Sequence[Any],
    args: Sequence[Any],
    model,
    scheduler: Scheduler,
    functions: Callable[[Machine, list[BoundArg]], Sequence[InterpreterFunctions]],
    start: Callable[[Interpreter, Machine, str, int | None, Any], None],
    listeners: Sequence[Interpreter.Listener] = (),
    hazards: bool = False,
) -> tuple[list[BoundArg], Machine]:
    """Run a `core.kernel` or `backend.kernel` on a fresh machine: place `args` (typed by
    `specs`), then run each module's program (`program_tasks`) as a scheduler task in its own
    xDSL interpreter over `module`, with the implementations `functions(machine, bound)`
    registered (in order) and `listeners` attached, started by `start(interp, machine, task
    name, core, program)`. `hazards`: give the machine a hazard checker (the executor calls its
    access hooks; the machine its sync hooks). Returns the bound arguments and the machine once
    every task ended."""
    machine = Machine(model, scheduler, Memory(model))
    bound = machine.place_args(specs, args, kernel.sym_name.data)
    impls = functions(machine, bound)
    for listener in listeners:  # observers that read memory after the run (first_divergence)
        bind = getattr(listener, "bind_machine", None)
        if bind is not None:
            bind(machine)
    tasks = program_tasks(kernel, model.num_cores)
    machine.num_programs = len(tasks)
    if hazards:
        machine.start_hazards(
            [(name, prog.sym_name.data) for name, _c, prog in tasks],
            lambda a, n: machine.memory.find(a, n)[0].name,
        )
    scheduler.deadlock_notes = machine.pending

    def make_body(name: str, core: int | None, prog):
        def body(task) -> None:
            interp = Interpreter(module, listeners=(StepListener(scheduler), *listeners))
            for f in impls:
                interp.register_implementations(f)
            start(interp, machine, name, core, prog)

        return body

    for name, core, prog in tasks:
        scheduler.spawn(name, make_body(name, core, prog))
    scheduler.run()
    return bound, machine
