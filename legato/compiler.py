"""The compiler driver: one kernel from the legato dialect to a Bertha binary.

`compile_kernel(module, model)` runs the named pipelines of `legato.transforms.pipelines` and
returns the kernel's `Artifacts`: the binary, encoded straight from the backend ops in memory
(no assembly text), and each IR/assembly stage as text only when someone asks for it (each
stage's text re-parses with `legato-opt`). `lower(module, model, level)` lowers in place only as
far as one level (what `Kernel.interpret(level=...)` runs).
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from legato.dialects import backend as be
from legato.dialects import core
from legato.dialects import legato as lg
from legato.errors import CompileError
from legato.frontend.codegen import frontend_verified
from legato.model.compute_model import ComputeModel
from legato.model.ir import attach_model
from legato.targets.bertha.arch.debug import Entry
from legato.targets.bertha.elf import write_elf
from legato.transforms import pipelines
from legato.transforms import verify_sync as verify_sync_pass
from legato.transforms.diagnostics import error_at, verify_located
from legato.transforms.ir_walk import block_ops
from legato.transforms.kernel_abi import arg_layout
from legato.transforms.registry import get_all_dialects

STAGES = ("mlir", "core_ir", "backend_ir", "asm", "binary")
TEXT_STAGES = ("mlir", "core_ir", "backend_ir", "asm")
LEVELS = ("legato", "core", "backend")

VERIFY_EACH_ENV = "LEGATO_VERIFY_EACH"
"""Set to 1 to verify the core and backend levels too (the test suite does); see
`compile_kernel`."""


class Artifacts:
    """What `compile_kernel` made of one kernel: `binary` (the ELF) and the text stages `mlir`,
    `core_ir`, `backend_ir` and `asm`.

    A text stage is printed once, when first read (or during the compile, when `record` named
    it): `mlir` from the legato module as it entered the pipeline, `core_ir` by lowering that
    module again to the core level, `backend_ir` and `asm` from the final backend module. The
    lowering is deterministic, so a stage read later is the text the compile would have printed.
    `source` is a function returning a fresh legato-level module of the kernel (the JIT passes
    its frontend, so a disk-cache hit can still print any stage); `backend` the final module,
    when in memory. `arg_access`: each argument's access (`read`/`write`/`readwrite`) in the
    compiled kernel's own signature, taken from its IR, not from the binary's metadata (the
    runtime refuses a binary whose metadata disagrees)."""

    def __init__(
        self,
        kernel: str,
        model: ComputeModel,
        binary: bytes,
        *,
        texts: dict[str, str] | None = None,
        source: Callable[[], ModuleOp] | None = None,
        backend: ModuleOp | None = None,
        arg_access: list[str] | None = None,
    ):
        self.kernel = kernel
        self.arg_access = arg_access
        self.warnings: list[tuple[str, str, int]] = []  # the compile's PerformanceWarnings
        self.model = model
        self.binary = binary
        self._texts: dict[str, str] = dict(texts or {})
        self._source = source
        self._backend = backend

    def recorded(self) -> dict[str, str]:
        """The text stages printed so far, by name (what the disk cache stores)."""
        return {name: self._texts[name] for name in TEXT_STAGES if name in self._texts}

    def stage(self, name: str) -> str | bytes:
        """Stage `name` (one of `STAGES`), printed now if it was not yet."""
        if name == "binary":
            return self.binary
        if name not in TEXT_STAGES:
            raise KeyError(f"unknown stage {name!r}; expected one of {', '.join(STAGES)}")
        if name not in self._texts:
            self._texts[name] = self._print(name)
        return self._texts[name]

    def _print(self, name: str) -> str:
        if name in ("backend_ir", "asm") and self._backend is not None:
            module = self._backend
        else:
            if self._source is None:
                raise CompileError(
                    f"the {name} of kernel {self.kernel} was not recorded and cannot be "
                    "printed again (no source module)"
                )
            module = self._source()
            attach_model(module, self.model)
            lower(module, self.model, "legato" if name == "mlir" else "core")
            if name in ("backend_ir", "asm"):
                lower(module, self.model, "backend")
                self._backend = module
        return be.print_assembly(module) if name == "asm" else print_ir(module)

    @property
    def mlir(self) -> str:
        return self.stage("mlir")  # type: ignore[return-value]

    @property
    def core_ir(self) -> str:
        return self.stage("core_ir")  # type: ignore[return-value]

    @property
    def backend_ir(self) -> str:
        return self.stage("backend_ir")  # type: ignore[return-value]

    @property
    def asm(self) -> str:
        return self.stage("asm")  # type: ignore[return-value]


def context() -> Context:
    """An xDSL context with every dialect Legato's IR uses."""
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.dialects.scf import Scf

    ctx = Context()
    for d in (Builtin, Arith, Func, Scf):
        ctx.load_dialect(d)
    for factory in get_all_dialects().values():
        ctx.load_dialect(factory())
    return ctx


def print_ir(module: ModuleOp, debuginfo: bool = True) -> str:
    from io import StringIO

    out = StringIO()
    Printer(stream=out, print_debuginfo=debuginfo).print_op(module)
    return out.getvalue() + "\n"


def _verify(module: ModuleOp, stage: str) -> None:
    # located at the failing op, without xDSL's dump of the whole module
    verify_located(module, stage)


def _verify_each(option: bool | None) -> bool:
    if option is not None:
        return option
    return os.environ.get(VERIFY_EACH_ENV, "") not in ("", "0")


def compile_kernel(
    module: ModuleOp,
    model: ComputeModel,
    kernel_name: str | None = None,
    *,
    record: Iterable[str] = (),
    source: Callable[[], ModuleOp] | None = None,
    verify_each: bool | None = None,
) -> Artifacts:
    """Compile the one `legato.kernel` in `module` (modified in place) down to a binary.

    The binary is encoded from the backend ops in memory. Text stages named in `record` (of
    `TEXT_STAGES`) are printed as the compile passes them; any other is printed when first read
    from the returned `Artifacts` (from `source()`, a fresh legato module of the kernel, or a
    copy of `module` taken before lowering when `source` is None).

    Verification: the legato input is verified (a failure is an internal compiler error naming
    the level), unless it is the frontend's output as it made it, every op of which its
    verifier checked as it was built (`frontend_verified`). The core level and the final backend module are verified only with
    `verify_each=True`, or `$LEGATO_VERIFY_EACH=1` when `verify_each` is None (the test suite
    sets it, so every level of every kernel the tests compile is verified): verifying them cost
    10-20% of a bench kernel's compile, and the binary's encoder checks every field it writes
    (a register, an immediate out of range is an internal compiler error there too). So do the
    backend's sync checks (`backend.verify_sync`, ~4% of the GEMM's compile): what they refuse
    of a kernel lowered from the core level would be a lowering bug, since `prove_sync`
    proved the core kernel (a backend-level input, `emit_binary` alone, is always checked).

    The cyclic garbage collector is paused for the compile (`gc_paused`; ~10% of the GEMM's
    compile)."""
    with gc_paused():
        return _compile(module, model, kernel_name, set(record), source, _verify_each(verify_each))


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside the `with` (as it was after it): building
    and rewriting IR allocates hundreds of thousands of objects, and the collections that
    triggered rescanned them all again and again.

    At the end, the objects made inside (the IR, which lives as long as its module or the
    compiled kernel's artifacts: ~64k on the bench GEMM) go to the collector's oldest
    generation unscanned (`_promote_young`), instead of being scanned by the young
    collection that the first allocation after the `with` triggers (10-30 ms on the GEMM)
    and again by the middle one; what became unreachable among them is collected by the next
    full collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            _promote_young()
            gc.enable()


#: the young objects `_promote_young` moved to the oldest generation since the collector's
#: last full collection (reset by `_on_collection`)
_promoted = [0]
_PROMOTE_MIN = 4096  # fewer than this: the young collection's scan is cheap
#: a bound on what waits unscanned for a full collection (the collector counts only the
#: objects it promotes itself towards starting one): beyond it, until the collector's next full
#: collection, the young objects are left to its own collections, as without `gc_paused`
PROMOTE_MAX = 1 << 18


def _promote_young() -> None:
    """Move every tracked object of the younger two generations to the oldest, unscanned:
    `gc.freeze()` then `gc.unfreeze()` (two list splices; done only when no one else froze
    objects, whose freeze this must not undo, and within `PROMOTE_MAX`)."""
    young = gc.get_count()[0]
    if young < _PROMOTE_MIN or gc.get_freeze_count() or _promoted[0] + young > PROMOTE_MAX:
        return
    gc.freeze()
    gc.unfreeze()
    _promoted[0] += young


def _on_collection(phase: str, info: dict) -> None:
    if phase == "stop" and info["generation"] == 2:
        _promoted[0] = 0


gc.callbacks.append(_on_collection)


def _compile(
    module: ModuleOp,
    model: ComputeModel,
    kernel_name: str | None,
    record: set[str],
    source: Callable[[], ModuleOp] | None,
    verify_each: bool,
) -> Artifacts:
    kernels = [op for op in module.body.block.ops if isinstance(op, lg.KernelOp)]
    if len(kernels) != 1:
        raise CompileError(f"expected one legato.kernel in the module, found {len(kernels)}")
    name = kernel_name or kernels[0].sym_name.data
    unknown = record - set(TEXT_STAGES)
    if unknown:
        raise CompileError(
            f"cannot record stage(s) {', '.join(sorted(unknown))}; expected {', '.join(TEXT_STAGES)}"
        )
    attach_model(module, model)
    if verify_each or not frontend_verified(module):
        _verify(module, "legato")
    ctx = context()
    texts: dict[str, str] = {}
    if "mlir" in record:
        texts["mlir"] = print_ir(module)
    if source is None:
        source = getattr(module, _SOURCE, None)
    if source is None and not {"mlir", "core_ir"} <= record:
        source = module.clone().clone  # each call: a fresh copy of the legato input

    pipelines.legato_to_core(model).apply(ctx, module)
    if verify_each:
        _verify(module, "core")
    prove_sync(module, model)  # before any run: what would deadlock is refused here
    if "core_ir" in record:
        texts["core_ir"] = print_ir(module)

    pipelines.core_to_backend(model).apply(ctx, module)
    if verify_each:
        _verify(module, "backend")
    # the backend's sync checks are a check of the lowering (the core level was proven), so
    # they run with the other verification of the lowering's output
    binary = emit_binary(module, model, proven=True, check_sync=verify_each)
    (kernel,) = (op for op in module.body.block.ops if isinstance(op, be.KernelOp))
    artifacts = Artifacts(
        name,
        model,
        binary,
        texts=texts,
        source=source,
        backend=module,
        arg_access=[a.access for a in arg_layout(kernel).args],
    )
    for stage in sorted(record - set(texts)):
        artifacts.stage(stage)
    return artifacts


_SOURCE = "_legato_source"


def remember_source(module: ModuleOp, source: Callable[[], ModuleOp]) -> ModuleOp:
    """Mark `module` (a legato module, unchanged since `source()` made it) as one `source()`
    makes again: `compile_kernel(module, ...)` without a `source` then takes it instead of
    copying the module before lowering it in place (~4% of a big kernel's compile)."""
    setattr(module, _SOURCE, source)
    return module


def lower(module: ModuleOp, model: ComputeModel, level: str) -> None:
    """Lower `module` in place to `level` ("legato", "core" or "backend", allocated) and
    verify it there; a module already at or below `level` is only verified. Lowers no further
    than asked: `lower(m, model, "legato")` runs no pass at all."""
    if level not in LEVELS:
        raise CompileError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    found = level_of(module)
    ctx = context()
    if found == "legato" and level != "legato":
        attach_model(module, model)
        pipelines.legato_to_core(model).apply(ctx, module)
        found = "core"
    if found == "core" and level == "backend":
        pipelines.core_to_backend(model).apply(ctx, module)
        found = "backend"
    _verify(module, found)


def level_of(module: ModuleOp) -> str:
    """`legato`, `core` or `backend`: the level of the kernel in `module`."""
    for op in module.body.block.ops:
        if isinstance(op, lg.KernelOp):
            return "legato"
        if isinstance(op, core.KernelOp):
            return "core"
        if isinstance(op, be.KernelOp):
            return "backend"
    raise CompileError("the module holds no legato.kernel, core.kernel or backend.kernel")


def lower_to_backend(module: ModuleOp, model: ComputeModel) -> bool:
    """Lower `module` (at any level) in place to allocated backend IR; a legato or core module
    is proven at the core level on the way (`prove_sync`). Whether it was (a backend input
    gets only the backend's checks, `verify_sync`)."""
    level = level_of(module)
    ctx = context()
    if level == "legato":
        pipelines.legato_to_core(model).apply(ctx, module)
        level = "core"
    if level == "core":
        prove_sync(module, model)
        pipelines.core_to_backend(model).apply(ctx, module)
        return True
    return False


sync_log = logging.getLogger("legato.sync")

#: how many unsettled waits one log line names (the rest are counted)
UNSETTLED_SHOWN = 8


def prove_sync(module: ModuleOp, model: ComputeModel) -> list[verify_sync_pass.Unsettled]:
    """The core-level proofs of `legato.transforms.verify_sync` on the core kernel in
    `module` (every receive has its send, every semaphore wait its posts, barriers agree and
    fill, no receive buffer gets a transfer while its previous one is in use), before any
    run: a violation is a CompileError at the op naming the other line. What the proof leaves
    to the run is logged at INFO on `legato.sync` (`log_unsettled`) and returned."""
    unsettled: list = []
    for kernel in module.body.block.ops:
        if isinstance(kernel, core.KernelOp):
            unsettled = verify_sync_pass.verify(kernel, model.num_cores)
            log_unsettled(kernel.sym_name.data, unsettled)
    return unsettled


def log_unsettled(kernel: str, unsettled: list) -> None:
    """One INFO line on `legato.sync` naming the waits a proof left to the run (with their
    source lines and why), the first `UNSETTLED_SHOWN` of them."""
    if unsettled:
        shown = "; ".join(str(u) for u in unsettled[:UNSETTLED_SHOWN])
        more = len(unsettled) - UNSETTLED_SHOWN
        sync_log.info(
            "kernel %s: %d wait(s) not proven released at compile time, left to the "
            "emulator's deadlock report: %s%s",
            kernel,
            len(unsettled),
            shown,
            f"; and {more} more" if more > 0 else "",
        )


def verify_sync(kernel: be.KernelOp, model: ComputeModel, log: bool = True) -> list[be.Unsettled]:
    """`backend.verify_sync` of `kernel` (the checks a backend-level input gets; a kernel
    lowered from the core level was proven there, by `prove_sync`): a violation is a
    CompileError at the op; the waits it could not settle (in loops, register-addressed
    cores) are logged at INFO on `legato.sync` when `log`, and returned."""
    try:
        unsettled = be.verify_sync(kernel, model.num_cores)
    except be.OpVerifyException as e:
        raise error_at(e.op, str(e)) from None
    if log:
        log_unsettled(kernel.sym_name.data, unsettled)
    return unsettled


def emit_binary(
    module: ModuleOp, model: ComputeModel, proven: bool = False, check_sync: bool = True
) -> bytes:
    """The ELF binary of the (allocated) backend kernel in `module`, encoded from its ops (no
    assembly text; `asm.assemble` of `print_assembly(module)` gives the same words). The
    backend's sync checks run first, when `check_sync`; `proven`: the kernel was proven at the
    core level (`prove_sync`), whose report of what is left to the run stands (the backend's is
    not logged again)."""

    kernels = [op for op in module.body.block.ops if isinstance(op, be.KernelOp)]
    if len(kernels) != 1:
        raise CompileError(f"expected one backend.kernel in the module, found {len(kernels)}")
    kernel = kernels[0]
    if kernel.args is None:
        raise CompileError("backend.kernel has no `args`: the binary needs the argument layout")
    layout = arg_layout(kernel)
    # each program's ops listed once, for the encoder and the three tables (a walk of an xDSL
    # block costs a Python step per op)
    ops = {p: block_ops(p.body.block) for p in be.programs(kernel)}
    if check_sync:
        verify_sync(kernel, model, log=not proven)  # what would deadlock or fault: refused
    try:
        encoded = be.encode(kernel, ops)
    except ValueError as e:
        raise CompileError(f"internal compiler error: {e}") from e
    return write_elf(
        encoded,
        model,
        layout,
        compiler={"pipeline": pipelines.describe()},
        kernel=kernel.sym_name.data,
        lines=line_table(kernel, ops),
        bounds=bounds_table(kernel, ops),
        debug=debug_table(kernel, ops),
    )


_ProgramOps = dict[be.ProgramOp, list[Operation]]


def _ops_of(program: be.ProgramOp, ops: _ProgramOps | None) -> Iterable[Operation]:
    return program.body.block.ops if ops is None else ops[program]


def debug_table(kernel: be.KernelOp, ops: _ProgramOps | None = None) -> list[Entry]:
    """The kernel's debug entries (`.legato.debug`), indexed as its `dbg.print` / `dbg.assert`
    instructions name them (their `entry`), each located at its op's source line. `ops`: each
    program's ops, when the caller has listed them (as for `bounds_table`, `line_table`)."""
    entries: dict[int, Entry] = {}
    for program in be.programs(kernel):
        for op in _ops_of(program, ops):
            if isinstance(op, be.DbgOp):
                try:
                    entries[op.entry.data] = be.debug_entry(op)
                except VerifyException as e:
                    raise error_at(op, str(e)) from None
    if sorted(entries) != list(range(len(entries))):
        raise CompileError(f"internal: debug entries {sorted(entries)} are not 0..n-1")
    return [entries[i] for i in range(len(entries))]


def bounds_table(kernel: be.KernelOp, ops: _ProgramOps | None = None) -> dict[str, dict[int, dict]]:
    """Per program, {pc: {field: Extent}} of the instructions carrying `legato.bounds` (the
    accesses the runtime checks), numbered as `ProgramOp.encode` numbers them."""
    table = {}
    for program in be.programs(kernel):
        rows = {}
        pc = 0
        for op in _ops_of(program, ops):
            if be.encodes(type(op)):
                try:
                    marks = be.op_bounds(op)
                except VerifyException as e:
                    raise CompileError(f"{e}") from None
                if marks:
                    rows[pc] = marks
                pc += 1
        if rows:
            table[program.sym_name.data] = rows
    return table


def line_table(
    kernel: be.KernelOp, ops: _ProgramOps | None = None
) -> dict[str, list[tuple[str, int, int] | None]]:
    """Per program, the kernel source location (file, line, col) of each instruction, in the
    order `ProgramOp.encode` numbers them (None where the op has none: argument loads, ...)."""
    from xdsl.dialects.builtin import FileLineColLoc

    table = {}
    for program in be.programs(kernel):
        locs = []
        for op in _ops_of(program, ops):
            if be.encodes(type(op)):
                loc = op.location
                locs.append(
                    (loc.filename.data, loc.line.data, loc.column.data)
                    if isinstance(loc, FileLineColLoc)
                    else None
                )
        table[program.sym_name.data] = locs
    return table
