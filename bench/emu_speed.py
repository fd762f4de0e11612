"""Host-side speed of the emulator's numerics on GEMM-sized work, against torch eager.

    .venv/bin/python bench/emu_speed.py [--repeat N] [--skip-emulator] [--old]
    .venv/bin/python bench/emu_speed.py --kernel NAME [--kernel NAME] [--target T] [--repeat N]

Prints, best of N (wall times depend on the machine and its load: compare numbers of one run):
- torch eager: `[512, 4096] @ [4096, 4096]` bf16 (what issue 5's GEMM computes);
- `numerics.mpu_matmul` on the GEMM's MPU instruction mix: the GEMM on 32 cores is 512
  `mpu.mm` of `[512, 256] x [256, 128]` with an f32 accumulator (16 K-tiles x 32 column blocks);
  timed on a few and scaled to 512;
- with `--old`: the previous definition (f32, one k at a time) on one such mm, scaled to 512;
- the VPU paths of a big kernel (one instruction on 64K elements each: add/mul in bf16 and f32,
  exp, cvt, rsum over [1, 4096] and [32, 4096]);
- the emulator running a hand-written SPMD GEMM of that size on EVT0 (32 cores: each streams its
  16 A tiles and W tiles by DMA, `mpu.ldw`, `mpu.mm ..., acc`, then converts and writes its
  128 columns), checked against `numerics.matmul_acc`.
Each line also gives the process CPU time of the best run: on a loaded machine, multithreaded
BLAS / torch wall times swing by 10x, CPU time much less (`OPENBLAS_NUM_THREADS=1` for a
single-threaded emulator).
With `--kernel NAME` (a bench kernel of bench/kernels.py, e.g. gemv_1x4096x4096,
rmsnorm_32x4096) it only times `run_binary` on that kernel's binary, tracing off, per target.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ml_dtypes
import numpy as np

from legato import numerics
from legato.targets.bertha import vpu

BF16 = np.dtype(ml_dtypes.bfloat16)
M, K, N = 512, 4096, 4096
TK, TN = 256, 128
MMS = (K // TK) * (N // TN)  # 512 mpu.mm per GEMM


CPU = {}  # the process CPU seconds of the best run of each `best` call, by label


def best(fn, repeat: int, label: str = "") -> float:
    """Best wall time of `repeat` runs after one warm-up; the CPU time of that run goes to
    CPU[label] (wall times on a shared machine swing with its load; CPU time much less)."""
    fn()
    b, c = float("inf"), 0.0
    for _ in range(repeat):
        t, p = time.perf_counter(), time.process_time()
        fn()
        w = time.perf_counter() - t
        if w < b:
            b, c = w, time.process_time() - p
    CPU[label] = c
    return b


def _old_matmul_acc(a, w, acc):
    """The previous MPU definition: f32, summing one k at a time (for the 'before' number)."""
    a32, w32 = a.astype(np.float32), w.astype(np.float32)
    out = np.array(acc, dtype=np.float32)
    for i in range(a32.shape[1]):
        out += a32[:, i : i + 1] * w32[i : i + 1, :]
    return out


GEMM_ASM = """\
.kernel emu_speed_gemm
.program gemm on all_cores
    ld r3, 8(r1)               ; at[16, 512, 256] bf16: A's K tiles
    ld r4, 16(r1)              ; wt[32, 16, 256, 128] bf16: W's tiles, per column block
    ld r5, 24(r1)              ; ot[32, 512, 128] bf16: the result's column blocks
    muli r6, r2, {w_block}     ; this core's W tiles
    add r4, r4, r6
    lsa r7, sram, 0            ; A tile
    lsa r8, sram, {acc_off}    ; f32 accumulator [512, 128]
    lsa r9, mpu_buffer, 0      ; W tile
    li r10, {a_tile}
    li r11, {w_tile}
    li r12, {tk}
    li r13, {tn}
    li r14, {m}
    li r15, 0                  ; t
    li r16, {kt}
loop:
    dma r7, r3, r10, sram.q0
    dma r9, r4, r11, mpu_buffer.q0
    qwait sram.q0
    qwait mpu_buffer.q0
    mpu.ldw r9, r12, r13
    beq r15, r0, first
    mpu.mm r8, r7, r14, f32, acc
    jmp next
first:
    mpu.mm r8, r7, r14, f32
next:
    add r3, r3, r10
    add r4, r4, r11
    addi r15, r15, 1
    blt r15, r16, loop
    lsa r17, sram, {out_off}
    li r18, {mn}
    vpu.cvt r17, r8, r18, bf16, f32
    muli r19, r2, {o_block}
    add r19, r5, r19
    li r20, {o_block}
    dma r19, r17, r20
    dmawait
    halt
"""


def run_emulator_gemm(repeat: int) -> tuple[float, bool]:
    from legato.model.bertha import evt0
    from legato.targets.bertha.abi import Arg, ArgLayout
    from legato.targets.bertha.asm import assemble
    from legato.targets.bertha.elf import write_elf
    from legato.targets.bertha.runtime import run_binary
    from legato.types import TensorSpec, bf16

    model = evt0()
    cores, kt = N // TN, K // TK
    assert model.num_cores == cores
    src = GEMM_ASM.format(
        w_block=kt * TK * TN * 2,
        acc_off=TK * M * 2,
        a_tile=M * TK * 2,
        w_tile=TK * TN * 2,
        tk=TK,
        tn=TN,
        m=M,
        kt=kt,
        out_off=TK * M * 2 + M * TN * 4,
        mn=M * TN,
        o_block=M * TN * 2,
    )
    args = [
        Arg("at", TensorSpec.make(bf16, [kt, M, TK], "shared_dram"), "read"),
        Arg("wt", TensorSpec.make(bf16, [cores, kt, TK, TN], "shared_dram"), "read"),
        Arg("ot", TensorSpec.make(bf16, [cores, M, TN], "shared_dram"), "write"),
    ]
    binary = write_elf(assemble(src), model, ArgLayout(args))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(BF16)
    w = (rng.standard_normal((K, N)) / 64).astype(BF16)
    at = np.ascontiguousarray(a.reshape(M, kt, TK).transpose(1, 0, 2))
    wt = np.ascontiguousarray(w.reshape(kt, TK, cores, TN).transpose(2, 0, 1, 3))
    ot = np.zeros((cores, M, TN), BF16)
    t = best(lambda: run_binary(binary, model, [at, wt, ot]), repeat, "emu")
    got = ot.transpose(1, 0, 2).reshape(M, N)
    ref = numerics.round_to(numerics.matmul_acc(a, w), BF16)
    return t, bool((got.view(np.uint16) == ref.view(np.uint16)).all())


def bench_binary(name: str, target: str):
    """(model, binary bytes, numpy arguments) of bench kernel `name` (bench/kernels.py) on
    `target` ("bertha" or "bertha-evt1"), compiled without the JIT's cache."""
    import torch

    import legato
    from bench.kernels import KERNELS
    from bench.runner import _model_factory, _to_numpy
    from legato.compiler import compile_kernel

    by_name = {k.name: k for k in KERNELS}
    if name not in by_name:
        raise SystemExit(f"no bench kernel {name!r}; known: {', '.join(by_name)}")
    factory = _model_factory(target)
    model = factory()
    bk = by_name[name].specialize(model)
    kernel = legato.compile(backend=factory)(bk.fn)
    binary = bytes(compile_kernel(kernel.emit_module(), model, bk.name).binary)
    return (
        model,
        binary,
        [_to_numpy(t) for t in bk.make_args(torch, torch.Generator().manual_seed(0))],
    )


def run_bench_kernels(names: list[str], targets: list[str], repeat: int) -> None:
    """Time `run_binary` (tracing off, as the JIT runs it) on bench kernels `names`: best wall
    time of `repeat` runs on fresh copies of the arguments, with that run's CPU time."""
    from legato.targets.bertha.runtime import run_binary

    for name in names:
        for target in targets:
            model, binary, np_args = bench_binary(name, target)
            res = {}

            def emulate(binary=binary, model=model, np_args=np_args, res=res):
                res["r"] = run_binary(binary, model, [a.copy() for a in np_args], trace=False)

            label = f"{name}@{target}"
            t = best(emulate, repeat, label)
            print(
                f"emulator {label:36} {t * 1e3:9.1f} ms (cpu {CPU[label] * 1e3:.0f} ms; "
                f"{res['r'].cycles} cycles)"
            )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--old", action="store_true", help="also time the previous MPU definition")
    p.add_argument("--skip-emulator", action="store_true")
    p.add_argument(
        "--kernel",
        action="append",
        help="only time the emulator on this bench kernel (bench/kernels.py; repeatable)",
    )
    p.add_argument(
        "--target",
        action="append",
        choices=("bertha", "bertha-evt1"),
        help="with --kernel: only this target (repeatable; default: both)",
    )
    ns = p.parse_args()
    if ns.kernel:
        run_bench_kernels(ns.kernel, ns.target or ["bertha", "bertha-evt1"], ns.repeat)
        return
    import torch

    ta = torch.randn(M, K).bfloat16()
    tw = torch.randn(K, N).bfloat16()
    t_torch = best(lambda: ta @ tw, max(ns.repeat, 5), "torch")
    print(
        f"torch eager [{M},{K}] @ [{K},{N}] bf16: {t_torch * 1e3:9.2f} ms "
        f"(cpu {CPU['torch'] * 1e3:.2f} ms; threads {torch.get_num_threads()})"
    )

    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, TK)).astype(BF16)
    w = rng.standard_normal((TK, TN)).astype(BF16)
    acc = rng.standard_normal((M, TN)).astype(np.float32)
    few = 8
    t = best(lambda: [numerics.mpu_matmul(a, w, acc) for _ in range(few)], ns.repeat, "mm") / few
    print(
        f"mpu_matmul [{M},{TK}]x[{TK},{TN}] acc: {t * 1e6:9.1f} us; x{MMS} = "
        f"{t * MMS * 1e3:9.2f} ms = {t * MMS / t_torch:6.1f}x torch "
        f"(cpu {CPU['mm'] / few * MMS * 1e3:.0f} ms)"
    )
    if ns.old:
        t = best(lambda: _old_matmul_acc(a, w, acc), 1, "old")
        print(
            f"old f32 sequential, same mm:        {t * 1e6:9.1f} us; x{MMS} = "
            f"{t * MMS * 1e3:9.2f} ms = {t * MMS / t_torch:6.1f}x torch"
        )

    n = 64 * 1024
    xb = rng.standard_normal(n).astype(BF16)
    yb = rng.standard_normal(n).astype(BF16)
    xf, yf = xb.astype(np.float32), yb.astype(np.float32)
    cases = [
        ("vpu add bf16", lambda: vpu.binary("add", xb, yb, BF16)),
        ("vpu mul f32", lambda: vpu.binary("mul", xf, yf, np.float32)),
        ("vpu exp bf16", lambda: vpu.unary("exp", xb, BF16)),
        ("vpu cvt f32->bf16", lambda: vpu.convert(xf, BF16)),
        ("vpu rsum [1,4096] f32", lambda: vpu.row_sum(xf[:4096].reshape(1, 4096), np.float32)),
        (
            "vpu rsum [32,4096] f32",
            lambda: vpu.row_sum(
                xf[: 32 * 4096].reshape(32, 4096) if n >= 32 * 4096 else np.resize(xf, (32, 4096)),
                np.float32,
            ),
        ),
    ]
    for name, fn in cases:
        print(f"{name:26} {best(fn, max(ns.repeat, 10), name) * 1e6:9.1f} us")

    if not ns.skip_emulator:
        t, ok = run_emulator_gemm(ns.repeat)
        print(
            f"emulator, GEMM on 32 cores (EVT0):  {t * 1e3:9.2f} ms = {t / t_torch:6.1f}x torch "
            f"(cpu {CPU['emu'] * 1e3:.0f} ms); bit-equal to numerics.matmul_acc: {ok}"
        )


if __name__ == "__main__":
    main()
