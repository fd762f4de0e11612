// RUN: legato-opt %s --split-input-file -p core-transfer-rings | filecheck %s

// A per-core stream: core(0) sends four [8, 64] f32 tiles to core(1) on sram queue 1, and core(1)
// is done with each before it receives the next. The stream cycles through three slots named
// after its first transfer; core(1) credits each of the first n - 3 buffers (here transfer 0's)
// right after its last touch of it (64 bytes copied onto themselves) on core(0)'s highest sram
// queue no transfer uses (255 is taken: top sends to core(0) there), and core(0) waits on that
// queue before sending transfers 3 and up.

// CHECK-LABEL: core.program @core0 on core(0)
// CHECK:         core.alloc on core(1) sram {buffer = "xfer1_slot0"}
// CHECK-NEXT:    core.dma %{{.*}} notify core(1) sram queue 1
// CHECK-NEXT:    core.alloc on core(1) sram {buffer = "xfer1_slot1"}
// CHECK-NEXT:    core.dma %{{.*}} notify core(1) sram queue 1
// CHECK-NEXT:    core.alloc on core(1) sram {buffer = "xfer1_slot2"}
// CHECK-NEXT:    core.dma %{{.*}} notify core(1) sram queue 1
// CHECK-NEXT:    %[[S3:.*]] = core.alloc on core(1) sram {buffer = "xfer1_slot0"}
// CHECK-NEXT:    core.wait_queue sram queue 254
// CHECK-NEXT:    core.dma %{{.*}} to %[[S3]] notify core(1) sram queue 1
// CHECK-NEXT:    core.dma_wait
// CHECK-LABEL: core.program @core1 on core(1)
// CHECK:         core.wait_queue sram queue 1
// CHECK-NEXT:    %[[R0:.*]] = core.alloc sram {buffer = "xfer1_slot0"}
// CHECK-NEXT:    core.vpu_binary add %{{.*}}, %[[R0]] to
// CHECK-NEXT:    %[[N:.*]] = arith.constant 64 : index
// CHECK-NEXT:    core.dma %[[R0]] to %[[R0]] bytes %[[N]] notify core(0) sram queue 254
// CHECK-NEXT:    core.wait_queue sram queue 1
// CHECK-NEXT:    %[[R1:.*]] = core.alloc sram {buffer = "xfer1_slot1"}
// CHECK-NEXT:    core.vpu_binary add %{{.*}}, %[[R1]] to
// CHECK-NEXT:    core.wait_queue sram queue 1
// CHECK-NEXT:    %[[R2:.*]] = core.alloc sram {buffer = "xfer1_slot2"}
// CHECK-NEXT:    core.vpu_binary add %{{.*}}, %[[R2]] to
// CHECK-NEXT:    core.wait_queue sram queue 1
// CHECK-NEXT:    %[[R3:.*]] = core.alloc sram {buffer = "xfer1_slot0"}
// CHECK-NEXT:    core.vpu_binary add %{{.*}}, %[[R3]] to
// CHECK-NEXT:    core.dma %{{.*}} to %{{.*}} :

builtin.module {
  core.kernel @ring args [#core.arg<0, [8, 64], f32, shared_dram, read>, #core.arg<1, [8, 64], f32, shared_dram, write>] {
    core.program @top on top {
      %a = core.arg 0 : !core.buf<[8, 64], f32, shared_dram>
      %t = core.alloc on core(0) sram {buffer = "xfer0"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %t notify core(0) sram queue 255 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      core.dma_wait
      core.end
    }
    core.program @core0 on core(0) {
      core.wait_queue sram queue 255
      %x = core.alloc sram {buffer = "xfer0"} : !core.buf<[8, 64], f32, sram>
      %s0 = core.alloc on core(1) sram {buffer = "xfer1"} : !core.buf<[8, 64], f32, sram>
      core.dma %x to %s0 notify core(1) sram queue 1 : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      %s1 = core.alloc on core(1) sram {buffer = "xfer2"} : !core.buf<[8, 64], f32, sram>
      core.dma %x to %s1 notify core(1) sram queue 1 : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      %s2 = core.alloc on core(1) sram {buffer = "xfer3"} : !core.buf<[8, 64], f32, sram>
      core.dma %x to %s2 notify core(1) sram queue 1 : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      %s3 = core.alloc on core(1) sram {buffer = "xfer4"} : !core.buf<[8, 64], f32, sram>
      core.dma %x to %s3 notify core(1) sram queue 1 : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.dma_wait
      core.end
    }
    core.program @core1 on core(1) {
      %out = core.arg 1 : !core.buf<[8, 64], f32, shared_dram>
      %acc = core.alloc sram : !core.buf<[8, 64], f32, sram>
      core.vpu_fill 0.0 to %acc : !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %r0 = core.alloc sram {buffer = "xfer1"} : !core.buf<[8, 64], f32, sram>
      core.vpu_binary add %acc, %r0 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %r1 = core.alloc sram {buffer = "xfer2"} : !core.buf<[8, 64], f32, sram>
      core.vpu_binary add %acc, %r1 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %r2 = core.alloc sram {buffer = "xfer3"} : !core.buf<[8, 64], f32, sram>
      core.vpu_binary add %acc, %r2 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %r3 = core.alloc sram {buffer = "xfer4"} : !core.buf<[8, 64], f32, sram>
      core.vpu_binary add %acc, %r3 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.dma %acc to %out : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, shared_dram>
      core.dma_wait
      core.end
    }
  }
}

// -----

// An SPMD stream: every core sends four [4, 8] bf16 tiles (64 bytes) to core (c + 1) % 32 on
// sram queue 1 and is done with transfer k - 3 before it receives and before it sends transfer
// k. The credit goes to the core sending to this one, the inverse permutation: here the target
// of the stream on queue 2, (c + 31) % 32, computed before the first credit. A credit comes
// after the next VPU op following the last touch (the fill), not right after the touch.

// CHECK-LABEL: core.program @cores on all_cores
// CHECK:         %[[NEXT:.*]] = arith.remsi
// CHECK:         %[[PREV:.*]] = arith.remsi
// CHECK-NEXT:    core.alloc on core(%[[PREV]]) sram {buffer = "spmd_xfer4"}
// CHECK:         core.alloc on core(%[[NEXT]]) sram {buffer = "spmd_xfer0_slot0"}
// CHECK-NEXT:    core.dma %{{.*}} notify core(%[[NEXT]]) sram queue 1
// CHECK-NEXT:    core.wait_queue sram queue 1
// CHECK-NEXT:    %[[B0:.*]] = core.alloc sram {buffer = "spmd_xfer0_slot0"}
// CHECK-NEXT:    core.vpu_unary copy %[[B0]] to
// CHECK-NEXT:    core.vpu_fill
// CHECK-NEXT:    arith.constant 64 : index
// CHECK-NEXT:    core.dma %[[B0]] to %[[B0]] bytes %{{.*}} notify core(%[[PREV]]) sram queue 255
// CHECK-NEXT:    core.alloc on core(%[[NEXT]]) sram {buffer = "spmd_xfer0_slot1"}
// CHECK:         core.alloc on core(%[[NEXT]]) sram {buffer = "spmd_xfer0_slot2"}
// CHECK:         %[[S3:.*]] = core.alloc on core(%[[NEXT]]) sram {buffer = "spmd_xfer0_slot0"}
// CHECK-NEXT:    core.wait_queue sram queue 255
// CHECK-NEXT:    core.dma %{{.*}} to %[[S3]] notify core(%[[NEXT]]) sram queue 1
// CHECK-NOT:     queue 255
// CHECK:         core.end

builtin.module {
  core.kernel @spmd args [#core.arg<0, [4, 8], bf16, shared_dram, read>] {
    core.program @cores on all_cores {
      %a = core.arg 0 : !core.buf<[4, 8], bf16, shared_dram>
      %c = core.core_id : index
      %n = arith.constant 32 : index
      %one = arith.constant 1 : index
      %c1 = arith.addi %c, %one : index
      %next = arith.remsi %c1, %n : index
      %m = arith.constant 31 : index
      %c31 = arith.addi %c, %m : index
      %prev = arith.remsi %c31, %n : index
      %back = core.alloc on core(%prev) sram {buffer = "spmd_xfer4"} : !core.buf<[4, 8], bf16, sram>
      core.dma %a to %back notify core(%prev) sram queue 2 : !core.buf<[4, 8], bf16, shared_dram>, !core.buf<[4, 8], bf16, sram>
      core.wait_queue sram queue 2
      %got = core.alloc sram {buffer = "spmd_xfer4"} : !core.buf<[4, 8], bf16, sram>
      %tmp = core.alloc sram : !core.buf<[4, 8], bf16, sram>
      %s0 = core.alloc on core(%next) sram {buffer = "spmd_xfer0"} : !core.buf<[4, 8], bf16, sram>
      core.dma %a to %s0 notify core(%next) sram queue 1 : !core.buf<[4, 8], bf16, shared_dram>, !core.buf<[4, 8], bf16, sram>
      core.wait_queue sram queue 1
      %r0 = core.alloc sram {buffer = "spmd_xfer0"} : !core.buf<[4, 8], bf16, sram>
      core.vpu_unary copy %r0 to %tmp : !core.buf<[4, 8], bf16, sram>, !core.buf<[4, 8], bf16, sram>
      core.vpu_fill 1.0 to %tmp : !core.buf<[4, 8], bf16, sram>
      %s1 = core.alloc on core(%next) sram {buffer = "spmd_xfer1"} : !core.buf<[4, 8], bf16, sram>
      core.dma %a to %s1 notify core(%next) sram queue 1 : !core.buf<[4, 8], bf16, shared_dram>, !core.buf<[4, 8], bf16, sram>
      core.wait_queue sram queue 1
      %r1 = core.alloc sram {buffer = "spmd_xfer1"} : !core.buf<[4, 8], bf16, sram>
      core.vpu_unary copy %r1 to %tmp : !core.buf<[4, 8], bf16, sram>, !core.buf<[4, 8], bf16, sram>
      %s2 = core.alloc on core(%next) sram {buffer = "spmd_xfer2"} : !core.buf<[4, 8], bf16, sram>
      core.dma %a to %s2 notify core(%next) sram queue 1 : !core.buf<[4, 8], bf16, shared_dram>, !core.buf<[4, 8], bf16, sram>
      core.wait_queue sram queue 1
      %r2 = core.alloc sram {buffer = "spmd_xfer2"} : !core.buf<[4, 8], bf16, sram>
      core.vpu_unary copy %r2 to %tmp : !core.buf<[4, 8], bf16, sram>, !core.buf<[4, 8], bf16, sram>
      %s3 = core.alloc on core(%next) sram {buffer = "spmd_xfer3"} : !core.buf<[4, 8], bf16, sram>
      core.dma %a to %s3 notify core(%next) sram queue 1 : !core.buf<[4, 8], bf16, shared_dram>, !core.buf<[4, 8], bf16, sram>
      core.wait_queue sram queue 1
      %r3 = core.alloc sram {buffer = "spmd_xfer3"} : !core.buf<[4, 8], bf16, sram>
      core.vpu_unary copy %r3 to %tmp : !core.buf<[4, 8], bf16, sram>, !core.buf<[4, 8], bf16, sram>
      core.dma_wait
      core.end
    }
  }
}

// -----

// Streams that keep one buffer per transfer:
// - core(0) -> core(1) queue 1: the receiver takes all four transfers before it touches the first
//   (a ring would deadlock: the sender would wait for a credit the receiver gives only later);
// - core(0) -> core(1) queue 2: three transfers (no more than the slots);
// - core(0) and core(2) -> core(3) queue 1: two senders (arrivals would not come in one order);
// - core(2) -> core(3) queue 2: transfers of different types.

// CHECK-NOT: _slot
// CHECK-NOT: queue 255

builtin.module {
  core.kernel @none args [#core.arg<0, [8, 64], f32, shared_dram, read>] {
    core.program @core0 on core(0) {
      %a = core.arg 0 : !core.buf<[8, 64], f32, shared_dram>
      %h0 = core.alloc on core(1) sram {buffer = "xfer0"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %h0 notify core(1) sram queue 1 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %h1 = core.alloc on core(1) sram {buffer = "xfer1"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %h1 notify core(1) sram queue 1 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %h2 = core.alloc on core(1) sram {buffer = "xfer2"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %h2 notify core(1) sram queue 1 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %h3 = core.alloc on core(1) sram {buffer = "xfer3"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %h3 notify core(1) sram queue 1 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %t0 = core.alloc on core(1) sram {buffer = "xfer4"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %t0 notify core(1) sram queue 2 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %t1 = core.alloc on core(1) sram {buffer = "xfer5"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %t1 notify core(1) sram queue 2 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %t2 = core.alloc on core(1) sram {buffer = "xfer6"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %t2 notify core(1) sram queue 2 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %m0 = core.alloc on core(3) sram {buffer = "xfer7"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %m0 notify core(3) sram queue 1 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %m1 = core.alloc on core(3) sram {buffer = "xfer8"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %m1 notify core(3) sram queue 1 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      core.dma_wait
      core.end
    }
    core.program @core1 on core(1) {
      %acc = core.alloc sram : !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %r0 = core.alloc sram {buffer = "xfer0"} : !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %r1 = core.alloc sram {buffer = "xfer1"} : !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %r2 = core.alloc sram {buffer = "xfer2"} : !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %r3 = core.alloc sram {buffer = "xfer3"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %r0 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %r1 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %r2 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %r3 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 2
      %u0 = core.alloc sram {buffer = "xfer4"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %u0 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 2
      %u1 = core.alloc sram {buffer = "xfer5"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %u1 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 2
      %u2 = core.alloc sram {buffer = "xfer6"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %u2 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.end
    }
    core.program @core2 on core(2) {
      %a = core.arg 0 : !core.buf<[8, 64], f32, shared_dram>
      %m2 = core.alloc on core(3) sram {buffer = "xfer9"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %m2 notify core(3) sram queue 1 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %m3 = core.alloc on core(3) sram {buffer = "xfer10"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %m3 notify core(3) sram queue 1 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %a1 = core.subview %a [0, 0] [4, 64] : !core.buf<[8, 64], f32, shared_dram> -> !core.buf<[4, 64], f32, shared_dram>
      %d0 = core.alloc on core(3) sram {buffer = "xfer11"} : !core.buf<[4, 64], f32, sram>
      core.dma %a1 to %d0 notify core(3) sram queue 2 : !core.buf<[4, 64], f32, shared_dram>, !core.buf<[4, 64], f32, sram>
      %d1 = core.alloc on core(3) sram {buffer = "xfer12"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %d1 notify core(3) sram queue 2 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %d2 = core.alloc on core(3) sram {buffer = "xfer13"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %d2 notify core(3) sram queue 2 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      %d3 = core.alloc on core(3) sram {buffer = "xfer14"} : !core.buf<[8, 64], f32, sram>
      core.dma %a to %d3 notify core(3) sram queue 2 : !core.buf<[8, 64], f32, shared_dram>, !core.buf<[8, 64], f32, sram>
      core.dma_wait
      core.end
    }
    core.program @core3 on core(3) {
      %acc = core.alloc sram : !core.buf<[8, 64], f32, sram>
      %acc4 = core.alloc sram : !core.buf<[4, 64], f32, sram>
      core.wait_queue sram queue 1
      %m0 = core.alloc sram {buffer = "xfer7"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %m0 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %m1 = core.alloc sram {buffer = "xfer8"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %m1 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %m2 = core.alloc sram {buffer = "xfer9"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %m2 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 1
      %m3 = core.alloc sram {buffer = "xfer10"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %m3 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 2
      %d0 = core.alloc sram {buffer = "xfer11"} : !core.buf<[4, 64], f32, sram>
      core.vpu_unary copy %d0 to %acc4 : !core.buf<[4, 64], f32, sram>, !core.buf<[4, 64], f32, sram>
      core.wait_queue sram queue 2
      %d1 = core.alloc sram {buffer = "xfer12"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %d1 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 2
      %d2 = core.alloc sram {buffer = "xfer13"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %d2 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.wait_queue sram queue 2
      %d3 = core.alloc sram {buffer = "xfer14"} : !core.buf<[8, 64], f32, sram>
      core.vpu_unary copy %d3 to %acc : !core.buf<[8, 64], f32, sram>, !core.buf<[8, 64], f32, sram>
      core.end
    }
  }
}
