// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
//
// A [2, 384] @ [384, 160] matmul: 2 K tiles (256 + 128) accumulated in f32, 2 N tiles (128 + 32)
// whose weight column blocks are made contiguous in mpu_buffer by transposes; lhs column blocks
// likewise; the result gathered transposed, then converted once to bf16.

builtin.module {
  legato.kernel @k(%a0 : !legato.tensor<[2, 384], bf16, shared_dram>, %a1 : !legato.tensor<[384, 160], bf16, shared_dram>, %out : !legato.tensor<[2, 160], bf16, shared_dram>) {
    legato.on top {
      legato.request_load %a0 to core(0) memory sram queue 0 : !legato.tensor<[2, 384], bf16, shared_dram>
      legato.request_load %a1 to core(0) memory mpu_buffer queue 1 : !legato.tensor<[384, 160], bf16, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x0 = legato.receive %a0 queue 0 memory sram : !legato.tensor<[2, 384], bf16, shared_dram> -> !legato.tensor<[2, 384], bf16, sram>
      %x1 = legato.receive %a1 queue 1 memory mpu_buffer : !legato.tensor<[384, 160], bf16, shared_dram> -> !legato.tensor<[384, 160], bf16, mpu_buffer>
      %r = legato.matmul %x0, %x1 : !legato.tensor<[2, 384], bf16, sram>, !legato.tensor<[384, 160], bf16, mpu_buffer> -> !legato.tensor<[2, 160], bf16, sram>
      legato.memcpy %out, %r : !legato.tensor<[2, 160], bf16, shared_dram>, !legato.tensor<[2, 160], bf16, sram>
      legato.yield
    }
    legato.return
  }
}

// CHECK: builtin.module {
// CHECK-NEXT:   core.kernel @k args [#core.arg<0, [2, 384], bf16, shared_dram, read>, #core.arg<1, [384, 160], bf16, shared_dram, read>, #core.arg<2, [2, 160], bf16, shared_dram, write>] attributes {arg_names = ["a0", "a1", "out"]} {
// CHECK-NEXT:     core.program @top on top {
// CHECK-NEXT:       %0 = core.arg 0 : !core.buf<[2, 384], bf16, shared_dram>
// CHECK-NEXT:       %1 = core.arg 1 : !core.buf<[384, 160], bf16, shared_dram>
// CHECK-NEXT:       %2 = core.alloc on core(0) sram {buffer = "xfer0"} : !core.buf<[2, 384], bf16, sram>
// CHECK-NEXT:       core.dma %0 to %2 notify core(0) sram queue 0 : !core.buf<[2, 384], bf16, shared_dram>, !core.buf<[2, 384], bf16, sram>
// CHECK-NEXT:       %3 = core.alloc on core(0) mpu_buffer {buffer = "xfer1"} : !core.buf<[384, 160], bf16, mpu_buffer>
// CHECK-NEXT:       core.dma %1 to %3 notify core(0) mpu_buffer queue 1 : !core.buf<[384, 160], bf16, shared_dram>, !core.buf<[384, 160], bf16, mpu_buffer>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       core.end
// CHECK-NEXT:     }
// CHECK-NEXT:     core.program @core0 on core(0) {
// CHECK-NEXT:       %0 = core.arg 0 : !core.buf<[2, 384], bf16, shared_dram>
// CHECK-NEXT:       %1 = core.arg 1 : !core.buf<[384, 160], bf16, shared_dram>
// CHECK-NEXT:       %2 = core.arg 2 : !core.buf<[2, 160], bf16, shared_dram>
// CHECK-NEXT:       core.wait_queue sram queue 0
// CHECK-NEXT:       %3 = core.alloc sram {buffer = "xfer0"} : !core.buf<[2, 384], bf16, sram>
// CHECK-NEXT:       core.wait_queue mpu_buffer queue 1
// CHECK-NEXT:       %4 = core.alloc mpu_buffer {buffer = "xfer1"} : !core.buf<[384, 160], bf16, mpu_buffer>
// CHECK-NEXT:       %5 = core.alloc sram : !core.buf<[2, 160], bf16, sram>
// CHECK-NEXT:       %6 = core.alloc sram : !core.buf<[384, 2], bf16, sram>
// CHECK-NEXT:       core.vpu_transpose %3 to %6 : !core.buf<[2, 384], bf16, sram>, !core.buf<[384, 2], bf16, sram>
// CHECK-NEXT:       %7 = core.subview %6 [0, 0] [256, 2] : !core.buf<[384, 2], bf16, sram> -> !core.buf<[256, 2], bf16, sram>
// CHECK-NEXT:       %8 = core.alloc sram : !core.buf<[2, 256], bf16, sram>
// CHECK-NEXT:       core.vpu_transpose %7 to %8 : !core.buf<[256, 2], bf16, sram>, !core.buf<[2, 256], bf16, sram>
// CHECK-NEXT:       %9 = core.subview %6 [256, 0] [128, 2] : !core.buf<[384, 2], bf16, sram> -> !core.buf<[128, 2], bf16, sram>
// CHECK-NEXT:       %10 = core.alloc sram : !core.buf<[2, 128], bf16, sram>
// CHECK-NEXT:       core.vpu_transpose %9 to %10 : !core.buf<[128, 2], bf16, sram>, !core.buf<[2, 128], bf16, sram>
// CHECK-NEXT:       %11 = core.alloc sram : !core.buf<[160, 384], bf16, sram>
// CHECK-NEXT:       core.vpu_transpose %4 to %11 : !core.buf<[384, 160], bf16, mpu_buffer>, !core.buf<[160, 384], bf16, sram>
// CHECK-NEXT:       %12 = core.alloc sram : !core.buf<[160, 2], f32, sram>
// CHECK-NEXT:       %13 = core.subview %11 [0, 0] [128, 384] : !core.buf<[160, 384], bf16, sram> -> !core.buf<[128, 384], bf16, sram>
// CHECK-NEXT:       %14 = core.alloc mpu_buffer : !core.buf<[384, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.vpu_transpose %13 to %14 : !core.buf<[128, 384], bf16, sram>, !core.buf<[384, 128], bf16, mpu_buffer>
// CHECK-NEXT:       %15 = core.alloc sram : !core.buf<[2, 128], f32, sram>
// CHECK-NEXT:       %16 = core.subview %14 [0, 0] [256, 128] : !core.buf<[384, 128], bf16, mpu_buffer> -> !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_load_weight %16 : !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_matmul %8, %15 {accumulate = false} : !core.buf<[2, 256], bf16, sram>, !core.buf<[2, 128], f32, sram>
// CHECK-NEXT:       %17 = core.subview %14 [256, 0] [128, 128] : !core.buf<[384, 128], bf16, mpu_buffer> -> !core.buf<[128, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_load_weight %17 : !core.buf<[128, 128], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_matmul %10, %15 {accumulate = true} : !core.buf<[2, 128], bf16, sram>, !core.buf<[2, 128], f32, sram>
// CHECK-NEXT:       %18 = core.subview %12 [0, 0] [128, 2] : !core.buf<[160, 2], f32, sram> -> !core.buf<[128, 2], f32, sram>
// CHECK-NEXT:       core.vpu_transpose %15 to %18 : !core.buf<[2, 128], f32, sram>, !core.buf<[128, 2], f32, sram>
// CHECK-NEXT:       %19 = core.subview %11 [128, 0] [32, 384] : !core.buf<[160, 384], bf16, sram> -> !core.buf<[32, 384], bf16, sram>
// CHECK-NEXT:       %20 = core.alloc mpu_buffer : !core.buf<[384, 32], bf16, mpu_buffer>
// CHECK-NEXT:       core.vpu_transpose %19 to %20 : !core.buf<[32, 384], bf16, sram>, !core.buf<[384, 32], bf16, mpu_buffer>
// CHECK-NEXT:       %21 = core.alloc sram : !core.buf<[2, 32], f32, sram>
// CHECK-NEXT:       %22 = core.subview %20 [0, 0] [256, 32] : !core.buf<[384, 32], bf16, mpu_buffer> -> !core.buf<[256, 32], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_load_weight %22 : !core.buf<[256, 32], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_matmul %8, %21 {accumulate = false} : !core.buf<[2, 256], bf16, sram>, !core.buf<[2, 32], f32, sram>
// CHECK-NEXT:       %23 = core.subview %20 [256, 0] [128, 32] : !core.buf<[384, 32], bf16, mpu_buffer> -> !core.buf<[128, 32], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_load_weight %23 : !core.buf<[128, 32], bf16, mpu_buffer>
// CHECK-NEXT:       core.mpu_matmul %10, %21 {accumulate = true} : !core.buf<[2, 128], bf16, sram>, !core.buf<[2, 32], f32, sram>
// CHECK-NEXT:       %24 = core.subview %12 [128, 0] [32, 2] : !core.buf<[160, 2], f32, sram> -> !core.buf<[32, 2], f32, sram>
// CHECK-NEXT:       core.vpu_transpose %21 to %24 : !core.buf<[2, 32], f32, sram>, !core.buf<[32, 2], f32, sram>
// CHECK-NEXT:       %25 = core.alloc sram : !core.buf<[2, 160], f32, sram>
// CHECK-NEXT:       core.vpu_transpose %12 to %25 : !core.buf<[160, 2], f32, sram>, !core.buf<[2, 160], f32, sram>
// CHECK-NEXT:       core.vpu_unary cast %25 to %5 : !core.buf<[2, 160], f32, sram>, !core.buf<[2, 160], bf16, sram>
// CHECK-NEXT:       core.dma %5 to %2 : !core.buf<[2, 160], bf16, sram>, !core.buf<[2, 160], bf16, shared_dram>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       core.end
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
