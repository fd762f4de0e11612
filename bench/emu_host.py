"""Host time of the emulator against torch eager, per bench kernel, in one run (issue 15).

    .venv/bin/python bench/emu_host.py [--repeat N] [--kernel NAME ...] [--target T ...]

For each bench kernel (bench/kernels.py) and target: `run_binary` as the JIT calls it (tracing
off), the best wall time of N runs and the least CPU time of them (separately: under load they
are different runs, and the CPU time is the fairer A/B), with the compiled helpers
(`legato.targets.bertha.native`) and with the Python reference paths (`--reference` adds that
column: the MPU numerics in numpy, scalar code threaded, the VPU in numpy, the DRAM booking in Python;
`--without-vpu-dram` adds the compiled helpers but native/vpu.c's and native/dram.c's),
interleaved so that both see the same
load; torch eager on the same computation, best of max(N, 20) after a warm-up (wall, and the
process CPU time of that call: torch's threads together); the ratios of wall and of CPU time;
and emulated instructions per (wall) second. Last, a scalar-heavy loop on top (600k ALU and branch instructions):
instructions per second with and without the compiled scalar ISA. With `--floor`: numpy's
f64 GEMM on the bench GEMM's MPU passes against torch eager (what bounds the GEMM).

Wall times on a shared machine swing with its load: compare the numbers of one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DEFAULT_KERNELS = [
    "gemm_512x4096x4096",
    "decoder_layer_7b_ctx1024",
    "gemv_1x4096x4096",
    "rmsnorm_32x4096",
    "softmax_32x4096",
]

SCALAR_LOOP = """\
.program top on top
    li r3, 0
    li r4, {n}
    li r5, 7
L:
    addi r3, r3, 1
    mul r6, r3, r5
    xor r7, r6, r3
    shri r8, r7, 3
    add r9, r9, r8
    blt r3, r4, L
    halt
"""


def _paths(variant: str) -> None:
    """The compiled helpers of `variant`: "compiled" all of them; "reference" none (the Python
    reference paths they replace); "no-vpu-dram" all but native/vpu.c and native/dram.c (the
    VPU's numpy and the Python DRAM booking instead: `--without-vpu-dram`)."""
    from legato.targets.bertha import emulator, mpu_fast, native, timing

    compiled = variant != "reference"
    newest = variant == "compiled" and native.lib is not None
    mpu_fast.NATIVE = compiled and native.lib is not None
    emulator.Emulator.native_scalars = compiled
    emulator.Emulator.native_vpu = newest
    timing.DramTiming.native = newest


def _timed(fn) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def kernel_rows(names, targets, repeat: int, reference: bool, without_vpu: bool = False) -> None:
    import torch

    from bench.emu_speed import bench_binary
    from bench.kernels import KERNELS
    from bench.runner import _model_factory
    from legato.targets.bertha.runtime import run_binary

    by_name = {k.name: k for k in KERNELS}
    variants = ["compiled"] + (["no-vpu-dram"] if without_vpu else [])
    variants += ["reference"] if reference else []
    head = f"{'kernel':26} {'target':12} {'instr':>8} {'torch ms (cpu)':>18}"
    for v in variants:
        head += f" {v + ' ms (cpu)':>20} {'x wall':>7} {'x cpu':>7} {'Minstr/s':>9}"
    print(head)
    for name in names:
        for target in targets:
            model, binary, np_args = bench_binary(name, target)
            bk = by_name[name].specialize(_model_factory(target)())
            targs = bk.make_args(torch, torch.Generator().manual_seed(0))
            res = {}

            def emulate(binary=binary, model=model, res=res):
                res["r"] = run_binary(binary, model, res.pop("args"), trace=False)

            def fresh(np_args=np_args, res=res):
                # untimed: the JIT passes the caller's arrays (read-only ones are mapped, not
                # copied); a run writes its outputs, so each run gets its own copies
                res["args"] = [a.copy() for a in np_args]

            best = {v: (float("inf"), float("inf")) for v in variants}
            for v in variants:  # warm-up
                _paths(v)
                fresh()
                emulate()
            for _ in range(repeat):
                for v in variants:
                    _paths(v)
                    fresh()
                    w, c = _timed(emulate)
                    best[v] = (min(w, best[v][0]), min(c, best[v][1]))
            _paths("compiled")
            for _ in range(5):  # oneDNN builds its bf16 kernels on the first calls of a shape
                bk.torch_fn(torch, targs)
            tw, tc = min(
                _timed(lambda bk=bk, targs=targs: bk.torch_fn(torch, targs))
                for _ in range(max(repeat, 20))
            )
            n = res["r"].total_instructions
            line = f"{name:26} {target:12} {n:8d} {tw * 1e3:8.2f} ({tc * 1e3:7.2f})"
            for v in variants:
                w, c = best[v]
                line += f" {w * 1e3:9.1f} ({c * 1e3:7.1f}) {w / tw:6.1f}x {c / tc:6.1f}x"
                line += f" {n / w / 1e6:9.3f}"
            print(line, flush=True)


def scalar_loop(repeat: int, n: int = 100_000) -> None:
    from legato.model import bertha
    from legato.targets.bertha import emulator
    from legato.targets.bertha.abi import ArgLayout
    from legato.targets.bertha.asm import assemble
    from legato.targets.bertha.elf import write_elf
    from legato.targets.bertha.runtime import load_binary

    model = bertha.evt0()
    elf = write_elf(assemble(SCALAR_LOOP.format(n=n)), model, ArgLayout([]))
    binary = load_binary(elf, model)
    for v in ("compiled", "reference"):
        _paths(v)
        best, count = float("inf"), 0
        for _ in range(repeat):
            emu = emulator.Emulator(binary, model, trace=False)
            w, _c = _timed(emu.run)
            best = min(best, w)
            count = sum(m.count for m in emu.modules)
        print(
            f"scalar loop, {v:9}: {count} instructions in {best * 1e3:8.1f} ms = "
            f"{count / best / 1e6:6.2f} M instructions/s",
            flush=True,
        )
    _paths("compiled")


def dgemm_floor(repeat: int) -> None:
    """What bounds the GEMM: numpy's f64 GEMM (one thread, as in the emulator) on the bench
    GEMM's MPU passes, against torch eager's bf16 GEMM of the same size, in this run."""
    import numpy as np
    import torch
    from threadpoolctl import threadpool_limits

    ta, tw = torch.randn(512, 4096).bfloat16(), torch.randn(4096, 4096).bfloat16()
    for _ in range(5):
        ta @ tw
    tt = min(_timed(lambda: ta @ tw)[0] for _ in range(max(repeat, 20)))
    print(f"torch eager [512,4096]@[4096,4096] bf16: {tt * 1e3:.2f} ms")
    rng = np.random.default_rng(0)
    cases = [("one [512,4096]x[4096,4096]", 512, 4096, 4096, 1)]
    cases += [("EVT0's 4096 x [64,256]x[256,128]", 64, 256, 128, 4096)]
    cases += [("EVT1's 16384 x [32,256]x[256,64]", 32, 256, 64, 16384)]
    with threadpool_limits(1, user_api="blas"):
        for label, m, k, n, count in cases:
            a, w = rng.standard_normal((m, k)), rng.standard_normal((k, n))
            a @ w
            t = min(
                _timed(lambda a=a, w=w: a @ w)[0]
                for _ in range(max(repeat, 5 if count == 1 else 50))
            )
            print(f"f64 dgemm, {label}: {t * count * 1e3:8.1f} ms = {t * count / tt:5.1f}x torch")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--kernel", action="append", help="a bench kernel (default: the issue's five)")
    p.add_argument("--target", action="append", choices=("bertha", "bertha-evt1"))
    p.add_argument("--reference", action="store_true", help="also time the reference paths")
    p.add_argument(
        "--without-vpu-dram",
        action="store_true",
        help="also time the compiled helpers without native/vpu.c and native/dram.c",
    )
    p.add_argument("--skip-kernels", action="store_true")
    p.add_argument("--floor", action="store_true", help="also time the f64 GEMM floor")
    ns = p.parse_args()
    if not ns.skip_kernels:
        kernel_rows(
            ns.kernel or DEFAULT_KERNELS,
            ns.target or ["bertha", "bertha-evt1"],
            ns.repeat,
            ns.reference,
            ns.without_vpu_dram,
        )
    scalar_loop(ns.repeat)
    if ns.floor:
        dgemm_floor(ns.repeat)


if __name__ == "__main__":
    main()
