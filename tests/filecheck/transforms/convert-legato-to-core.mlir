// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s

builtin.module {
  legato.kernel @simple_matmul(%a : !legato.tensor<[?10, 256], bf16, shared_dram>, %b : !legato.tensor<[256, 128], bf16, mpu_dram>, %out : !legato.tensor<[10, 128], bf16, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?10, 256], bf16, shared_dram>
      legato.request_load %b to core(0) memory mpu_buffer queue 0 : !legato.tensor<[256, 128], bf16, mpu_dram>
      legato.yield
    }
    legato.on core(0) {
      %la = legato.receive %a queue 0 memory sram : !legato.tensor<[?10, 256], bf16, shared_dram> -> !legato.tensor<[?10, 256], bf16, sram>
      %lb = legato.receive_type queue 0 memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_weight>
      %r = legato.matmul %la, %lb : !legato.tensor<[?10, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_weight> -> !legato.tensor<[?10, 128], bf16, sram>
      legato.memcpy %out, %r : !legato.tensor<[10, 128], bf16, shared_dram>, !legato.tensor<[?10, 128], bf16, sram>
      legato.yield
    }
    legato.return
  }
}

// CHECK: builtin.module {
// CHECK-NEXT:   core.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>] attributes {arg_names = ["a", "b", "out"]} {
// CHECK-NEXT:     core.program @top on top {
// CHECK-NEXT:       %0 = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
// CHECK-NEXT:       %1 = core.dim %0, 0 : index
// CHECK-NEXT:       %2 = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
// CHECK-NEXT:       %3 = core.alloc on core(0) sram dims(%1) {buffer = "xfer0"} : !core.buf<[?10, 256], bf16, sram>
// CHECK-NEXT:       core.dma %0 to %3 notify core(0) sram queue 0 : !core.buf<[?10, 256], bf16, shared_dram>, !core.buf<[?10, 256], bf16, sram>
// CHECK-NEXT:       %4 = core.alloc on core(0) mpu_buffer {buffer = "xfer1"} : !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.dma %2 to %4 notify core(0) mpu_buffer queue 0 : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       core.end
// CHECK-NEXT:     }
// CHECK-NEXT:     core.program @core0 on core(0) {
// CHECK-NEXT:       %0 = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
// CHECK-NEXT:       %1 = core.dim %0, 0 : index
// CHECK-NEXT:       %2 = core.arg 2 : !core.buf<[10, 128], bf16, shared_dram>
// CHECK-NEXT:       core.wait_queue sram queue 0
// CHECK-NEXT:       %3 = core.alloc sram dims(%1) {buffer = "xfer0"} : !core.buf<[?10, 256], bf16, sram>
// CHECK-NEXT:       core.wait_queue mpu_buffer queue 0
// CHECK-NEXT:       %4 = core.alloc mpu_buffer {buffer = "xfer1"} : !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_load_weight %4 : !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       %5 = core.alloc sram dims(%1) : !core.buf<[?10, 128], bf16, sram>
// CHECK-NEXT:       core.mpu_matmul %3, %5 {accumulate = false} : !core.buf<[?10, 256], bf16, sram>, !core.buf<[?10, 128], bf16, sram>
// CHECK-NEXT:       core.dma %5 to %2 : !core.buf<[?10, 128], bf16, sram>, !core.buf<[10, 128], bf16, shared_dram>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       core.end
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
