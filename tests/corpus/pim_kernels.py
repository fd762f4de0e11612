"""Corpus kernels: a matrix-vector product on the PIM units (docs/pim.md). The weight is an
argument in `pim_dram` (shared DRAM in the PIM layout the compiler chooses; the runtime and the
interpreters lay the caller's `[K, N]` array out when they map it), so `x @ w` lowers to
`core.pim_gemv` and then one `pim.gemv` per tile and channel. K = 4500 spans two K tiles (the
second accumulates); N = 100 is not a multiple of the 8 channels (the units' padding columns);
the evt1 chip has 16 channels and N = 2600 columns, two N tiles per unit past 2048? no: 163
columns per unit, one tile."""

import numpy as np

import legato
from legato.interp.differential import CorpusKernel
from legato.model import bertha

BF16 = legato.types.float("bfloat16")
BF = BF16.numpy


def pim_evt0(ctx):
    return bertha.Bertha(ctx, "bertha", 2, True, 8, 1 << 30)


def pim_evt1(ctx):
    return bertha.Bertha(ctx, "bertha-evt1", 2, True, 16, 1 << 30)


def make_pim_matvec(k: int, n: int, name: str):
    """`out[1, n] = x[1, n] @ w[k, n]` (bf16, fp32 accumulation rounded once) on core 0, the
    weight in pim_dram."""

    def fn(
        x: legato.get_model().tensor_type(BF16, [1, k], "shared_dram"),
        w: legato.get_model().tensor_type(BF16, [k, n], "pim_dram"),
        out: legato.get_model().tensor_type(BF16, [1, n], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        with device.get_core(0):
            xs = legato.tensor.load(x, "sram")
            legato.tensor.memcpy(out, xs @ w)

    fn.__name__ = fn.__qualname__ = name
    return fn


pim_matvec_evt0 = legato.compile(backend=pim_evt0)(make_pim_matvec(4500, 100, "pim_matvec_evt0"))
pim_matvec_evt1 = legato.compile(backend=pim_evt1)(make_pim_matvec(512, 2600, "pim_matvec_evt1"))


def _args(k, n):
    def make(rng):
        x = rng.standard_normal((1, k)).astype(np.float32).astype(BF)
        w = (rng.standard_normal((k, n)) / 16).astype(np.float32).astype(BF)
        return [x, w, np.zeros((1, n), BF)]

    return make


def _reference(ins):
    import torch

    x, w, _ = ins
    return [(x.float() @ w.float()).to(torch.bfloat16)]


PIM_CORPUS = [
    CorpusKernel(
        name=f"pim_matvec_{gen}",
        mlir=kernel.to_mlir(debuginfo=False),
        make_args=_args(k, n),
        reference=_reference,
        outputs=(2,),
        model=kernel.model,
    )
    for gen, kernel, k, n in (
        ("evt0", pim_matvec_evt0, 4500, 100),
        ("evt1", pim_matvec_evt1, 512, 2600),
    )
]


# The tiny Llama decoder layer of tests/corpus/decoder_kernels.py with its four projections on
# the PIM units (`make_decoder_layer(..., pim=True)`: the weights [K, N] in pim_dram).
def pim_four_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 4, True, 8, 1 << 30)


def _decoder():
    import torch

    from bench.decoder import make_decoder_layer
    from tests.corpus.decoder_kernels import _numpy

    bk = make_decoder_layer(256, 2, 512, 256, "decoder_layer_tiny_pim", pim=True)
    bk = bk.specialize(pim_four_cores(None))
    kernel = legato.compile(backend=pim_four_cores)(bk.fn)

    def make_args(rng):
        gen = torch.Generator().manual_seed(int(rng.integers(1 << 31)))
        return [_numpy(t) for t in bk.make_args(torch, gen)]

    return CorpusKernel(
        name="decoder_layer_tiny_pim",
        mlir=kernel.to_mlir(debuginfo=False),
        make_args=make_args,
        reference=lambda ins: list(bk.reference(torch, ins)),
        outputs=(11, 12),  # out, kv_new
        model=kernel.model,
    )


PIM_CORPUS.append(_decoder())
