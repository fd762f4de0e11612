"""Bertha's physical address map (docs/architecture.md, *Machine model*): where every memory
space of the chip lives in the one 64-bit address space, and the region an address falls in.

    shared DRAM     0x0000_0000_0000 ...  (shared_memory_size)
    virtual DRAM    0x0800_0000_0000 ...
    core i window   0x1000_0000_0000 + i * 0x10_0000_0000, 64 GiB, holding
      sram          window + 0x0
      mpu_buffer    window + 0x1_0000_0000
      private_dram  window + 0x2_0000_0000

Each core space has a 4 GiB slot (`CORE_SPACE_STRIDE`) of which the model's size of that space
is mapped (`ComputeModel.memory_size`); the rest of the slot, and of the window, is unmapped.
Pure functions of the address: whether memory is actually there is `arch.memory`'s business.
"""

from __future__ import annotations

SHARED_DRAM_BASE = 0x0000_0000_0000
VIRTUAL_DRAM_BASE = 0x0800_0000_0000
CORE_WINDOW_BASE = 0x1000_0000_0000
CORE_WINDOW_SIZE = 0x10_0000_0000
CORE_SPACE_OFFSET = {"sram": 0x0, "mpu_buffer": 0x1_0000_0000, "private_dram": 0x2_0000_0000}
CORE_SPACE_STRIDE = 0x1_0000_0000  # the slot reserved for each core space in a window

# `classify`'s names of the regions backed by DRAM (a scalar access there pays the DRAM latency,
# a DMA touching one goes over the channels or a core's DRAM).
DRAM_REGIONS = frozenset({"shared", "virtual", "private_dram"})

_SLOTS = tuple(CORE_SPACE_OFFSET)  # core space by slot index (offset // CORE_SPACE_STRIDE)
_NUM_SLOTS = len(_SLOTS)


def core_base(core: int) -> int:
    """Physical address of core `core`'s window."""
    return CORE_WINDOW_BASE + core * CORE_WINDOW_SIZE


def core_space_base(core: int, space: str) -> int:
    """Physical address of offset 0 of `space` in core `core`'s window."""
    if space not in CORE_SPACE_OFFSET:
        raise ValueError(f"{space!r} is not an addressable core memory space")
    return CORE_WINDOW_BASE + core * CORE_WINDOW_SIZE + CORE_SPACE_OFFSET[space]


def classify(addr: int) -> tuple[str, int | None]:
    """The region of `addr`: ("shared", None), ("virtual", None), (core space, core) or
    ("unmapped", core) for the part of a core window no space occupies. No allocation check."""
    if addr < CORE_WINDOW_BASE:
        return ("shared", None) if addr < VIRTUAL_DRAM_BASE else ("virtual", None)
    core, off = divmod(addr - CORE_WINDOW_BASE, CORE_WINDOW_SIZE)
    slot = off // CORE_SPACE_STRIDE
    return (_SLOTS[slot], core) if slot < _NUM_SLOTS else ("unmapped", core)


def decode_address(addr: int) -> tuple[str, int | None, int]:
    """(space, core or None, offset in that space) of a physical address, with the memory
    space names of the programming model (`shared_dram`, `virtual_dram`, core spaces), or
    "unmapped" past a window's last space."""
    if addr >= CORE_WINDOW_BASE:
        core, rest = divmod(addr - CORE_WINDOW_BASE, CORE_WINDOW_SIZE)
        slot = rest // CORE_SPACE_STRIDE
        if slot < _NUM_SLOTS:
            return _SLOTS[slot], core, rest - slot * CORE_SPACE_STRIDE
        return "unmapped", core, rest
    if addr >= VIRTUAL_DRAM_BASE:
        return "virtual_dram", None, addr - VIRTUAL_DRAM_BASE
    return "shared_dram", None, addr
