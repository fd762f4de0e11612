// RUN: legato-opt %s --split-input-file --verify-diagnostics
//
// Verifier errors of the runtime ops of the legato dialect.

legato.kernel @k(%x : !legato.tensor<[64, 32], f32, shared_dram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.dynamic_slice: dim 0: offset 60 + size 8 exceeds the size 64}}
    %s = legato.dynamic_slice %x [60, 0] [8, 32] : !legato.tensor<[64, 32], f32, shared_dram> -> !legato.tensor<[8, 32], f32, shared_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%x : !legato.tensor<[64, 32], f32, shared_dram>) {
  legato.on core(0) {
    %c = arith.constant 4 : index
    // expected-error @+1 {{legato.dynamic_slice: dim 0 has a runtime size, so the result dim must be dynamic with a bound <= 64, got 4}}
    %s = legato.dynamic_slice %x [0, 0] [%c, 32] : !legato.tensor<[64, 32], f32, shared_dram> -> !legato.tensor<[4, 32], f32, shared_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%x : !legato.tensor<[64, 32], f32, shared_dram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.load: memory space 'mpu_weight' is not allowed here}}
    %t = legato.load %x memory mpu_weight : !legato.tensor<[64, 32], f32, shared_dram> -> !legato.tensor<[64, 32], f32, mpu_weight>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k() {
  legato.on core(0) {
    // expected-error @+1 {{legato.barrier synchronizes the cores of an all_cores region, not core(0)}}
    legato.barrier
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k() {
  legato.on all_cores {
    // expected-error @+1 {{legato.wait cannot run in an all_cores region}}
    legato.wait sem 0 count 1
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k() {
  legato.on top {
    // expected-error @+1 {{legato.signal targets one context (top or core(i)), not all_cores}}
    legato.signal to all_cores sem 0 count 1
    legato.yield
  }
  legato.return
}
