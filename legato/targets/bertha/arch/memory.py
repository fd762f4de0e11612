"""The chip's physical memory: a sparse 64-bit address space of regions, every access bounds-
checked (anything outside a region traps with its address).

* Shared DRAM holds only what the runtime allocated there (`allocate`: a bump allocator from
  `SHARED_ALLOC_START`, 4 KiB aligned; address 0 is never allocated, so a null pointer traps).
  A region may be backed by the caller's own bytes (`data=`): writes land in place, or trap
  when the region is `read_only` (the runtime maps a kernel's `read` arguments so, uncopied).
* Each core's `sram`, `mpu_buffer` and `private_dram` are mapped whole on first touch (numpy
  zeros: the OS commits pages only when written). Spaces in `lazy_spaces` are stored in 1 MiB
  chunks allocated on first write instead, so that a sparse use of a large space costs little.

Host memory backing the simulated memories (core spaces mapped on first touch, lazy chunks) is
counted in `host_bytes`; `host_limit` (None: unlimited) caps it: the access that would exceed it
traps with `HostMemoryLimit`, naming the limit, and so does a host `MemoryError` meanwhile, so
64 cores filling private DRAM stop with a fault at the instruction instead of a raw
`MemoryError`. Shared-DRAM allocations are the runtime's (the arguments) and are not counted.

The emulator and the core / backend interpreters all use this class (the interpreters through
`legato.interp.memory.Memory`, which adds typed views and words its faults for IR ops).
"""

from __future__ import annotations

import bisect

import numpy as np

from legato.targets.bertha.arch.address_map import (
    CORE_SPACE_OFFSET,
    CORE_WINDOW_BASE,
    CORE_WINDOW_SIZE,
    core_base,
)
from legato.targets.bertha.arch.errors import AccessFault, MapError, Trap

SHARED_ALLOC_START = 0x1_0000  # the first shared allocation; address 0 always traps
SHARED_ALLOC_ALIGN = 4096
LAZY_CHUNK = 1 << 20


class HostMemoryLimit(Trap):
    """Backing the simulated memory would take more host memory than `limit` bytes (or the
    host ran out: `limit` None)."""

    def __init__(self, cause: str, address: int, limit: int | None, used: int):
        super().__init__(cause, address)
        self.limit, self.used = limit, used


class Region:
    """`size` bytes at `base`: in one array (`data`, given or zeros), or `lazy` in chunks;
    every write to a `read_only` region traps (`PhysicalMemory.write`)."""

    def __init__(
        self, base: int, size: int, name: str, lazy: bool = False, data=None, read_only=False
    ):
        self.base, self.size, self.name, self.lazy = base, size, name, lazy
        self.read_only = read_only
        if data is not None:
            self.data = data
        else:
            self.data = None if lazy else np.zeros(size, np.uint8)
        self.chunks: dict[int, np.ndarray] = {}

    @property
    def end(self) -> int:
        return self.base + self.size

    def read(self, off: int, n: int) -> np.ndarray:
        """The bytes [off, off + n): a view of the memory where they are stored contiguously
        (valid until the next write: every caller consumes it first, numpy copies overlapping
        assignments), else a fresh array."""
        if not self.lazy:
            return self.data[off : off + n]
        ci, co = divmod(off, LAZY_CHUNK)
        if co + n <= LAZY_CHUNK and ci in self.chunks:
            return self.chunks[ci][co : co + n]
        out = np.zeros(n, np.uint8)
        pos = 0
        while pos < n:
            ci, co = divmod(off + pos, LAZY_CHUNK)
            take = min(n - pos, LAZY_CHUNK - co)
            ch = self.chunks.get(ci)
            if ch is not None:
                out[pos : pos + take] = ch[co : co + take]
            pos += take
        return out

    memory = None  # the PhysicalMemory charged for this lazy region's chunks

    def _new_chunk(self, ci: int) -> np.ndarray:
        addr = self.base + ci * LAZY_CHUNK
        if self.memory is not None:
            self.memory.charge(LAZY_CHUNK, addr, f"{self.name} (a {LAZY_CHUNK >> 20} MiB chunk)")
        try:
            return np.zeros(LAZY_CHUNK, np.uint8)
        except MemoryError:
            if self.memory is None:
                raise
            raise self.memory._host_exhausted(LAZY_CHUNK, addr, self.name) from None

    def write(self, off: int, data: np.ndarray) -> None:
        n = data.size
        if not self.lazy:
            self.data[off : off + n] = data
            return
        pos = 0
        while pos < n:
            ci, co = divmod(off + pos, LAZY_CHUNK)
            take = min(n - pos, LAZY_CHUNK - co)
            ch = self.chunks.get(ci)
            if ch is None:
                ch = self.chunks[ci] = self._new_chunk(ci)
            ch[co : co + take] = data[pos : pos + take]
            pos += take


class PhysicalMemory:
    """Regions only, everything else traps (`AccessFault`). `num_cores` (default the
    model's) bounds the core windows that map on first touch; `lazy_spaces` are chunked;
    `core_region_name` names a core space's region in fault messages."""

    def __init__(
        self,
        model,
        num_cores: int | None = None,
        *,
        lazy_spaces: frozenset[str] = frozenset(),
        core_region_name: str = "core{core}.{space}",
    ):
        self.model = model
        self.host_bytes = 0  # host memory backing core spaces and lazy chunks
        self.host_limit: int | None = None
        self.num_cores = model.num_cores if num_cores is None else num_cores
        self.lazy_spaces = lazy_spaces
        self.core_region_name = core_region_name
        self.regions: list[Region] = []
        self._bases: list[int] = []
        self._next_shared = SHARED_ALLOC_START

    # -- mapping ----------------------------------------------------------------------------

    def add(self, region: Region) -> Region:
        """Map `region`; `MapError` if it overlaps a region already mapped."""
        i = bisect.bisect_left(self._bases, region.base)
        for r in self.regions[max(0, i - 1) : i + 1]:
            if region.base < r.end and r.base < region.end:
                raise MapError(
                    f"allocation {region.name} overlaps {r.name}", region.name, region.base, r
                )
        self.regions.insert(i, region)
        self._bases.insert(i, region.base)
        return region

    def allocate(
        self, size: int, name: str, data: np.ndarray | None = None, read_only: bool = False
    ) -> int:
        """A new shared-DRAM region of `size` bytes (at least 1), or over `data` (1-D uint8,
        possibly a view of the caller's array; `read_only`: writes to it trap); returns its
        address."""
        addr = self._next_shared
        size = max(int(size), 1)
        if addr + size > self.model.shared_memory_size:
            raise MapError(f"shared DRAM exhausted allocating {size} bytes for {name}", name, addr)
        self.add(self._shared_region(addr, size, name, data, read_only))
        self._next_shared = -(-(addr + size) // SHARED_ALLOC_ALIGN) * SHARED_ALLOC_ALIGN
        return addr

    def _shared_region(
        self, addr: int, size: int, name: str, data: np.ndarray | None, read_only: bool
    ) -> Region:
        """The region of a shared-DRAM allocation: over `data`, else zero-filled (the
        emulator's memory recycles the arrays of earlier runs' large allocations)."""
        return Region(
            addr, size if data is None else data.size, name, data=data, read_only=read_only
        )

    def _lazy_core_region(self, addr: int) -> Region | None:
        if addr < CORE_WINDOW_BASE:
            return None
        core, off = divmod(addr - CORE_WINDOW_BASE, CORE_WINDOW_SIZE)
        if core >= self.num_cores:
            return None
        for space, base_off in CORE_SPACE_OFFSET.items():
            size = self.model.memory_size(space)
            if base_off <= off < base_off + size:
                lazy = space in self.lazy_spaces
                name = self.core_region_name.format(core=core, space=space)
                if not lazy:
                    self.charge(size, addr, name)
                try:
                    region = self._core_region(core_base(core) + base_off, size, name, lazy)
                except MemoryError:
                    raise self._host_exhausted(size, addr, name) from None
                if lazy:
                    region.memory = self
                return self.add(region)
        return None

    def _core_region(self, base: int, size: int, name: str, lazy: bool) -> Region:
        """The region backing a core space mapped on first touch, zero-filled (the emulator's
        memory recycles the arrays of earlier runs)."""
        return Region(base, size, name, lazy=lazy)

    def charge(self, nbytes: int, addr: int, what: str) -> None:
        """Count `nbytes` more host memory for `what`; `HostMemoryLimit` past `host_limit`."""
        used = self.host_bytes + nbytes
        if self.host_limit is not None and used > self.host_limit:
            raise HostMemoryLimit(
                f"host-memory limit of {self.host_limit} bytes for simulated memory exceeded: "
                f"backing {what} needs {nbytes} more bytes on top of {self.host_bytes} "
                "(set $LEGATO_MEMORY_LIMIT or legato.session(memory_limit=...))",
                addr,
                self.host_limit,
                used,
            )
        self.host_bytes = used

    def _host_exhausted(self, nbytes: int, addr: int, what: str) -> HostMemoryLimit:
        return HostMemoryLimit(
            f"the host ran out of memory backing {what} ({nbytes} more bytes on top of "
            f"{self.host_bytes}); lower $LEGATO_MEMORY_LIMIT to stop such runs earlier",
            addr,
            None,
            self.host_bytes + nbytes,
        )

    # -- access -----------------------------------------------------------------------------

    def find(self, addr: int, n: int) -> tuple[Region, int]:
        """The region holding [addr, addr + n) and the offset of addr in it; maps a core space
        on first touch; `AccessFault` when the bytes are not all in one region."""
        if n < 0:
            raise AccessFault(f"negative access size {n}", addr, n)
        i = bisect.bisect_right(self._bases, addr) - 1
        r = self.regions[i] if i >= 0 else None
        if r is None or addr >= r.end:
            r = self._lazy_core_region(addr)
            if r is None:
                raise AccessFault(f"access of {n} bytes outside any allocation", addr, n)
        if addr + n > r.end:
            raise AccessFault(
                f"access of {n} bytes runs past the end of {r.name} ({r.base:#x}+{r.size:#x})",
                addr,
                n,
                r,
            )
        return r, addr - r.base

    def read(self, addr: int, n: int) -> np.ndarray:
        r, off = self.find(addr, n)
        return r.read(off, n)

    def write(self, addr: int, data) -> None:
        data = (
            np.frombuffer(bytes(data), np.uint8)
            if isinstance(data, (bytes, bytearray))
            else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        )
        r, off = self.writable(addr, data.size)
        r.write(off, data)

    def writable(self, addr: int, n: int) -> tuple[Region, int]:
        """`find`, and an `AccessFault` when the bytes are read-only."""
        r, off = self.find(addr, n)
        if r.read_only:
            raise AccessFault(
                f"write of {n} bytes to {r.name}, which is read-only (an argument the "
                "kernel declares `read` is mapped uncopied and may not be written)",
                addr,
                n,
                r,
            )
        return r, off

    def read_array(self, addr: int, count: int, dtype) -> np.ndarray:
        dt = np.dtype(dtype)
        return self.read(addr, count * dt.itemsize).view(dt)
