"""Why the emulator deadlocked (issue 17, item 4): the cycle of waits.

A `DeadlockError` lists every blocked module and its instruction. `explain(binary, num_cores,
waits)` adds who could release each wait, from the binary's programs: a `qwait` on (core, space,
queue) is released by a `dma`/`dma2d` notifying that queue (a notify at a register core may
notify any core), a `sem.wait ID` by a `sem.post ID`, a `barrier ID` by the modules of that
barrier not yet arrived. A blocked module whose releasers are all blocked waits on them; a
cycle in that graph is the deadlock's cause (`Step`s: who waits where, on what, for whom, and
where that one would send), and a wait no running module can release (its senders halted, or
none exists) is a missing send. Both come with the kernel's source lines (`.legato.lines`).
"""

from __future__ import annotations

from dataclasses import dataclass

from legato.targets.bertha import isa
from legato.targets.bertha.arch.dma import decode_notify
from legato.targets.bertha.isa import CORE_REG, CORE_SELF, CORE_STATIC


@dataclass(frozen=True)
class Step:
    """`module` (running `program`) blocked at `pc` on `resource`; `releaser` (None: nobody
    still running) would release it at `releaser_pc` of its program."""

    module: str
    program: str
    pc: int
    resource: str
    releaser: str | None
    releaser_program: str | None
    releaser_pc: int | None


def _modules(binary, num_cores: int) -> dict[str, tuple[str, int | None]]:
    """module name -> (program name, core index or None for top)."""
    out = {}
    for p in binary.programs:
        if p.kind == "top":
            out["top"] = (p.name, None)
        elif p.kind == "core":
            out[f"core{p.core}"] = (p.name, p.core)
        else:
            for c in range(num_cores):
                out[f"core{c}"] = (p.name, c)
    return out


def _resource(ins, core: int | None):
    """The key and description of what a blocked instruction waits for, or None."""
    mn = ins.op.mnemonic
    if mn == "qwait":
        space = isa.SPACE_NAMES[ins.a]
        return ("queue", core, ins.a, ins.imm), f"queue {space}.q{ins.imm} of core {core}"
    if mn == "sem.wait":
        return ("sem", ins.a), f"semaphore {ins.a} (count {ins.imm})"
    if mn == "barrier":
        return ("barrier", ins.a), f"barrier {ins.a} ({ins.imm} modules)"
    return None


def _releases(key, ins, core: int | None) -> bool:
    """Whether instruction `ins` of a module on `core` can release a wait on `key`."""
    kind = key[0]
    mn = ins.op.mnemonic
    if kind == "queue":
        if ins.op.format not in ("dma", "dma2d"):
            return False
        nt = decode_notify(ins.op.format, ins.imm, ins.d)
        if nt is None:
            return False
        mode, field, space, queue = nt
        if (space, queue) != key[2:]:
            return False
        target = core if mode == CORE_SELF else field if mode == CORE_STATIC else None
        return mode == CORE_REG or target == key[1]
    if kind == "sem":
        return mn == "sem.post" and ins.a == key[1]
    return mn == "barrier" and ins.a == key[1]


def explain(binary, num_cores: int, waits) -> tuple[list[Step], list[Step]]:
    """(cycle, unreleasable): the steps of one cycle of waits among the blocked modules
    (empty when there is none), and the waits no running module can release."""
    modules = _modules(binary, num_cores)
    code = {p.name: p.instructions for p in binary.programs}
    blocked = {mod: pc for mod, _prog, pc, _i, _w in waits}
    at_barrier: dict[int, set[str]] = {}
    waiting = {}
    for mod, prog, pc, _i, _w in waits:
        ins = code[prog][pc] if 0 <= pc < len(code[prog]) else None
        r = _resource(ins, modules[mod][1]) if ins is not None else None
        if r is not None:
            waiting[mod] = (prog, pc, r)
            if r[0][0] == "barrier":
                at_barrier.setdefault(r[0][1], set()).add(mod)

    def releasers(mod):
        prog, pc, (key, _text) = waiting[mod]
        found = []
        for other, (oprog, ocore) in sorted(modules.items()):
            if other == mod or other not in blocked:
                continue  # halted modules release nothing any more
            if key[0] == "barrier" and other in at_barrier.get(key[1], ()):
                continue  # already arrived
            for opc, ins in enumerate(code[oprog]):
                if _releases(key, ins, ocore):
                    found.append((other, oprog, opc))
                    break
        return found

    edges = {mod: releasers(mod) for mod in waiting}
    unreleasable = [
        Step(mod, prog, pc, text, None, None, None)
        for mod, (prog, pc, (_k, text)) in waiting.items()
        if not edges[mod]
    ]
    return _cycle(waiting, edges), unreleasable


def _cycle(waiting, edges) -> list[Step]:
    """The first cycle of the wait graph, by depth-first search in module order."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[tuple[str, tuple]] = []

    def visit(mod) -> list[Step] | None:
        state[mod] = 1
        for edge in edges.get(mod, ()):
            path.append((mod, edge))
            nxt = edge[0]
            if state.get(nxt) == 1:
                start = next(i for i, (m, _e) in enumerate(path) if m == nxt)
                return [
                    Step(m, waiting[m][0], waiting[m][1], waiting[m][2][1], *e)
                    for m, e in path[start:]
                ]
            if nxt not in state and nxt in waiting:
                found = visit(nxt)
                if found:
                    return found
            path.pop()
        state[mod] = 2
        return None

    for mod in sorted(waiting):
        if mod not in state:
            found = visit(mod)
            if found:
                return found
    return []


def describe(cycle: list[Step], unreleasable: list[Step], source_text) -> list[str]:
    """The report's lines; `source_text(program, pc)` is ' (k.py:12:5)' or ''."""
    lines = []
    if cycle:
        names = " -> ".join([s.module for s in cycle] + [cycle[0].module])
        lines.append(f"  cycle of waits: {names}")
        for s in cycle:
            lines.append(
                f"    {s.module} waits at pc {s.pc}{source_text(s.program, s.pc)} for "
                f"{s.resource}, which {s.releaser} would release at pc {s.releaser_pc}"
                f"{source_text(s.releaser_program, s.releaser_pc)}, but {s.releaser} is "
                "blocked"
            )
    for s in unreleasable:
        lines.append(
            f"  {s.module} waits at pc {s.pc}{source_text(s.program, s.pc)} for {s.resource}, "
            "which no running module can release (nothing left to send or post it)"
        )
    return lines
