// RUN: not legato-opt %s -p core-plan-memory 2>&1 | filecheck %s

// One iteration's working set does not fit: five 64 KiB tiles loaded before any is used are
// live together in every iteration. The error names the buffer that does not fit and the
// buffers live with it.
builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %a = core.alloc mpu_buffer : !core.buf<[16, 128], bf16, mpu_buffer>
      scf.for %i = %c0 to %c4 step %c1 {
        %w0 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
        %w1 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
        %w2 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
        %w3 = core.alloc mpu_buffer : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %w0 : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %w1 : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %w2 : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %w3 : !core.buf<[256, 128], bf16, mpu_buffer>
        core.mpu_load_weight %a : !core.buf<[16, 128], bf16, mpu_buffer>
      }
      core.end
    }
  }
}
// (legato-opt locates the parsed ops in this file: the buffers live with it are w0, w1, w2, a)
// CHECK: core-plan-memory-loops-errors.mlir:17:9: error: out of mpu_buffer on core(0): this [256, 128] bf16 buffer needs 64.00 KiB (65536 bytes), 196.00 KiB (200704 bytes) are already planned live with it in one iteration of its loop and the bertha mpu_buffer holds 256.00 KiB (262144 bytes); live with it: [256, 128] bf16 at core-plan-memory-loops-errors.mlir:14, [256, 128] bf16 at core-plan-memory-loops-errors.mlir:15, [256, 128] bf16 at core-plan-memory-loops-errors.mlir:16, [16, 128] bf16 at core-plan-memory-loops-errors.mlir:12
