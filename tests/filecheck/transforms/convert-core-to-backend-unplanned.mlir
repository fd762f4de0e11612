// RUN: not legato-opt %s -p convert-core-to-backend 2>&1 | filecheck %s

builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %0 = core.alloc sram : !core.buf<[16], f32, sram>
      core.end
    }
  }
}
// CHECK: error: core.alloc has no offset: run core-plan-memory first
