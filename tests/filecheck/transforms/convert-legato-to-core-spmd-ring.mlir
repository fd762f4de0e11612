// RUN: legato-opt %s -p convert-legato-to-core,core-transfer-rings | filecheck %s

// An SPMD stream of four transfers to a runtime core (the next core of c's group of four): each core
// is done with transfer k - 3 before it receives and before it sends transfer k, so the stream
// cycles through three receive buffers with credits, as between two core programs
// (convert-legato-to-core-ring.mlir). A credit comes after the next MPU/VPU op following the
// last touch (the core issues in order and the credit DMA waits for the ops reading the buffer:
// the unit then has that op queued). The credit goes to the core that sends to this one (the
// inverse permutation); no stream targets it, so it is the target applied order - 1 times (here
// three times), computed in the prologue from a fresh core_id.

// CHECK:      core.program @cores on all_cores {
// CHECK:        %{{.*}} = core.core_id : index
// CHECK:        %partner = arith.addi
// CHECK:        %partner_1 = arith.addi
// CHECK:        %[[SENDER:partner_2]] = arith.addi
// CHECK-NEXT:   %{{.*}} = core.core_id : index
// CHECK:        %[[P:partner_3]] = arith.addi
// CHECK:        core.alloc on core(%[[P]]) sram {buffer = "spmd_xfer0_slot0"}
// CHECK-NEXT:   core.dma %{{.*}} notify core(%[[P]]) sram queue 1
// CHECK-NEXT:   core.wait_queue sram queue 1
// CHECK-NEXT:   %[[B0:.*]] = core.alloc sram {buffer = "spmd_xfer0_slot0"}
// CHECK:        core.alloc on core(%[[P]]) sram {buffer = "spmd_xfer0_slot1"}
// CHECK:        core.vpu_binary add
// CHECK-NEXT:   arith.constant 64 : index
// CHECK-NEXT:   core.dma %[[B0]] to %[[B0]] bytes %{{.*}} notify core(%[[SENDER]]) sram queue 255
// CHECK:        core.alloc on core(%[[P]]) sram {buffer = "spmd_xfer0_slot2"}
// CHECK:        core.alloc on core(%[[P]]) sram {buffer = "spmd_xfer0_slot0"}
// CHECK-NEXT:   core.wait_queue sram queue 255
// CHECK-NEXT:   core.dma %{{.*}} notify core(%[[P]]) sram queue 1

builtin.module {
  legato.kernel @pairs(%a : !legato.tensor<[8, 64], f32, shared_dram>, %out : !legato.tensor<[8, 64], f32, shared_dram>) {
    legato.on all_cores {
      %c = legato.core_id : index
      %four = arith.constant 4 : index
      %one = arith.constant 1 : index
      %i = arith.remsi %c, %four : index
      %base = arith.subi %c, %i : index
      %i1 = arith.addi %i, %one : index
      %i2 = arith.remsi %i1, %four : index
      %partner = arith.addi %base, %i2 : index
      %x0 = legato.load %a memory sram : !legato.tensor<[8, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, sram>
      legato.request_load %x0 to core(%partner) memory sram queue 1 : !legato.tensor<[8, 64], f32, sram>
      %y0 = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      %s0 = legato.add %y0, %x0 : !legato.tensor<[8, 64], f32, sram>, !legato.tensor<[8, 64], f32, sram> -> !legato.tensor<[8, 64], f32, sram>
      legato.memcpy %out, %s0 : !legato.tensor<[8, 64], f32, shared_dram>, !legato.tensor<[8, 64], f32, sram>
      %x1 = legato.load %a memory sram : !legato.tensor<[8, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, sram>
      legato.request_load %x1 to core(%partner) memory sram queue 1 : !legato.tensor<[8, 64], f32, sram>
      %y1 = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      %s1 = legato.add %y1, %x1 : !legato.tensor<[8, 64], f32, sram>, !legato.tensor<[8, 64], f32, sram> -> !legato.tensor<[8, 64], f32, sram>
      legato.memcpy %out, %s1 : !legato.tensor<[8, 64], f32, shared_dram>, !legato.tensor<[8, 64], f32, sram>
      %x2 = legato.load %a memory sram : !legato.tensor<[8, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, sram>
      legato.request_load %x2 to core(%partner) memory sram queue 1 : !legato.tensor<[8, 64], f32, sram>
      %y2 = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      %s2 = legato.add %y2, %x2 : !legato.tensor<[8, 64], f32, sram>, !legato.tensor<[8, 64], f32, sram> -> !legato.tensor<[8, 64], f32, sram>
      legato.memcpy %out, %s2 : !legato.tensor<[8, 64], f32, shared_dram>, !legato.tensor<[8, 64], f32, sram>
      %x3 = legato.load %a memory sram : !legato.tensor<[8, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, sram>
      legato.request_load %x3 to core(%partner) memory sram queue 1 : !legato.tensor<[8, 64], f32, sram>
      %y3 = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      %s3 = legato.add %y3, %x3 : !legato.tensor<[8, 64], f32, sram>, !legato.tensor<[8, 64], f32, sram> -> !legato.tensor<[8, 64], f32, sram>
      legato.memcpy %out, %s3 : !legato.tensor<[8, 64], f32, shared_dram>, !legato.tensor<[8, 64], f32, sram>
      legato.yield
    }
    legato.return
  }
}
