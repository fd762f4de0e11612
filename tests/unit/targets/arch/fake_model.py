"""A stand-in for a ComputeModel: the machine model reads only these parameters."""

from dataclasses import dataclass

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass
class FakeModel:
    num_cores: int = 4
    sram_size: int = 64 * KiB
    mpu_buffer_size: int = 16 * KiB
    private_dram_size: int = 8 * MiB
    shared_memory_size: int = 1 * GiB

    def memory_size(self, space: str) -> int:
        return {
            "sram": self.sram_size,
            "mpu_buffer": self.mpu_buffer_size,
            "private_dram": self.private_dram_size,
        }.get(space, self.shared_memory_size)
