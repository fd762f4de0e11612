"""`python -m bench.compile_time`: compile time of the bench kernels, and a cached call's overhead.

Per kernel of `bench/kernels.py` and target: the frontend (`Kernel.emit_module`, AST -> legato
IR) and the pipeline (`legato.compiler.compile_kernel`, legato IR -> ELF), best of `--repeat`
(wall time, and the process's CPU time, which a loaded machine disturbs less);
and the host overhead of a cached JIT call (`kernel(*args)` on an in-memory cache hit, minus the
time spent inside `run_binary`), best of `--repeat`. `--profile FILE` writes one cProfile of all
the compiles (read it with `python -m pstats FILE`).

    .venv/bin/python -m bench.compile_time --repeat 3
    .venv/bin/python -m bench.compile_time --kernel gemm_512x4096x4096 --target bertha-evt1 \\
        --profile /tmp/gemm.prof
"""

from __future__ import annotations

import argparse
import cProfile
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.runner import TARGETS, _model_factory, cached_call  # noqa: E402


def measure(bk, target: str, repeat: int, profiler: cProfile.Profile | None = None) -> dict:
    """{"frontend_s", "compile_s", "cached_call_overhead_s"} of kernel `bk` on `target`."""
    import torch

    import legato
    from legato import jit
    from legato.compiler import compile_kernel

    factory = _model_factory(target)
    model = factory()
    bk = bk.specialize(model)
    kernel = legato.compile(backend=factory)(bk.fn)
    frontend, compile_, compile_cpu = [], [], []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        module = kernel.emit_module()
        t1, c1 = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        compile_kernel(module, model, bk.name)
        if profiler is not None:
            profiler.disable()
        t2, c2 = time.perf_counter(), time.process_time()
        frontend.append(t1 - t0)
        compile_.append(t2 - t1)
        compile_cpu.append(c2 - c1)

    # a cached call: everything `kernel(*args)` does around the emulator
    saved = os.environ.get("LEGATO_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="legato-bench-") as cache:
        os.environ["LEGATO_CACHE_DIR"] = cache
        try:
            jit.clear_memory_cache()
            fresh = legato.compile(backend=factory)(bk.fn)
            args = bk.make_args(torch, torch.Generator().manual_seed(0))
            fresh(*args)  # compiles
            _, overhead = cached_call(fresh, args, repeat)
        finally:
            if saved is None:
                os.environ.pop("LEGATO_CACHE_DIR", None)
            else:
                os.environ["LEGATO_CACHE_DIR"] = saved
            jit.clear_memory_cache()
    return {
        "name": bk.name,
        "target": target,
        "frontend_s": min(frontend),
        "compile_s": min(compile_),
        "compile_cpu_s": min(compile_cpu),
        "cached_call_overhead_s": overhead,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    p.add_argument("--target", action="append", choices=TARGETS, help="only this target")
    p.add_argument("--kernel", action="append", help="only this kernel (repeatable)")
    p.add_argument("--profile", help="write a cProfile of the compiles to this file")
    args = p.parse_args(argv)
    from bench.kernels import KERNELS

    kernels = [k for k in KERNELS if not args.kernel or k.name in args.kernel]
    profiler = cProfile.Profile() if args.profile else None
    print(
        "| kernel | target | frontend ms | compile ms | compile CPU ms | cached call overhead ms |"
    )
    print("|---|---|--:|--:|--:|--:|")
    for bk in kernels:
        for target in args.target or TARGETS:
            r = measure(bk, target, args.repeat, profiler)
            print(
                f"| {r['name']} | {target} | {r['frontend_s'] * 1e3:.1f} | "
                f"{r['compile_s'] * 1e3:.1f} | {r['compile_cpu_s'] * 1e3:.1f} | "
                f"{r['cached_call_overhead_s'] * 1e3:.3f} |",
                flush=True,
            )
    if profiler is not None:
        profiler.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
