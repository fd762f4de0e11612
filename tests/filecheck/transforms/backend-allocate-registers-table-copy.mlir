// RUN: legato-opt %s -p backend-allocate-registers | filecheck %s
//
// 31 argument addresses loaded from the Instruction Table are live at once, more than the 29
// allocatable registers. The first table value to split is spilled like a computed value (its
// store waits for its load while the program waits for the others anyway); at the second the
// program copies the table into its spill area with one DMA at its start, every table load
// reads the copy, and split table values are re-loaded from the copy (`lsa` + `ld`, no store)
// instead of each spill waiting a DRAM latency in turn.
builtin.module {
  backend.kernel @k args [#core.arg<0, [16], f32, shared_dram, readwrite>, #core.arg<1, [16], f32, shared_dram, readwrite>, #core.arg<2, [16], f32, shared_dram, readwrite>, #core.arg<3, [16], f32, shared_dram, readwrite>, #core.arg<4, [16], f32, shared_dram, readwrite>, #core.arg<5, [16], f32, shared_dram, readwrite>, #core.arg<6, [16], f32, shared_dram, readwrite>, #core.arg<7, [16], f32, shared_dram, readwrite>, #core.arg<8, [16], f32, shared_dram, readwrite>, #core.arg<9, [16], f32, shared_dram, readwrite>, #core.arg<10, [16], f32, shared_dram, readwrite>, #core.arg<11, [16], f32, shared_dram, readwrite>, #core.arg<12, [16], f32, shared_dram, readwrite>, #core.arg<13, [16], f32, shared_dram, readwrite>, #core.arg<14, [16], f32, shared_dram, readwrite>, #core.arg<15, [16], f32, shared_dram, readwrite>, #core.arg<16, [16], f32, shared_dram, readwrite>, #core.arg<17, [16], f32, shared_dram, readwrite>, #core.arg<18, [16], f32, shared_dram, readwrite>, #core.arg<19, [16], f32, shared_dram, readwrite>, #core.arg<20, [16], f32, shared_dram, readwrite>, #core.arg<21, [16], f32, shared_dram, readwrite>, #core.arg<22, [16], f32, shared_dram, readwrite>, #core.arg<23, [16], f32, shared_dram, readwrite>, #core.arg<24, [16], f32, shared_dram, readwrite>, #core.arg<25, [16], f32, shared_dram, readwrite>, #core.arg<26, [16], f32, shared_dram, readwrite>, #core.arg<27, [16], f32, shared_dram, readwrite>, #core.arg<28, [16], f32, shared_dram, readwrite>, #core.arg<29, [16], f32, shared_dram, readwrite>, #core.arg<30, [16], f32, shared_dram, readwrite>] {
    backend.program @core0 on core(0) mem {sram = 4096 : i64} {
      %t = backend.entry_reg "r1" : !backend.reg<r1>
      %a0 = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg
      %a1 = backend.ld %t, 16 : (!backend.reg<r1>) -> !backend.reg
      %a2 = backend.ld %t, 24 : (!backend.reg<r1>) -> !backend.reg
      %a3 = backend.ld %t, 32 : (!backend.reg<r1>) -> !backend.reg
      %a4 = backend.ld %t, 40 : (!backend.reg<r1>) -> !backend.reg
      %a5 = backend.ld %t, 48 : (!backend.reg<r1>) -> !backend.reg
      %a6 = backend.ld %t, 56 : (!backend.reg<r1>) -> !backend.reg
      %a7 = backend.ld %t, 64 : (!backend.reg<r1>) -> !backend.reg
      %a8 = backend.ld %t, 72 : (!backend.reg<r1>) -> !backend.reg
      %a9 = backend.ld %t, 80 : (!backend.reg<r1>) -> !backend.reg
      %a10 = backend.ld %t, 88 : (!backend.reg<r1>) -> !backend.reg
      %a11 = backend.ld %t, 96 : (!backend.reg<r1>) -> !backend.reg
      %a12 = backend.ld %t, 104 : (!backend.reg<r1>) -> !backend.reg
      %a13 = backend.ld %t, 112 : (!backend.reg<r1>) -> !backend.reg
      %a14 = backend.ld %t, 120 : (!backend.reg<r1>) -> !backend.reg
      %a15 = backend.ld %t, 128 : (!backend.reg<r1>) -> !backend.reg
      %a16 = backend.ld %t, 136 : (!backend.reg<r1>) -> !backend.reg
      %a17 = backend.ld %t, 144 : (!backend.reg<r1>) -> !backend.reg
      %a18 = backend.ld %t, 152 : (!backend.reg<r1>) -> !backend.reg
      %a19 = backend.ld %t, 160 : (!backend.reg<r1>) -> !backend.reg
      %a20 = backend.ld %t, 168 : (!backend.reg<r1>) -> !backend.reg
      %a21 = backend.ld %t, 176 : (!backend.reg<r1>) -> !backend.reg
      %a22 = backend.ld %t, 184 : (!backend.reg<r1>) -> !backend.reg
      %a23 = backend.ld %t, 192 : (!backend.reg<r1>) -> !backend.reg
      %a24 = backend.ld %t, 200 : (!backend.reg<r1>) -> !backend.reg
      %a25 = backend.ld %t, 208 : (!backend.reg<r1>) -> !backend.reg
      %a26 = backend.ld %t, 216 : (!backend.reg<r1>) -> !backend.reg
      %a27 = backend.ld %t, 224 : (!backend.reg<r1>) -> !backend.reg
      %a28 = backend.ld %t, 232 : (!backend.reg<r1>) -> !backend.reg
      %a29 = backend.ld %t, 240 : (!backend.reg<r1>) -> !backend.reg
      %a30 = backend.ld %t, 248 : (!backend.reg<r1>) -> !backend.reg
      %c0 = backend.li 0 : !backend.reg
      %s0 = backend.add %a0, %c0 : (!backend.reg, !backend.reg) -> !backend.reg
      %s1 = backend.add %s0, %a1 : (!backend.reg, !backend.reg) -> !backend.reg
      %s2 = backend.add %s1, %a2 : (!backend.reg, !backend.reg) -> !backend.reg
      %s3 = backend.add %s2, %a3 : (!backend.reg, !backend.reg) -> !backend.reg
      %s4 = backend.add %s3, %a4 : (!backend.reg, !backend.reg) -> !backend.reg
      %s5 = backend.add %s4, %a5 : (!backend.reg, !backend.reg) -> !backend.reg
      %s6 = backend.add %s5, %a6 : (!backend.reg, !backend.reg) -> !backend.reg
      %s7 = backend.add %s6, %a7 : (!backend.reg, !backend.reg) -> !backend.reg
      %s8 = backend.add %s7, %a8 : (!backend.reg, !backend.reg) -> !backend.reg
      %s9 = backend.add %s8, %a9 : (!backend.reg, !backend.reg) -> !backend.reg
      %s10 = backend.add %s9, %a10 : (!backend.reg, !backend.reg) -> !backend.reg
      %s11 = backend.add %s10, %a11 : (!backend.reg, !backend.reg) -> !backend.reg
      %s12 = backend.add %s11, %a12 : (!backend.reg, !backend.reg) -> !backend.reg
      %s13 = backend.add %s12, %a13 : (!backend.reg, !backend.reg) -> !backend.reg
      %s14 = backend.add %s13, %a14 : (!backend.reg, !backend.reg) -> !backend.reg
      %s15 = backend.add %s14, %a15 : (!backend.reg, !backend.reg) -> !backend.reg
      %s16 = backend.add %s15, %a16 : (!backend.reg, !backend.reg) -> !backend.reg
      %s17 = backend.add %s16, %a17 : (!backend.reg, !backend.reg) -> !backend.reg
      %s18 = backend.add %s17, %a18 : (!backend.reg, !backend.reg) -> !backend.reg
      %s19 = backend.add %s18, %a19 : (!backend.reg, !backend.reg) -> !backend.reg
      %s20 = backend.add %s19, %a20 : (!backend.reg, !backend.reg) -> !backend.reg
      %s21 = backend.add %s20, %a21 : (!backend.reg, !backend.reg) -> !backend.reg
      %s22 = backend.add %s21, %a22 : (!backend.reg, !backend.reg) -> !backend.reg
      %s23 = backend.add %s22, %a23 : (!backend.reg, !backend.reg) -> !backend.reg
      %s24 = backend.add %s23, %a24 : (!backend.reg, !backend.reg) -> !backend.reg
      %s25 = backend.add %s24, %a25 : (!backend.reg, !backend.reg) -> !backend.reg
      %s26 = backend.add %s25, %a26 : (!backend.reg, !backend.reg) -> !backend.reg
      %s27 = backend.add %s26, %a27 : (!backend.reg, !backend.reg) -> !backend.reg
      %s28 = backend.add %s27, %a28 : (!backend.reg, !backend.reg) -> !backend.reg
      %s29 = backend.add %s28, %a29 : (!backend.reg, !backend.reg) -> !backend.reg
      %s30 = backend.add %s29, %a30 : (!backend.reg, !backend.reg) -> !backend.reg
      %buf = backend.lsa sram, 64 : !backend.reg
      backend.st %s30, %buf, 0 : (!backend.reg, !backend.reg) -> ()
      backend.halt
    }
  }
}

// One spill slot (4096) and the table's 256 bytes (words 0..31) right after it:
// CHECK:      backend.program @core0 on core(0) mem {sram = 4360 : i64} {
// CHECK-NEXT: %[[T:.*]] = backend.entry_reg "r1"
// CHECK-NEXT: %[[C:.*]] = backend.lsa sram, 4104 : !backend.reg<[[RC:r[0-9]+]]>
// CHECK-NEXT: %[[N:.*]] = backend.li 256 : !backend.reg<[[RN:r[0-9]+]]>
// CHECK-NEXT: backend.dma %[[C]], %[[T]], %[[N]] : (!backend.reg<[[RC]]>, !backend.reg<r1>, !backend.reg<[[RN]]>) -> ()
// CHECK-NEXT: backend.dmawait
// Every table load reads the copy; none reads r1 any more:
// CHECK-NEXT: %a0 = backend.ld %[[C]], 8 : (!backend.reg<[[RC]]>)
// CHECK-NOT:  backend.reg<r1>) -> !backend.reg
// The one value spilled before the copy existed: stored after its load, reloaded before its use:
// CHECK:      %a27 = backend.ld %[[C]], 224
// CHECK-NEXT: %[[S:.*]] = backend.lsa sram, 4096
// CHECK-NEXT: backend.st %a27, %[[S]], 0
// Values split after it are re-loaded from the copy before their use, never stored:
// CHECK:      backend.lsa sram, 4096
// CHECK-NEXT: %a27_1 = backend.ld %{{.*}}, 0
// CHECK-NEXT: backend.add %{{.*}}, %a27_1
// CHECK-NEXT: %[[R:.*]] = backend.lsa sram, 4104
// CHECK-NEXT: %a28 = backend.ld %[[R]], 232
// CHECK-NEXT: backend.add %{{.*}}, %a28
// CHECK-NOT:  backend.st %a
// CHECK:      backend.halt
