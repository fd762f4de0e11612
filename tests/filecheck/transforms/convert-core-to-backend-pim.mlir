// RUN: legato-opt %s -p convert-core-to-backend{target=bertha-pim} | filecheck %s
// RUN: legato-opt %s -p convert-core-to-backend{target=bertha-pim},backend-allocate-registers -t asm | filecheck %s --check-prefix=ASM

// core.pim_gemv lowers to one pim.gemv per operation of the weight's PIM layout (docs/pim.md):
// x[4500] @ W[4500, 20] on the 8 channels of bertha-pim is 3 columns per unit (unit 6 has
// columns 18, 19 and one padding column; unit 7 only padding, so no operation), two K tiles
// (4096 + 404 rows): 14 operations, tile by tile, the channels together; the second tile's
// accumulate. A unit's region starts 256 bytes after the previous unit's, its result 3 * 4
// bytes after the previous one's; the second tile's group starts after the first's 8 * 96
// blocks (4096 * 3 * 2 bytes = 96 blocks per unit), and reads x from byte 4096 * 2.

builtin.module {
  core.kernel @pim args [#core.arg<0, [4500, 20], bf16, pim_dram, read>] {
    core.program @core0 on core(0) {
      %w = core.arg 0 : !core.buf<[4500, 20], bf16, pim_dram>
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[4500], bf16, sram>
      %y = core.alloc sram {offset = 16384 : i64} : !core.buf<[24], f32, sram>
      core.pim_gemv %x, %w, %y : !core.buf<[4500], bf16, sram>, !core.buf<[4500, 20], bf16, pim_dram>, !core.buf<[24], f32, sram>
      core.dma_wait
      core.end
    }
  }
}

// CHECK:      %[[W:.*]] = backend.ld %{{.*}}, 8
// CHECK:      %[[X:.*]] = backend.lsa sram, 0
// CHECK:      %[[Y:.*]] = backend.lsa sram, 16384
// CHECK:      %[[K:.*]] = backend.li 4096
// CHECK:      %[[HI:.*]] = backend.shli %[[K]], 32
// CHECK:      %[[S:.*]] = backend.addi %[[HI]], 3
// CHECK:      backend.pim_gemv %[[Y]], %[[X]], %[[W]], %[[S]] :
// CHECK:      %[[W1:.*]] = backend.addi %[[W]], 256
// CHECK:      %[[Y1:.*]] = backend.addi %[[Y]], 12
// CHECK:      backend.pim_gemv %[[Y1]], %[[X]], %[[W1]], %[[S]] :
// CHECK-COUNT-5: backend.pim_gemv {{.*}}, %[[S]] :
// CHECK:      %[[W8:.*]] = backend.addi %[[W]], 196608
// CHECK:      %[[X8:.*]] = backend.addi %[[X]], 8192
// CHECK:      backend.pim_gemv %[[Y]], %[[X8]], %[[W8]], %{{.*}} acc :
// CHECK-COUNT-6: backend.pim_gemv {{.*}} acc :
// CHECK-NOT:  backend.pim_gemv
// CHECK:      backend.dmawait

// ASM-LABEL: .program core0 on core(0)
// ASM:       pim.gemv r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}{{$}}
// ASM-COUNT-6: pim.gemv r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}{{$}}
// ASM-COUNT-7: pim.gemv {{.*}}, acc
// ASM-NOT:   pim.gemv
