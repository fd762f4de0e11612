// RUN: legato-opt %s | filecheck %s --check-prefix=ROUND
// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory,convert-core-to-backend | filecheck %s --check-prefix=BE
//
// The ops of rotary embeddings and attention scores: legato.cos / legato.sin (VPU, f32 here),
// and a matmul of bf16 operands with an f32 result (the MPU's fp32 accumulator, no rounding)
// whose weight was computed on the core (sram), staged into mpu_buffer by a DMA.

// ROUND: %c = legato.cos %x0 : !legato.tensor<[4, 8], f32, sram>
// ROUND-NEXT: %s = legato.sin %c : !legato.tensor<[4, 8], f32, sram>
// ROUND: legato.matmul %b, %x1 : !legato.tensor<[4, 8], bf16, sram>, !legato.tensor<[8, 16], bf16, sram> -> !legato.tensor<[4, 16], f32, sram>

builtin.module {
  legato.kernel @k(%a0 : !legato.tensor<[4, 8], f32, shared_dram>, %a1 : !legato.tensor<[8, 16], bf16, shared_dram>, %out : !legato.tensor<[4, 16], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a0 to core(0) memory sram queue 0 : !legato.tensor<[4, 8], f32, shared_dram>
      legato.request_load %a1 to core(0) memory sram queue 1 : !legato.tensor<[8, 16], bf16, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x0 = legato.receive %a0 queue 0 memory sram : !legato.tensor<[4, 8], f32, shared_dram> -> !legato.tensor<[4, 8], f32, sram>
      %x1 = legato.receive %a1 queue 1 memory sram : !legato.tensor<[8, 16], bf16, shared_dram> -> !legato.tensor<[8, 16], bf16, sram>
      %c = legato.cos %x0 : !legato.tensor<[4, 8], f32, sram>
      %s = legato.sin %c : !legato.tensor<[4, 8], f32, sram>
      %b = legato.cast %s : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], bf16, sram>
      %r = legato.matmul %b, %x1 : !legato.tensor<[4, 8], bf16, sram>, !legato.tensor<[8, 16], bf16, sram> -> !legato.tensor<[4, 16], f32, sram>
      legato.memcpy %out, %r : !legato.tensor<[4, 16], f32, shared_dram>, !legato.tensor<[4, 16], f32, sram>
      legato.yield
    }
    legato.return
  }
}

// CHECK:     core.program @core0 on core(0) {
// CHECK-NEXT:       %0 = core.arg 0 : !core.buf<[4, 8], f32, shared_dram>
// CHECK-NEXT:       %1 = core.arg 1 : !core.buf<[8, 16], bf16, shared_dram>
// CHECK-NEXT:       %2 = core.arg 2 : !core.buf<[4, 16], f32, shared_dram>
// CHECK-NEXT:       core.wait_queue sram queue 0
// CHECK-NEXT:       %3 = core.alloc sram {buffer = "xfer0"} : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.wait_queue sram queue 1
// CHECK-NEXT:       %4 = core.alloc sram {buffer = "xfer1"} : !core.buf<[8, 16], bf16, sram>
// CHECK-NEXT:       %5 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.vpu_unary cos %3 to %5 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       %6 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.vpu_unary sin %5 to %6 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       %7 = core.alloc sram : !core.buf<[4, 8], bf16, sram>
// CHECK-NEXT:       core.vpu_unary cast %6 to %7 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], bf16, sram>
// CHECK-NEXT:       %8 = core.alloc sram : !core.buf<[4, 16], f32, sram>
// CHECK-NEXT:       %9 = core.alloc mpu_buffer : !core.buf<[8, 16], bf16, mpu_buffer>
// CHECK-NEXT:       core.dma %4 to %9 : !core.buf<[8, 16], bf16, sram>, !core.buf<[8, 16], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_load_weight %9 : !core.buf<[8, 16], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_matmul %7, %8 {accumulate = false} : !core.buf<[4, 8], bf16, sram>, !core.buf<[4, 16], f32, sram>
// CHECK-NEXT:       core.dma %8 to %2 : !core.buf<[4, 16], f32, sram>, !core.buf<[4, 16], f32, shared_dram>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       core.end

// BE: backend.vpu_cos %4, %2, %5, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// BE: backend.vpu_sin %6, %4, %7, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// BE: backend.mpu_ldw %11, %13, %14 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// BE: backend.mpu_mm %10, %8, %15, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
