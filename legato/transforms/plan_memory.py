"""`core-plan-memory`: give every `core.alloc` its byte offset in its core's memory space.

Each buffer reserves its *bound* size (dynamic dims at their upper bound), aligned to
`ALIGN` bytes. Allocs in different programs that carry the same `buffer` name (the two ends of a
transfer) are one buffer and get one offset. Buffers of an `all_cores` program are placed at the
same offset on every core (SPMD code addresses them identically), before per-core buffers.
A space that overflows is a compile error giving the sizes; `sram` buffers that do not fit
spill to `private_dram` (recorded in the `placement` attribute, read by the backend).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass

from legato.dialects import core
from legato.model.compute_model import ComputeModel
from legato.model.ir import model_of
from legato.transforms.diagnostics import error_at
from legato.transforms.legato_to_core import BUFFER_ATTR

ALIGN = 64
PLACEMENT_ATTR = "placement"


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _fmt(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit} ({n} bytes)"
    return f"{n} bytes"


def alloc_core(alloc: core.AllocOp, program: core.ProgramOp) -> int | None:
    """The core index an alloc lives on; None for an SPMD (all_cores) buffer."""
    if alloc.core is not None:
        return alloc.core.core_index
    if program.ctx.is_core:
        return program.ctx.core_index
    if program.ctx.is_all_cores:
        return None
    raise error_at(alloc, "core.alloc in the top program needs `on core(i)`")


@dataclass
class _Space:
    limit: int
    used: int = 0

    def take(self, size: int) -> int | None:
        if self.used + size > self.limit:
            return None
        off = self.used
        self.used += _align(size)
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
            s = _Space(self.model.memory_size(name))
            s.used = base
            self.spaces[key] = s
        return self.spaces[key]

    def place(self, alloc: core.AllocOp, core_i: int | None) -> None:
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
            offset = self.space(core_i, space).take(size)
            if offset is None and space == "sram":
                space = "private_dram"
                offset = self.space(core_i, space).take(size)
            if offset is None:
                used = self.space(core_i, space).used
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
            # SPMD buffers first: they take the same offset on every core.
            programs.sort(key=lambda p: 0 if p.ctx.is_all_cores else 1)
            for program in programs:
                for alloc in program.walk():
                    if isinstance(alloc, core.AllocOp):
                        planner.place(alloc, alloc_core(alloc, program))
