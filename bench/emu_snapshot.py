"""Record or check what the emulator reports for the chip-scale bench kernels (issue 15).

`scripts/cycle_snapshot.py` covers the differential corpus; the bench kernels (GEMM
512x4096x4096, the Llama-7B decoder layer, GEMV, RMSNorm, softmax) are the emulator's heaviest
work and its speed work must leave them bit- and cycle-identical too. Per (kernel, target):
cycles, module halt cycles, unit and port busy, DRAM bytes per channel, instruction counts, a
hash of every argument's bits after the run and a hash of the trace events (tracing on).

    .venv/bin/python bench/emu_snapshot.py -o /tmp/bench_before.json
    .venv/bin/python bench/emu_snapshot.py --check /tmp/bench_before.json [-k gemm]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def report(name: str, target: str) -> dict:
    """The emulator's report of bench kernel `name` on `target`, traced."""
    from bench.emu_speed import bench_binary
    from legato.targets.bertha.runtime import run_binary

    model, binary, args = bench_binary(name, target)
    r = run_binary(binary, model, args, trace=True)
    digest = hashlib.sha256()
    for a in args:
        digest.update(np.ascontiguousarray(a).view(np.uint8).tobytes())
    events = hashlib.sha256(json.dumps(r.trace_events, sort_keys=True).encode()).hexdigest()
    return {
        "cycles": r.cycles,
        "module_cycles": r.module_cycles,
        "unit_busy": r.unit_busy,
        "port_busy": r.port_busy,
        "dram_bytes_per_channel": r.dram_bytes_per_channel,
        "instructions": r.instructions,
        "mac_count": r.mac_count,
        "vpu_element_ops": [r.vpu_element_ops, r.vpu_transcendental_ops],
        "outputs_sha256": digest.hexdigest(),
        "trace_sha256": events,
    }


def main() -> int:
    from bench.kernels import KERNELS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output")
    p.add_argument("--check")
    p.add_argument("-k", help="only kernels whose name contains this")
    a = p.parse_args()
    snap = {}
    for k in KERNELS:
        if a.k and a.k not in k.name:
            continue
        for target in ("bertha", "bertha-evt1"):
            snap[f"{k.name}@{target}"] = report(k.name, target)
    if a.output:
        with open(a.output, "w") as f:
            json.dump(snap, f, indent=1, sort_keys=True)
        print(f"{len(snap)} reports written to {a.output}")
    if a.check:
        with open(a.check) as f:
            old = json.load(f)
        bad = [key for key, new in snap.items() if old.get(key) != new]
        for key in bad:
            fields = sorted(f for f in snap[key] if old.get(key, {}).get(f) != snap[key][f])
            print(f"CHANGED {key}: {', '.join(fields)}")
        print(f"{len(snap) - len(bad)} of {len(snap)} unchanged")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
