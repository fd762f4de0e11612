// RUN: not legato-opt %s -p convert-legato-to-core 2>&1 | filecheck %s

builtin.module {
  legato.kernel @k(%a : !legato.tensor<[4, 8], bf16, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(1) memory sram queue 0 : !legato.tensor<[4, 8], bf16, shared_dram>
      legato.yield
    }
    legato.return
  }
}
// CHECK: error: this request_load to core(1) sram queue 0 is never received (1 sent, 0 received)
