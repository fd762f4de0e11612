// RUN: legato-opt %s -p convert-core-to-backend | filecheck %s
// RUN: legato-opt %s -p legato-to-backend -t asm | filecheck %s --check-prefix=ASM

// A column slab of a row-major tensor (and a column block of the output) is one strided
// transfer: `dma2d dst, src, shape, stride` with shape = rows << 32 | row bytes and stride =
// dst stride << 32 | src stride, built with li/shli/addi; a 3-D strided copy unrolls its outer
// dim into one dma2d each, the last one notifying.

builtin.module {
  core.kernel @slabs args [#core.arg<0, [64, 512], bf16, shared_dram, read>, #core.arg<1, [64, 512], bf16, shared_dram, write>, #core.arg<2, [2, 16, 512], f32, shared_dram, read>] {
    core.program @core0 on core(0) {
      %0 = core.arg 0 : !core.buf<[64, 512], bf16, shared_dram>
      %1 = core.arg 1 : !core.buf<[64, 512], bf16, shared_dram>
      %2 = core.subview %0 [0, 128] [64, 128] : !core.buf<[64, 512], bf16, shared_dram> -> !core.buf<[64, 128], bf16, shared_dram>
      %3 = core.alloc sram {offset = 0 : i64} : !core.buf<[64, 128], bf16, sram>
      core.dma %2 to %3 : !core.buf<[64, 128], bf16, shared_dram>, !core.buf<[64, 128], bf16, sram>
      %4 = core.subview %1 [0, 256] [64, 128] : !core.buf<[64, 512], bf16, shared_dram> -> !core.buf<[64, 128], bf16, shared_dram>
      core.dma %3 to %4 notify core(0) sram queue 3 : !core.buf<[64, 128], bf16, sram>, !core.buf<[64, 128], bf16, shared_dram>
      core.wait_queue sram queue 3
      %5 = core.arg 2 : !core.buf<[2, 16, 512], f32, shared_dram>
      %6 = core.subview %5 [0, 0, 64] [2, 16, 32] : !core.buf<[2, 16, 512], f32, shared_dram> -> !core.buf<[2, 16, 32], f32, shared_dram>
      %7 = core.alloc sram {offset = 16384 : i64} : !core.buf<[2, 16, 32], f32, sram>
      core.dma %6 to %7 notify core(0) sram queue 4 : !core.buf<[2, 16, 32], f32, shared_dram>, !core.buf<[2, 16, 32], f32, sram>
      core.wait_queue sram queue 4
      core.end
    }
  }
}

// CHECK-LABEL: backend.program @core0
// CHECK:         %[[A:.*]] = backend.ld %{{.*}}, 8
// CHECK:         %[[SRC:.*]] = backend.addi %[[A]], 256
// CHECK-NEXT:    %[[DST:.*]] = backend.lsa sram, 0
// CHECK-NEXT:    %[[ROWS:.*]] = backend.li 64
// CHECK-NEXT:    %[[HI:.*]] = backend.shli %[[ROWS]], 32
// CHECK-NEXT:    %[[SHAPE:.*]] = backend.addi %[[HI]], 256
// CHECK-NEXT:    %[[DS:.*]] = backend.li 256
// CHECK-NEXT:    %[[DHI:.*]] = backend.shli %[[DS]], 32
// CHECK-NEXT:    %[[STRIDE:.*]] = backend.addi %[[DHI]], 1024
// CHECK-NEXT:    backend.dma2d %[[DST]], %[[SRC]], %[[SHAPE]], %[[STRIDE]] : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK:         %[[S2:.*]] = backend.li 1024
// CHECK-NEXT:    %[[S2HI:.*]] = backend.shli %[[S2]], 32
// CHECK-NEXT:    %[[S2P:.*]] = backend.addi %[[S2HI]], 256
// CHECK-NEXT:    backend.dma2d %{{.*}}, %[[DST]], %{{.*}}, %[[S2P]] notify core(0) sram queue 3
// CHECK-NEXT:    backend.qwait sram queue 3
// 3-D: two dma2d of 16 rows of 128 bytes, src stride 2048, dst stride 128; only the last notifies
// CHECK:         backend.li 16
// CHECK:         backend.dma2d
// CHECK-NOT:     notify
// CHECK-SAME:    -> ()
// CHECK:         backend.dma2d {{.*}} notify core(0) sram queue 4
// CHECK-NOT:     backend.dma
// CHECK:         backend.halt

// ASM-LABEL: .program core0 on core(0)
// ASM:         dma2d r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}
// ASM:         dma2d r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, core0.sram.q3
// ASM-NEXT:    qwait sram.q3
