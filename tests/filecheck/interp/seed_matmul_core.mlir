// The seed's matmul at the core level: top DMAs a (2 of 10 rows) and b to core 0, which
// multiplies and copies the rows out; the 8 rows past the runtime extent stay zero.
// RUN: %python -m legato.tools.run %s -a 'ones@2x256' -a ones -a zeros --print 2 --stats | filecheck %s

// CHECK:      %{{arg2|out}} : tensor<[10, 128], bf16, shared_dram> = {{\[\[}}256., 256., 256., ..., 256., 256., 256.],
// CHECK-NEXT: [256., 256., 256., ..., 256., 256., 256.],
// CHECK-NEXT: [  0.,   0.,   0., ...,   0.,   0.,   0.],
// CHECK:      // core level, kernel simple_matmul: {{[0-9]+}} ops, 2 transfers
// CHECK:      //   top:
// CHECK:      //   core 0:

core.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>] {
  core.program @top on top {
    %a = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
    %b = core.arg 1 : !core.buf<[256, 128], bf16, mpu_dram>
    %n = core.dim %a, 0 : index
    %da = core.alloc on core(0) sram dims(%n) {offset = 0 : i64} : !core.buf<[?10, 256], bf16, sram>
    %db = core.alloc on core(0) mpu_buffer {offset = 0 : i64} : !core.buf<[256, 128], bf16, mpu_buffer>
    core.dma %a to %da notify core(0) sram queue 0 : !core.buf<[?10, 256], bf16, shared_dram>, !core.buf<[?10, 256], bf16, sram>
    core.dma %b to %db notify core(0) mpu_buffer queue 0 : !core.buf<[256, 128], bf16, mpu_dram>, !core.buf<[256, 128], bf16, mpu_buffer>
    core.end
  }
  core.program @core0 on core(0) {
    %a = core.arg 0 : !core.buf<[?10, 256], bf16, shared_dram>
    %out = core.arg 2 : !core.buf<[10, 128], bf16, shared_dram>
    %n = core.dim %a, 0 : index
    core.wait_queue sram queue 0
    core.wait_queue mpu_buffer queue 0
    %la = core.alloc sram dims(%n) {offset = 0 : i64} : !core.buf<[?10, 256], bf16, sram>
    %w = core.alloc mpu_buffer {offset = 0 : i64} : !core.buf<[256, 128], bf16, mpu_buffer>
    core.mpu_load_weight %w : !core.buf<[256, 128], bf16, mpu_buffer>
    %acc = core.alloc sram dims(%n) {offset = 5120 : i64} : !core.buf<[?10, 128], bf16, sram>
    core.mpu_matmul %la, %acc {accumulate = false} : !core.buf<[?10, 256], bf16, sram>, !core.buf<[?10, 128], bf16, sram>
    core.dma %acc to %out : !core.buf<[?10, 128], bf16, sram>, !core.buf<[10, 128], bf16, shared_dram>
    core.dma_wait
    core.end
  }
}
