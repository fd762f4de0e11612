// RUN: not legato-opt %s -p core-plan-memory 2>&1 | filecheck %s

// The MPU staging buffer has no spill space: 512 KiB do not fit its 256 KiB.
builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %0 = core.alloc mpu_buffer : !core.buf<[1024, 256], bf16, mpu_buffer>
      core.end
    }
  }
}
// CHECK: error: out of mpu_buffer on core(0): this [1024, 256] bf16 buffer needs 512.00 KiB (524288 bytes), 0 bytes are already planned and the bertha mpu_buffer holds 256.00 KiB (262144 bytes)
