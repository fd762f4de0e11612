"""Throughput of each interpreter and the emulator on a few corpus kernels, against torch eager.

    .venv/bin/python bench/interp_throughput.py [--repeat N] [--kernel NAME ...]

Per kernel of the differential corpus (`tests/corpus/kernels.py`; by default a matmul, an
elementwise op, a reduction, a multi-core row norm, a runtime loop and the tiny decoder layer),
and per executor (the legato, core and backend interpreters on that level's IR, the emulator on
the binary): wall time per run (best of N), the ops executed (interpreters: IR ops, counted by
the interpreter; emulator: instructions) and ops per wall second, and the ratio to torch eager
for the same kernel, all measured in this run. The last lines give each executor's throughput
over all the kernels (total ops / total best wall time).
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


def _time(fn, repeat: int) -> float:
    fn()  # warm up
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _copies(args: list) -> list:
    """Fresh copies of a kernel's arguments (arrays, nested in tuples too; scalars as they are)."""
    out = []
    for a in args:
        if isinstance(a, (tuple, list)):
            out.append(type(a)(_copies(list(a))))
        else:
            out.append(a.copy() if hasattr(a, "copy") else a)
    return out


def measure(kernel, repeat: int) -> dict:
    """{"torch_s", executor: (best wall s, ops)} of corpus kernel `kernel`."""
    from legato.targets.bertha.runtime import run_binary

    model = kernel.get_model()
    compiled = diff.compile_corpus_kernel(kernel, record_passes=False)
    modules = {
        "legato": parse_module(kernel.mlir),
        "core": parse_module(compiled.artifacts.core_ir),
        "backend": parse_module(compiled.artifacts.backend_ir),
    }
    args = kernel.args()  # made once: the timed calls get copies (making them took up to
    # 0.45 s, decoder_layer_tiny's, which the rows counted as the executors' time before)
    tens = [numpy_to_torch(a) for a in args]
    row: dict = {"torch_s": _time(lambda: kernel.reference(tens), repeat)}
    for level, module in modules.items():
        out = {}

        def go(level=level, module=module, out=out):
            out["r"] = run(module, level, _copies(args), model)

        t = _time(go, repeat)
        row[level] = (t, out["r"].stats.total_ops)
    out = {}

    def emu():
        out["r"] = run_binary(compiled.artifacts.binary, model, _copies(args), trace=False)

    t = _time(emu, repeat)
    n = out["r"].total_instructions
    row["emulator"] = (t, n if isinstance(n, int) else None)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeat", type=int, default=5, help="best of N (default 5)")
    p.add_argument("--kernel", action="append", help="a corpus kernel (repeatable)")
    ns = p.parse_args(argv)
    names = ns.kernel or list(DEFAULT_KERNELS)
    by_name = {k.name: k for k in CORPUS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        p.error(f"unknown corpus kernel(s): {', '.join(unknown)}")
    print("| kernel | executor | wall/run ms | ops | ops/s | x torch eager |")
    print("|---|---|--:|--:|--:|--:|")
    totals = {e: [0.0, 0] for e in EXECUTORS}
    for name in names:
        row = measure(by_name[name], ns.repeat)
        for e in EXECUTORS:
            t, ops = row[e]
            rate = f"{ops / t:.0f}" if ops is not None else "?"
            print(
                f"| {name} | {e} | {t * 1e3:.2f} | {ops if ops is not None else '?'} | {rate} | "
                f"{t / row['torch_s']:.1f} |",
                flush=True,
            )
            if ops is not None:
                totals[e][0] += t
                totals[e][1] += ops
    print()
    for e, (t, ops) in totals.items():
        if t:
            print(
                f"{e}: {ops} ops in {t * 1e3:.1f} ms over {len(names)} kernels: {ops / t:.0f} ops/s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
