"""`backend-allocate-registers`: linear-scan register allocation of each backend program.

Programs are straight-line blocks whose branches target labels. A value's live range runs from
its definition to its last use; a use that precedes a label it was defined before and that a
later backward branch jumps to (a loop) keeps the value live to that branch. Registers that are
already allocated (entry registers, loop-carried values the lowering pinned) are fixed and never
handed out while live. Running out of registers is a compile error naming the program.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from legato.dialects import backend as be
from legato.transforms.diagnostics import error_at


def _live_ranges(ops: list) -> dict[SSAValue, tuple[int, int]]:
    labels = {op.label.data: i for i, op in enumerate(ops) if isinstance(op, be.LabelOp)}
    # backward branches: (label position, branch position)
    loops = []
    for i, op in enumerate(ops):
        target = getattr(op, "target", None)
        if target is not None and hasattr(target, "data") and target.data in labels:
            if labels[target.data] <= i:
                loops.append((labels[target.data], i))
    ranges: dict[SSAValue, tuple[int, int]] = {}
    for i, op in enumerate(ops):
        for r in op.results:
            ranges[r] = (i, i)
    for i, op in enumerate(ops):
        for v in op.operands:
            if v not in ranges:
                continue
            start, end = ranges[v]
            end = max(end, i)
            # a value defined before a loop and used inside it lives to the loop's end
            for head, tail in loops:
                if start < head <= i <= tail:
                    end = max(end, tail)
            ranges[v] = (start, end)
    return ranges


@dataclass(frozen=True)
class BackendAllocateRegistersPass(ModulePass):
    name = "backend-allocate-registers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in op.walk():
            if isinstance(program, be.ProgramOp):
                self._allocate(program)

    def _allocate(self, program: be.ProgramOp) -> None:
        ops = list(program.body.block.ops)
        ranges = _live_ranges(ops)
        fixed_busy: dict[int, list[tuple[int, int]]] = {}
        for v, (s, e) in ranges.items():
            t = v.type
            if isinstance(t, be.RegType) and t.is_allocated:
                fixed_busy.setdefault(t.index.data, []).append((s, e))
        pool = [r for r in be.RegType.allocatable_registers()]
        active: list[tuple[int, SSAValue, be.RegType]] = []  # (end, value, reg)
        free = list(pool)
        for i, op in enumerate(ops):
            # expire
            still = []
            for end, v, r in active:
                if end < i:
                    free.append(r)
                else:
                    still.append((end, v, r))
            active = still
            for res in list(op.results):
                t = res.type
                if not isinstance(t, be.RegType) or t.is_allocated:
                    continue
                s, e = ranges[res]
                choice = None
                for r in sorted(free, key=lambda r: r.index.data):
                    busy = fixed_busy.get(r.index.data, [])
                    if all(e2 < s or s2 > e for s2, e2 in busy):
                        choice = r
                        break
                if choice is None:
                    raise error_at(
                        op,
                        f"program @{program.sym_name.data} needs more than {len(pool)} live "
                        "registers here (no spilling yet): split the kernel",
                    )
                free.remove(choice)
                Rewriter.replace_value_with_new_type(res, choice)
                active.append((e, res, choice))
