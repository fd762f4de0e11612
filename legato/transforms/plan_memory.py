"""`core-plan-memory`: give every `core.alloc` its byte offset in its core's memory space.

Each buffer reserves its *bound* size (dynamic dims at their upper bound), aligned to
`ALIGN` bytes. Allocs in different programs that carry the same `buffer` name (the two ends of a
transfer) are one buffer and get one offset. Buffers of an `all_cores` program are placed at the
same offset on every core (SPMD code addresses them identically), before per-core buffers.
A space that overflows is a compile error giving the sizes; `sram` buffers that do not fit
spill to `private_dram` (recorded in the `placement` attribute, read by the backend).

Space is reused by liveness. Within a program, a buffer lives from its alloc to its last *touch*:
a use of it or of a view/subview of it (a `core.dma` touching it included: a DMA still in flight
when the space is reused is ordered by the scoreboard, like the other units). Positions are the
program's ops in order (nested ops within their loop's span). A touch inside an `scf.for` that
the buffer's alloc is outside of counts as the whole loop (the buffer lives across every
iteration). A buffer allocated in a loop body lives within one iteration (`Lives.iteration`):
SSA lets nothing outside the body name it, and every iteration reuses the same space. The
body's buffers are first placed apart from each other as if each lived across the whole loop
(`Lives.loop`), so that nothing iteration i + 1 writes waits for a read of iteration i still in
flight (a DMA out, an MPU pass): the loop pipelines across iterations as unrolled code would.
A body buffer that does not fit that way shares space with the body's buffers it is never live
with in an iteration; a loop then fits when one iteration's working set fits (at the price of
that ordering: a load into shared space waits for the previous iteration's last reader of it).
Buffers shared between programs (the `buffer` attribute, both ends of a transfer) and buffers a
program allocates on another core keep the whole kernel as lifetime, and buffers of different
programs never share space (programs run concurrently). Buffers whose lifetimes overlap are
placed apart; a buffer takes the lowest offset where it fits between the buffers it overlaps
(first fit). Reusing the space of a dead buffer is safe against the asynchronous units: the
hardware's scoreboard orders a module's own DMA/MPU/VPU operations on overlapping address
ranges (a write into reused space waits for an in-flight read of the old buffer), see
`legato/targets/bertha/emulator.py`. A buffer that fits nowhere is a compile error at its alloc
naming its size, what is planned live with it (the largest of those buffers with their source
lines) and the space's size.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import NoReturn

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from legato.dialects import core
from legato.dialects.core import BUFFER_ATTR
from legato.dialects.shared_attrs import integer_attr
from legato.errors import PerformanceWarning
from legato.model.compute_model import ComputeModel
from legato.model.ir import model_of
from legato.transforms.diagnostics import error_at, source_location
from legato.transforms.ir_walk import ops_of, walk

ALIGN = 64
PLACEMENT_ATTR = "placement"

# A lifetime: None for the whole kernel, else (program index, first, last position).
Life = tuple[int, int, int] | None


@dataclass(frozen=True)
class Lives:
    """A buffer's two lifetimes. `loop`: a touch inside a loop covers the whole loop, also for a
    buffer allocated in its body (no space shared with another buffer of that body: nothing
    one iteration writes waits for the previous iteration's reads). `iteration`: a buffer
    allocated in a loop body lives within one iteration (it shares space with the buffers of
    the same body it is never live with, in every iteration). `iteration` is within `loop`."""

    loop: Life
    iteration: Life


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _fmt(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit} ({n} bytes)"
    return f"{n} bytes"


def alloc_core(alloc: core.AllocOp, program: core.ProgramOp) -> int | None:
    """The core index an alloc lives on; None for an SPMD (all_cores) buffer (also another
    core's copy of one, `on core(%c)`: the same offset on every core)."""
    if alloc.core_reg is not None:
        if not program.ctx.is_all_cores:
            raise error_at(alloc, "core.alloc on a runtime core(%c) needs an all_cores program")
        return None
    if alloc.core is not None:
        return alloc.core.core_index
    if program.ctx.is_core:
        return program.ctx.core_index
    if program.ctx.is_all_cores:
        return None
    raise error_at(alloc, "core.alloc in the top program needs `on core(i)`")


def placed_space(alloc: core.AllocOp) -> str:
    """The space an alloc's buffer is in: its own, or where the planner moved it."""
    p = alloc.attributes.get(PLACEMENT_ATTR)
    return p.data if isinstance(p, StringAttr) else alloc.memory.data


def _whole_kernel(alloc: core.AllocOp, program: core.ProgramOp) -> bool:
    """Shared with or written by another program: no reuse."""
    if isinstance(alloc.attributes.get(BUFFER_ATTR), StringAttr):
        return True
    if alloc.core is None:
        return False
    return not (program.ctx.is_core and program.ctx.core_index == alloc.core.core_index)


def _overlap(a: Life, b: Life) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return True
    return a[1] <= b[2] and b[1] <= a[2]


def _lifetimes(program: core.ProgramOp, prog_id: int) -> dict[core.AllocOp, Lives]:
    """The lifetimes of every alloc of `program` (see the module docstring).

    Positions are the program's ops in pre-order; an op's *span* is its own position to its
    last nested op's. A buffer lives over the spans of the ops of one block that hold its
    alloc and touches: the program's own block for `Lives.loop` (a touch inside a loop covers
    the loop), its alloc's block for `Lives.iteration` (SSA: nothing outside a loop body can
    name a buffer allocated in it, so it lives within one iteration)."""
    pos: dict[Operation, int] = {}
    end: dict[Operation, int] = {}
    for op in walk(program):  # pre-order
        pos[op] = len(pos)
    for op in reversed(list(pos)):
        last = pos[op]
        for region in op.regions:
            for block in region.blocks:
                if block.last_op is not None:
                    last = max(last, end[block.last_op])
        end[op] = last
    top = program.body.block

    def holder(op: Operation, block: Block) -> Operation:
        """The op of `block` that is `op` or holds it."""
        while op.parent_block() is not block:
            parent = op.parent_op()
            assert parent is not None, "a buffer touched outside its alloc's block"
            op = parent
        return op

    roots: dict[SSAValue, set[core.AllocOp]] = {}
    spans: dict[core.AllocOp, tuple[list[int], list[int]]] = {}  # (loop, iteration)
    for op in walk(program):
        if isinstance(op, core.AllocOp):
            roots[op.result] = {op}
            h = holder(op, top)
            spans[op] = ([pos[h], end[h]], [pos[op], end[op]])
            continue
        touched: set[core.AllocOp] = set()
        for v in op._operands:  # noqa: SLF001 (the tuple `operands` views)
            touched |= roots.get(v, set())
        if not touched:
            continue
        for r in op.results:
            if isinstance(r.type, core.BufType):
                roots[r] = set(touched)  # a view of the same memory
        for a in touched:
            block = a.parent_block()
            assert block is not None
            for span, h in zip(spans[a], (holder(op, top), holder(op, block))):
                span[0] = min(span[0], pos[h])
                span[1] = max(span[1], end[h])
    lives = {}
    for a, (lp, it) in spans.items():
        whole = _whole_kernel(a, program)
        lives[a] = Lives(None if whole else (prog_id, *lp), None if whole else (prog_id, *it))
    return lives


@dataclass
class _Placed:
    offset: int
    size: int
    lives: Lives
    alloc: core.AllocOp


@dataclass
class _Space:
    limit: int
    base: int = 0
    placed: list[_Placed] = field(default_factory=list)

    @property
    def used(self) -> int:
        return max([self.base] + [p.offset + p.size for p in self.placed])

    def live_with(self, lives: Lives) -> list[_Placed]:
        """The placed buffers live at the same time as one of `lives`, within an iteration."""
        return [p for p in self.placed if _overlap(p.lives.iteration, lives.iteration)]

    def take(self, size: int, lives: Lives, alloc: core.AllocOp) -> int | None:
        """First fit: the lowest offset where `size` bytes overlap no buffer live with `lives`,
        a loop body's buffers apart where that fits (`Lives.loop`), else sharing space within
        an iteration (`Lives.iteration`)."""
        for kind in ("loop", "iteration"):
            life = getattr(lives, kind)
            off = self.base
            live = (p for p in self.placed if _overlap(getattr(p.lives, kind), life))
            for p in sorted(live, key=lambda p: p.offset):
                if p.offset >= off + size:
                    break
                off = max(off, p.offset + p.size)
            if off + size <= self.limit:
                self.placed.append(_Placed(off, _align(size), lives, alloc))
                return off
            if lives.loop == lives.iteration:
                break
        return None


def _where(alloc: core.AllocOp) -> str:
    """Where a buffer comes from: its Python file:line, else its IR name."""
    loc = source_location(alloc)
    if loc is not None:
        return f"{os.path.basename(loc.file)}:{loc.line}"
    return f"%{alloc.result.name_hint}" if alloc.result.name_hint else "an unnamed alloc"


def _live_list(live: list[_Placed], most: int = 4) -> str:
    """The largest buffers of `live`, grouped by (type, source line)."""
    groups: dict[tuple[str, str], list[int]] = {}
    for p in live:
        t = p.alloc.result.type
        assert isinstance(t, core.BufType)
        key = (f"{t.dims_str()} {t.dtype.name}", _where(p.alloc))
        groups.setdefault(key, []).append(p.size)
    items = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    text = ", ".join(
        f"{_fmt(sum(sz))} in {len(sz)} x {ty} at {at}" if len(sz) > 1 else f"{ty} at {at}"
        for (ty, at), sz in items[:most]
    )
    if len(items) > most:
        text += f" and {sum(len(sz) for _, sz in items[most:])} more"
    return text


class _Planner:
    def __init__(self, model: ComputeModel):
        self.model = model
        # (core or None for SPMD, space) -> _Space
        self.spaces: dict[tuple[int | None, str], _Space] = {}
        self.named: dict[tuple[int | None, str], tuple[str, int]] = {}

    def space(self, core_i: int | None, name: str) -> _Space:
        key = (core_i, name)
        if key not in self.spaces:
            base = 0
            if core_i is not None and (None, name) in self.spaces:
                base = self.spaces[(None, name)].used  # after the SPMD buffers
            self.spaces[key] = _Space(self.model.memory_size(name), base)
        return self.spaces[key]

    def place(self, alloc: core.AllocOp, core_i: int | None, lives: Lives) -> None:
        t = alloc.result.type
        assert isinstance(t, core.BufType)
        size = t.max_bytes
        name_attr = alloc.attributes.get(BUFFER_ATTR)
        key = (core_i, name_attr.data) if isinstance(name_attr, StringAttr) else None
        spmd_key = (None, name_attr.data) if isinstance(name_attr, StringAttr) else None
        if key is not None and (key in self.named or spmd_key in self.named):
            # the other end of a transfer (an SPMD receive: the same offset on every core)
            space, offset = self.named[key] if key in self.named else self.named[spmd_key]
        else:
            space = t.space
            offset = self.space(core_i, space).take(size, lives, alloc)
            if offset is None and space == "sram":
                space = "private_dram"
                offset = self.space(core_i, space).take(size, lives, alloc)
                if offset is not None:
                    self._warn_spill(alloc, core_i, lives)
            if offset is None:
                self._refuse(alloc, core_i, lives)
            if key is not None:
                self.named[key] = (space, offset)
        alloc.offset = integer_attr(offset, i64)
        if space != t.space:
            alloc.attributes[PLACEMENT_ATTR] = StringAttr(space)

    def _warn_spill(self, alloc: core.AllocOp, core_i: int | None, lives: Lives) -> None:
        """A PerformanceWarning at the buffer's source line: it did not fit sram and went to
        private DRAM, each of its accesses a DRAM transfer; with the sizes and what is live."""
        t = alloc.result.type
        assert isinstance(t, core.BufType)
        sram = self.space(core_i, "sram")
        live = sram.live_with(lives)
        used = sram.base + sum(p.size for p in live)
        where = f"core({core_i})" if core_i is not None else "every core"
        message = (
            f"this {t.dims_str()} {t.dtype.name} buffer ({_fmt(t.max_bytes)}) does not fit "
            f"the sram of {where} ({_fmt(self.model.sram_size)} on {self.model.name}, "
            f"{_fmt(used)} planned live with it) and is spilled to private DRAM: its accesses "
            "pay DRAM latency; split the work into smaller tiles or over more cores"
        )
        if live:
            message += f" (live with it: {_live_list(live)})"
        loc = source_location(alloc)
        if loc is None:
            warnings.warn(f"{_where(alloc)}: {message}", PerformanceWarning, stacklevel=2)
        else:
            warnings.warn_explicit(message, PerformanceWarning, loc.file, loc.line)

    def _refuse(self, alloc: core.AllocOp, core_i: int | None, lives: Lives) -> NoReturn:
        t = alloc.result.type
        assert isinstance(t, core.BufType)
        # sram's buffers are in sram or spilled to private DRAM
        spaces = [self.space(core_i, t.space)]
        if t.space == "sram":
            spaces.append(self.space(core_i, "private_dram"))
        live = [p for sp in spaces for p in sp.live_with(lives)]
        used = sum(sp.base for sp in spaces) + sum(p.size for p in live)
        where = f"core({core_i})" if core_i is not None else "every core"
        in_loop = lives.loop != lives.iteration
        message = (
            f"out of {t.space} on {where}: this {t.dims_str()} {t.dtype.name} buffer needs "
            f"{_fmt(t.max_bytes)}, {_fmt(used)} are already planned"
            + (" live with it in one iteration of its loop" if in_loop else "")
            + f" and the {self.model.name} {t.space} holds "
            f"{_fmt(self.model.memory_size(t.space))}"
            + (
                f" (plus {_fmt(self.model.private_dram_size)} of private DRAM)"
                if t.space == "sram"
                else ""
            )
        )
        if live:
            message += f"; live with it: {_live_list(live)}"
        raise error_at(alloc, message, note="split the work into smaller tiles or over more cores")


@dataclass(frozen=True)
class CorePlanMemoryPass(ModulePass):
    """Assign offsets to every `core.alloc` of every `core.kernel`."""

    name = "core-plan-memory"

    target: str = "bertha"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        model = model_of(op, self.target)
        for kernel in ops_of(op, core.KernelOp):
            planner = _Planner(model)
            programs = [p for p in kernel.body.block.ops if isinstance(p, core.ProgramOp)]
            lives = [_lifetimes(p, i) for i, p in enumerate(programs)]
            order = list(zip(programs, lives))
            # SPMD buffers first: they take the same offset on every core. Within each group,
            # whole-kernel buffers first (they stay put), then the reusable ones in program order.
            for spmd in (True, False):
                group = [(p, lv) for p, lv in order if p.ctx.is_all_cores == spmd]
                for whole in (True, False):
                    for program, lv in group:
                        for alloc in walk(program):
                            if (
                                isinstance(alloc, core.AllocOp)
                                and (lv[alloc].loop is None) == whole
                            ):
                                planner.place(alloc, alloc_core(alloc, program), lv[alloc])
