"""The memory model of the core and backend interpreters: the machine model's physical memory
(`legato.targets.bertha.arch.memory`, the emulator's too), holding allocations (byte arrays).

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

from dataclasses import dataclass

import numpy as np

from legato.interp.errors import MemoryFault
from legato.targets.bertha.arch.address_map import decode_address
from legato.targets.bertha.arch.errors import AccessFault, MapError
from legato.targets.bertha.arch.memory import PhysicalMemory, Region


class Memory(PhysicalMemory):
    """The chip's physical memory (`arch.memory`) as the interpreters use it: regions over the
    caller's arrays, writable views, and faults worded for an IR op (`MemoryFault`)."""

    def __init__(self, model, num_cores: int | None = None):
        super().__init__(model, num_cores, core_region_name="core {core} {space}")

    # -- mapping --------------------------------------------------------------------------

    def map(self, base: int, data: np.ndarray, name: str) -> Region:
        """Map the bytes `data` (1-D uint8; may be a view of a caller's array) at `base`."""
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError("Memory.map takes a 1-D uint8 array")
        try:
            return self.add(Region(base, data.size, name, data=data))
        except MapError as e:
            raise MemoryFault(f"mapping {name} at {base:#x} overlaps {e.existing.name}") from None

    def place_shared(self, data: np.ndarray, name: str) -> int:
        """Map `data` at the next free aligned address of shared DRAM; return the address."""
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError("Memory.map takes a 1-D uint8 array")
        try:
            return self.allocate(data.size, name, data=data)
        except MapError as e:
            raise MemoryFault(str(e)) from None

    def find(self, addr: int, nbytes: int) -> tuple[Region, int]:
        """The region holding [addr, addr+nbytes) and the offset of addr in it."""
        try:
            return PhysicalMemory.find(self, addr, nbytes)
        except AccessFault as e:
            raise _fault(e, addr, nbytes) from None

    # -- access ---------------------------------------------------------------------------

    def bytes(self, addr: int, nbytes: int) -> np.ndarray:
        """A writable uint8 view of [addr, addr+nbytes)."""
        if nbytes == 0:
            return np.zeros(0, np.uint8)
        try:  # (PhysicalMemory.find itself: this is the interpreters' hottest call)
            region, off = PhysicalMemory.find(self, addr, nbytes)
        except AccessFault as e:
            raise _fault(e, addr, nbytes) from None
        return region.data[off : off + nbytes]

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


def _fault(e: AccessFault, addr: int, nbytes: int) -> MemoryFault:
    """The interpreters' wording of an access fault: the address decoded to its space."""
    if nbytes < 0:
        return MemoryFault(f"access of {nbytes} bytes at {addr:#x}: negative size")
    space, core, offset = decode_address(addr)
    inside = "" if e.region is None else f" (runs past the end of {e.region.name})"
    return MemoryFault(
        f"access of {nbytes} bytes at {addr:#x} ({space}"
        + (f" of core {core}" if core is not None else "")
        + f", offset {offset:#x}) is outside every allocation{inside}"
    )


@dataclass(frozen=True)
class Buf:
    """A typed window onto `Memory`: the runtime value of a `!core.buf`."""

    addr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    space: str
    core: int | None = None
    strides: tuple[int, ...] | None = None  # in elements; None = row-major contiguous
    # [lo, hi) and name of the argument or planned buffer this one is part of: every access
    # through it must stay inside (`check_extent`); None: unchecked (mpu_weight)
    extent: tuple[int, int, str] | None = None

    def check_extent(self, addr: int, nbytes: int, write: bool) -> None:
        """MemoryFault unless [addr, addr + nbytes) lies in this buffer's extent: an index or
        slice past the end of an argument or buffer never reaches its neighbour."""
        e = self.extent
        if e is None or nbytes <= 0 or (e[0] <= addr and addr + nbytes <= e[1]):
            return
        verb = "writes" if write else "reads"
        raise MemoryFault(
            f"out of bounds: {verb} bytes [{addr - e[0]}, {addr - e[0] + nbytes}) of {e[2]}, "
            f"which has {e[1] - e[0]} bytes (an index or slice past its end?)"
        )

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

    def ranges(self) -> list[tuple[int, int]]:
        """The byte ranges [lo, hi) the buffer's runtime extent covers (for the hazard
        checker): one when it is contiguous, else one per run of its contiguous inner dims."""
        if self.size == 0 or self.addr < 0:  # empty, or the MPU's weight registers
            return []
        if self.is_contiguous:
            return [(self.addr, self.addr + self.nbytes)]
        shape, strides, item = self.shape, self.strides, self.dtype.itemsize
        assert strides is not None
        # the innermost dims whose strides are row-major form one contiguous run
        inner, run = len(shape), 1
        while inner > 0 and (shape[inner - 1] == 1 or strides[inner - 1] == run):
            inner -= 1
            run *= shape[inner]
        out = []
        for idx in np.ndindex(*shape[:inner]):
            lo = self.addr + sum(i * st for i, st in zip(idx, strides)) * item
            out.append((lo, lo + run * item))
        return out

    def array(self, memory: Memory) -> np.ndarray:
        """A writable numpy view of the buffer's runtime extent (inside its `extent`)."""
        self.check_extent(self.addr, self.span_bytes(), False)
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
