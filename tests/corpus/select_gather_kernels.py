"""Corpus kernels for `legato.where` (the VPU's `vpu.sel`) and `legato.gather` (a runtime loop
of index loads and row DMAs), written in the DSL.

They cover an i1 condition, a float mask with NaN / -0.0 entries broadcast per row, values that
are -inf/NaN (a select moves them, never computes with them), gathers from a shared_dram
table with static and dynamic index counts and `x[:, i, j]` with two index tensors; and the
int64 indices a kernel computes: `vpu.cvt` of a float to i64 (truncating, as torch's
`.to(torch.int64)`) and torch's `max(x, dim)` with its indices (`legato.torch.library.composite.arg_reduce`: NaN and ties, first index).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

import legato
from legato.interp.differential import CorpusKernel
from legato.model import bertha
from legato.torch.library.composite import arange_float, arg_reduce, gather_dims

BF16 = legato.types.float("bfloat16")
F32 = legato.types.float("float32")
I1 = legato.types.i1
I64 = legato.types.i64
T = legato.get_model


@legato.compile(backend=bertha)
def where_i1(
    c: T().tensor_type(I1, [8, 64], "shared_dram"),
    a: T().tensor_type(BF16, [8, 64], "shared_dram"),
    b: T().tensor_type(BF16, [64], "shared_dram"),
    out: T().tensor_type(BF16, [8, 64], "shared_dram"),
):
    """torch.where(c, a, b) with a bool condition; b broadcast along rows."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(c, device.get_core(0), "sram", 0)
        legato.tensor.request_load(a, device.get_core(0), "sram", 1)
        legato.tensor.request_load(b, device.get_core(0), "sram", 2)
    with device.get_core(0):
        c = legato.tensor.receive(c, 0, "sram")
        a = legato.tensor.receive(a, 1, "sram")
        b = legato.tensor.receive(b, 2, "sram")
        legato.tensor.memcpy(out, legato.tensor.where(c, a, b))


@legato.compile(backend=bertha)
def where_mask(
    m: T().tensor_type(F32, [8, 1], "shared_dram"),
    a: T().tensor_type(F32, [8, 64], "shared_dram"),
    out: T().tensor_type(F32, [8, 64], "shared_dram"),
):
    """A float mask per row (nonzero is true, NaN included, -0.0 false) against a number."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(m, device.get_core(0), "sram", 0)
        legato.tensor.request_load(a, device.get_core(0), "sram", 1)
    with device.get_core(0):
        m = legato.tensor.receive(m, 0, "sram")
        a = legato.tensor.receive(a, 1, "sram")
        legato.tensor.memcpy(out, legato.tensor.where(m, a, float("-inf")))


@legato.compile(backend=bertha)
def gather_rows(
    table: T().tensor_type(BF16, [32, 16], "shared_dram"),
    ids: T().tensor_type(I64, [2, 5], "shared_dram"),
    out: T().tensor_type(BF16, [2, 5, 16], "shared_dram"),
):
    """An embedding lookup: the table stays in shared DRAM, one row DMA per index."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(ids, device.get_core(0), "sram")
    with device.get_core(0):
        i = legato.tensor.receive(ids, 0, "sram")
        legato.tensor.memcpy(out, legato.tensor.gather(table, i))


@legato.compile(backend=bertha)
def gather_dynamic(
    table: T().tensor_type(F32, [16, 4, 8], "shared_dram"),
    ids: T().tensor_type(I64, [(-1, 12)], "shared_dram"),
    out: T().tensor_type(F32, [(-1, 12), 4, 8], "shared_dram"),
):
    """A runtime number of indices (the loop bound is a dim of the Instruction Table); rows of a
    3-D table; the gathered rows are computed on."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(ids, device.get_core(0), "sram")
    with device.get_core(0):
        i = legato.tensor.receive(ids, 0, "sram")
        legato.tensor.memcpy(out, legato.tensor.gather(table, i) + 1.0)


@legato.compile(backend=bertha)
def gather_wrap(
    table: T().tensor_type(F32, [16, 8], "shared_dram"),
    ids: T().tensor_type(I64, [6], "shared_dram"),
    out: T().tensor_type(F32, [6, 8], "shared_dram"),
):
    """torch's `x[idx]`: a negative index counts from the end (`wrap=True`)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(ids, device.get_core(0), "sram")
    with device.get_core(0):
        i = legato.tensor.receive(ids, 0, "sram")
        legato.tensor.memcpy(out, legato.tensor.gather(table, i, wrap=True))


@legato.compile(backend=bertha)
def gather_two(
    x: T().tensor_type(BF16, [2, 5, 6, 8], "shared_dram"),
    i: T().tensor_type(I64, [3, 2], "shared_dram"),
    j: T().tensor_type(I64, [3, 2], "shared_dram"),
    out: T().tensor_type(BF16, [2, 3, 2, 8], "shared_dram"),
):
    """torch's `x[:, i, j]` as the torch backend computes it
    (`legato.torch.library.composite.gather_dims`): the indexed dims moved first, one row DMA
    per index pair, the row combined from both indices on the scalar unit (negative ones wrap),
    and the index dims moved back."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram", 0)
        legato.tensor.request_load(i, device.get_core(0), "sram", 1)
        legato.tensor.request_load(j, device.get_core(0), "sram", 2)
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        i = legato.tensor.receive(i, 1, "sram")
        j = legato.tensor.receive(j, 2, "sram")
        g = gather_dims(
            x, (i, j), (1, 2, 0, 3), (5, 6, 16), (2, 0, 1, 3), (3, 2, 2, 8), True, None, None
        )
        legato.tensor.memcpy(out, g)


@legato.compile(backend=bertha)
def cast_i64(
    x: T().tensor_type(F32, [4, 16], "shared_dram"),
    out: T().tensor_type(I64, [4, 16], "shared_dram"),
):
    """A float to int64, truncated toward zero (vpu.cvt's i64 result)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        legato.tensor.memcpy(out, legato.tensor.cast(x, I64))


@legato.compile(backend=bertha)
def max_dim(
    x: T().tensor_type(BF16, [6, 40], "shared_dram"),
    values: T().tensor_type(BF16, [6], "shared_dram"),
    indices: T().tensor_type(I64, [6], "shared_dram"),
):
    """torch.max(x, 1): the values and the first index of each row's maximum (a NaN is it)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        v, i = arg_reduce(x, 1, False, (), (6,), True, True)
        legato.tensor.memcpy(values, v)
        legato.tensor.memcpy(indices, i)


@legato.compile(backend=bertha)
def arange_bf16(
    x: T().tensor_type(BF16, [37], "shared_dram"),
    out: T().tensor_type(BF16, [37], "shared_dram"),
):
    """torch.arange(-40, 108, 4, dtype=bf16) + x (`composite.arange_float`: the f32 iota,
    times the step, plus the start, rounded once to bf16)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(x, 0, "sram")
        legato.tensor.memcpy(out, arange_float(37, -40.0, 4.0, True) + x)


def _cast_i64_args(rng):
    x = rng.uniform(-1e6, 1e6, (4, 16)).astype(np.float32)
    x[0, :8] = [0.5, -0.5, 0.99, -0.99, 2.0**40, -(2.0**40), -0.0, 16777217.0]
    return [x, np.zeros((4, 16), np.int64)]


def _max_dim_args(rng):
    x = _bf16(rng, (6, 40))
    x[1, [3, 17]] = np.nan  # the first NaN wins
    x[2, :] = 1.5  # all ties: index 0
    x[3, [5, 30]] = 9.0  # two maxima: the first
    x[4, :] = -np.inf
    x[5, [0, 39]] = [-0.0, 0.0]
    x[5, 1:39] = -1.0
    return [x, np.zeros(6, ml_dtypes.bfloat16), np.zeros(6, np.int64)]


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(ml_dtypes.bfloat16)


def _where_i1_args(rng):
    a = _bf16(rng, (8, 64))
    a[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    return [rng.random((8, 64)) > 0.5, a, _bf16(rng, (64,)), np.zeros((8, 64), ml_dtypes.bfloat16)]


def _where_mask_args(rng):
    m = np.array([[1.0], [0.0], [np.nan], [-0.0], [-2.5], [0.0], [np.inf], [1e-30]], np.float32)
    return [m, rng.standard_normal((8, 64)).astype(np.float32), np.zeros((8, 64), np.float32)]


def _gather_dynamic_args(rng):
    n = 7  # of at most 12
    return [
        rng.standard_normal((16, 4, 8)).astype(np.float32),
        np.array([3, 0, 15, 3, 9, 1, 14], np.int64)[:n],
        np.zeros((n, 4, 8), np.float32),
    ]


SELECT_GATHER_CORPUS = [
    CorpusKernel(
        name="where_i1_bf16",
        mlir=where_i1.to_mlir(debuginfo=False),
        make_args=_where_i1_args,
        reference=lambda ins: [torch.where(ins[0], ins[1], ins[2])],
        outputs=(3,),
    ),
    CorpusKernel(
        name="where_float_mask_f32",
        mlir=where_mask.to_mlir(debuginfo=False),
        make_args=_where_mask_args,
        reference=lambda ins: [torch.where(ins[0] != 0, ins[1], float("-inf"))],
        outputs=(2,),
        atol=0.0,
    ),
    CorpusKernel(
        name="gather_rows_bf16",
        mlir=gather_rows.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _bf16(rng, (32, 16)),
            rng.integers(0, 32, (2, 5)).astype(np.int64),
            np.zeros((2, 5, 16), ml_dtypes.bfloat16),
        ],
        reference=lambda ins: [torch.nn.functional.embedding(ins[1], ins[0])],
        outputs=(2,),
    ),
    CorpusKernel(
        name="gather_dynamic_f32",
        mlir=gather_dynamic.to_mlir(debuginfo=False),
        make_args=_gather_dynamic_args,
        reference=lambda ins: [ins[0][ins[1]] + 1.0],
        outputs=(2,),
    ),
    CorpusKernel(
        name="gather_wrap_f32",
        mlir=gather_wrap.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            rng.standard_normal((16, 8)).astype(np.float32),
            np.array([-1, 0, 15, -16, 3, -5], np.int64),
            np.zeros((6, 8), np.float32),
        ],
        reference=lambda ins: [ins[0][ins[1]]],
        outputs=(2,),
        atol=0.0,
    ),
    CorpusKernel(
        name="gather_two_indices_bf16",
        mlir=gather_two.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _bf16(rng, (2, 5, 6, 8)),
            np.array([[4, -5], [0, 2], [-1, 3]], np.int64),
            np.array([[5, 0], [-6, 1], [2, -1]], np.int64),
            np.zeros((2, 3, 2, 8), ml_dtypes.bfloat16),
        ],
        reference=lambda ins: [ins[0][:, ins[1], ins[2]]],
        outputs=(3,),
        atol=0.0,
    ),
    CorpusKernel(
        name="cast_i64_f32",
        mlir=cast_i64.to_mlir(debuginfo=False),
        make_args=_cast_i64_args,
        reference=lambda ins: [ins[0].to(torch.int64)],
        outputs=(1,),
        atol=0.0,
    ),
    CorpusKernel(
        name="max_dim_bf16",
        mlir=max_dim.to_mlir(debuginfo=False),
        make_args=_max_dim_args,
        reference=lambda ins: list(torch.max(ins[0], 1)),
        outputs=(1, 2),
        atol=0.0,
    ),
    CorpusKernel(
        name="arange_bf16",
        mlir=arange_bf16.to_mlir(debuginfo=False),
        make_args=lambda rng: [_bf16(rng, (37,)), np.zeros(37, ml_dtypes.bfloat16)],
        reference=lambda ins: [torch.arange(-40, 108, 4, dtype=torch.bfloat16) + ins[0]],
        outputs=(1,),
        atol=0.0,
    ),
]
