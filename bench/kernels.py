"""The kernels `python -m bench` measures, each with its arguments and a torch eager reference.

Only what the compiler lowers today is here: the seed matmul (examples/simple_matmul.py).  Issue
5's GEMV / GEMM / RMSNorm / softmax / decoder-layer kernels join this list as the passes land:
add a `BenchKernel` with a plain (undecorated) Legato function, an argument factory and the torch
computation it must match.
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
]
