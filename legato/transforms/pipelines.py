"""Named pipelines: what `compile_kernel` runs between IR levels (also `legato-opt -p ...`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

from legato.model.compute_model import ComputeModel
from legato.transforms.barrier_waits import CoreBarrierWaitsPass
from legato.transforms.core_to_backend import ConvertCoreToBackendPass
from legato.transforms.fuse_mpu_accumulate import CoreFuseMpuAccumulatePass
from legato.transforms.legato_to_core import ConvertLegatoToCorePass
from legato.transforms.plan_memory import CorePlanMemoryPass
from legato.transforms.regalloc import BackendAllocateRegistersPass
from legato.transforms.transfer_rings import CoreTransferRingsPass

LEGATO_TO_CORE: tuple[type[ModulePass], ...] = (
    ConvertLegatoToCorePass,
    CoreFuseMpuAccumulatePass,  # before the rings: they place credits by the fused ops
    CoreTransferRingsPass,
    CoreBarrierWaitsPass,  # after the rings: they take credit queues from the top down
    CorePlanMemoryPass,
)
CORE_TO_BACKEND: tuple[type[ModulePass], ...] = (
    ConvertCoreToBackendPass,
    BackendAllocateRegistersPass,
)


def _pipeline(passes: tuple[type[ModulePass], ...]) -> PassPipeline:
    return PassPipeline(tuple(p() for p in passes))


def legato_to_core(model: ComputeModel | None = None) -> PassPipeline:
    # The model travels on the module (`legato.model`), so passes need no options here.
    return _pipeline(LEGATO_TO_CORE)


def core_to_backend(model: ComputeModel | None = None) -> PassPipeline:
    return _pipeline(CORE_TO_BACKEND)


def describe() -> str:
    return ",".join(p.name for p in LEGATO_TO_CORE + CORE_TO_BACKEND)


@dataclass(frozen=True)
class LegatoToBackendPass(ModulePass):
    """`legato-to-backend`: the whole lowering (what `compile_kernel` runs), as one pass."""

    name = "legato-to-backend"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        legato_to_core().apply(ctx, op)
        core_to_backend().apply(ctx, op)
