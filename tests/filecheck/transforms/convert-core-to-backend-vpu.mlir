// RUN: legato-opt %s -p convert-core-to-backend | filecheck %s
//
// VPU instruction selection: bc.scalar/row/col forms, a broadcast copy (fill -inf, max), rsum/rmax,
// cvt, transpose, views (same register), subview addresses, a strided DMA as one dma2d per 2-D block.

builtin.module {
  core.kernel @k args [#core.arg<0, [4, 8], f32, shared_dram, read>, #core.arg<1, [4, 1], f32, shared_dram, read>, #core.arg<2, [4, 8], f32, shared_dram, write>] {
    core.program @top on top {
      %0 = core.arg 0 : !core.buf<[4, 8], f32, shared_dram>
      %1 = core.arg 1 : !core.buf<[4, 1], f32, shared_dram>
      %2 = core.alloc on core(0) sram {offset = 0 : i64, buffer = "xfer0"} : !core.buf<[4, 8], f32, sram>
      core.dma %0 to %2 notify core(0) sram queue 0 : !core.buf<[4, 8], f32, shared_dram>, !core.buf<[4, 8], f32, sram>
      %3 = core.alloc on core(0) sram {offset = 128 : i64, buffer = "xfer1"} : !core.buf<[4, 1], f32, sram>
      core.dma %1 to %3 notify core(0) sram queue 1 : !core.buf<[4, 1], f32, shared_dram>, !core.buf<[4, 1], f32, sram>
      core.dma_wait
      core.end
    }
    core.program @core0 on core(0) {
      %0 = core.arg 0 : !core.buf<[4, 8], f32, shared_dram>
      %1 = core.arg 1 : !core.buf<[4, 1], f32, shared_dram>
      %2 = core.arg 2 : !core.buf<[4, 8], f32, shared_dram>
      core.wait_queue sram queue 0
      %3 = core.alloc sram {offset = 0 : i64, buffer = "xfer0"} : !core.buf<[4, 8], f32, sram>
      core.wait_queue sram queue 1
      %4 = core.alloc sram {offset = 128 : i64, buffer = "xfer1"} : !core.buf<[4, 1], f32, sram>
      %5 = core.alloc sram {offset = 192 : i64} : !core.buf<[], f32, sram>
      core.vpu_fill 0.5 to %5 : !core.buf<[], f32, sram>
      %6 = core.alloc sram {offset = 256 : i64} : !core.buf<[4, 8], f32, sram>
      %7 = core.alloc sram {offset = 384 : i64} : !core.buf<[4, 8], f32, sram>
      core.vpu_unary copy %5 to %7 : !core.buf<[], f32, sram>, !core.buf<[4, 8], f32, sram>
      core.vpu_binary sub %7, %3 to %6 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
      %8 = core.alloc sram {offset = 512 : i64} : !core.buf<[4, 8], f32, sram>
      core.vpu_binary div %6, %4 to %8 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 1], f32, sram>, !core.buf<[4, 8], f32, sram>
      %9 = core.alloc sram {offset = 640 : i64} : !core.buf<[8, 4], f32, sram>
      core.vpu_transpose %8 to %9 : !core.buf<[4, 8], f32, sram>, !core.buf<[8, 4], f32, sram>
      %10 = core.alloc sram {offset = 768 : i64} : !core.buf<[8], f32, sram>
      core.vpu_reduce sum %9 to %10 : !core.buf<[8, 4], f32, sram>, !core.buf<[8], f32, sram>
      %11 = core.view %10 : !core.buf<[8], f32, sram> -> !core.buf<[1, 8], f32, sram>
      %12 = core.alloc sram {offset = 832 : i64} : !core.buf<[4], f32, sram>
      %13 = core.alloc sram {offset = 896 : i64} : !core.buf<[4, 8], f32, sram>
      core.vpu_unary neg %8 to %13 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
      %14 = core.alloc sram {offset = 1024 : i64} : !core.buf<[4], f32, sram>
      core.vpu_reduce max %13 to %14 : !core.buf<[4, 8], f32, sram>, !core.buf<[4], f32, sram>
      core.vpu_unary neg %14 to %12 : !core.buf<[4], f32, sram>, !core.buf<[4], f32, sram>
      %15 = core.alloc sram {offset = 1088 : i64} : !core.buf<[4, 1], f32, sram>
      %16 = core.alloc sram {offset = 1152 : i64} : !core.buf<[4, 1], f32, sram>
      core.vpu_reduce sum %8 to %16 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 1], f32, sram>
      %17 = core.alloc sram {offset = 1216 : i64} : !core.buf<[], f32, sram>
      core.vpu_fill 8.0 to %17 : !core.buf<[], f32, sram>
      core.vpu_binary div %16, %17 to %15 : !core.buf<[4, 1], f32, sram>, !core.buf<[], f32, sram>, !core.buf<[4, 1], f32, sram>
      %18 = core.alloc sram {offset = 1280 : i64} : !core.buf<[4, 8], bf16, sram>
      core.vpu_unary cast %8 to %18 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], bf16, sram>
      %19 = core.view %3 : !core.buf<[4, 8], f32, sram> -> !core.buf<[32], f32, sram>
      %20 = core.subview %3 [0, 2] [4, 4] : !core.buf<[4, 8], f32, sram> -> !core.buf<[4, 4], f32, sram>
      %21 = core.alloc sram {offset = 1344 : i64} : !core.buf<[4, 8], f32, sram>
      %22 = core.subview %21 [0, 0] [4, 4] : !core.buf<[4, 8], f32, sram> -> !core.buf<[4, 4], f32, sram>
      core.dma %20 to %22 : !core.buf<[4, 4], f32, sram>, !core.buf<[4, 4], f32, sram>
      %23 = core.subview %21 [0, 4] [4, 4] : !core.buf<[4, 8], f32, sram> -> !core.buf<[4, 4], f32, sram>
      core.dma %20 to %23 : !core.buf<[4, 4], f32, sram>, !core.buf<[4, 4], f32, sram>
      core.dma_wait
      %24 = core.alloc sram {offset = 1472 : i64} : !core.buf<[2, 4], f32, sram>
      core.vpu_unary copy %12 to %24 : !core.buf<[4], f32, sram>, !core.buf<[2, 4], f32, sram>
      %25 = core.alloc sram {offset = 1536 : i64} : !core.buf<[8, 4], f32, sram>
      core.vpu_transpose %3 to %25 : !core.buf<[4, 8], f32, sram>, !core.buf<[8, 4], f32, sram>
      %26 = core.alloc sram {offset = 1664 : i64} : !core.buf<[4, 8], f32, sram>
      core.vpu_unary tanh %21 to %26 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
      core.dma %26 to %2 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, shared_dram>
      core.dma_wait
      core.end
    }
  }
}

// CHECK: builtin.module {
// CHECK-NEXT:   backend.kernel @k args [#core.arg<0, [4, 8], f32, shared_dram, read>, #core.arg<1, [4, 1], f32, shared_dram, read>, #core.arg<2, [4, 8], f32, shared_dram, write>] {
// CHECK-NEXT:     backend.program @top on top {
// CHECK-NEXT:       %0 = backend.entry_reg "r1" : !backend.reg<r1>
// CHECK-NEXT:       %1 = backend.ld %0, 8 : (!backend.reg<r1>) -> !backend.reg
// CHECK-NEXT:       %2 = backend.ld %0, 16 : (!backend.reg<r1>) -> !backend.reg
// CHECK-NEXT:       %3 = backend.lsa core(0) sram, 0 : !backend.reg
// CHECK-NEXT:       %4 = backend.li 128 : !backend.reg
// CHECK-NEXT:       backend.dma %3, %1, %4 notify core(0) sram queue 0 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %5 = backend.lsa core(0) sram, 128 : !backend.reg
// CHECK-NEXT:       %6 = backend.li 16 : !backend.reg
// CHECK-NEXT:       backend.dma %5, %2, %6 notify core(0) sram queue 1 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       backend.dmawait
// CHECK-NEXT:       backend.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     backend.program @core0 on core(0) mem {sram = 1792 : i64} {
// CHECK-NEXT:       %0 = backend.entry_reg "r1" : !backend.reg<r1>
// CHECK-NEXT:       %1 = backend.ld %0, 24 : (!backend.reg<r1>) -> !backend.reg
// CHECK-NEXT:       backend.qwait sram queue 0
// CHECK-NEXT:       %2 = backend.lsa sram, 0 : !backend.reg
// CHECK-NEXT:       backend.qwait sram queue 1
// CHECK-NEXT:       %3 = backend.lsa sram, 128 : !backend.reg
// CHECK-NEXT:       %4 = backend.lsa sram, 192 : !backend.reg
// CHECK-NEXT:       %5 = backend.li 1056964608 : !backend.reg
// CHECK-NEXT:       %6 = backend.li 1 : !backend.reg
// CHECK-NEXT:       backend.vpu_fill %4, %6, %5, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %7 = backend.lsa sram, 256 : !backend.reg
// CHECK-NEXT:       %8 = backend.lsa sram, 384 : !backend.reg
// CHECK-NEXT:       %9 = backend.li 32 : !backend.reg
// CHECK-NEXT:       %10 = backend.li 4286578688 : !backend.reg
// CHECK-NEXT:       backend.vpu_fill %8, %9, %10, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       backend.vpu_max %8, %8, %4, %9, f32, bc.scalar : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %11 = backend.li 32 : !backend.reg
// CHECK-NEXT:       backend.vpu_sub %7, %8, %2, %11, f32 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %12 = backend.lsa sram, 512 : !backend.reg
// CHECK-NEXT:       %13 = backend.li 32 : !backend.reg
// CHECK-NEXT:       backend.vpu_div %12, %7, %3, %13, f32, bc.row(8) : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %14 = backend.lsa sram, 640 : !backend.reg
// CHECK-NEXT:       %15 = backend.li 4 : !backend.reg
// CHECK-NEXT:       %16 = backend.li 8 : !backend.reg
// CHECK-NEXT:       backend.vpu_transpose %14, %12, %15, %16, f32 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %17 = backend.lsa sram, 768 : !backend.reg
// CHECK-NEXT:       %18 = backend.li 8 : !backend.reg
// CHECK-NEXT:       %19 = backend.li 4 : !backend.reg
// CHECK-NEXT:       backend.vpu_rsum %17, %14, %18, %19, f32 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %20 = backend.lsa sram, 832 : !backend.reg
// CHECK-NEXT:       %21 = backend.lsa sram, 896 : !backend.reg
// CHECK-NEXT:       %22 = backend.li 32 : !backend.reg
// CHECK-NEXT:       backend.vpu_neg %21, %12, %22, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %23 = backend.lsa sram, 1024 : !backend.reg
// CHECK-NEXT:       %24 = backend.li 4 : !backend.reg
// CHECK-NEXT:       %25 = backend.li 8 : !backend.reg
// CHECK-NEXT:       backend.vpu_rmax %23, %21, %24, %25, f32 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %26 = backend.li 4 : !backend.reg
// CHECK-NEXT:       backend.vpu_neg %20, %23, %26, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %27 = backend.lsa sram, 1088 : !backend.reg
// CHECK-NEXT:       %28 = backend.lsa sram, 1152 : !backend.reg
// CHECK-NEXT:       %29 = backend.li 4 : !backend.reg
// CHECK-NEXT:       %30 = backend.li 8 : !backend.reg
// CHECK-NEXT:       backend.vpu_rsum %28, %12, %29, %30, f32 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %31 = backend.lsa sram, 1216 : !backend.reg
// CHECK-NEXT:       %32 = backend.li 1090519040 : !backend.reg
// CHECK-NEXT:       %33 = backend.li 1 : !backend.reg
// CHECK-NEXT:       backend.vpu_fill %31, %33, %32, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %34 = backend.li 4 : !backend.reg
// CHECK-NEXT:       backend.vpu_div %27, %28, %31, %34, f32, bc.scalar : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %35 = backend.lsa sram, 1280 : !backend.reg
// CHECK-NEXT:       %36 = backend.li 32 : !backend.reg
// CHECK-NEXT:       backend.vpu_cvt %35, %12, %36, bf16, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %37 = backend.addi %2, 8 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       %38 = backend.lsa sram, 1344 : !backend.reg
// CHECK-NEXT:       %39 = backend.li 4 : !backend.reg
// CHECK-NEXT:       %40 = backend.shli %39, 32 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       %41 = backend.addi %40, 16 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       %42 = backend.li 32 : !backend.reg
// CHECK-NEXT:       %43 = backend.shli %42, 32 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       %44 = backend.addi %43, 32 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       backend.dma2d %38, %37, %41, %44 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %45 = backend.addi %38, 16 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       %46 = backend.li 4 : !backend.reg
// CHECK-NEXT:       %47 = backend.shli %46, 32 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       %48 = backend.addi %47, 16 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       %49 = backend.li 32 : !backend.reg
// CHECK-NEXT:       %50 = backend.shli %49, 32 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       %51 = backend.addi %50, 32 : (!backend.reg) -> !backend.reg
// CHECK-NEXT:       backend.dma2d %45, %37, %48, %51 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       backend.dmawait
// CHECK-NEXT:       %52 = backend.lsa sram, 1472 : !backend.reg
// CHECK-NEXT:       %53 = backend.li 8 : !backend.reg
// CHECK-NEXT:       %54 = backend.li 4286578688 : !backend.reg
// CHECK-NEXT:       backend.vpu_fill %52, %53, %54, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       backend.vpu_max %52, %52, %20, %53, f32, bc.col(4) : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %55 = backend.lsa sram, 1536 : !backend.reg
// CHECK-NEXT:       %56 = backend.li 4 : !backend.reg
// CHECK-NEXT:       %57 = backend.li 8 : !backend.reg
// CHECK-NEXT:       backend.vpu_transpose %55, %2, %56, %57, f32 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %58 = backend.lsa sram, 1664 : !backend.reg
// CHECK-NEXT:       %59 = backend.li 32 : !backend.reg
// CHECK-NEXT:       backend.vpu_tanh %58, %38, %59, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       %60 = backend.li 128 : !backend.reg
// CHECK-NEXT:       backend.dma %1, %58, %60 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// CHECK-NEXT:       backend.dmawait
// CHECK-NEXT:       backend.halt
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
