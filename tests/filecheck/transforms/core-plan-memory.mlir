// RUN: legato-opt %s -p core-plan-memory | filecheck %s

builtin.module {
  core.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>] {
    core.program @top on top {
      %0 = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
      %1 = core.dim %0, 0 : index
      %2 = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
      %3 = core.alloc on core(0) sram dims(%1) {buffer = "xfer0"} : !core.buf<[?10, 256], bf16, sram>
      core.dma %0 to %3 notify core(0) sram queue 0 : !core.buf<[?10, 256], bf16, shared_dram>, !core.buf<[?10, 256], bf16, sram>
      %4 = core.alloc on core(0) mpu_buffer {buffer = "xfer1"} : !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma %2 to %4 notify core(0) mpu_buffer queue 0 : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma_wait
      core.end
    }
    core.program @core0 on core(0) {
      %0 = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
      %1 = core.dim %0, 0 : index
      %2 = core.arg 2 : !core.buf<[10, 128], bf16, shared_dram>
      core.wait_queue sram queue 0
      %3 = core.alloc sram dims(%1) {buffer = "xfer0"} : !core.buf<[?10, 256], bf16, sram>
      core.wait_queue mpu_buffer queue 0
      %4 = core.alloc mpu_buffer {buffer = "xfer1"} : !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %4 : !core.buf<[256, 128], bf16, mpu_buffer>
      %5 = core.alloc sram dims(%1) : !core.buf<[?10, 128], bf16, sram>
      core.mpu_matmul %3, %5 {accumulate = false} : !core.buf<[?10, 256], bf16, sram>, !core.buf<[?10, 128], bf16, sram>
      core.dma %5 to %2 : !core.buf<[?10, 128], bf16, sram>, !core.buf<[10, 128], bf16, shared_dram>
      core.dma_wait
      core.end
    }
  }
}


// CHECK: builtin.module {
// CHECK-NEXT:   core.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>] {
// CHECK-NEXT:     core.program @top on top {
// CHECK-NEXT:       %0 = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
// CHECK-NEXT:       %1 = core.dim %0, 0 : index
// CHECK-NEXT:       %2 = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
// CHECK-NEXT:       %3 = core.alloc on core(0) sram dims(%1) {offset = 0 : i64, buffer = "xfer0"} : !core.buf<[?10, 256], bf16, sram>
// CHECK-NEXT:       core.dma %0 to %3 notify core(0) sram queue 0 : !core.buf<[?10, 256], bf16, shared_dram>, !core.buf<[?10, 256], bf16, sram>
// CHECK-NEXT:       %4 = core.alloc on core(0) mpu_buffer {offset = 0 : i64, buffer = "xfer1"} : !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.dma %2 to %4 notify core(0) mpu_buffer queue 0 : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       core.end
// CHECK-NEXT:     }
// CHECK-NEXT:     core.program @core0 on core(0) {
// CHECK-NEXT:       %0 = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
// CHECK-NEXT:       %1 = core.dim %0, 0 : index
// CHECK-NEXT:       %2 = core.arg 2 : !core.buf<[10, 128], bf16, shared_dram>
// CHECK-NEXT:       core.wait_queue sram queue 0
// CHECK-NEXT:       %3 = core.alloc sram dims(%1) {offset = 0 : i64, buffer = "xfer0"} : !core.buf<[?10, 256], bf16, sram>
// CHECK-NEXT:       core.wait_queue mpu_buffer queue 0
// CHECK-NEXT:       %4 = core.alloc mpu_buffer {offset = 0 : i64, buffer = "xfer1"} : !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_load_weight %4 : !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       %5 = core.alloc sram dims(%1) {offset = 5120 : i64} : !core.buf<[?10, 128], bf16, sram>
// CHECK-NEXT:       core.mpu_matmul %3, %5 {accumulate = false} : !core.buf<[?10, 256], bf16, sram>, !core.buf<[?10, 128], bf16, sram>
// CHECK-NEXT:       core.dma %5 to %2 : !core.buf<[?10, 128], bf16, sram>, !core.buf<[10, 128], bf16, shared_dram>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       core.end
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
