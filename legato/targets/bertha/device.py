"""A Bertha chip whose shared DRAM persists across kernel launches: the device a runtime
keeps between calls (the `lpu` torch device's, `legato.lpu`).

`Device(capacity)` owns an emulated shared DRAM. `allocate(nbytes)` gives a `Buffer`: an
allocation at a fixed address, backed by its own host array (an `arch.memory.Region`), freed
when the last reference to the Buffer goes (`weakref.finalize`) and its addresses reused.
`run_binary(..., device=dev)` (or inside `with dev.active():`) launches a kernel on it: an
argument whose bytes lie in one of its allocations (`resident`) is bound by its device address,
neither copied in nor back; the launch's emulator maps each allocation the launch binds at its
own address, and the kernel's writes land in it; the launch's own allocations (its
Instruction Table, a staged host array) are temporary allocations of the device. The emulator is
still built per launch: the cores' SRAM, registers and queues are a kernel's, only shared DRAM
outlives it, as on a GPU.

`transfers` counts the bytes that cross between the host and the device: `to_device` and
`to_host` (explicit copies, host fills, a CPU fallback's operands and results), `on_device`
(device-to-device copies), `launch` (the Instruction Table and scalar parameters of each
launch) and `staged` (a host array bound to a launch: copied in, and back when written).
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from legato.errors import LegatoRuntimeError
from legato.targets.bertha.arch.memory import SHARED_ALLOC_ALIGN, SHARED_ALLOC_START, Region

__all__ = ["Buffer", "Device", "Transfers", "active_device"]

_ACTIVE: contextvars.ContextVar[Device | None] = contextvars.ContextVar(
    "legato_bertha_device", default=None
)


def active_device() -> Device | None:
    """The device `with Device.active():` launches kernels on (None: a fresh DRAM per run)."""
    return _ACTIVE.get()


@dataclass
class Transfers:
    """Bytes moved between the host and a device since it was made (or `reset`)."""

    to_device: int = 0
    to_host: int = 0
    on_device: int = 0
    launch: int = 0
    staged: int = 0
    by_reason: Counter = field(default_factory=Counter)  # (kind, reason) -> bytes

    KINDS = ("to_device", "to_host", "on_device", "launch", "staged")

    def count(self, kind: str, nbytes: int, reason: str) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"transfer kind {kind!r}: expected one of {', '.join(self.KINDS)}")
        setattr(self, kind, getattr(self, kind) + int(nbytes))
        self.by_reason[(kind, reason)] += int(nbytes)

    @property
    def host_device_bytes(self) -> int:
        """Data bytes copied between host and device memory (`to_device + to_host + staged`;
        kernel parameters are not data)."""
        return self.to_device + self.to_host + self.staged

    def __str__(self) -> str:
        head = ", ".join(f"{k} {getattr(self, k)} B" for k in self.KINDS)
        rows = [f"  {kind:9} {n:>12} B  {why}" for (kind, why), n in sorted(self.by_reason.items())]
        return "\n".join([f"transfers: {head}", *rows])


class Buffer:
    """One allocation of a `Device`: `nbytes` at device address `addr`, its bytes `array` (1-D
    uint8, the emulated DRAM itself). Alive while referenced; freed after."""

    __slots__ = ("__weakref__", "addr", "array", "device", "nbytes")

    def __init__(self, device: Device, addr: int, array: np.ndarray):
        self.device, self.addr, self.array, self.nbytes = device, addr, array, array.size

    def __repr__(self) -> str:
        return f"<Buffer {self.nbytes} B at {self.addr:#x}>"


class Device:
    """An emulated shared DRAM of `capacity` bytes that keeps its allocations between kernel
    launches (module docstring). Thread-safe."""

    def __init__(self, capacity: int, name: str = "device"):
        self.capacity, self.name = int(capacity), name
        self.transfers = Transfers()
        self._lock = threading.RLock()
        self._regions: dict[int, Region] = {}  # address -> the allocation's region
        self._ptrs: list[int] = []  # host data pointer of each allocation's array, sorted
        self._by_ptr: list[Region] = []  # the region of each `_ptrs` entry
        self._free: list[list[int]] = [[SHARED_ALLOC_START, self.capacity - SHARED_ALLOC_START]]
        self.allocated = 0  # bytes in live allocations (aligned)
        self.launches = 0  # kernel runs on this device (`run_binary`)
        self.bound_bytes = 0  # argument bytes those runs bound where they lie, uncopied

    # -- allocation -------------------------------------------------------------------------

    def allocate(self, nbytes: int, name: str = "buffer") -> Buffer:
        """A new zero-filled allocation of `nbytes` (at least 1) at a 4 KiB-aligned address;
        `LegatoRuntimeError` when the DRAM has no free range that large."""
        size = max(int(nbytes), 1)
        span = -(-size // SHARED_ALLOC_ALIGN) * SHARED_ALLOC_ALIGN
        with self._lock:
            for f in self._free:  # first fit, lowest address
                if f[1] >= span:
                    addr = f[0]
                    f[0] += span
                    f[1] -= span
                    break
            else:
                raise LegatoRuntimeError(
                    f"{self.name}: shared DRAM exhausted allocating {size} bytes for {name} "
                    f"({self.allocated} of {self.capacity} bytes allocated)"
                )
            self._free = [f for f in self._free if f[1]]
            array = np.zeros(size, np.uint8)
            region = Region(addr, size, f"{self.name}:{name}", data=array)
            self._regions[addr] = region
            ptr = array.ctypes.data
            i = bisect.bisect_left(self._ptrs, ptr)
            self._ptrs.insert(i, ptr)
            self._by_ptr.insert(i, region)
            self.allocated += span
        buf = Buffer(self, addr, array)
        weakref.finalize(buf, self._release, addr, ptr, span)
        return buf

    def _release(self, addr: int, ptr: int, span: int) -> None:
        with self._lock:
            if self._regions.pop(addr, None) is None:
                return
            i = bisect.bisect_left(self._ptrs, ptr)
            del self._ptrs[i], self._by_ptr[i]
            self.allocated -= span
            free = self._free
            j = bisect.bisect_left(free, [addr, 0])
            free.insert(j, [addr, span])
            # coalesce with the neighbours
            if j + 1 < len(free) and free[j][0] + free[j][1] == free[j + 1][0]:
                free[j][1] += free.pop(j + 1)[1]
            if j > 0 and free[j - 1][0] + free[j - 1][1] == free[j][0]:
                free[j - 1][1] += free.pop(j)[1]

    def region(self, buf: Buffer) -> Region:
        """The region of live allocation `buf` (what a launch's emulator maps)."""
        return self._regions[buf.addr]

    @property
    def live(self) -> int:
        """How many allocations are alive."""
        return len(self._regions)

    # -- binding ----------------------------------------------------------------------------

    def resident(self, arr: np.ndarray) -> tuple[Region, int] | None:
        """(the allocation's region, the device address of `arr`'s first byte) when `arr` is a
        C-contiguous array whose bytes all lie in one live allocation, else None."""
        if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous:
            return None
        ptr = arr.__array_interface__["data"][0]
        with self._lock:
            i = bisect.bisect_right(self._ptrs, ptr) - 1
            if i < 0:
                return None
            region = self._by_ptr[i]
            off = ptr - self._ptrs[i]
            if off + arr.nbytes > region.size or region.base not in self._regions:
                return None
            return region, region.base + off

    @contextlib.contextmanager
    def active(self):
        """Within: `run_binary` (and so every kernel call) launches on this device."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)
