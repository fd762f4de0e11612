"""Corpus kernels of the vLLM plugin's own ops (plugins/vllm-legato/vllm_legato/ops.py: plain
legato kernels, importable without vLLM) on a small SPMD model, so the differential harness runs
them at every level and on the emulator against torch: the f32 projection in six bf16 MPU
passes, the fused gate/up projection with SiLU-and-mul (bf16), the token embedding, SiLU-and-mul
and the neox rotary."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import torch

from legato.interp.differential import CorpusKernel
from tests.corpus import rotary
from tests.corpus.chip_linear_kernels import four_cores

_PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "vllm-legato"
if str(_PLUGIN) not in sys.path:
    sys.path.insert(0, str(_PLUGIN))

from vllm_legato import ops  # noqa: E402 - the plugin's path first

BF = ml_dtypes.bfloat16
ROWS = 16  # the token bound
T = 11  # the runtime token count


def _rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def _f32_linear() -> CorpusKernel:
    k, n, nb = 64, 48, 4  # K = 64: a projection chip_linear refuses (not a 256-row tile)
    kernel = ops.linear_kernel("float32", ROWS, k, n, nb, True, four_cores)

    def make_args(rng):
        w = _rand(rng, (n, k))
        return [
            _rand(rng, (T, k)),
            ops.lay_weight(torch.from_numpy(w), nb).numpy(),
            _rand(rng, (n,)),
            np.zeros((T, n), np.float32),
        ]

    def reference(ins):
        x, wt, b = (t.double() for t in ins[:3])
        w = wt.permute(1, 0, 2).reshape(k, n)  # lay_weight's inverse: W^T
        return [(x @ w + b).float()]  # the exact product: the six passes are ~2^-24 off

    return CorpusKernel(
        name="plugin_linear_f32_six_pass",
        mlir=kernel.to_mlir(debuginfo=False),
        make_args=make_args,
        reference=reference,
        outputs=(3,),
        model=kernel.model,
        rtol=1e-6,
        atol=1e-6,
    )


def _gated_linear() -> CorpusKernel:
    k, n, nb = 128, 64, 4  # [gate | up], 2 blocks each: out [T, 32]
    kernel = ops.linear_kernel("bfloat16", ROWS, k, n, nb, False, four_cores, gated=True)

    def make_args(rng):
        w = _rand(rng, (n, k), BF)
        return [
            _rand(rng, (T, k), BF),
            ops.lay_weight(torch.from_numpy(w.astype(np.float32)), nb).numpy().astype(BF),
            np.zeros((n,), BF),
            np.zeros((T, n // 2), BF),
        ]

    def reference(ins):
        x, wt = ins[0].float(), ins[1].float()
        gu = (x @ wt.permute(1, 0, 2).reshape(k, n)).bfloat16()
        g, u = gu[:, : n // 2], gu[:, n // 2 :]
        return [torch.nn.functional.silu(g) * u]

    return CorpusKernel(
        name="plugin_linear_silu_and_mul_bf16",
        mlir=kernel.to_mlir(debuginfo=False),
        make_args=make_args,
        reference=reference,
        outputs=(3,),
        model=kernel.model,
    )


def _embedding() -> CorpusKernel:
    vocab, hidden = 40, 64
    kernel = ops.embedding_kernel("bfloat16", ROWS, vocab, hidden, four_cores)

    def make_args(rng):
        ids = rng.integers(0, vocab, (T, 1)).astype(np.int64)
        return [ids, _rand(rng, (vocab, hidden), BF), np.zeros((T, hidden), BF)]

    return CorpusKernel(
        name="plugin_embedding_bf16",
        mlir=kernel.to_mlir(debuginfo=False),
        make_args=make_args,
        reference=lambda ins: [torch.nn.functional.embedding(ins[0][:, 0].long(), ins[1])],
        outputs=(2,),
        model=kernel.model,
        rtol=0.0,
        atol=0.0,
    )


def _silu_and_mul() -> CorpusKernel:
    d = 48
    kernel = ops.silu_and_mul_kernel("bfloat16", ROWS, d, four_cores)
    return CorpusKernel(
        name="plugin_silu_and_mul_bf16",
        mlir=kernel.to_mlir(debuginfo=False),
        make_args=lambda rng: [_rand(rng, (T, 2 * d), BF), np.zeros((T, d), BF)],
        reference=lambda ins: [torch.nn.functional.silu(ins[0][:, :d]) * ins[0][:, d:]],
        outputs=(1,),
        model=kernel.model,
    )


def _rotary() -> CorpusKernel:
    positions, hq, hk, d, rot = 32, 4, 2, 32, 16  # a partial rotary: the last 16 dims kept
    kernel = ops.rotary_neox_kernel("float32", ROWS, positions, hq, hk, d, rot, four_cores)
    cos_sin = rotary.cos_sin_cache(positions, rot).numpy()

    def make_args(rng):
        pos = rng.integers(0, positions, (T, 1)).astype(np.int64)
        return [
            pos,
            _rand(rng, (T, hq * d)),
            _rand(rng, (T, hk * d)),
            cos_sin,
            np.zeros((T, hq * d), np.float32),
            np.zeros((T, hk * d), np.float32),
        ]

    def rotate(x, pos, cs, heads):
        return rotary.rotate(x.reshape(T, heads, d), pos[:, 0].long(), cs, rot).reshape(
            T, heads * d
        )

    return CorpusKernel(
        name="plugin_rotary_neox_f32",
        mlir=kernel.to_mlir(debuginfo=False),
        make_args=make_args,
        reference=lambda ins: [
            rotate(ins[1], ins[0], ins[3], hq),
            rotate(ins[2], ins[0], ins[3], hk),
        ],
        outputs=(4, 5),
        model=kernel.model,
        rtol=1e-6,
        atol=1e-6,
    )


PLUGIN_CORPUS = [_f32_linear(), _gated_linear(), _embedding(), _silu_and_mul(), _rotary()]
