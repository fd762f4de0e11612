"""Throughput of each interpreter and the emulator on a few corpus kernels, against torch eager.

    .venv/bin/python bench/interp_throughput.py [--repeat N] [--kernel NAME ...]

Per kernel of the differential corpus (`tests/corpus/kernels.py`; by default a matmul, an
elementwise op, a reduction, a multi-core row norm, a runtime loop and the tiny decoder layer),
and per executor (the legato, core and backend interpreters on that level's IR, the emulator on
the binary): wall and CPU time per run (best of N each; the CPU time, of every thread of the
process, is what a loaded machine disturbs least), the ops executed (interpreters: IR ops,
counted by the interpreter; emulator: instructions) and ops per CPU second, and the ratio of
the wall time to torch eager's for the same kernel, all measured in this run. The last lines
give each executor's throughput over all the kernels (total ops / total best CPU time).

The arguments are made once per kernel and copied for each run outside the timed part (before
session 13 they were made inside it, and the corpus' random inputs of the tiny decoder layer
cost 0.26 s a run: more than the emulator's run itself). Every executor runs with its hazard
checker off unless `--hazards` (the test suite's setting).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from legato.arrays import numpy_to_torch  # noqa: E402
from legato.interp import differential as diff  # noqa: E402
from legato.interp.api import parse_module, run  # noqa: E402
from tests.corpus.kernels import CORPUS  # noqa: E402

DEFAULT_KERNELS = (
    "seed_matmul",
    "add_bf16",
    "sum_rows",
    "rmsnorm_rows_multicore",
    "runtime_loop_matmul",
    "decoder_layer_tiny",
)
EXECUTORS = ("legato", "core", "backend", "emulator")


def _time(fn, repeat: int, make_args=lambda: None) -> tuple[float, float]:
    """(best wall s, best CPU s) of `fn(make_args())` over `repeat` runs after a warm-up; the
    arguments are made outside the timed part (a kernel writes its outputs into them)."""
    fn(make_args())  # warm up
    wall = cpu = float("inf")
    for _ in range(repeat):
        args = make_args()
        t, c = time.perf_counter(), time.process_time()
        fn(args)
        wall = min(wall, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return wall, cpu


def _copies(args: list) -> list:
    """Fresh copies of a kernel's arguments (arrays, nested in tuples too; scalars as they are)."""
    out = []
    for a in args:
        if isinstance(a, (tuple, list)):
            out.append(type(a)(_copies(list(a))))
        else:
            out.append(a.copy() if hasattr(a, "copy") else a)
    return out


def measure(kernel, repeat: int, hazards: bool = False) -> dict:
    """{"torch_s", executor: (best wall s, best CPU s, ops)} of corpus kernel `kernel`; `hazards`: every
    executor checks for unordered accesses (as the test suite runs them)."""
    from legato.targets.bertha.runtime import run_binary

    model = kernel.get_model()
    compiled = diff.compile_corpus_kernel(kernel, record_passes=False)
    modules = {
        "legato": parse_module(kernel.mlir),
        "core": parse_module(compiled.artifacts.core_ir),
        "backend": parse_module(compiled.artifacts.backend_ir),
    }
    inputs = kernel.args()  # made once (the corpus' random inputs cost more than some runs)

    def make_args():
        return _copies(inputs)

    tens = [numpy_to_torch(a) for a in inputs]
    row: dict = {"torch_s": _time(lambda _args: kernel.reference(tens), repeat)[0]}
    for level, module in modules.items():
        out = {}

        def go(args, level=level, module=module, out=out):
            out["r"] = run(module, level, args, model, hazards=hazards)

        row[level] = (*_time(go, repeat, make_args), out["r"].stats.total_ops)
    out = {}

    def emu(args):
        out["r"] = run_binary(compiled.artifacts.binary, model, args, trace=False, hazards=hazards)

    t = _time(emu, repeat, make_args)
    n = out["r"].total_instructions
    row["emulator"] = (*t, n if isinstance(n, int) else None)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeat", type=int, default=5, help="best of N (default 5)")
    p.add_argument("--kernel", action="append", help="a corpus kernel (repeatable)")
    p.add_argument(
        "--hazards", action="store_true", help="run every executor with its hazard checker on"
    )
    ns = p.parse_args(argv)
    names = ns.kernel or list(DEFAULT_KERNELS)
    by_name = {k.name: k for k in CORPUS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        p.error(f"unknown corpus kernel(s): {', '.join(unknown)}")
    print("| kernel | executor | wall/run ms | CPU/run ms | ops | ops/CPU s | wall x torch eager |")
    print("|---|---|--:|--:|--:|--:|--:|")
    totals = {e: [0.0, 0] for e in EXECUTORS}
    for name in names:
        row = measure(by_name[name], ns.repeat, ns.hazards)
        for e in EXECUTORS:
            wall, cpu, ops = row[e]
            rate = f"{ops / cpu:.0f}" if ops is not None and cpu > 0 else "?"
            print(
                f"| {name} | {e} | {wall * 1e3:.2f} | {cpu * 1e3:.2f} | "
                f"{ops if ops is not None else '?'} | {rate} | {wall / row['torch_s']:.1f} |",
                flush=True,
            )
            if ops is not None:
                totals[e][0] += cpu
                totals[e][1] += ops
    print()
    for e, (t, ops) in totals.items():
        if t:
            print(
                f"{e}: {ops} ops in {t * 1e3:.1f} CPU ms over {len(names)} kernels: "
                f"{ops / t:.0f} ops/s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
