// RUN: legato-opt %s | filecheck %s --check-prefix=ROUND
// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory,convert-core-to-backend | filecheck %s --check-prefix=BE
//
// legato.gather with `wrap` (torch's x[idx]: a negative index counts from the end): each index
// i read in the loop is clamped to [-rows - 1, rows] (so that a huge index cannot wrap the row's
// byte address back into the table) and becomes i + rows * min(max(-i, 0), 1), i.e. i + rows for
// a negative i, before its row is DMA'd. An index outside [-rows, rows) stays outside [0, rows)
// and the row DMA's bounds check reports it (a `rem rows` would wrap 16 to row 0 silently);
// without `wrap` the index is clamped to [-1, rows] (convert-legato-to-core-where-gather.mlir).

// ROUND: %g = legato.gather %t, %x wrap : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 8], f32, sram>

// CHECK:      scf.for %row = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:   %[[ID0:.*]] = core.load_index %{{.*}}[%row] : !core.buf<[4], i64, sram>
// CHECK-NEXT:   %[[LO:.*]] = arith.maxsi %[[ID0]], %{{.*}} : index
// CHECK-NEXT:   %[[ID:.*]] = arith.minsi %[[LO]], %{{.*}} : index
// CHECK-NEXT:   %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT:   %[[O:.*]] = arith.constant 1 : index
// CHECK-NEXT:   %[[NEG:.*]] = arith.subi %[[Z]], %[[ID]] : index
// CHECK-NEXT:   %[[P:.*]] = arith.maxsi %[[NEG]], %[[Z]] : index
// CHECK-NEXT:   %[[B:.*]] = arith.minsi %[[P]], %[[O]] : index
// CHECK-NEXT:   %[[N:.*]] = arith.constant 16 : index
// CHECK-NEXT:   %[[SH:.*]] = arith.muli %[[B]], %[[N]] : index
// CHECK-NEXT:   %[[W:.*]] = arith.addi %[[ID]], %[[SH]] : index
// CHECK-NEXT:   %{{.*}} = core.subview %{{.*}} [%[[W]], 0] [1, 8] : !core.buf<[16, 8], f32, shared_dram> -> !core.buf<[1, 8], f32, shared_dram>
// CHECK-NOT:    arith.remsi

// BE:      backend.label "core0_loop0"
// BE:      %[[ID0:.*]] = backend.ld %{{.*}}, 0
// BE-NEXT: %[[LO:.*]] = backend.max %[[ID0]], %{{.*}}
// BE-NEXT: %[[ID:.*]] = backend.min %[[LO]], %{{.*}}
// BE-NEXT: %[[Z:.*]] = backend.li 0
// BE-NEXT: %[[O:.*]] = backend.li 1
// BE-NEXT: %[[NEG:.*]] = backend.sub %[[Z]], %[[ID]]
// BE-NEXT: %[[P:.*]] = backend.max %[[NEG]], %[[Z]]
// BE-NEXT: %[[B:.*]] = backend.min %[[P]], %[[O]]
// BE-NEXT: %[[N:.*]] = backend.li 16
// BE-NEXT: %[[SH:.*]] = backend.mul %[[B]], %[[N]]
// BE-NEXT: %[[W:.*]] = backend.add %[[ID]], %[[SH]]
// BE-NEXT: %{{.*}} = backend.muli %[[W]], 8
// BE:      backend.dma

builtin.module {
  legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %ids : !legato.tensor<[4], i64, shared_dram>, %out : !legato.tensor<[4, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %ids to core(0) memory sram queue 0 : !legato.tensor<[4], i64, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive %ids queue 0 memory sram : !legato.tensor<[4], i64, shared_dram> -> !legato.tensor<[4], i64, sram>
      %g = legato.gather %t, %x wrap : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 8], f32, sram>
      legato.memcpy %out, %g : !legato.tensor<[4, 8], f32, shared_dram>, !legato.tensor<[4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}
