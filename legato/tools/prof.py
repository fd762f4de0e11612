"""`legato-prof`: profile a kernel on the emulator, per source line, against its roofline.

    legato-prof kernel.mlir -a rand -a rand:1 -a zeros [--model bertha-evt1] [--trace t.json]
    legato-prof kernel.elf -a x.npy -a zeros [--json]

The file is legato- or core-level IR (compiled here; the static estimate of its DRAM bytes,
MACs and VPU element-ops, from the core IR and these arguments' shapes, is printed before the
run), backend IR, or a Bertha binary (no IR: no estimate). Arguments as `legato-run` takes them
(`-a` per argument in signature order, or `-a NAME=VALUE`). Prints the run's cycles, roofline
terms and efficiency, then per kernel source line (from the binary's line table): instructions,
timeline cycles, stall cycles, busy cycles of the DMA, MPU and VPU, shared-DRAM bytes, MACs and
VPU element-ops. `--trace FILE` writes the Perfetto trace (microseconds at the chip's clock, a
source line on every slice). Errors are `legato-prof: error: ...`, exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from legato.errors import LegatoError
from legato.tools.run import _model, bind_args, make_arg, signature


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="legato-prof", description="Profile a Legato kernel per source line."
    )
    p.add_argument("file", help="a .mlir file (legato, core or backend level) or a binary")
    p.add_argument("-a", "--arg", action="append", default=[], help="one kernel argument")
    p.add_argument("--kernel", help="the kernel to profile when the module holds several")
    p.add_argument(
        "--model",
        "--target",
        dest="model",
        default=None,
        help="bertha (EVT0, default for IR), bertha-evt1, or bertha:NUM_CORES",
    )
    p.add_argument("--trace", help="write the Perfetto trace (JSON) to this file")
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    ns = p.parse_args(argv)
    try:
        return _prof(ns)
    except (LegatoError, OSError) as e:
        sys.stdout.flush()
        print(f"legato-prof: error: {e}", file=sys.stderr)
        return 1


def _prof(ns) -> int:
    from legato import profiler
    from legato.compiler import emit_binary, level_of, lower, lower_to_backend
    from legato.interp import api
    from legato.model import bertha
    from legato.targets.bertha import elf, runtime

    data = Path(ns.file).read_bytes()
    est = None
    if data[:4] == b"\x7fELF":
        binary = data
        meta = elf.read_elf(data)
        model = _model(ns.model) or _model(
            f"{meta.target.get('chip')}:{meta.target.get('num_cores')}"
        )
        specs = [a.type for a in meta.layout.args]
        names = [a.name for a in meta.layout.args]
        kname = meta.kernel or "kernel"
        module = None
    else:
        module = api.parse_module(data.decode(), ns.file)
        api.verify(module)
        level = level_of(module)
        model = _model(ns.model) or bertha.evt0()
        kname, specs, names = signature(module, level, ns.kernel)
    args = [make_arg(t, specs[i], i) for i, t in bind_args(ns.arg, specs, names, kname)]
    if module is not None:
        if level != "backend":
            at_core = module.clone()
            lower(at_core, model, "core")
            shapes = [tuple(a.shape) if hasattr(a, "shape") else None for a in args]
            try:
                est = profiler.estimate(at_core, model, shapes)
                if not ns.json:
                    print(f"{kname}: {est.summary()}", flush=True)
            except LegatoError as e:
                print(f"legato-prof: {e}", file=sys.stderr)
        proven = lower_to_backend(module, model)
        binary = emit_binary(module, model, proven)
    with profiler.profiling() as prof:
        runtime.run_binary(binary, model, args, trace=True)
    (result,) = prof.profiles
    result.estimate, result.kernel = est, kname
    if ns.json:
        print(json.dumps(result.as_dict(), indent=1))
    else:
        print(result.report())
    if ns.trace:
        result.write_trace(ns.trace)
        if not ns.json:
            print(f"trace: {ns.trace} (open it in https://ui.perfetto.dev)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
