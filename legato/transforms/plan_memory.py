"""`core-plan-memory`: give every `core.alloc` its byte offset in its core's memory space.

Each buffer reserves its *bound* size (dynamic dims at their upper bound), aligned to
`ALIGN` bytes. Allocs in different programs that carry the same `buffer` name (the two ends of a
transfer) are one buffer and get one offset. Buffers of an `all_cores` program are placed at the
same offset on every core (SPMD code addresses them identically), before per-core buffers.
A space that overflows is a compile error giving the sizes; `sram` buffers that do not fit
spill to `private_dram` (recorded in the `placement` attribute, read by the backend).

Space is reused by liveness. Within a program, a buffer lives from its alloc to its last *touch*:
a use of it or of a view/subview of it (a `core.dma` touching it included: a DMA still in flight
when the space is reused is ordered by the scoreboard, like the other units). Positions are counted on the
program's top-level ops: a touch inside an `scf.for` counts as the whole loop, so a buffer touched
inside a loop lives across every iteration. Buffers shared between programs (the `buffer`
attribute, both ends of a transfer) and buffers a program allocates on another core keep the
whole kernel as lifetime, and buffers of different programs never share space (programs run
concurrently). Buffers whose lifetimes overlap are placed apart; a buffer takes the lowest
offset where it fits between the buffers it overlaps (first fit). Reusing the space of a dead
buffer is safe against the asynchronous units: the hardware's scoreboard orders a module's own
DMA/MPU/VPU operations on overlapping address ranges (a write into reused space waits for an
in-flight read of the old buffer), see `legato/targets/bertha/emulator.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from legato.dialects import core
from legato.dialects.core import BUFFER_ATTR
from legato.model.compute_model import ComputeModel
from legato.model.ir import model_of
from legato.transforms.diagnostics import error_at

ALIGN = 64
PLACEMENT_ATTR = "placement"

# A lifetime: None for the whole kernel, else (program index, first, last position).
Life = tuple[int, int, int] | None


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


def _lifetimes(program: core.ProgramOp, prog_id: int) -> dict[core.AllocOp, Life]:
    """The lifetime of every alloc of `program` (see the module docstring)."""
    top_ops = list(program.body.block.ops)
    top_pos = {op: i for i, op in enumerate(top_ops)}

    def top_of(op: Operation) -> int:
        while op not in top_pos:
            parent = op.parent_op()
            assert parent is not None
            op = parent
        return top_pos[op]

    roots: dict[SSAValue, set[core.AllocOp]] = {}
    lives: dict[core.AllocOp, list[int]] = {}
    for op in program.walk():
        if isinstance(op, core.AllocOp):
            roots[op.result] = {op}
            p = top_of(op)
            lives[op] = [p, p]
            continue
        touched: set[core.AllocOp] = set()
        for v in op.operands:
            touched |= roots.get(v, set())
        if not touched:
            continue
        for r in op.results:
            if isinstance(r.type, core.BufType):
                roots[r] = set(touched)  # a view of the same memory
        p = top_of(op)
        for a in touched:
            lives[a][0] = min(lives[a][0], p)
            lives[a][1] = max(lives[a][1], p)
    return {
        a: None if _whole_kernel(a, program) else (prog_id, s, e) for a, (s, e) in lives.items()
    }


@dataclass
class _Space:
    limit: int
    base: int = 0
    placed: list[tuple[int, int, Life]] = field(default_factory=list)  # (offset, size, life)

    @property
    def used(self) -> int:
        return max([self.base] + [o + s for o, s, _ in self.placed])

    def live_bytes(self, life: Life) -> int:
        return self.base + sum(s for _, s, lf in self.placed if _overlap(lf, life))

    def take(self, size: int, life: Life) -> int | None:
        """First fit: the lowest offset where `size` bytes overlap no buffer live with `life`."""
        off = self.base
        for o, s, _ in sorted((p for p in self.placed if _overlap(p[2], life)), key=lambda p: p[0]):
            if o >= off + size:
                break
            off = max(off, o + s)
        if off + size > self.limit:
            return None
        self.placed.append((off, _align(size), life))
        return off


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

    def place(self, alloc: core.AllocOp, core_i: int | None, life: Life) -> None:
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
            offset = self.space(core_i, space).take(size, life)
            if offset is None and space == "sram":
                space = "private_dram"
                offset = self.space(core_i, space).take(size, life)
            if offset is None:
                used = self.space(core_i, space).live_bytes(life)
                where = f"core({core_i})" if core_i is not None else "every core"
                raise error_at(
                    alloc,
                    f"out of {t.space} on {where}: this {t.dims_str()} {t.dtype.name} buffer "
                    f"needs {_fmt(size)}, {_fmt(used)} are already planned and the "
                    f"{self.model.name} {t.space} holds {_fmt(self.model.memory_size(t.space))}"
                    + (
                        f" (plus {_fmt(self.model.private_dram_size)} of private DRAM)"
                        if t.space == "sram"
                        else ""
                    ),
                    note="split the work into smaller tiles or over more cores",
                )
            if key is not None:
                self.named[key] = (space, offset)
        alloc.offset = IntegerAttr(offset, i64)
        if space != t.space:
            alloc.attributes[PLACEMENT_ATTR] = StringAttr(space)


@dataclass(frozen=True)
class CorePlanMemoryPass(ModulePass):
    """Assign offsets to every `core.alloc` of every `core.kernel`."""

    name = "core-plan-memory"

    target: str = "bertha"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        model = model_of(op, self.target)
        for kernel in op.walk():
            if not isinstance(kernel, core.KernelOp):
                continue
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
                        for alloc in program.walk():
                            if isinstance(alloc, core.AllocOp) and (lv[alloc] is None) == whole:
                                planner.place(alloc, alloc_core(alloc, program), lv[alloc])
