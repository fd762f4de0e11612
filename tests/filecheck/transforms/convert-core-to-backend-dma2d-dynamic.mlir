// RUN: legato-opt %s -p convert-core-to-backend | filecheck %s
// RUN: legato-opt %s -p legato-to-backend -t asm | filecheck %s --check-prefix=ASM

// A strided copy over a runtime row count is one dma2d whose rows are a register: the
// [?M, 128] column slab of a [?M, 512] tensor (row stride 1024 bytes) loads as rows = M
// (`shli` of the dim register, `addi` of the row bytes); the store into a column block of
// another argument's [?M', 512] checks at run time that M <= M' (`slt`, `seq` with 0, `div`
// by itself: a zero divisor faults) before the transfer, which moves the source's M rows; a [?B, 4, 32] slice of a [?B, 4, 64] steps
// contiguously over its 4, so it is one dma2d of B * 4 rows.

builtin.module {
  core.kernel @slabs args [#core.arg<0, [?16, 512], bf16, shared_dram, read>, #core.arg<1, [?16, 512], bf16, shared_dram, write>, #core.arg<2, [?8, 4, 64], f32, shared_dram, read>] {
    core.program @core0 on core(0) {
      %0 = core.arg 0 : !core.buf<[?16, 512], bf16, shared_dram>
      %1 = core.dim %0, 0 : index
      %2 = core.arg 1 : !core.buf<[?16, 512], bf16, shared_dram>
      %3 = core.dim %2, 0 : index
      %4 = core.subview %0 [0, 128] [%1, 128] : !core.buf<[?16, 512], bf16, shared_dram> -> !core.buf<[?16, 128], bf16, shared_dram>
      %5 = core.alloc sram dims(%1) {offset = 0 : i64} : !core.buf<[?16, 128], bf16, sram>
      core.dma %4 to %5 : !core.buf<[?16, 128], bf16, shared_dram>, !core.buf<[?16, 128], bf16, sram>
      %6 = core.subview %2 [0, 256] [%3, 128] : !core.buf<[?16, 512], bf16, shared_dram> -> !core.buf<[?16, 128], bf16, shared_dram>
      core.dma %5 to %6 notify core(0) sram queue 3 : !core.buf<[?16, 128], bf16, sram>, !core.buf<[?16, 128], bf16, shared_dram>
      core.wait_queue sram queue 3
      %7 = core.arg 2 : !core.buf<[?8, 4, 64], f32, shared_dram>
      %8 = core.dim %7, 0 : index
      %9 = core.subview %7 [0, 0, 16] [%8, 4, 32] : !core.buf<[?8, 4, 64], f32, shared_dram> -> !core.buf<[?8, 4, 32], f32, shared_dram>
      %10 = core.alloc sram dims(%8) {offset = 4096 : i64} : !core.buf<[?8, 4, 32], f32, sram>
      core.dma %9 to %10 : !core.buf<[?8, 4, 32], f32, shared_dram>, !core.buf<[?8, 4, 32], f32, sram>
      core.dma_wait
      core.end
    }
  }
}

// CHECK-LABEL: backend.program @core0
// CHECK:         %[[T:.*]] = backend.entry_reg "r1"
// CHECK-NEXT:    %[[X:.*]] = backend.ld %[[T]], 8
// CHECK-NEXT:    %[[M:.*]] = backend.ld %[[T]], 16
// CHECK-NEXT:    %[[OUT:.*]] = backend.ld %[[T]], 24
// CHECK-NEXT:    %[[M2:.*]] = backend.ld %[[T]], 32
// CHECK-NEXT:    %[[SRC:.*]] = backend.addi %[[X]], 256
// CHECK-NEXT:    %[[BUF:.*]] = backend.lsa sram, 0
// CHECK-NEXT:    %[[HI:.*]] = backend.shli %[[M]], 32
// CHECK-NEXT:    %[[SHAPE:.*]] = backend.addi %[[HI]], 256
// CHECK-NEXT:    %[[DS:.*]] = backend.li 256
// CHECK-NEXT:    %[[DHI:.*]] = backend.shli %[[DS]], 32
// CHECK-NEXT:    %[[STRIDE:.*]] = backend.addi %[[DHI]], 1024
// CHECK-NEXT:    backend.dma2d %[[BUF]], %[[SRC]], %[[SHAPE]], %[[STRIDE]] {legato.bounds = {a = "sram 0+4096", b = "arg 0"}}
// CHECK-NEXT:    %[[DST:.*]] = backend.addi %[[OUT]], 512
// CHECK-NEXT:    %[[OVER:.*]] = backend.slt %[[M2]], %[[M]]
// CHECK-NEXT:    %[[ZERO:.*]] = backend.li 0
// CHECK-NEXT:    %[[EQ:.*]] = backend.seq %[[OVER]], %[[ZERO]]
// CHECK-NEXT:    %[[ONE:.*]] = backend.div %[[EQ]], %[[EQ]]
// CHECK-NEXT:    %[[ROWS:.*]] = backend.mul %[[M]], %[[ONE]]
// CHECK-NEXT:    %[[HI2:.*]] = backend.shli %[[ROWS]], 32
// CHECK-NEXT:    %[[SHAPE2:.*]] = backend.addi %[[HI2]], 256
// CHECK-NEXT:    %[[S2:.*]] = backend.li 1024
// CHECK-NEXT:    %[[S2HI:.*]] = backend.shli %[[S2]], 32
// CHECK-NEXT:    %[[STRIDE2:.*]] = backend.addi %[[S2HI]], 256
// CHECK-NEXT:    backend.dma2d %[[DST]], %[[BUF]], %[[SHAPE2]], %[[STRIDE2]] notify core(0) sram queue 3 {legato.bounds = {a = "arg 1", b = "sram 0+4096"}}
// CHECK-NEXT:    backend.qwait sram queue 3
// 3-D: rows = B * 4 of 128 bytes, src stride 256, dst stride 128
// CHECK-NEXT:    %[[Y:.*]] = backend.ld %[[T]], 40
// CHECK-NEXT:    %[[B:.*]] = backend.ld %[[T]], 48
// CHECK-NEXT:    %[[YS:.*]] = backend.addi %[[Y]], 64
// CHECK-NEXT:    %[[BUF3:.*]] = backend.lsa sram, 4096
// CHECK-NEXT:    %[[R3:.*]] = backend.muli %[[B]], 4
// CHECK-NEXT:    %[[HI3:.*]] = backend.shli %[[R3]], 32
// CHECK-NEXT:    %[[SHAPE3:.*]] = backend.addi %[[HI3]], 128
// CHECK-NEXT:    %[[S3:.*]] = backend.li 128
// CHECK-NEXT:    %[[S3HI:.*]] = backend.shli %[[S3]], 32
// CHECK-NEXT:    %[[STRIDE3:.*]] = backend.addi %[[S3HI]], 256
// CHECK-NEXT:    backend.dma2d %[[BUF3]], %[[YS]], %[[SHAPE3]], %[[STRIDE3]] {legato.bounds = {a = "sram 4096+4096", b = "arg 2"}}
// CHECK-NEXT:    backend.dmawait
// CHECK-NEXT:    backend.halt

// ASM-LABEL: .program core0 on core(0)
// ASM:         ld [[M:r[0-9]+]], 16(r1)
// ASM:         shli [[SH:r[0-9]+]], [[M]], 32
// ASM-NEXT:    addi [[SH]], [[SH]], 256
// ASM:         dma2d r{{[0-9]+}}, r{{[0-9]+}}, [[SH]], r{{[0-9]+}}
// ASM:         slt [[OV:r[0-9]+]], r{{[0-9]+}}, [[M]]
// ASM-NEXT:    li [[Z:r[0-9]+]], 0
// ASM-NEXT:    seq [[EQ:r[0-9]+]], [[OV]], [[Z]]
// ASM-NEXT:    div [[EQ]], [[EQ]], [[EQ]]
// ASM:         dma2d r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, core0.sram.q3
// ASM-NEXT:    qwait sram.q3
// ASM:         muli [[R3:r[0-9]+]], r{{[0-9]+}}, 4
// ASM:         dma2d
// ASM-NEXT:    dmawait
