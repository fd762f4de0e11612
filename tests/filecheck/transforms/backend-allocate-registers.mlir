// RUN: legato-opt %s -p backend-allocate-registers | filecheck %s
//
// A result may take the register of an operand whose last use is the same instruction
// (operands are read before results are written): `muli` reuses its operand's register.

builtin.module {
  backend.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>] {
    backend.program @top on top {
      %0 = backend.entry_reg "r1" : !backend.reg<r1>
      %1 = backend.ld %0, 8 : (!backend.reg<r1>) -> !backend.reg
      %2 = backend.ld %0, 16 : (!backend.reg<r1>) -> !backend.reg
      %3 = backend.ld %0, 24 : (!backend.reg<r1>) -> !backend.reg
      %4 = backend.lsa core(0) sram, 0 : !backend.reg
      %5 = backend.muli %2, 512 : (!backend.reg) -> !backend.reg
      backend.dma %4, %1, %5 notify core(0) sram queue 0 : (!backend.reg, !backend.reg, !backend.reg) -> ()
      %6 = backend.lsa core(0) mpu_buffer, 0 : !backend.reg
      %7 = backend.li 65536 : !backend.reg
      backend.dma %6, %3, %7 notify core(0) mpu_buffer queue 0 : (!backend.reg, !backend.reg, !backend.reg) -> ()
      backend.dmawait
      backend.halt
    }
    backend.program @core0 on core(0) mem {sram = 7680 : i64, mpu_buffer = 65536 : i64} {
      %0 = backend.entry_reg "r1" : !backend.reg<r1>
      %1 = backend.ld %0, 8 : (!backend.reg<r1>) -> !backend.reg
      %2 = backend.ld %0, 16 : (!backend.reg<r1>) -> !backend.reg
      %3 = backend.ld %0, 32 : (!backend.reg<r1>) -> !backend.reg
      backend.qwait sram queue 0
      %4 = backend.lsa sram, 0 : !backend.reg
      backend.qwait mpu_buffer queue 0
      %5 = backend.lsa mpu_buffer, 0 : !backend.reg
      %6 = backend.li 256 : !backend.reg
      %7 = backend.li 128 : !backend.reg
      backend.mpu_ldw %5, %6, %7 : (!backend.reg, !backend.reg, !backend.reg) -> ()
      %8 = backend.lsa sram, 5120 : !backend.reg
      backend.mpu_mm %8, %4, %2, bf16 : (!backend.reg, !backend.reg, !backend.reg) -> ()
      %9 = backend.muli %2, 256 : (!backend.reg) -> !backend.reg
      backend.dma %3, %8, %9 : (!backend.reg, !backend.reg, !backend.reg) -> ()
      backend.dmawait
      backend.halt
    }
  }
}


// CHECK: builtin.module {
// CHECK-NEXT:   backend.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>] {
// CHECK-NEXT:     backend.program @top on top {
// CHECK-NEXT:       %0 = backend.entry_reg "r1" : !backend.reg<r1>
// CHECK-NEXT:       %1 = backend.ld %0, 8 : (!backend.reg<r1>) -> !backend.reg<r3>
// CHECK-NEXT:       %2 = backend.ld %0, 16 : (!backend.reg<r1>) -> !backend.reg<r4>
// CHECK-NEXT:       %3 = backend.ld %0, 24 : (!backend.reg<r1>) -> !backend.reg<r5>
// CHECK-NEXT:       %4 = backend.lsa core(0) sram, 0 : !backend.reg<r6>
// CHECK-NEXT:       %5 = backend.muli %2, 512 : (!backend.reg<r4>) -> !backend.reg<r4>
// CHECK-NEXT:       backend.dma %4, %1, %5 notify core(0) sram queue 0 : (!backend.reg<r6>, !backend.reg<r3>, !backend.reg<r4>) -> ()
// CHECK-NEXT:       %6 = backend.lsa core(0) mpu_buffer, 0 : !backend.reg<r3>
// CHECK-NEXT:       %7 = backend.li 65536 : !backend.reg<r4>
// CHECK-NEXT:       backend.dma %6, %3, %7 notify core(0) mpu_buffer queue 0 : (!backend.reg<r3>, !backend.reg<r5>, !backend.reg<r4>) -> ()
// CHECK-NEXT:       backend.dmawait
// CHECK-NEXT:       backend.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     backend.program @core0 on core(0) mem {sram = 7680 : i64, mpu_buffer = 65536 : i64} {
// CHECK-NEXT:       %0 = backend.entry_reg "r1" : !backend.reg<r1>
// CHECK-NEXT:       %1 = backend.ld %0, 8 : (!backend.reg<r1>) -> !backend.reg<r3>
// CHECK-NEXT:       %2 = backend.ld %0, 16 : (!backend.reg<r1>) -> !backend.reg<r3>
// CHECK-NEXT:       %3 = backend.ld %0, 32 : (!backend.reg<r1>) -> !backend.reg<r4>
// CHECK-NEXT:       backend.qwait sram queue 0
// CHECK-NEXT:       %4 = backend.lsa sram, 0 : !backend.reg<r5>
// CHECK-NEXT:       backend.qwait mpu_buffer queue 0
// CHECK-NEXT:       %5 = backend.lsa mpu_buffer, 0 : !backend.reg<r6>
// CHECK-NEXT:       %6 = backend.li 256 : !backend.reg<r7>
// CHECK-NEXT:       %7 = backend.li 128 : !backend.reg<r8>
// CHECK-NEXT:       backend.mpu_ldw %5, %6, %7 : (!backend.reg<r6>, !backend.reg<r7>, !backend.reg<r8>) -> ()
// CHECK-NEXT:       %8 = backend.lsa sram, 5120 : !backend.reg<r6>
// CHECK-NEXT:       backend.mpu_mm %8, %4, %2, bf16 : (!backend.reg<r6>, !backend.reg<r5>, !backend.reg<r3>) -> ()
// CHECK-NEXT:       %9 = backend.muli %2, 256 : (!backend.reg<r3>) -> !backend.reg<r3>
// CHECK-NEXT:       backend.dma %3, %8, %9 : (!backend.reg<r4>, !backend.reg<r6>, !backend.reg<r3>) -> ()
// CHECK-NEXT:       backend.dmawait
// CHECK-NEXT:       backend.halt
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
