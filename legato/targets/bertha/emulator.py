"""The Bertha emulator: runs a decoded binary (never IR) with the timing model of `timing.py`.

The top sequencer and every core that has a program are *modules*, each with its own PC,
registers and local time.  The scheduler is discrete-event: it always steps the module whose next
instruction can issue earliest (an instruction issues when its operands are free in the
scoreboard, its unit is free and its synchronisation condition holds); a module whose condition
depends on another module (`qwait`, `sem.wait`, `barrier`) is blocked until that happens.  When
every unhalted module is blocked the run stops with a `DeadlockError` naming each one.

Data effects of the units happen at issue; a DMA's bytes land when it completes (its source
is read then too), the time `qwait`, `dmawait` and the scoreboard observe, so a program that
synchronises correctly sees exactly the data real hardware would, and one that does not sees
stale data. With `hazards=True` the checker of `arch.hazards` reports such a program's
unordered accesses whatever the timing.  The machine's rules (address map, lazily allocated
memory, barriers, semaphores, DMA descriptors, queues) are the machine model's
(`legato.targets.bertha.arch`, shared with the interpreters); this module adds timing and
scheduling, and turns a `Trap` into an `EmulatorFault` with program, PC, address and cause.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import functools
import heapq
import os
import threading
import time as _time
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from threadpoolctl import ThreadpoolController

from legato import numerics, opset
from legato.errors import LegatoRuntimeError
from legato.targets.bertha import isa, mpu_fast, native, timing, vpu
from legato.targets.bertha.arch import debug, pim
from legato.targets.bertha.arch.address_map import (
    CORE_SPACE_OFFSET,
    CORE_WINDOW_BASE,
    CORE_WINDOW_SIZE,
    DRAM_REGIONS,
    classify,
    core_space_base,
)
from legato.targets.bertha.arch.bounds import (
    ADDRESS_FIELDS,
    OutOfBounds,
    access_spans,
    fit_check_cause,
)
from legato.targets.bertha.arch.bounds import check as check_bounds
from legato.targets.bertha.arch.dma import (
    ArrivalQueues,
    decode_notify,
    dma2d_geometry,
    dma_port,
    notify_core_reg,
    select_core,
)
from legato.targets.bertha.arch.errors import MapError
from legato.targets.bertha.arch.errors import Trap as _Trap
from legato.targets.bertha.arch.hazards import HazardChecker, rows_of
from legato.targets.bertha.arch.memory import HostMemoryLimit, PhysicalMemory, Region
from legato.targets.bertha.arch.modules import context_cores, core_id
from legato.targets.bertha.arch.sync import Barriers, Semaphores
from legato.targets.bertha.arch.units import LOCAL_SPACES, check_local, check_weight_tile
from legato.targets.bertha.asm import format_instruction, parse_context
from legato.targets.bertha.isa import (
    BC_COL,
    BC_ROW,
    BC_SCALAR,
    CORE_SELF,
    CORE_STATIC,
    DTYPE_NAMES,
    DTYPE_SIZES,
    MM_ACC,
    MM_F32,
    SPACE_NAMES,
    SPACES,
)

DEFAULT_INSTRUCTION_LIMIT = 20_000_000
MAX_TRACE_EVENTS = 500_000

_MASK64 = (1 << 64) - 1
_NP_DTYPES = {
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "i32": np.dtype(np.int32),
}
_CVT_NP_DTYPES = {**_NP_DTYPES, "i1": np.dtype(np.bool_), "i64": np.dtype(np.int64)}
"""vpu.cvt's result types (`isa.CVT_DTYPES`)."""
INF = 1 << 62
_VPU_KIND = {o.mnemonic: o.kind for o in opset.OPS if o.mnemonic}
"""VPU mnemonic -> the op table's kind, which names its numerics in `vpu`."""
_TIDS = {"dma": 1, "mpu": 2, "vpu": 3, "sync": 4}
_PIM_TIDS = {
    **_TIDS,
    "pim": 5,
}  # a chip with PIM units (docs/pim.md) traces them too  # trace thread per unit

PROFILER: contextvars.ContextVar = contextvars.ContextVar("legato_emulator_profiler", default=None)
"""The per-PC profiler of the runs started in this context (`legato.profile`), else None. When
set, an emulator runs every scalar through `_execute` (the reference path: same cycles) and
calls `profiler.attach(emulator)` once, then `profiler.step(module, pc, issue_cycle)` after
each instruction; when None the run pays one attribute test per non-scalar instruction."""


def _s64(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >> 63 else v


class EmulatorError(LegatoRuntimeError):
    pass


class EmulatorFault(EmulatorError):
    """A trap: `module` running `program` at `pc` touched `address` (or failed) for `cause`."""

    def __init__(
        self,
        program: str,
        module: str,
        pc: int,
        cause: str,
        address: int | None = None,
        instruction: str = "",
    ):
        self.program, self.module, self.pc = program, module, pc
        self.cause, self.address, self.instruction = cause, address, instruction
        where = f"program {program!r} ({module}) pc {pc}"
        if instruction:
            where += f" `{instruction}`"
        addr = f" at address {address:#x}" if address is not None else ""
        super().__init__(f"{where}: {cause}{addr}")


class OutOfBoundsError(EmulatorFault):
    """An access outside the extent of the argument or buffer its address was derived from
    (`arch.bounds`): `what` names it, `size` its bytes, `range` the access's bytes in it."""

    what, size, range = "", 0, None


class LimitError(EmulatorFault):
    """A run stopped by one of its bounds: `limit` names it ("instruction", "cycle", "time",
    "memory"), `value` is the bound; the message says where (module, program, pc)."""

    limit = ""
    value: float | None = None


class InstructionLimitError(LimitError):
    limit = "instruction"


class CycleLimitError(LimitError):
    limit = "cycle"


class TimeLimitError(LimitError):
    limit = "time"


class MemoryLimitError(LimitError):
    limit = "memory"


CHECK_EVERY = 256
"""Instructions between two checks of the wall clock and the cycle count (a check costs a
`time.monotonic()`; the slowest instructions, a large `vpu.exp`, take a few ms each)."""


class DeadlockError(EmulatorError):
    """Every unhalted module is blocked. `waits`: (module, program, pc, instruction, reason)."""

    def __init__(self, waits: list[tuple[str, str, int, str, str]], time: int):
        self.waits = waits
        self.time = time
        lines = [f"deadlock at cycle {time}: every running module is blocked"]
        for mod, prog, pc, ins, why in waits:
            lines.append(f"  {mod} (program {prog!r}) pc {pc} `{ins}`: {why}")
        super().__init__("\n".join(lines))


# ---- memory ----------------------------------------------------------------------------------
class _RecycledRegion(Region):
    """A core space (sram, mpu_buffer) whose array comes from `_CorePool` and goes back to it
    when its memory is released: it keeps the byte range written since (`lo`, `hi`), so that
    zeroing it for the next run costs what the run wrote, not the space's size."""

    def __init__(self, base: int, size: int, name: str, data: np.ndarray):
        super().__init__(base, size, name, data=data)
        self.lo, self.hi = size, 0

    def write(self, off: int, data: np.ndarray) -> None:
        n = data.size
        self.data[off : off + n] = data
        if off < self.lo:
            self.lo = off
        if off + n > self.hi:
            self.hi = off + n


@functools.lru_cache(maxsize=256)
def _premap_places(model, name_format: str, spaces: tuple) -> tuple:
    """(base, size, name) of each of `spaces` ((core, space) pairs) with a size on `model`,
    in their order (`Memory.premap`; the same for every run of a binary)."""
    out = []
    for core, space in spaces:
        size = model.memory_size(space)
        if size > 0:
            out.append(
                (core_space_base(core, space), size, name_format.format(core=core, space=space))
            )
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _premap_run(places: tuple) -> tuple | None:
    """(bytes, bases, sizes, places) of `places` (`_premap_places`) in ascending address
    order, when they do not overlap (mapped in one go by `Memory.premap`), else None. A
    program's spaces come in its declaration order (GEMV: each core's mpu_buffer, then its
    sram, above it); `premap` takes this run only when every space fits the host-memory
    bound, and then it maps them all whatever their order, as the space-by-space path would."""
    if not places:
        return None
    places = tuple(sorted(places))
    if any(a[0] + a[1] > b[0] for a, b in zip(places, places[1:])):
        return None
    return (
        sum(p[1] for p in places),
        tuple(p[0] for p in places),
        tuple(p[1] for p in places),
        places,
    )


def _ascending(regions: list) -> bool:
    return all(a.base + a.size <= b.base for a, b in zip(regions, regions[1:]))


class _CorePool:
    """Zero-filled arrays for the core spaces of later runs. A fresh 2 MiB `np.zeros` costs
    ~1 ms on this host (transparent huge pages: the first write zeroes a whole 2 MiB page, and
    the free unmaps it), 30 ms of a 32-core kernel's 40 ms run; a recycled one costs zeroing the
    bytes its last run wrote. Holds at most `max_bytes`; thread-safe."""

    max_bytes = 512 << 20  # (EVT1's 64 cores' sram and mpu_buffer: 288 MiB)

    def __init__(self):
        self._free: dict[int, list[np.ndarray]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> np.ndarray:
        with self._lock:
            free = self._free.get(size)
            if free:
                self._bytes -= size
                return free.pop()
        return np.zeros(size, np.uint8)

    def take_many(self, sizes: tuple) -> list[np.ndarray]:
        """`take` of each of `sizes`, in one hold of the lock (`Memory.premap`)."""
        out: list = []
        with self._lock:
            pool = self._free
            for size in sizes:
                free = pool.get(size)
                if free:
                    self._bytes -= size
                    out.append(free.pop())
                else:
                    out.append(None)
        return [np.zeros(size, np.uint8) if a is None else a for a, size in zip(out, sizes)]

    def give(self, regions: list) -> None:
        """Take back the arrays of `regions` (`_RecycledRegion`s), zeroed where written."""
        arrays = []
        for region in regions:
            data = region.data
            if region.lo < region.hi:
                data[region.lo : region.hi] = 0
            arrays.append(data)
        free = self._free
        with self._lock:
            for data in arrays:
                if self._bytes + data.size <= self.max_bytes:
                    free.setdefault(data.size, []).append(data)
                    self._bytes += data.size


_CORE_POOL = _CorePool()


class Memory(PhysicalMemory):
    """The chip's 64-bit physical address space (`arch.memory`): allocations only, everything
    else traps; private DRAM is stored in chunks allocated on first write."""

    def __init__(self, model):
        super().__init__(model, lazy_spaces=frozenset({"private_dram"}))
        self._by_page: dict[int, object] = {}  # addr >> 12 -> the region last found there

    def find(self, addr: int, n: int):
        """`PhysicalMemory.find`, remembering the region found per 4 KiB page: regions are
        never unmapped or moved, so a remembered region that holds [addr, addr + n) is the one
        the search would find (every access is checked; ~3 per instruction)."""
        r = self._by_page.get(addr >> 12)
        if r is not None and n >= 0:
            end = r.base + r.size
            if r.base <= addr < end and addr + n <= end:
                return r, addr - r.base
        r, off = super().find(addr, n)
        self._by_page[addr >> 12] = r
        return r, off

    recycle = True
    """Core spaces (but lazy ones) take their arrays from `_CORE_POOL` (False: fresh zeros, the
    reference a differential test compares it with)."""

    on_add = None
    """Called with every region mapped while it is set (the compiled loop's `_loop_region`)."""

    def add(self, region: Region) -> Region:
        region = super().add(region)
        if self.on_add is not None:
            self.on_add(region)
        return region

    def _core_region(self, base: int, size: int, name: str, lazy: bool) -> Region:
        if lazy or not self.recycle:
            return super()._core_region(base, size, name, lazy)
        return _RecycledRegion(base, size, name, _CORE_POOL.take(size))

    recycle_shared = (64 << 10, 16 << 20)
    """The sizes (least, most bytes) of the shared-DRAM allocations of the memory itself (not
    over a caller's array: a copied-in argument, a staged one) that take their arrays from
    `_CORE_POOL` as the core spaces do (`recycle`; a fresh large `np.zeros` costs a page fault
    per page it writes: RMSNorm's 256 KiB output ~60 us a run). Smaller ones are cheaper
    fresh; larger ones would crowd the core spaces out of the pool."""

    def _shared_region(self, addr, size, name, data, read_only) -> Region:
        lo, hi = self.recycle_shared
        if data is None and self.recycle and lo <= size <= hi:
            return _RecycledRegion(addr, size, name, _CORE_POOL.take(size))
        return super()._shared_region(addr, size, name, data, read_only)

    def premap(self, spaces) -> None:
        """Map the core spaces `spaces` ((core, space) pairs, not lazy ones) now, each as its
        first touch would (`_lazy_core_region`: charged, its array from the pool); one mapped
        already is skipped. It stops before a space that would pass the host-memory limit:
        that space's first touch then faults at its instruction, as it would have."""
        places = _premap_places(self.model, self.core_region_name, tuple(spaces))
        regions, bases, limit = self.regions, self._bases, self.host_limit
        fast = _premap_run(places)  # (sorted places above every mapped region, all fit)
        if (
            fast is not None
            and self.recycle
            and (not regions or regions[-1].end <= fast[1][0])
            and (limit is None or self.host_bytes + fast[0] <= limit)
        ):
            try:
                arrays = _CORE_POOL.take_many(fast[2])
            except MemoryError:  # (the slow path below names the space that ran out)
                arrays = None
            if arrays is not None:
                new_region = _RecycledRegion.__new__
                new = []
                for (base, size, name), data in zip(fast[3], arrays):
                    r = new_region(_RecycledRegion)  # (`_RecycledRegion(base, size, name,
                    r.base, r.size, r.name, r.lazy = base, size, name, False  # data)`'s fields)
                    r.read_only, r.data, r.chunks, r.lo, r.hi = False, data, {}, size, 0
                    new.append(r)
                self.host_bytes += fast[0]
                regions.extend(new)
                bases.extend(fast[1])
                if self.on_add is not None:
                    for r in new:
                        self.on_add(r)
                return
        known = set()
        new = []
        try:
            for base, size, name in places:
                i = bisect.bisect_right(bases, base) - 1
                if base in known or (i >= 0 and base < regions[i].end):  # (mapped already)
                    continue
                if limit is not None and self.host_bytes + size > limit:
                    break
                self.charge(size, base, name)
                try:
                    region = self._core_region(base, size, name, False)
                except MemoryError:
                    raise self._host_exhausted(size, base, name) from None
                known.add(base)
                new.append(region)
        finally:  # (the ones made, mapped: in address order, none overlapping)
            if new:
                if not bases or new[0].base > bases[-1] and _ascending(new):
                    regions.extend(new)
                    bases.extend(r.base for r in new)
                else:
                    merged = sorted(regions + new, key=lambda r: r.base)
                    regions[:] = merged
                    bases[:] = [r.base for r in merged]
                if self.on_add is not None:
                    for r in new:
                        self.on_add(r)

    def release(self) -> None:
        """Give the core spaces' arrays back for later runs (zeroed). This memory must not be
        used afterwards, nor any array read from it: its regions are unmapped."""
        regions, self.regions, self._bases, self._by_page = self.regions, [], [], {}
        recycled = [r for r in regions if isinstance(r, _RecycledRegion)]
        _CORE_POOL.give(recycled)
        for r in recycled:
            r.data = None

    def allocate(self, size: int, name: str) -> int:
        """A new shared-DRAM allocation of `size` bytes; returns its address."""
        try:
            return super().allocate(size, name)
        except MapError as e:
            raise EmulatorError(str(e)) from None

    def map_read_only(self, data: np.ndarray, name: str) -> int:
        """A new shared-DRAM allocation over the bytes of `data` (a C-contiguous array, not
        copied: a view of the caller's memory); every write to it traps. Returns its address."""
        flat = data.reshape(-1).view(np.uint8)
        flat.flags.writeable = False  # a stray in-place write raises instead of landing
        try:
            return super().allocate(flat.size, name, data=flat, read_only=True)
        except MapError as e:
            raise EmulatorError(str(e)) from None

    def map_writable(self, data: np.ndarray, name: str) -> int:
        """A new shared-DRAM allocation over the bytes of `data` (a C-contiguous, writeable
        array, not copied): the kernel's writes land in the caller's memory as they happen.
        Returns its address."""
        flat = data.reshape(-1).view(np.uint8)
        try:
            return super().allocate(flat.size, name, data=flat)
        except MapError as e:
            raise EmulatorError(str(e)) from None

    classify = staticmethod(classify)


# ---- modules ----------------------------------------------------------------------------------
@dataclass(slots=True)
class _Plan:
    ready: int  # earliest issue time (INF: waits on another module)
    reason: str = ""
    external: bool = False  # readiness can change when another module acts
    data: tuple = ()
    # planning again before the module acts gives this plan (`_stable`): the scheduler reuses it
    stable: bool = False
    # a DMA's (port, issue time but for the port's slots): planning it again before the module
    # acts can only move its port's free slot (`_replan_slot`)
    slot: tuple | None = None
    # a `qwait` that waits (INF) for an arrival on this queue (core, space, queue): planning it
    # again gives this plan while the queue is empty (`_wake`)
    queue: tuple | None = None


_PURE_FORMATS = frozenset({"ri", "rrr", "rri", "br", "jmp", "lsa"})


_PURE = None  # the plan of a scalar instruction (unused by _execute)


# Decoding is a pure function of the word and Instructions are immutable: the programs of one
# binary (32 cores running similar code) and repeated runs share their decoded words. A word
# that does not decode raises every time (exceptions are not cached).
_decode = functools.lru_cache(maxsize=1 << 16)(isa.decode)


def _wrap(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >> 63 else v


_ALU_DIRECT = {
    # the ALU ops whose result is this expression of the operands (`isa.alu`); the others
    # (shifts, division) call `isa.alu` itself
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "min": min,
    "max": max,
    "slt": lambda a, b: int(a < b),
    "seq": lambda a, b: int(a == b),
}


def _alu_fn(mn: str):
    f = _ALU_DIRECT.get(mn)
    if f is not None:
        return f

    def alu(a, b):
        try:
            return isa.alu(mn, a, b)
        except ZeroDivisionError as e:
            raise _Trap(str(e)) from None

    return alu


def _scalar_code(ins: isa.Instruction, num_cores: int):
    """`f(module, regs, pc) -> next pc`: what `Emulator._execute` does for scalar (pure)
    instruction `ins` on a model of `num_cores` cores, but the issue time, count and halt time
    (the caller's). A write to r0 is dropped as `Module.set` drops it (after any trap)."""
    mn, fmt = ins.op.mnemonic, ins.op.format
    a, b, c, simm = ins.a, ins.b, ins.c, ins.simm
    if fmt in ("rrr", "rri"):
        op = _alu_fn(mn if fmt == "rrr" else mn[:-1])
        if fmt == "rrr":

            def f(m, r, pc):
                v = op(r[b], r[c])
                if a:
                    r[a] = _wrap(v)
                return pc + 1

        else:

            def f(m, r, pc):
                v = op(r[b], simm)
                if a:
                    r[a] = _wrap(v)
                return pc + 1

        return f
    if fmt == "br":
        cmp = {
            "beq": lambda x, y: x == y,
            "bne": lambda x, y: x != y,
            "blt": lambda x, y: x < y,
            "bge": lambda x, y: x >= y,
        }[mn]
        return lambda m, r, pc: pc + simm if cmp(r[a], r[b]) else pc + 1
    if mn == "jmp":
        return lambda m, r, pc: pc + simm
    if mn == "li":
        v = _wrap(simm)

        def f(m, r, pc):
            if a:
                r[a] = v
            return pc + 1

        return f
    if mn == "lih":
        hi = ins.imm << 32

        def f(m, r, pc):
            if a:
                r[a] = _wrap(hi | (r[a] & 0xFFFFFFFF))
            return pc + 1

        return f
    if mn == "lsa":
        mode, field, imm = ins.d, c, ins.imm

        def f(m, r, pc):
            core = select_core(mode, field, r, m.core, num_cores)
            v = core_space_base(core, SPACE_NAMES[b]) + imm
            if a:
                r[a] = _wrap(v)
            return pc + 1

        return f
    if mn == "halt":

        def f(m, r, pc):
            m.halted = True
            return pc + 1

        return f
    if mn == "nop":
        return lambda m, r, pc: pc + 1
    raise AssertionError(f"{mn} is not a scalar instruction")  # pragma: no cover


_SC_ALU = {
    name: i + 1
    for i, name in enumerate("add sub mul div rem and or xor shl shr sra min max slt seq".split())
}
_SC_OTHER = {
    name: 32 + i
    for i, name in enumerate(
        "beq bne blt bge jmp li lih lsa.self lsa.static lsa.reg nop halt".split()
    )
}
_SC_IMM = 64
_SINS = np.dtype([("op", "<i4"), ("a", "<i4"), ("b", "<i4"), ("c", "<i4"), ("imm", "<i8")])


def _native_program(code: list, pure: list, min_run: int):
    """(the `sins` array of native/scalar.c for `code`, and per pc whether a run from there
    goes to compiled code: the pcs of a straight run of scalar instructions at least `min_run`
    long, or of one that holds a backward branch into itself, a loop). A scalar instruction it cannot encode (an
    `lsa` of a space that is no core memory) gets op 0: the compiled code stops before it and
    the threaded code runs it."""
    n = len(code)
    arr = np.zeros(n, _SINS)
    for i, (ins, p) in enumerate(zip(code, pure)):
        if not p:
            continue
        mn, fmt = ins.op.mnemonic, ins.op.format
        op, imm = 0, ins.simm
        if fmt == "rrr":
            op = _SC_ALU[mn]
        elif fmt == "rri":
            op = _SC_ALU[mn[:-1]] | _SC_IMM
        elif mn == "lih":
            op, imm = _SC_OTHER["lih"], _wrap(ins.imm << 32)
        elif mn == "lsa":
            space = SPACE_NAMES.get(ins.b)
            if space in CORE_SPACE_OFFSET:
                mode = {CORE_SELF: "lsa.self", CORE_STATIC: "lsa.static"}.get(ins.d, "lsa.reg")
                op, imm = _SC_OTHER[mode], CORE_SPACE_OFFSET[space] + ins.imm
        else:
            op = _SC_OTHER[mn]
        arr[i] = (op, ins.a, ins.b, ins.c, imm)
    hot = [False] * n
    i = 0
    while i < n:  # each straight run [i, end) of scalar instructions
        if not pure[i]:
            i += 1
            continue
        end = i
        while end < n and pure[end]:
            end += 1
        loops = any(
            i <= j + code[j].simm <= j
            for j in range(i, end)
            if code[j].op.format == "br" or code[j].op.mnemonic == "jmp"
        )
        if loops or end - i >= min_run:
            hot[i:end] = [True] * (end - i)
        i = end
    return native.ffi.cast("sins *", native.ffi.from_buffer(arr)), hot, arr


def _is_pure(ins: isa.Instruction) -> bool:
    return ins.op.format in _PURE_FORMATS or ins.op.mnemonic in ("nop", "halt")


# native/loop.c's kinds of pc: the Python's, scalar code it runs, qwait, dmawait, a scalar it
# has no encoding for (the threaded code runs it), a VPU instruction, a dma, a dma2d, an
# mpu.ldw, an mpu.mm, an ld, an st
(
    CK_PY,
    CK_SCALAR,
    CK_QWAIT,
    CK_DMAWAIT,
    CK_PURE_PY,
    CK_VPU,
    CK_DMA,
    CK_DMA2D,
    CK_LDW,
    CK_MM,
    CK_LD,
    CK_ST,
) = range(12)
# native/loop.c's statuses (`Emulator._run_native`)
(
    LP_DONE,
    LP_PYPOP,
    LP_SCHED,
    LP_SCALARS,
    LP_LIMIT,
    LP_PYEXEC,
    LP_DEADLOCK,
    LP_NOMEM,
    LP_WAKE,
    LP_MMTODO,
    LP_MAP,
) = range(11)
# native/loop.c's kinds of region for a DMA end (`lregion.space`)
RS_NONE, RS_SHARED, RS_DRAM, RS_LOCAL = -1, 0, 1, 2


_LVPU = np.dtype(
    [(f, "<i8") for f in ("nat", "c1", "c2", "fmt", "sz", "ssz", "mode", "period", "trans")]
    + [(f, "<i8") for f in "abcd"]
)
_LOOP_VPU_FORMATS = {"vbin": 1, "vun": 2, "vcvt": 3, "vfill": 4, "v2d": 5}


def _loop_vpu(ins: isa.Instruction) -> tuple | None:
    """native/loop.c's `lvpu` of VPU instruction `ins` (the `_VpuStatic` of it and the form
    `_native_form` gives it), or None when native/vpu.c does not run it."""
    vs = _VpuStatic(ins)
    if vs.nat is None:
        return None
    lib, f = native.lib, vs.nat[0]
    nat = {
        lib.vpu_bin: 1,
        lib.vpu_un: 2,
        lib.vpu_cvt: 3,
        lib.vpu_fill: 4,
        lib.vpu_transpose: 5,
        lib.vpu_rsum: 6,
        lib.vpu_rmax: 7,
    }[f]
    c1, c2 = (vs.nat[1:] + (0,))[:2]
    fmt = _LOOP_VPU_FORMATS[vs.fmt]
    return (nat, c1, c2, fmt, vs.sz, vs.ssz, vs.mode, vs.period, int(vs.trans))


def _loop_dma_imm(ins: isa.Instruction) -> int:
    """native/loop.c's `imm` of a dma / dma2d: d << 40 (a dma2d's stride register), then its
    notify (`decode_notify`), when it has one: 1 << 39 | queue << 24 | space << 16 |
    field << 8 | core mode."""
    imm = ins.d << 40
    nt = decode_notify(ins.op.format, ins.imm, ins.d)
    if nt is not None:
        mode, field, space, queue = nt
        imm |= 1 << 39 | queue << 24 | space << 16 | field << 8 | mode
    return imm


def _reg_mask(ins: isa.Instruction) -> int:
    """The registers `Module.stall_on_loads` waits for before `ins`, as a bit mask."""
    mask = 0
    for f in isa.REG_FIELDS[ins.op.format]:
        mask |= 1 << getattr(ins, f)
    reg = notify_core_reg(ins.op.format, ins.imm, ins.d)
    if reg is not None:
        mask |= 1 << reg
    return mask


def _loop_program(code: list, pure: list, kinds: list) -> tuple:
    """(the `sins` array of native/loop.c: `_native_program`'s, a `qwait`'s space and queue
    in `a` and `imm`, a dma's or dma2d's registers in `a`, `b`, `c` and `_loop_dma_imm` in
    `imm`, an mpu.ldw's or mpu.mm's registers in `a`, `b`, `c` and an mm's flags in `imm`, an
    ld's or st's registers in `a`, `b` and its offset in `imm`; per pc its CK_* kind as an int8
    array; the same kinds as bytes; per pc the `lvpu` of a VPU instruction that native/vpu.c
    runs; per pc the registers `stall_on_loads` waits for, `_reg_mask`, as a uint32 array)."""
    arr = _native_program(code, pure, len(code) + 1)[2].copy()
    ck = np.zeros(len(code), np.int8)
    vs = np.zeros(max(len(code), 1), _LVPU)
    rm = np.array([_reg_mask(ins) for ins in code] or [0], np.uint32)
    for i, (ins, p, k) in enumerate(zip(code, pure, kinds)):
        if k in (K_LD, K_ST):
            ck[i] = CK_LD if k == K_LD else CK_ST
            arr[i]["a"], arr[i]["b"], arr[i]["imm"] = ins.a, ins.b, ins.simm
        elif k == K_VPU:
            lv = _loop_vpu(ins)
            if lv is not None:
                ck[i] = CK_VPU
                vs[i] = lv + (ins.a, ins.b, ins.c, ins.d)
        elif p:
            ck[i] = CK_SCALAR if arr[i]["op"] else CK_PURE_PY
        elif k == K_QWAIT:
            ck[i] = CK_QWAIT
            arr[i]["a"], arr[i]["imm"] = ins.a, ins.imm
        elif k == K_DMAWAIT:
            ck[i] = CK_DMAWAIT
        elif k in (K_DMA, K_DMA2D):
            ck[i] = CK_DMA if k == K_DMA else CK_DMA2D
            arr[i]["a"], arr[i]["b"], arr[i]["c"] = ins.a, ins.b, ins.c
            arr[i]["imm"] = _loop_dma_imm(ins)
        elif k in (K_LDW, K_MM):
            ck[i] = CK_LDW if k == K_LDW else CK_MM
            arr[i]["a"], arr[i]["b"], arr[i]["c"] = ins.a, ins.b, ins.c
            # (native/loop.c's MMF_F32 | MMF_ACC, whatever the encoding's bits)
            arr[i]["imm"] = (1 if ins.imm & MM_F32 else 0) | (2 if ins.imm & MM_ACC else 0)
    return arr, ck, ck.tobytes(), vs, rm


# What `_prepare` plans an instruction as, decoded once per pc (`_kind`): its planner is
# `Emulator._planners[kind]`, but for the VPU's, planned inline (the most frequent).
(
    K_SCALAR,
    K_VPU,
    K_LD,
    K_ST,
    K_DMA,
    K_DMA2D,
    K_QWAIT,
    K_DMAWAIT,
    K_SEM_WAIT,
    K_LDW,
    K_MM,
    K_PIM,
    K_DBG,
    K_OTHER,
) = range(14)


def _kind(ins: isa.Instruction) -> int:
    op = ins.op
    fmt, mn = op.format, op.mnemonic
    if op.timing == "V":
        return K_VPU
    if fmt in ("ld", "st"):
        return K_LD if mn == "ld" else K_ST
    kind = {
        "dma": K_DMA,
        "dma2d": K_DMA2D,
        "qwait": K_QWAIT,
        "mpu_ldw": K_LDW,
        "mpu_mm": K_MM,
        "pim": K_PIM,
        "dbg": K_DBG,
    }.get(fmt)
    if kind is not None:
        return kind
    if mn == "dmawait":
        return K_DMAWAIT
    if mn == "sem.wait":
        return K_SEM_WAIT
    return K_SCALAR if _is_pure(ins) else K_OTHER


def _stable_kind(kind: int) -> bool:
    """Whether a plan of an instruction of `kind` that issues (not INF) can be reused
    (`Emulator._stable`): all but a DMA's and `sem.wait`'s."""
    return kind not in (K_DMA, K_DMA2D, K_SEM_WAIT)


class _Code:
    """A program's decoded instructions and what the fast paths build from them, once for
    every module that runs it, every `Emulator` and every run of the binary (`_program_code`):
    `pure` (per pc: a scalar instruction), `fns` (model's core count -> the `_scalar_code`
    functions) and `native` (`native_min_run` -> `_native_program`). All of it is a function of
    the words (and the key), never of a run's state."""

    __slots__ = ("ins", "pure", "kinds", "stab", "fns", "native", "vpu", "loop")

    def __init__(self, words: tuple[int, ...]):
        self.set_code([_decode(w) for w in words])

    def set_code(self, ins: list) -> None:
        """Decoded instructions `ins` and what is derived from them alone: `pure`, `kinds`
        (`_kind`) and `stab` (`_stable_kind`) per pc."""
        self.ins = ins
        self.pure = [_is_pure(i) for i in ins]
        self.kinds = [_kind(i) for i in ins]
        self.stab = [_stable_kind(k) for k in self.kinds]
        self.fns: dict[int, list] = {}
        self.native: dict[int, tuple] = {}
        self.vpu: dict[int, _VpuStatic] = {}  # pc -> its VPU instruction's `_VpuStatic`
        self.loop: dict | None = None  # `Emulator._loop_code`


class _VpuStatic:
    """What planning and executing a VPU instruction read from its encoding alone (its dtypes,
    element sizes, broadcast mode, the op table's kind, the names its traps use), decoded once
    per program instead of on every issue."""

    __slots__ = (
        "fmt",
        "mn",
        "kind",
        "dt",
        "st",
        "ct",
        "sz",
        "ssz",
        "csz",
        "mode",
        "period",
        "trans",
        "src",
        "dst",
        "nat",
    )

    def __init__(self, ins: isa.Instruction):
        self._decode(ins)
        self.nat = _native_form(self)

    def _decode(self, ins: isa.Instruction) -> None:
        op = ins.op
        self.fmt, self.mn = op.format, op.mnemonic
        self.kind = _VPU_KIND.get(self.mn)
        self.trans = self.mn in isa.VPU_TRANSCENDENTAL
        self.src, self.dst = f"{self.mn} source", f"{self.mn} destination"
        self.mode = self.period = 0
        self.st = self.ct = None
        self.ssz = self.csz = 0
        fmt, imm = self.fmt, ins.imm
        if fmt in ("vbin", "vsel"):
            name = DTYPE_NAMES[imm & 0xF]
            if fmt == "vbin":
                self.mode, self.period = (imm >> 4) & 3, imm >> 8
            else:
                cname = isa.COND_DTYPE_NAMES[imm >> 4]
                self.csz = isa.COND_DTYPE_SIZES[cname]
                self.ct = np.dtype(np.bool_) if cname == "i1" else _NP_DTYPES[cname]
        elif fmt == "vcvt":
            # the result may be an integer type (`isa.CVT_DTYPES`: i64), the source never is
            name, sname = isa.CVT_DTYPE_NAMES[imm & 0xF], DTYPE_NAMES[imm >> 4]
            self.st, self.ssz = _NP_DTYPES[sname], DTYPE_SIZES[sname]
            self.dt, self.sz = _CVT_NP_DTYPES[name], isa.CVT_DTYPE_SIZES[name]
            return
        else:  # vun, vfill, v2d
            name = DTYPE_NAMES[imm]
        self.dt, self.sz = _NP_DTYPES[name], DTYPE_SIZES[name]
        if fmt == "vun":
            self.st, self.ssz = self.dt, self.sz


def _native_form(vs: _VpuStatic) -> tuple | None:
    """How native/vpu.c runs `vs`'s instruction, (its function, its leading codes), or None:
    the numpy reference runs it (another op or dtype, or the extension is not built)."""
    if native.lib is None:
        return None
    lib, fmt, kind = native.lib, vs.fmt, vs.kind
    dt = vpu.NATIVE_DTYPES.get(vs.dt)
    if fmt == "vbin" and kind in vpu.NATIVE_BINARY and dt is not None:
        return lib.vpu_bin, vpu.NATIVE_BINARY[kind], dt
    if fmt == "vun" and kind in vpu.NATIVE_UNARY and dt is not None:
        return lib.vpu_un, vpu.NATIVE_UNARY[kind], dt
    if fmt == "vcvt" and dt is not None and vpu.NATIVE_DTYPES.get(vs.st) is not None:
        return lib.vpu_cvt, vpu.NATIVE_DTYPES[vs.st], dt
    if fmt == "vfill" and vs.sz in vpu.NATIVE_ESIZES:
        return lib.vpu_fill, vs.sz
    if vs.mn == "vpu.transpose" and vs.sz in vpu.NATIVE_ESIZES:
        return lib.vpu_transpose, vs.sz
    if vs.mn == "vpu.rsum" and dt is not None:
        return lib.vpu_rsum, dt
    if vs.mn == "vpu.rmax" and dt is not None:
        return lib.vpu_rmax, dt
    return None


# Keyed by the words: a binary run again (the JIT's cached call re-runs its bytes) and the
# programs of one binary that share code share it. A word that does not decode raises every
# time (exceptions are not cached).
_program_code = functools.lru_cache(maxsize=256)(_Code)


class Module:
    def __init__(self, index: int, name: str, program, core: int | None, code, shared=None):
        """`shared`: the `_Code` of `code` (None: none is kept, the fast paths build theirs)."""
        self.shared: _Code = shared if shared is not None else _Code(())
        if shared is None:
            self.shared.set_code(code)
        self.pure = self.shared.pure
        self.kinds = self.shared.kinds
        self.fns: list | None = None  # `_run_scalars`' threaded code and compiled program,
        self.prog: tuple | None = None  # looked up on its first call
        self.index = index
        self.name = name
        self.program = program
        self.core = core
        self.code: list[isa.Instruction] = code
        self.regs = [0] * isa.NUM_REGS
        self.pc = 0
        self.time = 0
        self.halted = False
        self.halt_time = 0
        self.version = 0
        self.inflight: list[tuple[int, list, list]] = []  # (end, reads, writes)
        self.mpu_free = 0
        self.vpu_free = 0
        self.dma_end = 0
        self.busy = {"dma": 0, "mpu": 0, "vpu": 0}
        self._dma_busy_until = 0
        self.count = 0
        self._w: numerics.MpuWeight | None = None  # `weight`
        self.barrier_token: tuple[int, int] | None = None
        self.plan: _Plan | None = None
        self.unit_end = 0
        self.reg_ready: dict[int, int] = {}  # register -> cycle its in-flight `ld` completes
        # pc -> the operands whose extents are checked (`arch.bounds.resolve`); None: none
        self.bounds: dict | None = None

    _wbits = None
    """The bf16 bits [K, N] of a tile the compiled loop loaded last, when `weight` is still
    to be made of them (`Emulator._loop_restore`), else None."""

    @property
    def weight(self) -> numerics.MpuWeight | None:
        """The MPU's weight tile (of the last `mpu.ldw`), None before one."""
        bits = self._wbits
        if bits is not None:
            self._wbits = None
            self._w = mpu_fast.weight(bits, self._w)
        return self._w

    @weight.setter
    def weight(self, w) -> None:
        self._w, self._wbits = w, None

    def set(self, r: int, v: int) -> None:
        if r:
            self.regs[r] = _s64(v)

    def stall_on_loads(self, ins) -> None:
        """The register scoreboard: an instruction that names a register an in-flight `ld` is
        still loading (to read it, or to overwrite it) issues only once the load completed."""
        ready = self.reg_ready
        t = self.time
        for f in isa.REG_FIELDS[ins.op.format]:
            t = max(t, ready.get(getattr(ins, f), 0))
        reg = notify_core_reg(ins.op.format, ins.imm, ins.d)
        if reg is not None:
            t = max(t, ready.get(reg, 0))
        self.time = max(self.time, t)
        self.reg_ready = {r: e for r, e in ready.items() if e > t}

    def conflict(self, reads, writes) -> int:
        """Latest end of an in-flight unit op whose ranges conflict (RAW, WAR, WAW)."""
        t = self.time
        for end, r_reads, r_writes in self.inflight:
            if end <= t:
                continue
            # (the range tests are inlined: this is the emulator's hottest loop)
            hit = False
            for lo, hi in r_writes:
                for lo2, hi2 in reads:
                    if lo < hi2 and lo2 < hi:
                        hit = True
                        break
                if hit:
                    break
                for lo2, hi2 in writes:
                    if lo < hi2 and lo2 < hi:
                        hit = True
                        break
                if hit:
                    break
            if not hit:
                for lo, hi in r_reads:
                    for lo2, hi2 in writes:
                        if lo < hi2 and lo2 < hi:
                            hit = True
                            break
                    if hit:
                        break
            if hit:
                t = end
        return t if t > self.time else 0


class _LoopModule(Module):
    """A module while the compiled loop runs (`Emulator._run_native`): `_c` is its struct in
    native/loop.c, which holds its version (read and written here through a property); setting
    its plan marks the plan the Python's (the loop hands its pop back). The other fields are
    copied to and from the struct at each hand-over (`_put`, `_pull`)."""

    @property
    def version(self) -> int:
        return self._c.version

    @version.setter
    def version(self, v: int) -> None:
        self._c.version = v

    @property
    def mpu_free(self) -> int:
        return self._c.mpu_free

    @mpu_free.setter
    def mpu_free(self, v: int) -> None:
        self._c.mpu_free = v

    @property
    def weight(self) -> numerics.MpuWeight | None:
        """The weight tile: the one of the last mpu.ldw the loop ran (its bits and
        statistics copied out once per ldw), unless the Python ran one since (`_w`)."""
        c = self._c
        if c.w_has and c.w_gen != self._wgen:
            k, n = c.w_k, c.w_n
            bits = np.frombuffer(native.ffi.buffer(c.w_vals, k * n * 2), _NP_DTYPES["bf16"])
            self._w = mpu_fast.weight(bits.reshape(k, n), self._w)
            self._wgen = c.w_gen
        return self._w

    @weight.setter
    def weight(self, w) -> None:
        self._w = w
        self._c.w_has = 0  # (the loop's mpu.mm passes are the Python's until its next ldw)

    @property
    def plan(self):
        return self._plan

    @plan.setter
    def plan(self, p) -> None:
        """(and what `loop_wake` reads of it: its ready time, whether it is stable, its queue)"""
        self._plan = p
        c = self._c
        c.kind = CK_PY
        if p is None:
            c.pyplan = 0
        else:
            c.ready, c.stable, c.pyplan = p.ready, p.stable, 1
            c.queue = -1 if p.queue is None else _queue_key(p.queue)

    @property
    def reg_ready(self) -> _LoopRegReady:
        return self._rr

    @reg_ready.setter
    def reg_ready(self, ready: dict) -> None:
        rr = self._rr
        rr.clear()
        for r, end in ready.items():
            rr[r] = end

    def stall_on_loads(self, ins) -> None:
        """`Module.stall_on_loads` on the register scoreboard in native/loop.c (`ins` is
        the instruction at the module's pc: every caller's)."""
        self.time = native.lib.rr_stall(self._c, self.time, self._rm[self.pc])

    def conflict(self, reads, writes) -> int:
        """`Module.conflict` on the scoreboard in native/loop.c."""
        if len(reads) == 1 and len(writes) == 1:
            (a, b), (c, d) = reads[0], writes[0]
            return native.lib.sb_conflict2(self._s, self.index, self.time, a, b, c, d)
        flat = [x for rng in reads for x in rng]
        flat += [x for rng in writes for x in rng]
        return native.lib.sb_conflict(self._s, self.index, self.time, len(reads), len(writes), flat)


class _LoopRegReady:
    """`Module.reg_ready` while the compiled loop runs: the register scoreboard in the
    module's struct (`lmod.rr`: a register's load end, 0 for one not in the dict)."""

    __slots__ = ("_c",)

    def __init__(self, c):
        self._c = c

    def __bool__(self) -> bool:
        return self._c.nrr > 0

    def __len__(self) -> int:
        return self._c.nrr

    def get(self, r: int, default=None):
        e = self._c.rr[r]
        return e if e else default

    def __setitem__(self, r: int, end: int) -> None:
        native.lib.rr_set(self._c, r, end)

    def items(self) -> list[tuple[int, int]]:
        rr = self._c.rr
        return [(r, rr[r]) for r in range(isa.NUM_REGS) if rr[r]]

    def clear(self) -> None:
        c = self._c
        for r in range(isa.NUM_REGS):
            c.rr[r] = 0
        c.nrr = 0


class _LoopInflight:
    """`Module.inflight` while the compiled loop runs: appends go to its scoreboard (which
    drops the entries that ended itself: the length says 0, so `_execute` never filters)."""

    __slots__ = ("_s", "_i")

    def __init__(self, s, index: int):
        self._s, self._i = s, index

    def __len__(self) -> int:
        return 0

    def append(self, entry: tuple) -> None:
        end, reads, writes = entry
        if len(reads) == 1 and len(writes) == 1:
            (a, b), (c, d) = reads[0], writes[0]
            if not native.lib.sb_add2(self._s, self._i, end, a, b, c, d):
                raise MemoryError("the emulator's scoreboard")
            return
        flat = [x for rng in reads for x in rng]
        flat += [x for rng in writes for x in rng]
        if not native.lib.sb_add(self._s, self._i, end, len(reads), len(writes), flat):
            raise MemoryError("the emulator's scoreboard")


_LOOP_FINAL = 17  # (native/loop.c's LOOP_FINAL: the fields per module of `loop_final`)
# the fields only a `_LoopModule` has (`Emulator._loop_adopt`), dropped at `_loop_restore`
_LOOP_ONLY = ("_c", "_f", "_ckb", "_s", "_hot", "_wgen", "_rr", "_rm")


def _put(m: Module, s=None) -> None:
    """`m`'s state, as the Python left it, into its loop struct (in `s`: the run's `lstate`,
    for a module not adopted yet, `Emulator._loop_adopt`)."""
    native.lib.loop_put(m._s if s is None else s, m.index, *_loop_fields(m))


def _bounds_token(bounds) -> object:
    """What the compiled loop's set-up of a program is keyed on for its extents `bounds`
    (`Module.bounds`): None for none, else the resolution's token, else its rows."""
    if not bounds:
        return None
    return getattr(bounds, "token", None) or tuple(bounds.items())


_FRESH_FIELDS = (0, 0, False, 0, 0, 0, 0, 0, 0)  # (`_loop_fields` of a new `Module`)


def _loop_fields(m: Module) -> tuple:
    """`m`'s scheduling state in the order the C loop takes it (`loop_put`, and per module in
    `loop_prologue`'s flat array)."""
    return (
        m.pc,
        m.time,
        m.halted,
        m.halt_time,
        m.count,
        m.vpu_free,
        m.dma_end,
        m._dma_busy_until,
        1 if m.barrier_token is not None else 0,
    )


def _pull(m: _LoopModule) -> None:
    """`m`'s state, as the compiled loop left it, into the Python module."""
    (
        m.pc,
        m.time,
        halted,
        m.halt_time,
        m.count,
        m.vpu_free,
        m.dma_end,
        m._dma_busy_until,
    ) = native.ffi.unpack(m._f, 8)
    m.halted = bool(halted)


def _final_into(m: Module, final: list, allregs: list, setups: list, bits, ready: dict) -> None:
    """A plain `m`'s state as the compiled loop left it (`Emulator._loop_restore`): `final`,
    `loop_final`'s fields of every module, `allregs` every module's registers, `setups` the
    run's `_loop_setup`s, `bits` its tile's bits (None: no tile loaded), `ready` its
    register scoreboard. Its fields are set one by one (its `__dict__` is not made)."""
    i = m.index
    o = i * _LOOP_FINAL
    (pc, time, halted, halt_time, count, vpu_free, dma_end, dbu) = final[o : o + 8]
    (version, mpu_free, unit_end, bv, bd, bm) = final[o + 8 : o + 14]
    busy = m.busy
    busy["vpu"] += bv
    busy["dma"] += bd
    busy["mpu"] += bm
    if m.fns is None:  # (`_loop_adopt`'s: the threaded code, found once)
        m.fns = setups[i][10]
    m.pc, m.time, m.halted, m.halt_time = pc, time, bool(halted), halt_time
    m.count, m.vpu_free, m.dma_end, m._dma_busy_until = count, vpu_free, dma_end, dbu
    m.version, m.mpu_free = version, mpu_free
    m._wbits = bits
    m.reg_ready = ready
    nregs = isa.NUM_REGS
    m.regs = allregs[i * nregs : (i + 1) * nregs]
    if unit_end > m.unit_end:
        m.unit_end = unit_end
    m.inflight, m.prog = [], None


def _loop_tile_bits(s, i: int) -> np.ndarray:
    """The bf16 bits [K, N] of the tile module `i`'s last mpu.ldw in the loop loaded, taken
    over from its struct (`Module._wbits`: `weight` makes the tile of them if it is ever
    read)."""
    ffi = native.ffi
    c = s.mods + i
    bits = ffi.gc(c.w_vals, native.lib.free)
    c.w_vals = ffi.NULL
    k, n = c.w_k, c.w_n
    return np.frombuffer(ffi.buffer(bits, k * n * 2), _NP_DTYPES["bf16"]).reshape(k, n)


class _LoopWaiting:
    """`Emulator._waiting` while the compiled loop runs: the modules' `waiting` flags."""

    __slots__ = ("_ps",)

    def __init__(self, ps: list):
        self._ps = ps

    def add(self, idx: int) -> None:
        self._ps[idx].waiting = 1

    def discard(self, idx: int) -> None:
        self._ps[idx].waiting = 0


def _queue_key(key: tuple) -> int:
    """native/loop.c's key of arrival queue (core, space, queue)."""
    core, space, q = key
    return (core * 16 + space) * 256 + q


class _LoopQueues:
    """`Emulator.queues` (`arch.dma.ArrivalQueues` of completion times) while the compiled loop
    runs: native/loop.c's queues, key (core, space, queue)."""

    __slots__ = ("_s", "_out")

    def __init__(self, s):
        self._s = s
        self._out = native.ffi.new("int64_t *")

    def push(self, key: tuple, end: int) -> None:
        if not native.lib.q_push(self._s, _queue_key(key), end):
            raise MemoryError("the emulator's arrival queues")

    def head(self, key: tuple) -> int | None:
        if native.lib.q_head(self._s, _queue_key(key), self._out):
            return self._out[0]
        return None

    def pop(self, key: tuple) -> int:
        if self.head(key) is None:
            raise IndexError("pop from an empty queue")
        return native.lib.q_pop(self._s, _queue_key(key))


class _LoopPort:
    """A `timing.Port` while the compiled loop runs: port `i` of native/loop.c (0: top's,
    1 + k: core k's), which the loop books its DMAs on."""

    __slots__ = ("_s", "_p", "_i", "name")

    def __init__(self, s, i: int, name: str):
        self._s, self._p, self._i, self.name = s, s.ports + i, i, name

    @property
    def free(self) -> int:
        return self._p.free

    @free.setter
    def free(self, v: int) -> None:
        self._p.free = v

    @property
    def busy(self) -> int:
        return self._p.busy

    @busy.setter
    def busy(self, v: int) -> None:
        self._p.busy = v

    @property
    def in_flight(self) -> list[int]:
        return native.ffi.unpack(self._p.inf, self._p.n) if self._p.n else []

    def slot_time(self, t: int, max_in_flight: int) -> int:
        out = native.lib.port_slot(self._s, self._i, t, max_in_flight)
        if out < 0:
            raise MemoryError("the emulator's DMA ports")
        return out

    def admit(self, t: int, end: int) -> None:
        if not native.lib.port_admit(self._s, self._i, t, end):
            raise MemoryError("the emulator's DMA ports")


@functools.cache
def _port_name(i: int) -> str:
    """The name of native/loop.c's port `i` (`_port_index`'s inverse)."""
    return "top" if i == 0 else f"core{i - 1}"


@functools.lru_cache(maxsize=8)
def _port_names(n: int) -> tuple[str, ...]:
    """`_port_name` of native/loop.c's ports 0 .. n - 1."""
    return tuple(_port_name(i) for i in range(n))


def _port_index(name: str) -> int:
    """native/loop.c's index of the port `dma_port` names."""
    return 0 if name == "top" else int(name[4:]) + 1


class _LoopLandings:
    """`Emulator._landings` while the compiled loop runs, as `_execute` reads it (whether one
    is due): native/loop.c's heap of landings."""

    __slots__ = ("_s",)

    def __init__(self, s):
        self._s = s

    def __len__(self) -> int:
        return self._s.nland

    def __getitem__(self, i: int) -> tuple:
        return (native.lib.land_at(self._s, i).end,)


@functools.cache
def _blas_controller() -> ThreadpoolController:
    # Built once (it scans the loaded libraries: ~2 ms); numpy's BLAS is loaded before this
    # module, so a later scan would find no other library the emulator calls.
    return ThreadpoolController()


# `cblas_dgemm` of numpy's BLAS under the names its builds give it, with 64-bit integers
# (an ILP64 build: numpy's wheels) or 32-bit ones
_DGEMM_NAMES = (
    ("scipy_cblas_dgemm64_", 64),
    ("cblas_dgemm64_", 64),
    ("scipy_cblas_dgemm", 32),
    ("cblas_dgemm", 32),
)


@functools.cache
def _numpy_dgemm() -> tuple:
    """(the 64-bit, the 32-bit) `cblas_dgemm` of the BLAS numpy's matmul calls, as C
    pointers, one of them NULL; both NULL when it is not found (native/loop.c then hands the
    passes of more than `mpu_fast.SMALL_M` rows to `mpu_fast.matmul`). The same library as
    `np.matmul`'s, so `_one_blas_thread` holds it to one thread too."""
    import ctypes

    null = native.ffi.NULL
    for c in _blas_controller().lib_controllers:
        if c.user_api != "blas" or "numpy" not in c.filepath:
            continue
        try:
            lib = ctypes.CDLL(c.filepath)
        except OSError:
            continue
        for name, bits in _DGEMM_NAMES:
            fn = getattr(lib, name, None)
            if fn is not None:
                p = native.ffi.cast("void *", ctypes.cast(fn, ctypes.c_void_p).value)
                return (p, null) if bits == 64 else (null, p)
    return null, null


def _one_blas_thread():
    """A context in which numpy's BLAS uses one thread. The emulator's matmuls are small
    (an `mpu.mm` is at most [512,256]x[256,128]): BLAS threads spinning against the emulating
    thread made them up to 10x slower on a loaded 2-core machine (issue 15). The previous
    limits are restored on exit; BLAS threads are process-wide, so a thread running numpy
    beside an emulator run is limited too while it lasts."""
    return _blas_controller().limit(limits=1, user_api="blas")


@functools.lru_cache(maxsize=4096)
def _region_class(base: int, size: int) -> tuple[int, int, int, int]:
    """What native/loop.c is told of a region at `base` of `size` bytes (`_loop_region`): the
    core whose local space holds all of it (else -1), what a DMA end in it is (`RS_*`), its
    space's core (-1: none) and the local space's code (-1: not local). A function of the
    addresses alone (`classify`), found once per region placement (the same every run)."""
    space, owner = classify(base)
    last = classify(base + size - 1)
    core = owner if space in LOCAL_SPACES and last == (space, owner) else -1
    if last != (space, owner) or space == "unmapped":
        kind = RS_NONE
    elif space == "shared":
        kind = RS_SHARED
    else:
        kind = RS_DRAM if space in DRAM_REGIONS else RS_LOCAL
    return core, kind, -1 if owner is None else owner, SPACES[space] if core >= 0 else -1


# ---- the emulator ------------------------------------------------------------------------------
SHARED_BINARY = "_legato_shared"
"""The attribute (a dict) that marks a `Binary` as shared and never modified (the one
`runtime.load_binary(cached=True)` returns): what is made once per such binary is kept in it."""

PER_BINARY_MODULES = True
"""Make a shared binary's modules from what was found once (`Emulator._make_modules`; False:
parse the programs' contexts and decode them on every run, for an A/B)."""


class Emulator:
    """`Emulator(binary, model)`; allocate arguments with `memory.allocate`/`memory.write`, then
    `run(table_address)`."""

    def __init__(
        self,
        binary,
        model,
        *,
        instruction_limit: int | None = None,
        trace: bool = True,
        time_limit: float | None = None,
        cycle_limit: int | None = None,
        memory_limit: int | None = None,
        hazards: bool = False,
    ):
        """`time_limit` (wall-clock seconds), `cycle_limit` (simulated cycles) and
        `memory_limit` (host bytes backing simulated memory) bound the run (None: unbounded);
        each ends it with a `LimitError` naming the bound and the module and PC. `hazards`:
        check every access and sync op (`arch.hazards`); an unordered pair of accesses ends the
        run with a `HazardError` naming both."""
        self.binary = binary
        self.model = model
        self.memory = Memory(model)
        self.memory.host_limit = memory_limit
        self.instruction_limit = instruction_limit or DEFAULT_INSTRUCTION_LIMIT
        self.time_limit, self.cycle_limit = time_limit, cycle_limit
        self.dram = timing.DramTiming(model)
        self.trace_on = trace
        self.events: list[dict] = []
        # (core, space code, queue) -> completion times of the DMAs notifying it, in *issue*
        # order: the k-th qwait on a queue waits for the k-th DMA that notifies it (FIFO).
        self.queues = ArrivalQueues()
        self.sems = Semaphores()
        self.barriers = Barriers()
        self.macs = 0
        # the PIM units (docs/pim.md): when each channel's unit is free, and the weight bytes
        # they read inside their channels (the roofline's PIM term)
        self.pim_free = [0] * model.num_memory_channels
        self.pim_bytes = 0
        self.vpu_elems = 0
        self.vpu_trans_elems = 0
        self._dma_id = 0
        self._native_buf = None  # (regs, pc, status) passed to the compiled scalar code
        self._cptrs: dict = {}  # region -> a C pointer to its array (`_vpu_native`)
        # region -> the core whose local space (sram, mpu_buffer, private_dram) holds all of
        # it, else -1 (`_local_find`)
        self._local_of: dict = {}
        self.prints: list[debug.PrintRecord] = []  # the run's `device_print`s, in order
        self._debug: debug.Collector | None = None
        # (name, program, core, `_Code`) of every module; the `Module`s themselves are made on
        # first use of `modules` (`__getattr__`): a run the compiled loop takes to its end
        # without handing a step back never needs them (`_run_native`)
        self._specs = self._make_specs()
        self._bounds_of: dict | None = None  # `set_bounds`' before the modules are made
        self._planners = self._make_planners()
        self._prof = PROFILER.get()
        if self._prof is not None:
            self.fast_scalars = False  # per-instruction steps: the reference path, same cycles
            self._prof.attach(self)
        # DMAs whose bytes have not landed: (end, issue order, module, pc, landing function, args)
        self._landings: list[tuple] = []
        self._land_seq = 0
        self.hazards = (
            HazardChecker(len(self._specs), self._describe, self._read_only, self._region_name)
            if hazards
            else None
        )

    def __getattr__(self, name: str):
        """`modules`, made on its first use (`_make_modules`); no other attribute is made."""
        if name == "modules":
            return self._make_modules()
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _make_specs(self) -> list[tuple]:
        """`_module_specs`; of a binary `runtime.load_binary(cached=True)` shares (never
        modified: `SHARED_BINARY`), found once per chip's core count."""
        shared = vars(self.binary).get(SHARED_BINARY) if PER_BINARY_MODULES else None
        if shared is None:
            return self._module_specs()
        specs = shared.get(self.model.num_cores)
        if specs is None:
            specs = shared[self.model.num_cores] = self._module_specs()
        return specs

    def _make_modules(self) -> list[Module]:
        """`modules`: the modules of the binary's programs, in core order (top first), with
        the extents `set_bounds` gave and, after a run that did not need them
        (`_loop_restore`), the state that run left."""
        mods = [
            Module(i, name, p, c, code.ins, code)
            for i, (name, p, c, code) in enumerate(self._specs)
        ]
        bounds = self._bounds_of
        if bounds is not None:
            for m in mods:
                m.bounds = bounds.get(m.program.name)
        self.modules = mods
        final = self.__dict__.pop("_final", None)
        if final is not None:
            self._final_into_modules(*final)
        return mods

    def _final_into_modules(
        self, final: list, regs, setups: list, tiles: dict, ready: dict
    ) -> None:
        """The just-made modules' state as a run that did not need them left it
        (`_loop_restore`'s `_final`)."""
        allregs = native.ffi.unpack(regs, isa.NUM_REGS * len(self.modules))
        for m in self.modules:
            i = m.index
            _final_into(m, final, allregs, setups, tiles.get(i), ready.get(i, {}))

    def set_bounds(self, bounds: dict) -> None:
        """Every module's checked extents (`Module.bounds`): program name -> its
        `arch.bounds.resolve` (a module whose program is not in it: none)."""
        if "modules" in self.__dict__:
            for m in self.modules:
                m.bounds = bounds.get(m.program.name)
        else:
            self._bounds_of = bounds

    def _module_specs(self) -> list[tuple]:
        """(name, program, core, `_Code`) of every module, in core order (top first)."""
        mods: list[tuple] = []
        cores_taken: dict[int, str] = {}
        top_seen = None
        decoded: dict[str, _Code] = {}
        for p in self.binary.programs:
            try:
                decoded[p.name] = _program_code(tuple(p.words))
            except isa.DecodeError as e:
                raise EmulatorError(f"program {p.name!r}: {e}") from None
        for p in self.binary.programs:
            kind, index = parse_context(p.context)
            if kind == "top":
                if top_seen:
                    raise EmulatorError(f"two top programs: {top_seen!r} and {p.name!r}")
                top_seen = p.name
            targets = context_cores(kind, index, self.model.num_cores)
            for c in targets:
                if c is not None:
                    if c >= self.model.num_cores:
                        raise EmulatorError(
                            f"program {p.name!r} runs on core {c} but the model has "
                            f"{self.model.num_cores} cores"
                        )
                    if c in cores_taken:
                        raise EmulatorError(
                            f"core {c} has two programs: {cores_taken[c]!r} and {p.name!r}"
                        )
                    cores_taken[c] = p.name
                mods.append(("top" if c is None else f"core{c}", p, c, decoded[p.name]))
        mods.sort(key=lambda m: -1 if m[2] is None else m[2])
        if len(mods) >= 1 << 16:  # (the scheduler's heap keys hold a module's index in 16 bits)
            raise EmulatorError(f"{len(mods)} programs: at most {(1 << 16) - 1} modules run")
        return mods

    # ---- trace ----------------------------------------------------------------------------

    def _ev(self, m: Module, unit: str, name: str, start: int, dur: int, **args) -> None:
        if self.trace_on and len(self.events) < MAX_TRACE_EVENTS:
            self.events.append(
                {
                    "name": name,
                    "ph": "X",
                    "ts": start,
                    "dur": max(dur, 0),
                    "pid": m.index,
                    "tid": _PIM_TIDS[unit],
                    "args": args,
                }
            )

    def _dma_ev(self, m: Module, start: int, end: int, **args) -> None:
        if self.trace_on and len(self.events) < MAX_TRACE_EVENTS - 1:
            self._dma_id += 1
            base = {
                "name": "dma",
                "cat": "dma",
                "id": self._dma_id,
                "pid": m.index,
                "tid": _TIDS["dma"],
            }
            self.events.append({**base, "ph": "b", "ts": start, "args": args})
            self.events.append({**base, "ph": "e", "ts": end})

    def _trace_meta(self) -> list[dict]:
        out = []
        for m in self.modules:
            out.append(
                {
                    "name": "process_name",
                    "ph": "M",
                    "pid": m.index,
                    "args": {"name": f"{m.name} ({m.program.name})"},
                }
            )
            for unit, tid in (_PIM_TIDS if self.model.use_pim else _TIDS).items():
                out.append(
                    {
                        "name": "thread_name",
                        "ph": "M",
                        "pid": m.index,
                        "tid": tid,
                        "args": {"name": unit},
                    }
                )
        return out

    # ---- scheduling -----------------------------------------------------------------------
    def run(self, table_address: int = 0) -> timing.RunResult:
        """Run every module from `table_address` to its halt; numpy's BLAS runs on one thread
        meanwhile (`_one_blas_thread`) if any program has an instruction that calls it (an
        `mpu.mm` or a PIM op; the limit costs ~15 us a run to set and undo)."""
        with _one_blas_thread() if self._calls_blas() else contextlib.nullcontext():
            if self.premap:
                self.memory.premap(self._declared_spaces())
            if (
                self.native_loop
                and native.ENABLED
                and self.fast_scalars
                and self.native_scalars
                and self._prof is None
                and self.hazards is None
            ):
                return self._run_native(table_address)
            return self._run(table_address)

    def _calls_blas(self) -> bool:
        """Whether a program of the binary has an instruction whose numerics call numpy's
        BLAS (`mpu.mm`: `mpu_fast.matmul` and the loop's dgemm; a PIM op: `numerics.matmul_acc`);
        once per shared binary."""
        shared = vars(self.binary).get(SHARED_BINARY)
        got = None if shared is None else shared.get("calls_blas")
        if got is None:
            codes = {id(spec[3]): spec[3] for spec in self._specs}.values()
            got = any(K_MM in c.kinds or K_PIM in c.kinds for c in codes)
            if shared is not None:
                shared["calls_blas"] = got
        return got

    premap = True
    """Map the core spaces (but lazy ones) that the core programs declare (the binary's
    per-program memory, `.mem`) at the start of a run, as a loader would, and the rest on
    first touch; both loops do it (False: every space on its first touch, which in the
    compiled loop is a round trip to the Python, `LP_MAP`; a benchmark compares the two).
    A space the host-memory bound has no room for is left to its first touch, which faults
    at its instruction."""

    native_loop = os.environ.get("LEGATO_NATIVE_LOOP", "1") != "0"
    """Run the scheduler's loop in native/loop.c when it is built (`_run_native`; False: the
    Python loop `_run`, the reference a differential test compares it with). Off under a
    profiler, the hazard checker or the reference scalar paths. `$LEGATO_NATIVE_LOOP=0` turns
    it off."""

    def _run(self, table_address: int) -> timing.RunResult:
        for m in self.modules:
            m.regs[1] = table_address
            m.regs[2] = core_id(m.core)
        heap: list[int] = []  # (ready, version, module index) of each push (`_push`)
        self._heap = heap
        self._waiting: set[int] = set()
        for m in self.modules:
            self._schedule(m)
        total = 0
        # `limit`: the instruction count of the next check of every bound (`_check_limits`)
        self._deadline = None if self.time_limit is None else _time.monotonic() + self.time_limit
        limit = min(self.instruction_limit, CHECK_EVERY)
        now = 0
        while True:
            if not heap:
                live = [m for m in self.modules if not m.halted]
                if not live:
                    break
                waits = []
                for m in live:
                    ins = m.code[m.pc] if m.pc < len(m.code) else None
                    text = format_instruction(ins) if ins else "<end>"
                    why = m.plan.reason if m.plan else "blocked"
                    waits.append((m.name, m.program.name, m.pc, text, why))
                raise DeadlockError(waits, now)
            key = heapq.heappop(heap)
            t, ver, idx = key >> 80, (key >> 16) & _MASK64, key & 0xFFFF
            m = self.modules[idx]
            if ver != m.version or m.halted:
                continue
            plan = m.plan
            if plan.slot is not None:
                plan = self._replan_slot(m, plan)
            elif not plan.stable:
                try:
                    plan = self._prepare(m)
                except _Trap as e:
                    raise self._fault(m, e) from None
            if plan.ready >= INF:
                m.plan = plan
                self._waiting.add(idx)
                continue
            if plan.ready > t:
                self._push(m, plan)
                continue
            self._waiting.discard(idx)
            now = t
            pc = m.pc
            try:
                done = self._execute(m, plan, t)
            except _Trap as e:
                raise self._fault(m, e) from None
            if done and self._prof is not None:  # a barrier's arrival retires at its release
                self._prof.step(m, pc, t)
            if done:
                m.count += 1
                total += 1
                if total > limit:
                    limit = self._check_limits(m, total)
            # Scalar instructions touch neither memory nor other modules: run them right away
            # instead of through the scheduler (same result, far fewer heap operations).
            if m.halted:
                continue
            if 0 <= m.pc < len(m.pure) and m.pure[m.pc]:
                if self.fast_scalars:
                    total, limit = self._run_scalars(m, total, limit)
                else:
                    total, limit = self._run_scalars_reference(m, total, limit)
            if not m.halted:
                self._schedule(m)
        return self._finish(total)

    def _finish(self, total: int) -> timing.RunResult:
        """The end of a run: the last landings, the result, the cycle bound."""
        self._land(INF)  # the transfers still in flight when the last module halted
        result = self._result()
        if self.cycle_limit is not None and result.cycles > self.cycle_limit:
            # fewer instructions than a check apart, but long ones: the module that ended last
            last = max(self.modules, key=lambda m: max(m.halt_time, m.unit_end, m.dma_end))
            self._check_limits(last, total, result.cycles)
        return result

    # ---- the compiled loop (native/loop.c) -------------------------------------------------
    def _run_native(self, table_address: int) -> timing.RunResult:
        """`_run` with the loop in native/loop.c: it pops the heap and runs scalar code,
        `qwait`, `dmawait`, `ld` / `st` (with the register scoreboard of loads in flight),
        DMAs, the MPU and the VPU instructions of native/vpu.c itself (untraced), and
        hands every other step back by a status (LP_*),
        which this method does with the reference's own code on the same state: planning
        (`_schedule`), a popped plan the Python made and its issue (`_loop_pop`), scalar code
        the compiled code does not run (`_run_scalars`, which raises a trap's fault), a bound
        crossed (`_check_limits`), an issue with a landing due or a trace event (`_loop_exec`),
        a core space to map on first touch (`_loop_map`).
        The modules' state is the loop's for the run (`_loop_modules`: set up in one call, the
        first plans in one more, `_loop_first_plans`): a run the loop takes to its end without
        a hand-over (softmax, RMSNorm, GEMV) leaves the modules plain `Module`s, whose final
        state is read back once (`_loop_restore`); at a first hand-over they become
        `_LoopModule`s (`_loop_adopt`), with their registers in a C array, and plain `Module`s
        again afterwards, with the same state the reference leaves."""
        ffi, lib = native.ffi, native.lib
        nmods = len(self._specs)
        # (the `Module`s, when made: a fresh emulator's are made only if the loop hands a
        # step back, `_loop_adopt`)
        mods = self.__dict__.get("modules")
        s = ffi.new("lstate *")
        cmods = ffi.new("lmod[]", max(nmods, 1))
        wake = (ffi.new("int64_t[]", nmods + 1), ffi.new("int64_t[]", nmods + 1))
        s.mods, s.nmods, s.num_cores = cmods, nmods, self.model.num_cores
        s.window_base, s.window_size = CORE_WINDOW_BASE, CORE_WINDOW_SIZE
        s.trace_on, s.fast_wakes = bool(self.trace_on), bool(self.fast_wakes)
        s.wake_buf, s.wake_out = wake
        if not lib.loop_init(s):
            lib.loop_free(s)
            raise MemoryError("the emulator's scheduler")
        ps = [cmods + i for i in range(nmods)]
        keep = []  # the arrays the structs point into
        queues = self.queues
        held = -1  # on an error: the module the Python was stepping (its state is the Python's)
        try:
            s.vpu_lanes = self.model.vpu_lanes
            s.vpu_trans_rate = self.model.vpu_transcendental_per_cycle
            s.prologue_on = bool(self.loop_prologue)
            self._loop_mpu(s)
            self._loop, self._loop_regions, self._loop_known = s, [], set()
            self._loop_dma(s, keep)
            self._loop_modules(s, keep, table_address)
            self._loop_regions_at_start(self.memory.regions)
            self.memory.on_add = self._loop_region
            self._push, self._wake = self._push_native, self._wake_native
            self._waiting, self.queues = _LoopWaiting(ps), _LoopQueues(s)
            self._loop_first_plans(s)
            self._deadline = (
                None if self.time_limit is None else _time.monotonic() + self.time_limit
            )
            s.limit = min(self.instruction_limit, CHECK_EVERY)
            # (the bounds `_check_limits` checks, checked in the loop too: it hands back only
            # a run past one, and the Python raises its error)
            s.instr_limit, s.check_every = self.instruction_limit, CHECK_EVERY
            s.cycle_limit = -1 if self.cycle_limit is None else self.cycle_limit
            s.deadline = 0.0 if self._deadline is None else self._deadline
            after = -1
            while True:
                st = lib.loop_run(s, after)
                after = -1
                if st != LP_DONE:
                    self._loop_adopt()  # (the first hand-over: the Python's modules from here)
                    mods = self.modules
                if st == LP_PYPOP:
                    after = self._loop_pop(mods[s.idx], s.t)
                elif st == LP_SCHED:
                    m = mods[s.idx]
                    _pull(m)
                    self._schedule_native(m)
                elif st == LP_SCALARS:
                    m = mods[s.idx]
                    _pull(m)
                    s.total, s.limit = self._run_scalars(m, s.total, s.limit)
                    if m.halted:
                        _put(m)
                    else:
                        self._schedule_native(m)
                elif st == LP_LIMIT:
                    m = mods[s.idx]
                    _pull(m)
                    s.limit = self._check_limits(m, s.total)
                    after = m.index
                elif st == LP_PYEXEC:
                    m = mods[s.idx]
                    _pull(m)
                    try:
                        plan = self._prepare(m)  # stable: the plan the loop popped
                    except _Trap as e:
                        raise self._fault(m, e) from None
                    after = self._loop_exec(m, plan, s.t)
                elif st == LP_WAKE:  # a DMA's notify woke waiters the Python planned
                    self._wake_py(s.nwake)
                    if s.total > s.limit:
                        m = mods[s.idx]
                        _pull(m)
                        s.limit = self._check_limits(m, s.total)
                    after = s.idx
                elif st == LP_MMTODO:  # a pass with elements the proof left
                    after = self._loop_settle(mods[s.idx], s.t)
                elif st == LP_MAP:  # a plan's bytes in a core space not mapped yet
                    after = self._loop_map(mods[s.idx])
                elif st == LP_DEADLOCK:
                    for m in mods:
                        _pull(m)
                    raise self._loop_deadlock(s.now)
                elif st == LP_DONE:
                    break
                else:
                    raise MemoryError("the emulator's scheduler")
            self._land(INF)  # (`_finish`'s: the landings are the loop's until it is restored)
        except BaseException:
            held = s.idx
            raise
        finally:
            self._loop_restore(s, queues, held)
            lib.loop_free(s)
        return self._finish(s.total)

    def _loop_map(self, m: _LoopModule) -> int:
        """`LP_MAP` (`_map_for_loop`), then the loop plans `m`'s instruction again; when
        that mapped nothing it can use, the Python plans it (and faults as `_schedule` does).
        Returns `loop_run`'s `after`."""
        if self._map_for_loop():
            return m.index
        _pull(m)
        self._schedule_native(m)
        return -1

    def _map_for_loop(self) -> bool:
        """Map the core space that holds the bytes a plan of native/loop.c found in no
        region (`lstate.map_addr`, `map_n`: their first touch, which the Python's planning
        makes with `memory.find` in `_prepare`); whether the loop was told of a new region
        (not: a trap, the address is in no space or runs past it; a lazy space)."""
        s = self._loop
        n = s.nregions
        try:
            self.memory.find(s.map_addr, s.map_n)
        except _Trap:
            pass
        return s.nregions > n

    def _declared_spaces(self) -> list[tuple[int, str]]:
        """(core, space) of every core space a core module's program declares it uses (the
        binary's per-program memory), but lazy ones."""
        lazy = self.memory.lazy_spaces
        return [
            (core, space)
            for _name, program, core, _code in self._specs
            if core is not None
            for space, n in (program.memory or {}).items()
            if n > 0 and space in CORE_SPACE_OFFSET and space not in lazy
        ]

    loop_prologue = True
    """Let the compiled loop run `ld` / `st`, keep the register scoreboard of loads in flight,
    make the first plans, map a core space on first touch (`LP_MAP`) and check the bounds
    (False: all of that is the Python's, as before; a benchmark compares the two)."""

    loop_mpu = True
    """Let the compiled loop run mpu.ldw and the few-row mpu.mm passes (`_loop_mpu`; False:
    they are handed to the Python, as before; a benchmark compares the two)."""

    loop_settle = True
    """Let the compiled loop settle the elements of a pass its proof leaves (native/mpu.c's
    `mpu_settle`, the exact path in C; False: `LP_MMTODO`, the Python's `mpu_fast.settle`, as
    before the twelfth round, for an A/B and the differential tests)."""

    def _loop_mpu(self, s) -> None:
        """native/loop.c's MPU: the chip's parameters; untraced and with the MPU numerics
        compiled (`mpu_fast.NATIVE`), the loop plans and issues mpu.ldw and the passes of at
        most `mpu_fast.SMALL_M` rows itself (the larger ones go to numpy's BLAS here)."""
        model = self.model
        s.mpu_on = bool(self.loop_mpu and mpu_fast.NATIVE and not self.trace_on)
        s.mpu_tk, s.mpu_tn = model.mpu_tile_k, model.mpu_tile_n
        s.mpu_load_rate = model.mpu_weight_load_bytes_per_cycle
        s.mpu_mac_rate = model.mpu_macs_per_cycle
        s.mpu_small_m, s.mpubuf_space = mpu_fast.SMALL_M, SPACES["mpu_buffer"]
        s.dgemm64, s.dgemm32 = _numpy_dgemm()
        s.mm_exact = bool(self.loop_settle)

    def _loop_dma(self, s, keep: list) -> None:
        """native/loop.c's DMAs: the chip's parameters, the channels' timelines (the Python's
        arrays), the ports as the Python has them (`_LoopPort`s meanwhile) and the landings
        (`_land_native`, `_landing_native`). Untraced and with the channel booking compiled,
        the loop plans and issues dma and dma2d itself."""
        ffi, lib, model, dram = native.ffi, native.lib, self.model, self.dram
        s.dma_on = not self.trace_on and dram._book is not None
        s.nchan, s.granule = dram.channels, timing.DRAM_INTERLEAVE_BYTES
        s.chan_rate = model.dram_bytes_per_cycle_per_channel
        s.port_rate = model.dma_port_bytes_per_cycle
        s.latency, s.max_inflight = model.dram_latency_cycles, model.dma_max_in_flight
        chans = (
            ffi.from_buffer("int64_t[]", dram.channel_free),
            ffi.from_buffer("int64_t[]", dram.channel_bytes),
        )
        keep.append(chans)
        s.chan_free, s.chan_bytes = chans
        for name, p in dram.ports.items():  # (a run starts with none)
            i = _port_index(name)
            lib.port_touch(s, i)
            s.ports[i].free, s.ports[i].busy = p.free, p.busy
            for e in p.in_flight:
                if not lib.port_admit(s, i, -1, e):
                    raise MemoryError("the emulator's DMA ports")
        self._loop_ports: dict[str, _LoopPort] = {}
        dram.port = self._port_native
        self._py_lands: dict[int, tuple] = {}
        for end, _seq, idx, pc, fn, args in sorted(self._landings, key=lambda e: e[:2]):
            self._py_lands[lib.land_push_py(s, end, idx, pc)] = (idx, pc, fn, args)
        self._landings = _LoopLandings(s)
        self._landing, self._land = self._landing_native, self._land_native

    def _port_native(self, name: str) -> _LoopPort:
        """`DramTiming.port` while the loop runs: the port's `_LoopPort`, made (and its place
        in `port_busy` taken) on first use, as `DramTiming.port` makes a `Port`."""
        p = self._loop_ports.get(name)
        if p is None:
            p = self._loop_ports[name] = _LoopPort(self._loop, _port_index(name), name)
        native.lib.port_touch(self._loop, p._i)
        return p

    def _landing_native(self, end: int, m: Module, fn, args: tuple) -> None:
        """`_landing` into native/loop.c's heap of landings (the loop's own DMAs land there)."""
        seq = native.lib.land_push_py(self._loop, end, m.index, m.pc)
        if not seq:
            raise MemoryError("the emulator's landings")
        self._py_lands[seq] = (m.index, m.pc, fn, args)

    def _land_native(self, t: int) -> None:
        """`_land`: native/loop.c lands its DMAs' bytes, the Python these, in (end, issue)
        order."""
        lib, s = native.lib, self._loop
        while True:
            seq = lib.land_due(s, min(t, INF))
            if seq == -1:
                return
            if seq < 0:
                raise MemoryError("the emulator's landings")
            idx, pc, fn, args = self._py_lands.pop(seq)
            try:
                fn(*args)
            except _Trap as e:
                raise self._fault(self.modules[idx], e, pc) from None

    def _loop_modules(self, s, keep: list, table_address: int) -> None:
        """Every module's struct in native/loop.c in one call (`loop_mods_init`): its
        registers in one C array for the run (`table_address` in r1, the core id in r2, as
        `_run` sets them: the loop sets them), its program's encoding (`_loop_run_setup`),
        its version, MPU and register scoreboard. The Python modules stay plain `Module`s:
        the loop runs them to the end unless it hands a step back, when `_loop_adopt` makes
        them `_LoopModule`s (until then nothing in the Python reads or writes their state).
        A fresh emulator's modules, not made yet (`__getattr__`), are not made here: their
        state is a new `Module`'s (zeros), their extents `set_bounds`'."""
        ffi, lib = native.ffi, native.lib
        key = self._loop_key(s)
        nregs, nmods = isa.NUM_REGS, len(self._specs)
        fresh = "modules" not in self.__dict__ and "_final" not in self.__dict__
        if fresh:
            bounds = self._bounds_of or {}
            tokens = tuple(_bounds_token(bounds.get(spec[1].name)) for spec in self._specs)
        else:
            tokens = tuple(_bounds_token(m.bounds) for m in self.modules)
        shared = vars(self.binary).get(SHARED_BINARY) if PER_BINARY_MODULES else None
        runs = None if shared is None else shared.setdefault("loop_runs", {})
        run = None if runs is None else runs.get((key, tokens))
        if run is None:
            fresh = False  # (`_loop_setup` reads the modules)
            run = self._loop_run_setup(key, tokens)
            if runs is not None and len(runs) < 16:  # (a bound, as `_loop_setup`'s)
                runs[key, tokens] = run
        regs = ffi.new("int64_t[]", max(nmods * nregs, 1))  # (zeros)
        keep.append(regs)
        if fresh:
            vm_c = ffi.new("int64_t[]", max(2 * nmods, 1))  # (a new `Module`'s: zeros)
        else:
            mods = self.modules
            vm: list[int] = []
            for m in mods:
                r = m.regs
                if any(r):  # (a module run before)
                    o = m.index * nregs
                    regs[o : o + nregs] = r
                vm += (m.version, m.mpu_free)  # (plain `Module`s: their fields)
            vm_c = ffi.new("int64_t[]", vm or [0])
        lib.loop_mods_init(s, regs, nregs, *run[:9], table_address, vm_c)
        if not fresh:
            for m in mods:
                ready = m.reg_ready
                if ready:
                    c = s.mods + m.index
                    for reg, end in ready.items():
                        lib.rr_set(c, reg, end)
        self._loop_regs, self._loop_setups, self._loop_plain = regs, run[9], True

    def _loop_run_setup(self, key: tuple, tokens: tuple) -> tuple:
        """What `loop_mods_init` takes of every module but its registers, version and MPU
        (the lengths, the pointers of each program's `_loop_setup`, the cores and their
        ids) as C arrays,
        and each module's `_loop_setup` (what the structs point into, and what `_loop_adopt`
        takes): once per shared binary, `key` and the modules' extents (`tokens`)."""
        ffi = native.ffi
        gots = []
        for m, token in zip(self.modules, tokens):
            setup = m.shared.loop
            got = None if setup is None else setup.get((key, token))
            if got is None:
                got = self._loop_setup(m, key, token)
            gots.append(got)
        columns = [[g[i] for g in gots] or [ffi.NULL] for i in range(7)]
        cores = [-1 if m.core is None else m.core for m in self.modules]
        ids = [core_id(m.core) for m in self.modules]
        return (
            ffi.new("int64_t[]", [g[6] for g in gots] or [0]),
            ffi.new("sins *[]", columns[0]),
            ffi.new("int8_t *[]", columns[1]),
            ffi.new("lvpu *[]", columns[2]),
            ffi.new("uint32_t *[]", columns[3]),
            ffi.new("int64_t *[]", columns[4]),
            ffi.new("int64_t *[]", columns[5]),
            ffi.new("int64_t[]", cores or [0]),
            ffi.new("int64_t[]", ids or [0]),
            gots,
        )

    def _loop_first_plans(self, s) -> None:
        """`_run`'s first plans, in module order: the loop's where it plans them, in one call
        (`loop_prologue`) while the modules are plain (their fields the Python's, `_put`'s, or
        a new `Module`'s when they are not made yet), the Python's (`_schedule_native`) where
        it hands one back."""
        lib, nmods = native.lib, len(self._specs)
        fields = None
        i = 0
        while i < nmods:
            if self._loop_plain and self.loop_prologue:
                if fields is None:
                    mods = self.__dict__.get("modules")
                    if mods is None:
                        flat = list(_FRESH_FIELDS) * nmods
                    else:
                        flat = []
                        for m in mods:
                            flat += _loop_fields(m)
                    fields = native.ffi.new("int64_t[]", flat)
                st = lib.loop_prologue(s, i, fields)
                if st == LP_DONE:
                    return
                i = s.idx
            else:
                _put(self.modules[i], s)
                st = lib.loop_sched(s, i) if self.loop_prologue else LP_SCHED
            while st == LP_MAP and self._map_for_loop():
                st = lib.loop_sched(s, i)
            if st == LP_NOMEM:
                raise MemoryError("the emulator's scheduler")
            if st:
                self._loop_adopt()
                self._schedule_native(self.modules[i])
            i += 1

    def _loop_adopt(self) -> None:
        """At the loop's first hand-over: every module a `_LoopModule` over its struct
        (`_loop_modules`), whose fields the Python reads and writes from here on as it does in
        a run that hands steps over from the start (`_put`, `_pull`, the properties)."""
        if not self._loop_plain:
            return
        ffi, s, regs = native.ffi, self._loop, self._loop_regs
        for m, got in zip(self.modules, self._loop_setups):
            rm, ckb, hot, fns = got[7:]
            c = s.mods + m.index
            m._rm = rm
            d = m.__dict__
            plan = d.pop("plan")
            del d["version"], d["mpu_free"], d["reg_ready"]
            m._rr = _LoopRegReady(c)
            m.regs = regs + m.index * isa.NUM_REGS
            if m._wbits is not None:
                m._w = m.weight  # (a tile an earlier run left as bits, made)
            m.__class__ = _LoopModule
            m._wgen = 0  # (a fresh struct's: `weight` takes the loop's tile once it loads one)
            m._c, m._f, m._plan, m._ckb = c, ffi.cast("int64_t *", c), plan, ckb
            m._s, m.inflight = s, _LoopInflight(s, m.index)
            m._hot = hot
            if m.fns is None:
                m.fns = fns
            m.prog = None  # (the Python's scalar runs: threaded code only, on the C registers)
        self._loop_plain = False

    def _loop_key(self, s) -> tuple:
        """What a program's loop set-up (`_loop_setup`) depends on in this run: which of its
        instructions the loop runs (the VPU's, DMAs, the MPU's, loads and stores), the
        compiled scalar runs' least length and the chip's core count."""
        vpu_here = self.native_vpu and not self.trace_on  # (else the VPU's: the reference's,
        # or its trace events)
        flags = (vpu_here, bool(s.dma_on), bool(s.mpu_on), bool(s.prologue_on))
        return ("setup", flags, self.native_min_run, self.model.num_cores)

    def _loop_setup(self, m: Module, key: tuple, token) -> tuple:
        """Of `m`'s program, once per `key` and extents (`_Code.loop`): the pointers
        `loop_mod_init` takes (`_loop_code`, `_loop_bounds`), its length, its per-pc register
        masks, kinds as bytes, `_scalar_hot` and its threaded code (`_scalar_programs`)."""
        ffi = native.ffi
        flags = key[1]
        code = self._loop_code(m, *flags)
        bt = brows = ffi.NULL
        if m.bounds:
            code, bt, brows = self._loop_bounds(m, code, flags)
        arr, ck, ckb, vs, code_p, ck_p, vs_p, rm, rm_p, _ = code
        got = (
            code_p,
            ck_p,
            vs_p,
            rm_p,
            bt,
            brows,
            len(m.code),
            rm,
            ckb,
            self._scalar_hot(m),
            self._scalar_programs(m)[0],
        )
        setup = m.shared.loop
        if len(setup) < 64:  # (a bound: a program run with many argument addresses)
            setup[key, token] = got
        return got

    @staticmethod
    def _loop_bounds(m: Module, code: tuple, flags: tuple) -> tuple:
        """(`code` with the kinds of the pcs whose operands' extents are checked, `m.bounds`:
        the loop's when it checks them itself, `bounds_ok`, else the Python's; the per-pc row
        index and the rows of extents for `lmod.bt`, `brows`), once per program and extents
        (`_Code.loop`: the same arguments at the same addresses give the same extents)."""
        token = getattr(m.bounds, "token", None)  # (`runtime.ResolvedBounds`: made once)
        key = (flags, tuple(m.bounds.items()) if token is None else token)
        got = m.shared.loop.get(key)
        if got is not None:
            return got
        ffi = native.ffi
        ck = code[1].copy()
        bt = np.full(max(len(ck), 1), -1, np.int64)
        rows = []
        for pc, row in m.bounds.items():
            if not 0 <= pc < len(ck) or m.pure[pc]:
                continue
            if ck[pc] in (CK_VPU, CK_DMA, CK_DMA2D, CK_LDW, CK_MM, CK_LD, CK_ST) and len(row) <= 4:
                # (the loop checks these extents, `bounds_ok`; a fault is the Python's)
                flat = [len(row)]
                for b in row:
                    flat += ["abcd".index(b.field), b.lo, b.hi, int(b.window)]
                bt[pc] = len(rows)
                rows.append(flat + [0] * (17 - len(flat)))
            else:
                ck[pc] = CK_PY
        brows = np.array(rows or [[0] * 17], np.int64)
        code = (
            code[:1]
            + (ck, ck.tobytes())
            + code[3:5]
            + (ffi.from_buffer("int8_t[]", ck),)
            + code[6:]
        )
        got = (code, ffi.from_buffer("int64_t[]", bt), ffi.from_buffer("int64_t[]", brows))
        if len(m.shared.loop) < 64:  # (a bound: a program run with many argument addresses)
            m.shared.loop[key] = got
        return got

    @staticmethod
    def _loop_code(
        m: Module, vpu_here: bool, dma_here: bool, mpu_here: bool, ldst_here: bool = True
    ) -> tuple:
        """`_loop_program` of `m`'s program and C pointers into its arrays, once per program
        (`_Code.loop`); `vpu_here` / `dma_here` / `mpu_here` / `ldst_here` False: its VPU
        instructions / DMAs / mpu.ldw and mpu.mm / ld and st are the Python's."""
        shared = m.shared
        if shared.loop is None:
            shared.loop = {}
        code = shared.loop.get((vpu_here, dma_here, mpu_here, ldst_here))
        if code is None:
            arr, ck, ckb, vs, rm = _loop_program(m.code, m.pure, m.kinds)
            if not vpu_here:
                ck[ck == CK_VPU] = CK_PY
            if not dma_here:
                ck[(ck == CK_DMA) | (ck == CK_DMA2D)] = CK_PY
            if not mpu_here:
                ck[(ck == CK_LDW) | (ck == CK_MM)] = CK_PY
            if not ldst_here:
                ck[(ck == CK_LD) | (ck == CK_ST)] = CK_PY
            ckb = ck.tobytes()
            ffi = native.ffi
            code = shared.loop[vpu_here, dma_here, mpu_here, ldst_here] = (
                arr,
                ck,
                ckb,
                vs,
                ffi.cast("sins *", ffi.from_buffer(arr)),
                ffi.from_buffer("int8_t[]", ck),
                ffi.cast("lvpu *", ffi.from_buffer(vs)),
                rm.tolist(),
                ffi.cast("uint32_t *", ffi.from_buffer(rm)),
                rm,  # (what the pointers point into: kept here)
            )
        return code

    def _scalar_hot(self, m: Module) -> list:
        """Per pc of `m`'s program: a scalar run from there is worth the compiled code
        (`_native_program`'s flags: a loop, or at least `native_min_run` long)."""
        prog = m.shared.native.get(self.native_min_run)
        if prog is None:
            prog = m.shared.native[self.native_min_run] = _native_program(
                m.code, m.pure, self.native_min_run
            )
        return prog[1]

    def _loop_restore(self, s, queues, held: int = -1) -> None:
        """Every module a plain `Module` again with the loop's final state (its scoreboard
        entries are dropped), but module `held`, which keeps the Python's (a step of it
        raised), and what the loop counted added to the Python's; the Python paths of `_run`
        back. A module never adopted (`_loop_adopt`) takes the same final state from its
        struct (its Python fields are still the ones it started with); when the modules were
        never made (`_loop_modules`), that state is kept (`_final`, with what of it lives in
        the structs: the tiles' bits, the scoreboards) for `_make_modules` and `_result`."""
        ffi, lib = native.ffi, native.lib
        nf, nmods = _LOOP_FINAL, len(self._specs)
        final = ffi.new("int64_t[]", nf * max(nmods, 1))
        lib.loop_final(s, final)
        final = ffi.unpack(final, nf * nmods)
        setups = self.__dict__.pop("_loop_setups", None)
        regs = self.__dict__.pop("_loop_regs", None)
        plain = self.__dict__.pop("_loop_plain", False)
        # (no set-ups: an error before the structs were made, and no module ran)
        if setups is not None and plain and "modules" not in self.__dict__:
            tiles, ready = {}, {}
            for i in range(nmods):
                o = i * nf
                # (a fresh struct's `w_gen` is 0: one past it, the loop loaded a tile)
                if final[o + 15] and final[o + 16]:
                    tiles[i] = _loop_tile_bits(s, i)
                if final[o + 14]:
                    ready[i] = dict(_LoopRegReady(s.mods + i).items())
            self._final = (final, regs, setups, tiles, ready)
            setups = None
        mods = self.modules if setups is not None else ()
        nregs = isa.NUM_REGS
        allregs = ffi.unpack(regs, nregs * nmods) if setups is not None else ()
        for m in mods:
            adopted = type(m) is _LoopModule
            if not adopted and not plain:
                continue
            i = m.index
            o = i * nf
            if not adopted:
                w_has, w_gen, nrr = final[o + 15], final[o + 16], final[o + 14]
                bits = _loop_tile_bits(s, i) if w_has and w_gen else None
                rr = dict(_LoopRegReady(s.mods + i).items()) if nrr else {}
                _final_into(m, final, allregs, setups, bits, rr)
                continue
            (pc, time, halted, halt_time, count, vpu_free, dma_end, dbu) = final[o : o + 8]
            (version, mpu_free, unit_end, bv, bd, bm, nrr, w_has, w_gen) = final[o + 8 : o + nf]
            d = m.__dict__
            bits = _loop_tile_bits(s, i) if w_has and w_gen != d["_wgen"] else None
            busy = d["busy"]
            busy["vpu"] += bv
            busy["dma"] += bd
            busy["mpu"] += bm
            ready = dict(d["_rr"].items()) if nrr else {}
            m.__class__ = Module
            for name in _LOOP_ONLY:
                del d[name]
            if i != held:  # (`_pull`'s; `held`'s fields are the Python's)
                d.update(
                    pc=pc,
                    time=time,
                    halted=bool(halted),
                    halt_time=halt_time,
                    count=count,
                    vpu_free=vpu_free,
                    dma_end=dma_end,
                    _dma_busy_until=dbu,
                )
            d.update(  # (with the class back, these are plain fields again)
                version=version,
                plan=d.pop("_plan"),
                mpu_free=mpu_free,
                _wbits=bits,
                reg_ready=ready,
                regs=allregs[i * nregs : (i + 1) * nregs],
                unit_end=max(d["unit_end"], unit_end),
                inflight=[],
                prog=None,
            )
        self.vpu_elems += s.vpu_elems
        self.vpu_trans_elems += s.vpu_trans_elems
        self.macs += s.macs
        s.macs = 0
        nr, npo = s.nregions, s.norder
        cap = 3 * nr + (4 + max(self.model.dma_max_in_flight, 0)) * npo
        buf = ffi.new("int64_t[]", max(cap, 1))
        n = lib.loop_final_shared(s, buf, cap)
        if n < 0:  # (more in flight than a port holds at a time: the Python's admits)
            buf = ffi.new("int64_t[]", -n)
            n = lib.loop_final_shared(s, buf, -n)
        got = ffi.unpack(buf, n)
        for i, region in enumerate(self._loop_regions[:nr]):  # the bytes the loop wrote, to
            recycled, lo, hi = got[3 * i : 3 * i + 3]  # zero when released
            if recycled and lo < hi:
                region.lo, region.hi = min(region.lo, lo), max(region.hi, hi)
        s.vpu_elems = s.vpu_trans_elems = s.nregions = 0
        # the ports, made when `dram.ports` is first used (`DramTiming.__getattr__`)
        self.dram.ports_from(_port_names(s.nports), got, 3 * nr)
        self.dram.__dict__.pop("port", None)
        self.memory.on_add = None
        # (landings still due: a run that raised, which lands no more)
        self._landings, self._py_lands = [], {}
        for name in (
            "_push",
            "_wake",
            "_loop",
            "_loop_regions",
            "_loop_known",
            "_landing",
            "_land",
            "_loop_ports",
        ):
            self.__dict__.pop(name, None)
        self._waiting = set()
        self.queues = queues

    def _push_native(self, m: _LoopModule, plan: _Plan) -> None:
        """`_push` into native/loop.c's heap (which moves the version)."""
        m.plan = plan
        if not native.lib.loop_push(self._loop, m.index, plan.ready):
            raise MemoryError("the emulator's scheduler")

    def _wake_native(self) -> None:
        """`_wake`: native/loop.c wakes the waiting modules whose plans it made; the others
        here, as `_wake` does (`_wake_py`)."""
        n = native.lib.loop_wake(self._loop)
        if n < 0:
            raise MemoryError("the emulator's scheduler")
        self._wake_py(n)

    def _wake_py(self, n: int) -> None:
        """`_wake` of the `n` waiting modules in native/loop.c's `wake_out` (their plans are
        the Python's)."""
        out, head = self._loop.wake_out, self.queues.head
        for i in range(n):
            m = self.modules[out[i]]
            plan = m.plan
            if plan is not None:
                if plan.ready < INF:
                    if plan.stable:
                        self._push(m, plan)
                        continue
                elif self.fast_wakes and plan.queue is not None and head(plan.queue) is None:
                    m.version += 1
                    continue
            self._schedule_native(m)

    def _schedule_native(self, m: _LoopModule) -> None:
        """`_schedule(m)`, and `m`'s state into its struct (`_put`), in one call of
        native/loop.c (its waiting flag, version and heap entry)."""
        try:
            plan = self._prepare(m)
            plan.stable = self._stable(m, plan)
        except _Trap:
            plan = _Plan(m.time)  # the fault is raised when it is popped (planning again)
        m._plan = plan
        if not native.lib.loop_put_plan(
            m._s,
            m.index,
            m.pc,
            m.time,
            m.halted,
            m.halt_time,
            m.count,
            m.vpu_free,
            m.dma_end,
            m._dma_busy_until,
            1 if m.barrier_token is not None else 0,
            plan.ready,
            plan.external,
            plan.stable,
            -1 if plan.queue is None else _queue_key(plan.queue),
        ):
            raise MemoryError("the emulator's scheduler")

    def _loop_pop(self, m: _LoopModule, t: int) -> int:
        """`_run`'s step for a popped plan that the Python made (`m` is as the Python left
        it); returns `m`'s index when the loop is to go on with it (`loop_run`'s `after`),
        else -1."""
        plan, time = m._plan, m.time
        if plan.slot is not None:
            plan = self._replan_slot(m, plan)
        elif not plan.stable:
            try:
                plan = self._prepare(m)
            except _Trap as e:
                raise self._fault(m, e) from None
        if plan.ready >= INF or plan.ready > t:
            if plan.ready >= INF:
                m.plan = plan
                m._c.waiting = 1
            else:
                self._push(m, plan)
            if m.time != time:  # (planning moved its time: `stall_on_loads`)
                _put(m)
            return -1
        m._c.waiting = 0
        self._loop.now = t
        return self._loop_exec(m, plan, t)

    def _loop_settle(self, m: _LoopModule, t: int) -> int:
        """The mpu.mm native/loop.c issued at `t` but for the elements its proof left
        (`LP_MMTODO`): those by the reference's exact path (`mpu_fast.settle`, on the loop's
        scratch arrays), then the loop writes and books the pass (`mm_commit`) and it retires
        here (`_loop_retired`); returns `loop_run`'s `after`."""
        ffi, s = native.ffi, self._loop
        _pull(m)
        rows, k, n, nt = s.mm_m, s.mm_k, s.mm_n, s.mm_nt

        def view(p, count, dtype):
            return np.frombuffer(ffi.buffer(p, count * np.dtype(dtype).itemsize), dtype)

        a = self.memory.read_array(s.mm_src, rows * k, _NP_DTYPES["bf16"]).reshape(rows, k)
        out = view(s.mx_out, rows * n, np.float32).reshape(rows, n)
        acc = view(s.mx_acc, rows * n, np.float32).reshape(rows, n) if s.mm_acc else None
        sums = view(s.mx_s, rows * n, np.float64).reshape(rows, n)
        todo = view(s.mx_todo, nt, np.int64)
        mpu_fast.settle(a, m.weight, sums, view(s.mx_rs, rows, np.float64), todo, acc, out)
        if not native.lib.mm_commit(s, m.index, t):
            raise MemoryError("the emulator's MPU")
        m.pc += 1
        m.time = t + 1
        return self._loop_retired(m, True)

    def _loop_exec(self, m: _LoopModule, plan: _Plan, t: int) -> int:
        """Issue `m`'s instruction at `t` (`plan`), count it, then plan the next one here if
        the loop would only hand it back; returns `loop_run`'s `after`."""
        try:
            done = self._execute(m, plan, t)
        except _Trap as e:
            raise self._fault(m, e) from None
        return self._loop_retired(m, done)

    def _loop_retired(self, m: _LoopModule, done: bool) -> int:
        """`_loop_exec` after the issue: `m`'s instruction counted (`done`: it retired), the
        bounds checked, then the next one planned here if the loop would only hand it back."""
        s = self._loop
        if done:
            m.count += 1
            total = s.total + 1
            s.total = total
            if total > s.limit:
                s.limit = self._check_limits(m, total)
        if not m.halted:
            ckb, pc = m._ckb, m.pc
            k = ckb[pc] if 0 <= pc < len(ckb) else CK_PY
            if k == CK_SCALAR and not m._hot[pc]:
                # a short straight run of scalar code: the threaded code here costs less than
                # a call into the loop and back to plan what follows (`native_min_run`)
                s.total, s.limit = self._run_scalars(m, s.total, s.limit)
                if m.halted:
                    _put(m)
                    return -1
                pc = m.pc
                k = ckb[pc] if 0 <= pc < len(ckb) else CK_PY
            if k != CK_PY:
                _put(m)
                return m.index  # scalar code, qwait, dmawait, a VPU instruction: the loop's
            self._schedule_native(m)
            return -1
        _put(m)
        return -1

    def _loop_deadlock(self, now: int) -> DeadlockError:
        waits = []
        for m in self.modules:
            if m.halted:
                continue
            ins = m.code[m.pc] if m.pc < len(m.code) else None
            text = format_instruction(ins) if ins else "<end>"
            if m._c.kind == CK_QWAIT:  # the loop's plan: the reference's reason
                why = self._plan_qwait(m, ins).reason
            else:
                why = m.plan.reason if m.plan else "blocked"
            waits.append((m.name, m.program.name, m.pc, text, why))
        return DeadlockError(waits, now)

    def _limit_error(self, cls, m: Module, bound, cause: str) -> LimitError:
        ins = m.code[m.pc] if 0 <= m.pc < len(m.code) else None
        e = cls(m.program.name, m.name, m.pc, cause, None, format_instruction(ins) if ins else "")
        e.value = bound
        return e

    def _check_limits(self, m: Module, total: int, cycles: int | None = None) -> int:
        """Raise the LimitError of the first bound the run is past (instructions, cycles, wall
        clock), at `m`'s PC; else return the instruction count of the next check."""
        if total > self.instruction_limit:
            raise self._limit_error(
                InstructionLimitError,
                m,
                self.instruction_limit,
                f"instruction limit of {self.instruction_limit} exceeded (runaway loop?)",
            )
        cycles = m.time if cycles is None else cycles
        if self.cycle_limit is not None and cycles > self.cycle_limit:
            raise self._limit_error(
                CycleLimitError,
                m,
                self.cycle_limit,
                f"cycle limit of {self.cycle_limit} cycles exceeded at cycle {cycles} (raise it "
                "with $LEGATO_CYCLE_LIMIT or legato.session(cycle_limit=...))",
            )
        if self._deadline is not None and _time.monotonic() > self._deadline:
            raise self._limit_error(
                TimeLimitError,
                m,
                self.time_limit,
                f"wall-clock limit of {self.time_limit:g} s exceeded after {total} instructions, "
                f"at cycle {cycles} (raise it with $LEGATO_TIME_LIMIT or "
                "legato.session(time_limit=...))",
            )
        return min(self.instruction_limit, total + CHECK_EVERY)

    fast_scalars = True
    """Run scalar runs through `_scalar_code` (False: through `_execute`, the reference that a
    differential test compares it with)."""

    def _run_scalars_reference(self, m: Module, total: int, limit: int) -> tuple[int, int]:
        """Execute `m`'s scalar instructions from its pc up to the next other one (or halt),
        each through `_execute`; returns the new instruction total and the count of the next
        bounds check (`_check_limits`)."""
        pure, code = m.pure, m.code
        while not m.halted and 0 <= m.pc < len(code) and pure[m.pc]:
            if m.reg_ready:
                m.stall_on_loads(code[m.pc])
            pc, t = m.pc, m.time
            try:
                self._execute(m, _PURE, t)
            except _Trap as e:
                raise self._fault(m, e) from None
            if self._prof is not None:
                self._prof.step(m, pc, t)
            m.count += 1
            total += 1
            if total > limit:
                limit = self._check_limits(m, total)
        return total, limit

    def _run_scalars(self, m: Module, total: int, limit: int) -> tuple[int, int]:
        """`_run_scalars_reference`, each instruction one call of its `_scalar_code` function
        (threaded code: decoded once per program, no dispatch on the mnemonic), and a run of at
        least `native_min_run` scalar instructions (or a scalar loop) through the compiled
        scalar ISA when it is built (`native_scalars`). Skips what `_execute` does that cannot
        matter here: dropping ended scoreboard entries (the range checks skip them) and the
        barrier check (a scalar never follows an unreleased one)."""
        if m.halted or not (0 <= m.pc < len(m.pure) and m.pure[m.pc]):
            return total, limit  # (most calls: a unit or sync instruction follows another)
        code = m.code
        fns, prog = m.fns, m.prog
        if fns is None:
            fns, prog = m.fns, m.prog = self._scalar_programs(m)
        n, r = len(code), m.regs
        pc = m.pc
        skip = -1  # the pc the compiled code stopped at (a trap, or what it does not run)
        while 0 <= pc < n:
            f = fns[pc]
            if f is None:
                break
            if prog is not None and prog[1][pc] and pc != skip and not m.reg_ready:
                total, status = self._native_scalars(m, prog[0], n, total, limit)
                pc = m.pc
                if total > limit:
                    limit = self._check_limits(m, total)
                if status == 1:  # halted
                    break
                if status != 2:  # not the budget: a trap or a non-scalar instruction at pc
                    skip = pc
                continue
            if m.reg_ready:
                m.stall_on_loads(code[pc])
            try:
                nxt = f(m, r, pc)
            except _Trap as e:
                raise self._fault(m, e) from None
            t = m.time
            m.pc = pc = nxt
            m.time = t + 1
            m.count += 1
            total += 1
            skip = -1
            if m.halted:
                m.halt_time = t + 1
                if total > limit:
                    limit = self._check_limits(m, total)
                break
            if total > limit:
                limit = self._check_limits(m, total)
        return total, limit

    def _scalar_programs(self, m: Module) -> tuple[list, tuple | None]:
        """(`m`'s `_scalar_code` functions per pc, its `_native_program` or None), shared by
        every module running its program (`_Code`)."""
        code, shared = m.code, m.shared
        fns = shared.fns.get(self.model.num_cores)
        if fns is None:
            fns = shared.fns[self.model.num_cores] = [
                _scalar_code(ins, self.model.num_cores) if p else None
                for ins, p in zip(code, m.pure)
            ]
        prog = None
        if self.native_scalars and native.lib is not None:
            prog = shared.native.get(self.native_min_run)
            if prog is None:
                prog = shared.native[self.native_min_run] = _native_program(
                    code, m.pure, self.native_min_run
                )
        return fns, prog

    native_scalars = True
    """Run long scalar runs through the compiled scalar ISA when it is built (`native`;
    False: the threaded Python code only, the reference a differential test compares it with)."""
    native_min_run = 8
    """The shortest straight run of scalar instructions worth a call into compiled code (its
    fixed cost, ~2 us, is a few threaded-code instructions); a run holding a backward branch (a
    loop) always is."""

    def _native_scalars(self, m: Module, code, n: int, total: int, limit: int):
        """Run `m`'s scalar instructions from its pc in compiled code, at most up to the next
        bounds check (`limit`). Issue time and counts advance one per
        instruction, as `_scalar_code`'s caller does. Returns the new total and how the run
        stopped (native/scalar.c): 0 at an instruction the compiled code does not run (not
        scalar, or a scalar it has no encoding for), 1 halted, 2 at the budget, 3 at a trap,
        which the caller's threaded code raises with its message."""
        ffi = native.ffi
        if self._native_buf is None:
            self._native_buf = (ffi.new("int64_t[]", isa.NUM_REGS), ffi.new("long *"))
            self._native_buf += (ffi.new("int *"),)
        regs, pcp, st = self._native_buf
        regs[0 : isa.NUM_REGS] = m.regs
        pcp[0] = m.pc
        done = native.lib.scalar_run(
            code,
            n,
            regs,
            pcp,
            limit + 1 - total,
            -1 if m.core is None else m.core,
            self.model.num_cores,
            CORE_WINDOW_BASE,
            CORE_WINDOW_SIZE,
            st,
        )
        if done:
            m.regs[:] = ffi.unpack(regs, isa.NUM_REGS)
            m.time += done
            m.count += done
            total += done
        m.pc = pcp[0]
        status = st[0]
        if status == 1:  # halt
            m.halted = True
            m.halt_time = m.time
        return total, status

    def _push(self, m: Module, plan: _Plan) -> None:
        m.version += 1
        m.plan = plan
        # (ready, version, index) as one int, ordered as that tuple (`_run` unpacks it):
        # comparing ints is cheaper than comparing tuples
        heapq.heappush(self._heap, (plan.ready << 80) | (m.version << 16) | m.index)

    def _schedule(self, m: Module) -> None:
        try:
            plan = self._prepare(m)
            plan.stable = self._stable(m, plan)
        except _Trap:
            plan = _Plan(m.time)  # the fault is raised when it is popped (planning again)
        self._waiting.discard(m.index)
        if plan.ready >= INF:
            m.version += 1
            m.plan = plan
            self._waiting.add(m.index)
        else:
            self._push(m, plan)
            if plan.external:
                self._waiting.add(m.index)

    def _stable(self, m: Module, plan: _Plan) -> bool:
        """Whether planning `m`'s next instruction again, before `m` acts, gives `plan` again:
        everything it reads is `m`'s own state, or shared state no other module can change
        under it (a released barrier; a queue whose head arrival is known: only `m` consumes
        it). Not so for a DMA (its port's free slots are shared) and `sem.wait` (another post
        moves `posted_at`); nor for a plan that waits (INF: its condition is external)."""
        if plan.ready >= INF:
            return False
        if m.barrier_token is not None:
            return True
        return m.shared.stab[m.pc]

    def _replan_slot(self, m: Module, plan: _Plan) -> _Plan:
        """What `_prepare` gives for `m`'s DMA `plan` (made when `m` was last planned, and `m`
        has not acted since): everything but its port's free slots is `m`'s own state."""
        port, base = plan.slot
        ready = max(base, self.dram.port(port).slot_time(m.time, self.model.dma_max_in_flight))
        if ready == plan.ready:
            return plan
        return _Plan(ready, plan.reason, plan.external, plan.data, slot=plan.slot)

    def _wake(self) -> None:
        """Another module acted: re-plan every module whose readiness depends on others. A
        stable plan (a `qwait` whose arrival is known) is pushed again as it is: the same
        heap entry and version as planning it again, without the work."""
        head = self.queues.head
        for idx in list(self._waiting):
            m = self.modules[idx]
            if not m.halted:
                plan = m.plan
                if plan is not None:
                    if plan.ready < INF:
                        if plan.stable:
                            self._push(m, plan)
                            continue
                    elif self.fast_wakes and plan.queue is not None and head(plan.queue) is None:
                        # a `qwait` on a queue still empty: planning it again gives the same
                        # waiting plan; only its version moves, as `_schedule` moves it
                        m.version += 1
                        continue
                self._schedule(m)

    fast_wakes = True
    """On a wake, a `qwait` waiting on a queue that is still empty only moves its version
    (False: it is planned again, the reference a differential test compares it with)."""

    def _fault(self, m: Module, e: _Trap, pc: int | None = None) -> EmulatorFault:
        """`e` as the fault of `m` at `pc` (default: its current instruction)."""
        if isinstance(e, HostMemoryLimit):
            return self._limit_error(MemoryLimitError, m, e.limit, e.cause)
        pc = m.pc if pc is None else pc
        ins = m.code[pc] if 0 <= pc < len(m.code) else None
        cls = OutOfBoundsError if isinstance(e, OutOfBounds) else EmulatorFault
        cause = e.cause
        if ins is not None and ins.op.format == "rrr":
            fit = fit_check_cause(ins.op.mnemonic, ins.b == ins.c)
            if fit is not None:  # the compiler's check that a copy fits: out of bounds
                cause, cls = fit, OutOfBoundsError
        fault = cls(
            m.program.name, m.name, pc, cause, e.address, format_instruction(ins) if ins else ""
        )
        if isinstance(e, OutOfBounds):
            fault.what, fault.size, fault.range = e.what, e.size, e.range
        return fault

    def _result(self) -> timing.RunResult:
        final = self.__dict__.get("_final") if "modules" not in self.__dict__ else None
        if final is not None:  # (the modules' state the loop left, not made into them)
            final, nf = final[0], _LOOP_FINAL
            names = [spec[0] for spec in self._specs]
            halts, ends, dmas = final[3::nf], final[10::nf], final[6::nf]
            end = max(max(halts, default=0), max(ends, default=0), max(dmas, default=0), 0)
            module_cycles = dict(zip(names, halts))
            # (a new `Module`'s busy cycles are 0: the loop's, in `Module.busy`'s order)
            unit_busy = {
                name: {"dma": bd, "mpu": bm, "vpu": bv}
                for name, bv, bd, bm in zip(names, final[11::nf], final[12::nf], final[13::nf])
            }
            instructions = dict(zip(names, final[4::nf]))
        else:
            end = 0
            for m in self.modules:
                end = max(end, m.halt_time, m.unit_end, m.dma_end)
            module_cycles = {m.name: m.halt_time for m in self.modules}
            unit_busy = {m.name: dict(m.busy) for m in self.modules}
            instructions = {m.name: m.count for m in self.modules}
        events = self._trace_meta() + self.events if self.trace_on else []
        return timing.RunResult(
            cycles=end,
            clock_ghz=self.model.clock_ghz,
            module_cycles=module_cycles,
            unit_busy=unit_busy,
            port_busy=self.dram.port_busy(),
            dram_bytes_per_channel=list(self.dram.channel_bytes),
            instructions=instructions,
            trace_events=events,
            mac_count=self.macs,
            vpu_element_ops=self.vpu_elems,
            vpu_transcendental_ops=self.vpu_trans_elems,
            roofline=timing.roofline(
                self.model,
                sum(self.dram.channel_bytes),
                self.macs,
                self.vpu_elems,
                self.vpu_trans_elems,
                self.pim_bytes,
            ),
            pim_bytes=self.pim_bytes,
            model_name=self.model.name,
            prints=list(self.prints),
        )

    # ---- helpers --------------------------------------------------------------------------
    def _check(self, addr: int, n: int) -> None:
        """[addr, addr + n) is mapped; an access of 0 bytes touches nothing and is not looked
        up, as in the interpreters (a zero-row copy from a zero-size argument starts past it)."""
        if n:
            self.memory.find(addr, n)

    def _local(self, m: Module, addr: int, n: int, what: str) -> None:
        """`addr` must be in this core's sram / mpu_buffer / private_dram."""
        check_local(addr, m.core, what)
        self._check(addr, n)

    def _check_bounds(self, m: Module, ins) -> None:
        """The instruction's bounded operands access only their extents (`arch.bounds`)."""
        fmt, r = ins.op.format, m.regs
        weight = m.weight.shape if m.weight is not None else None
        spans = access_spans(
            fmt,
            ins.op.mnemonic,
            ins.simm if fmt in ("ld", "st") else ins.imm,
            lambda f: r[getattr(ins, f)],
            weight,
            self.model,
        )
        check_bounds(m.bounds[m.pc], spans, ADDRESS_FIELDS[fmt])

    def _local_find(self, addr: int, n: int, core: int, what: str) -> tuple:
        """`check_local(addr, core, what)`, then `memory.find(addr, n)`. A region that
        `Memory.find` remembered for `addr`'s page, that holds [addr, addr + n) and that lies
        wholly in one local space of `core` (`_local_of`) passes both checks and is the one
        `find` gives: it is returned without them (~3 per VPU instruction)."""
        r = self.memory._by_page.get(addr >> 12)
        if r is not None and n >= 0 and self._local_of.get(r) == core:
            end = r.base + r.size
            if r.base <= addr < end and addr + n <= end:
                return r, addr - r.base
        check_local(addr, core, what)
        found = self.memory.find(addr, n)
        r = found[0]
        if r not in self._local_of:
            space, owner = classify(r.base)
            last = classify(r.base + r.size - 1)
            self._local_of[r] = owner if space in LOCAL_SPACES and last == (space, owner) else -1
            if "_loop" in self.__dict__:
                self._loop_region(r)
        return found

    def _loop_regions_at_start(self, regions: list) -> None:
        """`_loop_region` of each of `regions` (the ones mapped when the run starts), in order,
        told to native/loop.c in one call (`loop_regions`)."""
        ffi = native.ffi
        known, local, cptrs = self._loop_known, self._local_of, self._cptrs
        fields: list[int] = []
        ptrs, new = [], []
        for r in regions:
            if r.lazy or r.size <= 0 or r in known:
                continue
            core, kind, owner, sname = _region_class(r.base, r.size)
            local[r] = core  # (`_local_find`'s, the same test)
            p = cptrs.get(r)
            if p is None:
                p = cptrs[r] = ffi.from_buffer("char[]", r.data)
            recycled = type(r) is _RecycledRegion
            fields += (r.base, r.size, core, r.read_only, recycled, kind, owner, sname)
            ptrs.append(p)
            known.add(r)
            new.append(r)
        if new:
            f, p = ffi.new("int64_t[]", fields), ffi.new("char *[]", ptrs)
            if not native.lib.loop_regions(self._loop, len(new), f, p):
                raise MemoryError("the emulator's scheduler")
            self._loop_regions += new

    def _loop_region(self, r) -> None:
        """Tell native/loop.c of region `r` if it is one array (not lazy), once: the core whose
        local space holds all of it (`_local_of`: its VPU operands are found there), and what a
        DMA end in it is (`RS_*`, its space's core)."""
        if r.lazy or r.size <= 0 or r in self._loop_known:
            return
        core, kind, owner, sname = _region_class(r.base, r.size)
        self._local_of[r] = core  # (`_local_find`'s, the same test)
        p = self._cptrs.get(r)
        if p is None:
            p = self._cptrs[r] = native.ffi.from_buffer("char[]", r.data)
        recycled = type(r) is _RecycledRegion
        if not native.lib.loop_region(
            self._loop,
            r.base,
            r.size,
            core,
            r.read_only,
            recycled,
            kind,
            owner,
            p,
            sname,
        ):
            raise MemoryError("the emulator's scheduler")
        self._loop_known.add(r)
        self._loop_regions.append(r)

    def _is_dram(self, addr: int) -> bool:
        return classify(addr)[0] in DRAM_REGIONS

    def _unit_ready(self, m: Module, free: int, reads, writes) -> int:
        return max(m.time, free, m.conflict(reads, writes))

    # ---- per-instruction readiness --------------------------------------------------------
    def _prepare(self, m: Module) -> _Plan:
        if m.barrier_token is not None:
            key = m.barrier_token
            rel = self.barriers.released.get(key)
            if rel is None:
                bid = key[0]
                return _Plan(
                    INF,
                    f"at barrier {bid}: {self.barriers.arrived(bid)} of "
                    f"{self.barriers.count(bid)} modules arrived",
                    external=True,
                )
            return _Plan(max(m.time, rel))
        if not 0 <= m.pc < len(m.code):
            raise _Trap(f"pc {m.pc} outside the program ({len(m.code)} instructions)")
        ins = m.code[m.pc]
        if m.reg_ready:
            m.stall_on_loads(ins)
        if m.bounds is not None and m.pc in m.bounds:
            self._check_bounds(m, ins)
        kind = m.kinds[m.pc]
        if kind == K_VPU:  # first: the most frequent unit instructions
            if m.core is None:
                raise _Trap("top has no VPU")
            return self._vpu_plan(m, ins)
        return self._planners[kind](self, m, ins)

    def _make_planners(self) -> list:
        """`_prepare`'s planner of each instruction kind (`_kind`): this emulator's class's
        functions, called with it (not methods bound to it: those would make every emulator a
        reference cycle, freed only by the garbage collector, ~340 objects a run)."""
        cls = type(self)
        p = [cls._plan_now] * 14
        p[K_LD] = p[K_ST] = cls._plan_ld_st
        p[K_DMA], p[K_DMA2D] = cls._plan_dma, cls._dma2d_plan
        p[K_QWAIT], p[K_DMAWAIT], p[K_SEM_WAIT] = (
            cls._plan_qwait,
            cls._plan_dmawait,
            cls._plan_sem_wait,
        )
        p[K_LDW], p[K_MM] = cls._plan_ldw, cls._plan_mm
        p[K_PIM], p[K_DBG] = cls._pim_plan, cls._dbg_plan
        return p

    def _plan_now(self, m: Module, ins) -> _Plan:
        """An instruction that issues as soon as `m` may (scalar code, sem.post, barrier)."""
        return _Plan(m.time)

    def _plan_ld_st(self, m: Module, ins) -> _Plan:
        addr = m.regs[ins.b] + ins.simm
        self._check(addr, 8)
        rng = [(addr, addr + 8)]
        t = m.conflict(rng, []) if ins.op.mnemonic == "ld" else m.conflict([], rng)
        return _Plan(max(m.time, t), data=(addr,))

    def _plan_dma(self, m: Module, ins) -> _Plan:
        r = m.regs
        dst, src, n = r[ins.a], r[ins.b], r[ins.c]
        if n < 0:
            raise _Trap(f"dma of negative length {n}")
        return self._dma_ends(m, ins, dst, src, n, n, (dst, src, n))

    def _dma_ends(self, m: Module, ins, dst: int, src: int, sspan: int, dspan: int, geometry):
        """The plan of a dma or dma2d (`geometry`: its data's leading fields) whose ends span
        `sspan` bytes at `src` and `dspan` at `dst`: both mapped, its notify, its port, ready
        when the scoreboard allows and the port has a transfer slot."""
        self._check(src, sspan)
        self._check(dst, dspan)
        notify = self._notify(m, ins)
        s_space, s_core = classify(src)
        d_space, d_core = classify(dst)
        port = dma_port(m.core, s_core, d_core)
        reads, writes = [(src, src + sspan)], [(dst, dst + dspan)]
        slot = self.dram.port(port).slot_time(m.time, self.model.dma_max_in_flight)
        base = max(m.time, m.conflict(reads, writes))
        return _Plan(
            max(base, slot),
            f"DMA port {port} full",
            data=(*geometry, notify, port, s_space, d_space),
            slot=(port, base),
        )

    def _plan_qwait(self, m: Module, ins) -> _Plan:
        if m.core is None:
            raise _Trap("top has no queues")
        key = (m.core, ins.a, ins.imm)
        head = self.queues.head(key)
        if head is None:
            name = f"{SPACE_NAMES[ins.a]}.q{ins.imm}"
            return _Plan(
                INF,
                f"waiting for an arrival on queue {name} of core {m.core}",
                external=True,
                queue=key,
            )
        return _Plan(max(m.time, head), external=True)

    def _plan_dmawait(self, m: Module, ins) -> _Plan:
        return _Plan(max(m.time, m.dma_end))

    def _plan_sem_wait(self, m: Module, ins) -> _Plan:
        if self.sems.ready(ins.a, ins.imm):
            return _Plan(max(m.time, self.sems.posted_at(ins.a)))
        return _Plan(
            INF,
            f"semaphore {ins.a} is {self.sems.value(ins.a)}, waiting for {ins.imm}",
            external=True,
        )

    def _plan_ldw(self, m: Module, ins) -> _Plan:
        if m.core is None:
            raise _Trap("top has no MPU")
        r = m.regs
        src, k, n = r[ins.a], r[ins.b], r[ins.c]
        check_weight_tile(self.model, k, n)
        check_local(src, m.core, "mpu.ldw source", ("mpu_buffer",))
        self._check(src, k * n * 2)
        reads = [(src, src + k * n * 2)]
        return _Plan(self._unit_ready(m, m.mpu_free, reads, []), data=(src, k, n, reads))

    def _plan_mm(self, m: Module, ins) -> _Plan:
        if m.core is None:
            raise _Trap("top has no MPU")
        if m.weight is None:
            raise _Trap("mpu.mm before any mpu.ldw: the weight tile is empty")
        r = m.regs
        dst, src, rows = r[ins.a], r[ins.b], r[ins.c]
        if rows < 0:
            raise _Trap(f"mpu.mm with negative row count {rows}")
        k, n = m.weight.shape
        osz = 4 if ins.imm & MM_F32 else 2
        self._local(m, src, rows * k * 2, "mpu.mm source")
        self._local(m, dst, rows * n * osz, "mpu.mm destination")
        reads = [(src, src + rows * k * 2)]
        writes = [(dst, dst + rows * n * osz)]
        if ins.imm & MM_ACC:
            reads.append(writes[0])
        return _Plan(
            self._unit_ready(m, m.mpu_free, reads, writes),
            data=(dst, src, rows, k, n, reads, writes),
        )

    def _dbg_plan(self, m: Module, ins: isa.Instruction) -> _Plan:
        """`dbg.print` / `dbg.assert`: its debug entry, and for a tensor the bytes it reads,
        which it waits for in the scoreboard like any reader (docs/isa.md, *Debug
        instructions*)."""
        table = getattr(self.binary, "debug", None) or ()
        if ins.imm >= len(table):
            raise _Trap(
                f"{ins.mnemonic} names debug entry {ins.imm}, but the binary's .legato.debug "
                f"table has {len(table)}"
            )
        entry = table[ins.imm]
        if entry.kind != "tensor":
            return _Plan(m.time, data=(entry, 0, 0, ()))
        addr, count = m.regs[ins.a], m.regs[ins.b]
        if count < 0:
            raise _Trap(f"{ins.mnemonic} of negative element count {count}")
        n = entry.nbytes(count)
        self._check(addr, n)
        reads = ((addr, addr + n),)
        return _Plan(max(m.time, m.conflict(reads, ())), data=(entry, addr, count, reads))

    def _exec_dbg(self, m: Module, ins: isa.Instruction, plan: _Plan, t: int) -> None:
        """Read the value of a debug entry and report it: a print's record is printed when its
        site's last value is read (and kept in `prints`); a false assert raises
        `DeviceAssertError`. Takes no cycle."""
        entry, addr, count, reads = plan.data
        if entry.kind == "tensor":
            if self.hazards is not None:
                self.hazards.access(m.index, m.pc, reads, ())
            raw = self.memory.read(addr, entry.nbytes(count))
            value = debug.read_tensor(entry, np.asarray(raw), count)
        else:
            value = m.regs[ins.a]
        if entry.op == "assert":
            debug.check_assert(entry, value, m.name, m.core, t)
            return
        if self._debug is None:
            self._debug = debug.Collector()
        rec = self._debug.add(entry, value, m.name, m.core, t)
        if rec is not None:
            self.prints.append(rec)
            debug.emit(rec)

    def _notify(self, m: Module, ins) -> tuple[int, int, int] | None:
        """(core, space, queue) a dma/dma2d notifies on completion, or None."""
        nt = decode_notify(ins.op.format, ins.imm, ins.d)
        if nt is None:
            return None
        mode, field, space, queue = nt
        return (select_core(mode, field, m.regs, m.core, self.model.num_cores), space, queue)

    def _dma2d_plan(self, m: Module, ins: isa.Instruction) -> _Plan:
        """dma2d: rows of row bytes, src/dst advancing by their strides; each end's span (first
        byte of the first row to the last byte of the last row) must lie in one allocation, and
        is what the scoreboard sees."""
        r = m.regs
        dst, src = r[ins.a], r[ins.b]
        rows, row, dstride, sstride, sspan, dspan = dma2d_geometry(r[ins.c], r[ins.d])
        return self._dma_ends(
            m, ins, dst, src, sspan, dspan, (dst, src, rows, row, dstride, sstride, sspan, dspan)
        )

    def _pim_plan(self, m: Module, ins: isa.Instruction) -> _Plan:
        """pim.gemv (docs/pim.md): the operands' rules (`arch.pim.check_gemv`), x and the
        destination in this core's memory; it issues when the scoreboard allows (x and the
        weight region read, the destination written) and its port has a transfer slot; the
        unit and channel queue it (`timing.DramTiming.pim_gemv`)."""
        if m.core is None:
            raise _Trap("top has no local memory for pim.gemv's operands")
        r = m.regs
        dst, x, w = r[ins.a], r[ins.b], r[ins.c]
        k, n = isa.dma2d_unpack(r[ins.d])
        pim.check_gemv(self.model, w, k, n)
        self._local(m, x, k * 2, "pim.gemv x")
        self._local(m, dst, n * 4, "pim.gemv destination")
        span = pim.region_span(self.model, k, n)
        self._check(w, span)
        reads = [(x, x + k * 2), (w, w + span)]
        writes = [(dst, dst + n * 4)]
        if ins.imm & isa.PIM_ACC:
            reads.append(writes[0])
        port = f"core{m.core}"
        slot = self.dram.port(port).slot_time(m.time, self.model.dma_max_in_flight)
        base = max(m.time, m.conflict(reads, writes))
        return _Plan(
            max(base, slot),
            f"DMA port {port} full",
            data=(dst, x, w, k, n, port, reads, writes),
            slot=(port, base),
        )

    def _exec_pim(self, m: Module, ins: isa.Instruction, plan: _Plan, t: int) -> None:
        """pim.gemv: computes at issue (as the MPU does); the scoreboard holds x, the region
        and the destination until the result's transfer ends, and `dmawait` waits for it (its
        transfers are this module's DMAs)."""
        dst, x, w, k, n, port, reads, writes = plan.data
        if self.hazards is not None:
            self.hazards.access(m.index, m.pc, reads, writes)
        xs = self.memory.read_array(x, k, _NP_DTYPES["bf16"])
        wt = pim.read_region(self.model, self.memory.read, w, k, n)
        acc = None
        if ins.imm & isa.PIM_ACC:
            acc = self.memory.read_array(dst, n, np.float32)
        self.memory.write(dst, np.ascontiguousarray(pim.gemv(xs, wt, acc)))
        channel = pim.channel_of(self.model, w)
        compute = pim.op_cycles(self.model, k, n)
        start, op_end, end = self.dram.pim_gemv(
            t, port, channel, k, n, self.pim_free[channel], compute
        )
        self.pim_free[channel] = op_end
        self.pim_bytes += k * n * 2
        m.busy["pim"] = m.busy.get("pim", 0) + compute
        m.inflight.append((end, reads, writes))
        m.dma_end = max(m.dma_end, end)
        m.unit_end = max(m.unit_end, end)
        if self.trace_on:
            self._ev(m, "pim", f"pim.gemv ch{channel} [{k}]x[{k},{n}]", start, compute)

    def _vpu_static(self, m: Module, ins: isa.Instruction) -> _VpuStatic:
        """The `_VpuStatic` of `m`'s instruction at its pc (`ins`), built on its first issue."""
        vs = m.shared.vpu.get(m.pc)
        if vs is None:
            vs = m.shared.vpu[m.pc] = _VpuStatic(ins)
        return vs

    def _vpu_plan(self, m: Module, ins: isa.Instruction) -> _Plan:
        vs = self._vpu_static(m, ins)
        r = m.regs
        fmt = vs.fmt
        sz = vs.sz
        if fmt == "vbin":
            dst, s1, s2, n = r[ins.a], r[ins.b], r[ins.c], r[ins.d]
            mode, period = vs.mode, vs.period
            if mode == BC_SCALAR:
                n2 = 1 if n else 0
            elif mode == BC_ROW:
                n2 = -(-n // period) if period else 0
            elif mode == BC_COL:
                n2 = min(n, period)
            else:
                n2 = n
            ranges = [(s1, n * sz), (s2, n2 * sz)]
            out = (dst, n * sz)
            elems = n
        elif fmt in ("vun", "vcvt"):
            dst, src, n = r[ins.a], r[ins.b], r[ins.c]
            ranges = [(src, n * vs.ssz)]
            out = (dst, n * sz)
            elems = n
        elif fmt == "vfill":
            dst, n = r[ins.a], r[ins.b]
            ranges = []
            out = (dst, n * sz)
            elems = n
        elif fmt == "vsel":
            dst, cond, src, n = r[ins.a], r[ins.b], r[ins.c], r[ins.d]
            ranges = [(cond, n * vs.csz), (src, n * sz), (dst, n * sz)]  # dst is read (kept)
            out = (dst, n * sz)
            elems = n
        else:  # v2d
            dst, src, rows, cols = r[ins.a], r[ins.b], r[ins.c], r[ins.d]
            ranges = [(src, rows * cols * sz)]
            out_n = rows * cols if vs.mn == "vpu.transpose" else rows
            out = (dst, out_n * sz)
            elems = rows * cols
            if rows < 0 or cols < 0:
                raise _Trap(f"{vs.mn} with negative shape [{rows}, {cols}]")
        if elems < 0:
            raise _Trap(f"{vs.mn} with negative element count {elems}")
        local = self._local_find
        # (region, offset) of each range and of the output, for `_vpu_native`
        found = [local(a, nb, m.core, vs.src) for a, nb in ranges]
        found.append(local(out[0], out[1], m.core, vs.dst))
        reads = [(a, a + nb) for a, nb in ranges]
        writes = [(out[0], out[0] + out[1])]
        return _Plan(
            self._unit_ready(m, m.vpu_free, reads, writes), data=(reads, writes, elems, found)
        )

    # ---- execution ------------------------------------------------------------------------
    inflight_keep = 4
    """A module's scoreboard entries are filtered for ended ones when it holds more."""

    def _execute(self, m: Module, plan: _Plan, t: int) -> bool:
        """Issue the next instruction of `m` at time `t`; returns False when it did not retire
        (a barrier arrival)."""
        if self._landings and self._landings[0][0] <= t:
            self._land(t)
        if len(m.inflight) > self.inflight_keep:
            # (dropping the ended entries only bounds the list: `conflict` skips them, and a
            # module's time never goes back below `t`)
            m.inflight = [x for x in m.inflight if x[0] > t]
        if m.barrier_token is not None:
            if self.hazards is not None:
                self.hazards.barrier_release(m.index, m.barrier_token)
            m.barrier_token = None
            if self.trace_on:
                self._ev(m, "sync", "barrier", m.time, t - m.time)
            m.time = t + 1
            m.pc += 1
            return True
        ins = m.code[m.pc]
        op = ins.op
        mn = op.mnemonic
        fmt = op.format
        r = m.regs
        nxt = m.pc + 1
        issue_end = t + 1
        kind = m.kinds[m.pc]
        if kind == K_VPU:  # first: the most frequent here (scalars mostly run threaded)
            self._exec_vpu(m, ins, plan, t)
        elif kind == K_DMA:
            self._exec_dma(m, ins, plan, t)
        elif kind == K_LDW:
            src, k, n, reads = plan.data
            if self.hazards is not None:
                self.hazards.access(m.index, m.pc, reads, ())
            # the tile's f64 values and column statistics, once for every pass until the next ldw
            m.weight = mpu_fast.weight(
                self.memory.read_array(src, k * n, _NP_DTYPES["bf16"]).reshape(k, n), m.weight
            )
            dur = timing.mpu_load_cycles(self.model, k, n)
            self._unit_op(m, "mpu", t, dur, reads, [], "mpu.ldw [{},{}]", k, n)
        elif kind == K_MM:
            dst, src, rows, k, n, reads, writes = plan.data
            if self.hazards is not None:
                self.hazards.access(m.index, m.pc, reads, writes)
            a = self.memory.read_array(src, rows * k, _NP_DTYPES["bf16"]).reshape(rows, k)
            f32 = bool(ins.imm & MM_F32)
            acc = None
            if ins.imm & MM_ACC:
                acc = self.memory.read_array(dst, rows * n, np.float32).reshape(rows, n)
            res = mpu_fast.matmul(a, m.weight, acc)
            res = res if f32 else numerics.round_to(res, _NP_DTYPES["bf16"])
            self.memory.write(dst, np.ascontiguousarray(res))
            self.macs += rows * k * n
            dur = timing.mpu_matmul_cycles(self.model, rows, k, n)
            self._unit_op(m, "mpu", t, dur, reads, writes, "mpu.mm [{},{}]x[{},{}]", rows, k, k, n)
        elif kind == K_DMA2D:
            self._exec_dma2d(m, plan, t)
        elif fmt == "rrr":
            a, b = r[ins.b], r[ins.c]
            m.set(ins.a, self._alu(mn, a, b))
        elif fmt == "rri":
            m.set(ins.a, self._alu(mn[:-1], r[ins.b], ins.simm))
        elif fmt == "br":
            a, b = r[ins.a], r[ins.b]
            take = {"beq": a == b, "bne": a != b, "blt": a < b, "bge": a >= b}[mn]
            if take:
                nxt = m.pc + ins.simm
        elif mn == "jmp":
            nxt = m.pc + ins.simm
        elif mn == "li":
            m.set(ins.a, ins.simm)
        elif mn == "lih":
            m.set(ins.a, (ins.imm << 32) | (r[ins.a] & 0xFFFFFFFF))
        elif mn == "lsa":
            core = select_core(ins.d, ins.c, r, m.core, self.model.num_cores)
            m.set(ins.a, core_space_base(core, SPACE_NAMES[ins.b]) + ins.imm)
        elif mn == "ld":
            (addr,) = plan.data
            if self.hazards is not None:
                self.hazards.access(m.index, m.pc, ((addr, addr + 8),), ())
            m.set(ins.a, int.from_bytes(self.memory.read(addr, 8).tobytes(), "little", signed=True))
            if self._is_dram(addr) and ins.a:
                # non-blocking: issue goes on; the register is ready after the DRAM latency
                # (the scoreboard stalls the first instruction that names it, stall_on_loads)
                m.reg_ready[ins.a] = t + self.model.dram_latency_cycles
        elif mn == "st":
            (addr,) = plan.data
            if self.hazards is not None:
                self.hazards.access(m.index, m.pc, (), ((addr, addr + 8),))
            self.memory.write(addr, (r[ins.a] & _MASK64).to_bytes(8, "little"))
            issue_end = t + (self.model.dram_latency_cycles if self._is_dram(addr) else 1)
        elif mn == "halt":
            m.halted = True
            m.halt_time = t + 1
        elif mn == "nop":
            pass
        elif mn == "qwait":
            arrival = self.queues.pop((m.core, ins.a, ins.imm))
            if self.hazards is not None:
                self.hazards.qwait(m.index, (m.core, ins.a, ins.imm))
            if t > m.time and self.trace_on:
                self._ev(m, "sync", f"qwait {SPACE_NAMES[ins.a]}.q{ins.imm}", m.time, t - m.time)
            assert arrival <= t
        elif mn == "dmawait":
            if self.hazards is not None:
                self.hazards.dmawait(m.index)
            if t > m.time and self.trace_on:
                self._ev(m, "sync", "dmawait", m.time, t - m.time)
        elif mn == "sem.post":
            self.sems.post(ins.a, ins.imm, t + 1)
            if self.hazards is not None:
                self.hazards.sem_post(m.index, ins.a, ins.imm)
            self._wake()
        elif mn == "sem.wait":
            self.sems.take(ins.a, ins.imm)
            if self.hazards is not None:
                self.hazards.sem_wait(m.index, ins.a, ins.imm)
            if t > m.time and self.trace_on:
                self._ev(m, "sync", f"sem.wait {ins.a}", m.time, t - m.time)
        elif mn == "barrier":
            return self._arrive(m, ins, t)
        elif fmt == "dbg":
            self._exec_dbg(m, ins, plan, t)
            issue_end = t  # a debug instruction takes no cycle of its own
        elif fmt == "pim":
            self._exec_pim(m, ins, plan, t)
        else:  # pragma: no cover - every mnemonic is handled above
            raise _Trap(f"unimplemented instruction {mn}")
        m.pc = nxt
        m.time = issue_end
        if m.halted:
            m.halt_time = t + 1
        return True

    def _alu(self, mn: str, a: int, b: int) -> int:
        try:
            return isa.alu(mn, a, b)
        except ZeroDivisionError as e:
            raise _Trap(str(e)) from None

    def _unit_op(self, m: Module, unit: str, t: int, dur: int, reads, writes, name: str, *fmt):
        """Book `dur` cycles of `unit` from `t`; the trace event is named `name.format(*fmt)`,
        formatted only when tracing is on (the trace-off path does no per-event work)."""
        end = t + dur
        if unit == "mpu":
            m.mpu_free = end
        else:
            m.vpu_free = end
        m.busy[unit] += dur
        m.unit_end = max(m.unit_end, end)
        m.inflight.append((end, reads, writes))
        if self.trace_on:
            self._ev(m, unit, name.format(*fmt), t, dur)

    def _exec_dma(self, m: Module, ins, plan: _Plan, t: int) -> None:
        dst, src, n, notify, port, s_space, d_space = plan.data
        if n:
            self.memory.writable(dst, n)  # a fault of this instruction, not of its landing
        if self.hazards is not None:
            self.hazards.dma(m.index, m.pc, ((src, src + n),), ((dst, dst + n),), notify)
        shared = [(a, n) for a, sp in ((src, s_space), (dst, d_space)) if sp == "shared"]
        dram = s_space in DRAM_REGIONS or d_space in DRAM_REGIONS
        end, _pdur = self.dram.dma(t, port, n, shared, dram)
        if n:
            self._landing(end, m, self._land_dma, (dst, src, n))
        self._dma_booked(m, t, end, (src, src + n), (dst, dst + n), notify, bytes=n, port=port)

    def _land_dma(self, dst: int, src: int, n: int) -> None:
        self.memory.write(dst, self.memory.read(src, n))

    def _dma_booked(self, m: Module, t: int, end: int, read, write, notify, **ev) -> None:
        """What every transfer does once its end time is known: the scoreboard entry, the
        module's DMA time, the trace event, the notify of the target queue."""
        m.inflight.append((end, [read], [write]))
        m.dma_end = max(m.dma_end, end)
        m.busy["dma"] += max(0, end - max(t, m._dma_busy_until))
        m._dma_busy_until = max(m._dma_busy_until, end)
        if self.trace_on:
            self._dma_ev(m, t, end, src=hex(read[0]), dst=hex(write[0]), **ev)
        if notify is not None:
            self.queues.push(notify, end)
            self._wake()

    def _exec_dma2d(self, m: Module, plan: _Plan, t: int) -> None:
        dst, src, rows, row, dstride, sstride, sspan, dspan, notify, port, s_space, d_space = (
            plan.data
        )
        n = rows * row
        if n:
            self.memory.writable(dst, dspan)  # a fault of this instruction, not of its landing
        if self.hazards is not None:
            self.hazards.dma(
                m.index,
                m.pc,
                rows_of(src, rows, row, sstride),
                rows_of(dst, rows, row, dstride),
                notify,
            )
        shared = [
            (a, rows, row, st)
            for a, st, sp in ((src, sstride, s_space), (dst, dstride, d_space))
            if sp == "shared"
        ]
        dram = s_space in DRAM_REGIONS or d_space in DRAM_REGIONS
        end, _pdur = self.dram.dma(t, port, n, shared, dram)
        if n:
            self._landing(
                end, m, self._land_dma2d, (dst, src, rows, row, dstride, sstride, sspan, dspan)
            )
        self._dma_booked(
            m, t, end, (src, src + sspan), (dst, dst + dspan), notify, bytes=n, rows=rows, port=port
        )

    def _land_dma2d(self, dst, src, rows, row, dstride, sstride, sspan, dspan) -> None:
        block = np.lib.stride_tricks.as_strided(
            self.memory.read(src, sspan), (rows, row), (sstride, 1)
        )
        if dstride == row:
            self.memory.write(dst, np.ascontiguousarray(block))
        else:
            out = self.memory.read(dst, dspan).copy()  # (the block may be a view of it)
            np.lib.stride_tricks.as_strided(out, (rows, row), (dstride, 1))[...] = block
            self.memory.write(dst, out)

    # ---- landing and hazards --------------------------------------------------------------
    def _landing(self, end: int, m: Module, fn, args: tuple) -> None:
        """The DMA `m` issues now lands at `end`: `fn(*args)` then (`_land`)."""
        self._land_seq += 1
        heapq.heappush(self._landings, (end, self._land_seq, m.index, m.pc, fn, args))

    def _land(self, t: int) -> None:
        """Land every DMA that completed by `t`, in completion (then issue) order; a fault
        while landing (host memory) is the issuing instruction's."""
        heap = self._landings
        while heap and heap[0][0] <= t:
            _end, _seq, idx, pc, fn, args = heapq.heappop(heap)
            try:
                fn(*args)
            except _Trap as e:
                raise self._fault(self.modules[idx], e, pc) from None

    def _describe(self, idx: int, pc: int) -> tuple:
        """(module name, program name, pc, instruction text, no source: the runtime adds the
        line) of `pc` of module `idx`, for a hazard report."""
        m = self.modules[idx]
        ins = m.code[pc] if 0 <= pc < len(m.code) else None
        return m.name, m.program.name, pc, format_instruction(ins) if ins else "", None

    def _read_only(self, addr: int, n: int) -> bool:
        return self.memory.find(addr, n)[0].read_only

    def _region_name(self, addr: int, n: int) -> str:
        return self.memory.find(addr, n)[0].name

    def _arrive(self, m: Module, ins, t: int) -> bool:
        gen, complete = self.barriers.arrive(ins.a, ins.imm, t)
        m.barrier_token = (ins.a, gen)
        if self.hazards is not None:
            self.hazards.barrier_arrive(m.index, m.barrier_token)
        m.time = t
        if complete:
            self._wake()
        return False

    def _exec_vpu(self, m: Module, ins, plan: _Plan, t: int) -> None:
        reads, writes, elems, found = plan.data
        if self.hazards is not None:
            self.hazards.access(m.index, m.pc, reads, writes)
        vs = self._vpu_static(m, ins)
        if not (
            vs.nat is not None
            and self.native_vpu
            and self._vpu_native(m, ins, vs, elems, found, writes[0])
        ):
            self._vpu_reference(m, ins, vs, elems)
        self.vpu_elems += elems
        if vs.trans:
            self.vpu_trans_elems += elems
        dur = timing.vpu_cycles(self.model, elems, vs.trans)
        self._unit_op(m, "vpu", t, dur, reads, writes, "{} {}", vs.mn, elems)

    native_vpu = native.ENABLED
    """Run the common f32/bf16 VPU instructions through native/vpu.c when it is built (False:
    numpy only, the reference a differential test compares it with)."""

    def _vpu_native(self, m: Module, ins, vs: _VpuStatic, elems: int, found, out) -> bool:
        """Do `ins` through native/vpu.c (`vs.nat`) on the (region, offset) of each operand
        that planning found (`_vpu_plan`: regions are never unmapped, and the registers have
        not changed since); `out` is the destination's byte range. False when it did not
        (nothing written: the reference runs it). A read-only destination raises the fault of
        the reference's write."""
        if elems <= 0:
            return False
        cptrs, ptrs = self._cptrs, []
        for region, off in found:
            p = cptrs.get(region)
            if p is None:
                if region.lazy:  # not one array: the reference's reads and writes handle it
                    return False
                p = cptrs[region] = native.ffi.from_buffer("char[]", region.data)
            ptrs.append(p + off)
        region, off = found[-1]
        lo, hi = out
        if region.read_only:
            self.memory.writable(lo, hi - lo)  # raises
        r, nat, fmt = m.regs, vs.nat, vs.fmt
        if fmt == "vbin":
            mode, period = vs.mode, vs.period
            if mode in (BC_ROW, BC_COL) and period <= 0:  # the reference's numpy says
                return False
            done = nat[0](nat[1], nat[2], mode, period, elems, ptrs[0], ptrs[1], ptrs[2]) == 0
        elif fmt == "vun" or fmt == "vcvt":
            done = nat[0](nat[1], nat[2], elems, ptrs[0], ptrs[1]) == 0
        elif fmt == "vfill":
            done = nat[0](nat[1], elems, r[ins.c] & _MASK64, ptrs[0]) == 0
        else:  # v2d: transpose, rsum, rmax
            done = nat[0](nat[1], r[ins.c], r[ins.d], ptrs[0], ptrs[1]) == 0
        if done and type(region) is _RecycledRegion:  # as its `write`: the bytes to zero later
            off2 = off + hi - lo
            if off < region.lo:
                region.lo = off
            if off2 > region.hi:
                region.hi = off2
        return done

    def _vpu_reference(self, m: Module, ins, vs: _VpuStatic, elems: int) -> None:
        """Do `ins` with `vpu`'s numpy (the definition)."""
        mn, fmt, dt = vs.mn, vs.fmt, vs.dt
        r = m.regs
        mem = self.memory
        if fmt == "vbin":
            n = elems
            mode, period = vs.mode, vs.period
            x = mem.read_array(r[ins.b], n, dt)
            if n == 0:
                y = x
            elif mode == BC_SCALAR:
                y = np.broadcast_to(mem.read_array(r[ins.c], 1, dt), (n,))
            elif mode == BC_ROW:
                y = np.repeat(mem.read_array(r[ins.c], -(-n // period), dt), period)[:n]
            elif mode == BC_COL:
                y = np.resize(mem.read_array(r[ins.c], min(n, period), dt), n)
            else:
                y = mem.read_array(r[ins.c], n, dt)
            res = vpu.binary(vs.kind, x, y, dt)
        elif fmt == "vun":
            res = vpu.unary(vs.kind, mem.read_array(r[ins.b], elems, dt), dt)
        elif fmt == "vcvt":
            res = vpu.convert(mem.read_array(r[ins.b], elems, vs.st), dt)
        elif fmt == "vsel":
            res = vpu.select(
                mem.read_array(r[ins.b], elems, vs.ct),
                mem.read_array(r[ins.c], elems, dt),
                mem.read_array(r[ins.a], elems, dt),
            )
        elif fmt == "vfill":
            bits = (r[ins.c] & _MASK64).to_bytes(8, "little")[: dt.itemsize]
            res = np.full(elems, np.frombuffer(bits, dt)[0], dt)
        else:
            rows, cols = r[ins.c], r[ins.d]
            x = mem.read_array(r[ins.b], rows * cols, dt).reshape(rows, cols)
            if mn == "vpu.rsum":
                res = vpu.row_sum(x, dt)
            elif mn == "vpu.rmax":
                res = vpu.row_max(x, dt)
            else:
                res = np.ascontiguousarray(x.T)
        mem.write(r[ins.a], np.ascontiguousarray(res))
