// RUN: legato-opt %s -t asm | filecheck %s
// RUN: legato-opt %s -t bin -o %t.elf && %python -c "import sys; d = open(sys.argv[1], 'rb').read(); print(d[:4], len(d) > 512)" %t.elf | filecheck %s --check-prefix=BIN

// -t asm and -t bin lower a legato-level module all the way (model: the default EVT0).
builtin.module {
  legato.kernel @copy(%a : !legato.tensor<[4, 8], bf16, shared_dram>, %o : !legato.tensor<[4, 8], bf16, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(2) memory sram queue 3 : !legato.tensor<[4, 8], bf16, shared_dram>
      legato.yield
    }
    legato.on core(2) {
      %x = legato.receive %a queue 3 memory sram : !legato.tensor<[4, 8], bf16, shared_dram> -> !legato.tensor<[4, 8], bf16, sram>
      legato.memcpy %o, %x : !legato.tensor<[4, 8], bf16, shared_dram>, !legato.tensor<[4, 8], bf16, sram>
      legato.yield
    }
    legato.return
  }
}
// CHECK:      .kernel copy
// CHECK-NEXT: .program top on top
// CHECK-NEXT:     ld r3, 8(r1)
// CHECK-NEXT:     lsa r4, core2.sram, 0
// CHECK-NEXT:     li r5, 64
// CHECK-NEXT:     dma r4, r3, r5, core2.sram.q3
// CHECK-NEXT:     dmawait
// CHECK-NEXT:     halt
// CHECK-NEXT: .program core2 on core(2)
// CHECK-NEXT: .mem sram 64
// CHECK:          qwait sram.q3
// CHECK-NEXT:     lsa [[X:r[0-9]+]], sram, 0
// CHECK-NEXT:     li [[N:r[0-9]+]], 64
// CHECK-NEXT:     dma [[O:r[0-9]+]], [[X]], [[N]]
// CHECK-NEXT:     dmawait
// CHECK-NEXT:     halt

// BIN: b'\x7fELF' True
