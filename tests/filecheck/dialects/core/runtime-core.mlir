// RUN: legato-opt %s | filecheck %s
// RUN: legato-opt %s --print-op-generic | legato-opt | filecheck %s
//
// A runtime core in an all_cores program round-trips: `core.alloc on core(%c)` (the SPMD buffer
// in core %c's memory), `core.dma ... notify core(%c)`, and `legato.request_load ... to core(%c)`.

builtin.module {
  core.kernel @k args [] {
    core.program @cores on all_cores {
      %c = core.core_id : index
      %a = core.alloc sram {offset = 0 : i64} : !core.buf<[4, 32], f32, sram>
      %b = core.alloc on core(%c) sram {offset = 512 : i64, buffer = "x"} : !core.buf<[4, 32], f32, sram>
      core.dma %a to %b notify core(%c) sram queue 1 : !core.buf<[4, 32], f32, sram>, !core.buf<[4, 32], f32, sram>
      core.dma %a to %b bytes %c notify core(%c) sram queue 2 : !core.buf<[4, 32], f32, sram>, !core.buf<[4, 32], f32, sram>
      core.end
    }
  }
  legato.kernel @l(%x : !legato.tensor<[4, 32], f32, shared_dram>) {
    legato.on all_cores {
      %i = legato.core_id : index
      %y = legato.load %x memory sram : !legato.tensor<[4, 32], f32, shared_dram> -> !legato.tensor<[4, 32], f32, sram>
      legato.request_load %y to core(%i) memory sram queue 3 : !legato.tensor<[4, 32], f32, sram>
      legato.request_load %y to core(2) memory sram queue 3 : !legato.tensor<[4, 32], f32, sram>
      legato.yield
    }
    legato.return
  }
}

// CHECK:      %b = core.alloc on core(%c) sram {offset = 512 : i64, buffer = "x"} : !core.buf<[4, 32], f32, sram>
// CHECK-NEXT: core.dma %a to %b notify core(%c) sram queue 1 : !core.buf<[4, 32], f32, sram>, !core.buf<[4, 32], f32, sram>
// CHECK-NEXT: core.dma %a to %b bytes %c notify core(%c) sram queue 2 : !core.buf<[4, 32], f32, sram>, !core.buf<[4, 32], f32, sram>
// CHECK:      legato.request_load %y to core(%i) memory sram queue 3 : !legato.tensor<[4, 32], f32, sram>
// CHECK-NEXT: legato.request_load %y to core(2) memory sram queue 3 : !legato.tensor<[4, 32], f32, sram>
