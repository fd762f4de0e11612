"""`python -m bench.first_table [TARGET ...]`: issue 14's first table, reproducible in one run.

Issue 14 (the automatic path "within reach of hand-written kernels") compared the hand-written
Llama decoder layer in decode (`bench/decoder.py`'s `make_decoder_layer`, the kernel of the
`decoder_layer_7b_ctx1024` row at its own shapes) with the same layer written as a plain torch
module and compiled with `torch.compile(backend="legato")` (`bench/torch_path.py`'s
`_llama_layer`), at two small shapes: hidden 256 / 2 heads / MLP 256 / 128 cached tokens and
512 / 4 / 1024 / 256 (head_dim 128 both). This script measures both, on each generation, in
the same run and prints, per shape and target: cycles, the roofline and the efficiency of
each, and the ratio torch / hand-written cycles.

The two do slightly different work, as their rows in the bench do: the hand-written kernel
takes its weights pre-tiled, its K cache transposed in blocks, and returns the new token's key
and value (`kv_new`) for the engine to append; the torch module takes nn.Linear weights
(laid out once per parameter version by the kernel module, not per call) and a
[1, heads, ctx, 128] cache, and returns the appended caches, which it writes whole. Each
roofline is the one its bench row uses: the hand-written kernel's from the DRAM bytes, MACs
and VPU operations of its run (`run_binary`'s roofline, as `python -m bench`), the torch
layer's from the work itself (`torch_path.measure`: every weight read once, the cache read
once, the appended cache written once, the run's VPU operations). Cycles of the torch layer
are its second call's (the first lays the weights out). Both are checked against torch eager.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (hidden, heads, MLP, cached tokens): issue 14's first table
SHAPES = [(256, 2, 256, 128), (512, 4, 1024, 256)]
TARGETS = ["bertha", "bertha-evt1"]


def torch_row(hidden: int, heads: int, ffn: int, ctx: int):
    """The `bench.torch_path.TorchRow` of the compiled layer at one shape (its work as
    `torch_llama7b_layer_decode`'s: the projections, q @ K^T and p @ V over ctx + 1 keys; every
    weight read once, the cache read once, the appended cache written once, x, out, cos/sin)."""
    from bench.torch_path import TorchRow, _llama_layer

    d = hidden // heads
    macs = 4 * hidden * hidden + 3 * hidden * ffn + 2 * heads * (ctx + 1) * d
    ideal = (
        (4 * hidden * hidden + 3 * hidden * ffn) * 2
        + 2 * heads * ctx * d * 2
        + 2 * heads * (ctx + 1) * d * 2
        + (4 * hidden + 4 * d) * 2
    )
    name = f"torch_layer_{hidden}x{heads}x{ffn}x{ctx}"
    return TorchRow(name, _llama_layer(hidden, heads, ffn, ctx), None, macs, ideal, rtol=2e-2)


def hand_written(hidden: int, heads: int, ffn: int, ctx: int, target: str) -> dict:
    """Cycles, roofline and agreement with torch eager of the hand-written layer at one shape
    on `target` (one compile, one run, as `bench.torch_path._hand_cycles`)."""
    import numpy as np
    import torch

    import legato
    from bench.decoder import make_decoder_layer
    from bench.runner import _model_factory, _to_numpy
    from legato.compiler import compile_kernel
    from legato.targets.bertha.runtime import run_binary

    factory = _model_factory(target)
    model = factory()
    name = f"decoder_{hidden}x{heads}x{ffn}x{ctx}"
    bk = make_decoder_layer(hidden, heads, ffn, ctx, name).specialize(model)
    kernel = legato.compile(backend=factory)(bk.fn)
    binary = bytes(compile_kernel(kernel.emit_module(), model, bk.name).binary)
    targs = bk.make_args(torch, torch.Generator().manual_seed(0))
    args = [_to_numpy(t) for t in targs]
    run = run_binary(binary, model, args)
    out = torch.from_numpy(args[bk.out_index].view(np.int16)).view(torch.bfloat16)
    ref = bk.torch_fn(torch, targs)
    ok = torch.allclose(out.float(), ref.float(), rtol=bk.rtol, atol=bk.rtol)
    return {
        "cycles": run.cycles,
        "roofline_cycles": run.roofline_cycles,
        "efficiency": run.efficiency,
        "bound": run.roofline.bound,
        "matches_torch": bool(ok),
    }


def measure(shape, target: str) -> dict:
    """One row of the table: the hand-written and the compiled layer at `shape` on `target`."""
    from bench.torch_path import measure as torch_measure

    hand = hand_written(*shape, target)
    ours = torch_measure(torch_row(*shape), target)
    return {
        "shape": "/".join(map(str, shape)),
        "target": target,
        "hand": hand,
        "torch": {k: ours[k] for k in (*hand, "kernels")},
        "ratio": ours["cycles"] / hand["cycles"],
    }


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = (
        "| hidden/heads/MLP/ctx | target | hand-written cycles | roofline | eff | "
        "torch.compile cycles | roofline | eff | kernels | torch / hand | ok |"
    )
    lines = [head, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        h, t = r["hand"], r["torch"]
        ok = "yes" if h["matches_torch"] and t["matches_torch"] else "NO"
        lines.append(
            f"| {r['shape']} | {r['target']} | {h['cycles']} | {h['roofline_cycles']} "
            f"({h['bound']}) | {h['efficiency']:.1%} | {t['cycles']} | {t['roofline_cycles']} "
            f"({t['bound']}) | {t['efficiency']:.1%} | {t['kernels']} | {r['ratio']:.2f} | {ok} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    targets = (sys.argv[1:] if argv is None else argv) or TARGETS
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        sys.exit(f"python -m bench.first_table: unknown target {unknown[0]!r} (of {TARGETS})")
    rows = [measure(s, t) for s in SHAPES for t in targets]
    print(table(rows))
    return 0 if all(r["hand"]["matches_torch"] and r["torch"]["matches_torch"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
