# RUN: %python %s | filecheck %s
#
# A slice of a static dim whose size is a runtime value (`scratch[0:m]`) is a runtime-size view:
# a dynamic dim bounded by what the dim holds (its size, less a static start, at most a static
# end). Lowered, it is a `core.subview` with a runtime size of the bound-sized buffer, and a copy
# into it one dma2d whose row count is a register.

import legato
from legato.model import bertha

f32 = legato.types.float("float32")


def tt(shape):
    return legato.get_model().tensor_type(f32, shape, "shared_dram")


@legato.compile(backend=bertha)
def views(x: tt(((-1, 16), 32)), s: tt([16, 64]), out: tt(((-1, 16), 32))):
    device = legato.get_context().get_device()
    with device.get_core(0):
        m = x.size(0)
        a = legato.tensor.load(x)
        legato.tensor.memcpy(s[0:m, 0:32], a)  # bound 16: the dim
        b = legato.tensor.load(s[2 : 2 + m, 32:64])  # bound 14: the dim past its start 2
        c = legato.tensor.load(s[m:4, :])  # bound 4: at most the end
        z = legato.tensor.full((16, 32), 1.0, f32)
        legato.tensor.memcpy(out, a + z[0:m, :])  # a view of a core buffer


for line in views.to_mlir(debuginfo=False).splitlines():
    if "legato.dynamic_slice %s" in line or "legato.dynamic_slice %z" in line:
        print(line.strip())
for line in views.lower("core").splitlines():
    if "core.subview" in line:
        print(line.strip())
asm = views.lower("asm").splitlines()
first = next(i for i, t in enumerate(asm) if "dma2d" in t)
print("\n".join(t.strip() for t in asm[first - 7 : first + 1]))

# CHECK:      legato.dynamic_slice %s [0, 0] [%{{.*}}, 32] : !legato.tensor<[16, 64], f32, shared_dram> -> !legato.tensor<[?16, 32], f32, shared_dram>
# CHECK-NEXT: legato.dynamic_slice %s [2, 32] [%{{.*}}, 32] : !legato.tensor<[16, 64], f32, shared_dram> -> !legato.tensor<[?14, 32], f32, shared_dram>
# CHECK-NEXT: legato.dynamic_slice %s [%{{.*}}, 0] [%{{.*}}, 64] : !legato.tensor<[16, 64], f32, shared_dram> -> !legato.tensor<[?4, 64], f32, shared_dram>
# CHECK-NEXT: legato.dynamic_slice %z [0, 0] [%{{.*}}, 32] : !legato.tensor<[16, 32], f32, sram> -> !legato.tensor<[?16, 32], f32, sram>
# CHECK:      core.subview %{{.*}} [0, 0] [%{{.*}}, 32] : !core.buf<[16, 64], f32, shared_dram> -> !core.buf<[?16, 32], f32, shared_dram>
# CHECK:      core.subview %{{.*}} [2, 32] [%{{.*}}, 32] : !core.buf<[16, 64], f32, shared_dram> -> !core.buf<[?14, 32], f32, shared_dram>
# CHECK:      core.subview %{{.*}} [%{{.*}}, 0] [%{{.*}}, 64] : !core.buf<[16, 64], f32, shared_dram> -> !core.buf<[?4, 64], f32, shared_dram>
# CHECK:      core.subview %{{.*}} [0, 0] [%{{.*}}, 32] : !core.buf<[16, 32], f32, sram> -> !core.buf<[?16, 32], f32, sram>
# the load of x moves m rows of 128 bytes; the first dma2d (into s[0:m, 0:32], rows of 128
# bytes at a destination stride of 256) has m rows: the same register
# CHECK:      muli r{{[0-9]+}}, [[M:r[0-9]+]], 128
# CHECK-NEXT: dma
# CHECK-NEXT: shli [[SH:r[0-9]+]], [[M]], 32
# CHECK-NEXT: addi [[SH]], [[SH]], 128
# CHECK:      dma2d r{{[0-9]+}}, r{{[0-9]+}}, [[SH]], r{{[0-9]+}}
