// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory | filecheck %s
// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory,convert-core-to-backend | filecheck %s --check-prefix=BE

// SPMD core-to-core: every core sends its rows to core (c + 1) % 32, a core chosen at run time.
// The send pairs with the same program's receive on (sram, queue 1): one buffer name, planned
// at one offset on every core; the sender addresses core %next's copy (`alloc on core(%next)`,
// `lsa core(rK).sram`) and notifies its queue (notify mode CORE_REG).

// CHECK:      core.program @cores on all_cores {
// CHECK:        %next = arith.remsi
// CHECK:        %[[DST:.*]] = core.alloc on core(%next) sram {offset = [[OFF:[0-9]+]] : i64, buffer = "spmd_xfer0"}
// CHECK-NEXT:   core.dma %{{.*}} to %[[DST]] notify core(%next) sram queue 1
// CHECK-NEXT:   core.wait_queue sram queue 1
// CHECK-NEXT:   core.alloc sram {offset = [[OFF]] : i64, buffer = "spmd_xfer0"}

// BE:      backend.program @cores on all_cores
// BE:        %[[N:.*]] = backend.rem
// BE:        %[[D:.*]] = backend.lsa core(%[[N]]) sram, 0
// BE:        backend.dma %[[D]], %{{.*}}, %{{.*}} notify core(%[[N]]) sram queue 1
// BE-NEXT:   backend.qwait sram queue 1

builtin.module {
  legato.kernel @ring(%a : !legato.tensor<[32, 64], f32, shared_dram>, %out : !legato.tensor<[32, 64], f32, shared_dram>) {
    legato.on all_cores {
      %c = legato.core_id : index
      %one = arith.constant 1 : index
      %n = arith.constant 32 : index
      %c1 = arith.addi %c, %one : index
      %next = arith.remsi %c1, %n : index
      %r = arith.constant 8 : index
      %o = arith.muli %c, %r : index
      %s = legato.dynamic_slice %a [%o, 0] [8, 64] : !legato.tensor<[32, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, shared_dram>
      %x = legato.load %s memory sram : !legato.tensor<[8, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, sram>
      legato.request_load %x to core(%next) memory sram queue 1 : !legato.tensor<[8, 64], f32, sram>
      %y = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      %d = legato.dynamic_slice %out [%o, 0] [8, 64] : !legato.tensor<[32, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, shared_dram>
      legato.memcpy %d, %y : !legato.tensor<[8, 64], f32, shared_dram>, !legato.tensor<[8, 64], f32, sram>
      legato.yield
    }
    legato.return
  }
}
