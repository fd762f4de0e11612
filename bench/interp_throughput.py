"""Throughput of each interpreter and the emulator on the seed matmul, against torch eager.

    .venv/bin/python bench/interp_throughput.py [--repeat N]

Prints ops/s (interpreters: ops executed / wall second; emulator: instructions / wall second),
wall time per run, and the ratio to torch eager for the same kernel, all measured in this run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from legato.interp import differential as diff
from legato.interp.api import parse_module, run
from tests.corpus.kernels import CORPUS


def _time(fn, repeat: int) -> float:
    fn()  # warm up
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--kernel", default="seed_matmul")
    ns = p.parse_args()
    kernel = next(k for k in CORPUS if k.name == ns.kernel)
    model = kernel.get_model()
    compiled = diff.compile_corpus_kernel(kernel, record_passes=False)
    modules = {
        "legato": parse_module(kernel.mlir),
        "core": parse_module(compiled.artifacts.core_ir),
        "backend": parse_module(compiled.artifacts.backend_ir),
    }
    tens = [diff._to_torch(a) for a in kernel.args()]
    t_torch = _time(lambda: kernel.reference(tens), ns.repeat)
    print(f"kernel {kernel.name}; torch eager {t_torch * 1e6:.1f} us per run")
    print(f"{'level':10} {'wall/run':>12} {'ops':>8} {'ops/s':>12} {'x torch':>10}")
    for level, module in modules.items():
        stats = {}

        def go(level=level, module=module, stats=stats):
            stats["r"] = run(module, level, kernel.args(), model)

        t = _time(go, ns.repeat)
        ops = stats["r"].stats.total_ops
        print(f"{level:10} {t * 1e3:10.2f}ms {ops:8d} {ops / t:12.0f} {t / t_torch:10.0f}")
    from legato.targets.bertha.runtime import run_binary

    res = {}

    def emu():
        res["r"] = run_binary(compiled.artifacts.binary, model, kernel.args(), trace=False)

    t = _time(emu, ns.repeat)
    r = res["r"]
    n = r.total_instructions
    n_text = f"{n:8d}" if isinstance(n, int) else f"{'?':>8}"
    rate = f"{n / t:12.0f}" if isinstance(n, int) else f"{'?':>12}"
    print(f"{'emulator':10} {t * 1e3:10.2f}ms {n_text} {rate} {t / t_torch:10.0f}")
    _ = np  # numpy imported for the corpus factories


if __name__ == "__main__":
    main()
