"""The static estimate of a kernel on the PIM units (`core.pim_gemv`) agrees with the emulator:
x's and the result's bytes over the channels, the weight bytes the units read inside them, and
so the PIM-aware roofline. The PIM corpus kernels: two K tiles with padding columns on EVT0,
sixteen channels on EVT1, and the tiny decoder layer with its projections on PIM."""

from __future__ import annotations

import numpy as np
import pytest

from legato.compiler import compile_kernel, lower
from legato.interp.differential import parse_module
from legato.profiler import estimate
from legato.targets.bertha.runtime import run_binary
from tests.corpus.pim_kernels import PIM_CORPUS


@pytest.mark.parametrize("kernel", PIM_CORPUS, ids=lambda k: k.name)
def test_static_estimate_counts_pim_as_the_emulator_does(kernel):
    model = kernel.get_model()
    art = compile_kernel(parse_module(kernel.mlir, kernel.name), model)
    core = parse_module(kernel.mlir, kernel.name)
    lower(core, model, "core")
    args = kernel.make_args(np.random.default_rng(kernel.seed))
    shapes = [tuple(a.shape) if isinstance(a, np.ndarray) else None for a in args]
    est = estimate(core, model, shapes)
    run = run_binary(art.binary, model, args, trace=False)
    assert run.pim_bytes > 0
    assert (est.dram_bytes, est.pim_bytes, est.macs, est.vpu_ops) == (
        run.dram_bytes,
        run.pim_bytes,
        run.mac_count,
        run.vpu_element_ops,
    )
    assert est.roofline == run.roofline
    assert f"PIM bytes {run.pim_bytes}" in est.summary()
