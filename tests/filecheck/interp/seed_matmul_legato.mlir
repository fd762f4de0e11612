// The seed's matmul at the legato level: top DMAs a (2 of 10 rows) and b to core 0, which
// multiplies and copies the rows out; the 8 rows past the runtime extent stay zero.
// RUN: %python -m legato.tools.run %s -a 'ones@2x256' -a ones -a zeros --print 2 --stats | filecheck %s

// CHECK:      %{{arg2|out}} : tensor<[10, 128], bf16, shared_dram> = {{\[\[}}256., 256., 256., ..., 256., 256., 256.],
// CHECK-NEXT: [256., 256., 256., ..., 256., 256., 256.],
// CHECK-NEXT: [  0.,   0.,   0., ...,   0.,   0.,   0.],
// CHECK:      // legato level, kernel simple_matmul: {{[0-9]+}} ops, 2 transfers
// CHECK:      //   top:
// CHECK:      //   core 0:

builtin.module {
legato.kernel @simple_matmul(%a : !legato.tensor<[?10, 256], bf16, shared_dram>,
                             %b : !legato.tensor<[256, 128], bf16, mpu_dram>,
                             %out : !legato.tensor<[10, 128], bf16, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?10, 256], bf16, shared_dram>
    legato.request_load %b to core(0) memory mpu_buffer queue 0 : !legato.tensor<[256, 128], bf16, mpu_dram>
    legato.yield
  }
  legato.on core(0) {
    %la = legato.receive %a queue 0 memory sram : !legato.tensor<[?10, 256], bf16, shared_dram> -> !legato.tensor<[?10, 256], bf16, sram>
    %lb = legato.receive_type queue 0 memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_weight>
    %r = legato.matmul %la, %lb : !legato.tensor<[?10, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_weight> -> !legato.tensor<[?10, 128], bf16, sram>
    legato.memcpy %out, %r : !legato.tensor<[10, 128], bf16, shared_dram>, !legato.tensor<[?10, 128], bf16, sram>
    legato.yield
  }
  legato.return
}
}
