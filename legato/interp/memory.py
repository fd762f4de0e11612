"""The memory model of the core and backend interpreters: one 64-bit physical address space laid
out by the address map of docs/architecture.md, holding allocations (byte arrays).

* Shared DRAM (`0x0`) holds only what the runtime placed there: the kernel's arguments (mapped
  onto the caller's own arrays, so writes land in place) and the Instruction Table.
* Each core's `sram`, `mpu_buffer` and `private_dram` are mapped whole, lazily, on first touch
  (numpy zeros: the OS commits pages only when written).
* Any access outside an allocation raises `MemoryFault` with the address.

A `Buf` is a typed window onto this memory (address, runtime shape, dtype, element strides):
the value of a `!core.buf` at the core level, and what a backend DMA / MPU access reads.
Layout convention: a buffer is row-major over its *runtime* dims (the runtime extent is one
contiguous prefix of the bound-sized reservation).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from legato.interp.errors import MemoryFault

SHARED_DRAM_BASE = 0x0000_0000_0000
VIRTUAL_DRAM_BASE = 0x0800_0000_0000
CORE_WINDOW_BASE = 0x1000_0000_0000
CORE_WINDOW_SIZE = 0x10_0000_0000
CORE_SPACE_OFFSET = {
    "sram": 0x0,
    "mpu_buffer": 0x1_0000_0000,
    "private_dram": 0x2_0000_0000,
}
SHARED_SPACES = ("shared_dram", "virtual_dram", "mpu_dram")
# Where the runtime places arguments and the Instruction Table in shared DRAM.
ARG_REGION_BASE = 0x1000
ARG_ALIGN = 0x1000


def core_space_base(core: int, space: str) -> int:
    """Physical address of offset 0 of `space` in core `core`'s window."""
    if space not in CORE_SPACE_OFFSET:
        raise ValueError(f"{space!r} is not an addressable core memory space")
    return CORE_WINDOW_BASE + core * CORE_WINDOW_SIZE + CORE_SPACE_OFFSET[space]


def decode_address(addr: int) -> tuple[str, int | None, int]:
    """(space, core or None, offset in that space) of a physical address."""
    if addr >= CORE_WINDOW_BASE:
        core, rest = divmod(addr - CORE_WINDOW_BASE, CORE_WINDOW_SIZE)
        for space, off in sorted(CORE_SPACE_OFFSET.items(), key=lambda kv: -kv[1]):
            if rest >= off:
                return space, core, rest - off
    if addr >= VIRTUAL_DRAM_BASE:
        return "virtual_dram", None, addr - VIRTUAL_DRAM_BASE
    return "shared_dram", None, addr


@dataclass
class Allocation:
    base: int
    data: np.ndarray  # uint8, 1-D
    name: str

    @property
    def end(self) -> int:
        return self.base + self.data.size


class Memory:
    """A sparse physical address space of byte-array allocations."""

    def __init__(self, model, num_cores: int | None = None):
        self.model = model
        self.num_cores = model.num_cores if num_cores is None else num_cores
        self._bases: list[int] = []
        self._allocs: list[Allocation] = []
        self._next_shared = ARG_REGION_BASE

    # -- mapping --------------------------------------------------------------------------

    def map(self, base: int, data: np.ndarray, name: str) -> Allocation:
        """Map the bytes `data` (1-D uint8; may be a view of a caller's array) at `base`."""
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError("Memory.map takes a 1-D uint8 array")
        i = bisect.bisect_left(self._bases, base)
        if i > 0 and self._allocs[i - 1].end > base:
            raise MemoryFault(f"mapping {name} at {base:#x} overlaps {self._allocs[i - 1].name}")
        if i < len(self._allocs) and base + data.size > self._allocs[i].base:
            raise MemoryFault(f"mapping {name} at {base:#x} overlaps {self._allocs[i].name}")
        alloc = Allocation(base, data, name)
        self._bases.insert(i, base)
        self._allocs.insert(i, alloc)
        return alloc

    def place_shared(self, data: np.ndarray, name: str) -> int:
        """Map `data` at the next free aligned address of shared DRAM; return the address."""
        base = self._next_shared
        self.map(base, data, name)
        size = max(int(data.size), 1)
        self._next_shared = (base + size + ARG_ALIGN - 1) // ARG_ALIGN * ARG_ALIGN
        return base

    def _map_core_space(self, addr: int) -> Allocation | None:
        space, core, offset = decode_address(addr)
        if core is None or core >= self.num_cores:
            return None
        size = self.model.memory_size(space)
        if offset >= size:
            return None
        base = core_space_base(core, space)
        return self.map(base, np.zeros(size, np.uint8), f"core {core} {space}")

    def find(self, addr: int, nbytes: int) -> tuple[Allocation, int]:
        """The allocation holding [addr, addr+nbytes) and the offset of addr in it."""
        i = bisect.bisect_right(self._bases, addr) - 1
        alloc = self._allocs[i] if i >= 0 else None
        if alloc is None or addr >= alloc.end:
            alloc = self._map_core_space(addr)
        if alloc is None or addr + nbytes > alloc.end:
            where = decode_address(addr)
            inside = "" if alloc is None else f" (runs past the end of {alloc.name})"
            raise MemoryFault(
                f"access of {nbytes} bytes at {addr:#x} ({where[0]}"
                + (f" of core {where[1]}" if where[1] is not None else "")
                + f", offset {where[2]:#x}) is outside every allocation{inside}"
            )
        return alloc, addr - alloc.base

    # -- access ---------------------------------------------------------------------------

    def bytes(self, addr: int, nbytes: int) -> np.ndarray:
        """A writable uint8 view of [addr, addr+nbytes)."""
        if nbytes == 0:
            return np.zeros(0, np.uint8)
        alloc, off = self.find(addr, nbytes)
        return alloc.data[off : off + nbytes]

    def read_u64(self, addr: int) -> int:
        return int(self.bytes(addr, 8).view("<u8")[0])

    def write_u64(self, addr: int, value: int) -> None:
        self.bytes(addr, 8).view("<u8")[0] = value & 0xFFFF_FFFF_FFFF_FFFF

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """memmove semantics (overlap-safe)."""
        if nbytes == 0:
            return
        data = self.bytes(src, nbytes).copy()
        self.bytes(dst, nbytes)[:] = data


@dataclass(frozen=True)
class Buf:
    """A typed window onto `Memory`: the runtime value of a `!core.buf`."""

    addr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    space: str
    core: int | None = None
    strides: tuple[int, ...] | None = None  # in elements; None = row-major contiguous

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def is_contiguous(self) -> bool:
        # the stride of a dim of size 1 never moves (e.g. a row slice x[:, a:b] of a [1, K] row)
        return self.strides is None or all(
            st == rm
            for n, st, rm in zip(self.shape, self.strides, row_major_strides(self.shape))
            if n != 1
        )

    def span_bytes(self) -> int:
        """Bytes from addr to one past the last element."""
        if self.size == 0:
            return 0
        strides = self.strides or row_major_strides(self.shape)
        last = sum((s - 1) * st for s, st in zip(self.shape, strides))
        return (last + 1) * self.dtype.itemsize

    def array(self, memory: Memory) -> np.ndarray:
        """A writable numpy view of the buffer's runtime extent."""
        raw = memory.bytes(self.addr, self.span_bytes())
        if self.is_contiguous:
            return raw.view(self.dtype).reshape(self.shape)
        item = self.dtype.itemsize
        return np.lib.stride_tricks.as_strided(
            raw.view(self.dtype)
            if raw.size % item == 0
            else raw[: raw.size // item * item].view(self.dtype),
            shape=self.shape,
            strides=tuple(s * item for s in self.strides),
        )

    def read(self, memory: Memory) -> np.ndarray:
        return self.array(memory).copy()

    def write(self, memory: Memory, value: np.ndarray) -> None:
        self.array(memory)[...] = value


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))
