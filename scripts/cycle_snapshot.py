#!/usr/bin/env python3
"""Record or check what the emulator reports for every differential-corpus kernel.

A refactoring of the compiler or the emulator must leave every cycle count, per-unit busy time,
DRAM byte count and output bit unchanged (issue 12, item 7). This script runs each corpus kernel
(`tests/corpus`) on the emulator, on both chip generations, and writes one JSON line per
(kernel, target): cycles, module halt cycles, unit busy, port busy, DRAM bytes per channel,
instruction counts and a hash of every output's bits. `--check FILE` compares a new run against
a recorded one and exits 1 naming each kernel whose report changed.

    python scripts/cycle_snapshot.py -o /tmp/before.json            # record
    python scripts/cycle_snapshot.py --check /tmp/before.json       # compare, after a change
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def _report(kernel, model) -> dict:
    from legato.compiler import compile_kernel
    from legato.interp.differential import parse_module
    from legato.targets.bertha.runtime import run_binary

    module = parse_module(kernel.mlir, kernel.name)
    art = compile_kernel(module, model)
    args = kernel.make_args(np.random.default_rng(kernel.seed))
    r = run_binary(art.binary, model, args, trace=False)
    digest = hashlib.sha256()
    for a in args:
        if isinstance(a, np.ndarray):
            digest.update(np.ascontiguousarray(a).view(np.uint8).tobytes())
    return {
        "cycles": r.cycles,
        "module_cycles": r.module_cycles,
        "unit_busy": r.unit_busy,
        "port_busy": r.port_busy,
        "dram_bytes_per_channel": r.dram_bytes_per_channel,
        "instructions": r.instructions,
        "outputs_sha256": digest.hexdigest(),
    }


def snapshot(only: str | None = None) -> dict[str, dict]:
    from legato.errors import CompileError
    from legato.model import bertha
    from tests.corpus.kernels import CORPUS

    out: dict[str, dict] = {}
    for kernel in CORPUS:
        if only and only not in kernel.name:
            continue
        models = (
            [kernel.get_model()] if kernel.model is not None else [bertha.evt0(), bertha.evt1()]
        )
        for model in models:
            key = f"{kernel.name}@{model.name}"
            try:
                out[key] = _report(kernel, model)
            except CompileError as e:  # corpus entries the pipeline cannot compile yet
                out[key] = {"compile_error": str(e).splitlines()[0]}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", help="write the snapshot to this JSON file")
    p.add_argument("--check", help="compare against this recorded snapshot")
    p.add_argument("-k", help="only kernels whose name contains this")
    a = p.parse_args()
    snap = snapshot(a.k)
    if a.output:
        with open(a.output, "w") as f:
            json.dump(snap, f, indent=1, sort_keys=True)
        print(f"{len(snap)} kernel/target reports written to {a.output}")
    if a.check:
        with open(a.check) as f:
            old = json.load(f)
        bad = []
        for key, new in snap.items():
            if key not in old:
                print(f"new: {key}")
                continue
            if old[key] != new:
                fields = sorted(
                    k for k in set(old[key]) | set(new) if old[key].get(k) != new.get(k)
                )
                bad.append(key)
                print(f"CHANGED {key}: {', '.join(fields)}")
                if "cycles" in fields:
                    print(f"    cycles {old[key].get('cycles')} -> {new.get('cycles')}")
        missing = [k for k in old if k not in snap and not a.k]
        for k in missing:
            print(f"missing: {k}")
        print(f"{len(snap) - len(bad)} of {len(snap)} unchanged")
        return 1 if bad or missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
