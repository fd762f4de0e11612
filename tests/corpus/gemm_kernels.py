"""Corpus kernel: a small instance of the bench GEMM (`bench/gemm.py`, issue 5) on a 4-core chip,
with the full size's structure: one program per core, a loader per group of two cores reading
column slabs of A (strided `dma2d`) and forwarding them core to core through reused receive
buffers (credits), weight tiles streamed into mpu_buffer, `acc + a @ w` accumulated by the MPU,
and column blocks of the output written with `dma2d`. Five K tiles, so every receive ring wraps.
Also its SPMD form (`make_gemm_spmd`): one all-cores program whose cores exchange row blocks
all-to-all within a group (sends to a runtime core, rings with credits).
"""

from __future__ import annotations

import numpy as np

import legato
from bench.gemm import TK, make_gemm, make_gemm_spmd
from legato.interp.differential import CorpusKernel
from legato.model import bertha

BF = legato.types.float("bfloat16").numpy
NC, M, K, N = 4, 32, 5 * TK, 256


def four_cores(ctx):
    return bertha.Bertha(ctx, "bertha", NC, False, 8, 1 << 30)


GEMM_SMALL = make_gemm(M, K, N, "gemm_small", num_cores=NC, group=2)
gemm_small = legato.compile(backend=four_cores)(GEMM_SMALL.fn)
# the SPMD form: one program; the two cores of a group exchange their row blocks all-to-all
GEMM_SPMD_SMALL = make_gemm_spmd(M, K, N, "gemm_spmd_small", num_cores=NC, group=2)
gemm_spmd_small = legato.compile(backend=four_cores)(GEMM_SPMD_SMALL.fn)


def _args(rng):
    a = rng.standard_normal((M, K)).astype(np.float32).astype(BF)
    wt = (rng.standard_normal((NC, K // TK, TK, N // NC)) / 16).astype(np.float32).astype(BF)
    return [a, wt, np.zeros((M, N), BF)]


def _reference(ins):
    import torch

    return [GEMM_SMALL.torch_fn(torch, ins)]


GEMM_CORPUS = [
    CorpusKernel(
        name="gemm_forwarded_slabs",
        mlir=gemm_small.to_mlir(debuginfo=False),
        make_args=_args,
        reference=_reference,
        outputs=(2,),
        model=gemm_small.model,
    ),
    CorpusKernel(
        name="gemm_spmd_all_to_all",
        mlir=gemm_spmd_small.to_mlir(debuginfo=False),
        make_args=_args,
        reference=_reference,
        outputs=(2,),
        model=gemm_spmd_small.model,
    ),
]
