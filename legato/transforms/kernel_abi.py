"""The ABI of a planned core (or backend) kernel, read from its IR: its Instruction Table layout
and the bytes its buffers use per core and space. The ABI itself (`ArgLayout`, footprints) is
`legato.targets.bertha.abi`, which knows no IR; this module is the bridge the backend lowering
and the compiler share."""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr

from legato.dialects import backend as be
from legato.dialects import core
from legato.targets.bertha.abi import ARG_NAMES_ATTR, Arg, ArgLayout, Footprints
from legato.transforms.diagnostics import error_at
from legato.transforms.ir_walk import walk
from legato.transforms.plan_memory import alloc_core, placed_space


def arg_layout(kernel: core.KernelOp | be.KernelOp) -> ArgLayout:
    """The Instruction Table layout of a core (or backend) kernel's signature."""
    names_attr = kernel.attributes.get(ARG_NAMES_ATTR)
    names = [n.data for n in names_attr.data] if isinstance(names_attr, ArrayAttr) else None
    args = []
    assert kernel.args is not None
    for a in kernel.args.data:
        assert isinstance(a, core.ArgAttr)
        t = a.type
        if not isinstance(t, core.BufType):
            raise error_at(
                kernel, f"argument {a.index.data}: scalar arguments are not supported yet"
            )
        name = names[a.index.data] if names else f"arg{a.index.data}"
        args.append(Arg(name, t.to_spec(), a.access.data))
    return ArgLayout(args)


def footprints(kernel: core.KernelOp) -> Footprints:
    """Bytes used per (core or None for SPMD) and space, from the planned allocs."""
    use: Footprints = {}
    for program in kernel.body.block.ops:
        if not isinstance(program, core.ProgramOp):
            continue
        for alloc in walk(program):
            if isinstance(alloc, core.AllocOp):
                if alloc.offset is None:
                    raise error_at(alloc, "core.alloc has no offset: run core-plan-memory first")
                t = alloc.result.type
                assert isinstance(t, core.BufType)
                c = alloc_core(alloc, program)
                space = placed_space(alloc)
                end = alloc.offset.value.data + t.max_bytes
                d = use.setdefault(c, {})
                d[space] = max(d.get(space, 0), end)
    return use
