// RUN: not legato-opt %s --split-input-file -p convert-legato-to-core 2>&1 | filecheck %s

// A receive without a matching request_load would wait forever.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[4, 8], bf16, shared_dram>) {
    legato.on core(0) {
      %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4, 8], bf16, shared_dram> -> !legato.tensor<[4, 8], bf16, sram>
      legato.yield
    }
    legato.return
  }
}
// CHECK: error: this receive on core(0) sram queue 1 has no matching request_load (0 sent, 1 received); it would wait forever
