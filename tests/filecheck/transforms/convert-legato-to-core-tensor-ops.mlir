// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
//
// Tensor ops to core VPU ops: broadcast forms (a scalar lhs of sub is materialized), reductions
// (dim 0 through a transpose, amin as -max(-x), mean as an f32 sum and division), cast, reshape
// as a view, slice as a subview, cat by DMA into subviews, broadcast_to, transpose.

builtin.module {
  legato.kernel @k(%a0 : !legato.tensor<[4, 8], f32, shared_dram>, %a1 : !legato.tensor<[4, 1], f32, shared_dram>, %out : !legato.tensor<[4, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a0 to core(0) memory sram queue 0 : !legato.tensor<[4, 8], f32, shared_dram>
      legato.request_load %a1 to core(0) memory sram queue 1 : !legato.tensor<[4, 1], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x0 = legato.receive %a0 queue 0 memory sram : !legato.tensor<[4, 8], f32, shared_dram> -> !legato.tensor<[4, 8], f32, sram>
      %x1 = legato.receive %a1 queue 1 memory sram : !legato.tensor<[4, 1], f32, shared_dram> -> !legato.tensor<[4, 1], f32, sram>
      %c = legato.constant 0.5 : !legato.tensor<[], f32, sram>
      %a = legato.sub %c, %x0 : !legato.tensor<[], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %b = legato.div %a, %x1 : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 1], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %s = legato.sum %b dim 0 keepdim : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[1, 8], f32, sram>
      %m = legato.amin %b dim 1 : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4], f32, sram>
      %mu = legato.mean %b dim 1 keepdim : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 1], f32, sram>
      %h = legato.cast %b : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], bf16, sram>
      %v = legato.reshape %x0 : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[32], f32, sram>
      %sl = legato.slice %x0 [0, 2] [4, 4] [1, 1] : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 4], f32, sram>
      %ct = legato.cat %sl, %sl dim 1 : !legato.tensor<[4, 4], f32, sram>, !legato.tensor<[4, 4], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %bc = legato.broadcast_to %m : !legato.tensor<[4], f32, sram> -> !legato.tensor<[2, 4], f32, sram>
      %t = legato.transpose %x0 [1, 0] : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[8, 4], f32, sram>
      %r = legato.tanh %ct : !legato.tensor<[4, 8], f32, sram>
      legato.memcpy %out, %r : !legato.tensor<[4, 8], f32, shared_dram>, !legato.tensor<[4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}

// CHECK: builtin.module {
// CHECK-NEXT:   core.kernel @k args [#core.arg<0, [4, 8], f32, shared_dram, read>, #core.arg<1, [4, 1], f32, shared_dram, read>, #core.arg<2, [4, 8], f32, shared_dram, write>] attributes {arg_names = ["a0", "a1", "out"]} {
// CHECK-NEXT:     core.program @top on top {
// CHECK-NEXT:       %0 = core.arg 0 : !core.buf<[4, 8], f32, shared_dram>
// CHECK-NEXT:       %1 = core.arg 1 : !core.buf<[4, 1], f32, shared_dram>
// CHECK-NEXT:       %2 = core.alloc on core(0) sram {buffer = "xfer0"} : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.dma %0 to %2 notify core(0) sram queue 0 : !core.buf<[4, 8], f32, shared_dram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       %3 = core.alloc on core(0) sram {buffer = "xfer1"} : !core.buf<[4, 1], f32, sram>
// CHECK-NEXT:       core.dma %1 to %3 notify core(0) sram queue 1 : !core.buf<[4, 1], f32, shared_dram>, !core.buf<[4, 1], f32, sram>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       core.end
// CHECK-NEXT:     }
// CHECK-NEXT:     core.program @core0 on core(0) {
// CHECK-NEXT:       %0 = core.arg 0 : !core.buf<[4, 8], f32, shared_dram>
// CHECK-NEXT:       %1 = core.arg 1 : !core.buf<[4, 1], f32, shared_dram>
// CHECK-NEXT:       %2 = core.arg 2 : !core.buf<[4, 8], f32, shared_dram>
// CHECK-NEXT:       core.wait_queue sram queue 0
// CHECK-NEXT:       %3 = core.alloc sram {buffer = "xfer0"} : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.wait_queue sram queue 1
// CHECK-NEXT:       %4 = core.alloc sram {buffer = "xfer1"} : !core.buf<[4, 1], f32, sram>
// CHECK-NEXT:       %5 = core.alloc sram : !core.buf<[], f32, sram>
// CHECK-NEXT:       core.vpu_fill 0.5 to %5 : !core.buf<[], f32, sram>
// CHECK-NEXT:       %6 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       %7 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.vpu_unary copy %5 to %7 : !core.buf<[], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.vpu_binary sub %7, %3 to %6 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       %8 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.vpu_binary div %6, %4 to %8 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 1], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       %9 = core.alloc sram : !core.buf<[8, 4], f32, sram>
// CHECK-NEXT:       core.vpu_transpose %8 to %9 : !core.buf<[4, 8], f32, sram>, !core.buf<[8, 4], f32, sram>
// CHECK-NEXT:       %10 = core.alloc sram : !core.buf<[8], f32, sram>
// CHECK-NEXT:       core.vpu_reduce sum %9 to %10 : !core.buf<[8, 4], f32, sram>, !core.buf<[8], f32, sram>
// CHECK-NEXT:       %11 = core.view %10 : !core.buf<[8], f32, sram> -> !core.buf<[1, 8], f32, sram>
// CHECK-NEXT:       %12 = core.alloc sram : !core.buf<[4], f32, sram>
// CHECK-NEXT:       %13 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.vpu_unary neg %8 to %13 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       %14 = core.alloc sram : !core.buf<[4], f32, sram>
// CHECK-NEXT:       core.vpu_reduce max %13 to %14 : !core.buf<[4, 8], f32, sram>, !core.buf<[4], f32, sram>
// CHECK-NEXT:       core.vpu_unary neg %14 to %12 : !core.buf<[4], f32, sram>, !core.buf<[4], f32, sram>
// CHECK-NEXT:       %15 = core.alloc sram : !core.buf<[4, 1], f32, sram>
// CHECK-NEXT:       %16 = core.alloc sram : !core.buf<[4, 1], f32, sram>
// CHECK-NEXT:       core.vpu_reduce sum %8 to %16 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 1], f32, sram>
// CHECK-NEXT:       %17 = core.alloc sram : !core.buf<[], f32, sram>
// CHECK-NEXT:       core.vpu_fill 8.0 to %17 : !core.buf<[], f32, sram>
// CHECK-NEXT:       core.vpu_binary div %16, %17 to %15 : !core.buf<[4, 1], f32, sram>, !core.buf<[], f32, sram>, !core.buf<[4, 1], f32, sram>
// CHECK-NEXT:       %18 = core.alloc sram : !core.buf<[4, 8], bf16, sram>
// CHECK-NEXT:       core.vpu_unary cast %8 to %18 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], bf16, sram>
// CHECK-NEXT:       %19 = core.view %3 : !core.buf<[4, 8], f32, sram> -> !core.buf<[32], f32, sram>
// CHECK-NEXT:       %20 = core.subview %3 [0, 2] [4, 4] : !core.buf<[4, 8], f32, sram> -> !core.buf<[4, 4], f32, sram>
// CHECK-NEXT:       %21 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       %22 = core.subview %21 [0, 0] [4, 4] : !core.buf<[4, 8], f32, sram> -> !core.buf<[4, 4], f32, sram>
// CHECK-NEXT:       core.dma %20 to %22 : !core.buf<[4, 4], f32, sram>, !core.buf<[4, 4], f32, sram>
// CHECK-NEXT:       %23 = core.subview %21 [0, 4] [4, 4] : !core.buf<[4, 8], f32, sram> -> !core.buf<[4, 4], f32, sram>
// CHECK-NEXT:       core.dma %20 to %23 : !core.buf<[4, 4], f32, sram>, !core.buf<[4, 4], f32, sram>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       %24 = core.alloc sram : !core.buf<[2, 4], f32, sram>
// CHECK-NEXT:       core.vpu_unary copy %12 to %24 : !core.buf<[4], f32, sram>, !core.buf<[2, 4], f32, sram>
// CHECK-NEXT:       %25 = core.alloc sram : !core.buf<[8, 4], f32, sram>
// CHECK-NEXT:       core.vpu_transpose %3 to %25 : !core.buf<[4, 8], f32, sram>, !core.buf<[8, 4], f32, sram>
// CHECK-NEXT:       %26 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.vpu_unary tanh %21 to %26 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT:       core.dma %26 to %2 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, shared_dram>
// CHECK-NEXT:       core.dma_wait
// CHECK-NEXT:       core.end
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
