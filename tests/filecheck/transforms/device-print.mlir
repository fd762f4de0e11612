// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s --check-prefix=CORE
// RUN: legato-opt %s -t asm | filecheck %s --check-prefix=ASM
// RUN: %python -m legato.tools.run %s --level legato -a 'arange@3x8' -a zeros --print out | filecheck %s --check-prefix=OUT
// RUN: legato-opt %s --print-debuginfo -p convert-legato-to-core | %python -m legato.tools.run - -a 'arange@3x8' -a zeros --print out | filecheck %s --check-prefix=OUT
// RUN: legato-opt %s --print-debuginfo -p convert-legato-to-core,core-plan-memory,convert-core-to-backend,backend-allocate-registers | %python -m legato.tools.run - -a 'arange@3x8' -a zeros --print out | filecheck %s --check-prefix=OUT
// RUN: legato-opt %s -t bin -o %t.elf && %python -m legato.tools.run %t.elf -a 'arange@3x8' -a zeros --print out | filecheck %s --check-prefix=EMU
// RUN: not %python -m legato.tools.run %s -a '200.0@3x8' -a zeros 2>&1 | filecheck %s --check-prefix=FAIL
// RUN: not %python -m legato.tools.run %t.elf -a '200.0@3x8' -a zeros 2>&1 | filecheck %s --check-prefix=FAIL
//
// legato.device_print / legato.device_assert at every level: a print of an index and a tensor
// with a dynamic dim, a print of its message alone, a print of a strided slice (copied to a
// contiguous buffer first: dbg.print reads an address and an element count), an assert of a
// mask. The core ops, the dbg instructions (one per value, numbered per kernel), the same
// records at the legato, core and backend levels and on the emulator (with its cycle), and a
// failing assert naming its line and the failing elements.

// CORE:      core.program @core1 on core(1)
// CORE:        %[[N:.*]] = core.dim %{{.*}}, 0 : index
// CORE:        %[[X:.*]] = core.alloc sram dims(%[[N]]) {buffer = "xfer0"} : !core.buf<[?4, 8], f32, sram>
// CORE-NEXT:   core.print "rows"(%[[N]], %[[X]] : index, !core.buf<[?4, 8], f32, sram>)
// CORE-NEXT:   core.print "reached"
// CORE-NEXT:   %[[V:.*]] = core.subview %[[X]] [0, 2] [2, 4] : !core.buf<[?4, 8], f32, sram> -> !core.buf<[2, 4], f32, sram>
// CORE-NEXT:   %[[C:.*]] = core.alloc sram : !core.buf<[2, 4], f32, sram>
// CORE-NEXT:   core.dma %[[V]] to %[[C]]
// CORE-NEXT:   core.print "slice"(%[[C]] : !core.buf<[2, 4], f32, sram>)
// CORE:        core.vpu_binary lt %[[X]], %{{.*}} to %[[M:.*]] :
// CORE-NEXT:   core.assert %[[M]], "x < 100" : !core.buf<[?4, 8], f32, sram>

// ASM:      .program core1 on core(1)
// ASM:        ld [[N:r[0-9]+]], 16(r1)
// ASM:        lsa [[X:r[0-9]+]], sram, 0
// ASM-NEXT:   li [[Z:r[0-9]+]], 0
// ASM-NEXT:   dbg.print [[N]], [[Z]], 0
// ASM-NEXT:   muli [[CNT:r[0-9]+]], [[N]], 8
// ASM-NEXT:   dbg.print [[X]], [[CNT]], 1
// ASM-NEXT:   li [[Z2:r[0-9]+]], 0
// ASM-NEXT:   dbg.print [[Z2]], [[Z2]], 2
// ASM:        dma2d [[S:r[0-9]+]],
// ASM-NEXT:   li [[EIGHT:r[0-9]+]], 8
// ASM-NEXT:   dbg.print [[S]], [[EIGHT]], 3
// ASM:        vpu.lt [[M:r[0-9]+]], [[X]],
// ASM-NEXT:   muli [[CM:r[0-9]+]], [[N]], 8
// ASM-NEXT:   dbg.assert [[M]], [[CM]], 4

// OUT:      [core1 (core 1)] k.py:10: rows 3 {{\[\[}} 0.  1.  2.  3.  4.  5.  6.  7.] [ 8.  9. 10. 11. 12. 13. 14. 15.] [16. 17. 18. 19. 20. 21. 22. 23.]]
// OUT-NEXT: [core1 (core 1)] k.py:11: reached
// OUT-NEXT: [core1 (core 1)] k.py:13: slice {{\[\[}} 2.  3.  4.  5.] [10. 11. 12. 13.]]
// OUT-NEXT: %out : tensor<[4, 8], f32, shared_dram> = {{\[\[}} 0.,  1.,

// EMU:      [core1 (core 1) cycle {{[0-9]+}}] k.py:10: rows 3 {{\[\[}} 0.  1.  2.  3.  4.  5.  6.  7.] [ 8.  9. 10. 11. 12. 13. 14. 15.] [16. 17. 18. 19. 20. 21. 22. 23.]]
// EMU-NEXT: [core1 (core 1) cycle {{[0-9]+}}] k.py:11: reached
// EMU-NEXT: [core1 (core 1) cycle {{[0-9]+}}] k.py:13: slice {{\[\[}} 2.  3.  4.  5.] [10. 11. 12. 13.]]

// FAIL: device_assert failed at k.py:16: x < 100 (core1 (core 1){{.*}}): 24 of 24 elements of the condition are false, at (0, 0), (0, 1),

builtin.module {
  legato.kernel @dbg(%x : !legato.tensor<[?4, 8], f32, shared_dram>, %out : !legato.tensor<[4, 8], f32, shared_dram>) attributes {target = "bertha"} {
    legato.on top {
      legato.request_load %x to core(1) memory sram queue 0 : !legato.tensor<[?4, 8], f32, shared_dram>
      legato.yield
    }
    legato.on core(1) {
      %xs = legato.receive %x queue 0 memory sram : !legato.tensor<[?4, 8], f32, shared_dram> -> !legato.tensor<[?4, 8], f32, sram>
      %n = legato.dim %xs, 0 : !legato.tensor<[?4, 8], f32, sram>
      legato.device_print "rows" (%n, %xs : index, !legato.tensor<[?4, 8], f32, sram>) loc("k.py":10:7)
      legato.device_print "reached" loc("k.py":11:7)
      %s = legato.slice %xs [0, 2] [2, 4] [1, 1] : !legato.tensor<[?4, 8], f32, sram> -> !legato.tensor<[2, 4], f32, sram>
      legato.device_print "slice" (%s : !legato.tensor<[2, 4], f32, sram>) loc("k.py":13:7)
      %z = legato.constant 100.0 : !legato.tensor<[], f32, sram>
      %c = legato.lt %xs, %z : !legato.tensor<[?4, 8], f32, sram>, !legato.tensor<[], f32, sram> -> !legato.tensor<[?4, 8], f32, sram>
      legato.device_assert %c, "x < 100" : !legato.tensor<[?4, 8], f32, sram> loc("k.py":16:7)
      legato.memcpy %out, %xs : !legato.tensor<[4, 8], f32, shared_dram>, !legato.tensor<[?4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}
