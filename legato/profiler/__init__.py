"""`legato.profile`: where a kernel's cycles go, per source line, against its roofline.

    prof = legato.profile(kernel, a, b, out)        # prints the static estimate, then runs
    print(prof.report())                            # per line: cycles, stalls, unit busy
    prof.write_trace("kernel.json")                 # Perfetto, real time, lines on slices

    with legato.profile() as prof:                  # every emulator run inside the block
        kernel(a, b, out)
    print(prof.report())

`legato-prof` (`legato/tools/prof.py`) does the same for a .mlir file or a binary.
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass, field

from legato.profiler.counters import LineStats, RunProfiler, per_line, trace_at_clock
from legato.profiler.estimate import Estimate, estimate
from legato.targets.bertha import emulator

__all__ = ["Estimate", "LineStats", "Profile", "estimate", "profile", "profiling"]


@dataclass
class Profile:
    """One profiled run: the emulator's `RunResult` (`run`), its per-line counters (`lines`),
    the static estimate when the IR was at hand (`estimate`), and the trace at the chip's clock."""

    run: object
    lines: list[LineStats]
    profiler: RunProfiler = field(repr=False)
    estimate: Estimate | None = None
    kernel: str = ""

    def trace(self) -> dict:
        """Chrome trace JSON: microseconds at the chip's clock, a source line on every slice."""
        return trace_at_clock(self.profiler, self.run)

    def write_trace(self, path) -> None:
        with open(path, "w") as f:
            json.dump(self.trace(), f)

    def as_dict(self) -> dict:
        r = self.run
        return {
            "kernel": self.kernel,
            "model": r.model_name,
            "cycles": r.cycles,
            "clock_ghz": r.clock_ghz,
            "roofline": r.roofline.as_dict() if r.roofline else None,
            "efficiency": r.efficiency,
            "dram_bytes": r.dram_bytes,
            "macs": r.mac_count,
            "vpu_ops": r.vpu_element_ops,
            "vpu_transcendental_ops": r.vpu_transcendental_ops,
            "unit_busy": r.unit_busy,
            "module_cycles": r.module_cycles,
            "estimate": self.estimate.as_dict() if self.estimate else None,
            "lines": [s.as_dict() for s in self.lines],
        }

    def report(self) -> str:
        """The run's roofline and efficiency, then one row per source line: instructions,
        timeline cycles (summed over the modules running that line) and the share of them,
        stall cycles (waiting to issue), unit busy cycles (dma, mpu, vpu), shared-DRAM bytes,
        MACs and VPU element-ops, and the line's text."""
        r = self.run
        out = [f"kernel {self.kernel}" if self.kernel else "kernel"]
        out.append(
            f"cycles {r.cycles} ({r.seconds * 1e6:.3f} us at {r.clock_ghz} GHz on "
            f"{r.model_name or 'the model'})"
        )
        if r.roofline is not None:
            rf = r.roofline
            out.append(
                f"roofline {rf.cycles} cycles, {rf.bound}-bound (dram {rf.dram_cycles}, mpu "
                f"{rf.mpu_cycles}, vpu {rf.vpu_cycles}); efficiency {r.efficiency:.1%}"
            )
        out.append(
            f"counted: DRAM bytes {r.dram_bytes}, MACs {r.mac_count}, VPU element-ops "
            f"{r.vpu_element_ops} ({r.vpu_transcendental_ops} transcendental)"
        )
        if self.estimate is not None:
            e = self.estimate
            same = (e.dram_bytes, e.macs, e.vpu_ops) == (
                r.dram_bytes,
                r.mac_count,
                r.vpu_element_ops,
            )
            out.append(e.summary() + ("; matches the run" if same else "; DIFFERS from the run"))
        total = sum(s.counts["cycles"] for s in self.lines) or 1
        head = ("line", "instrs", "cycles", "%", "stall", "dma", "mpu", "vpu", "dram B")
        head += ("MACs", "VPU ops", "source")
        rows = [head]
        for s in self.lines:
            c = s.counts
            rows.append(
                (
                    s.where.rsplit("/", 1)[-1],
                    str(c["instructions"]),
                    str(c["cycles"]),
                    f"{100 * c['cycles'] / total:.1f}",
                    str(c["stall"]),
                    str(c["dma"]),
                    str(c["mpu"]),
                    str(c["vpu"]),
                    str(c["dram_bytes"]),
                    str(c["macs"]),
                    str(c["vpu_ops"]),
                    s.text[:60],
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
        for row in rows:
            cells = [row[0].ljust(widths[0])]
            cells += [x.rjust(w) for x, w in zip(row[1:-1], widths[1:])]
            out.append("  ".join(cells + [row[-1]]).rstrip())
        out.append(
            "(cycles: each module's timeline time at that line, summed over modules; stall: "
            "the part spent waiting to issue; dma/mpu/vpu: unit busy cycles the line booked)"
        )
        return "\n".join(out)


class Profiling:
    """What `legato.profile()` (no kernel) yields: a `Profile` per emulator run in the block,
    each with the static estimate of its kernel call (printed before the run, unless
    `show_estimate=False`)."""

    def __init__(self, show_estimate: bool = True, file=None):
        self.profiles: list[Profile] = []
        self._current: list[RunProfiler] = []
        self._show, self._file = show_estimate, file
        self._pending: tuple[str, Estimate | None] | None = None
        self._calls: dict[int, tuple[str, Estimate | None]] = {}  # id(RunProfiler) -> call
        self._estimates: dict[tuple, Estimate | str] = {}

    def note_call(self, kernel, constexprs: dict, tensors) -> None:
        """A kernel call is about to run (`Kernel.__call__`): estimate its work (and print the
        estimate) now; the next emulator run it starts is that call's."""
        shapes = tuple(tuple(x.shape) if hasattr(x, "shape") else None for _, x in tensors)
        key = (id(kernel), kernel.cache_key(constexprs), shapes)
        if key not in self._estimates:  # a kernel called in a loop is estimated once
            self._estimates[key] = _static_estimate(kernel, constexprs, shapes, self._file)
        est = self._estimates[key]
        if self._show:
            _print_estimate(kernel.name, est, self._file)
        self._pending = (kernel.name, est)

    def attach(self, emu) -> None:
        p = RunProfiler()
        p.attach(emu)
        self._current.append(p)
        self._last = p
        if self._pending is not None:
            self._calls[id(p)], self._pending = self._pending, None

    def step(self, m, pc: int, t: int) -> None:
        self._last.step(m, pc, t)

    def report(self) -> str:
        return "\n\n".join(p.report() for p in self.profiles)


@contextlib.contextmanager
def profiling(show_estimate: bool = True, file=None):
    """Profile every emulator run started inside the `with` (trace recording on): yields a
    `Profiling` whose `profiles` get one `Profile` per run, in order, when the block ends. A
    run of a kernel call gets the call's static estimate (`Profile.estimate`), printed to `file`
    (default stdout) before the run unless `show_estimate=False`."""
    from legato.jit.session import current_session, session

    prof = Profiling(show_estimate, file)
    token = emulator.PROFILER.set(prof)
    try:
        with session(**_session_args(current_session())):
            yield prof
    finally:
        emulator.PROFILER.reset(token)
    for p in prof._current:
        # the emulator's own report of its state (what its run returned)
        run = p.emu._result()
        name = getattr(p.emu.binary, "kernel", "") or ""
        name, est = prof._calls.get(id(p), (name, None))
        if not isinstance(est, Estimate):
            est = None
        prof.profiles.append(Profile(run, per_line(p), p, estimate=est, kernel=name))


def _static_estimate(kernel, constexprs: dict, shapes, file) -> Estimate | str:
    """The static estimate of `kernel` called with these constexprs and tensor arguments of
    runtime `shapes`, or the reason there is none (a size depends on data)."""
    from legato.compiler import lower
    from legato.errors import CompileError, LegatoError

    try:
        module = kernel.emit_module(**constexprs)
        lower(module, kernel.model, "core")
        return estimate(module, kernel.model, list(shapes))
    except CompileError as e:
        raise e.with_traceback(None) from None
    except LegatoError as e:  # a loop bound that depends on data: no static estimate
        return str(e)


def _print_estimate(name: str, est: Estimate | str, file) -> None:
    text = f"{name}: {est.summary()}" if isinstance(est, Estimate) else est
    print(f"legato.profile: {text}", file=file or sys.stdout)


def _session_args(outer) -> dict:
    """The outer session's options with trace recording on."""
    if outer is None:
        return {"trace": True}
    return {
        "output_type": outer.output_type,
        "output_path": outer.output_path,
        "trace": True,
        "time_limit": outer.time_limit,
        "cycle_limit": outer.cycle_limit,
        "memory_limit": outer.memory_limit,
    }


def profile(kernel=None, *args, show_estimate: bool = True, file=None, **kwargs):
    """`legato.profile(kernel, *args, **kwargs)`: call the kernel once on the emulator
    (outputs written in place, like a call) with per-line profiling on, and return its
    `Profile`. First, unless `show_estimate=False`, print (to `file`, default stdout) the
    static estimate of its DRAM bytes, MACs and VPU ops computed from its core IR for these
    arguments' shapes. `legato.profile()` without a kernel is `profiling()`, a context
    manager profiling every run inside it. An `@legato.autotune` kernel is profiled with the
    config its last call chose."""
    if kernel is None:
        return profiling(show_estimate, file)
    from legato.errors import LegatoError
    from legato.jit.autotuner import Autotuner

    if isinstance(kernel, Autotuner):
        # the tuned config is a set of constexprs: profile the kernel with them, not the tuning
        if kernel.best_config is None:
            raise LegatoError(
                f"legato.profile: kernel {kernel.kernel.name} is autotuned and not tuned yet: "
                "call it once (it tunes), then profile it"
            )
        kwargs = {**kernel.best_config, **kwargs}
        kernel = kernel.kernel

    with profiling(show_estimate, file) as prof:
        kernel(*args, **kwargs)
    (p,) = prof.profiles
    return p
