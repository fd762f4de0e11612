// RUN: legato-opt %s --split-input-file -p core-barrier-waits | filecheck %s
// RUN: legato-opt %s --split-input-file -p core-barrier-waits,core-verify-sync | filecheck %s --check-prefix=SYNC

// A phase stores its slice of x to shared DRAM, loads the next phase's weight tile ahead
// (read-only argument -> this core's mpu_buffer) and copies an sram buffer locally, then meets
// the others at a barrier. The store, and the load of the scratch %t (writable: another core
// may rewrite it after the barrier), notify the core's own sram queue 255 (the highest free
// one) and the barrier waits for them; the weight prefetch and the local copy stay in flight.
// core-verify-sync accepts the result.

// CHECK-LABEL: core.program @cores on all_cores
// CHECK:         %b = core.alloc sram
// CHECK-NEXT:    %[[C:.*]] = core.core_id : index
// CHECK-NEXT:    core.dma %x to %row notify core(%[[C]]) sram queue 255
// CHECK-NEXT:    %[[C2:.*]] = core.core_id : index
// CHECK-NEXT:    core.dma %trow to %y notify core(%[[C2]]) sram queue 255
// CHECK-NEXT:    core.dma %w to %{{.*}} : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
// CHECK-NEXT:    core.dma %{{.*}} to %{{.*}} : !core.buf<[64], f32, sram>, !core.buf<[64], f32, sram>
// CHECK-NEXT:    core.wait_queue sram queue 255
// CHECK-NEXT:    core.wait_queue sram queue 255
// CHECK-NEXT:    core.barrier 0 count 32
// CHECK-NOT:     core.wait_queue
// CHECK:         core.dma_wait
// CHECK-NEXT:    core.end
// SYNC: core.program @cores on all_cores
core.kernel @phases args [#core.arg<0, [32, 64], f32, shared_dram, write>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [32, 64], f32, shared_dram, readwrite>] {
  core.program @cores on all_cores {
    %out = core.arg 0 : !core.buf<[32, 64], f32, shared_dram>
    %w = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
    %t = core.arg 2 : !core.buf<[32, 64], f32, shared_dram>
    %c = core.core_id : index
    %x = core.alloc sram : !core.buf<[1, 64], f32, sram>
    %y = core.alloc sram : !core.buf<[1, 64], f32, sram>
    %row = core.subview %out [%c, 0] [1, 64] : !core.buf<[32, 64], f32, shared_dram> -> !core.buf<[1, 64], f32, shared_dram>
    %trow = core.subview %t [%c, 0] [1, 64] : !core.buf<[32, 64], f32, shared_dram> -> !core.buf<[1, 64], f32, shared_dram>
    %wb = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
    %a = core.alloc sram : !core.buf<[64], f32, sram>
    %b = core.alloc sram : !core.buf<[64], f32, sram>
    core.dma %x to %row : !core.buf<[1, 64], f32, sram>, !core.buf<[1, 64], f32, shared_dram>
    core.dma %trow to %y : !core.buf<[1, 64], f32, shared_dram>, !core.buf<[1, 64], f32, sram>
    core.dma %w to %wb : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
    core.dma %a to %b : !core.buf<[64], f32, sram>, !core.buf<[64], f32, sram>
    core.dma_wait
    core.barrier 0 count 32
    core.dma %y to %trow : !core.buf<[1, 64], f32, sram>, !core.buf<[1, 64], f32, shared_dram>
    core.dma_wait
    core.end
  }
}

// -----

// Stores in a runtime loop: the barrier waits in a loop over the same bounds, one wait per
// store of an iteration (a nested loop with bounds from outside the outer loop nests likewise).

// CHECK-LABEL: core.program @cores on all_cores
// CHECK:         scf.for %{{.*}} = %[[LB:.*]] to %[[UB:.*]] step %[[ST:.*]] {
// CHECK:           notify core(%{{.*}}) sram queue 255
// CHECK:           scf.for
// CHECK:             notify core(%{{.*}}) sram queue 255
// CHECK:         scf.for %{{.*}} = %[[LB]] to %[[UB]] step %[[ST]] {
// CHECK-NEXT:      core.wait_queue sram queue 255
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        core.wait_queue sram queue 255
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    core.barrier 0 count 32
core.kernel @looped args [#core.arg<0, [32, 64], f32, shared_dram, write>] {
  core.program @cores on all_cores {
    %out = core.arg 0 : !core.buf<[32, 64], f32, shared_dram>
    %c = core.core_id : index
    %n = arith.constant 32 : index
    %one = arith.constant 1 : index
    %two = arith.constant 2 : index
    %x = core.alloc sram : !core.buf<[1, 64], f32, sram>
    scf.for %i = %c to %n step %n {
      %row = core.subview %out [%i, 0] [1, 64] : !core.buf<[32, 64], f32, shared_dram> -> !core.buf<[1, 64], f32, shared_dram>
      core.dma %x to %row : !core.buf<[1, 64], f32, sram>, !core.buf<[1, 64], f32, shared_dram>
      scf.for %j = %one to %two step %one {
        core.dma %x to %row : !core.buf<[1, 64], f32, sram>, !core.buf<[1, 64], f32, shared_dram>
      }
    }
    core.dma_wait
    core.barrier 0 count 32
    core.end
  }
}

// -----

// Kept: a strided store (a column slab: more than one hardware transfer, only the last would
// notify), a store in an scf.if, a loop whose bounds the enclosing loop computes, and a send
// that already notifies another core.

// CHECK-LABEL: @kept
// CHECK-NOT:   sram queue 255
// CHECK-COUNT-4: core.dma_wait
// CHECK-NOT:   sram queue 255
core.kernel @kept args [#core.arg<0, [32, 64], f32, shared_dram, write>] {
  core.program @cores on all_cores {
    %out = core.arg 0 : !core.buf<[32, 64], f32, shared_dram>
    %c = core.core_id : index
    %n = arith.constant 32 : index
    %one = arith.constant 1 : index
    %x = core.alloc sram : !core.buf<[32, 2], f32, sram>
    %col = core.subview %out [0, 0] [32, 2] : !core.buf<[32, 64], f32, shared_dram> -> !core.buf<[32, 2], f32, shared_dram>
    core.dma %x to %col : !core.buf<[32, 2], f32, sram>, !core.buf<[32, 2], f32, shared_dram>
    core.dma_wait
    core.barrier 0 count 32
    %z = core.alloc sram : !core.buf<[1, 64], f32, sram>
    %row = core.subview %out [%c, 0] [1, 64] : !core.buf<[32, 64], f32, shared_dram> -> !core.buf<[1, 64], f32, shared_dram>
    %p = arith.cmpi eq, %c, %one : index
    scf.if %p {
      core.dma %z to %row : !core.buf<[1, 64], f32, sram>, !core.buf<[1, 64], f32, shared_dram>
    }
    core.dma_wait
    core.barrier 0 count 32
    scf.for %i = %c to %n step %n {
      scf.for %j = %i to %n step %n {
        core.dma %z to %row : !core.buf<[1, 64], f32, sram>, !core.buf<[1, 64], f32, shared_dram>
      }
    }
    core.dma_wait
    core.barrier 0 count 32
    %nxt = arith.remsi %one, %n : index
    %d = core.alloc on core(%nxt) sram {buffer = "x0"} : !core.buf<[1, 64], f32, sram>
    core.dma %z to %d notify core(%nxt) sram queue 1 : !core.buf<[1, 64], f32, sram>, !core.buf<[1, 64], f32, sram>
    core.dma_wait
    core.barrier 0 count 32
    core.end
  }
}

// -----

// A barrier without a dma_wait before it (hand-written core IR) orders none of the core's DMAs:
// the store before it is still waited for at the next barrier.

// CHECK-LABEL: @bare
// CHECK:         core.dma %x to %row notify core(%{{.*}}) sram queue 255
// CHECK-NEXT:    core.barrier 0 count 32
// CHECK-NEXT:    core.wait_queue sram queue 255
// CHECK-NEXT:    core.barrier 0 count 32
core.kernel @bare args [#core.arg<0, [32, 64], f32, shared_dram, write>] {
  core.program @cores on all_cores {
    %out = core.arg 0 : !core.buf<[32, 64], f32, shared_dram>
    %c = core.core_id : index
    %x = core.alloc sram : !core.buf<[1, 64], f32, sram>
    %row = core.subview %out [%c, 0] [1, 64] : !core.buf<[32, 64], f32, shared_dram> -> !core.buf<[1, 64], f32, shared_dram>
    core.dma %x to %row : !core.buf<[1, 64], f32, sram>, !core.buf<[1, 64], f32, shared_dram>
    core.barrier 0 count 32
    core.dma_wait
    core.barrier 0 count 32
    core.end
  }
}
