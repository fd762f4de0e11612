// RUN: legato-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of the legato dialect.

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  %r0 = legato.on core(0) -> (!legato.tensor<[4], f32, sram>) {
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    legato.yield %x : !legato.tensor<[4], f32, sram>
  }
  legato.on core(0) {
    %y = legato.exp %r0 : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.on core(0): %r0 used by legato.exp is defined outside this region; values cross regions only by `legato.yield`

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    legato.on core(0) {
      %y = legato.exp %x : !legato.tensor<[4], f32, sram>
      legato.yield
    }
    legato.yield
  }
  legato.return
}
// CHECK: %x used by legato.exp is defined outside this region; values cross regions only by `legato.yield`

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  %r0 = legato.on core(1) -> (!legato.tensor<[4], f32, sram>) {
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    legato.yield %x : !legato.tensor<[4], f32, sram>
  }
  legato.on core(0) (%y = %r0) {
    legato.yield
  }
  legato.return
}
// CHECK: legato.on core(0): input 0 comes from legato.on core(1); inputs must come from an earlier legato.on of the same context

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) (%y = %a) {
    legato.yield
  }
  legato.return
}
// CHECK: legato.on core(0): input 0 must be a result of an earlier legato.on of the same context; values cross regions only by `legato.yield`

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  %r = legato.on top -> (!legato.tensor<[4], f32, shared_dram>) {
    legato.yield
  }
  legato.return
}
// CHECK: legato.on top: result types (!legato.tensor<[4], f32, shared_dram>) differ from the types yielded ()

// -----

legato.kernel @k() {
  legato.on top {
    legato.return
  }
  legato.return
}
// CHECK: Operation does not verify: 'legato.return' expects parent op 'legato.kernel'

// -----

legato.kernel @k() {
  legato.on top {
    legato.yield
  }
}
// CHECK: legato.kernel body must end with legato.return

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    legato.request_load %a to top memory sram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.request_load: target must be core(i), got top

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    legato.request_load %a to all_cores memory sram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.request_load: target must be core(i), got all_cores

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(0) memory shared_dram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.request_load: memory space 'shared_dram' is not allowed here; expected one of sram, private_dram, mpu_buffer, mpu_weight

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(0) memory dram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.request_load: unknown memory space 'dram'

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(0) memory mpu_weight queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.request_load: load into mpu_buffer, then receive_type as mpu_weight

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, private_dram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.receive: result memory space 'private_dram' differs from the receive memory 'sram'

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[8], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.receive: result !legato.tensor<[8], f32, sram> must have the shape and element type of %like

// -----

legato.kernel @k() {
  legato.on core(0) {
    %x = legato.receive_type queue 1 memory sram : !legato.tensor<[?8], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.receive_type: result !legato.tensor<[?8], f32, sram> has dynamic dims; give `from %src` to take them from the source

// -----

legato.kernel @k() {
  legato.on core(0) {
    %x = legato.receive_type queue 1 memory sram : !legato.tensor<[8], f32, mpu_weight>
    legato.yield
  }
  legato.return
}
// CHECK: legato.receive_type: result memory space 'mpu_weight' differs from the receive memory 'sram'; only mpu_weight may be received through mpu_buffer

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive_type from %a queue 1 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], bf16, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.receive_type: result !legato.tensor<[4], bf16, sram> must have the shape and element type of the source

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>, %b : !legato.tensor<[4], bf16, sram>) {
  legato.on core(0) {
    legato.memcpy %a, %b : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4], bf16, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.memcpy: element types differ (f32 and bf16); insert a legato.cast

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>, %b : !legato.tensor<[4, 1], f32, sram>) {
  legato.on core(0) {
    legato.memcpy %a, %b : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4, 1], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.memcpy: shapes [4] and [4, 1] differ in rank

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>, %b : !legato.tensor<[?8], f32, sram>) {
  legato.on core(0) {
    legato.memcpy %a, %b : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[?8], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.memcpy: shapes [4] and [?8] disagree in dim 0

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>, %b : !legato.tensor<[4], f32, mpu_dram>) {
  legato.on top {
    legato.memcpy %a, %b : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4], f32, mpu_dram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.memcpy: cannot copy from shared memory (mpu_dram) to shared memory (shared_dram); copy through a core memory

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, mpu_weight>, %b : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    legato.memcpy %a, %b : !legato.tensor<[4], f32, mpu_weight>, !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.memcpy: mpu_weight is written only by receive_type

// -----

legato.kernel @k(%a : !legato.tensor<[?10, 256], bf16, sram>, %b : !legato.tensor<[128, 64], bf16, sram>) {
  legato.on core(0) {
    %r = legato.matmul %a, %b : !legato.tensor<[?10, 256], bf16, sram>, !legato.tensor<[128, 64], bf16, sram> -> !legato.tensor<[?10, 64], bf16, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.matmul inner dimensions differ: lhs [?10, 256] has K = 256, rhs [128, 64] has K = 128

// -----

legato.kernel @k(%a : !legato.tensor<[256], bf16, sram>, %b : !legato.tensor<[256, 64], bf16, sram>) {
  legato.on core(0) {
    %r = legato.matmul %a, %b : !legato.tensor<[256], bf16, sram>, !legato.tensor<[256, 64], bf16, sram> -> !legato.tensor<[64], bf16, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.matmul expects lhs [..., M, K] and rhs [K, N], got [256] and [256, 64]

// -----

legato.kernel @k(%a : !legato.tensor<[4, 256], bf16, sram>, %b : !legato.tensor<[256, 64], f32, sram>) {
  legato.on core(0) {
    %r = legato.matmul %a, %b : !legato.tensor<[4, 256], bf16, sram>, !legato.tensor<[256, 64], f32, sram> -> !legato.tensor<[4, 64], bf16, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.matmul operands have different element types (bf16 and f32)

// -----

legato.kernel @k(%a : !legato.tensor<[4, 256], bf16, sram>, %b : !legato.tensor<[256, 64], bf16, sram>) {
  legato.on core(0) {
    %r = legato.matmul %a, %b : !legato.tensor<[4, 256], bf16, sram>, !legato.tensor<[256, 64], bf16, sram> -> !legato.tensor<[4, 64], f16, sram>
    legato.yield
  }
  legato.return
}
// bf16 operands give bf16 (rounded) or f32 (the accumulator); nothing else.
// CHECK: legato.matmul: result type !legato.tensor<[4, 64], f16, sram> does not match expected !legato.tensor<[4, 64], bf16, sram>

// -----

legato.kernel @k(%a : !legato.tensor<[4, 3], f32, sram>, %b : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    %r = legato.add %a, %b : !legato.tensor<[4, 3], f32, sram>, !legato.tensor<[4], f32, sram> -> !legato.tensor<[4, 3], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: shapes [4, 3] and [4] are not broadcastable (dim 1: 3 vs 4)

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, sram>, %b : !legato.tensor<[4], bf16, sram>) {
  legato.on core(0) {
    %r = legato.mul %a, %b : !legato.tensor<[4], f32, sram>, !legato.tensor<[4], bf16, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: operands have different element types (f32 and bf16); insert a legato.cast

// -----

legato.kernel @k(%a : !legato.tensor<[4, 1], f32, sram>, %b : !legato.tensor<[3], f32, sram>) {
  legato.on core(0) {
    %r = legato.sub %a, %b : !legato.tensor<[4, 1], f32, sram>, !legato.tensor<[3], f32, sram> -> !legato.tensor<[4, 1], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.sub: result type !legato.tensor<[4, 1], f32, sram> does not match expected !legato.tensor<[4, 3], f32, sram>

// -----

legato.kernel @k(%a : !legato.tensor<[4], i32, sram>) {
  legato.on core(0) {
    %r = legato.exp %a : !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.exp needs a floating-point tensor, got !legato.tensor<[4], i32, sram>

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    %r = legato.cast %a : !legato.tensor<[4], f32, sram> -> !legato.tensor<[2, 2], bf16, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.cast changes only the element type; shape and memory must be kept

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    %r = legato.sum %a dim 2 : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.sum: dim 2 is out of range for !legato.tensor<[4, 8], f32, sram>

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], i32, sram>) {
  legato.on core(0) {
    %r = legato.mean %a dim 1 : !legato.tensor<[4, 8], i32, sram> -> !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.mean needs a floating-point tensor

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    %r = legato.amax %a dim 1 : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 1], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.amax: result type !legato.tensor<[4, 1], f32, sram> does not match expected !legato.tensor<[4], f32, sram>

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    %r = legato.reshape %a : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.reshape cannot reshape [4, 8] to [4, 4]

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    %r = legato.transpose %a [0, 0] : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: permutation [0, 0] is not a permutation of the 2 dims of [4, 8]

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    %r = legato.broadcast_to %a : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 16], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: cannot broadcast [4, 8] to [4, 16]

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    %r = legato.slice %a [2, 0] [4, 8] [1, 1] : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: slice dim 0: offset 2, size 4, stride 1 reads past the size 4

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>) {
  legato.on core(0) {
    %r = legato.slice %a [0, 0] [?, 8] [1, 1] : !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: slice dim 0: size '?' (the whole runtime extent) needs a dynamic dim, offset 0 and stride 1

// -----

legato.kernel @k(%a : !legato.tensor<[4, 8], f32, sram>, %b : !legato.tensor<[4, 4], f32, sram>) {
  legato.on core(0) {
    %r = legato.cat %a, %b dim 0 : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 4], f32, sram> -> !legato.tensor<[8, 8], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.cat inputs differ in dim 1 (4 vs 8); only dim 0 may differ

// -----

legato.kernel @k() {
  legato.on core(0) {
    %c = legato.constant 1.0 : !legato.tensor<[?4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.constant: the result !legato.tensor<[?4], f32, sram> must have a static shape

// -----

legato.kernel @k() {
  legato.on core(0) {
    %c = legato.constant 1.5 : !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.constant: a float value needs a float tensor and an integer value an integer tensor

// -----

legato.kernel @k(%c : !legato.tensor<[4], i32, sram>, %a : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    %r = legato.where %c, %a, %a : !legato.tensor<[4], i32, sram>, !legato.tensor<[4], f32, sram>, !legato.tensor<[4], f32, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.where: the condition must be i1 (bool) or a float mask, got i32

// -----

legato.kernel @k(%c : !legato.tensor<[4], i1, sram>, %a : !legato.tensor<[4], f32, sram>, %b : !legato.tensor<[4], bf16, sram>) {
  legato.on core(0) {
    %r = legato.where %c, %a, %b : !legato.tensor<[4], i1, sram>, !legato.tensor<[4], f32, sram>, !legato.tensor<[4], bf16, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.where: the two values have different element types (f32 and bf16); insert a legato.cast

// -----

legato.kernel @k(%c : !legato.tensor<[3], i1, sram>, %a : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    %r = legato.where %c, %a, %a : !legato.tensor<[3], i1, sram>, !legato.tensor<[4], f32, sram>, !legato.tensor<[4], f32, sram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: shapes [3] and [4] are not broadcastable (dim 0: 3 vs 4)

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i32, sram>) {
  legato.on core(0) {
    %r = legato.gather %t, %i : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i32, sram> -> !legato.tensor<[4, 8], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.gather: indices must be i64 (the core reads each with one 8-byte load), got i32

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i64, sram>) {
  legato.on core(0) {
    %r = legato.gather %t, %i : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 8], f32, shared_dram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.gather result: memory space 'shared_dram' is not allowed here; expected one of sram, private_dram, mpu_buffer

// -----

legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i64, sram>) {
  legato.on core(0) {
    %r = legato.gather %t, %i : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, sram> -> !legato.tensor<[4, 16], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.gather: result type !legato.tensor<[4, 16], f32, sram> does not match expected !legato.tensor<[4, 8], f32, sram>

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, sram>) {
  legato.on core(0) {
    %r = legato.clamp %a : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.clamp needs a min or a max bound

// -----

legato.kernel @k(%a : !legato.tensor<[4], i32, sram>) {
  legato.on core(0) {
    %r = legato.clamp %a min 0.5 : !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.clamp: a float tensor takes float bounds and an integer tensor integer bounds, got 0.5 for !legato.tensor<[4], i32, sram>

// -----

legato.kernel @k(%a : !legato.tensor<[4], i32, sram>) {
  legato.on core(0) {
    %r = legato.erf %a : !legato.tensor<[4], i32, sram>
    legato.yield
  }
  legato.return
}
// CHECK: legato.erf needs a floating-point tensor, got !legato.tensor<[4], i32, sram>
