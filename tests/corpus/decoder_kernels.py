"""A tiny Llama decoder layer in decode (`bench/decoder.py`, the issue 5 bench kernel) on a
4-core Bertha: hidden 256 (2 heads of 128), MLP 512, a cache of 256 tokens. Every phase of the
full-size kernel runs (uneven tile ranges over the cores, split-KV attention with 2 cores per
head, the partial-sum slots, seven barriers), small enough for the interpreters."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

import legato
from bench.decoder import make_decoder_layer
from legato.interp.differential import CorpusKernel
from legato.model import bertha

NC = 4


def four_cores(ctx):
    return bertha.Bertha(ctx, "bertha", NC, False, 8, 1 << 30)


_BK = make_decoder_layer(256, 2, 512, 256, "decoder_layer_tiny").specialize(four_cores(None))
decoder_layer_tiny = legato.compile(backend=four_cores)(_BK.fn)


def _numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.numpy().copy()


def _args(rng: np.random.Generator) -> list[np.ndarray]:
    gen = torch.Generator().manual_seed(int(rng.integers(1 << 31)))
    return [_numpy(t) for t in _BK.make_args(torch, gen)]


DECODER_CORPUS = [
    CorpusKernel(
        name="decoder_layer_tiny",
        mlir=decoder_layer_tiny.to_mlir(debuginfo=False),
        make_args=_args,
        reference=lambda ins: list(_BK.reference(torch, ins)),
        outputs=(11, 12),  # out, kv_new
        model=decoder_layer_tiny.model,
    ),
]
