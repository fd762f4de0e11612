// RUN: legato-opt %s --split-input-file -p core-fuse-mpu-accumulate | filecheck %s

// `acc + a @ w`, acc an f32 buffer read only by the add: one accumulating matmul into acc; the
// matmul's buffer, the add and its result are gone, and the result's users use acc.

// CHECK-LABEL: core.kernel @fused
// CHECK:         %[[ACC:.*]] = core.alloc sram : !core.buf<[8, 128], f32, sram>
// CHECK-NEXT:    core.vpu_fill 0.0 to %[[ACC]]
// CHECK-NEXT:    core.mpu_matmul %a, %[[ACC]] {accumulate = true}
// CHECK-NEXT:    core.dma %[[ACC]] to %out
// CHECK-NOT:     core.vpu_binary

builtin.module {
  core.kernel @fused args [#core.arg<0, [8, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [8, 128], f32, shared_dram, write>] {
    core.program @core0 on core(0) {
      %x = core.arg 0 : !core.buf<[8, 256], bf16, shared_dram>
      %wd = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
      %out = core.arg 2 : !core.buf<[8, 128], f32, shared_dram>
      %a = core.alloc sram : !core.buf<[8, 256], bf16, sram>
      core.dma %x to %a : !core.buf<[8, 256], bf16, shared_dram>, !core.buf<[8, 256], bf16, sram>
      %w = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma %wd to %w : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
      %acc = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_fill 0.0 to %acc : !core.buf<[8, 128], f32, sram>
      %m = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.mpu_matmul %a, %m {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
      %s = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_binary add %acc, %m to %s : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>
      core.dma %s to %out : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, shared_dram>
      core.dma_wait
      core.end
    }
  }
}

// -----

// `a @ w + acc` (acc on the right), twice in a row: the second accumulation takes the first's
// result, which is acc's buffer.

// CHECK-LABEL: core.kernel @chain
// CHECK:         %[[ACC:.*]] = core.alloc sram : !core.buf<[8, 128], f32, sram>
// CHECK-NEXT:    core.vpu_fill 0.0 to %[[ACC]]
// CHECK-NEXT:    core.mpu_matmul %a, %[[ACC]] {accumulate = true}
// CHECK-NEXT:    core.mpu_matmul %a, %[[ACC]] {accumulate = true}
// CHECK-NEXT:    core.dma %[[ACC]] to %out

builtin.module {
  core.kernel @chain args [#core.arg<0, [8, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [8, 128], f32, shared_dram, write>] {
    core.program @core0 on core(0) {
      %x = core.arg 0 : !core.buf<[8, 256], bf16, shared_dram>
      %wd = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
      %out = core.arg 2 : !core.buf<[8, 128], f32, shared_dram>
      %a = core.alloc sram : !core.buf<[8, 256], bf16, sram>
      core.dma %x to %a : !core.buf<[8, 256], bf16, shared_dram>, !core.buf<[8, 256], bf16, sram>
      %w = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma %wd to %w : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
      %acc = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_fill 0.0 to %acc : !core.buf<[8, 128], f32, sram>
      %m = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.mpu_matmul %a, %m {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
      %s = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_binary add %m, %acc to %s : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>
      %m2 = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.mpu_matmul %a, %m2 {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
      %s2 = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_binary add %s, %m2 to %s2 : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>
      core.dma %s2 to %out : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, shared_dram>
      core.dma_wait
      core.end
    }
  }
}

// -----

// A [2, 4, 256] @ [256, 128] matmul runs on the [8, 128] view of its result: the accumulation
// runs on an [8, 128] view of acc.

// CHECK-LABEL: core.kernel @viewed
// CHECK:         %[[ACC:.*]] = core.alloc sram : !core.buf<[2, 4, 128], f32, sram>
// CHECK-NEXT:    core.vpu_fill 0.0 to %[[ACC]]
// CHECK-NEXT:    %[[V:.*]] = core.view %[[ACC]] : !core.buf<[2, 4, 128], f32, sram> -> !core.buf<[8, 128], f32, sram>
// CHECK-NEXT:    core.mpu_matmul %a, %[[V]] {accumulate = true}
// CHECK-NEXT:    %{{.*}} = core.alloc
// CHECK-NEXT:    core.vpu_unary copy %[[ACC]] to

builtin.module {
  core.kernel @viewed args [#core.arg<0, [8, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [8, 128], f32, shared_dram, write>] {
    core.program @core0 on core(0) {
      %x = core.arg 0 : !core.buf<[8, 256], bf16, shared_dram>
      %wd = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
      %out = core.arg 2 : !core.buf<[8, 128], f32, shared_dram>
      %a = core.alloc sram : !core.buf<[8, 256], bf16, sram>
      core.dma %x to %a : !core.buf<[8, 256], bf16, shared_dram>, !core.buf<[8, 256], bf16, sram>
      %w = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma %wd to %w : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
      %acc = core.alloc sram : !core.buf<[2, 4, 128], f32, sram>
      core.vpu_fill 0.0 to %acc : !core.buf<[2, 4, 128], f32, sram>
      %m = core.alloc sram : !core.buf<[2, 4, 128], f32, sram>
      %mv = core.view %m : !core.buf<[2, 4, 128], f32, sram> -> !core.buf<[8, 128], f32, sram>
      core.mpu_matmul %a, %mv {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
      %s = core.alloc sram : !core.buf<[2, 4, 128], f32, sram>
      core.vpu_binary add %acc, %m to %s : !core.buf<[2, 4, 128], f32, sram>, !core.buf<[2, 4, 128], f32, sram>, !core.buf<[2, 4, 128], f32, sram>
      %y = core.alloc sram : !core.buf<[2, 4, 128], f32, sram>
      core.vpu_unary copy %s to %y : !core.buf<[2, 4, 128], f32, sram>, !core.buf<[2, 4, 128], f32, sram>
      core.dma_wait
      core.end
    }
  }
}

// -----

// acc is read by another op after its last write (the add is not its only reader): no fusion.

// CHECK-LABEL: core.kernel @read_twice
// CHECK:         core.mpu_matmul %a, %{{.*}} {accumulate = false}
// CHECK:         core.vpu_binary add

builtin.module {
  core.kernel @read_twice args [#core.arg<0, [8, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [8, 128], f32, shared_dram, write>] {
    core.program @core0 on core(0) {
      %x = core.arg 0 : !core.buf<[8, 256], bf16, shared_dram>
      %wd = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
      %out = core.arg 2 : !core.buf<[8, 128], f32, shared_dram>
      %a = core.alloc sram : !core.buf<[8, 256], bf16, sram>
      core.dma %x to %a : !core.buf<[8, 256], bf16, shared_dram>, !core.buf<[8, 256], bf16, sram>
      %w = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma %wd to %w : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
      %acc = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_fill 0.0 to %acc : !core.buf<[8, 128], f32, sram>
      %twice = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_binary add %acc, %acc to %twice : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>
      %m = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.mpu_matmul %a, %m {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
      %s = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_binary add %acc, %m to %s : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>
      core.dma %s to %out : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, shared_dram>
      core.dma_wait
      core.end
    }
  }
}

// -----

// acc is touched between the matmul and the add, or after the add: no fusion.

// CHECK-LABEL: core.kernel @touched_later
// CHECK-NOT:     accumulate = true

builtin.module {
  core.kernel @touched_later args [#core.arg<0, [8, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [8, 128], f32, shared_dram, write>] {
    core.program @core0 on core(0) {
      %x = core.arg 0 : !core.buf<[8, 256], bf16, shared_dram>
      %wd = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
      %out = core.arg 2 : !core.buf<[8, 128], f32, shared_dram>
      %a = core.alloc sram : !core.buf<[8, 256], bf16, sram>
      core.dma %x to %a : !core.buf<[8, 256], bf16, shared_dram>, !core.buf<[8, 256], bf16, sram>
      %w = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma %wd to %w : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
      %acc = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_fill 0.0 to %acc : !core.buf<[8, 128], f32, sram>
      %m = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.mpu_matmul %a, %m {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
      core.vpu_fill 1.0 to %acc : !core.buf<[8, 128], f32, sram>
      %s = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_binary add %acc, %m to %s : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>
      core.dma %s to %out : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, shared_dram>
      %acc2 = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_fill 0.0 to %acc2 : !core.buf<[8, 128], f32, sram>
      %m2 = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.mpu_matmul %a, %m2 {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
      %s2 = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_binary add %acc2, %m2 to %s2 : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>
      core.dma %acc2 to %out : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, shared_dram>
      core.dma_wait
      core.end
    }
  }
}

// -----

// The matmul's result is read by another op too, or is bf16: no fusion.

// CHECK-LABEL: core.kernel @result_used
// CHECK-NOT:     accumulate = true

builtin.module {
  core.kernel @result_used args [#core.arg<0, [8, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [8, 128], f32, shared_dram, write>] {
    core.program @core0 on core(0) {
      %x = core.arg 0 : !core.buf<[8, 256], bf16, shared_dram>
      %wd = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
      %out = core.arg 2 : !core.buf<[8, 128], f32, shared_dram>
      %a = core.alloc sram : !core.buf<[8, 256], bf16, sram>
      core.dma %x to %a : !core.buf<[8, 256], bf16, shared_dram>, !core.buf<[8, 256], bf16, sram>
      %w = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma %wd to %w : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
      %acc = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_fill 0.0 to %acc : !core.buf<[8, 128], f32, sram>
      %m = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.mpu_matmul %a, %m {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
      %s = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_binary add %acc, %m to %s : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>
      core.dma %m to %out : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, shared_dram>
      %bacc = core.alloc sram : !core.buf<[8, 128], bf16, sram>
      core.vpu_fill 0.0 to %bacc : !core.buf<[8, 128], bf16, sram>
      %bm = core.alloc sram : !core.buf<[8, 128], bf16, sram>
      core.mpu_matmul %a, %bm {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], bf16, sram>
      %bs = core.alloc sram : !core.buf<[8, 128], bf16, sram>
      core.vpu_binary add %bacc, %bm to %bs : !core.buf<[8, 128], bf16, sram>, !core.buf<[8, 128], bf16, sram>, !core.buf<[8, 128], bf16, sram>
      core.dma_wait
      core.end
    }
  }
}

// -----

// acc is defined outside the loop whose body accumulates: every iteration adds to the same acc
// (value semantics), so the MPU must not accumulate into it across iterations: no fusion.

// CHECK-LABEL: core.kernel @loop
// CHECK-NOT:     accumulate = true

builtin.module {
  core.kernel @loop args [#core.arg<0, [8, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [8, 128], f32, shared_dram, write>] {
    core.program @core0 on core(0) {
      %x = core.arg 0 : !core.buf<[8, 256], bf16, shared_dram>
      %wd = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
      %out = core.arg 2 : !core.buf<[8, 128], f32, shared_dram>
      %a = core.alloc sram : !core.buf<[8, 256], bf16, sram>
      core.dma %x to %a : !core.buf<[8, 256], bf16, shared_dram>, !core.buf<[8, 256], bf16, sram>
      %w = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
      core.dma %wd to %w : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
      core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
      %acc = core.alloc sram : !core.buf<[8, 128], f32, sram>
      core.vpu_fill 0.0 to %acc : !core.buf<[8, 128], f32, sram>
      %lb = arith.constant 0 : index
      %ub = arith.constant 4 : index
      %st = arith.constant 1 : index
      scf.for %i = %lb to %ub step %st {
        %m = core.alloc sram : !core.buf<[8, 128], f32, sram>
        core.mpu_matmul %a, %m {accumulate = false} : !core.buf<[8, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
        %s = core.alloc sram : !core.buf<[8, 128], f32, sram>
        core.vpu_binary add %acc, %m to %s : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, sram>
        core.dma %s to %out : !core.buf<[8, 128], f32, sram>, !core.buf<[8, 128], f32, shared_dram>
      }
      core.dma_wait
      core.end
    }
  }
}
