"""Per-PC counters of one emulator run, and their sums per kernel source line.

A `RunProfiler` is what `legato.targets.bertha.emulator.PROFILER` holds while a profiled run is
on: the emulator calls `attach` once and `step(module, pc, issue_cycle)` after every
instruction. Each step books on (module, pc) the module's timeline cycles since its previous
instruction (`cycles`: the wait before issue, `stall`, plus the issue itself), the unit busy
cycles the instruction booked (dma, mpu, vpu), and the chip-wide counters it moved (shared-DRAM
bytes, MACs, VPU element-ops): so the rows of a module sum to its halt cycle and its busy
times, and all rows to the run's counts. It also stamps the pc on the trace events the
instruction emitted, which `trace_at_clock` turns into source lines.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass, field

FIELDS = (
    "instructions",
    "cycles",
    "stall",
    "dma",
    "mpu",
    "vpu",
    "dram_bytes",
    "macs",
    "vpu_ops",
)
"""The counters of a row, in order."""

_UNITS = ("dma", "mpu", "vpu")


class RunProfiler:
    """The per-(module, pc) counters of one emulator run (see the module docstring)."""

    def __init__(self):
        self.emu = None
        self.rows: dict[tuple[int, int], list[int]] = {}

    def attach(self, emu) -> None:
        self.emu = emu
        self._time = [0] * len(emu.modules)
        self._busy = [dict.fromkeys(_UNITS, 0) for _ in emu.modules]
        self._macs = self._vpu = self._dram = 0
        self._events = 0

    def step(self, m, pc: int, t: int) -> None:
        emu = self.emu
        row = self.rows.get((m.index, pc))
        if row is None:
            row = self.rows[(m.index, pc)] = [0] * len(FIELDS)
        prev = self._time[m.index]
        row[0] += 1
        row[1] += m.time - prev
        row[2] += max(0, t - prev)
        self._time[m.index] = m.time
        last = self._busy[m.index]
        for i, u in enumerate(_UNITS, 3):
            b = m.busy[u]
            row[i] += b - last[u]
            last[u] = b
        dram = sum(emu.dram.channel_bytes)
        row[6] += dram - self._dram
        row[7] += emu.macs - self._macs
        row[8] += emu.vpu_elems - self._vpu
        self._dram, self._macs, self._vpu = dram, emu.macs, emu.vpu_elems
        events = emu.events
        if len(events) > self._events:
            for ev in events[self._events :]:
                args = ev.get("args")
                if args is not None:
                    args["pc"] = pc
            self._events = len(events)


@dataclass
class LineStats:
    """The counters of every instruction compiled from one kernel source line (`where` is
    `file:line`, or `<no line>` for argument loads and loop bookkeeping)."""

    where: str
    file: str | None
    line: int | None
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    modules: set[str] = field(default_factory=set)

    @property
    def text(self) -> str:
        """The source line itself (stripped), when the file is readable."""
        if self.file is None or self.line is None:
            return ""
        return linecache.getline(self.file, self.line).strip()

    def as_dict(self) -> dict:
        return {
            "where": self.where,
            "file": self.file,
            "line": self.line,
            "text": self.text,
            "modules": sorted(self.modules),
            **self.counts,
        }


def source_of(binary, program: str, pc: int) -> tuple[str, int, int] | None:
    return binary.source_of(program, pc) if binary is not None else None


def per_line(prof: RunProfiler) -> list[LineStats]:
    """The run's rows summed per source line, in file and line order (`<no line>` last)."""
    emu = prof.emu
    lines: dict[str, LineStats] = {}
    for (idx, pc), row in prof.rows.items():
        m = emu.modules[idx]
        loc = source_of(emu.binary, m.program.name, pc)
        if loc is None and not getattr(emu.binary, "lines", None):
            # no line table at all (IR without Python locations, hand-written assembly): one
            # row per instruction instead of a single "<no line>"
            key, file, line = f"{m.program.name} pc {pc}: {_instruction(m, pc)}", None, None
        elif loc is None:
            key, file, line = "<no line>", None, None
        else:
            file, line = loc[0], loc[1]
            key = f"{file}:{line}"
        st = lines.get(key)
        if st is None:
            st = lines[key] = LineStats(key, file, line)
        for f, v in zip(FIELDS, row):
            st.counts[f] += v
        st.modules.add(m.name)
    return sorted(
        lines.values(), key=lambda s: (s.file is None, s.file or "", s.line or 0, _pc_order(s))
    )


def _pc_order(s: LineStats) -> tuple[str, int]:
    """(program, pc) of a per-instruction row, to keep those in program order."""
    prog, _, rest = s.where.partition(" pc ")
    num = rest.split(":", 1)[0]
    return (prog, int(num)) if num.isdigit() else ("", 0)


def _instruction(m, pc: int) -> str:
    from legato.targets.bertha.asm import format_instruction

    return format_instruction(m.code[pc]) if 0 <= pc < len(m.code) else "?"


def trace_at_clock(prof: RunProfiler, result) -> dict:
    """The run's Chrome trace (Perfetto) at the chip's clock (`RunResult.trace`: `ts`/`dur` in
    microseconds, the cycle kept in `args.cycle`) with, on every slice, the source line of the
    instruction that made it (`args.source`, `file:line:col`, and `args.code`, the line's text;
    the slice's name ends with ` @ file:line`)."""
    emu = prof.emu
    trace = result.trace()
    out = []
    open_at: dict[tuple, str] = {}
    for ev in trace["traceEvents"]:
        if ev.get("ph") == "M":
            out.append(ev)
            continue
        args = ev["args"]
        pc = args.get("pc")
        if pc is not None and 0 <= ev.get("pid", -1) < len(emu.modules):
            m = emu.modules[ev["pid"]]
            loc = source_of(emu.binary, m.program.name, pc)
            if loc is not None:
                args["source"] = f"{loc[0]}:{loc[1]}:{loc[2]}"
                args["code"] = linecache.getline(loc[0], loc[1]).strip()
                ev["name"] = f"{ev['name']} @ {_short(loc[0])}:{loc[1]}"
        if ev.get("ph") == "b":
            open_at[(ev.get("pid"), ev.get("id"))] = ev["name"]
        elif ev.get("ph") == "e":
            # an async end names its begin's slice, or Perfetto does not pair them
            ev["name"] = open_at.pop((ev.get("pid"), ev.get("id")), ev["name"])
        out.append(ev)
    trace["traceEvents"] = out
    return trace


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]
