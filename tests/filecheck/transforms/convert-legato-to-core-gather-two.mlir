// RUN: legato-opt %s | filecheck %s --check-prefix=ROUND
// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory,convert-core-to-backend | filecheck %s --check-prefix=BE
//
// legato.gather with two index tensors (torch's x[i, j]): each iteration loads both indices and
// the row's address combines them on the scalar unit (a subview at [i, j, 0]; the VPU has no
// int64 arithmetic). A j outside [0, 4) would land in another row of the table (4 i + j), so
// any later index outside its dim sets i to 6 (one row past the table) and j to 0: the row
// DMA's bounds check reports it, at the gather's line. Each index is first clamped to just
// outside its dim ([-1, 6], [-1, 4]): a huge one (2^62) must not overflow the address arithmetic.

// ROUND: %g = legato.gather %t, %x, %y : !legato.tensor<[6, 4, 8], f32, shared_dram>, !legato.tensor<[3], i64, sram>, !legato.tensor<[3], i64, sram> -> !legato.tensor<[3, 8], f32, sram>

// CHECK:      scf.for %row = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:   %[[I0:.*]] = core.load_index %{{.*}}[%row] : !core.buf<[3], i64, sram>
// CHECK-NEXT:   %[[J0:.*]] = core.load_index %{{.*}}[%row] : !core.buf<[3], i64, sram>
// CHECK-NEXT:   %[[IL:.*]] = arith.maxsi %[[I0]], %{{.*}} : index
// CHECK-NEXT:   %[[I:.*]] = arith.minsi %[[IL]], %{{.*}} : index
// CHECK-NEXT:   %[[JL:.*]] = arith.maxsi %[[J0]], %{{.*}} : index
// CHECK-NEXT:   %[[J:.*]] = arith.minsi %[[JL]], %{{.*}} : index
// j outside [0, 4): min(max(-j, 0), 1) + min(max(j - 3, 0), 1)
// CHECK:        %[[BELOW:.*]] = arith.subi %{{.*}}, %[[J]] : index
// CHECK-NEXT:   %[[THREE:.*]] = arith.constant 3 : index
// CHECK-NEXT:   %[[ABOVE:.*]] = arith.subi %[[J]], %[[THREE]] : index
// CHECK:        %[[FLAG:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:   %[[BAD:.*]] = arith.minsi %[[FLAG]], %{{.*}} : index
// CHECK-NEXT:   %[[KEEP:.*]] = arith.subi %{{.*}}, %[[BAD]] : index
// CHECK-NEXT:   %[[SIX:.*]] = arith.constant 6 : index
// CHECK-NEXT:   %[[GAP:.*]] = arith.subi %[[SIX]], %[[I]] : index
// CHECK-NEXT:   %[[SHIFT:.*]] = arith.muli %[[BAD]], %[[GAP]] : index
// CHECK-NEXT:   %[[I2:.*]] = arith.addi %[[I]], %[[SHIFT]] : index
// CHECK-NEXT:   %[[J2:.*]] = arith.muli %[[J]], %[[KEEP]] : index
// CHECK-NEXT:   %{{.*}} = core.subview %{{.*}} [%[[I2]], %[[J2]], 0] [1, 1, 8] : !core.buf<[6, 4, 8], f32, shared_dram> -> !core.buf<[1, 1, 8], f32, shared_dram>
// CHECK-NEXT:   %{{.*}} = core.subview %{{.*}} [%row, 0, 0] [1, 1, 8] : !core.buf<[3, 1, 8], f32, sram> -> !core.buf<[1, 1, 8], f32, sram>
// CHECK-NEXT:   core.dma

// BE:      backend.label "core0_loop0"
// BE:      backend.ld %{{.*}}, 0
// BE:      backend.ld %{{.*}}, 0
// BE:      backend.dma

builtin.module {
  legato.kernel @k(%t : !legato.tensor<[6, 4, 8], f32, shared_dram>, %ids : !legato.tensor<[3], i64, shared_dram>, %cols : !legato.tensor<[3], i64, shared_dram>, %out : !legato.tensor<[3, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %ids to core(0) memory sram queue 0 : !legato.tensor<[3], i64, shared_dram>
      legato.request_load %cols to core(0) memory sram queue 1 : !legato.tensor<[3], i64, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive %ids queue 0 memory sram : !legato.tensor<[3], i64, shared_dram> -> !legato.tensor<[3], i64, sram>
      %y = legato.receive %cols queue 1 memory sram : !legato.tensor<[3], i64, shared_dram> -> !legato.tensor<[3], i64, sram>
      %g = legato.gather %t, %x, %y : !legato.tensor<[6, 4, 8], f32, shared_dram>, !legato.tensor<[3], i64, sram>, !legato.tensor<[3], i64, sram> -> !legato.tensor<[3, 8], f32, sram>
      legato.memcpy %out, %g : !legato.tensor<[3, 8], f32, shared_dram>, !legato.tensor<[3, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}
