"""A/B of the emulator in two source trees, in one run, interleaved (issue 15):

    .venv/bin/python bench/emu_trees.py BEFORE_TREE AFTER_TREE [--kernel K ...] [--target T ...]
        [--rounds R] [--repeat N] [--before-env NAME=VALUE ...] [--after-env NAME=VALUE ...]

Each tree is a checkout of this repository with its compiled helpers built (e.g.
`git archive COMMIT | tar -x -C DIR`, then `python -m legato.targets.bertha.native_build` there).
For every kernel and target, R rounds alternate the trees; each round runs one child process per
tree (its own `PYTHONPATH`, so both trees' modules never mix) that compiles the bench kernel
(bench/emu_speed.py's `bench_binary`) and times `run_binary` as the JIT calls it (tracing off)
N times on fresh copies of the arguments. Printed per tree: the least CPU time (`process_time`)
and the least wall time over all its runs, the cycle count, and a hash of every argument's bytes
after the run (outputs included); the two trees' cycles and hashes must agree, else the row says
DIFFERENT. Under load the CPU time is the fairer comparison. `--before-env` / `--after-env` set
environment variables in one side's children: the same tree twice with
`--before-env LEGATO_NATIVE_LOOP=0 --after-env LEGATO_NATIVE_LOOP=1` compares the Python and the
compiled scheduler loop (`Emulator.native_loop`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import hashlib, json, sys, time
from bench.emu_speed import bench_binary
from legato.targets.bertha.runtime import run_binary
name, target, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
model, binary, np_args = bench_binary(name, target)
cpu, wall = [], []
for _ in range(repeat):
    args = [a.copy() for a in np_args]
    c0, w0 = time.process_time(), time.perf_counter()
    res = run_binary(binary, model, args, trace=False)
    wall.append(time.perf_counter() - w0)
    cpu.append(time.process_time() - c0)
h = hashlib.sha256()
for a in args:
    h.update(a.tobytes())
print(json.dumps({"cpu": min(cpu), "wall": min(wall), "cycles": res.cycles,
                  "instructions": sum(res.instructions.values()), "hash": h.hexdigest()[:16]}))
"""

from emu_host import DEFAULT_KERNELS  # noqa: E402  the kernels emu_host compares with torch


def _child(tree: str, kernel: str, target: str, repeat: int, extra: dict | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, **(extra or {}))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kernel, target, str(repeat)],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _ms(seconds: float) -> str:
    """Milliseconds, with two decimals below 10 ms (softmax's, RMSNorm's ~1 ms runs)."""
    ms = seconds * 1e3
    return f"{ms:.2f}" if ms < 10 else f"{ms:.0f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--kernel", action="append")
    p.add_argument("--target", action="append")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--before-env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--after-env", action="append", default=[], metavar="NAME=VALUE")
    a = p.parse_args()
    trees = [os.path.abspath(a.before), os.path.abspath(a.after)]
    envs = [dict(e.split("=", 1) for e in a.before_env), dict(e.split("=", 1) for e in a.after_env)]
    print(
        "| kernel | target | instructions | before ms (CPU) | after ms (CPU) | CPU change | same |"
    )
    print("|---|---|--:|--:|--:|--:|---|")
    for kernel in a.kernel or DEFAULT_KERNELS:
        for target in a.target or ["bertha", "bertha-evt1"]:
            best: list[dict | None] = [None, None]
            for _ in range(a.rounds):
                for i, tree in enumerate(trees):
                    r = _child(tree, kernel, target, a.repeat, envs[i])
                    if best[i] is None or r["cpu"] < best[i]["cpu"]:
                        best[i] = r
            b, f = best
            same = b["cycles"] == f["cycles"] and b["hash"] == f["hash"]
            change = (f["cpu"] / b["cpu"] - 1) * 100
            print(
                f"| {kernel} | {target} | {f['instructions']} | {_ms(b['cpu'])} | "
                f"{_ms(f['cpu'])} | {change:+.0f}% | "
                f"{'yes' if same else 'DIFFERENT'} ({f['cycles']} cycles) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
