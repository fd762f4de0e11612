"""A matrix-vector product on the PIM units (docs/pim.md): the weight is an argument in
`pim_dram`, so `x @ w` runs inside the memory channels of a chip built with use_pim=True.

Run: .venv/bin/python examples/pim_gemv.py
"""

import ml_dtypes
import numpy as np

import legato
import legato.model.bertha as bertha

bf16 = legato.types.float("bfloat16")
K, N = 4096, 4096


# The seed's chip with its PIM units: one per memory channel.
def get_bertha_pim(ctx):
    return bertha.Bertha(ctx, "bertha", 32, True, 8, 128 * 1024**3)


@legato.compile(backend=get_bertha_pim)
def gemv(
    x: legato.get_model().tensor_type(bf16, [1, K], "shared_dram"),
    w: legato.get_model().tensor_type(bf16, [K, N], "pim_dram"),
    out: legato.get_model().tensor_type(bf16, [1, N], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        # w is in pim_dram: the compiler runs this product on the PIM units
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") @ w)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, K)).astype(ml_dtypes.bfloat16)
    w = (rng.standard_normal((K, N)) / 64).astype(ml_dtypes.bfloat16)  # passed as it is
    out = np.zeros((1, N), ml_dtypes.bfloat16)
    gemv(x, w, out)
    ref = x.astype(np.float32) @ w.astype(np.float32)
    print("max |out - numpy|:", float(np.abs(out.astype(np.float32) - ref).max()))
    print(gemv.last_run.summary())
