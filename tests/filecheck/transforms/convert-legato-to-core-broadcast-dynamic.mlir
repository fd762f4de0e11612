// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
// RUN: legato-opt %s -p legato-to-backend | filecheck %s --check-prefix=BACKEND

// A broadcast along a static middle dim under a runtime row count ([?T, 1, 32] -> [?T, 2, 32]:
// rotary's cos times q's heads) has no VPU form and no static dim to unroll the VPU copies over
// at the top: it is materialized with one strided copy of the operand into each slice of the
// 2, each a dma2d of T rows (source stride 128 bytes, destination 256) at the backend.

builtin.module {
  legato.kernel @broadcast_middle(%x: !legato.tensor<[?16, 2, 32], f32, shared_dram>, %c: !legato.tensor<[?16, 1, 32], f32, shared_dram>, %out: !legato.tensor<[?16, 2, 32], f32, shared_dram>) {
    legato.on core(0) {
      %a = legato.load %x memory sram : !legato.tensor<[?16, 2, 32], f32, shared_dram> -> !legato.tensor<[?16, 2, 32], f32, sram>
      %b = legato.load %c memory sram : !legato.tensor<[?16, 1, 32], f32, shared_dram> -> !legato.tensor<[?16, 1, 32], f32, sram>
      %0 = legato.sub %a, %b : !legato.tensor<[?16, 2, 32], f32, sram>, !legato.tensor<[?16, 1, 32], f32, sram> -> !legato.tensor<[?16, 2, 32], f32, sram>
      legato.memcpy %out, %0 : !legato.tensor<[?16, 2, 32], f32, shared_dram>, !legato.tensor<[?16, 2, 32], f32, sram>
      legato.yield
    }
    legato.return
  }
}

// CHECK-LABEL: core.program @core0
// CHECK:         %[[X:.*]] = core.arg 0
// CHECK-NEXT:    %[[T:.*]] = core.dim %[[X]], 0 : index
// CHECK:         %[[B:.*]] = core.alloc sram dims(%{{.*}}) : !core.buf<[?16, 1, 32], f32, sram>
// CHECK-NEXT:    core.dma %{{.*}} to %[[B]]
// CHECK-NEXT:    %[[OUT:.*]] = core.alloc sram dims(%[[T]]) : !core.buf<[?16, 2, 32], f32, sram>
// CHECK-NEXT:    %[[M:.*]] = core.alloc sram dims(%[[T]]) : !core.buf<[?16, 2, 32], f32, sram>
// CHECK-NEXT:    %[[S0:.*]] = core.subview %[[M]] [0, 0, 0] [%[[T]], 1, 32] : !core.buf<[?16, 2, 32], f32, sram> -> !core.buf<[?16, 1, 32], f32, sram>
// CHECK-NEXT:    core.dma %[[B]] to %[[S0]] : !core.buf<[?16, 1, 32], f32, sram>, !core.buf<[?16, 1, 32], f32, sram>
// CHECK-NEXT:    %[[S1:.*]] = core.subview %[[M]] [0, 1, 0] [%[[T]], 1, 32] : !core.buf<[?16, 2, 32], f32, sram> -> !core.buf<[?16, 1, 32], f32, sram>
// CHECK-NEXT:    core.dma %[[B]] to %[[S1]] : !core.buf<[?16, 1, 32], f32, sram>, !core.buf<[?16, 1, 32], f32, sram>
// CHECK-NEXT:    core.vpu_binary sub %{{.*}}, %[[M]] to %[[OUT]]

// BACKEND-LABEL: backend.program @core0
// BACKEND-COUNT-2: backend.dma %{{.*}}, %{{.*}}, %{{.*}} {legato.bounds
// the two slices: c's T against x's T (different arguments) is checked before each
// BACKEND:       backend.seq
// BACKEND:       backend.dma2d
// BACKEND:       backend.seq
// BACKEND:       backend.dma2d
// BACKEND-NEXT:  %{{.*}} = backend.muli
// BACKEND-NEXT:  backend.vpu_sub
