"""`python -m bench [--json] [--repeat N] [--target T ...] [--kernel K ...]`

Compiles and runs each kernel of `bench/kernels.py` on each Bertha generation (`bertha` = EVT0,
`bertha-evt1`) and prints, per kernel and target:

- simulated: cycles, roofline cycles (DESIGN section 5, from the target's ComputeModel), the bound
  (dram / mpu / vpu), efficiency = roofline / cycles, DRAM bytes, simulated time;
- host: frontend + compile time, emulator wall time (`run_binary`, best of N), torch eager wall
  time for the same computation (best of N) and the ratio emulator / torch;
- JIT: the first call of a fresh `@legato.compile` kernel with an empty cache (frontend,
  compile, run), a cached call (in-memory hit) and its host overhead (the call minus the time
  inside `run_binary`), and a call after the in-memory cache was cleared (on-disk hit);
- whether the result matches torch eager.

The rows of `bench/torch_path.py` (`torch_*`) measure plain torch modules through
`torch.compile(backend="legato")` instead (issue 14): their cycles are the second call's (the
first lays the weights out), their roofline that of the work itself, and they also report the
ratio to the hand-written kernel at the same shapes; their emulated call runs once (`--repeat`
does not apply: one prefill call emulates for ~10 s).

Wall times depend on the machine: the numbers are for comparison within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np

TARGETS = ("bertha", "bertha-evt1")


def _model_factory(target: str) -> Callable:
    from legato.model import bertha

    return {"bertha": bertha.evt0, "bertha-evt1": bertha.evt1}[target]


def _best(fn: Callable, repeat: int) -> float:
    times = []
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _to_numpy(t) -> np.ndarray:
    import torch

    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.contiguous().numpy().copy()


def cached_call(kernel, args, repeat: int) -> tuple[float, float]:
    """(best wall time of a cached `kernel(*args)`, best host overhead of one: the call minus
    the time inside `run_binary`, i.e. binding, the cache lookup and argument packing around
    the emulator), best of `repeat`. `kernel` has been called with these shapes already."""
    from legato.targets.bertha import runtime

    inside: list[float] = []
    real = runtime.run_binary

    def timed_run(*a, **k):
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            inside.append(time.perf_counter() - t)

    walls, overheads = [], []
    runtime.run_binary = timed_run
    try:
        for _ in range(max(1, repeat)):
            inside.clear()
            t = time.perf_counter()
            kernel(*args)
            walls.append(time.perf_counter() - t)
            overheads.append(walls[-1] - sum(inside))
    finally:
        runtime.run_binary = real
    return min(walls), min(overheads)


def measure(bk, target: str, repeat: int = 5) -> dict:
    """Every number of one (kernel, target) row."""
    import torch

    import legato
    from legato import jit
    from legato.compiler import compile_kernel
    from legato.targets.bertha.runtime import run_binary

    factory = _model_factory(target)
    model = factory()
    bk = bk.specialize(model)
    gen = torch.Generator().manual_seed(0)
    targs = bk.make_args(torch, gen)

    # compile: frontend (AST -> legato IR) then the pipeline down to the binary
    kernel = legato.compile(backend=factory)(bk.fn)
    t0 = time.perf_counter()
    module = kernel.emit_module()
    t1 = time.perf_counter()
    artifacts = compile_kernel(module, model, bk.name)
    t2 = time.perf_counter()
    binary = bytes(artifacts.binary)

    # the emulator, straight from the binary
    np_args = [_to_numpy(t) for t in targs]
    result = {}

    def emulate():
        args = [a.copy() for a in np_args]
        result["run"] = run_binary(binary, model, args)
        result["out"] = args[bk.out_index]

    emulate()  # warm-up (and the result we report, traced)
    # timed as a JIT call runs it: untraced, the arguments' copies made before the timing
    # (the decoder's are 400 MB: copying them took as long as its emulation)
    copies = iter([[a.copy() for a in np_args] for _ in range(max(1, repeat))])
    wall = _best(lambda: run_binary(binary, model, next(copies), trace=False), repeat)
    run = result["run"]

    # torch eager, same computation
    ref = bk.torch_fn(torch, targs)
    for _ in range(5):  # warm-up: oneDNN builds its bf16 kernels on the first calls of a shape
        bk.torch_fn(torch, targs)
    torch_wall = _best(lambda: bk.torch_fn(torch, targs), max(repeat, 20))
    if bk.torch_best is not None:  # torch's own layout: timed too, the faster one reported
        best_fn = bk.torch_best(torch, targs)
        best_out = best_fn()
        assert torch.allclose(best_out.float(), ref.float(), rtol=bk.rtol, atol=bk.rtol), (
            f"{bk.name}: torch_best does not compute torch_fn's result"
        )
        for _ in range(5):
            best_fn()
        torch_wall = min(torch_wall, _best(best_fn, max(repeat, 20)))
    out = (
        torch.from_numpy(result["out"].view(np.int16)).view(torch.bfloat16)
        if result["out"].dtype == ml_dtypes.bfloat16
        else torch.from_numpy(result["out"])
    )
    ok = torch.allclose(out.float(), ref.float(), rtol=bk.rtol, atol=bk.rtol)
    max_err = (out.float() - ref.float()).abs().max().item()

    # the JIT: first call with an empty cache, then cached calls
    saved = os.environ.get("LEGATO_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="legato-bench-") as cache:
        os.environ["LEGATO_CACHE_DIR"] = cache
        try:
            jit.clear_memory_cache()
            fresh = legato.compile(backend=factory)(bk.fn)
            call_args = bk.make_args(torch, torch.Generator().manual_seed(0))
            first = _best(lambda: fresh(*call_args), 1)
            cached, cached_overhead = cached_call(fresh, call_args, repeat)
            disk_times = []
            for _ in range(max(1, repeat)):
                jit.clear_memory_cache()
                t = time.perf_counter()
                fresh(*call_args)
                disk_times.append(time.perf_counter() - t)
            disk = min(disk_times)
            compiles = fresh.compile_count
        finally:
            if saved is None:
                os.environ.pop("LEGATO_CACHE_DIR", None)
            else:
                os.environ["LEGATO_CACHE_DIR"] = saved
            jit.clear_memory_cache()

    roof = run.roofline
    return {
        "name": bk.name,
        "target": target,
        "cycles": run.cycles,
        "roofline_cycles": run.roofline_cycles,
        "efficiency": run.efficiency,
        "bound": roof.bound,
        "roofline": roof.as_dict(),
        "dram_bytes": run.dram_bytes,
        "dram_bytes_per_channel": run.dram_bytes_per_channel,
        "dram_gbps": run.dram_bandwidth_gbps,
        "mac_count": run.mac_count,
        "vpu_element_ops": run.vpu_element_ops,
        "instructions": run.total_instructions,
        "simulated_s": run.seconds,
        "frontend_s": t1 - t0,
        "compile_s": t2 - t1,
        "binary_bytes": len(binary),
        "wall_s": wall,
        "torch_wall_s": torch_wall,
        "wall_ratio": wall / torch_wall if torch_wall else None,
        "first_call_s": first,
        "cached_call_s": cached,
        "cached_call_overhead_s": cached_overhead,
        "disk_cached_call_s": disk,
        "jit_compiles": compiles,
        "matches_torch": bool(ok),
        "max_abs_err_vs_torch": max_err,
    }


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f}"


def _us(s: float) -> str:
    return f"{s * 1e6:.1f}"


COLUMNS = [
    ("kernel", lambda r: r["name"]),
    ("target", lambda r: r["target"]),
    ("cycles", lambda r: str(r["cycles"])),
    ("roofline", lambda r: str(r["roofline_cycles"])),
    ("bound", lambda r: r["bound"]),
    ("eff", lambda r: f"{r['efficiency']:.1%}"),
    ("DRAM B", lambda r: str(r["dram_bytes"])),
    ("GB/s", lambda r: f"{r['dram_gbps']:.0f}"),
    ("compile ms", lambda r: _ms(r["frontend_s"] + r["compile_s"])),
    ("emu ms", lambda r: _ms(r["wall_s"])),
    ("torch us", lambda r: _us(r["torch_wall_s"])),
    ("emu/torch", lambda r: f"{r['wall_ratio']:.0f}x" if r["wall_ratio"] else "-"),
    ("emu Minstr/s", lambda r: f"{r['instructions'] / r['wall_s'] / 1e6:.3f}"),
    ("1st call ms", lambda r: _ms(r["first_call_s"])),
    ("cached ms", lambda r: _ms(r["cached_call_s"])),
    ("cached host ms", lambda r: _ms(r["cached_call_overhead_s"])),
    ("disk hit ms", lambda r: _ms(r["disk_cached_call_s"])),
    ("ok", lambda r: "yes" if r["matches_torch"] else "NO"),
]


def table(rows: list[dict], markdown: bool = False) -> str:
    cells = [[h for h, _ in COLUMNS]] + [[f(r) for _, f in COLUMNS] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    if markdown:
        lines = [
            "| " + " | ".join(cells[0]) + " |",
            "|" + "|".join("---" if i < 2 else "--:" for i in range(len(COLUMNS))) + "|",
        ]
        lines += ["| " + " | ".join(c) + " |" for c in cells[1:]]
        return "\n".join(lines)

    def fmt(c):
        return "  ".join(
            x.ljust(w) if i < 2 else x.rjust(w)
            for i, (x, w) in enumerate(zip(c, widths, strict=True))
        )

    return "\n".join([fmt(cells[0]), fmt(["-" * w for w in widths])] + [fmt(c) for c in cells[1:]])


def environment() -> str:
    import torch

    import legato

    return (
        f"legato {legato.__version__}, torch {torch.__version__}, numpy {np.__version__}, "
        f"Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs"
    )


def main(argv: Sequence[str] | None = None, rows_out: list | None = None) -> int:
    """The bench's command line; `rows_out` (bench/__main__.py's --plot) gets the rows."""
    from bench.kernels import KERNELS
    from bench.torch_path import ROWS as TORCH_ROWS

    KERNELS = [*KERNELS, *TORCH_ROWS]  # noqa: N806 - the bench's list, with the torch rows

    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__.split("\n\n")[1],
        epilog="--plot OUT.png|OUT.svg also draws the rows on a roofline plot (bench/plot.py); "
        "with --rows FILE.json (what --json printed) it draws those rows without running.",
    )
    ap.add_argument("--json", action="store_true", help="print a JSON list of rows")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--repeat", type=int, default=5, help="best of N for wall times (default 5)")
    ap.add_argument(
        "--target",
        action="append",
        choices=TARGETS,
        help="only this target (repeatable; default: both)",
    )
    ap.add_argument("--kernel", action="append", help="only this kernel (repeatable)")
    ap.add_argument(
        "--retune",
        action="store_true",
        help="tune the declared search spaces again (bench/tune.py) and write bench/tuned.json",
    )
    args = ap.parse_args(argv)
    if args.retune:
        from bench.tune import retune

        retune(args.kernel, args.target or TARGETS, None)
    kernels = [k for k in KERNELS if not args.kernel or k.name in args.kernel]
    if not kernels:
        ap.error(f"no kernel named {args.kernel}; known: {', '.join(k.name for k in KERNELS)}")
    rows = [
        k.measure(t, 1) if hasattr(k, "measure") else measure(k, t, args.repeat)
        for k in kernels
        for t in (args.target or TARGETS)
    ]
    if rows_out is not None:
        rows_out.extend(rows)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(table(rows, markdown=args.markdown))
        print()
        print(
            f"wall times: best of {args.repeat} ({environment()}); efficiency = roofline / "
            "simulated cycles"
        )
        for r in rows:
            if "hand_ratio" in r:
                hand = (
                    f"{r['hand_ratio']:.2f}x the speed of the hand-written "
                    f"{r['hand_kernel']} ({r['hand_cycles']} cycles)"
                    if r["hand_kernel"]
                    else "no hand-written kernel"
                )
                print(
                    f"{r['name']} ({r['target']}): {r['efficiency']:.1%} of the {r['bound']} "
                    f"roofline of the work, {hand}, {r['kernels']} kernel(s), "
                    f"{r['cores_running']} cores running"
                )
        effs = [r["efficiency"] for r in rows]
        if all(effs):
            print(f"geomean efficiency: {statistics.geometric_mean(effs):.1%}")
    return 0 if all(r["matches_torch"] for r in rows) else 1
