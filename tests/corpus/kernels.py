"""The corpus of the differential harness (`legato.interp.differential`).

Every entry is one `CorpusKernel`: legato-level IR, a factory of inputs, and the torch reference
of its outputs. The harness runs each at the legato, core and backend levels and on the emulator
and requires identical bits across them and agreement with torch within bf16 tolerance.
Adding a kernel is adding one entry to `CORPUS` (the helpers build the common shapes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import torch

from legato.interp.differential import CorpusKernel

BF16 = ml_dtypes.bfloat16
NP = {"bf16": BF16, "f32": np.float32, "i32": np.int32}


def ttype(shape: Sequence, dtype: str, space: str) -> str:
    dims = ", ".join(f"?{d[1]}" if isinstance(d, tuple) else str(d) for d in shape)
    return f"!legato.tensor<[{dims}], {dtype}, {space}>"


def _bounds(shape) -> tuple[int, ...]:
    return tuple(d[1] if isinstance(d, tuple) else d for d in shape)


def core0_kernel(name: str, inputs, out, body: str) -> str:
    """top sends each input to core 0's sram (queue i); core 0 receives them as %x0, %x1, ...,
    runs `body` (defining %r in sram) and memcpys %r to the last argument %out."""
    args = [f"%a{i} : {ttype(s, d, 'shared_dram')}" for i, (s, d) in enumerate(inputs)]
    args.append(f"%out : {ttype(out[0], out[1], 'shared_dram')}")
    lines = [f"legato.kernel @{name}({', '.join(args)}) {{", "  legato.on top {"]
    for i, (s, d) in enumerate(inputs):
        lines.append(
            f"    legato.request_load %a{i} to core(0) memory sram queue {i} : "
            f"{ttype(s, d, 'shared_dram')}"
        )
    lines += ["    legato.yield", "  }", "  legato.on core(0) {"]
    for i, (s, d) in enumerate(inputs):
        lines.append(
            f"    %x{i} = legato.receive %a{i} queue {i} memory sram : "
            f"{ttype(s, d, 'shared_dram')} -> {ttype(s, d, 'sram')}"
        )
    lines += ["    " + line for line in body.strip().splitlines()]
    rtype = out[2] if len(out) > 2 else ttype(out[0], out[1], "sram")
    lines.append(f"    legato.memcpy %out, %r : {ttype(out[0], out[1], 'shared_dram')}, {rtype}")
    lines += ["    legato.yield", "  }", "  legato.return", "}"]
    return "\n".join(lines)


def _rand(rng, shape, dtype, positive=False, values=None):
    if values is not None:  # e.g. a few small values, so that comparisons meet equal operands
        return (
            rng.choice(np.asarray(values, np.float64), shape).astype(np.float32).astype(NP[dtype])
        )
    if dtype == "i32":  # products overflow and wrap, like torch
        return rng.integers(1 if positive else -(2**20), 2**20, shape).astype(np.int32)
    x = rng.standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.25
    return x.astype(np.float32).astype(NP[dtype])


def _t(x: np.ndarray) -> torch.Tensor:
    if x.dtype == np.dtype(BF16):
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(x))


def _mask_of(op: str) -> Callable:
    """torch's comparison `op` as the VPU's 0/1 mask in the operands' dtype."""
    fn = getattr(torch, op)
    return lambda a, b: fn(a, b).to(a.dtype)


def elementwise(
    op: str,
    torch_fn: Callable,
    shape=(8, 64),
    dtype="bf16",
    rhs_shape=None,
    positive=False,
    values=None,
    name=None,
) -> CorpusKernel:
    s = list(shape)
    binary = rhs_shape is not None
    T = lambda sh: ttype(sh, dtype, "sram")
    if binary:
        body = f"%r = legato.{op} %x0, %x1 : {T(s)}, {T(rhs_shape)} -> {T(s)}"
        inputs = [(s, dtype), (list(rhs_shape), dtype)]
    else:
        body = f"%r = legato.{op} %x0 : {T(s)}"
        inputs = [(s, dtype)]
    name = name or f"{op}_{dtype}"
    return CorpusKernel(
        name=name,
        mlir=core0_kernel(name, inputs, (s, dtype), body),
        make_args=lambda rng: (
            [_rand(rng, _bounds(sh), d, positive, values) for sh, d in inputs]
            + [np.zeros(_bounds(s), NP[dtype])]
        ),
        reference=lambda ins: [torch_fn(*ins[:-1])],
        outputs=(len(inputs),),
    )


def shaped(
    name: str,
    in_shapes,
    out_shape,
    body: str,
    ref: Callable,
    dtype="f32",
    positive=False,
    out_dtype=None,
) -> CorpusKernel:
    inputs = [(list(s), dtype) for s in in_shapes]
    od = out_dtype or dtype
    return CorpusKernel(
        name=name,
        mlir=core0_kernel(name, inputs, (list(out_shape), od), body),
        make_args=lambda rng: (
            [_rand(rng, _bounds(s), dtype, positive) for s, _ in inputs]
            + [np.zeros(_bounds(out_shape), NP[od])]
        ),
        reference=lambda ins: [ref(*ins[:-1])],
        outputs=(len(inputs),),
    )


def clamp(dtype: str, bounds: str, ref: Callable) -> CorpusKernel:
    """`legato.clamp %x0 <bounds>` on an [8, 64] tensor of `dtype`."""
    t = ttype([8, 64], dtype, "sram")
    name = f"clamp_{bounds.split()[0]}_{dtype}"
    return shaped(name, [[8, 64]], [8, 64], f"%r = legato.clamp %x0 {bounds} : {t}", ref, dtype)


SEED_MATMUL = CorpusKernel(
    name="seed_matmul",
    mlir="""
legato.kernel @simple_matmul(%a : !legato.tensor<[?10, 256], bf16, shared_dram>,
                             %b : !legato.tensor<[256, 128], bf16, mpu_dram>,
                             %out : !legato.tensor<[10, 128], bf16, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?10, 256], bf16, shared_dram>
    legato.request_load %b to core(0) memory mpu_buffer queue 0 : !legato.tensor<[256, 128], bf16, mpu_dram>
    legato.yield
  }
  legato.on core(0) {
    %la = legato.receive %a queue 0 memory sram : !legato.tensor<[?10, 256], bf16, shared_dram> -> !legato.tensor<[?10, 256], bf16, sram>
    %lb = legato.receive_type queue 0 memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_weight>
    %r = legato.matmul %la, %lb : !legato.tensor<[?10, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_weight> -> !legato.tensor<[?10, 128], bf16, sram>
    legato.memcpy %out, %r : !legato.tensor<[10, 128], bf16, shared_dram>, !legato.tensor<[?10, 128], bf16, sram>
    legato.yield
  }
  legato.return
}
""",
    make_args=lambda rng: [
        _rand(rng, (7, 256), "bf16"),
        _rand(rng, (256, 128), "bf16"),
        np.zeros((10, 128), BF16),
    ],
    reference=lambda ins: [
        torch.cat(
            [
                (ins[0].float() @ ins[1].float()).to(torch.bfloat16),
                torch.zeros(3, 128, dtype=torch.bfloat16),
            ]
        )
    ],
    outputs=(2,),
)

TWO_CORES = CorpusKernel(
    name="two_core_matmul",
    mlir="""
legato.kernel @two_core_matmul(%a0 : !legato.tensor<[4, 256], bf16, shared_dram>,
                               %a1 : !legato.tensor<[4, 256], bf16, shared_dram>,
                               %b : !legato.tensor<[256, 128], bf16, mpu_dram>,
                               %o0 : !legato.tensor<[4, 128], bf16, shared_dram>,
                               %o1 : !legato.tensor<[4, 128], bf16, shared_dram>) {
  legato.on top {
    legato.request_load %a0 to core(0) memory sram queue 0 : !legato.tensor<[4, 256], bf16, shared_dram>
    legato.request_load %b to core(0) memory mpu_buffer queue 0 : !legato.tensor<[256, 128], bf16, mpu_dram>
    legato.request_load %a1 to core(1) memory sram queue 0 : !legato.tensor<[4, 256], bf16, shared_dram>
    legato.request_load %b to core(1) memory mpu_buffer queue 0 : !legato.tensor<[256, 128], bf16, mpu_dram>
    legato.yield
  }
  legato.on core(0) {
    %x = legato.receive %a0 queue 0 memory sram : !legato.tensor<[4, 256], bf16, shared_dram> -> !legato.tensor<[4, 256], bf16, sram>
    %w = legato.receive_type queue 0 memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_weight>
    %r = legato.matmul %x, %w : !legato.tensor<[4, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_weight> -> !legato.tensor<[4, 128], bf16, sram>
    legato.memcpy %o0, %r : !legato.tensor<[4, 128], bf16, shared_dram>, !legato.tensor<[4, 128], bf16, sram>
    legato.yield
  }
  legato.on core(1) {
    %x = legato.receive %a1 queue 0 memory sram : !legato.tensor<[4, 256], bf16, shared_dram> -> !legato.tensor<[4, 256], bf16, sram>
    %w = legato.receive_type queue 0 memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_weight>
    %r = legato.matmul %x, %w : !legato.tensor<[4, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_weight> -> !legato.tensor<[4, 128], bf16, sram>
    legato.memcpy %o1, %r : !legato.tensor<[4, 128], bf16, shared_dram>, !legato.tensor<[4, 128], bf16, sram>
    legato.yield
  }
  legato.return
}
""",
    make_args=lambda rng: [
        _rand(rng, (4, 256), "bf16"),
        _rand(rng, (4, 256), "bf16"),
        _rand(rng, (256, 128), "bf16"),
        np.zeros((4, 128), BF16),
        np.zeros((4, 128), BF16),
    ],
    reference=lambda ins: [
        (ins[0].float() @ ins[2].float()).to(torch.bfloat16),
        (ins[1].float() @ ins[2].float()).to(torch.bfloat16),
    ],
    outputs=(3, 4),
)

_F = lambda s: ttype(s, "f32", "sram")

CORPUS: list[CorpusKernel] = [
    SEED_MATMUL,
    TWO_CORES,
    elementwise("add", torch.add, rhs_shape=[1, 64]),
    elementwise("sub", torch.sub, rhs_shape=[8, 64]),
    elementwise("mul", torch.mul, rhs_shape=[8, 1]),
    elementwise("div", torch.div, rhs_shape=[8, 64], positive=True),
    elementwise("maximum", torch.maximum, rhs_shape=[8, 64]),
    elementwise("minimum", torch.minimum, rhs_shape=[64]),
    elementwise("add", torch.add, dtype="f32", rhs_shape=[8, 64]),
    # i32 on the VPU: add sub mul maximum minimum, exact (wrapping), broadcast forms included
    elementwise("add", torch.add, dtype="i32", rhs_shape=[1, 64]),
    elementwise("sub", torch.sub, dtype="i32", rhs_shape=[8, 64]),
    elementwise("mul", torch.mul, dtype="i32", rhs_shape=[8, 1]),
    elementwise("maximum", torch.maximum, dtype="i32", rhs_shape=[8, 64]),
    elementwise("minimum", torch.minimum, dtype="i32", rhs_shape=[64]),
    elementwise("neg", torch.neg),
    elementwise("exp", torch.exp),
    elementwise("log", torch.log, positive=True),
    elementwise("sqrt", torch.sqrt, positive=True),
    elementwise("rsqrt", torch.rsqrt, positive=True),
    elementwise("tanh", torch.tanh),
    elementwise("sigmoid", torch.sigmoid),
    elementwise("silu", torch.nn.functional.silu),
    elementwise("gelu", torch.nn.functional.gelu),
    elementwise("cos", torch.cos),
    elementwise("sin", torch.sin),
    elementwise("cos", torch.cos, dtype="f32"),
    elementwise("sin", torch.sin, dtype="f32"),
    # the ops the torch work needs (legato/opset.py rows)
    clamp("bf16", "min -0.5 max 0.75", lambda x: torch.clamp(x, -0.5, 0.75)),
    clamp("f32", "min 0.1", lambda x: torch.clamp(x, min=0.1)),
    clamp("i32", "max 1000", lambda x: torch.clamp(x, max=1000)),
    elementwise("abs", torch.abs),
    elementwise("abs", torch.abs, dtype="i32"),
    elementwise("neg", torch.neg, dtype="i32"),
    elementwise("erf", torch.erf),
    elementwise("erf", torch.erf, dtype="f32"),
    elementwise("gelu_tanh", lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    elementwise(
        "gelu_tanh", lambda x: torch.nn.functional.gelu(x, approximate="tanh"), dtype="f32"
    ),
    elementwise("softplus", torch.nn.functional.softplus),
    elementwise("softplus", torch.nn.functional.softplus, dtype="f32", values=[-30, -1, 0, 3, 25]),
    elementwise("log1p", torch.log1p, positive=True),
    elementwise("log1p", torch.log1p, dtype="f32", positive=True),
    *(
        elementwise(
            op,
            _mask_of(op),
            dtype=dt,
            rhs_shape=rhs,
            values=[-1.0, 0.0, 0.5, 2.0],
            name=f"{op}_{dt}",
        )
        for op, rhs in (
            ("eq", [8, 64]),
            ("ne", [1, 64]),
            ("lt", [8, 1]),
            ("le", [64]),
            ("gt", [8, 64]),
            ("ge", [8, 64]),
        )
        for dt in ("bf16", "f32", "i32")
    ),
    shaped(
        "cast_f32_bf16",
        [[8, 64]],
        [8, 64],
        f"%r = legato.cast %x0 : {_F([8, 64])} -> {ttype([8, 64], 'bf16', 'sram')}",
        lambda x: x.to(torch.bfloat16),
        out_dtype="bf16",
    ),
    shaped(
        "sum_rows",
        [[8, 64]],
        [8],
        f"%r = legato.sum %x0 dim 1 : {_F([8, 64])} -> {_F([8])}",
        lambda x: x.sum(1),
    ),
    shaped(
        "sum_cols",
        [[8, 64]],
        [64],
        f"%r = legato.sum %x0 dim 0 : {_F([8, 64])} -> {_F([64])}",
        lambda x: x.sum(0),
    ),
    shaped(
        "mean_rows",
        [[8, 64]],
        [8, 1],
        f"%r = legato.mean %x0 dim 1 keepdim : {_F([8, 64])} -> {_F([8, 1])}",
        lambda x: x.mean(1, keepdim=True),
    ),
    shaped(
        "amax_rows",
        [[8, 64]],
        [8],
        f"%r = legato.amax %x0 dim 1 : {_F([8, 64])} -> {_F([8])}",
        lambda x: x.amax(1),
    ),
    shaped(
        "amin_rows",
        [[8, 64]],
        [8],
        f"%r = legato.amin %x0 dim 1 : {_F([8, 64])} -> {_F([8])}",
        lambda x: x.amin(1),
    ),
    shaped(
        "reshape",
        [[8, 64]],
        [16, 32],
        f"%r = legato.reshape %x0 : {_F([8, 64])} -> {_F([16, 32])}",
        lambda x: x.reshape(16, 32),
    ),
    shaped(
        "transpose",
        [[8, 64]],
        [64, 8],
        f"%r = legato.transpose %x0 [1, 0] : {_F([8, 64])} -> {_F([64, 8])}",
        lambda x: x.T,
    ),
    shaped(
        "broadcast_to",
        [[1, 64]],
        [8, 64],
        f"%r = legato.broadcast_to %x0 : {_F([1, 64])} -> {_F([8, 64])}",
        lambda x: x.broadcast_to(8, 64),
    ),
    shaped(
        "slice",
        [[8, 64]],
        [4, 16],
        f"%r = legato.slice %x0 [2, 0] [4, 16] [1, 4] : {_F([8, 64])} -> {_F([4, 16])}",
        lambda x: x[2:6, 0:64:4],
    ),
    # strided slices (a copy): interleaved rotary's odd lanes in bf16 (one strided DMA), a step
    # that does not divide its dim (one DMA per element), a step on the outer dim and on both
    shaped(
        "slice_odd_lanes_bf16",
        [[8, 64]],
        [8, 32],
        f"%r = legato.slice %x0 [0, 1] [8, 32] [1, 2] : {ttype([8, 64], 'bf16', 'sram')} -> "
        f"{ttype([8, 32], 'bf16', 'sram')}",
        lambda x: x[:, 1::2],
        "bf16",
    ),
    shaped(
        "slice_step_not_dividing",
        [[8, 30]],
        [8, 7],
        f"%r = legato.slice %x0 [0, 3] [8, 7] [1, 4] : {_F([8, 30])} -> {_F([8, 7])}",
        lambda x: x[:, 3:30:4],
    ),
    shaped(
        "slice_step_rows",
        [[8, 64]],
        [3, 64],
        f"%r = legato.slice %x0 [1, 0] [3, 64] [3, 1] : {_F([8, 64])} -> {_F([3, 64])}",
        lambda x: x[1:8:3],
    ),
    shaped(
        "slice_step_both",
        [[8, 64]],
        [4, 11],
        f"%r = legato.slice %x0 [0, 2] [4, 11] [2, 6] : {_F([8, 64])} -> {_F([4, 11])}",
        lambda x: x[0:8:2, 2:64:6],
    ),
    shaped(
        "cat",
        [[8, 64], [4, 64]],
        [12, 64],
        f"%r = legato.cat %x0, %x1 dim 0 : {_F([8, 64])}, {_F([4, 64])} -> {_F([12, 64])}",
        lambda x, y: torch.cat([x, y]),
    ),
    # attention scores: K^T computed on the core is the MPU weight, the result the f32 accumulator
    shaped(
        "scores_f32",
        [[8, 32], [16, 32]],
        [8, 16],
        f"%kt = legato.transpose %x1 [1, 0] : {ttype([16, 32], 'bf16', 'sram')} -> "
        f"{ttype([32, 16], 'bf16', 'sram')}\n"
        f"%r = legato.matmul %x0, %kt : {ttype([8, 32], 'bf16', 'sram')}, "
        f"{ttype([32, 16], 'bf16', 'sram')} -> {_F([8, 16])}",
        lambda q, k: q.float() @ k.float().T,
        dtype="bf16",
        out_dtype="f32",
    ),
    # f32 @ f32: bf16 hi/lo split, three MPU passes into one f32 accumulator (~2^-16 relative)
    dataclasses.replace(
        shaped(
            "matmul_f32",
            [[8, 64], [64, 32]],
            [8, 32],
            f"%r = legato.matmul %x0, %x1 : {_F([8, 64])}, {_F([64, 32])} -> {_F([8, 32])}",
            lambda a, w: a @ w,
        ),
        rtol=1e-4,
        atol=1e-4,
    ),
    # K > 256 and N > 128: K tiles accumulate per pass, N column blocks
    dataclasses.replace(
        shaped(
            "matmul_f32_tiled",
            [[4, 300], [300, 160]],
            [4, 160],
            f"%r = legato.matmul %x0, %x1 : {_F([4, 300])}, {_F([300, 160])} -> {_F([4, 160])}",
            lambda a, w: a @ w,
        ),
        rtol=1e-4,
        atol=1e-3,
    ),
    shaped(
        "constant_add",
        [[8, 64]],
        [8, 64],
        f"%c = legato.constant 1.5 : {_F([8, 64])}\n"
        f"%r = legato.add %x0, %c : {_F([8, 64])}, {_F([8, 64])} -> {_F([8, 64])}",
        lambda x: x + 1.5,
    ),
]

from tests.corpus.dsl_kernels import DSL_CORPUS

CORPUS += DSL_CORPUS

from tests.corpus.runtime_kernels import RUNTIME_CORPUS

CORPUS += RUNTIME_CORPUS

from tests.corpus.select_gather_kernels import SELECT_GATHER_CORPUS

CORPUS += SELECT_GATHER_CORPUS

from tests.corpus.decoder_kernels import DECODER_CORPUS

CORPUS += DECODER_CORPUS

from tests.corpus.gemm_kernels import GEMM_CORPUS

CORPUS += GEMM_CORPUS

from tests.corpus.pim_kernels import PIM_CORPUS

CORPUS += PIM_CORPUS

from tests.corpus.chip_linear_kernels import CHIP_LINEAR_CORPUS

CORPUS += CHIP_LINEAR_CORPUS

from tests.corpus.paged_attention_kernels import PAGED_ATTENTION_CORPUS

CORPUS += PAGED_ATTENTION_CORPUS

from tests.corpus.plugin_kernels import PLUGIN_CORPUS

CORPUS += PLUGIN_CORPUS

from tests.corpus.torch_op_kernels import TORCH_OP_CORPUS

CORPUS += TORCH_OP_CORPUS
