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


MANY = 32


@legato.compile(backend=bertha)
def add_sum_many(
    a0: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a1: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a2: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a3: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a4: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a5: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a6: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a7: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a8: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a9: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a10: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a11: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a12: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a13: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a14: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a15: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a16: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a17: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a18: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a19: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a20: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a21: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a22: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a23: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a24: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a25: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a26: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a27: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a28: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a29: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a30: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
    a31: legato.get_model().tensor_type(F32, [1, 64], "shared_dram"),
):
    """Each of 32 arguments gets the sum of all of them added, in place, on core 0: every
    argument's address is used at the start (its load) and at the end (its store), so 32
    table values are live at once, more than the registers hold (`backend-allocate-registers`
    copies the Instruction Table into sram instead of spilling each address)."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        args = (
            a0,
            a1,
            a2,
            a3,
            a4,
            a5,
            a6,
            a7,
            a8,
            a9,
            a10,
            a11,
            a12,
            a13,
            a14,
            a15,
            a16,
            a17,
            a18,
            a19,
            a20,
            a21,
            a22,
            a23,
            a24,
            a25,
            a26,
            a27,
            a28,
            a29,
            a30,
            a31,
        )
        xs = []
        for i in legato.static_range(MANY):
            legato.tensor.request_load(args[i], device.get_core(0), "sram", i)
        for i in legato.static_range(MANY):
            xs.append(legato.tensor.receive(args[i], i, "sram"))
        s = xs[0]
        for i in legato.static_range(1, MANY):
            s = s + xs[i]
        for i in legato.static_range(MANY):
            legato.tensor.memcpy(args[i], xs[i] + s)


def _add_sum_ref(ins):
    s = ins[0]
    for x in ins[1:]:
        s = s + x
    return [x + s for x in ins]


ADD_SUM_MANY = CorpusKernel(
    name="add_sum_many_args",
    mlir=add_sum_many.to_mlir(debuginfo=False),
    make_args=lambda rng: [rng.standard_normal((1, 64)).astype(np.float32) for _ in range(MANY)],
    reference=_add_sum_ref,
    outputs=tuple(range(MANY)),
    rtol=1e-5,
    atol=1e-5,
)

DSL_CORPUS = [RMSNORM_ROWS, DEBUG_ROWS, ADD_SUM_MANY]
