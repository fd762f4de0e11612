// RUN: legato-opt %s -p backend-allocate-registers | filecheck %s
//
// 31 computed values and two constants are live at once, more than the 29 allocatable registers
// (r3..r31). The constants are rematerialized first (an `li`/`lsa` re-emitted before each use),
// then computed values are spilled: stored after their definition to 8-byte slots right above
// the program's planned sram (4096 bytes here) and reloaded before each use; the slots are
// added to the program's `mem`.
builtin.module {
  backend.kernel @k args [#core.arg<0, [16], f32, shared_dram, readwrite>] {
    backend.program @core0 on core(0) mem {sram = 4096 : i64} {
      %t = backend.entry_reg "r1" : !backend.reg<r1>
      %base = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg
      %c7 = backend.li 7 : !backend.reg
      %buf = backend.lsa sram, 64 : !backend.reg
      %v0 = backend.addi %base, 0 : (!backend.reg) -> !backend.reg
      %v1 = backend.addi %base, 1 : (!backend.reg) -> !backend.reg
      %v2 = backend.addi %base, 2 : (!backend.reg) -> !backend.reg
      %v3 = backend.addi %base, 3 : (!backend.reg) -> !backend.reg
      %v4 = backend.addi %base, 4 : (!backend.reg) -> !backend.reg
      %v5 = backend.addi %base, 5 : (!backend.reg) -> !backend.reg
      %v6 = backend.addi %base, 6 : (!backend.reg) -> !backend.reg
      %v7 = backend.addi %base, 7 : (!backend.reg) -> !backend.reg
      %v8 = backend.addi %base, 8 : (!backend.reg) -> !backend.reg
      %v9 = backend.addi %base, 9 : (!backend.reg) -> !backend.reg
      %v10 = backend.addi %base, 10 : (!backend.reg) -> !backend.reg
      %v11 = backend.addi %base, 11 : (!backend.reg) -> !backend.reg
      %v12 = backend.addi %base, 12 : (!backend.reg) -> !backend.reg
      %v13 = backend.addi %base, 13 : (!backend.reg) -> !backend.reg
      %v14 = backend.addi %base, 14 : (!backend.reg) -> !backend.reg
      %v15 = backend.addi %base, 15 : (!backend.reg) -> !backend.reg
      %v16 = backend.addi %base, 16 : (!backend.reg) -> !backend.reg
      %v17 = backend.addi %base, 17 : (!backend.reg) -> !backend.reg
      %v18 = backend.addi %base, 18 : (!backend.reg) -> !backend.reg
      %v19 = backend.addi %base, 19 : (!backend.reg) -> !backend.reg
      %v20 = backend.addi %base, 20 : (!backend.reg) -> !backend.reg
      %v21 = backend.addi %base, 21 : (!backend.reg) -> !backend.reg
      %v22 = backend.addi %base, 22 : (!backend.reg) -> !backend.reg
      %v23 = backend.addi %base, 23 : (!backend.reg) -> !backend.reg
      %v24 = backend.addi %base, 24 : (!backend.reg) -> !backend.reg
      %v25 = backend.addi %base, 25 : (!backend.reg) -> !backend.reg
      %v26 = backend.addi %base, 26 : (!backend.reg) -> !backend.reg
      %v27 = backend.addi %base, 27 : (!backend.reg) -> !backend.reg
      %v28 = backend.addi %base, 28 : (!backend.reg) -> !backend.reg
      %v29 = backend.addi %base, 29 : (!backend.reg) -> !backend.reg
      %v30 = backend.addi %base, 30 : (!backend.reg) -> !backend.reg
      %s0 = backend.add %v0, %c7 : (!backend.reg, !backend.reg) -> !backend.reg
      %s1 = backend.add %s0, %v1 : (!backend.reg, !backend.reg) -> !backend.reg
      %s2 = backend.add %s1, %v2 : (!backend.reg, !backend.reg) -> !backend.reg
      %s3 = backend.add %s2, %v3 : (!backend.reg, !backend.reg) -> !backend.reg
      %s4 = backend.add %s3, %v4 : (!backend.reg, !backend.reg) -> !backend.reg
      %s5 = backend.add %s4, %v5 : (!backend.reg, !backend.reg) -> !backend.reg
      %s6 = backend.add %s5, %v6 : (!backend.reg, !backend.reg) -> !backend.reg
      %s7 = backend.add %s6, %v7 : (!backend.reg, !backend.reg) -> !backend.reg
      %s8 = backend.add %s7, %v8 : (!backend.reg, !backend.reg) -> !backend.reg
      %s9 = backend.add %s8, %v9 : (!backend.reg, !backend.reg) -> !backend.reg
      %s10 = backend.add %s9, %v10 : (!backend.reg, !backend.reg) -> !backend.reg
      %s11 = backend.add %s10, %v11 : (!backend.reg, !backend.reg) -> !backend.reg
      %s12 = backend.add %s11, %v12 : (!backend.reg, !backend.reg) -> !backend.reg
      %s13 = backend.add %s12, %v13 : (!backend.reg, !backend.reg) -> !backend.reg
      %s14 = backend.add %s13, %v14 : (!backend.reg, !backend.reg) -> !backend.reg
      %s15 = backend.add %s14, %v15 : (!backend.reg, !backend.reg) -> !backend.reg
      %s16 = backend.add %s15, %v16 : (!backend.reg, !backend.reg) -> !backend.reg
      %s17 = backend.add %s16, %v17 : (!backend.reg, !backend.reg) -> !backend.reg
      %s18 = backend.add %s17, %v18 : (!backend.reg, !backend.reg) -> !backend.reg
      %s19 = backend.add %s18, %v19 : (!backend.reg, !backend.reg) -> !backend.reg
      %s20 = backend.add %s19, %v20 : (!backend.reg, !backend.reg) -> !backend.reg
      %s21 = backend.add %s20, %v21 : (!backend.reg, !backend.reg) -> !backend.reg
      %s22 = backend.add %s21, %v22 : (!backend.reg, !backend.reg) -> !backend.reg
      %s23 = backend.add %s22, %v23 : (!backend.reg, !backend.reg) -> !backend.reg
      %s24 = backend.add %s23, %v24 : (!backend.reg, !backend.reg) -> !backend.reg
      %s25 = backend.add %s24, %v25 : (!backend.reg, !backend.reg) -> !backend.reg
      %s26 = backend.add %s25, %v26 : (!backend.reg, !backend.reg) -> !backend.reg
      %s27 = backend.add %s26, %v27 : (!backend.reg, !backend.reg) -> !backend.reg
      %s28 = backend.add %s27, %v28 : (!backend.reg, !backend.reg) -> !backend.reg
      %s29 = backend.add %s28, %v29 : (!backend.reg, !backend.reg) -> !backend.reg
      %s30 = backend.add %s29, %v30 : (!backend.reg, !backend.reg) -> !backend.reg
      backend.st %s30, %buf, 0 : (!backend.reg, !backend.reg) -> ()
      backend.st %base, %buf, 8 : (!backend.reg, !backend.reg) -> ()
      backend.halt
    }
  }
}

// CHECK:      backend.program @core0 on core(0) mem {sram = 4128 : i64} {
// %base is stored right after its definition; its uses after the pressure point reload it:
// CHECK:      %base = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg<[[B:r[0-9]+]]>
// CHECK-NEXT: %[[A:.*]] = backend.lsa sram, [[SB:[0-9]+]] : !backend.reg<[[RA:r[0-9]+]]>
// CHECK-NEXT: backend.st %base, %[[A]], 0 : (!backend.reg<[[B]]>, !backend.reg<[[RA]]>) -> ()
// Computed values spilled to slots right above the 4096 planned bytes:
// CHECK:      backend.st %v26, %{{.*}}, 0
// CHECK:      backend.st %v27, %{{.*}}, 0
// CHECK:      backend.lsa sram, [[SB]]
// CHECK-NEXT: %base_1 = backend.ld
// The constant is re-emitted right before its (only) use instead of living through the block:
// CHECK:      %c7 = backend.li 7
// CHECK-NEXT: %s0 = backend.add %v0, %c7
// CHECK:      backend.lsa sram, 4096 :
// CHECK-NEXT: %v26_1 = backend.ld
// CHECK-NEXT: %s26 = backend.add %s25, %v26_1
// CHECK:      %buf = backend.lsa sram, 64
// CHECK-NEXT: backend.st %s30, %buf, 0
// CHECK-NEXT: %buf_1 = backend.lsa sram, 64
// CHECK-NEXT: backend.lsa sram, [[SB]]
// CHECK-NEXT: %base_2 = backend.ld
// CHECK-NEXT: backend.st %base_2, %buf_1, 8
// CHECK-NOT:  backend.reg>
