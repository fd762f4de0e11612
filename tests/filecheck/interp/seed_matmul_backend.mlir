// The seed's matmul at the backend level: top DMAs a (2 of 10 rows) and b to core 0, which
// multiplies and copies the rows out; the 8 rows past the runtime extent stay zero.
// RUN: %python -m legato.tools.run %s -a 'ones@2x256' -a ones -a zeros --print 2 --stats | filecheck %s

// CHECK:      %{{arg2|out}} : tensor<[10, 128], bf16, shared_dram> = {{\[\[}}256., 256., 256., ..., 256., 256., 256.],
// CHECK-NEXT: [256., 256., 256., ..., 256., 256., 256.],
// CHECK-NEXT: [  0.,   0.,   0., ...,   0.,   0.,   0.],
// CHECK:      // backend level, kernel simple_matmul: {{[0-9]+}} ops, 2 transfers
// CHECK:      //   top:
// CHECK:      //   core 0:

backend.kernel @simple_matmul args [#core.arg<0, [?10, 256], bf16, shared_dram, read>, #core.arg<1, [256, 128], bf16, mpu_dram, read>, #core.arg<2, [10, 128], bf16, shared_dram, write>] {
  backend.program @top on top {
    %t = backend.entry_reg "r1" : !backend.reg<r1>
    %a = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg
    %n = backend.ld %t, 16 : (!backend.reg<r1>) -> !backend.reg
    %b = backend.ld %t, 24 : (!backend.reg<r1>) -> !backend.reg
    %rowbytes = backend.li 512 : !backend.reg
    %len = backend.mul %n, %rowbytes : (!backend.reg, !backend.reg) -> !backend.reg
    %da = backend.lsa core(0) sram, 0 : !backend.reg
    backend.dma %da, %a, %len notify core(0) sram queue 0 : (!backend.reg, !backend.reg, !backend.reg) -> ()
    %db = backend.lsa core(0) mpu_buffer, 0 : !backend.reg
    %blen = backend.li 65536 : !backend.reg
    backend.dma %db, %b, %blen notify core(0) mpu_buffer queue 0 : (!backend.reg, !backend.reg, !backend.reg) -> ()
    backend.dmawait
    backend.halt
  }
  backend.program @core0 on core(0) {
    %t = backend.entry_reg "r1" : !backend.reg<r1>
    %n = backend.ld %t, 16 : (!backend.reg<r1>) -> !backend.reg
    %out = backend.ld %t, 32 : (!backend.reg<r1>) -> !backend.reg
    backend.qwait sram queue 0
    backend.qwait mpu_buffer queue 0
    %w = backend.lsa mpu_buffer, 0 : !backend.reg
    %k = backend.li 256 : !backend.reg
    %nn = backend.li 128 : !backend.reg
    backend.mpu_ldw %w, %k, %nn : (!backend.reg, !backend.reg, !backend.reg) -> ()
    %src = backend.lsa sram, 0 : !backend.reg
    %dst = backend.lsa sram, 5120 : !backend.reg
    backend.mpu_mm %dst, %src, %n, bf16 : (!backend.reg, !backend.reg, !backend.reg) -> ()
    %ob = backend.li 256 : !backend.reg
    %olen = backend.mul %n, %ob : (!backend.reg, !backend.reg) -> !backend.reg
    backend.dma %out, %dst, %olen : (!backend.reg, !backend.reg, !backend.reg) -> ()
    backend.dmawait
    backend.halt
  }
}
