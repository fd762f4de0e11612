"""Corpus kernels of legato.torch.library.chip_linear's forms, called straight from a kernel on a
small SPMD model, so the differential harness runs them at every level and on the emulator:
`linear_gemm` (many rows: every core its column blocks over all rows, x's K-slabs loaded once,
the tiles streamed ahead) with a runtime row count, a bias, and more blocks than cores (the last
round's spare cores redo the last block)."""

from __future__ import annotations

import numpy as np

import legato
from legato.interp.differential import CorpusKernel
from legato.model import bertha
from legato.torch.library.chip_linear import linear_gemm

bf16 = legato.types.float("bfloat16")
BF = bf16.numpy
NC = 4  # cores
NB, KT, TN = 6, 2, 16  # 6 column blocks of 16 on 4 cores (two rounds), K = 512
ROWS = 48  # the row bound


def four_cores(ctx):
    return bertha.Bertha(ctx, "bertha", NC, False, 8, 1 << 30)


def tt(shape, memory):
    return legato.get_model().tensor_type(bf16, shape, memory)


@legato.compile(backend=four_cores)
def gemm_runtime_rows(
    x: tt(((-1, ROWS), KT * 256), "shared_dram"),
    wt: tt([NB, KT, 256, TN], "mpu_dram"),
    bias: tt([NB * TN], "shared_dram"),
    out: tt(((-1, ROWS), NB * TN), "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_all_cores():
        linear_gemm(x, wt, bias, out, True, "mpu_buffer")


def _ref(ins):
    x, wt, bias = ins[0], ins[1], ins[2]
    w = wt.permute(1, 2, 0, 3).reshape(KT * 256, NB * TN)  # wt[b, t] = W^T[256t:, TN*b:]
    return [(x.float() @ w.float() + bias.float()).bfloat16()]


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF)


CHIP_LINEAR_CORPUS = [
    CorpusKernel(
        name="chip_linear_gemm_runtime_rows",
        mlir=gemm_runtime_rows.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _bf16(rng, (37, KT * 256)),
            _bf16(rng, (NB, KT, 256, TN)),
            _bf16(rng, (NB * TN,)),
            np.zeros((37, NB * TN), BF),
        ],
        reference=_ref,
        outputs=(3,),
        model=gemm_runtime_rows.model,
    ),
]
