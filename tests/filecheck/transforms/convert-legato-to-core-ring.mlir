// RUN: legato-opt %s -p convert-legato-to-core,core-fuse-mpu-accumulate,core-transfer-rings | filecheck %s

// core(0) streams four [8, 256] tiles to core(1) on sram queue 1; core(1) is done with each
// before it receives the next, so the stream cycles through three receive buffers (slots) with
// credits on a queue of core(0) (the highest free one, 255). `acc = acc + x @ w` accumulates
// in place on the MPU (one mpu_matmul {accumulate = true} into acc, no VPU add).

builtin.module {
  legato.kernel @ring(%a: !legato.tensor<[4, 8, 256], bf16, shared_dram>, %w: !legato.tensor<[256, 128], bf16, mpu_dram>, %out: !legato.tensor<[8, 128], f32, shared_dram>) attributes {target = "bertha"} {
    legato.on core(0) {
      %0 = legato.slice %a [0, 0, 0] [1, 8, 256] [1, 1, 1] : !legato.tensor<[4, 8, 256], bf16, shared_dram> -> !legato.tensor<[1, 8, 256], bf16, shared_dram>
      %1 = legato.reshape %0 : !legato.tensor<[1, 8, 256], bf16, shared_dram> -> !legato.tensor<[8, 256], bf16, shared_dram>
      %x = legato.load %1 memory sram : !legato.tensor<[8, 256], bf16, shared_dram> -> !legato.tensor<[8, 256], bf16, sram>
      legato.request_load %x to core(1) memory sram queue 1 : !legato.tensor<[8, 256], bf16, sram>
      %2 = legato.slice %a [1, 0, 0] [1, 8, 256] [1, 1, 1] : !legato.tensor<[4, 8, 256], bf16, shared_dram> -> !legato.tensor<[1, 8, 256], bf16, shared_dram>
      %3 = legato.reshape %2 : !legato.tensor<[1, 8, 256], bf16, shared_dram> -> !legato.tensor<[8, 256], bf16, shared_dram>
      %x_1 = legato.load %3 memory sram : !legato.tensor<[8, 256], bf16, shared_dram> -> !legato.tensor<[8, 256], bf16, sram>
      legato.request_load %x_1 to core(1) memory sram queue 1 : !legato.tensor<[8, 256], bf16, sram>
      %4 = legato.slice %a [2, 0, 0] [1, 8, 256] [1, 1, 1] : !legato.tensor<[4, 8, 256], bf16, shared_dram> -> !legato.tensor<[1, 8, 256], bf16, shared_dram>
      %5 = legato.reshape %4 : !legato.tensor<[1, 8, 256], bf16, shared_dram> -> !legato.tensor<[8, 256], bf16, shared_dram>
      %x_2 = legato.load %5 memory sram : !legato.tensor<[8, 256], bf16, shared_dram> -> !legato.tensor<[8, 256], bf16, sram>
      legato.request_load %x_2 to core(1) memory sram queue 1 : !legato.tensor<[8, 256], bf16, sram>
      %6 = legato.slice %a [3, 0, 0] [1, 8, 256] [1, 1, 1] : !legato.tensor<[4, 8, 256], bf16, shared_dram> -> !legato.tensor<[1, 8, 256], bf16, shared_dram>
      %7 = legato.reshape %6 : !legato.tensor<[1, 8, 256], bf16, shared_dram> -> !legato.tensor<[8, 256], bf16, shared_dram>
      %x_3 = legato.load %7 memory sram : !legato.tensor<[8, 256], bf16, shared_dram> -> !legato.tensor<[8, 256], bf16, sram>
      legato.request_load %x_3 to core(1) memory sram queue 1 : !legato.tensor<[8, 256], bf16, sram>
      legato.yield
    }
    legato.on core(1) {
      %wb = legato.load %w memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_dram> -> !legato.tensor<[256, 128], bf16, mpu_buffer>
      %acc = legato.constant 0.0 : !legato.tensor<[8, 128], f32, sram>
      %x_4 = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 256], bf16, sram>
      %8 = legato.matmul %x_4, %wb : !legato.tensor<[8, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_buffer> -> !legato.tensor<[8, 128], f32, sram>
      %acc_1 = legato.add %acc, %8 : !legato.tensor<[8, 128], f32, sram>, !legato.tensor<[8, 128], f32, sram> -> !legato.tensor<[8, 128], f32, sram>
      %x_5 = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 256], bf16, sram>
      %9 = legato.matmul %x_5, %wb : !legato.tensor<[8, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_buffer> -> !legato.tensor<[8, 128], f32, sram>
      %acc_2 = legato.add %acc_1, %9 : !legato.tensor<[8, 128], f32, sram>, !legato.tensor<[8, 128], f32, sram> -> !legato.tensor<[8, 128], f32, sram>
      %x_6 = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 256], bf16, sram>
      %10 = legato.matmul %x_6, %wb : !legato.tensor<[8, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_buffer> -> !legato.tensor<[8, 128], f32, sram>
      %acc_3 = legato.add %acc_2, %10 : !legato.tensor<[8, 128], f32, sram>, !legato.tensor<[8, 128], f32, sram> -> !legato.tensor<[8, 128], f32, sram>
      %x_7 = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 256], bf16, sram>
      %11 = legato.matmul %x_7, %wb : !legato.tensor<[8, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_buffer> -> !legato.tensor<[8, 128], f32, sram>
      %acc_4 = legato.add %acc_3, %11 : !legato.tensor<[8, 128], f32, sram>, !legato.tensor<[8, 128], f32, sram> -> !legato.tensor<[8, 128], f32, sram>
      legato.memcpy %out, %acc_4 : !legato.tensor<[8, 128], f32, shared_dram>, !legato.tensor<[8, 128], f32, sram>
      legato.yield
    }
    legato.return
  }
}


// CHECK-LABEL: core.program @core0 on core(0)
// CHECK:         core.alloc on core(1) sram {buffer = "xfer0_slot0"}
// CHECK-NEXT:    core.dma %{{.*}} to %{{.*}} notify core(1) sram queue 1
// CHECK:         core.alloc on core(1) sram {buffer = "xfer0_slot1"}
// CHECK:         core.alloc on core(1) sram {buffer = "xfer0_slot2"}
// CHECK-NOT:     core.wait_queue
// CHECK:         %[[FOURTH:.*]] = core.alloc on core(1) sram {buffer = "xfer0_slot0"}
// CHECK-NEXT:    core.wait_queue sram queue 255
// CHECK-NEXT:    core.dma %{{.*}} to %[[FOURTH]] notify core(1) sram queue 1
// CHECK-LABEL: core.program @core1 on core(1)
// CHECK:         %[[ACC:.*]] = core.alloc sram : !core.buf<[8, 128], f32, sram>
// CHECK-NEXT:    core.vpu_fill 0.0 to %[[ACC]]
// CHECK-NEXT:    core.wait_queue sram queue 1
// CHECK-NEXT:    %[[X0:.*]] = core.alloc sram {buffer = "xfer0_slot0"}
// CHECK-NEXT:    core.mpu_load_weight
// CHECK-NEXT:    core.mpu_matmul %[[X0]], %[[ACC]] {accumulate = true}
// CHECK-NEXT:    %[[N:.*]] = arith.constant 64 : index
// CHECK-NEXT:    core.dma %[[X0]] to %[[X0]] bytes %[[N]] notify core(0) sram queue 255
// CHECK-NEXT:    core.wait_queue sram queue 1
// CHECK-NEXT:    %[[X1:.*]] = core.alloc sram {buffer = "xfer0_slot1"}
// CHECK-NEXT:    core.mpu_matmul %[[X1]], %[[ACC]] {accumulate = true}
// CHECK-NEXT:    core.wait_queue sram queue 1
// CHECK:         core.mpu_matmul %{{.*}}, %[[ACC]] {accumulate = true}
// CHECK:         core.alloc sram {buffer = "xfer0_slot0"}
// CHECK-NEXT:    core.mpu_matmul %{{.*}}, %[[ACC]] {accumulate = true}
// CHECK-NOT:     core.vpu_binary
// CHECK:         core.dma %[[ACC]] to
