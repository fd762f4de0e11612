"""The emulator's fast paths (issue 15) against its reference paths, on corpus kernels that use
every synchronisation kind (DMA queues, barriers, semaphores, on-chip forwarding), both chip
generations: the same output bits, cycles, busy times, DRAM bytes and trace events.

Reference: planning every instruction again when it is popped and on every wake (what the
scheduler did before it reused plans that cannot change, `Emulator._stable`)."""

import json

import numpy as np
import pytest

from legato.compiler import compile_kernel
from legato.interp.differential import parse_module
from legato.model import bertha
from legato.targets.bertha import emulator
from legato.targets.bertha.runtime import run_binary
from tests.corpus.kernels import CORPUS

KERNELS = [
    "gemm_forwarded_slabs",
    "gemm_spmd_all_to_all",
    "decoder_layer_tiny",
    "rmsnorm_rows_multicore",
]


def _run(kernel, model):
    art = compile_kernel(parse_module(kernel.mlir, kernel.name), model)
    args = kernel.make_args(np.random.default_rng(kernel.seed))
    r = run_binary(art.binary, model, args, trace=True)
    outs = [np.ascontiguousarray(a).view(np.uint8).tobytes() for a in args if hasattr(a, "view")]
    report = (
        r.cycles,
        r.module_cycles,
        r.unit_busy,
        r.port_busy,
        r.dram_bytes_per_channel,
        r.instructions,
        json.dumps(r.trace_events, sort_keys=True),
    )
    return report, outs


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("gen", ["evt0", "evt1"])
def test_reused_plans_change_nothing(name, gen, monkeypatch):
    kernel = next(k for k in CORPUS if k.name == name)
    if kernel.model is not None and gen != "evt0":
        pytest.skip("the kernel is for one model")
    model = getattr(bertha, gen)() if kernel.model is None else kernel.get_model()
    fast = _run(kernel, model)
    monkeypatch.setattr(emulator.Emulator, "_stable", lambda self, m, plan: False)
    ref = _run(kernel, model)
    assert fast[0] == ref[0]
    assert fast[1] == ref[1]
