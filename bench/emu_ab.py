"""A/B of issue 15's cheap emulator wins, in one process, interleaved (fair on a loaded machine):

    .venv/bin/python bench/emu_ab.py KERNEL[,KERNEL] TARGET[,TARGET] REPEAT

"before" puts back the previous behaviour (trace events recorded and released, `read` arguments
copied into emulated memory, numpy's BLAS free to use all its threads); "after" is today's
run_binary as the JIT calls it (trace off, `read` arguments mapped read-only, BLAS on one
thread). Prints the best wall time of REPEAT runs of each, with that run's CPU time.

    .venv/bin/python bench/emu_ab.py --paths KERNEL[,KERNEL] TARGET[,TARGET] REPEAT

instead compares the scheduler's fast paths with the reference paths they replaced (every
instruction planned again when popped and on every wake, scalar code through `_execute`, the
region search on every access; tests/unit/targets/test_emulator_fast_paths.py), both traced off
(the per-`ldw` weight preparation is in both).

    .venv/bin/python bench/emu_ab.py --flag ATTR KERNEL[,KERNEL] TARGET[,TARGET] REPEAT

toggles the class attribute `Emulator.ATTR` (e.g. `loop_prologue`, `loop_mpu`, `native_loop`,
`premap`; `runtime.NAME` a switch of the runtime's, `runtime.PER_BINARY_CACHES`; several joined
by `+`) False / True, interleaved, and prints a markdown row per kernel and target: instructions,
cycles, the least CPU ms (with that run's wall ms) of each, the change, and whether both gave
the same cycles, counts, busy times, bytes per channel and output bits.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _copying(self, data, name):
    """The previous placement of a `read` argument: allocate, then copy it in."""
    addr = self.allocate(data.nbytes, name)
    self.write(addr, data)
    return addr


def _reference_paths(on: bool) -> None:
    """Switch the emulator to its reference paths (on) or back to its fast paths."""
    from legato.targets.bertha import emulator as e

    if not hasattr(e, "_fast"):
        e._fast = (e.Emulator._stable, e.Emulator._replan_slot, e.Memory.find)
    stable, replan, find = e._fast
    if on:
        stable = lambda self, m, plan: False  # noqa: E731
        replan = lambda self, m, plan: self._prepare(m)  # noqa: E731
        find = e.PhysicalMemory.find
    e.Emulator._stable, e.Emulator._replan_slot, e.Memory.find = stable, replan, find
    e.Emulator.fast_scalars = not on


def paths_main(names, targets, rep) -> None:
    from bench.emu_speed import bench_binary
    from legato.targets.bertha.runtime import run_binary

    for name in names:
        for target in targets:
            model, binary, np_args = bench_binary(name, target)
            best = {v: (float("inf"), 0.0) for v in ("reference paths", "fast paths")}
            for _ in range(rep):
                for v in best:
                    _reference_paths(v == "reference paths")
                    args = [a.copy() for a in np_args]
                    w, c = time.perf_counter(), time.process_time()
                    run_binary(binary, model, args, trace=False)
                    w, c = time.perf_counter() - w, time.process_time() - c
                    if w < best[v][0]:
                        best[v] = (w, c)
            _reference_paths(False)
            for v, (w, c) in best.items():
                print(f"{name}@{target} {v}: wall {w * 1e3:.0f} ms, cpu {c * 1e3:.0f} ms")


def flag_main(attr: str, names, targets, rep) -> None:
    """`Emulator.<attr>` False against True (e.g. `loop_prologue`, `loop_mpu`,
    `native_loop`), interleaved, tracing and the hazard checker off: the least CPU time of
    `rep` runs of each, with that run's wall time, after checking that both give the same
    cycles, instructions, MACs, unit and port busy time, DRAM bytes per channel and output
    bits (a hash of every argument after the run)."""
    import hashlib

    from bench.emu_speed import bench_binary
    from legato.targets.bertha import emulator, runtime
    from legato.targets.bertha.runtime import run_binary

    # (ATTR: `Emulator` attributes, or `runtime.NAME` for the runtime's, joined by `+`)
    owners = [
        (runtime, a.removeprefix("runtime."))
        if a.startswith("runtime.")
        else (emulator.Emulator, a)
        for a in attr.split("+")
    ]
    olds = [getattr(o, a) for o, a in owners]
    for name in names:
        for target in targets:
            model, binary, np_args = bench_binary(name, target)
            best = {v: (0.0, float("inf")) for v in (False, True)}
            seen = {}
            for _ in range(rep):
                for v in (False, True):
                    for o, a in owners:
                        setattr(o, a, v)
                    args = [a.copy() for a in np_args]
                    w, c = time.perf_counter(), time.process_time()
                    r = run_binary(binary, model, args, trace=False, hazards=False)
                    w, c = time.perf_counter() - w, time.process_time() - c
                    h = hashlib.sha256()
                    for a in args:
                        h.update(a.tobytes())
                    key = (r.cycles, r.instructions, r.mac_count, r.unit_busy, r.port_busy)
                    seen.setdefault(v, (key, r.dram_bytes_per_channel, h.hexdigest()))
                    if c < best[v][1]:
                        best[v] = (w, c)
            for (o, a), old in zip(owners, olds):
                setattr(o, a, old)
            same = seen[False] == seen[True]
            (cycles, instrs, *_), _, _ = seen[True]
            instrs = sum(instrs.values()) if isinstance(instrs, dict) else instrs
            (w0, c0), (w1, c1) = best[False], best[True]
            print(
                f"| {name} | {target} | {instrs} | {cycles} | {c0 * 1e3:.1f} ({w0 * 1e3:.1f}) "
                f"| {c1 * 1e3:.1f} ({w1 * 1e3:.1f}) | {(c1 / c0 - 1) * 100:+.0f}% "
                f"| {'yes' if same else 'NO'} |",
                flush=True,
            )


def main() -> None:
    if sys.argv[1] == "--flag":
        flag_main(sys.argv[2], sys.argv[3].split(","), sys.argv[4].split(","), int(sys.argv[5]))
        return
    if sys.argv[1] == "--paths":
        paths_main(sys.argv[2].split(","), sys.argv[3].split(","), int(sys.argv[4]))
        return
    from bench.emu_speed import bench_binary
    from legato.targets.bertha import emulator
    from legato.targets.bertha.runtime import run_binary

    variants = {
        "before (trace on, copy, BLAS free)": (True, _copying, contextlib.nullcontext),
        "after (trace off, mapped, BLAS 1)": (
            False,
            emulator.Memory.map_read_only,
            emulator._one_blas_thread,
        ),
    }
    names, targets, rep = sys.argv[1].split(","), sys.argv[2].split(","), int(sys.argv[3])
    for name in names:
        for target in targets:
            model, binary, np_args = bench_binary(name, target)
            best = {v: (float("inf"), 0.0) for v in variants}
            for _ in range(rep):
                for v, (trace, place, pin) in variants.items():
                    emulator.Memory.map_read_only, emulator._one_blas_thread = place, pin
                    args = [a.copy() for a in np_args]
                    w, c = time.perf_counter(), time.process_time()
                    r = run_binary(binary, model, args, trace=trace)
                    del r  # releasing the trace is part of what a cached JIT call paid
                    w, c = time.perf_counter() - w, time.process_time() - c
                    if w < best[v][0]:
                        best[v] = (w, c)
            for v, (w, c) in best.items():
                print(f"{name}@{target} {v}: wall {w * 1e3:.0f} ms, cpu {c * 1e3:.0f} ms")
            emulator.Memory.map_read_only, emulator._one_blas_thread = variants[
                "after (trace off, mapped, BLAS 1)"
            ][1:]


if __name__ == "__main__":
    main()
