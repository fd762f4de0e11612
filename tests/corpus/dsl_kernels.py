"""Corpus kernels written in the Legato DSL itself (their legato IR comes from the frontend).

They exercise what hand-written IR entries do not: several cores each taking a static slice of
an argument and writing a slice of the output (so the output is written through a view).
"""

from __future__ import annotations

import numpy as np
import torch

import legato
from legato.interp.differential import CorpusKernel
from legato.model import bertha

BF16 = legato.types.float("bfloat16")
F32 = legato.types.float("float32")
ROWS, HIDDEN = 4, 256


@legato.compile(backend=bertha)
def rmsnorm_rows(
    x: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
    w: legato.get_model().tensor_type(BF16, [1, HIDDEN], "shared_dram"),
    out: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
):
    """RMSNorm, one row per core: core i reads row i and writes row i of `out`."""
    device = legato.get_context().get_device()
    row = legato.get_model().tensor_type(BF16, [1, HIDDEN], "sram")
    with device.get_top():
        for i in legato.static_range(ROWS):
            legato.tensor.request_load(x[i : i + 1, :], device.get_core(i), "sram")
            legato.tensor.request_load(w, device.get_core(i), "sram", 1)
    for i in legato.static_range(ROWS):
        with device.get_core(i):
            xi = legato.tensor.cast(legato.tensor.receive_type(row, 0, None, "sram"), F32)
            wi = legato.tensor.cast(legato.tensor.receive_type(row, 1, None, "sram"), F32)
            ms = legato.tensor.mean(xi * xi, 1, keepdim=True)
            y = xi * legato.tensor.rsqrt(ms + 1e-6) * wi
            legato.tensor.memcpy(out[i : i + 1, :], legato.tensor.cast(y, BF16))


def _rmsnorm_ref(x, w):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * w.float()).bfloat16()


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF16.numpy)


RMSNORM_ROWS = CorpusKernel(
    name="rmsnorm_rows_multicore",
    mlir=rmsnorm_rows.to_mlir(debuginfo=False),
    make_args=lambda rng: [
        _bf16(rng, (ROWS, HIDDEN)),
        _bf16(rng, (1, HIDDEN)),
        np.zeros((ROWS, HIDDEN), BF16.numpy),
    ],
    reference=lambda ins: [_rmsnorm_ref(ins[0], ins[1])],
    outputs=(2,),
)


@legato.compile(backend=bertha)
def debug_rows(
    x: legato.get_model().tensor_type(F32, [2, 64], "shared_dram"),
    out: legato.get_model().tensor_type(F32, [2, 64], "shared_dram"),
):
    """exp(x - max(x)) per row, one row per core, with the kernel debugging builtins: each core
    prints its row's max and the head of the result, and asserts the result is at
    most 1 (`legato.device_print` / `legato.device_assert`, docs/language.md, *Debugging*)."""
    device = legato.get_context().get_device()
    row = legato.get_model().tensor_type(F32, [1, 64], "sram")
    with device.get_top():
        for i in legato.static_range(2):
            legato.tensor.request_load(x[i : i + 1, :], device.get_core(i), "sram")
    for i in legato.static_range(2):
        with device.get_core(i):
            xi = legato.tensor.receive_type(row, 0, None, "sram")
            m = legato.tensor.amax(xi, 1, keepdim=True)
            legato.device_print("row", i, "max", m)
            y = legato.tensor.exp(xi - m)
            legato.device_print("head", y[:, 0:4])
            legato.device_assert(y <= 1.0, "exp(x - max) is at most 1")
            legato.tensor.memcpy(out[i : i + 1, :], y)


DEBUG_ROWS = CorpusKernel(
    name="debug_print_rows",
    mlir=debug_rows.to_mlir(debuginfo=False),
    make_args=lambda rng: [
        rng.standard_normal((2, 64)).astype(np.float32),
        np.zeros((2, 64), np.float32),
    ],
    reference=lambda ins: [torch.exp(ins[0] - ins[0].amax(-1, keepdim=True))],
    outputs=(1,),
    rtol=1e-5,
    atol=1e-6,
)

DSL_CORPUS = [RMSNORM_ROWS, DEBUG_ROWS]
