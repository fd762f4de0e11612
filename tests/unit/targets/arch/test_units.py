"""The unit operand rules of the machine model: operands in the running core's own memory, the
MPU's weight tile bounds (one rule for the emulator and the backend interpreter)."""

from dataclasses import dataclass

import pytest

from legato.targets.bertha.arch.address_map import core_space_base
from legato.targets.bertha.arch.errors import Trap
from legato.targets.bertha.arch.units import check_local, check_weight_tile


@dataclass
class TileModel:
    mpu_tile_k: int = 256
    mpu_tile_n: int = 128


@pytest.mark.parametrize("space", ["sram", "mpu_buffer", "private_dram"])
def test_local_accepts_the_running_cores_memories(space):
    check_local(core_space_base(2, space) + 64, 2, "vpu.add source")


def test_local_refuses_another_cores_memory_and_shared_dram():
    addr = core_space_base(1, "sram") + 8
    with pytest.raises(
        Trap,
        match=r"mpu.mm source must be in this core's local memory .* "
        r"got sram of core 1",
    ) as e:
        check_local(addr, 0, "mpu.mm source")
    assert e.value.address == addr
    with pytest.raises(Trap, match="got shared"):
        check_local(0x1_0000, 0, "vpu.add destination")
    with pytest.raises(Trap, match="of core 0"):  # top (None) has no core memory
        check_local(core_space_base(0, "sram"), None, "vpu.add source")


def test_local_with_fewer_spaces():
    check_local(core_space_base(3, "mpu_buffer"), 3, "mpu.ldw source", ("mpu_buffer",))
    with pytest.raises(Trap, match="mpu.ldw source must be in this core's mpu_buffer, got sram"):
        check_local(core_space_base(3, "sram"), 3, "mpu.ldw source", ("mpu_buffer",))


@pytest.mark.parametrize("k, n", [(1, 1), (256, 128), (17, 3)])
def test_weight_tile_within_bounds(k, n):
    check_weight_tile(TileModel(), k, n)


@pytest.mark.parametrize("k, n", [(257, 1), (1, 129), (0, 4), (4, 0)])
def test_weight_tile_out_of_bounds_or_empty(k, n):
    with pytest.raises(Trap, match=rf"weight tile \[{k}, {n}\] exceeds the MPU's \[256, 128\]"):
        check_weight_tile(TileModel(), k, n)
