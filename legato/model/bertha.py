"""Bertha, the LPU: `bertha.Bertha(ctx, name, num_cores, use_pim, num_memory_channels,
shared_memory_size)` builds its ComputeModel (the seed's API).

`name` selects the generation: `"bertha"` (EVT0) or `"bertha-evt1"`. The parameters are the
hardware's (../shared/DESIGN.md section 5); the compiler adapts to them.
"""

from __future__ import annotations

from legato.errors import LegatoValueError
from legato.model.compute_model import ComputeModel, GiB, KiB, MiB

GENERATIONS = ("bertha", "bertha-evt1")

_EVT0 = dict(
    generation="evt0",
    clock_ghz=1.0,
    dma_port_bytes_per_cycle=64,
    sram_size=2 * MiB,
    mpu_buffer_size=256 * KiB,
    mpu_macs_per_cycle=1024,
    vpu_lanes=64,
    vpu_transcendental_per_cycle=16,
)
_EVT1 = dict(
    generation="evt1",
    clock_ghz=1.2,
    dma_port_bytes_per_cycle=96,
    sram_size=4 * MiB,
    mpu_buffer_size=512 * KiB,
    mpu_macs_per_cycle=2048,
    vpu_lanes=128,
    vpu_transcendental_per_cycle=32,
)


def Bertha(
    ctx,
    name: str = "bertha",
    num_cores: int = 32,
    use_pim: bool = False,
    num_memory_channels: int = 8,
    shared_memory_size: int = 128 * GiB,
) -> ComputeModel:
    """The ComputeModel of a Bertha chip. `ctx` is the compilation context (may be None)."""
    if name not in GENERATIONS:
        raise LegatoValueError(f"unknown Bertha generation {name!r}; expected one of {GENERATIONS}")
    if not isinstance(num_cores, int) or num_cores <= 0:
        raise LegatoValueError(f"num_cores must be a positive int, got {num_cores!r}")
    if not isinstance(num_memory_channels, int) or num_memory_channels <= 0:
        raise LegatoValueError(
            f"num_memory_channels must be a positive int, got {num_memory_channels!r}"
        )
    if num_cores > 64:
        raise LegatoValueError(f"Bertha supports at most 64 cores, got {num_cores}")
    params = _EVT0 if name == "bertha" else _EVT1
    return ComputeModel(
        name=name,
        num_cores=num_cores,
        use_pim=bool(use_pim),
        num_memory_channels=num_memory_channels,
        shared_memory_size=shared_memory_size,
        **params,
    )


def evt0(ctx=None) -> ComputeModel:
    """The seed's chip: EVT0, 32 cores, 8 channels, 128 GiB."""
    return Bertha(ctx, "bertha", 32, False, 8, 128 * GiB)


def evt1(ctx=None) -> ComputeModel:
    """EVT1: 64 cores, 16 channels, 256 GiB."""
    return Bertha(ctx, "bertha-evt1", 64, False, 16, 256 * GiB)


def evt0_pim(ctx=None) -> ComputeModel:
    """The seed's chip with its PIM units (`use_pim=True`, docs/pim.md)."""
    return Bertha(ctx, "bertha", 32, True, 8, 128 * GiB)


def evt1_pim(ctx=None) -> ComputeModel:
    """EVT1 with its PIM units (`use_pim=True`, docs/pim.md)."""
    return Bertha(ctx, "bertha-evt1", 64, True, 16, 256 * GiB)


def get_model(ctx=None) -> ComputeModel:
    """Backend factory used when `backend=legato.model.bertha` (the module) is passed."""
    return evt0(ctx)
