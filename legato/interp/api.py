"""`legato.interp.run`: run a module at its IR level (legato, core or backend) on numpy arrays."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.ir import Operation
from xdsl.utils.exceptions import DiagnosticException, ParseError

from legato.dialects import get_all_dialects
from legato.dialects.legato import KernelOp, OnOp
from legato.interp import backend as backend_interp
from legato.interp import core as core_interp
from legato.interp import legato as legato_interp
from legato.interp.backend import BackendFunctions
from legato.interp.common import bind_args
from legato.interp.core import CoreFunctions
from legato.interp.errors import (
    InterpArgumentError,
    InterpError,
    InvalidModuleError,
    UnsupportedOpError,
    op_name,
)
from legato.interp.legato import LegatoFunctions
from legato.interp.registry import base_functions
from legato.interp.scheduler import DEFAULT_MAX_STEPS, DEFAULT_QUANTUM, Scheduler
from legato.model import bertha

LEVELS = ("legato", "core", "backend")


def make_context() -> Context:
    """An xDSL context with builtin, arith, scf, func and Legato's dialects."""
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.dialects.scf import Scf

    ctx = Context()
    for d in (Builtin, Arith, Scf, Func):
        ctx.load_dialect(d)
    for name, factory in get_all_dialects().items():
        if name not in ctx.registered_dialect_names:
            ctx.register_dialect(name, factory)
    return ctx


def parse_module(text: str, name: str = "<input>") -> ModuleOp:
    """Parse IR text (any of the three levels); a parse error becomes `InvalidModuleError`."""
    from xdsl.parser import Parser

    try:
        return Parser(make_context(), text, name).parse_module()
    except ParseError as e:
        raise InvalidModuleError(f"cannot parse {name}:\n{e}") from None


def detect_level(module: ModuleOp) -> str:
    """The IR level of a module: the dialect of its kernel op."""
    for op in module.walk():
        prefix = op.name.split(".", 1)[0]
        if op.name == "legato.kernel":
            return "legato"
        if op.name == "core.kernel":
            return "core"
        if prefix == "backend" and op.name in ("backend.kernel", "backend.program"):
            return "backend"
    raise InvalidModuleError(
        "the module holds no legato.kernel, core.kernel or backend program; nothing to run"
    )


@dataclass
class RunStats:
    """What a run did: ops executed per task, transfers, wall time."""

    level: str
    kernel: str
    ops_per_task: dict[str, int] = field(default_factory=dict)
    wall_seconds: float = 0.0
    transfers: int = 0

    @property
    def total_ops(self) -> int:
        return sum(self.ops_per_task.values())


class RunResult(list):
    """The kernel's arguments after the run (the same objects the caller passed, written in
    place where possible), with `.stats` and `.prints` (the run's `device_print` records,
    `legato.targets.bertha.arch.debug.PrintRecord`, in the order they ran)."""

    stats: RunStats
    prints: list


def find_kernel(module: ModuleOp, level: str, name: str | None) -> Operation:
    kernels = [
        op
        for op in module.walk()
        if op.name
        in {"legato": ("legato.kernel",), "core": ("core.kernel",), "backend": ("backend.kernel",)}[
            level
        ]
    ]
    if level == "backend" and not kernels:
        return module  # a module of backend.program ops is itself the kernel
    if not kernels:
        raise InvalidModuleError(f"the module holds no {level}.kernel")
    if name is None:
        if len(kernels) > 1:
            names = ", ".join(k.sym_name.data for k in kernels)  # type: ignore[attr-defined]
            raise InvalidModuleError(
                f"the module holds several kernels ({names}); say which one to run"
            )
        return kernels[0]
    for k in kernels:
        if k.sym_name.data == name:  # type: ignore[attr-defined]
            return k
    raise InvalidModuleError(f"no kernel named '{name}' in the module")


def verify(module: ModuleOp) -> None:
    try:
        module.verify()
    except DiagnosticException as e:
        msg = str(e).split("\n\n")[0]
        raise InvalidModuleError(f"the module does not verify: {msg}") from None


def run(
    module: ModuleOp | str,
    level: str | None = None,
    args: Sequence[Any] = (),
    model=None,
    *,
    kernel: str | None = None,
    quantum: int = DEFAULT_QUANTUM,
    max_steps: int | None = DEFAULT_MAX_STEPS,
    listeners: Sequence[Interpreter.Listener] = (),
    hazards: bool = True,
    time_limit: float | None = None,
) -> RunResult:
    """Run `module` at IR `level` ("legato", "core", "backend"; default: detected) with `args`.

    `args` are numpy arrays (bf16 as `ml_dtypes.bfloat16`), torch tensors or scalars, one per
    kernel argument; outputs are written into them in place, as the runtime does. `model` is the
    ComputeModel (default: the kernel's target, else `legato.model.bertha.evt0()`); it gives the
    number of cores and the memory sizes. Returns the arguments (`RunResult`, a list) with
    `.stats`. Raises `InvalidModuleError` (does not parse/verify, or not at `level`),
    `InterpArgumentError` (count/shape/dtype), `UnsupportedOpError`, `DeadlockError`,
    `MemoryFault` or `InterpError` (any other failure, naming the op and context).
    `hazards`: check for accesses no wait orders (`arch.hazards`; at the legato level, of
    the arguments' memory); one raises `InterpHazardError` naming both ops and their source
    lines. `time_limit`: wall-clock seconds (None: unbounded), past which the run stops with
    `TimeLimitExceeded` at the op it reached (`kernel.interpret` passes the session's limit).
    """
    if isinstance(module, str):
        module = parse_module(module)
    verify(module)
    found = detect_level(module)
    if level is None:
        level = found
    if level not in LEVELS:
        raise InterpArgumentError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    if level != found:
        raise InvalidModuleError(f"the module is at the {found} level, not the {level} level")
    _check_implemented(module, level)
    model = _resolve_model(model, module)
    k = find_kernel(module, level, kernel)
    scheduler = Scheduler(quantum=quantum, max_steps=max_steps, time_limit=time_limit)
    start = time.perf_counter()
    if level == "legato":
        name = k.sym_name.data  # type: ignore[attr-defined]
        bound = bind_args(legato_interp.kernel_specs(k), args, name)  # type: ignore[arg-type]
        machine = legato_interp.run_kernel(
            module,
            k,
            bound,
            model.num_cores,
            scheduler,
            listeners=listeners,  # type: ignore[arg-type]
            hazards=hazards,
        )
        transfers = machine.transfers
    elif level == "core":
        name = k.sym_name.data  # type: ignore[attr-defined]
        bound, machine = core_interp.run_kernel(
            module,
            k,
            args,
            model,
            scheduler,
            listeners=listeners,  # type: ignore[arg-type]
            hazards=hazards,
        )
        transfers = machine.transfers
    else:
        name = getattr(getattr(k, "sym_name", None), "data", "kernel")
        bound, machine = backend_interp.run_kernel(
            module, k, args, model, scheduler, listeners=listeners, hazards=hazards
        )
        transfers = machine.transfers
    for b in bound:
        b.finish()
    result = RunResult(b.original if b.original is not None else b.value for b in bound)
    result.prints = list(machine.prints)
    result.stats = RunStats(
        level=level,
        kernel=name,
        ops_per_task={t.name: t.steps for t in scheduler.tasks},
        wall_seconds=time.perf_counter() - start,
        transfers=transfers,
    )
    return result


def _resolve_model(model, module: ModuleOp):
    if model is not None:
        if callable(model) and not hasattr(model, "num_cores"):
            model = model(None)
        return model

    for op in module.walk():
        if op.name.endswith(".kernel"):
            target = op.properties.get("target") or op.attributes.get("target")
            name = getattr(target, "data", None)
            if isinstance(name, str) and name in bertha.GENERATIONS:
                return bertha.evt0() if name == "bertha" else bertha.evt1()
            break
    return bertha.evt0()


def _check_implemented(module: ModuleOp, level: str) -> None:
    """Name every op of the module the level's interpreter cannot run, before running."""
    known = implemented_ops(level)
    for op in module.walk():
        if op is module or type(op) in known:
            continue
        raise UnsupportedOpError(
            f"the {level}-level interpreter has no implementation for '{op_name(op)}'", op
        )


def implemented_ops(level: str) -> set[type[Operation]]:
    fns = list(base_functions())
    if level == "legato":
        fns.append(LegatoFunctions())
        extra = {KernelOp, OnOp}
    elif level == "core":
        fns.append(CoreFunctions())
        extra = core_interp.structural_ops()
    else:
        fns.append(BackendFunctions())
        extra = backend_interp.structural_ops()
    ops: set[type[Operation]] = set(extra)
    for f in fns:
        ops.update(t for t, _ in type(f)._impls())
    return ops


__all__ = [
    "LEVELS",
    "InterpError",
    "RunResult",
    "RunStats",
    "detect_level",
    "parse_module",
    "run",
]
