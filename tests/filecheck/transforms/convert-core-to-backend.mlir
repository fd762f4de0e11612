// RUN: legato-opt %s -p convert-core-to-backend | filecheck %s

builtin.module {
  core.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>] {
    core.program @top on top {
      %0 = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
      %1 = core.dim %0, 0 : index
      %2 = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
      %3 = core.alloc on core(0) sram dims(%1) {offset = 0 : i64, buffer = "xfer0"} : !core.buf<[?10, 256], bf16, sram>
      core.dma %0 to %3 notify core(0) sram queue 0 : !core.buf<[?10, 256], bf16, shared_dram>, !core.buf<[?10, 256], bf16, sram>
      %4 = core.alloc on core(0) mpu_buffer {offset = 0 : i64, buffer = "xfer1"} : !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma %2 to %4 notify core(0) mpu_buffer queue 0 : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma_wait
      core.end
    }
    core.program @core0 on core(0) {
      %0 = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
      %1 = core.dim %0, 0 : index
      %2 = core.arg 2 : !core.buf<[10, 128], bf16, shared_dram>
      core.wait_queue sram queue 0
      %3 = core.alloc sram dims(%1) {offset = 0 : i64, buffer = "xfer0"} : !core.buf<[?10, 256], bf16, sram>
      core.wait_queue mpu_buffer queue 0
      %4 = core.alloc mpu_buffer {offset = 0 : i64, buffer = "xfer1"} : !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %4 : !core.buf<[256, 128], bf16, mpu_buffer>
      %5 = core.alloc sram dims(%1) {offset = 5120 : i64} : !core.buf<[?10, 128], bf16, sram>
      core.mpu_matmul %3, %5 {accumulate = false} : !core.buf<[?10, 256], bf16, sram>, !core.buf<[?10, 128], bf16, sram>
      core.dma %5 to %2 : !core.buf<[?10, 128], bf16, sram>, !core.buf<[10, 128], bf16, shared_dram>
      core.dma_wait
      core.end
    }
  }
}

// CHECK: builtin.module {
// CHECK-NEXT:   backend.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>] {
// CHECK-NEXT:     backend.program @top on top {
// CHECK-NEXT:       %0 = backend.entry_reg "r1" : !backend.reg<r1>
// CHECK-NEXT:       %1 = backend.ld %0, 8 : (!backend.reg<r1>) -> !backend.reg
// CHECK-NEXT:       %2 = backend.ld %0, 16 : (!backend.reg<r1>) -> !backend.reg
// CHECK-NEXT:       %3 = backend.ld %0, 24 : (!backend.reg<r1>) -> !backend.reg
// CHECK-NEXT:       %4 = backend.lsa core(0) sram, 0 : !backend.reg
// CHECK-NEXT:       %5 = backend.muli %2, 512 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       backend.dma %4, %1, %5 notify core(0) sram queue 0 {legato.bounds = {a = "sram 0+5120", b = "arg 0"}} : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %6 = backend.lsa core(0) mpu_buffer, 0 : !backend.reg
// CHECK-NEXT:       %7 = backend.li 65536 : !backend.reg
// CHECK-NEXT:       backend.dma %6, %3, %7 notify core(0) mpu_buffer queue 0 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       backend.dmawait
// CHECK-NEXT:       backend.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     backend.program @core0 on core(0) mem {sram = 7680 : i64, mpu_buffer = 65536 : i64} {
// CHECK-NEXT:       %0 = backend.entry_reg "r1" : !backend.reg<r1>
// CHECK-NEXT:       %1 = backend.ld %0, 16 : (!backend.reg<r1>) -> !backend.reg
// CHECK-NEXT:       %2 = backend.ld %0, 32 : (!backend.reg<r1>) -> !backend.reg
// CHECK-NEXT:       backend.qwait sram queue 0
// CHECK-NEXT:       %3 = backend.lsa sram, 0 : !backend.reg
// CHECK-NEXT:       backend.qwait mpu_buffer queue 0
// CHECK-NEXT:       %4 = backend.lsa mpu_buffer, 0 : !backend.reg
// CHECK-NEXT:       %5 = backend.li 256 : !backend.reg
// CHECK-NEXT:       %6 = backend.li 128 : !backend.reg
// CHECK-NEXT:       backend.mpu_ldw %4, %5, %6 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %7 = backend.lsa sram, 5120 : !backend.reg
// CHECK-NEXT:       backend.mpu_mm %7, %3, %1, bf16 {legato.bounds = {a = "sram 5120+2560", b = "sram 0+5120"}} : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %8 = backend.muli %1, 256 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       backend.dma %2, %7, %8 {legato.bounds = {b = "sram 5120+2560"}} : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       backend.dmawait
// CHECK-NEXT:       backend.halt
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
