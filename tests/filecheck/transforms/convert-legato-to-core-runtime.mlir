// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
//
// Runtime values: legato.dim is the buffer's runtime dim, arith on indices is cloned,
// scf.for loses its iter_args (a carried tensor lives in an accumulator buffer, filled before
// the loop and copied into at the end of every iteration), dynamic_slice is a core.subview,
// legato.load an alloc + DMA + wait.

builtin.module {
  legato.kernel @k(%x : !legato.tensor<[?64, 32], f32, shared_dram>, %out : !legato.tensor<[64, 32], f32, shared_dram>, %tot : !legato.tensor<[1, 32], f32, shared_dram>) {
    legato.on core(0) {
      %n = legato.dim %x, 0 : !legato.tensor<[?64, 32], f32, shared_dram>
      %acc = legato.constant 0.0 : !legato.tensor<[1, 32], f32, sram>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %nt = arith.divsi %n, %c4 : index
      %r = scf.for %t = %c0 to %nt step %c1 iter_args(%a = %acc) -> (!legato.tensor<[1, 32], f32, sram>) {
        %o = arith.muli %t, %c4 : index
        %s = legato.dynamic_slice %x [%o, 0] [4, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[4, 32], f32, shared_dram>
        %tile = legato.load %s memory sram : !legato.tensor<[4, 32], f32, shared_dram> -> !legato.tensor<[4, 32], f32, sram>
        %d = legato.dynamic_slice %out [%o, 0] [4, 32] : !legato.tensor<[64, 32], f32, shared_dram> -> !legato.tensor<[4, 32], f32, shared_dram>
        legato.memcpy %d, %tile : !legato.tensor<[4, 32], f32, shared_dram>, !legato.tensor<[4, 32], f32, sram>
        %sum = legato.sum %tile dim 0 keepdim : !legato.tensor<[4, 32], f32, sram> -> !legato.tensor<[1, 32], f32, sram>
        %a2 = legato.add %a, %sum : !legato.tensor<[1, 32], f32, sram>, !legato.tensor<[1, 32], f32, sram> -> !legato.tensor<[1, 32], f32, sram>
        scf.yield %a2 : !legato.tensor<[1, 32], f32, sram>
      }
      legato.memcpy %tot, %r : !legato.tensor<[1, 32], f32, shared_dram>, !legato.tensor<[1, 32], f32, sram>
      legato.yield
    }
    legato.return
  }
}

// CHECK:      core.kernel @k args [#core.arg<0, [?64, 32], f32, shared_dram, read>, #core.arg<1, [64, 32], f32, shared_dram, write>, #core.arg<2, [1, 32], f32, shared_dram, write>]
// CHECK:        %[[X:.*]] = core.arg 0 : !core.buf<[?64, 32], f32, shared_dram>
// CHECK-NEXT:   %[[N:.*]] = core.dim %[[X]], 0 : index
// CHECK:        %[[INIT:.*]] = core.alloc sram : !core.buf<[1, 32], f32, sram>
// CHECK-NEXT:   core.vpu_fill 0.0 to %[[INIT]]
// CHECK:        %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:   %[[NT:.*]] = arith.divsi %[[N]], %[[C4]] : index
// CHECK-NEXT:   %[[ACC:.*]] = core.alloc sram : !core.buf<[1, 32], f32, sram>
// CHECK-NEXT:   core.vpu_unary copy %[[INIT]] to %[[ACC]]
// CHECK-NEXT:   scf.for %[[T:.*]] = %{{.*}} to %[[NT]] step %{{.*}} {
// CHECK-NEXT:     %[[O:.*]] = arith.muli %[[T]], %[[C4]] : index
// CHECK-NEXT:     %[[S:.*]] = core.subview %[[X]] [%[[O]], 0] [4, 32] : !core.buf<[?64, 32], f32, shared_dram> -> !core.buf<[4, 32], f32, shared_dram>
// CHECK-NEXT:     %[[TILE:.*]] = core.alloc sram : !core.buf<[4, 32], f32, sram>
// CHECK-NEXT:     core.dma %[[S]] to %[[TILE]]
// CHECK-NEXT:     %[[D:.*]] = core.subview %{{.*}} [%[[O]], 0] [4, 32]
// CHECK-NEXT:     core.dma %[[TILE]] to %[[D]]
// CHECK:          %[[SUM:.*]] = core.alloc sram : !core.buf<[1, 32], f32, sram>
// CHECK-NEXT:     core.vpu_binary add %[[ACC]], %{{.*}} to %[[SUM]]
// CHECK-NEXT:     core.vpu_unary copy %[[SUM]] to %[[ACC]]
// CHECK-NEXT:   }
// CHECK-NEXT:   core.dma %[[ACC]] to %{{.*}} : !core.buf<[1, 32], f32, sram>, !core.buf<[1, 32], f32, shared_dram>
