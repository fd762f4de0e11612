"""Corpus kernels for the torch library ops that issue 13 moved off the eager path, written
with their `legato.torch.library` implementations: pow with a number as exponent (repeated
squaring; exp(e log|x|) with C's pow special cases) and as base; where with a bool condition
that broadcasts (HF's [B, 1, S, T] causal mask against [B, H, S, T] scores); reductions over
several (not all) dims; a comparison returned as a bool tensor (vpu.cvt to i1) and a product
by a bool mask."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

import legato
from legato.interp.differential import CorpusKernel
from legato.model import bertha
from legato.torch.library.aten import (
    compare_bool,
    mul_by_mask,
    reduce_dims,
    reduce_seq,
    where_broadcast,
)
from legato.torch.library.composite import pow_of_number, pow_scalar

BF16 = legato.types.float("bfloat16")
F32 = legato.types.float("float32")
I1 = legato.types.i1
T = legato.get_model

_SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -2.5, 2.5, 1e-3, -7.0, 40.0]


@legato.compile(backend=bertha)
def pow_int_f32(
    x: T().tensor_type(F32, [4, 64], "shared_dram"),
    out: T().tensor_type(F32, [4, 64], "shared_dram"),
):
    """x ** -5 (`composite.pow_scalar` "int": x^5 by repeated squaring, then 1 / r)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        legato.tensor.memcpy(out, pow_scalar(x, "int", -5.0, 5, True, False, False, None))


@legato.compile(backend=bertha)
def pow_real_bf16(
    x: T().tensor_type(BF16, [4, 64], "shared_dram"),
    out: T().tensor_type(BF16, [4, 64], "shared_dram"),
):
    """x ** 1.75 in bf16 (`pow_scalar` "real": exp(e log|x|) in f32, NaN for a finite
    negative x, rounded once)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        legato.tensor.memcpy(out, pow_scalar(x, "real", 1.75, 0, False, False, True, None))


@legato.compile(backend=bertha)
def pow_odd_big_f32(
    x: T().tensor_type(F32, [4, 64], "shared_dram"),
    out: T().tensor_type(F32, [4, 64], "shared_dram"),
):
    """x ** 67 (`pow_scalar` "big_int": exp(e log|x|), negated for a negative x or -0)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        legato.tensor.memcpy(out, pow_scalar(x, "big_int", 67.0, 0, False, True, False, None))


@legato.compile(backend=bertha)
def pow_base_f32(
    y: T().tensor_type(F32, [4, 64], "shared_dram"),
    out: T().tensor_type(F32, [4, 64], "shared_dram"),
):
    """(-2.0) ** y (`composite.pow_of_number`: pow_tensors of the filled base)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(y, device.get_core(0), "sram")
    with device.get_core(0):
        y = legato.tensor.receive(y, 0, "sram")
        legato.tensor.memcpy(out, pow_of_number(-2.0, y, False, (4, 64)))


@legato.compile(backend=bertha)
def where_causal_bf16(
    c: T().tensor_type(I1, [2, 1, 8, 16], "shared_dram"),
    x: T().tensor_type(BF16, [2, 4, 8, 16], "shared_dram"),
    out: T().tensor_type(BF16, [2, 4, 8, 16], "shared_dram"),
):
    """torch.where(c, x, -inf) with c [2, 1, 8, 16] broadcast over the 4 heads
    (`aten.where_broadcast`: a 1.0 / 0.0 mask at c's shape, which the select broadcasts)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(c, device.get_core(0), "sram", 0)
        legato.tensor.request_load(x, device.get_core(0), "sram", 1)
    with device.get_core(0):
        c = legato.tensor.receive(c, 0, "sram")
        x = legato.tensor.receive(x, 1, "sram")
        y = where_broadcast(c, x, float("-inf"), (2, 1, 8, 16), (2, 1, 8, 16), BF16)
        legato.tensor.memcpy(out, y)


@legato.compile(backend=bertha)
def where_causal_dynamic_f32(
    c: T().tensor_type(I1, [1, 1, 8, (-1, 32)], "shared_dram"),
    x: T().tensor_type(F32, [2, 4, 8, (-1, 32)], "shared_dram"),
    out: T().tensor_type(F32, [2, 4, 8, (-1, 32)], "shared_dram"),
):
    """torch.where(c, x, -inf) with a key length known at run time (a dynamic decode graph):
    the 1.0 / 0.0 mask is made from zeros filled flat at the bound and viewed at c's runtime
    element count (`aten._zeros_like_cond`)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(c, device.get_core(0), "sram", 0)
        legato.tensor.request_load(x, device.get_core(0), "sram", 1)
    with device.get_core(0):
        c = legato.tensor.receive(c, 0, "sram")
        x = legato.tensor.receive(x, 1, "sram")
        shape = (1, 1, 8, (-1, 32))
        y = where_broadcast(c, x, float("-inf"), shape, shape, F32)
        legato.tensor.memcpy(out, y)


@legato.compile(backend=bertha)
def mean_dynamic_dims12_f32(
    x: T().tensor_type(F32, [2, (-1, 16), 8], "shared_dram"),
    out: T().tensor_type(F32, [2], "shared_dram"),
):
    """x.mean((1, 2)) with dim 1 known at run time (`aten.reduce_seq`: dim 2, then dim 1,
    one f32 division by 8 * the runtime length, that length a sum of ones on the chip)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        y = reduce_seq(x, "mean", (2, 1), False, (8, 1, 16), None)
        legato.tensor.memcpy(out, y)


@legato.compile(backend=bertha)
def sum_dynamic_all_keepdim_bf16(
    x: T().tensor_type(BF16, [(-1, 16), 4, 8], "shared_dram"),
    out: T().tensor_type(BF16, [1, 1, 1], "shared_dram"),
):
    """x.sum(keepdim=True) of a dynamic-length bf16 x (`aten.reduce_seq`: every dim in f32,
    the last keeping its dim, rounded once, reshaped to the keepdim shape)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        y = reduce_seq(x, "sum", (2, 1, 0), True, (32, None, None), (1, 1, 1))
        legato.tensor.memcpy(out, y)


@legato.compile(backend=bertha)
def sum_dims13_bf16(
    x: T().tensor_type(BF16, [2, 3, 4, 16], "shared_dram"),
    out: T().tensor_type(BF16, [2, 1, 4, 1], "shared_dram"),
):
    """x.sum((1, 3), keepdim=True) (`aten.reduce_dims`: dims 1 and 3 moved last, merged into
    one of 48, summed in f32 and rounded once)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        y = reduce_dims(x, "sum", (0, 2, 1, 3), (2, 4, 48), 2, (2, 1, 4, 1))
        legato.tensor.memcpy(out, y)


@legato.compile(backend=bertha)
def amin_dims12_f32(
    x: T().tensor_type(F32, [2, 3, 4, 16], "shared_dram"),
    out: T().tensor_type(F32, [2, 16], "shared_dram"),
):
    """x.amin((1, 2)) (`aten.reduce_dims`: adjacent dims merged in place, no transpose)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        legato.tensor.memcpy(out, reduce_dims(x, "amin", None, (2, 12, 16), 1, (2, 16)))


@legato.compile(backend=bertha)
def le_bool_bf16(
    a: T().tensor_type(BF16, [4, 64], "shared_dram"),
    b: T().tensor_type(BF16, [64], "shared_dram"),
    out: T().tensor_type(I1, [4, 64], "shared_dram"),
):
    """a <= b as a bool tensor (`aten.compare_bool`: the float mask, b broadcast per row,
    converted to i1 by vpu.cvt: true where nonzero)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram", 0)
        legato.tensor.request_load(b, device.get_core(0), "sram", 1)
    with device.get_core(0):
        a = legato.tensor.receive(a, 0, "sram")
        b = legato.tensor.receive(b, 1, "sram")
        legato.tensor.memcpy(out, compare_bool(a, b, "le"))


@legato.compile(backend=bertha)
def mul_mask_f32(
    m: T().tensor_type(I1, [1, 64], "shared_dram"),
    x: T().tensor_type(F32, [4, 64], "shared_dram"),
    out: T().tensor_type(F32, [4, 64], "shared_dram"),
):
    """x * m for a bool m [1, 64] broadcast over the rows (`aten.mul_by_mask`: where(m, x,
    x * 0.0), torch's x * m.float() bit for bit)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(m, device.get_core(0), "sram", 0)
        legato.tensor.request_load(x, device.get_core(0), "sram", 1)
    with device.get_core(0):
        m = legato.tensor.receive(m, 0, "sram")
        x = legato.tensor.receive(x, 1, "sram")
        legato.tensor.memcpy(out, mul_by_mask(m, x, (1, 64), (1, 64), F32))


def _le_args(rng):
    a = _bf16(rng, (4, 64))
    b = _bf16(rng, (64,))
    a[0, :4], b[:4] = [np.nan, 1.0, -0.0, np.inf], [0.0, 1.0, 0.0, np.inf]
    return [a, b, np.zeros((4, 64), np.bool_)]


def _mul_mask_args(rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    x[:, :4] = [np.inf, -np.inf, np.nan, -1.0]
    return [rng.random((1, 64)) > 0.5, x, np.zeros((4, 64), np.float32)]


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(ml_dtypes.bfloat16)


def _where_causal_args(rng):
    c = np.tril(np.ones((8, 16), bool), 8)[None, None].repeat(2, 0)
    c[1, 0, :, :3] = False
    x = rng.standard_normal((2, 4, 8, 16)).astype(np.float32).astype(ml_dtypes.bfloat16)
    return [c, x, np.zeros((2, 4, 8, 16), ml_dtypes.bfloat16)]


def _where_dynamic_args(rng):
    c = np.tril(np.ones((8, 13), bool), 5)[None, None]
    c[0, 0, 2, :4] = False
    x = rng.standard_normal((2, 4, 8, 13)).astype(np.float32)
    return [c, x, np.zeros((2, 4, 8, 13), np.float32)]


def _pow_args(dtype, scale=2.0):
    def make(rng):
        x = (rng.standard_normal((4, 64)) * scale).astype(np.float32)
        x[0, : len(_SPECIAL)] = _SPECIAL
        return [x.astype(dtype), np.zeros((4, 64), dtype)]

    return make


def _base_args(rng):
    y = np.round(rng.standard_normal((4, 64)) * 4).astype(np.float32)
    y[1] += 0.5  # non-integer exponents of a negative base: NaN
    y[0, : len(_SPECIAL)] = _SPECIAL
    return [y, np.zeros((4, 64), np.float32)]


TORCH_OP_CORPUS = [
    CorpusKernel(
        name="le_bool_output_bf16",
        mlir=le_bool_bf16.to_mlir(debuginfo=False),
        make_args=_le_args,
        reference=lambda ins: [ins[0] <= ins[1]],
        outputs=(2,),
        atol=0.0,
        rtol=0.0,
    ),
    CorpusKernel(
        name="mul_by_bool_mask_f32",
        mlir=mul_mask_f32.to_mlir(debuginfo=False),
        make_args=_mul_mask_args,
        reference=lambda ins: [ins[1] * ins[0]],
        outputs=(2,),
        atol=0.0,
        rtol=0.0,
    ),
    CorpusKernel(
        name="sum_dims13_keepdim_bf16",
        mlir=sum_dims13_bf16.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            (rng.standard_normal((2, 3, 4, 16)) * 3).astype(np.float32).astype(ml_dtypes.bfloat16),
            np.zeros((2, 1, 4, 1), ml_dtypes.bfloat16),
        ],
        reference=lambda ins: [ins[0].float().sum((1, 3), keepdim=True)],
        outputs=(1,),
    ),
    CorpusKernel(
        name="amin_dims12_f32",
        mlir=amin_dims12_f32.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            rng.standard_normal((2, 3, 4, 16)).astype(np.float32),
            np.zeros((2, 16), np.float32),
        ],
        reference=lambda ins: [ins[0].amin((1, 2))],
        outputs=(1,),
        atol=0.0,
        rtol=0.0,
    ),
    CorpusKernel(
        name="where_causal_broadcast_bf16",
        mlir=where_causal_bf16.to_mlir(debuginfo=False),
        make_args=_where_causal_args,
        reference=lambda ins: [torch.where(ins[0], ins[1], float("-inf"))],
        outputs=(2,),
        atol=0.0,
        rtol=0.0,
    ),
    CorpusKernel(
        name="where_causal_dynamic_length_f32",
        mlir=where_causal_dynamic_f32.to_mlir(debuginfo=False),
        make_args=_where_dynamic_args,
        reference=lambda ins: [torch.where(ins[0], ins[1], float("-inf"))],
        outputs=(2,),
        atol=0.0,
        rtol=0.0,
    ),
    CorpusKernel(
        name="mean_dynamic_dims12_f32",
        mlir=mean_dynamic_dims12_f32.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            rng.standard_normal((2, 11, 8)).astype(np.float32),
            np.zeros((2,), np.float32),
        ],
        reference=lambda ins: [ins[0].mean((1, 2))],
        outputs=(1,),
        rtol=1e-5,
        atol=1e-6,
    ),
    CorpusKernel(
        name="sum_dynamic_all_keepdim_bf16",
        mlir=sum_dynamic_all_keepdim_bf16.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _bf16(rng, (13, 4, 8)),
            np.zeros((1, 1, 1), ml_dtypes.bfloat16),
        ],
        reference=lambda ins: [ins[0].float().sum().reshape(1, 1, 1)],
        outputs=(1,),
    ),
    CorpusKernel(
        name="pow_int_neg5_f32",
        mlir=pow_int_f32.to_mlir(debuginfo=False),
        make_args=_pow_args(np.float32),
        reference=lambda ins: [torch.pow(ins[0], -5)],
        outputs=(1,),
        rtol=1e-5,
        atol=1e-30,
    ),
    CorpusKernel(
        name="pow_real_bf16",
        mlir=pow_real_bf16.to_mlir(debuginfo=False),
        make_args=_pow_args(ml_dtypes.bfloat16),
        reference=lambda ins: [torch.pow(ins[0], 1.75)],
        outputs=(1,),
    ),
    CorpusKernel(
        name="pow_odd_big_f32",
        mlir=pow_odd_big_f32.to_mlir(debuginfo=False),
        make_args=_pow_args(np.float32, scale=0.6),
        reference=lambda ins: [torch.pow(ins[0], 67)],
        outputs=(1,),
        rtol=2e-5,
        atol=1e-30,
    ),
    CorpusKernel(
        name="pow_number_base_f32",
        mlir=pow_base_f32.to_mlir(debuginfo=False),
        make_args=_base_args,
        reference=lambda ins: [torch.pow(-2.0, ins[0])],
        outputs=(1,),
        rtol=1e-5,
        atol=1e-30,
    ),
]
