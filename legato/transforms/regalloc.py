"""`backend-allocate-registers`: linear-scan register allocation of each backend program, with
rematerialization and spilling.

Programs are straight-line blocks whose branches target labels. Positions are counted in half
steps: op i reads its operands at 2i and writes its results at 2i+1, so a result may take the
register of an operand whose last use is that op. A value's live range runs from its definition
to its last use; a use that precedes a label it was defined before and that a later backward
branch jumps to (a loop) keeps the value live to that branch. Registers that are already
allocated (entry registers, loop-carried values the lowering pinned) are fixed and never handed
out while live.

When more values are live than there are registers (r3..r31, minus the pinned ones), values that
live across the point without being used there are split, cheapest first:
1. rematerialization: an `li`, or an `lsa` of a static space, is re-emitted right before each of
   its uses instead of holding a register (one issue cycle per use, no memory);
2. spilling (core and all-cores programs): the value is stored (`st`) to an 8-byte slot of a
   per-program spill area after its definition and reloaded (`ld`) before each use; the area
   lies in the core's sram right above the program's planned footprint (or in its private DRAM
   when the sram is full) and is added to the program's `mem`, so it is part of its declared
   footprint and never overlaps a planned buffer.
   Values loaded from the Instruction Table (an argument's address or dims: `ld` from r1) are
   spilled so at most once: a spill's store waits for its load's DRAM latency, which the first
   one spends while the program waits for its other loads anyway, but each further one adds
   (a program with 65 arguments spent 26.9k cycles so before its first transfer). The second
   time a table value must be split, the program instead copies the table into its spill area
   with one DMA at its start (`dma` + `dmawait`: one DRAM latency for the whole table), every
   table load reads the copy (1 cycle from sram), and a split table value is re-loaded from
   the copy before each use (`lsa` + `ld`, no store);
3. the top program has no memory of its own: there, values loaded from the Instruction Table
   (`ld` from the entry register r1) are re-loaded instead (DRAM latency), and a value computed
   from others cannot be kept: running out is a compile error. (Top spilling into a core's or
   shared scratch memory would need that memory reserved for it by the planner and the
   runtime; top programs only issue transfers, so they stay far below 29 live values.)
Among candidates of one kind the value whose next use is farthest is split first (Belady).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import DictionaryAttr, IntAttr, IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from legato.dialects import backend as be
from legato.dialects.fast_build import clone_flat
from legato.model.compute_model import ComputeModel
from legato.model.ir import model_of
from legato.transforms.diagnostics import error_at, inherit_location
from legato.transforms.ir_walk import block_ops, ops_of

SPILL_SLOT = 8
SPILL_ALIGN = 64
_REMAT, _RELOAD, _SPILL = 0, 1, 2
_FEW = 8  # splits after which the next round tries the scan before the pressure sweep


def _loops(ops: list) -> list[tuple[int, int]]:
    """Backward branches: (label position, branch position)."""
    labels = {op.label.data: i for i, op in enumerate(ops) if isinstance(op, be.LabelOp)}
    if not labels:
        return []  # a branch without a label to go back to (and reading each op's `target`)
    loops = []
    for i, op in enumerate(ops):
        target = getattr(op, "target", None)
        if (
            target is not None
            and hasattr(target, "data")
            and target.data in labels
            and labels[target.data] <= i
        ):
            loops.append((labels[target.data], i))
    return loops


def _liveness(ops: list) -> tuple[dict[SSAValue, tuple[int, int]], dict[SSAValue, list[int]]]:
    """(ranges, uses) of the values `ops` define and read, in one pass over their operands
    (an xDSL operand list costs more to read than what is done with it):
    - ranges: half-step ranges [def output, last use input] (see the module docstring) of the
      values `ops` define, in their program order (which breaks the allocator's ties);
    - uses: each value's distinct use points (half steps), ascending."""
    loops = _loops(ops)
    ranges: dict[SSAValue, tuple[int, int]] = {}
    uses: dict[SSAValue, list[int]] = {}
    for i, op in enumerate(ops):
        x = 2 * i
        for v in op._operands:  # noqa: SLF001 (the tuple `op.operands` wraps in a view)
            us = uses.get(v)
            if us is None:
                uses[v] = [x]
            elif us[-1] != x:  # ops come in order: a repeat is an operand used twice here
                us.append(x)
            r = ranges.get(v)
            if r is None:
                continue
            start, end = r
            end = max(end, x)
            # a value defined before a loop and used inside it lives to the loop's end
            if loops:
                for head, tail in loops:
                    if start // 2 < head <= i <= tail:
                        end = max(end, 2 * tail)
            ranges[v] = (start, end)
        for res in op.results:
            ranges[res] = (x + 1, x + 1)
    return ranges, uses


def _pinned(t) -> bool:
    """Whether `t` is an allocated register type (`RegType.is_allocated`, without the ABC
    instance checks that made this test ~10% of the allocation)."""
    return type(t) is be.RegType and type(t.index) is IntAttr


def _retype(v: SSAValue, r: be.RegType) -> None:
    """What `Rewriter.replace_value_with_new_type(v, r)` makes of `v` (a value of the same
    position and name hint, every use reading it), in place: a new value and moving every use
    to it were ~15% of the allocation. Relies on xDSL's `SSAValue._type` (pinned version)."""
    v._type = r  # noqa: SLF001


def _read_from(v: SSAValue, new_of: dict[Operation, SSAValue]) -> None:
    """Each use of `v` by an op of `new_of` reads that op's value instead, in one pass over
    `v`'s uses: what `v.replace_uses_with_if(new, <use by op>)` per op does (the same use
    lists, in the same order, and the name hint carried over), which walked all of `v`'s uses
    once per op."""
    for use in tuple(v.uses):
        new = new_of.get(use.operation)
        if new is not None:
            use.operation.operands[use.index] = new
    for new in new_of.values():
        if new.name_hint is None:
            new.name_hint = v.name_hint


def _is_table_load(op: Operation) -> bool:
    if not isinstance(op, be.LdOp):
        return False
    base = op.base.owner
    return isinstance(base, be.EntryRegOp) and base.reg.data == "r1"


class _OutOfRegisters(Exception):
    def __init__(self, point: int):
        self.point = point


@dataclass
class _Spiller:
    program: be.ProgramOp
    model: ComputeModel
    space: str | None = None
    base: int = 0
    used: int = 0  # bytes of the area handed out (slots and the table copy)
    stored: dict = field(default_factory=dict)  # spilled value -> (space, offset)
    table: tuple[str, int] | None = None  # where the Instruction Table copy lies, once made
    table_spills: int = 0  # table values spilled before the copy was made

    def reserve(self, nbytes: int) -> tuple[str, int]:
        """`nbytes` (a multiple of 8) of the program's spill area: (space, offset)."""
        if self.space is None:
            mem = self.program.memory
            base = -(-mem.get("sram", 0) // SPILL_ALIGN) * SPILL_ALIGN
            if base + max(4096, nbytes) <= self.model.sram_size:
                self.space = "sram"
            else:
                self.space = "private_dram"
                base = -(-mem.get("private_dram", 0) // SPILL_ALIGN) * SPILL_ALIGN
            self.base = base
        off = self.base + self.used
        self.used += nbytes
        return self.space, off

    def slot(self) -> tuple[str, int]:
        return self.reserve(SPILL_SLOT)

    def is_copy_load(self, op: Operation) -> bool:
        """Whether `op` is an `ld` from the table copy (`copy_table`)."""
        if self.table is None or not isinstance(op, be.LdOp):
            return False
        a = op.base.owner
        return (
            isinstance(a, be.LsaOp)
            and a.core_reg is None
            and a.core is None
            and (a.space.data, a.offset.data) == self.table
        )

    def copy_table(self) -> None:
        """Copy the Instruction Table (the words the program loads) into the spill area with one
        DMA at the program's start, and make every table load read the copy (module
        docstring)."""
        block = self.program.body.block
        loads = [op for op in block.ops if _is_table_load(op)]
        size = max(op.offset.data for op in loads) + SPILL_SLOT
        space, off = self.reserve(-(-size // SPILL_SLOT) * SPILL_SLOT)
        self.table = (space, off)
        first = block.first_op
        assert first is not None
        entry = be.EntryRegOp("r1")
        copy = be.LsaOp(space, off)
        n = be.LiOp(size)
        prologue = [entry, copy, n, be.DmaOp(copy, entry, n), be.DmaWaitOp()]
        block.insert_ops_before([inherit_location(o, first) for o in prologue], first)
        for ld in loads:
            old = ld.base
            ld.operands = (copy.results[0],)
            if not old.uses:
                Rewriter.erase_op(old.owner)

    def finish(self) -> None:
        if self.space is None:
            return
        end = self.base + self.used
        if end > self.model.memory_size(self.space):
            raise error_at(
                self.program,
                f"program @{self.program.sym_name.data}: its {self.used} bytes of register "
                f"spill area do not fit its core's {self.space}",
            )
        mem = self.program.memory
        mem[self.space] = max(mem.get(self.space, 0), end)
        self.program.mem = DictionaryAttr({k: IntegerAttr(v, i64) for k, v in mem.items()})


@dataclass(frozen=True)
class BackendAllocateRegistersPass(ModulePass):
    name = "backend-allocate-registers"

    target: str = "bertha"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        model = model_of(op, self.target)
        for program in ops_of(op, be.ProgramOp):
            self._allocate(program, model)

    # -- splitting ---------------------------------------------------------------------------

    def _kind(self, v: SSAValue, program: be.ProgramOp, spiller: _Spiller) -> int | None:
        op = v.owner
        if isinstance(op, be.LiOp) or (isinstance(op, be.LsaOp) and op.core_reg is None):
            return _REMAT
        if isinstance(op, Operation) and spiller.is_copy_load(op):
            return _RELOAD
        if isinstance(op, Operation) and _is_table_load(op):
            # in a core program, a first spilled table value costs next to nothing (its store
            # waits for its load while the program waits for its other loads); a second one
            # waits another DRAM latency: from then on the table is copied (`copy_table`)
            return _RELOAD if program.ctx.is_top or spiller.table_spills else _SPILL
        if program.ctx.is_top:
            return None
        return _SPILL

    def _candidates(
        self, x: int, live, ranges, uses, program, spiller, taken: set, kinds=None
    ) -> list[tuple[tuple[int, int], SSAValue]]:
        """Values live at half step `x` whose split lowers the pressure at `x`, best first.
        `kinds`: the `_kind` of each value seen so far in this sweep (it changes only when a
        split is made)."""
        out = []
        for v in live:
            if v in taken or _pinned(v.type):
                continue
            if kinds is None:
                kind = self._kind(v, program, spiller)
            elif v in kinds:
                kind = kinds[v]
            else:
                kind = kinds[v] = self._kind(v, program, spiller)
            if kind is None:
                continue
            s, e = ranges[v]
            us = uses[v]
            k = bisect_left(us, x)
            nxt = us[k] if k < len(us) else e + 2  # only live around a loop: next use wraps
            # a reload that is an `lsa` + `ld` (a spill's, or one from the table copy) needs two
            # steps before the use
            margin = 2 if kind == _REMAT or program.ctx.is_top else 4
            if nxt - x < margin or (kind == _SPILL and x - s < 4):
                continue
            out.append(((kind, -(nxt - x)), v))
        out.sort(key=lambda c: c[0])
        return out

    def _split(self, victims, ops, program: be.ProgramOp, spiller: _Spiller) -> None:
        """Split each (value, half step) pair: its uses from that point on (from the head of a
        loop around the point that the value enters from outside, since those uses run again
        after it) read a rematerialized copy or a reload instead of the value."""
        block = program.body.block
        index = {op: i for i, op in enumerate(ops)}
        loops = _loops(ops)
        for v, x in victims:
            d = v.owner
            assert isinstance(d, Operation)
            lo = x // 2
            for head, tail in loops:
                if index[d] < head <= lo <= tail:
                    lo = min(lo, head)
            users: dict[Operation, SSAValue | None] = {}  # in the order of v's uses
            for u in v.uses:
                if u.operation not in users and index[u.operation] >= lo:
                    users[u.operation] = None
            kind = self._kind(v, program, spiller)
            if kind == _RELOAD and not program.ctx.is_top:  # from the table copy
                if spiller.table is None:
                    spiller.copy_table()
                for u in users:
                    la = be.LsaOp(*spiller.table)
                    c = clone_flat(d)
                    c.operands = (la.results[0],)
                    block.insert_ops_before([inherit_location(la, u), c], u)
                    users[u] = c.results[0]
                _read_from(v, users)
                if not v.uses:
                    base = d.operands[0]
                    Rewriter.erase_op(d)
                    if not base.uses:
                        Rewriter.erase_op(base.owner)
            elif kind in (_REMAT, _RELOAD):
                for u in users:
                    c = clone_flat(d)
                    block.insert_op_before(c, u)
                    users[u] = c.results[0]
                _read_from(v, users)
                if not v.uses:
                    Rewriter.erase_op(d)
            else:
                if v not in spiller.stored:
                    spiller.table_spills += _is_table_load(d)
                    space, off = spiller.slot()
                    spiller.stored[v] = (space, off)
                    a = be.LsaOp(space, off)
                    spill = [a, be.StOp(v, a.results[0], 0)]
                    block.insert_ops_after([inherit_location(o, d) for o in spill], d)
                space, off = spiller.stored[v]
                for u in users:
                    ra = be.LsaOp(space, off)
                    ld = be.LdOp(ra.results[0], 0)
                    block.insert_ops_before([inherit_location(o, u) for o in (ra, ld)], u)
                    users[u] = ld.results[0]
                _read_from(v, users)

    def _pressure_victims(self, ranges, uses, fixed, npool, program, spiller) -> list:
        """Sweep the starts of the ranges; where more values are live than registers are free,
        choose values to split (all of one sweep at once)."""
        for v in ranges:
            uses.setdefault(v, [])
        # ties (results of one op, block arguments) break by the ranges' program order, never by
        # id(): memory addresses differ between runs and the binary must not
        order = sorted(
            (s, e, n, v) for n, (v, (s, e)) in enumerate(ranges.items()) if not _pinned(v.type)
        )
        heap: list[tuple[int, int, SSAValue]] = []
        live: dict[SSAValue, None] = {}
        taken: set[SSAValue] = set()
        kinds: dict[SSAValue, int | None] = {}
        victims: list[SSAValue] = []
        for s, e, n, v in order:
            while heap and heap[0][0] < s:
                _, _, w = heapq.heappop(heap)
                live.pop(w, None)
            heapq.heappush(heap, (e, n, v))
            live[v] = None
            excess = len(live) + fixed(s) - npool
            if excess <= 0:
                continue
            cands = self._candidates(s, live, ranges, uses, program, spiller, taken, kinds)
            if len(cands) < excess:
                raise _OutOfRegisters(s)
            for _, w in cands[:excess]:
                victims.append((w, s))
                taken.add(w)
                live.pop(w)
        return victims

    # -- allocation --------------------------------------------------------------------------

    def _allocate(self, program: be.ProgramOp, model: ComputeModel) -> None:
        spiller = _Spiller(program, model)
        pool = list(be.RegType.allocatable_registers())
        few_split = False  # the last round split only a few values
        for _ in range(10000):
            ops = block_ops(program.body.block)
            ranges, uses = _liveness(ops)
            fixed_busy: dict[int, list[tuple[int, int]]] = {}
            all_regs = True  # every value the sweep counts is one the scan allocates
            for v, (s, e) in ranges.items():
                t = v.type
                if _pinned(t):
                    fixed_busy.setdefault(t.index.data, []).append((s, e))
                elif type(t) is not be.RegType:
                    all_regs = False
            pool_ids = {r.index.data for r in pool}
            fixed_list = sorted(
                (s, e) for r, iv in fixed_busy.items() if r in pool_ids for s, e in iv
            )

            def fixed(x: int, fixed_busy=fixed_busy, pool_ids=pool_ids, any_fixed=bool(fixed_list)):
                return (
                    sum(
                        1
                        for r, iv in fixed_busy.items()
                        if r in pool_ids and any(s <= x <= e for s, e in iv)
                    )
                    if any_fixed
                    else 0
                )

            # A scan that fits shows the pressure sweep would split nothing: each value live at
            # a start holds a register of its own that no pinned value live there holds, so no
            # start has more live values than free registers. After a round that split a few
            # values, the scan is tried first (the same registers, one sweep fewer); when it
            # does not fit, the round goes on as if it had not been tried.
            if few_split and all_regs:
                try:
                    self._scan(ops, ranges, fixed_busy, pool)
                except _OutOfRegisters:
                    pass
                else:
                    spiller.finish()
                    return
            try:
                victims = self._pressure_victims(ranges, uses, fixed, len(pool), program, spiller)
                if victims:
                    self._split(victims, ops, program, spiller)
                    few_split = len(victims) <= _FEW
                    continue
                self._scan(ops, ranges, fixed_busy, pool)
            except _OutOfRegisters as exc:
                victim = self._fallback_victim(exc.point, ops, ranges, program, spiller)
                if victim is None:
                    op = ops[min(exc.point // 2, len(ops) - 1)]
                    where = (
                        "the top program has no memory to spill to"
                        if program.ctx.is_top
                        else "nothing left to spill"
                    )
                    raise error_at(
                        op,
                        f"program @{program.sym_name.data} needs more than {len(pool)} live "
                        f"registers here ({where}): split the kernel",
                    ) from None
                self._split([(victim, exc.point)], ops, program, spiller)
                few_split = True
                continue
            spiller.finish()
            return
        raise AssertionError("register allocation did not converge")  # pragma: no cover

    def _fallback_victim(self, x, ops, ranges, program, spiller) -> SSAValue | None:
        uses: dict[SSAValue, list[int]] = {}
        for i, op in enumerate(ops):
            for v in op.operands:
                uses.setdefault(v, []).append(2 * i)
        live = [v for v, (s, e) in ranges.items() if s <= x <= e]
        for v in live:
            uses.setdefault(v, [])
            uses[v] = sorted(set(uses[v]))
        cands = self._candidates(x, live, ranges, uses, program, spiller, set())
        return cands[0][1] if cands else None

    def _scan(self, ops, ranges, fixed_busy, pool) -> None:
        """Linear scan over the ranges sorted by start; raises _OutOfRegisters at the failing
        start when no register is free (the caller splits a value there and retries)."""
        todo = sorted(
            (
                (s, e, n, v)  # n: program order, a deterministic tie-break (not id())
                for n, (v, (s, e)) in enumerate(ranges.items())
                if type(v.type) is be.RegType and not _pinned(v.type)
            ),
        )
        # the free registers by index, kept ascending (the lowest free one that no pinned value
        # holds over the range is chosen): sorting them again per value was ~a third of the
        # allocation on the GEMM
        reg_of = {r.index.data: r for r in pool}
        busy_of = {i: fixed_busy.get(i, ()) for i in reg_of}
        active: list[tuple[int, int, int]] = []  # (end, order, register index)
        free = sorted(reg_of)
        choice_of: list[tuple[SSAValue, be.RegType]] = []
        for s, e, n, v in todo:
            while active and active[0][0] < s:
                insort(free, heapq.heappop(active)[2])
            for i in free:
                busy = busy_of[i]
                if not busy or all(e2 < s or s2 > e for s2, e2 in busy):
                    break
            else:
                raise _OutOfRegisters(s)
            free.remove(i)
            heapq.heappush(active, (e, n, i))
            choice_of.append((v, reg_of[i]))
        for v, r in choice_of:
            _retype(v, r)
