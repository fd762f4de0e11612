"""DMA rules (docs/isa.md `dma`, `dma2d`; docs/architecture.md, *Machine model*).

* `dma2d` moves `rows` rows of `row` bytes, source and destination advancing by their own
  strides. Its two registers pack 32-bit halves: rshape = rows << 32 | row bytes, rstride =
  dst stride << 32 | src stride (`isa.dma2d_pack`). A stride smaller than the row would make rows
  overlap: a trap. Each end's *span* (first byte of the first row to one past the last byte of
  the last row) must lie in one allocation, and is what the scoreboard orders.
* A notify (imm32: bit 31 present, 21:20 core mode, 19:16 space code, 15:8 queue, 7:0 the static
  core; a register core is field d for `dma`, bits 7:0 for `dma2d`, whose d holds rstride)
  signals one arrival on a core's queue when the transfer completes.
* A core selector (mode, field) names the running core (`CORE_SELF`; top has none), a static
  index or a register's value, which must be a core of the model (`lsa`, notify).
* A DMA uses the destination core's port, else the source core's, else the issuer's engine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

from legato.targets.bertha.arch.errors import Trap
from legato.targets.bertha.isa import CORE_REG, CORE_SELF, CORE_STATIC, NOTIFY_PRESENT, dma2d_unpack


def dma2d_geometry(rshape: int, rstride: int) -> tuple[int, int, int, int, int, int]:
    """(rows, row bytes, dst stride, src stride, src span, dst span) of a dma2d's registers;
    `Trap` if a stride is smaller than the row (spans are 0 for an empty transfer)."""
    rows, row = dma2d_unpack(rshape)
    dstride, sstride = dma2d_unpack(rstride)
    n = rows * row
    sspan = (rows - 1) * sstride + row if n else 0
    dspan = (rows - 1) * dstride + row if n else 0
    if n and (sstride < row or dstride < row):
        raise Trap(
            f"dma2d strides (src {sstride}, dst {dstride}) smaller than the row of "
            f"{row} bytes: rows would overlap"
        )
    return rows, row, dstride, sstride, sspan, dspan


def notify_core_reg(fmt: str, imm: int, d: int) -> int | None:
    """The register naming the core a dma/dma2d notifies (CORE_REG mode), else None: field d
    for dma, immediate bits 7:0 for dma2d (whose d holds the strides)."""
    if fmt not in ("dma", "dma2d") or not imm & NOTIFY_PRESENT:
        return None
    if (imm >> 20) & 3 != CORE_REG:
        return None
    return d if fmt == "dma" else imm & 0xFF


def decode_notify(fmt: str, imm: int, d: int) -> tuple[int, int, int, int] | None:
    """(core mode, core field, space code, queue) of a dma/dma2d's notify, or None. The core
    field is the static index or the core register (per `notify_core_reg`)."""
    if not imm & NOTIFY_PRESENT:
        return None
    reg = notify_core_reg(fmt, imm, d)
    field = imm & 0xFF if reg is None else reg
    return (imm >> 20) & 3, field, (imm >> 16) & 0xF, (imm >> 8) & 0xFF


def select_core(mode: int, field: int, regs: Sequence[int], running: int | None, num_cores: int):
    """The core a selector names: the running one, `field` itself (static) or `regs[field]`;
    `Trap` on top without a core, or for an index outside the model."""
    if mode == CORE_SELF:
        if running is None:
            raise Trap("top has no core memory or queues of its own")
        return running
    k = field if mode == CORE_STATIC else regs[field]
    if not 0 <= k < num_cores:
        raise Trap(f"core index {k} out of range (the model has {num_cores} cores)")
    return k


def dma_port(issuer: int | None, src_core: int | None, dst_core: int | None) -> str:
    """The engine whose port a transfer uses: the destination core's, else the source core's
    (the core whose memory it touches), else the issuer's own (top or a core)."""
    if dst_core is not None:
        return f"core{dst_core}"
    if src_core is not None:
        return f"core{src_core}"
    return "top" if issuer is None else f"core{issuer}"


class ArrivalQueues:
    """The queues of every core: FIFO per key (core, space, queue) in *issue* order; the k-th
    wait on a queue is released by the k-th transfer that notified it. An entry is whatever the
    executor records of an arrival (the emulator: its completion time; the interpreters: who
    sent it, or the value sent)."""

    def __init__(self):
        self._fifo: dict[Hashable, deque] = {}

    def push(self, key: Hashable, entry) -> None:
        """A transfer notifying `key` was issued."""
        q = self._fifo.get(key)
        if q is None:
            q = self._fifo[key] = deque()
        q.append(entry)

    def fifo(self, key: Hashable) -> deque:
        """The entries of `key` not yet consumed, oldest first (a live view)."""
        q = self._fifo.get(key)
        if q is None:
            q = self._fifo[key] = deque()
        return q

    def head(self, key: Hashable):
        """The oldest entry of `key` not yet consumed, or None when there is none."""
        q = self._fifo.get(key)
        return q[0] if q else None

    def pop(self, key: Hashable):
        """Consume the oldest entry of `key` (a wait was released)."""
        return self._fifo[key].popleft()

    def pending(self) -> list[tuple[Hashable, deque]]:
        """(key, entries) of every queue holding unconsumed arrivals, by key."""
        return [(k, q) for k, q in sorted(self._fifo.items()) if q]
