// RUN: legato-opt %s | filecheck %s --check-prefix=ROUND
// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
//
// legato.gather with `offset 2` (torch's embedding(table, p + 2), OPT's learned positions): the
// first index read in the loop gets the offset added on the scalar unit (a 64-bit add, wrapping
// as torch's int64 add; the VPU has none), then is clamped to [-1, rows] and its row DMA'd, so
// p = -1 reads row 1 and p + 2 outside [0, 16) faults.

// ROUND: %g = legato.gather %t, %x offset 2 : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 8], f32, sram>

// CHECK:      %[[C:.*]] = arith.constant 2 : index
// CHECK-NEXT: %[[LO:.*]] = arith.constant -1 : index
// CHECK-NEXT: %[[HI:.*]] = arith.constant 16 : index
// CHECK:      scf.for %row = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:   %[[P:.*]] = core.load_index %{{.*}}[%row] : !core.buf<[4], i64, sram>
// CHECK-NEXT:   %[[R:.*]] = arith.addi %[[P]], %[[C]] : index
// CHECK-NEXT:   %[[R1:.*]] = arith.maxsi %[[R]], %[[LO]] : index
// CHECK-NEXT:   %[[R2:.*]] = arith.minsi %[[R1]], %[[HI]] : index
// CHECK-NEXT:   %{{.*}} = core.subview %{{.*}} [%[[R2]], 0] [1, 8] : !core.buf<[16, 8], f32, shared_dram> -> !core.buf<[1, 8], f32, shared_dram>

builtin.module {
  legato.kernel @k(%a : !legato.tensor<[4], i64, shared_dram>, %t : !legato.tensor<[16, 8], f32, shared_dram>, %out : !legato.tensor<[4, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[4], i64, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], i64, shared_dram> -> !legato.tensor<[4], i64, sram>
      %g = legato.gather %t, %x offset 2 : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 8], f32, sram>
      legato.memcpy %out, %g : !legato.tensor<[4, 8], f32, shared_dram>, !legato.tensor<[4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}
