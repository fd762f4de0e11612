"""The registry of Legato's passes, targets and dialects, for `legato-opt` and the compiler.

To register a pass, add one line to `PASSES`: `"pass-name": "module.path:ClassName"`. The module
is imported only when the pass is requested (or listed), so a broken pass module cannot break the
driver for everything else. The class must be an `xdsl.passes.ModulePass` whose `name` equals
the key.

To register an output target (`legato-opt -t asm`), add a line to `TARGETS`:
`"asm": "module.path:ClassName"`, where the class is an `xdsl.utils.target.Target` subclass
(a frozen dataclass with `name` and `emit(ctx, module, output)`), or a legacy function
`(module, stream) -> None`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.utils.target import Target

from legato.dialects import get_all_dialects as _dialects

# "pass-name": "module:Class". Others add their passes here.
PASSES: dict[str, str] = {
    "convert-legato-to-core": "legato.transforms.legato_to_core:ConvertLegatoToCorePass",
    "core-fuse-mpu-accumulate": "legato.transforms.fuse_mpu_accumulate:CoreFuseMpuAccumulatePass",
    "core-transfer-rings": "legato.transforms.transfer_rings:CoreTransferRingsPass",
    "core-barrier-waits": "legato.transforms.barrier_waits:CoreBarrierWaitsPass",
    "core-plan-memory": "legato.transforms.plan_memory:CorePlanMemoryPass",
    "core-verify-sync": "legato.transforms.verify_sync:CoreVerifySyncPass",
    "convert-core-to-backend": "legato.transforms.core_to_backend:ConvertCoreToBackendPass",
    "backend-allocate-registers": "legato.transforms.regalloc:BackendAllocateRegistersPass",
    "legato-to-backend": "legato.transforms.pipelines:LegatoToBackendPass",
}

# "target-name": "module:Class" (a Target subclass) or "module:function" (legacy emitter).
TARGETS: dict[str, str] = {
    "asm": "legato.tools.targets:AsmTarget",
    "bin": "legato.tools.targets:BinaryTarget",
}


def _load(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr)


def _lazy(spec: str) -> Callable[[], Any]:
    def factory() -> Any:
        return _load(spec)

    factory.__name__ = f"load_{spec.rpartition(':')[2]}"
    return factory


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every registered pass, by name, as a factory importing its module lazily."""
    return {name: _lazy(spec) for name, spec in PASSES.items()}


def get_all_targets() -> dict[str, Callable[[], type[Target]]]:
    """Every registered output target, by name, as a factory importing its module lazily.
    A legacy emitter function `(module, stream) -> None` is wrapped into a `Target`."""
    return {name: _lazy_target(name, spec) for name, spec in TARGETS.items()}


def _lazy_target(name: str, spec: str) -> Callable[[], type[Target]]:
    def factory() -> type[Target]:
        obj = _load(spec)
        if isinstance(obj, type) and issubclass(obj, Target):
            return obj
        emit_fn = obj

        @dataclass(frozen=True)
        class _FunctionTarget(Target):
            name: ClassVar[str] = name

            def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
                emit_fn(module, output)

        return _FunctionTarget

    return factory


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Legato's own dialects (legato, core, backend), by name, as lazy factories."""
    return _dialects()
