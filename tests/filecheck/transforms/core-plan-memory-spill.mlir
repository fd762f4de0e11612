// RUN: legato-opt %s -p core-plan-memory | filecheck %s

// All four buffers are live together (used by the DMAs at the end).
// 1 MiB + 1 MiB fit the 2 MiB SRAM of EVT0; the third 1 MiB buffer spills to private DRAM.
builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %0 = core.alloc sram : !core.buf<[512, 1024], bf16, sram>
      %1 = core.alloc sram : !core.buf<[512, 1024], bf16, sram>
      %2 = core.alloc sram : !core.buf<[512, 1024], bf16, sram>
      %3 = core.alloc sram : !core.buf<[16], f32, sram>
      core.dma %0 to %1 : !core.buf<[512, 1024], bf16, sram>, !core.buf<[512, 1024], bf16, sram>
      core.dma %1 to %2 : !core.buf<[512, 1024], bf16, sram>, !core.buf<[512, 1024], bf16, sram>
      core.dma %3 to %3 : !core.buf<[16], f32, sram>, !core.buf<[16], f32, sram>
      core.end
    }
  }
}
// CHECK:      core.alloc sram {offset = 0 : i64} : !core.buf<[512, 1024], bf16, sram>
// CHECK-NEXT: core.alloc sram {offset = 1048576 : i64} : !core.buf<[512, 1024], bf16, sram>
// CHECK-NEXT: core.alloc sram {offset = 0 : i64, placement = "private_dram"} : !core.buf<[512, 1024], bf16, sram>
// CHECK-NEXT: core.alloc sram {offset = 1048576 : i64, placement = "private_dram"} : !core.buf<[16], f32, sram>

