"""The ComputeModel: a simplified model of one chip, threaded through the whole compiler.

Every lowering and planning decision reads its parameters from here; the emulator's timing model
and the roofline read the same object, so efficiency can never exceed 100%.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from legato.types import DType, TensorSpec

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class ComputeModel:
    name: str
    generation: str
    num_cores: int
    use_pim: bool
    num_memory_channels: int
    shared_memory_size: int
    clock_ghz: float = 1.0
    dram_bytes_per_cycle_per_channel: int = 64
    dram_latency_cycles: int = 400
    dma_port_bytes_per_cycle: int = 64
    dma_max_in_flight: int = 8
    sram_size: int = 2 * MiB
    mpu_buffer_size: int = 256 * KiB
    private_dram_size: int = 1 * GiB
    mpu_tile_k: int = 256
    mpu_tile_n: int = 128
    mpu_macs_per_cycle: int = 1024
    mpu_weight_load_bytes_per_cycle: int = 256
    vpu_lanes: int = 64
    vpu_transcendental_per_cycle: int = 16
    issue_per_cycle: int = 1
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def params(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        return d

    def fingerprint(self) -> str:
        """A stable hash of every parameter: a binary records it and is refused elsewhere."""
        # The parameters are frozen, so the hash is computed once (every kernel call reads it
        # for its cache key); `extra` is not a parameter.
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            blob = json.dumps(self.params(), sort_keys=True).encode()
            cached = self.__dict__["_fingerprint"] = hashlib.sha256(blob).hexdigest()[:16]
        return cached

    @property
    def dram_bytes_per_cycle(self) -> int:
        return self.dram_bytes_per_cycle_per_channel * self.num_memory_channels

    def memory_size(self, space: str) -> int:
        return {
            "sram": self.sram_size,
            "mpu_buffer": self.mpu_buffer_size,
            "private_dram": self.private_dram_size,
            "shared_dram": self.shared_memory_size,
            "virtual_dram": self.shared_memory_size,
            "mpu_dram": self.shared_memory_size,
            "pim_dram": self.shared_memory_size,
        }[space]

    def tensor_type(self, dtype: DType, shape, memory: str) -> TensorSpec:
        """`legato.get_model().tensor_type(legato.types.float("bfloat16"), [256, 128], "sram")`."""
        return TensorSpec.make(dtype, shape, memory)


class _DefaultModel(ComputeModel):
    pass


def default_model() -> ComputeModel:
    """The model `legato.get_model()` returns outside a compilation (annotations at `def` time)."""
    return ComputeModel(
        name="bertha",
        generation="evt0",
        num_cores=32,
        use_pim=False,
        num_memory_channels=8,
        shared_memory_size=128 * GiB,
    )
