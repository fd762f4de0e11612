// RUN: not legato-opt %s -p convert-legato-to-core 2>&1 | filecheck %s
// RUN: not legato-opt %s -p 'convert-legato-to-core{target="bertha-evt1"}' 2>&1 | filecheck %s --check-prefix=EVT1

// EVT0 has 32 cores: core(40) does not exist there (EVT1 has 64, so the error is another one).
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[4, 8], bf16, shared_dram>) {
    legato.on core(40) {
      %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4, 8], bf16, shared_dram> -> !legato.tensor<[4, 8], bf16, sram>
      legato.yield
    }
    legato.return
  }
}
// CHECK: error: core(40) does not exist: target 'bertha' has 32 cores (indices 0..31)
// EVT1: error: this receive on core(40) sram queue 0 has no matching request_load
