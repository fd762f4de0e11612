"""A one-core test kernel shared by the tests of limits, trust, user errors and the disk cache:
`double(x, out)` writes `out = 2 * x` for [4, 8] f32 tensors on a one-core Bertha. (The line
table's tests keep their own copy: they check the lines of the file the kernel is in.)"""

import legato
from legato.model import bertha

f32 = legato.types.float("float32")


def one_core(ctx):
    return bertha.Bertha(ctx, "bertha", 1, False, 4, 1 << 30)


@legato.compile(backend=one_core)
def double(
    x: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
    out: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * 2.0)
