// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
//
// SPMD with core_id, barrier and semaphores: a barrier waits for the core's DMAs and then for
// every core (count = num_cores: 32 on bertha EVT0); (context, semaphore) pairs are numbered in order of first use.

builtin.module {
  legato.kernel @k(%a : !legato.tensor<[16, 8], f32, shared_dram>, %out : !legato.tensor<[16, 8], f32, shared_dram>) {
    legato.on all_cores {
      %c = legato.core_id : index
      %c4 = arith.constant 4 : index
      %o = arith.muli %c, %c4 : index
      %s = legato.dynamic_slice %a [%o, 0] [4, 8] : !legato.tensor<[16, 8], f32, shared_dram> -> !legato.tensor<[4, 8], f32, shared_dram>
      %x = legato.load %s memory sram : !legato.tensor<[4, 8], f32, shared_dram> -> !legato.tensor<[4, 8], f32, sram>
      %d = legato.dynamic_slice %out [%o, 0] [4, 8] : !legato.tensor<[16, 8], f32, shared_dram> -> !legato.tensor<[4, 8], f32, shared_dram>
      legato.memcpy %d, %x : !legato.tensor<[4, 8], f32, shared_dram>, !legato.tensor<[4, 8], f32, sram>
      legato.barrier
      legato.signal to top sem 5 count 1
      legato.yield
    }
    legato.on top {
      legato.wait sem 7 count 2
      legato.wait sem 5 count 4
      legato.yield
    }
    legato.return
  }
}

// CHECK:      core.program @cores on all_cores {
// CHECK:        %[[C:.*]] = core.core_id : index
// CHECK-NEXT:   %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:   %[[O:.*]] = arith.muli %[[C]], %[[C4]] : index
// CHECK-NEXT:   %{{.*}} = core.subview %{{.*}} [%[[O]], 0] [4, 8]
// CHECK:        core.dma %{{.*}} to %{{.*}} : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, shared_dram>
// CHECK-NEXT:   core.dma_wait
// CHECK-NEXT:   core.barrier 0 count 32
// CHECK-NEXT:   core.dma_wait
// CHECK-NEXT:   core.sem_post 0 count 1
// CHECK:      core.program @top on top {
// CHECK-NEXT:   core.sem_wait 1 count 2
// CHECK-NEXT:   core.sem_wait 0 count 4
// CHECK-NEXT:   core.end
