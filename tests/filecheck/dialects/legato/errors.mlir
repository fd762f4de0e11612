// RUN: legato-opt %s --split-input-file --verify-diagnostics
// Every verifier error of the legato dialect.

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  %r0 = legato.on core(0) -> (!legato.tensor<[4], f32, sram>) {
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    legato.yield %x : !legato.tensor<[4], f32, sram>
  }
  // expected-error @+1 {{legato.on core(0): %r0 used by legato.exp is defined outside this region; values cross regions only by `legato.yield`}}
  legato.on core(0) {
    %y = legato.exp %r0 : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    // expected-error @+1 {{%x used by legato.exp is defined outside this region; values cross regions only by `legato.yield`}}
    legato.on core(0) {
      %y = legato.exp %x : !legato.tensor<[4], f32, sram>
      legato.yield
    }
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  %r0 = legato.on core(1) -> (!legato.tensor<[4], f32, sram>) {
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    legato.yield %x : !legato.tensor<[4], f32, sram>
  }
  // expected-error @+1 {{legato.on core(0): input 0 comes from legato.on core(1); inputs must come from an earlier legato.on of the same context}}
  legato.on core(0) (%y = %r0) {
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  // expected-error @+1 {{legato.on core(0): input 0 must be a result of an earlier legato.on of the same context; values cross regions only by `legato.yield`}}
  legato.on core(0) (%y = %a) {
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  // expected-error @+1 {{legato.on top: result types (!legato.tensor<[4], f32, shared_dram>) differ from the types yielded ()}}
  %r = legato.on top -> (!legato.tensor<[4], f32, shared_dram>) {
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k() {
  legato.on top {
    // expected-error @+1 {{'legato.return' expects parent op 'legato.kernel'}}
    legato.return
  }
  legato.return
}

// -----

// expected-error @+1 {{legato.kernel body must end with legato.return}}
legato.kernel @k() {
  legato.on top {
    legato.yield
  }
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    // expected-error @+1 {{legato.request_load: target must be core(i), got top}}
    legato.request_load %a to top memory sram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    // expected-error @+1 {{legato.request_load: target must be core(i), got all_cores}}
    legato.request_load %a to all_cores memory sram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    // expected-error @+1 {{legato.request_load: memory space 'shared_dram' is not allowed here; expected one of sram, private_dram, mpu_buffer, mpu_weight}}
    legato.request_load %a to core(0) memory shared_dram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    // expected-error @+1 {{legato.request_load: unknown memory space 'dram'}}
    legato.request_load %a to core(0) memory dram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    // expected-error @+1 {{legato.request_load: load into mpu_buffer, then receive_type as mpu_weight}}
    legato.request_load %a to core(0) memory mpu_weight queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.receive: result memory space 'private_dram' differs from the receive memory 'sram'}}
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, private_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.receive: result !legato.tensor<[8], f32, sram> must have the shape and element type of %like}}
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[8], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k() {
  legato.on core(0) {
    // expected-error @+1 {{legato.receive_type: result !legato.tensor<[?8], f32, sram> has dynamic dims; give `from %src` to take them from the source}}
    %x = legato.receive_type queue 1 memory sram : !legato.tensor<[?8], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k() {
  legato.on core(0) {
    // expected-error @+1 {{legato.receive_type: result memory space 'mpu_weight' differs from the receive memory 'sram'; only mpu_weight may be received through mpu_buffer}}
    %x = legato.receive_type queue 1 memory sram : !legato.tensor<[8], f32, mpu_weight>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.receive_type: result !legato.tensor<[4], bf16, sram> must have the shape and element type of the source}}
    %x = legato.receive_type from %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], bf16, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>, %b : !legato.tensor<[4], bf16, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.memcpy: element types differ (f32 and bf16); insert a legato.cast}}
    legato.memcpy %a, %b : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4], bf16, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>, %b : !legato.tensor<[4, 1], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.memcpy: shapes [4] and [4, 1] differ in rank}}
    legato.memcpy %a, %b : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4, 1], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>, %b : !legato.tensor<[?8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.memcpy: shapes [4] and [?8] disagree in dim 0}}
    legato.memcpy %a, %b : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[?8], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>, %b : !legato.tensor<[4], f32, mpu_dram>) {
  legato.on top {
    // expected-error @+1 {{legato.memcpy: cannot copy from shared memory (mpu_dram) to shared memory (shared_dram); copy through a core memory}}
    legato.memcpy %a, %b : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4], f32, mpu_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, mpu_weight>, %b : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.memcpy: mpu_weight is written only by receive_type}}
    legato.memcpy %a, %b : !legato.tensor<[4], f32, mpu_weight>, !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[?10, 256], bf16, sram>, %b : !legato.tensor<[128, 64], bf16, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.matmul inner dimensions differ: lhs [?10, 256] has K = 256, rhs [128, 64] has K = 128}}
    %r = legato.matmul %a, %b : !legato.tensor<[?10, 256], bf16, sram>, !legato.tensor<[128, 64], bf16, sram> -> !legato.tensor<[?10, 64], bf16, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[256], bf16, sram>, %b : !legato.tensor<[256, 64], bf16, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.matmul expects lhs [..., M, K] and rhs [K, N], got [256] and [256, 64]}}
    %r = legato.matmul %a, %b : !legato.tensor<[256], bf16, sram>, !legato.tensor<[256, 64], bf16, sram> -> !legato.tensor<[64], bf16, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 256], bf16, sram>, %b : !legato.tensor<[256, 64], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.matmul operands have different element types (bf16 and f32)}}
    %r = legato.matmul %a, %b : !legato.tensor<[4, 256], bf16, sram>, !legato.tensor<[256, 64], f32, sram> -> !legato.tensor<[4, 64], bf16, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 256], bf16, sram>, %b : !legato.tensor<[256, 64], bf16, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.matmul: result type !legato.tensor<[4, 64], f16, sram> does not match expected !legato.tensor<[4, 64], bf16, sram>}}
    %r = legato.matmul %a, %b : !legato.tensor<[4, 256], bf16, sram>, !legato.tensor<[256, 64], bf16, sram> -> !legato.tensor<[4, 64], f16, sram>
    legato.yield
  }
  legato.return
}
// bf16 operands give bf16 (rounded) or f32 (the accumulator); nothing else.

// -----

legato.kernel @k(%a : !legato.tensor<[4, 3], f32, sram>, %b : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{shapes [4, 3] and [4] are not broadcastable (dim 1: 3 vs 4)}}
    %r = legato.add %a, %b : !legato.tensor<[4, 3], f32, sram>, !legato.tensor<[4], f32, sram> -> !legato.tensor<[4, 3], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, sram>, %b : !legato.tensor<[4], bf16, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{operands have different element types (f32 and bf16); insert a legato.cast}}
    %r = legato.mul %a, %b : !legato.tensor<[4], f32, sram>, !legato.tensor<[4], bf16, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 1], f32, sram>, %b : !legato.tensor<[3], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.sub: result type !legato.tensor<[4, 1], f32, sram> does not match expected !legato.tensor<[4, 3], f32, sram>}}
    %r = legato.sub %a, %b : !legato.tensor<[4, 1], f32, sram>, !legato.tensor<[3], f32, sram> -> !legato.tensor<[4, 1], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], i32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.exp needs a floating-point tensor, got !legato.tensor<[4], i32, sram>}}
    %r = legato.exp %a : !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.cast changes only the element type; shape and memory must be kept}}
    %r = legato.cast %a : !legato.tensor<[4], f32, sram> -> !legato.tensor<[2, 2], bf16, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.sum: dim 2 is out of range for !legato.tensor<[4, 8], f32, sram>}}
    %r = legato.sum %a dim 2 : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], i32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.mean needs a floating-point tensor}}
    %r = legato.mean %a dim 1 : !legato.tensor<[4, 8], i32, sram> -> !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.amax: result type !legato.tensor<[4, 1], f32, sram> does not match expected !legato.tensor<[4], f32, sram>}}
    %r = legato.amax %a dim 1 : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 1], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.reshape cannot reshape [4, 8] to [4, 4]}}
    %r = legato.reshape %a : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{permutation [0, 0] is not a permutation of the 2 dims of [4, 8]}}
    %r = legato.transpose %a [0, 0] : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{cannot broadcast [4, 8] to [4, 16]}}
    %r = legato.broadcast_to %a : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 16], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{slice dim 0: offset 2, size 4, stride 1 reads past the size 4}}
    %r = legato.slice %a [2, 0] [4, 8] [1, 1] : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{slice dim 0: size '?' (the whole runtime extent) needs a dynamic dim, offset 0 and stride 1}}
    %r = legato.slice %a [0, 0] [?, 8] [1, 1] : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>, %b : !legato.tensor<[4, 4], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.cat inputs differ in dim 1 (4 vs 8); only dim 0 may differ}}
    %r = legato.cat %a, %b dim 0 : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 4], f32, sram> -> !legato.tensor<[8, 8], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k() {
  legato.on core(0) {
    // expected-error @+1 {{legato.constant: the result !legato.tensor<[?4], f32, sram> must have a static shape}}
    %c = legato.constant 1.0 : !legato.tensor<[?4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k() {
  legato.on core(0) {
    // expected-error @+1 {{legato.constant: a float value needs a float tensor and an integer value an integer tensor}}
    %c = legato.constant 1.5 : !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%c : !legato.tensor<[4], i32, sram>, %a : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.where: the condition must be i1 (bool) or a float mask, got i32}}
    %r = legato.where %c, %a, %a : !legato.tensor<[4], i32, sram>, !legato.tensor<[4], f32, sram>, !legato.tensor<[4], f32, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%c : !legato.tensor<[4], i1, sram>, %a : !legato.tensor<[4], f32, sram>, %b : !legato.tensor<[4], bf16, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.where: the two values have different element types (f32 and bf16); insert a legato.cast}}
    %r = legato.where %c, %a, %b : !legato.tensor<[4], i1, sram>, !legato.tensor<[4], f32, sram>, !legato.tensor<[4], bf16, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%c : !legato.tensor<[3], i1, sram>, %a : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{shapes [3] and [4] are not broadcastable (dim 0: 3 vs 4)}}
    %r = legato.where %c, %a, %a : !legato.tensor<[3], i1, sram>, !legato.tensor<[4], f32, sram>, !legato.tensor<[4], f32, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.gather: indices must be i64 (the core reads each with one 8-byte load), got i32}}
    %r = legato.gather %t, %i : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i32, sram> -> !legato.tensor<[4, 8], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i64, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.gather result: memory space 'shared_dram' is not allowed here; expected one of sram, private_dram, mpu_buffer}}
    %r = legato.gather %t, %i : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 8], f32, shared_dram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i64, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.gather: result type !legato.tensor<[4, 16], f32, sram> does not match expected !legato.tensor<[4, 8], f32, sram>}}
    %r = legato.gather %t, %i : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 16], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i64, sram>, %j : !legato.tensor<[2, 2], i64, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.gather: the index tensors have different shapes ([4] and [2, 2]); broadcast them first}}
    %r = legato.gather %t, %i, %j : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram>, !legato.tensor<[2, 2], i64, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%t : !legato.tensor<[16], f32, shared_dram>, %i : !legato.tensor<[4], i64, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.gather: 2 index tensors need a table of at least 2 dims, got [16]}}
    %r = legato.gather %t, %i, %i : !legato.tensor<[16], f32, shared_dram>, !legato.tensor<[4], i64, sram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.clamp needs a min or a max bound}}
    %r = legato.clamp %a : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], i32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.clamp: a float tensor takes float bounds and an integer tensor integer bounds, got 0.5 for !legato.tensor<[4], i32, sram>}}
    %r = legato.clamp %a min 0.5 : !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%a : !legato.tensor<[4], i32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.erf needs a floating-point tensor, got !legato.tensor<[4], i32, sram>}}
    %r = legato.erf %a : !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i32, sram>, %r : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.scatter: indices must be i64 (the core reads each with one 8-byte load), got i32}}
    legato.scatter %t, %i, %r : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i32, sram>, !legato.tensor<[4, 8], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i64, sram>, %r : !legato.tensor<[4, 16], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.scatter: rows [4, 16] do not match indices [4] followed by the table's row dims [16, 8][1:]}}
    legato.scatter %t, %i, %r : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram>, !legato.tensor<[4, 16], f32, sram>
    legato.yield
  }
  legato.return
}

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i64, shared_dram>, %r : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    // expected-error @+1 {{legato.scatter indices: memory space 'shared_dram' is not allowed here; expected one of sram, private_dram, mpu_buffer}}
    legato.scatter %t, %i, %r : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, shared_dram>, !legato.tensor<[4, 8], f32, sram>
    legato.yield
  }
  legato.return
}
