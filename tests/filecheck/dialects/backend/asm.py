# RUN: %python %s | filecheck %s
# Builds backend IR with the Python builders and prints it as assembly (assembly_line of every
# op, print_assembly of a kernel).

from xdsl.dialects.builtin import ModuleOp

from legato.dialects import backend as b

r = b.reg


def program():
    t = b.EntryRegOp("r1")
    c = b.EntryRegOp("r2")
    a = b.LdOp(t, 8, r(3))
    n = b.LiOp(5120, r(5))
    hi = b.LihOp(n, 1, r(5))
    d = b.LsaOp("sram", 0, core=0, rd=r(4))
    d2 = b.LsaOp("mpu_buffer", 64, core=c, rd=r(6))
    d3 = b.LsaOp("private_dram", 8, rd=r(7))
    i0 = b.LiOp(0, r(9))
    i1 = b.AddiOp(i0, 1, r(9))
    s = b.AddOp(a, i1, r(8))
    big = b.LiOp(0xFFFFFFFF, r(10))
    return [
        t, c, a, n, hi, d, d2, d3, i0,
        b.LabelOp("loop"),
        i1, s, big,
        b.StOp(s, t, -8),
        b.BltOp(i1, n, "loop"),
        b.DmaOp(d, a, n),
        b.DmaOp(d, a, n, notify=(0, "sram", 0)),
        b.DmaOp(d, a, n, notify=(c, "mpu_buffer", 3)),
        b.DmaOp(d, a, n, notify=(None, "private_dram", 255)),
        b.QwaitOp("sram", 0),
        b.DmaWaitOp(),
        b.BarrierOp(1, 33),
        b.SemPostOp(2, 1),
        b.SemWaitOp(2, 1),
        b.MpuLdwOp(d2, a, n),
        b.MpuMmOp(d, d3, a, "f32", acc=True),
        b.MpuMmOp(d, d3, a, "bf16"),
        b.VpuAddOp(d, d, d3, n, "bf16"),
        b.VpuSubOp(d, d, d3, n, "f32", bcast="row", period=128),
        b.VpuMulOp(d, d, d3, n, "f32", bcast="scalar"),
        b.VpuDivOp(d, d, d3, n, "f16", bcast="col", period=4),
        b.VpuExpOp(d, d3, n, "f32"),
        b.VpuCvtOp(d, d3, n, "bf16", "f32"),
        b.VpuFillOp(d, n, a, "f32"),
        b.VpuRsumOp(d, d3, a, n, "f32"),
        b.VpuTransposeOp(d, d3, a, n, "bf16"),
        b.VpuSelOp(d, d3, a, n, "f32", "i1"),
        b.JmpOp("loop"),
        b.NopOp(),
        b.HaltOp(),
    ]


core0 = b.ProgramOp("core0", "core(0)", program(), mem={"sram": 40960})
top = b.ProgramOp("top", "top", [b.HaltOp()])
kernel = b.KernelOp("simple_matmul", [top, core0])
module = ModuleOp([kernel])
module.verify()

# CHECK:      .kernel simple_matmul
# CHECK-NEXT: .program top on top
# CHECK-NEXT:     halt
# CHECK-NEXT: .program core0 on core(0)
# CHECK-NEXT: .mem sram 40960
# CHECK-NEXT:     ld r3, 8(r1)
# CHECK-NEXT:     li r5, 5120
# CHECK-NEXT:     lih r5, 1
# CHECK-NEXT:     lsa r4, core0.sram, 0
# CHECK-NEXT:     lsa r6, core(r2).mpu_buffer, 64
# CHECK-NEXT:     lsa r7, private_dram, 8
# CHECK-NEXT:     li r9, 0
# CHECK-NEXT: loop:
# CHECK-NEXT:     addi r9, r9, 1
# CHECK-NEXT:     add r8, r3, r9
# CHECK-NEXT:     li r10, -1
# CHECK-NEXT:     st r8, -8(r1)
# CHECK-NEXT:     blt r9, r5, loop
# CHECK-NEXT:     dma r4, r3, r5
# CHECK-NEXT:     dma r4, r3, r5, core0.sram.q0
# CHECK-NEXT:     dma r4, r3, r5, core(r2).mpu_buffer.q3
# CHECK-NEXT:     dma r4, r3, r5, private_dram.q255
# CHECK-NEXT:     qwait sram.q0
# CHECK-NEXT:     dmawait
# CHECK-NEXT:     barrier 1, 33
# CHECK-NEXT:     sem.post 2, 1
# CHECK-NEXT:     sem.wait 2, 1
# CHECK-NEXT:     mpu.ldw r6, r3, r5
# CHECK-NEXT:     mpu.mm r4, r7, r3, f32, acc
# CHECK-NEXT:     mpu.mm r4, r7, r3, bf16
# CHECK-NEXT:     vpu.add r4, r4, r7, r5, bf16
# CHECK-NEXT:     vpu.sub r4, r4, r7, r5, f32, bc.row(128)
# CHECK-NEXT:     vpu.mul r4, r4, r7, r5, f32, bc.scalar
# CHECK-NEXT:     vpu.div r4, r4, r7, r5, f16, bc.col(4)
# CHECK-NEXT:     vpu.exp r4, r7, r5, f32
# CHECK-NEXT:     vpu.cvt r4, r7, r5, bf16, f32
# CHECK-NEXT:     vpu.fill r4, r5, r3, f32
# CHECK-NEXT:     vpu.rsum r4, r7, r3, r5, f32
# CHECK-NEXT:     vpu.transpose r4, r7, r3, r5, bf16
# CHECK-NEXT:     vpu.sel r4, r7, r3, r5, f32, i1
# CHECK-NEXT:     jmp loop
# CHECK-NEXT:     nop
# CHECK-NEXT:     halt
print(b.print_assembly(module), end="")

# An unallocated register has no assembly.
# CHECK-NEXT: backend.add: register !backend.reg is not allocated to r0..r31
try:
    b.AddOp(b.LiOp(1, r(3)), b.LiOp(2, r(4))).assembly_line()
except ValueError as e:
    print(e)

# The IR form of the same kernel.
# CHECK:      backend.kernel @simple_matmul {
# CHECK:        backend.program @core0 on core(0) mem {sram = 40960 : i64} {
# CHECK:          %{{.*}} = backend.lsa core(%{{.*}}) mpu_buffer, 64 : (!backend.reg<r2>) -> !backend.reg<r6>
# CHECK:          backend.label "loop"
# CHECK:          backend.dma %{{.*}}, %{{.*}}, %{{.*}} notify core(%{{.*}}) mpu_buffer queue 3 : (!backend.reg<r4>, !backend.reg<r3>, !backend.reg<r5>, !backend.reg<r2>) -> ()
print(module)
