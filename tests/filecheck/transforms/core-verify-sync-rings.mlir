// RUN: legato-opt %s -p core-transfer-rings,core-verify-sync | filecheck %s
// RUN: legato-opt %s -p core-transfer-rings | grep -v 'core.wait_queue sram queue 254' | not legato-opt -p core-verify-sync 2>&1 | filecheck %s --check-prefix=NOCREDIT
//
// A stream of four transfers through a ring of three receive buffers (core-transfer-rings):
// the proof accepts the ring the pass builds (transfer 3 reuses slot 0 only after core 1's
// credit, sent after its last use of transfer 0) and refuses it without the credit wait.

// CHECK: core.wait_queue sram queue 254
// CHECK: core.program @core1

// NOCREDIT: stdin:20:7: error: core.dma: transfer 2 into receive buffer xfer1_slot0 on core 1 can arrive before core 1 received transfer 1 (sent at stdin:14): the buffer holds one transfer, and nothing orders this send after that receive; it would overwrite data not yet received

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

