// RUN: legato-opt %s | filecheck %s --check-prefix=ROUND
// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory,convert-core-to-backend | filecheck %s --check-prefix=BE
//
// legato.scatter (gather the other way: a paged KV cache's write through vLLM's slot mapping):
// a runtime loop reads each i64 index (core.load_index, an `ld`) and DMAs the row from core
// memory into that row of the table in shared DRAM; one dma_wait after the loop.

// ROUND: legato.scatter %t, %x0, %x1 : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram>, !legato.tensor<[4, 8], f32, sram>

// CHECK:      scf.for %row = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:   %[[ID:.*]] = core.load_index %{{.*}}[%row] : !core.buf<[4], i64, sram>
// CHECK-NEXT:   %[[SRC:.*]] = core.subview %{{.*}} [%row, 0] [1, 8] : !core.buf<[4, 8], f32, sram> -> !core.buf<[1, 8], f32, sram>
// CHECK-NEXT:   %[[DST:.*]] = core.subview %{{.*}} [%[[ID]], 0] [1, 8] : !core.buf<[16, 8], f32, shared_dram> -> !core.buf<[1, 8], f32, shared_dram>
// CHECK-NEXT:   core.dma %[[SRC]] to %[[DST]] : !core.buf<[1, 8], f32, sram>, !core.buf<[1, 8], f32, shared_dram>
// CHECK-NEXT: }
// CHECK-NEXT: core.dma_wait

// BE:      backend.label "core0_loop0"
// BE:      backend.ld
// BE:      backend.dma
// BE:      backend.blt %{{.*}}, %{{.*}}, "core0_loop0"
// BE-NEXT: backend.label "core0_loop0_end"
// BE-NEXT: backend.dmawait

builtin.module {
  legato.kernel @k(%a0 : !legato.tensor<[4], i64, shared_dram>, %a1 : !legato.tensor<[4, 8], f32, shared_dram>, %t : !legato.tensor<[16, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a0 to core(0) memory sram queue 0 : !legato.tensor<[4], i64, shared_dram>
      legato.request_load %a1 to core(0) memory sram queue 1 : !legato.tensor<[4, 8], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x0 = legato.receive %a0 queue 0 memory sram : !legato.tensor<[4], i64, shared_dram> -> !legato.tensor<[4], i64, sram>
      %x1 = legato.receive %a1 queue 1 memory sram : !legato.tensor<[4, 8], f32, shared_dram> -> !legato.tensor<[4, 8], f32, sram>
      legato.scatter %t, %x0, %x1 : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram>, !legato.tensor<[4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}
