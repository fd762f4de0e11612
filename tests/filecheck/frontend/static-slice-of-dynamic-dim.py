# RUN: %python %s | filecheck %s
#
# A slice of a dynamic dim keeps its static size when it provably lies inside the dim on every
# run (legato.frontend.bounds): a loop over the dim's whole tiles. Otherwise (the last, partial
# tile of a ceil-div loop; a slice of another tensor's length) it is clamped: a runtime size.

import legato
from legato.model import bertha

f32 = legato.types.float("float32")
bf16 = legato.types.float("bfloat16")


def tt(shape, dtype=f32, memory="shared_dram"):
    return legato.get_model().tensor_type(dtype, shape, memory)


@legato.compile(backend=bertha)
def tiles(x: tt(((-1, 64), 32)), y: tt(((-1, 64), 32)), out: tt([64, 32])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        # whole tiles: t < n // 8, so t*8 + 8 <= n
        for t in range(x.size(0) // 8):
            a = legato.tensor.load(x[t * 8 : t * 8 + 8, :])
            legato.tensor.memcpy(out[t * 8 : t * 8 + 8, :], a)
        # the second half of a tile, from a loop starting at 1 with a step
        for t in range(1, x.size(0) // 8, 2):
            b = legato.tensor.load(x[t * 8 + 4 : t * 8 + 8, :])
        # a sliding window: i + 4 <= n
        for i in range(x.size(0) - 3):
            c = legato.tensor.load(x[i : i + 4, :])
        # min() of two lengths bounds both
        for t in range(min(x.size(0), y.size(0)) // 16):
            d = legato.tensor.load(y[t * 16 : t * 16 + 16, :])
        # a ceil-div loop reaches the partial tile: clamped
        for t in range((x.size(0) + 7) // 8):
            e = legato.tensor.load(x[t * 8 : t * 8 + 8, :])
        # bounded by x's length, not y's: clamped
        for t in range(x.size(0) // 8):
            f = legato.tensor.load(y[t * 8 : t * 8 + 8, :])
        # a window one row too long: clamped
        for i in range(x.size(0) - 2):
            g = legato.tensor.load(x[i : i + 4, :])


# the slices of x and y, in program order (one line each, so CHECK-NEXT pins every one)
for line in tiles.to_mlir(debuginfo=False).splitlines():
    if "legato.dynamic_slice %x" in line or "legato.dynamic_slice %y" in line:
        print(line.strip())

# CHECK:      legato.dynamic_slice %x [%{{.*}}, 0] [8, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[8, 32], f32, shared_dram>
# CHECK-NEXT: legato.dynamic_slice %x [%{{.*}}, 0] [4, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[4, 32], f32, shared_dram>
# CHECK-NEXT: legato.dynamic_slice %x [%{{.*}}, 0] [4, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[4, 32], f32, shared_dram>
# CHECK-NEXT: legato.dynamic_slice %y [%{{.*}}, 0] [16, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[16, 32], f32, shared_dram>
# CHECK-NEXT: legato.dynamic_slice %x [%{{.*}}, 0] [%{{.*}}, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[?8, 32], f32, shared_dram>
# CHECK-NEXT: legato.dynamic_slice %y [%{{.*}}, 0] [%{{.*}}, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[?8, 32], f32, shared_dram>
# CHECK-NEXT: legato.dynamic_slice %x [%{{.*}}, 0] [%{{.*}}, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[?4, 32], f32, shared_dram>
