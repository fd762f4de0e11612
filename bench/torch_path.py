"""Bench rows of the automatic path (issue 14): plain torch modules through
`torch.compile(backend="legato")`, measured on the emulator like the hand-written kernels.

- `torch_gemm_prefill`: nn.Linear(4096, 4096) (with bias) on x[512, 4096] bf16, against the MPU
  roofline of the same work and the hand-written `gemm_512x4096x4096`;
- `torch_linear_decode`: nn.Linear(4096, 4096, bias=False) on x[1, 4096] bf16, against the DRAM
  roofline and the hand-written `gemv_1x4096x4096`.

Cycles are the sum over the graph's Legato kernels of the second call (the first lays the
weight out); the roofline is that of the work itself (weight, activations and output moved
once, M*K*N MACs), not of the bytes the kernels happened to move. `hand_ratio` is the
hand-written kernel's cycles over ours on the same target.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class TorchRow:
    name: str
    make: Callable  # (torch) -> (module, input)
    hand: str  # the hand-written bench kernel at the same shapes
    macs: int
    ideal_bytes: int

    def measure(self, target: str, repeat: int = 1) -> dict:
        return measure(self, target, repeat)


def _linear(m: int, k: int, n: int, bias: bool):
    def make(torch):
        torch.manual_seed(0)
        lin = torch.nn.Linear(k, n, bias=bias).bfloat16()
        x = torch.randn(m, k, dtype=torch.bfloat16)
        return lin, x

    return make


def _hand_cycles(name: str, target: str) -> int:
    """Cycles of the hand-written bench kernel `name` on `target` (one compile, one run)."""
    import torch

    import legato
    from bench.kernels import KERNELS
    from bench.runner import _model_factory, _to_numpy
    from legato.compiler import compile_kernel
    from legato.targets.bertha.runtime import run_binary

    factory = _model_factory(target)
    model = factory()
    bk = next(k for k in KERNELS if k.name == name).specialize(model)
    kernel = legato.compile(backend=factory)(bk.fn)
    binary = bytes(compile_kernel(kernel.emit_module(), model, bk.name).binary)
    args = [_to_numpy(t) for t in bk.make_args(torch, torch.Generator().manual_seed(0))]
    return run_binary(binary, model, args).cycles


def measure(row: TorchRow, target: str, repeat: int = 1) -> dict:
    import torch

    from bench.runner import _best, _model_factory
    from legato.targets.bertha import timing
    from legato.torch import wrapper

    model = _model_factory(target)()
    mod, x = row.make(torch)
    g = torch.compile(mod, backend="legato", options={"legato.device": target})
    with torch.no_grad():
        t0 = time.perf_counter()
        y = g(x)
        first = time.perf_counter() - t0
        kmods = wrapper.last_wrapper().kernel_modules()
        cached = _best(lambda: g(x), repeat)
        ref = mod(x)
        torch_wall = _best(lambda: mod(x), 20)
    runs = [k.kernel.last_run for k in kmods]
    cycles = sum(r.cycles for r in runs)
    dram = sum(r.dram_bytes for r in runs)
    roof = timing.roofline(
        model,
        row.ideal_bytes,
        row.macs,
        sum(r.vpu_element_ops for r in runs),
        sum(r.vpu_transcendental_ops for r in runs),
    )
    tol = 2 * torch.finfo(torch.bfloat16).eps * ref.float().abs().clamp_min(1 / 64)
    ok = bool(((y.float() - ref.float()).abs() <= tol).all())
    hand = _hand_cycles(row.hand, target)
    secs = cycles / (model.clock_ghz * 1e9)
    return {
        "name": row.name,
        "target": target,
        "cycles": cycles,
        "roofline_cycles": roof.cycles,
        "efficiency": roof.cycles / cycles if cycles else 0.0,
        "bound": roof.bound,
        "roofline": roof.as_dict(),
        "dram_bytes": dram,
        "dram_gbps": dram / secs / 1e9 if secs else 0.0,
        "kernels": len(runs),
        "cores_running": min(
            sum(1 for k, v in r.instructions.items() if k.startswith("core") and v > 0)
            for r in runs
        ),
        "layouts": sum(k.layout_count for k in kmods),
        "hand_kernel": row.hand,
        "hand_cycles": hand,
        "hand_ratio": hand / cycles if cycles else 0.0,
        "simulated_s": secs,
        # torch.compile's first call: dynamo, aot_autograd, Legato compile, weight layout, run
        "frontend_s": 0.0,
        "compile_s": first - cached,
        "wall_s": cached,
        "torch_wall_s": torch_wall,
        "wall_ratio": cached / torch_wall if torch_wall else None,
        "first_call_s": first,
        "cached_call_s": cached,
        "disk_cached_call_s": math.nan,
        "matches_torch": ok,
        "max_abs_err_vs_torch": (y.float() - ref.float()).abs().max().item(),
    }


ROWS = [
    TorchRow(
        "torch_gemm_prefill",
        _linear(512, 4096, 4096, True),
        "gemm_512x4096x4096",
        512 * 4096 * 4096,
        (512 * 4096 + 4096 * 4096 + 4096 + 512 * 4096) * 2,
    ),
    TorchRow(
        "torch_linear_decode",
        _linear(1, 4096, 4096, False),
        "gemv_1x4096x4096",
        4096 * 4096,
        (4096 + 4096 * 4096 + 4096) * 2,
    ),
]


def main() -> None:
    import sys

    targets = sys.argv[1:] or ["bertha", "bertha-evt1"]
    for row in ROWS:
        for t in targets:
            r = measure(row, t)
            print(
                f"{r['name']:22s} {t:12s} cycles {r['cycles']:8d} roofline {r['roofline_cycles']:8d}"
                f" ({r['bound']}) eff {r['efficiency']:.1%}  hand {r['hand_cycles']} "
                f"(ratio {r['hand_ratio']:.2f})  cores {r['cores_running']}  ok {r['matches_torch']}"
                f"  first call {r['first_call_s']:.1f}s"
            )


if __name__ == "__main__":
    main()
