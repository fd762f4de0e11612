"""The seed kernel (examples/simple_matmul.py), for tests that need a real compiled binary."""

import legato
from legato.model import bertha

BF16 = legato.types.float("bfloat16")


@legato.compile(backend=bertha.evt0)
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


_BINARIES: dict = {}


def seed_binary(model=None) -> bytes:
    """The seed kernel compiled for `model` (default EVT0) by `legato.compiler.compile_kernel`."""
    from legato.compiler import compile_kernel

    model = model or bertha.evt0()
    key = model.fingerprint()
    if key not in _BINARIES:
        _BINARIES[key] = bytes(compile_kernel(simple_matmul.emit_module(), model).binary)
    return _BINARIES[key]


def seed_args(rows: int = 10, seed: int = 0):
    """(a, b, out) numpy arguments and the expected output."""
    import ml_dtypes
    import numpy as np

    from legato import numerics

    rng = np.random.default_rng(seed)
    bf16 = ml_dtypes.bfloat16
    a = rng.standard_normal((rows, 256)).astype(bf16)
    b = rng.standard_normal((256, 128)).astype(bf16)
    out = np.zeros((10, 128), bf16)
    expected = np.zeros((10, 128), bf16)
    expected[:rows] = numerics.round_to(numerics.matmul_acc(a, b, None), np.dtype(bf16))
    return [a, b, out], expected
