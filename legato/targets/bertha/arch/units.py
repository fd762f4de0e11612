"""The operand rules of the compute units (MPU, VPU) every executor checks alike: a unit
computes only on the running core's own memory, and the MPU's weight tile has a bounded shape.
Each check raises a `Trap` (the emulator adds the module and PC, the interpreters the IR op)."""

from __future__ import annotations

from legato.model.compute_model import ComputeModel
from legato.targets.bertha.arch.address_map import CORE_SPACE_OFFSET, classify
from legato.targets.bertha.arch.errors import Trap

LOCAL_SPACES = tuple(CORE_SPACE_OFFSET)
"""The memories a unit operand may be in: the running core's sram, mpu_buffer, private_dram."""


def check_local(address: int, core: int | None, what: str, spaces=LOCAL_SPACES) -> None:
    """`address` (the operand `what`) is in one of `spaces` of core `core` (None: top, which
    has no core memory)."""
    space, owner = classify(address)  # the emulator's hot path: no offset computed
    if owner != core or space not in spaces:
        allowed = (
            "local memory (sram, mpu_buffer or private_dram)"
            if tuple(spaces) == LOCAL_SPACES
            else " or ".join(spaces)
        )
        raise Trap(
            f"{what} must be in this core's {allowed}, got {space}"
            + (f" of core {owner}" if owner is not None else ""),
            address,
        )


def check_weight_tile(model: ComputeModel, k: int, n: int) -> None:
    """A `[k, n]` weight tile fits the MPU of `model` (and is not empty)."""
    if not (1 <= k <= model.mpu_tile_k and 1 <= n <= model.mpu_tile_n):
        raise Trap(
            f"weight tile [{k}, {n}] exceeds the MPU's "
            f"[{model.mpu_tile_k}, {model.mpu_tile_n}] (or is empty)"
        )
