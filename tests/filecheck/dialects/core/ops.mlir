// RUN: legato-opt %s | legato-opt | filecheck %s
// RUN: legato-opt %s --print-op-generic | legato-opt | filecheck %s

// Custom-form and generic-form round trips of every core op (with arith/scf inside programs).

// CHECK-LABEL: core.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>, #core.arg<3, i64, read>] {
core.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>, #core.arg<3, i64, read>] {
  // CHECK-NEXT: core.program @top on top {
  core.program @top on top {
    // CHECK-NEXT: %a = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
    %a = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
    // CHECK-NEXT: %b = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
    %b = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
    // CHECK-NEXT: %s = core.arg 3 : i64
    %s = core.arg 3 : i64
    // CHECK-NEXT: %n = core.dim %a, 0 : index
    %n = core.dim %a, 0 : index
    // CHECK-NEXT: %dst = core.alloc on core(0) sram dims(%n) {offset = 0 : i64} : !core.buf<[?10, 256], bf16, sram>
    %dst = core.alloc on core(0) sram dims(%n) {offset = 0 : i64} : !core.buf<[?10, 256], bf16, sram>
    // CHECK-NEXT: %wb = core.alloc on core(0) mpu_buffer {offset = 0 : i64} : !core.buf<[256, 128], bf16, mpu_buffer>
    %wb = core.alloc on core(0) mpu_buffer {offset = 0 : i64} : !core.buf<[256, 128], bf16, mpu_buffer>
    // CHECK-NEXT: core.dma %a to %dst notify core(0) sram queue 0 : !core.buf<[?10, 256], bf16, shared_dram>, !core.buf<[?10, 256], bf16, sram>
    core.dma %a to %dst notify core(0) sram queue 0 : !core.buf<[?10, 256], bf16, shared_dram>, !core.buf<[?10, 256], bf16, sram>
    // CHECK-NEXT: core.dma %b to %wb notify core(0) mpu_buffer queue 0 : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
    core.dma %b to %wb notify core(0) mpu_buffer queue 0 : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
    // CHECK-NEXT: core.dma_wait
    core.dma_wait
    // CHECK-NEXT: core.end
    core.end
  // CHECK-NEXT: }
  }
  // CHECK-NEXT: core.program @core0 on core(0) {
  core.program @core0 on core(0) {
    // CHECK-NEXT: %a = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
    %a = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
    // CHECK-NEXT: %out = core.arg 2 : !core.buf<[10, 128], bf16, shared_dram>
    %out = core.arg 2 : !core.buf<[10, 128], bf16, shared_dram>
    // CHECK-NEXT: %n = core.dim %a, 0 : index
    %n = core.dim %a, 0 : index
    // CHECK-NEXT: %la = core.alloc sram dims(%n) {offset = 0 : i64} : !core.buf<[?10, 256], bf16, sram>
    %la = core.alloc sram dims(%n) {offset = 0 : i64} : !core.buf<[?10, 256], bf16, sram>
    // CHECK-NEXT: %w = core.alloc mpu_buffer {offset = 0 : i64} : !core.buf<[256, 128], bf16, mpu_buffer>
    %w = core.alloc mpu_buffer {offset = 0 : i64} : !core.buf<[256, 128], bf16, mpu_buffer>
    // CHECK-NEXT: %acc = core.alloc sram dims(%n) : !core.buf<[?10, 128], f32, sram>
    %acc = core.alloc sram dims(%n) : !core.buf<[?10, 128], f32, sram>
    // CHECK-NEXT: %r = core.alloc sram dims(%n) : !core.buf<[?10, 128], bf16, sram>
    %r = core.alloc sram dims(%n) : !core.buf<[?10, 128], bf16, sram>
    // CHECK-NEXT: core.wait_queue sram queue 0
    core.wait_queue sram queue 0
    // CHECK-NEXT: core.wait_queue mpu_buffer queue 0
    core.wait_queue mpu_buffer queue 0
    // CHECK-NEXT: core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
    core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
    // CHECK-NEXT: core.mpu_matmul %la, %acc {accumulate = false} : !core.buf<[?10, 256], bf16, sram>, !core.buf<[?10, 128], f32, sram>
    core.mpu_matmul %la, %acc {accumulate = false} : !core.buf<[?10, 256], bf16, sram>, !core.buf<[?10, 128], f32, sram>
    // CHECK-NEXT: core.mpu_matmul %la, %acc {accumulate = true} : !core.buf<[?10, 256], bf16, sram>, !core.buf<[?10, 128], f32, sram>
    core.mpu_matmul %la, %acc {accumulate = true} : !core.buf<[?10, 256], bf16, sram>, !core.buf<[?10, 128], f32, sram>
    // CHECK-NEXT: core.vpu_unary cast %acc to %r : !core.buf<[?10, 128], f32, sram>, !core.buf<[?10, 128], bf16, sram>
    core.vpu_unary cast %acc to %r : !core.buf<[?10, 128], f32, sram>, !core.buf<[?10, 128], bf16, sram>
    // CHECK-NEXT: %m = core.alloc sram dims(%n) : !core.buf<[?10, 1], f32, sram>
    %m = core.alloc sram dims(%n) : !core.buf<[?10, 1], f32, sram>
    // CHECK-NEXT: core.vpu_reduce max %acc to %m : !core.buf<[?10, 128], f32, sram>, !core.buf<[?10, 1], f32, sram>
    core.vpu_reduce max %acc to %m : !core.buf<[?10, 128], f32, sram>, !core.buf<[?10, 1], f32, sram>
    // CHECK-NEXT: core.vpu_binary sub %acc, %m to %acc : !core.buf<[?10, 128], f32, sram>, !core.buf<[?10, 1], f32, sram>, !core.buf<[?10, 128], f32, sram>
    core.vpu_binary sub %acc, %m to %acc : !core.buf<[?10, 128], f32, sram>, !core.buf<[?10, 1], f32, sram>, !core.buf<[?10, 128], f32, sram>
    // CHECK-NEXT: core.vpu_fill -inf to %m : !core.buf<[?10, 1], f32, sram>
    core.vpu_fill -inf to %m : !core.buf<[?10, 1], f32, sram>
    // CHECK-NEXT: %c0 = arith.constant 0 : index
    %c0 = arith.constant 0 : index
    // CHECK-NEXT: %c4 = arith.constant 4 : index
    %c4 = arith.constant 4 : index
    // CHECK-NEXT: %t = core.subview %r [%c0, 0] [4, 128] : !core.buf<[?10, 128], bf16, sram> -> !core.buf<[4, 128], bf16, sram>
    %t = core.subview %r [%c0, 0] [4, 128] : !core.buf<[?10, 128], bf16, sram> -> !core.buf<[4, 128], bf16, sram>
    // CHECK-NEXT: %t2 = core.subview %r [0, 0] [%c4, 128] : !core.buf<[?10, 128], bf16, sram> -> !core.buf<[?10, 128], bf16, sram>
    %t2 = core.subview %r [0, 0] [%c4, 128] : !core.buf<[?10, 128], bf16, sram> -> !core.buf<[?10, 128], bf16, sram>
    // CHECK-NEXT: %id = core.core_id : index
    %id = core.core_id : index
    // CHECK-NEXT: core.barrier 0 count 4
    core.barrier 0 count 4
    // CHECK-NEXT: core.sem_post 2 count 1
    core.sem_post 2 count 1
    // CHECK-NEXT: core.sem_wait 2 count 3
    core.sem_wait 2 count 3
    // CHECK-NEXT: %c1 = arith.constant 1 : index
    %c1 = arith.constant 1 : index
    // CHECK-NEXT: scf.for %iv = %c0 to %n step %c1 {
    scf.for %iv = %c0 to %n step %c1 {
      // CHECK-NEXT: %row = core.subview %r [%iv, 0] [1, 128] : !core.buf<[?10, 128], bf16, sram> -> !core.buf<[1, 128], bf16, sram>
      %row = core.subview %r [%iv, 0] [1, 128] : !core.buf<[?10, 128], bf16, sram> -> !core.buf<[1, 128], bf16, sram>
      // CHECK-NEXT: core.vpu_unary exp %row to %row : !core.buf<[1, 128], bf16, sram>, !core.buf<[1, 128], bf16, sram>
      core.vpu_unary exp %row to %row : !core.buf<[1, 128], bf16, sram>, !core.buf<[1, 128], bf16, sram>
    // CHECK-NEXT: }
    }
    // CHECK-NEXT: %ids = core.alloc sram : !core.buf<[4], i64, sram>
    %ids = core.alloc sram : !core.buf<[4], i64, sram>
    // CHECK-NEXT: %rid = core.load_index %ids[%c1] : !core.buf<[4], i64, sram>
    %rid = core.load_index %ids[%c1] : !core.buf<[4], i64, sram>
    // CHECK-NEXT: %mask = core.alloc sram : !core.buf<[1, 128], i1, sram>
    %mask = core.alloc sram : !core.buf<[1, 128], i1, sram>
    // CHECK-NEXT: %r0 = core.subview %r [%rid, 0] [1, 128] : !core.buf<[?10, 128], bf16, sram> -> !core.buf<[1, 128], bf16, sram>
    %r0 = core.subview %r [%rid, 0] [1, 128] : !core.buf<[?10, 128], bf16, sram> -> !core.buf<[1, 128], bf16, sram>
    // CHECK-NEXT: core.vpu_select %mask, %r0 to %r0 : !core.buf<[1, 128], i1, sram>, !core.buf<[1, 128], bf16, sram>, !core.buf<[1, 128], bf16, sram>
    core.vpu_select %mask, %r0 to %r0 : !core.buf<[1, 128], i1, sram>, !core.buf<[1, 128], bf16, sram>, !core.buf<[1, 128], bf16, sram>
    // CHECK-NEXT: %nb = arith.constant 1024 : index
    %nb = arith.constant 1024 : index
    // CHECK-NEXT: core.dma %r to %out bytes %nb : !core.buf<[?10, 128], bf16, sram>, !core.buf<[10, 128], bf16, shared_dram>
    core.dma %r to %out bytes %nb : !core.buf<[?10, 128], bf16, sram>, !core.buf<[10, 128], bf16, shared_dram>
    // CHECK-NEXT: core.dma_wait
    core.dma_wait
    // CHECK-NEXT: core.end
    core.end
  // CHECK-NEXT: }
  }
// CHECK-NEXT: }
}
