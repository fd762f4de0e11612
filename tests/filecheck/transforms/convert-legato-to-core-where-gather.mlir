// RUN: legato-opt %s | filecheck %s --check-prefix=ROUND
// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory,convert-core-to-backend | filecheck %s --check-prefix=BE
//
// legato.where: the result is a broadcast copy of the second value, then core.vpu_select
// (vpu.sel) merges the first where the condition is nonzero; a broadcast float mask is
// materialized first. legato.gather: a runtime loop reads each i64 index (core.load_index, an
// `ld`), clamps it to [-1, 16] (the constants set before the loop: a huge index must not wrap
// the row's byte address back into the table) and DMAs the table row from shared DRAM; one
// dma_wait after the loop.

// ROUND: %w = legato.where %x0, %x1, %x2 : !legato.tensor<[4, 8], i1, sram>, !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
// ROUND: %g = legato.gather %t, %x3 : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 8], f32, sram>

// CHECK:      %12 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT: core.vpu_unary copy %9 to %12 : !core.buf<[8], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT: core.vpu_select %7, %8 to %12 : !core.buf<[4, 8], i1, sram>, !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT: %13 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT: %14 = arith.constant -1 : index
// CHECK-NEXT: %15 = arith.constant 16 : index
// CHECK-NEXT: %16 = arith.constant 0 : index
// CHECK-NEXT: %17 = arith.constant 1 : index
// CHECK-NEXT: %18 = arith.constant 4 : index
// CHECK-NEXT: scf.for %row = %16 to %18 step %17 {
// CHECK-NEXT:   %19 = core.load_index %10[%row] : !core.buf<[4], i64, sram>
// CHECK-NEXT:   %20 = arith.maxsi %19, %14 : index
// CHECK-NEXT:   %21 = arith.minsi %20, %15 : index
// CHECK-NEXT:   %22 = core.subview %5 [%21, 0] [1, 8] : !core.buf<[16, 8], f32, shared_dram> -> !core.buf<[1, 8], f32, shared_dram>
// CHECK-NEXT:   %23 = core.subview %13 [%row, 0] [1, 8] : !core.buf<[4, 8], f32, sram> -> !core.buf<[1, 8], f32, sram>
// CHECK-NEXT:   core.dma %22 to %23 : !core.buf<[1, 8], f32, shared_dram>, !core.buf<[1, 8], f32, sram>
// CHECK-NEXT: }
// CHECK-NEXT: core.dma_wait
// CHECK-NEXT: %24 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT: core.vpu_unary copy %13 to %24 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT: %25 = core.alloc sram : !core.buf<[4, 8], f32, sram>
// CHECK-NEXT: core.vpu_unary copy %11 to %25 : !core.buf<[4, 1], f32, sram>, !core.buf<[4, 8], f32, sram>
// CHECK-NEXT: core.vpu_select %25, %12 to %24 : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>

// BE:      backend.vpu_sel %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, f32, i1 :
// BE:      backend.label "core0_loop0"
// BE-NEXT: %[[OFF:.*]] = backend.muli %[[I:.*]], 8 : (!backend.reg<r31>) -> !backend.reg
// BE-NEXT: %[[ADDR:.*]] = backend.add %{{.*}}, %[[OFF]]
// BE-NEXT: %[[ID:.*]] = backend.ld %[[ADDR]], 0
// BE-NEXT: %[[LO:.*]] = backend.max %[[ID]], %{{.*}}
// BE-NEXT: %[[CL:.*]] = backend.min %[[LO]], %{{.*}}
// BE-NEXT: %[[ROW:.*]] = backend.muli %[[CL]], 8
// BE:      backend.dma
// BE:      backend.blt %{{.*}}, %{{.*}}, "core0_loop0"
// BE-NEXT: backend.label "core0_loop0_end"
// BE-NEXT: backend.dmawait
// BE:      backend.vpu_sel %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, f32, f32 :

builtin.module {
  legato.kernel @k(%a0 : !legato.tensor<[4, 8], i1, shared_dram>, %a1 : !legato.tensor<[4, 8], f32, shared_dram>, %a2 : !legato.tensor<[8], f32, shared_dram>, %a3 : !legato.tensor<[4], i64, shared_dram>, %a4 : !legato.tensor<[4, 1], f32, shared_dram>, %t : !legato.tensor<[16, 8], f32, shared_dram>, %out : !legato.tensor<[4, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a0 to core(0) memory sram queue 0 : !legato.tensor<[4, 8], i1, shared_dram>
      legato.request_load %a1 to core(0) memory sram queue 1 : !legato.tensor<[4, 8], f32, shared_dram>
      legato.request_load %a2 to core(0) memory sram queue 2 : !legato.tensor<[8], f32, shared_dram>
      legato.request_load %a3 to core(0) memory sram queue 3 : !legato.tensor<[4], i64, shared_dram>
      legato.request_load %a4 to core(0) memory sram queue 4 : !legato.tensor<[4, 1], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x0 = legato.receive %a0 queue 0 memory sram : !legato.tensor<[4, 8], i1, shared_dram> -> !legato.tensor<[4, 8], i1, sram>
      %x1 = legato.receive %a1 queue 1 memory sram : !legato.tensor<[4, 8], f32, shared_dram> -> !legato.tensor<[4, 8], f32, sram>
      %x2 = legato.receive %a2 queue 2 memory sram : !legato.tensor<[8], f32, shared_dram> -> !legato.tensor<[8], f32, sram>
      %x3 = legato.receive %a3 queue 3 memory sram : !legato.tensor<[4], i64, shared_dram> -> !legato.tensor<[4], i64, sram>
      %x4 = legato.receive %a4 queue 4 memory sram : !legato.tensor<[4, 1], f32, shared_dram> -> !legato.tensor<[4, 1], f32, sram>
      %w = legato.where %x0, %x1, %x2 : !legato.tensor<[4, 8], i1, sram>, !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %g = legato.gather %t, %x3 : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 8], f32, sram>
      %m = legato.where %x4, %w, %g : !legato.tensor<[4, 1], f32, sram>, !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      legato.memcpy %out, %m : !legato.tensor<[4, 8], f32, shared_dram>, !legato.tensor<[4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}
