"""The kernels `python -m bench` measures, each with its arguments and a torch eager reference.

Here today: the seed matmul (examples/simple_matmul.py), and RMSNorm and softmax over [32, 4096]
bf16 with one row per core. Issue 5's GEMV / GEMM / decoder-layer kernels join this list as the
language gains runtime loops and SPMD slices: add a `BenchKernel` with a plain (undecorated)
Legato function, an argument factory and the torch computation it must match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import legato

BF16 = legato.types.float("bfloat16")


def simple_matmul(
    a: legato.get_model().tensor_type(BF16, ((-1, 10), 256), "shared_dram"),
    b: legato.get_model().tensor_type(BF16, [256, 128], "mpu_dram"),
    out: legato.get_model().tensor_type(BF16, [10, 128], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
        legato.tensor.request_load(b, device.get_core(0), "mpu_buffer")
    with device.get_core(0):
        weight_type = legato.get_model().tensor_type(BF16, [256, 128], "mpu_weight")
        loaded_a = legato.tensor.receive(a, 0, "sram")
        loaded_b = legato.tensor.receive_type(weight_type, 0, None, "mpu_buffer")
        result = loaded_a @ loaded_b
        legato.tensor.memcpy(out, result)


def _matmul_args(torch, gen):
    a = torch.randn(10, 256, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(256, 128, dtype=torch.bfloat16, generator=gen)
    out = torch.zeros(10, 128, dtype=torch.bfloat16)
    return [a, b, out]


def _matmul_torch(torch, args):
    a, b, _ = args
    return a @ b


ROWS, HIDDEN = 32, 4096
F32 = legato.types.float("float32")


def rmsnorm_32x4096(
    x: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
    w: legato.get_model().tensor_type(BF16, [1, HIDDEN], "shared_dram"),
    out: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
):
    """One row per core (static unroll over the cores); f32 statistics, bf16 out."""
    device = legato.get_context().get_device()
    row = legato.get_model().tensor_type(BF16, [1, HIDDEN], "sram")
    with device.get_top():
        for i in legato.static_range(ROWS):
            legato.tensor.request_load(x[i:i + 1, :], device.get_core(i), "sram")
            legato.tensor.request_load(w, device.get_core(i), "sram", 1)
    for i in legato.static_range(ROWS):
        with device.get_core(i):
            xi = legato.tensor.cast(legato.tensor.receive_type(row, 0, None, "sram"), F32)
            wi = legato.tensor.cast(legato.tensor.receive_type(row, 1, None, "sram"), F32)
            ms = legato.tensor.mean(xi * xi, 1, keepdim=True)
            y = xi * legato.tensor.rsqrt(ms + 1e-6) * wi
            legato.tensor.memcpy(out[i:i + 1, :], legato.tensor.cast(y, BF16))


def softmax_32x4096(
    x: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
    out: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
):
    """Numerically stable softmax over the last dim, one row per core."""
    device = legato.get_context().get_device()
    row = legato.get_model().tensor_type(BF16, [1, HIDDEN], "sram")
    with device.get_top():
        for i in legato.static_range(ROWS):
            legato.tensor.request_load(x[i:i + 1, :], device.get_core(i), "sram")
    for i in legato.static_range(ROWS):
        with device.get_core(i):
            xi = legato.tensor.cast(legato.tensor.receive_type(row, 0, None, "sram"), F32)
            e = legato.tensor.exp(xi - legato.tensor.max(xi, axis=1, keepdim=True))
            y = e / legato.tensor.sum(e, 1, keepdim=True)
            legato.tensor.memcpy(out[i:i + 1, :], legato.tensor.cast(y, BF16))


def _rows_args(torch, gen, with_weight: bool):
    x = torch.randn(ROWS, HIDDEN, generator=gen).bfloat16()
    args = [x]
    if with_weight:
        args.append(torch.randn(1, HIDDEN, generator=gen).bfloat16())
    args.append(torch.zeros(ROWS, HIDDEN, dtype=torch.bfloat16))
    return args


def _rmsnorm_torch(torch, args):
    x, w, _ = args
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * w.float()).bfloat16()


def _softmax_torch(torch, args):
    return torch.softmax(args[0].float(), dim=-1).bfloat16()


@dataclass
class BenchKernel:
    name: str
    fn: Callable  # the undecorated Legato function
    make_args: Callable  # (torch, generator) -> list of torch tensors (outputs included)
    torch_fn: Callable  # (torch, args) -> the output tensor, computed eagerly
    out_index: int  # which argument holds the result
    rtol: float = 2e-2  # agreement with torch eager (which may round differently)


KERNELS = [
    BenchKernel("simple_matmul", simple_matmul, _matmul_args, _matmul_torch, out_index=2),
    BenchKernel("rmsnorm_32x4096", rmsnorm_32x4096, lambda t, g: _rows_args(t, g, True),
                _rmsnorm_torch, out_index=2),
    BenchKernel("softmax_32x4096", softmax_32x4096, lambda t, g: _rows_args(t, g, False),
                _softmax_torch, out_index=1),
]
