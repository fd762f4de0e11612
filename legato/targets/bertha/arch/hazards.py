"""The hazard checker (docs/isa.md, *Timing and synchronisation*; issue 17, item 3).

A DMA's bytes land when it completes, so a program that reads a buffer before the transfer
filling it completed, or writes a buffer a transfer is still reading, or races another core on
shared DRAM, computes garbage on hardware, and on the emulator only by the luck of its timing.
The checker reports such a pair of accesses whatever the timing: two accesses of a byte, at least
one a write, by two different modules (a DMA counts as its issuer's) that no synchronisation
orders. Accesses of one module are ordered by the hardware (program order and the scoreboard).

Happens-before is tracked with vector clocks over *streams*: each module is a stream (its clock
advances at every release: a DMA issue, `sem.post`, a barrier arrival), and so are the DMAs of
one issuer that notify one queue (or none), numbered in issue order. A module knows DMA k of a
stream completed when its clock of that stream is at least k:

* `qwait` consuming the arrival of DMA k of stream (issuer, queue) learns k (the earlier DMAs of
  that stream notified the same queue earlier, so earlier qwaits consumed them: FIFO) and joins
  the issuer's clock at issue;
* `dmawait` learns every DMA its module issued;
* `sem.post ID, N` deposits N units carrying the poster's clock; `sem.wait ID, N` takes the N
  oldest units and joins the clocks of the posts they came from (only those: it is ordered
  after what it consumed, not after a post another wait took); a barrier joins the clocks of
  every arrival of its generation.

Memory is a map of disjoint segments, each holding its last write and the last read per stream;
a write replaces the segments it covers. Read-only argument memory (nothing can write it) is not
tracked. The executor calls the hooks below at each access and sync op; with the checker off
it calls nothing."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from legato.errors import LegatoRuntimeError
from legato.targets.bertha.arch.address_map import CORE_WINDOW_BASE, decode_address

# Checker events: (stream, clock, module index, site, is a transfer); the site is what the
# executor's `describe` words: a PC (the emulator) or an IR op (the interpreters). Tuples: the
# hot path.
_STREAM, _CLOCK, _MOD, _PC, _XFER = range(5)


@dataclass
class HazardAccess:
    """One of the two accesses of a hazard: who (module, program, pc, instruction), what
    (`reads`/`writes`, by a DMA or not) and the kernel's `source` line (file, line, col): from
    the IR op in the interpreters, from the binary's line table once the runtime read it. `pc`
    is None in the interpreters (the instruction is the IR op's text)."""

    module: str
    program: str
    pc: int | None
    instruction: str
    access: str  # "reads" / "writes"
    transfer: bool
    source: tuple | None = None

    def text(self) -> str:
        who = "the DMA issued by " if self.transfer else ""
        at = f" pc {self.pc}" if self.pc is not None else ""
        return f"{who}{self.module} (program {self.program!r}){at} `{self.instruction}`"


class HazardError(LegatoRuntimeError):
    """Two accesses of `what` (one a write) by different modules that no qwait, dmawait,
    semaphore or barrier orders: `first` (the earlier) and `second`, each a `HazardAccess`."""

    def __init__(self, cause: str, first: HazardAccess, second: HazardAccess, what: str):
        super().__init__(cause)
        self.cause, self.first, self.second, self.what = cause, first, second, what


class ReadBeforeTransferError(HazardError):
    """A read of a buffer not ordered after the DMA that fills it (read before it completed,
    or before it was even issued)."""


class WriteDuringTransferError(HazardError):
    """A write to a buffer that a DMA may still be reading (not ordered after its completion,
    or before its issue)."""


class SharedMemoryRaceError(HazardError):
    """Unsynchronised accesses of two modules to the same bytes of shared DRAM."""


def rows_of(addr: int, rows: int, row: int, stride: int) -> list[tuple[int, int]]:
    """The byte ranges a strided transfer (`dma2d`) touches at one end: one range when its
    rows are contiguous, else one per row (column slabs of one tensor interleave)."""
    if rows <= 1 or stride == row:
        return [(addr, addr + rows * row)]
    return [(addr + i * stride, addr + i * stride + row) for i in range(rows)]


def _ordered(ev: tuple, vc: dict, mod: int) -> bool:
    """Whether access `ev` happens before an access of module `mod` whose clock is `vc`."""
    return ev[_MOD] == mod or vc.get(ev[_STREAM], 0) >= ev[_CLOCK]


def _join(into: dict, other: dict) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


class HazardChecker:
    """Vector clocks and shadow memory of one run. `describe(module index, site)` -> (module
    name, program name, pc or None, instruction text, source (file, line, col) or None) words
    a report; `read_only(address, n)` says whether the bytes are read-only memory (not
    tracked); `region_name(address, n)` names the allocation."""

    def __init__(
        self,
        num_modules: int,
        describe: Callable[[int, object], tuple],
        read_only: Callable[[int, int], bool],
        region_name: Callable[[int, int], str] | None = None,
    ):
        self._vc: list[dict] = [{i: 1} for i in range(num_modules)]
        self._dma_n: list[dict] = [{} for _ in range(num_modules)]
        self._queues: dict[Hashable, deque] = {}
        self._sems: dict[Hashable, dict] = {}
        self._barriers: dict[Hashable, dict] = {}
        self._lo: list[int] = []  # segment starts, sorted
        self._seg: list[list] = []  # [lo, hi, last write event or None, {stream: last read}]
        self._describe, self._read_only, self._region_name = describe, read_only, region_name
        self.accesses = 0  # ranges checked (for the cost measurement in docs/isa.md)

    # ---- accesses ---------------------------------------------------------------------------
    def access(self, mod: int, pc, reads, writes, transfer: bool = False) -> None:
        """Module `mod`'s instruction at `pc` (a unit op, `ld`, `st`) reads and writes the
        byte ranges `reads`, `writes` ([lo, hi) pairs). `transfer`: the access is a copy that
        the levels below make with a DMA (the legato level's `memcpy`), ordered as the
        module's own access but, like a DMA, not in conflict with another transfer's write of
        the same bytes."""
        vc = self._vc[mod]
        self._touch_all(reads, writes, (mod, vc[mod], mod, pc, transfer), vc, mod)

    def dma(self, mod: int, pc, src, dst, notify: Hashable | None) -> None:
        """Module `mod` issues a DMA at `pc` reading the ranges `src` and writing `dst` (lists
        of [lo, hi); a strided transfer's rows), notifying queue `notify` (or None)."""
        stream = (mod, notify)
        counts = self._dma_n[mod]
        k = counts[stream] = counts.get(stream, 0) + 1
        vc = self._vc[mod]
        issue = dict(vc)
        vc[mod] += 1  # the issuer's later accesses are not known to whoever waits for this DMA
        if notify is not None:
            q = self._queues.get(notify)
            if q is None:
                q = self._queues[notify] = deque()
            q.append((stream, k, issue))
        self._touch_all(src, dst, (stream, k, mod, pc, True), issue, mod)

    def _touch_all(self, reads, writes, ev: tuple, vc: dict, mod: int) -> None:
        for lo, hi in reads:
            if hi > lo:
                self._touch(lo, hi, False, ev, vc, mod)
        for lo, hi in writes:
            if hi > lo:
                self._touch(lo, hi, True, ev, vc, mod)

    # ---- synchronisation --------------------------------------------------------------------
    def qwait(self, mod: int, key: Hashable) -> None:
        """Module `mod` consumed the oldest arrival on queue `key`."""
        stream, k, issue = self._queues[key].popleft()
        vc = self._vc[mod]
        _join(vc, issue)
        if vc.get(stream, 0) < k:
            vc[stream] = k

    def dmawait(self, mod: int) -> None:
        """Every DMA module `mod` issued has completed."""
        _join(self._vc[mod], self._dma_n[mod])

    def sem_post(self, mod: int, sid: Hashable, count: int) -> None:
        """Module `mod` added `count` to semaphore `sid`: units that carry its clock."""
        if count > 0:
            q = self._sems.get(sid)
            if q is None:
                q = self._sems[sid] = deque()
            q.append([count, dict(self._vc[mod])])
        self._vc[mod][mod] += 1

    def sem_wait(self, mod: int, sid: Hashable, count: int) -> None:
        """Module `mod` took `count` from semaphore `sid`: it is ordered after the posts whose
        units it took (the oldest first), not after every post (a unit another waiter took, or
        one posted later, orders nothing for this one)."""
        q = self._sems.get(sid)
        vc = self._vc[mod]
        while count > 0 and q:
            post = q[0]
            _join(vc, post[1])
            if post[0] > count:
                post[0] -= count
                return
            count -= post[0]
            q.popleft()

    def barrier_arrive(self, mod: int, token: Hashable) -> None:
        """Module `mod` arrives at barrier generation `token` ((id, generation))."""
        _join(self._barriers.setdefault(token, {}), self._vc[mod])
        self._vc[mod][mod] += 1

    def barrier_release(self, mod: int, token: Hashable) -> None:
        """Module `mod` leaves barrier generation `token`: every arrival happened before."""
        _join(self._vc[mod], self._barriers[token])

    # ---- shadow memory ----------------------------------------------------------------------
    def _split(self, pos: int) -> None:
        """Make `pos` a segment boundary (split the segment strictly containing it)."""
        i = bisect_right(self._lo, pos) - 1
        if i >= 0:
            s = self._seg[i]
            if s[0] < pos < s[1]:
                self._seg.insert(i + 1, [pos, s[1], s[2], dict(s[3])])
                self._lo.insert(i + 1, pos)
                s[1] = pos

    def _touch(self, lo: int, hi: int, write: bool, ev: tuple, vc: dict, mod: int) -> None:
        if lo < CORE_WINDOW_BASE and self._read_only(lo, hi - lo):
            return
        self.accesses += 1
        self._split(lo)
        self._split(hi)
        los, segs = self._lo, self._seg
        a = bisect_left(los, lo)  # no segment strictly contains lo any more
        b = a
        while b < len(segs) and segs[b][0] < hi:
            s = segs[b]
            w = s[2]
            # Two unordered transfers writing the same bytes are not reported: the bytes are
            # the last one's to land, and a kernel may rewrite bytes with the values they hold
            # (chip_attention's cat_rows_dynamic rewrites rows of the piece before a tail). A
            # read not ordered after both still is a hazard.
            if (
                w is not None
                and not _ordered(w, vc, mod)
                and not (write and w[_XFER] and ev[_XFER])
            ):
                self._report(w, True, ev, write, max(lo, s[0]), min(hi, s[1]))
            if write:
                for r in s[3].values():
                    if not _ordered(r, vc, mod):
                        self._report(r, False, ev, True, max(lo, s[0]), min(hi, s[1]))
            b += 1
        if write:
            segs[a:b] = [[lo, hi, ev, {}]]
            los[a:b] = [lo]
            return
        stream = ev[_STREAM]
        new, pos = [], lo
        for s in segs[a:b]:
            if s[0] > pos:
                new.append([pos, s[0], None, {stream: ev}])
            s[3][stream] = ev
            new.append(s)
            pos = s[1]
        if pos < hi:
            new.append([pos, hi, None, {stream: ev}])
        segs[a:b] = new
        los[a:b] = [s[0] for s in new]

    def _report(self, old: tuple, old_write: bool, new: tuple, new_write: bool, lo, hi):
        space, core, off = decode_address(lo)
        name = self._region_name(lo, hi - lo) if self._region_name is not None else None
        if core is not None:
            what = f"{space} of core {core} bytes [{off:#x}, {off + hi - lo:#x})"
        else:
            what = f"{space} at {lo:#x} ({hi - lo} bytes)"
        if name:
            what += f" ({name})"

        def acc(ev, write):
            module, program, pc, text, source = self._describe(ev[_MOD], ev[_PC])
            return HazardAccess(
                module, program, pc, text, "writes" if write else "reads", ev[_XFER], source
            )

        first, second = acc(old, old_write), acc(new, new_write)
        filled = (old[_XFER] and old_write and not new_write) or (
            new[_XFER] and new_write and not old_write
        )
        drained = (old[_XFER] and not old_write and new_write) or (
            new[_XFER] and not new_write and old_write
        )
        if core is None:
            cls, kind = SharedMemoryRaceError, "unsynchronised accesses to shared DRAM"
        elif filled:
            cls, kind = ReadBeforeTransferError, "a read not ordered after the DMA filling it"
        elif drained:
            cls, kind = WriteDuringTransferError, "a write while a DMA may still read it"
        else:
            cls, kind = HazardError, "two unordered writes"
        cause = (
            f"hazard ({kind}): {second.text()} {second.access} {what}, which "
            f"{first.text()} {first.access}, and no qwait, dmawait, semaphore or barrier "
            "orders the two"
        )
        raise cls(cause, first, second, what)
