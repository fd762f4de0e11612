"""The address map: bases of every space, and the region of an address (docs/architecture.md)."""

import pytest

from legato.targets.bertha.arch.address_map import (
    CORE_SPACE_OFFSET,
    CORE_SPACE_STRIDE,
    CORE_WINDOW_BASE,
    CORE_WINDOW_SIZE,
    DRAM_REGIONS,
    VIRTUAL_DRAM_BASE,
    classify,
    core_base,
    core_space_base,
    decode_address,
)


def test_bases_are_the_documented_ones():
    assert VIRTUAL_DRAM_BASE == 0x0800_0000_0000
    assert core_base(0) == 0x1000_0000_0000
    assert core_base(3) == 0x1000_0000_0000 + 3 * 0x10_0000_0000
    assert core_space_base(2, "sram") == core_base(2)
    assert core_space_base(2, "mpu_buffer") == core_base(2) + 0x1_0000_0000
    assert core_space_base(2, "private_dram") == core_base(2) + 0x2_0000_0000
    # every space has its own slot, and the slots fit in the window
    assert sorted(CORE_SPACE_OFFSET.values()) == [i * CORE_SPACE_STRIDE for i in range(3)]
    assert 3 * CORE_SPACE_STRIDE <= CORE_WINDOW_SIZE


def test_mpu_weight_has_no_address():
    with pytest.raises(ValueError, match="'mpu_weight' is not an addressable core memory space"):
        core_space_base(0, "mpu_weight")


@pytest.mark.parametrize("space", list(CORE_SPACE_OFFSET))
@pytest.mark.parametrize("core", [0, 1, 31])
@pytest.mark.parametrize("offset", [0, 8, CORE_SPACE_STRIDE - 1])
def test_core_addresses_decode_to_their_space(space, core, offset):
    addr = core_space_base(core, space) + offset
    assert decode_address(addr) == (space, core, offset)
    assert classify(addr) == (space, core)


def test_shared_and_virtual_dram():
    assert decode_address(0x1234) == ("shared_dram", None, 0x1234)
    assert classify(0x1234) == ("shared", None)
    assert decode_address(VIRTUAL_DRAM_BASE + 5) == ("virtual_dram", None, 5)
    assert classify(VIRTUAL_DRAM_BASE + 5) == ("virtual", None)
    assert classify(CORE_WINDOW_BASE - 1) == ("virtual", None)


def test_past_the_last_space_of_a_window_is_unmapped():
    addr = core_base(1) + 3 * CORE_SPACE_STRIDE + 4
    assert classify(addr) == ("unmapped", 1)
    assert decode_address(addr) == ("unmapped", 1, 3 * CORE_SPACE_STRIDE + 4)


def test_dram_regions():
    assert {classify(0)[0], classify(VIRTUAL_DRAM_BASE)[0]} <= DRAM_REGIONS
    assert classify(core_space_base(0, "private_dram"))[0] in DRAM_REGIONS
    assert classify(core_space_base(0, "sram"))[0] not in DRAM_REGIONS
    assert classify(core_space_base(0, "mpu_buffer"))[0] not in DRAM_REGIONS
