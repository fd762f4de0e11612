"""The physical memory: shared allocation, lazy core spaces, bounds-checked access."""

import numpy as np
import pytest
from fake_model import FakeModel, KiB

from legato.targets.bertha.arch.address_map import core_space_base
from legato.targets.bertha.arch.errors import AccessFault, MapError
from legato.targets.bertha.arch.memory import (
    LAZY_CHUNK,
    SHARED_ALLOC_ALIGN,
    SHARED_ALLOC_START,
    PhysicalMemory,
    Region,
)


def test_shared_allocations_are_aligned_and_never_at_zero():
    mem = PhysicalMemory(FakeModel())
    a = mem.allocate(10, "a")
    b = mem.allocate(0, "b")  # an empty allocation still has an address of its own
    c = mem.allocate(1, "c")
    assert a == SHARED_ALLOC_START
    assert b == a + SHARED_ALLOC_ALIGN and c == b + SHARED_ALLOC_ALIGN
    with pytest.raises(AccessFault, match="access of 8 bytes outside any allocation") as e:
        mem.read(0, 8)
    assert e.value.address == 0 and e.value.region is None


def test_allocation_over_caller_bytes_writes_in_place():
    mem = PhysicalMemory(FakeModel())
    arr = np.arange(4, dtype=np.int32)
    addr = mem.allocate(arr.nbytes, "arr", data=arr.view(np.uint8))
    mem.write(addr + 4, np.int32(-7).tobytes())
    assert arr.tolist() == [0, -7, 2, 3]
    assert mem.read_array(addr, 4, np.int32).tolist() == [0, -7, 2, 3]


def test_shared_dram_exhausted():
    mem = PhysicalMemory(FakeModel(shared_memory_size=SHARED_ALLOC_START + 100))
    mem.allocate(100, "fits")
    with pytest.raises(MapError, match="shared DRAM exhausted allocating 1 bytes for next"):
        mem.allocate(1, "next")


def test_overlapping_regions_are_refused():
    mem = PhysicalMemory(FakeModel())
    mem.add(Region(0x100, 0x100, "first"))
    with pytest.raises(MapError, match="allocation second overlaps first") as e:
        mem.add(Region(0x1FF, 1, "second"))
    assert e.value.existing.name == "first"
    mem.add(Region(0x200, 1, "adjacent"))  # touching is not overlapping


def test_access_past_the_end_names_the_region():
    mem = PhysicalMemory(FakeModel())
    addr = mem.allocate(16, "a")
    with pytest.raises(AccessFault, match=r"runs past the end of a \(0x10000\+0x10\)") as e:
        mem.read(addr + 8, 16)
    assert e.value.region.name == "a" and e.value.nbytes == 16
    with pytest.raises(AccessFault, match="negative access size -1"):
        mem.read(addr, -1)


def test_core_spaces_map_on_first_touch_up_to_the_model_size():
    model = FakeModel()
    mem = PhysicalMemory(model, core_region_name="core {core} {space}")
    sram = core_space_base(1, "sram")
    assert not mem.regions
    mem.write(sram + model.sram_size - 4, b"\x01\x02\x03\x04")
    (region,) = mem.regions
    assert (region.base, region.size, region.name) == (sram, model.sram_size, "core 1 sram")
    assert bytes(mem.read(sram + model.sram_size - 4, 4)) == b"\x01\x02\x03\x04"
    with pytest.raises(AccessFault, match="outside any allocation"):
        mem.read(sram + model.sram_size, 1)  # the slot past the space's size
    with pytest.raises(AccessFault, match="outside any allocation"):
        mem.read(core_space_base(model.num_cores, "sram"), 1)  # no such core
    small = PhysicalMemory(model, num_cores=1)
    with pytest.raises(AccessFault, match="outside any allocation"):
        small.read(sram, 1)


def test_lazy_space_is_chunked_and_reads_zeros():
    model = FakeModel()
    mem = PhysicalMemory(model, lazy_spaces=frozenset({"private_dram"}))
    base = core_space_base(0, "private_dram")
    data = np.arange(256, dtype=np.uint8)
    straddle = base + LAZY_CHUNK - 100  # a write across two chunks
    mem.write(straddle, data)
    (region,) = mem.regions
    assert region.lazy and region.name == "core0.private_dram"
    assert sorted(region.chunks) == [0, 1]
    assert mem.read(straddle, 256).tolist() == data.tolist()
    assert not mem.read(base + 3 * LAZY_CHUNK, 64).any()  # never written: zeros, no chunk
    assert sorted(region.chunks) == [0, 1]


def test_mapped_space_reads_are_views():
    mem = PhysicalMemory(FakeModel())
    addr = core_space_base(0, "mpu_buffer")
    view = mem.read(addr, 4 * KiB)
    view[:2] = 9
    assert mem.read(addr, 2).tolist() == [9, 9]
