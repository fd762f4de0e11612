// RUN: legato-opt %s -p core-plan-memory | filecheck %s

// A buffer allocated in a loop body lives within one iteration. The body's buffers are placed
// apart while that fits (so nothing iteration i + 1 writes waits for iteration i's reads), and
// share space by their liveness within the iteration when it does not: a loop of five 64 KiB
// mpu_buffer tiles, each dead once loaded into the MPU, fits the 256 KiB mpu_buffer.
builtin.module {
  core.kernel @k args [#core.arg<0, [1280, 128], bf16, mpu_dram, read>, #core.arg<1, [16, 128], f32, shared_dram, readwrite>] {
    core.program @core0 on core(0) {
      %w = core.arg 0 : !core.buf<[1280, 128], bf16, mpu_dram>
      %o = core.arg 1 : !core.buf<[16, 128], f32, shared_dram>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      // a: live across the loop (read in it): no body buffer takes its space
      %a = core.alloc mpu_buffer : !core.buf<[16, 128], bf16, mpu_buffer>
      %acc = core.alloc sram : !core.buf<[16, 128], f32, sram>
      scf.for %i = %c0 to %c4 step %c1 {
        %w0 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
        %s0 = core.subview %w [0, 0] [256, 128] : !core.buf<[1280, 128], bf16, mpu_dram> -> !core.buf<[256, 128], bf16, mpu_dram>
        core.dma %s0 to %w0 : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %w0 : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_matmul %a, %acc {accumulate = true} : !core.buf<[16, 128], bf16, mpu_buffer>, !core.buf<[16, 128], f32, sram>
        %w1 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %w1 : !core.buf<[256, 128], bf16, mpu_buffer>
        %w2 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %w2 : !core.buf<[256, 128], bf16, mpu_buffer>
        // w3: 4 KiB (a) + 3 x 64 KiB are placed: the fourth tile no longer fits apart
        %w3 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %w3 : !core.buf<[256, 128], bf16, mpu_buffer>
        %w4 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %w4 : !core.buf<[256, 128], bf16, mpu_buffer>
        // t: sram, room to spare: apart from everything of the body
        %t = core.alloc sram : !core.buf<[16, 128], f32, sram>
        core.vpu_unary neg %acc to %t : !core.buf<[16, 128], f32, sram>, !core.buf<[16, 128], f32, sram>
        // an inner loop: u is touched in it, so it lives across the inner loop, where v
        // (allocated in the inner body) cannot take its space; x, after it, can
        %u = core.alloc sram : !core.buf<[16, 128], f32, sram>
        core.vpu_fill 1.0 to %u : !core.buf<[16, 128], f32, sram>
        scf.for %j = %c0 to %c4 step %c1 {
          %v = core.alloc sram : !core.buf<[16, 128], f32, sram>
          core.vpu_unary neg %u to %v : !core.buf<[16, 128], f32, sram>, !core.buf<[16, 128], f32, sram>
        }
        core.dma %t to %o : !core.buf<[16, 128], f32, sram>, !core.buf<[16, 128], f32, shared_dram>
      }
      core.dma %acc to %o : !core.buf<[16, 128], f32, sram>, !core.buf<[16, 128], f32, shared_dram>
      core.dma_wait
      core.end
    }
  }
}

// CHECK-LABEL: core.program @core0
// a, acc:
// CHECK:       core.alloc mpu_buffer {offset = 0 : i64}
// CHECK:       core.alloc sram {offset = 0 : i64}
// CHECK:       scf.for
// w0, w1, w2 apart, after a:
// CHECK:       core.alloc mpu_buffer {offset = 4096 : i64}
// CHECK:       core.alloc mpu_buffer {offset = 69632 : i64}
// CHECK:       core.alloc mpu_buffer {offset = 135168 : i64}
// w3 shares w0's space (w0 is dead by then in every iteration), w4 too (w3 is dead once
// loaded into the MPU): the lowest space clear of a
// CHECK:       core.alloc mpu_buffer {offset = 4096 : i64}
// CHECK:       core.alloc mpu_buffer {offset = 4096 : i64}
// t, u after acc:
// CHECK:       core.alloc sram {offset = 8192 : i64}
// CHECK:       core.alloc sram {offset = 16384 : i64}
// CHECK:       scf.for
// v clear of u (and of acc, t):
// CHECK-NEXT:    core.alloc sram {offset = 24576 : i64}
