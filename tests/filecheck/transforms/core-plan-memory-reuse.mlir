// RUN: legato-opt %s -p core-plan-memory | filecheck %s

// Space is reused by liveness: a buffer lives from its alloc to its last use (through views),
// a DMA's last touch is the DMA itself (the scoreboard orders a reuse after it), a buffer touched in
// a loop lives across the whole loop, and a transfer buffer (`buffer` name) keeps the whole
// kernel: it is placed first and never shared. Each [16, 64] f32 buffer is 4096 bytes.
builtin.module {
  core.kernel @k args [#core.arg<0, [16, 64], f32, shared_dram, readwrite>, #core.arg<1, [16], f32, shared_dram, read>] {
    core.program @top on top {
      %x = core.arg 1 : !core.buf<[16], f32, shared_dram>
      %xd = core.alloc on core(0) sram {buffer = "xfer0"} : !core.buf<[16], f32, sram>
      core.dma %x to %xd notify core(0) sram queue 0 : !core.buf<[16], f32, shared_dram>, !core.buf<[16], f32, sram>
      core.dma_wait
      core.end
    }
    core.program @core0 on core(0) {
      %o = core.arg 0 : !core.buf<[16, 64], f32, shared_dram>
      %a = core.alloc sram : !core.buf<[16, 64], f32, sram>
      core.vpu_fill 1.0 to %a : !core.buf<[16, 64], f32, sram>
      %b = core.alloc sram : !core.buf<[16, 64], f32, sram>
      core.vpu_unary neg %a to %b : !core.buf<[16, 64], f32, sram>, !core.buf<[16, 64], f32, sram>
      %c = core.alloc sram : !core.buf<[16, 64], f32, sram>
      core.vpu_unary exp %b to %c : !core.buf<[16, 64], f32, sram>, !core.buf<[16, 64], f32, sram>
      %v = core.view %c : !core.buf<[16, 64], f32, sram> -> !core.buf<[64, 16], f32, sram>
      %d = core.alloc sram : !core.buf<[64, 16], f32, sram>
      core.vpu_unary neg %v to %d : !core.buf<[64, 16], f32, sram>, !core.buf<[64, 16], f32, sram>
      %e = core.alloc sram : !core.buf<[16, 64], f32, sram>
      core.vpu_fill 2.0 to %e : !core.buf<[16, 64], f32, sram>
      core.dma %d to %o : !core.buf<[64, 16], f32, sram>, !core.buf<[16, 64], f32, shared_dram>
      %f = core.alloc sram : !core.buf<[16, 64], f32, sram>
      core.vpu_unary neg %e to %f : !core.buf<[16, 64], f32, sram>, !core.buf<[16, 64], f32, sram>
      core.dma_wait
      %g = core.alloc sram : !core.buf<[16, 64], f32, sram>
      core.vpu_unary neg %e to %g : !core.buf<[16, 64], f32, sram>, !core.buf<[16, 64], f32, sram>
      core.wait_queue sram queue 0
      %xr = core.alloc sram {buffer = "xfer0"} : !core.buf<[16], f32, sram>
      %h = core.alloc sram : !core.buf<[16, 64], f32, sram>
      core.vpu_fill 3.0 to %h : !core.buf<[16, 64], f32, sram>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %l = core.alloc sram : !core.buf<[16, 64], f32, sram>
        core.vpu_unary neg %h to %l : !core.buf<[16, 64], f32, sram>, !core.buf<[16, 64], f32, sram>
      }
      %j = core.alloc sram : !core.buf<[16, 64], f32, sram>
      core.vpu_fill 4.0 to %j : !core.buf<[16, 64], f32, sram>
      core.dma %j to %o : !core.buf<[16, 64], f32, sram>, !core.buf<[16, 64], f32, shared_dram>
      %k = core.alloc sram : !core.buf<[16, 64], f32, sram>
      core.vpu_fill 5.0 to %k : !core.buf<[16, 64], f32, sram>
      core.end
    }
    // Five 64 KiB weight tiles one after the other: 320 KiB would not fit the 256 KiB
    // mpu_buffer without reuse; each tile is dead once loaded into the MPU.
    core.program @core1 on core(1) {
      %w0 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w0 : !core.buf<[256, 128], bf16, mpu_buffer>
      %w1 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w1 : !core.buf<[256, 128], bf16, mpu_buffer>
      %w2 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w2 : !core.buf<[256, 128], bf16, mpu_buffer>
      %w3 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w3 : !core.buf<[256, 128], bf16, mpu_buffer>
      %w4 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w4 : !core.buf<[256, 128], bf16, mpu_buffer>
      core.end
    }
  }
}

// The transfer buffer is placed first (whole kernel) at 0; everything else starts at 64.
// CHECK-LABEL: core.program @top
// CHECK:       core.alloc on core(0) sram {offset = 0 : i64, buffer = "xfer0"}
// CHECK-LABEL: core.program @core0
// a:
// CHECK:       core.alloc sram {offset = 64 : i64}
// b (a live):
// CHECK:       core.alloc sram {offset = 4160 : i64}
// c reuses a (dead after the neg):
// CHECK:       core.alloc sram {offset = 64 : i64}
// d reuses b; c stays live through its view:
// CHECK:       core.alloc sram {offset = 4160 : i64} : !core.buf<[64, 16], f32, sram>
// e: c is dead once its view was read
// CHECK:       core.alloc sram {offset = 64 : i64}
// f reuses d, still read by a DMA in flight: f's write waits for it in the scoreboard
// CHECK:       core.alloc sram {offset = 4160 : i64}
// g: e (at 64) is still live
// CHECK:       core.alloc sram {offset = 4160 : i64}
// The receiving end shares the transfer's offset:
// CHECK:       core.alloc sram {offset = 0 : i64, buffer = "xfer0"}
// h:
// CHECK:       core.alloc sram {offset = 64 : i64}
// l, inside the loop, stays clear of h (live across the loop):
// CHECK:       scf.for
// CHECK-NEXT:    core.alloc sram {offset = 4160 : i64}
// j, after the loop, reuses h:
// CHECK:       core.alloc sram {offset = 64 : i64}
// k reuses j (its DMA, never waited for, is ordered by the scoreboard):
// CHECK:       core.alloc sram {offset = 64 : i64}
// CHECK-LABEL: core.program @core1
// CHECK-COUNT-5: core.alloc mpu_buffer {offset = 0 : i64}
