// RUN: legato-opt %s | legato-opt | filecheck %s
// RUN: legato-opt %s --print-op-generic | legato-opt | filecheck %s

// Custom-form and generic-form round trips of every legato op.

// CHECK-LABEL: legato.kernel @simple_matmul(%a: !legato.tensor<[?10, 256], bf16, shared_dram>, %b: !legato.tensor<[256, 128], bf16, mpu_dram>, %out: !legato.tensor<[10, 128], bf16, shared_dram>) attributes {target = "bertha"} {
legato.kernel @simple_matmul(%a : !legato.tensor<[?10, 256], bf16, shared_dram>,
                             %b : !legato.tensor<[256, 128], bf16, mpu_dram>,
                             %out : !legato.tensor<[10, 128], bf16, shared_dram>) attributes {target = "bertha"} {
  // CHECK-NEXT: legato.on top {
  // CHECK-NEXT:   legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?10, 256], bf16, shared_dram>
  // CHECK-NEXT:   legato.request_load %b to core(0) memory mpu_buffer queue 3 : !legato.tensor<[256, 128], bf16, mpu_dram>
  // CHECK-NEXT:   legato.yield
  // CHECK-NEXT: }
  legato.on top {
    legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?10, 256], bf16, shared_dram>
    legato.request_load %b to core(0) memory mpu_buffer queue 3 : !legato.tensor<[256, 128], bf16, mpu_dram>
    legato.yield
  }
  // CHECK-NEXT: %r0 = legato.on core(0) -> (!legato.tensor<[?10, 128], bf16, sram>) {
  // CHECK-NEXT:   %la = legato.receive %a queue 0 memory sram : !legato.tensor<[?10, 256], bf16, shared_dram> -> !legato.tensor<[?10, 256], bf16, sram>
  // CHECK-NEXT:   %lb = legato.receive_type queue 3 memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_weight>
  // CHECK-NEXT:   %r = legato.matmul %la, %lb : !legato.tensor<[?10, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_weight> -> !legato.tensor<[?10, 128], bf16, sram>
  // CHECK-NEXT:   legato.yield %r : !legato.tensor<[?10, 128], bf16, sram>
  // CHECK-NEXT: }
  %r0 = legato.on core(0) -> (!legato.tensor<[?10, 128], bf16, sram>) {
    %la = legato.receive %a queue 0 memory sram : !legato.tensor<[?10, 256], bf16, shared_dram> -> !legato.tensor<[?10, 256], bf16, sram>
    %lb = legato.receive_type queue 3 memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_weight>
    %r = legato.matmul %la, %lb : !legato.tensor<[?10, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_weight> -> !legato.tensor<[?10, 128], bf16, sram>
    legato.yield %r : !legato.tensor<[?10, 128], bf16, sram>
  }
  // CHECK-NEXT: legato.on core(0) (%x = %r0) {
  // CHECK-NEXT:   legato.memcpy %out, %x : !legato.tensor<[10, 128], bf16, shared_dram>, !legato.tensor<[?10, 128], bf16, sram>
  // CHECK-NEXT:   legato.yield
  // CHECK-NEXT: }
  legato.on core(0) (%x = %r0) {
    legato.memcpy %out, %x : !legato.tensor<[10, 128], bf16, shared_dram>, !legato.tensor<[?10, 128], bf16, sram>
    legato.yield
  }
  // CHECK-NEXT: legato.return
  legato.return
}

// CHECK-LABEL: legato.kernel @tensor_ops(%a: !legato.tensor<[?10, 256], f32, shared_dram>, %n: i64) {
legato.kernel @tensor_ops(%a : !legato.tensor<[?10, 256], f32, shared_dram>, %n : i64) {
  // CHECK-NEXT: %r0, %r1 = legato.on all_cores -> (!legato.tensor<[4, 8], f32, sram>, index) {
  %r0, %r1 = legato.on all_cores -> (!legato.tensor<[4, 8], f32, sram>, index) {
    // CHECK-NEXT: %x = legato.receive_type from %a queue 1 memory sram : !legato.tensor<[?10, 256], f32, shared_dram> -> !legato.tensor<[?10, 256], f32, sram>
    %x = legato.receive_type from %a queue 1 memory sram : !legato.tensor<[?10, 256], f32, shared_dram> -> !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %c = legato.constant 2.5 : !legato.tensor<[], f32, sram>
    // CHECK-NEXT: %ci = legato.constant -3 : !legato.tensor<[2], i32, sram>
    // CHECK-NEXT: %ninf = legato.constant -inf : !legato.tensor<[1, 256], f32, sram>
    // CHECK-NEXT: %pinf = legato.constant inf : !legato.tensor<[1], f32, sram>
    // CHECK-NEXT: %nan = legato.constant nan : !legato.tensor<[1], bf16, sram>
    // CHECK-NEXT: %one = legato.constant 1.0 : !legato.tensor<[1], f32, sram>
    // CHECK-NEXT: %eps = legato.constant 1.0e-06 : !legato.tensor<[], f32, sram>
    // CHECK-NEXT: %big = legato.constant 1.0e+20 : !legato.tensor<[], f32, sram>
    %c = legato.constant 2.5 : !legato.tensor<[], f32, sram>
    %ci = legato.constant -3 : !legato.tensor<[2], i32, sram>
    %ninf = legato.constant -inf : !legato.tensor<[1, 256], f32, sram>
    %pinf = legato.constant inf : !legato.tensor<[1], f32, sram>
    %nan = legato.constant nan : !legato.tensor<[1], bf16, sram>
    %one = legato.constant 1 : !legato.tensor<[1], f32, sram>
    %eps = legato.constant 1.0e-06 : !legato.tensor<[], f32, sram>
    %big = legato.constant 1.0e20 : !legato.tensor<[], f32, sram>
    // CHECK-NEXT: %s = legato.add %x, %c : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %s1 = legato.sub %s, %x : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %s2 = legato.mul %s1, %one : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[1], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %s3 = legato.div %s2, %s2 : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %s4 = legato.maximum %s3, %ninf : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[1, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %s5 = legato.minimum %s4, %ninf : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[1, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    %s = legato.add %x, %c : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    %s1 = legato.sub %s, %x : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    %s2 = legato.mul %s1, %one : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[1], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    %s3 = legato.div %s2, %s2 : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    %s4 = legato.maximum %s3, %ninf : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[1, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    %s5 = legato.minimum %s4, %ninf : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[1, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %u0 = legato.neg %ci : !legato.tensor<[2], i32, sram>
    // CHECK-NEXT: %u1 = legato.exp %s5 : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %u2 = legato.log %u1 : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %u3 = legato.sqrt %u2 : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %u4 = legato.rsqrt %u3 : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %u5 = legato.tanh %u4 : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %u6 = legato.sigmoid %u5 : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %u7 = legato.silu %u6 : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %e = legato.gelu %u7 : !legato.tensor<[?10, 256], f32, sram>
    %u0 = legato.neg %ci : !legato.tensor<[2], i32, sram>
    %u1 = legato.exp %s5 : !legato.tensor<[?10, 256], f32, sram>
    %u2 = legato.log %u1 : !legato.tensor<[?10, 256], f32, sram>
    %u3 = legato.sqrt %u2 : !legato.tensor<[?10, 256], f32, sram>
    %u4 = legato.rsqrt %u3 : !legato.tensor<[?10, 256], f32, sram>
    %u5 = legato.tanh %u4 : !legato.tensor<[?10, 256], f32, sram>
    %u6 = legato.sigmoid %u5 : !legato.tensor<[?10, 256], f32, sram>
    %u7 = legato.silu %u6 : !legato.tensor<[?10, 256], f32, sram>
    %e = legato.gelu %u7 : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %n0 = legato.gelu_tanh %e : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %n1 = legato.clamp %n0 min -1.5 max 2.0 : !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %n2 = legato.clamp %u0 max 7 : !legato.tensor<[2], i32, sram>
    // CHECK-NEXT: %n3 = legato.lt %n1, %e : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    %n0 = legato.gelu_tanh %e : !legato.tensor<[?10, 256], f32, sram>
    %n1 = legato.clamp %n0 min -1.5 max 2.0 : !legato.tensor<[?10, 256], f32, sram>
    %n2 = legato.clamp %u0 max 7 : !legato.tensor<[2], i32, sram>
    %n3 = legato.lt %n1, %e : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 256], f32, sram>
    // CHECK-NEXT: %b = legato.cast %e : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 256], bf16, sram>
    %b = legato.cast %e : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 256], bf16, sram>
    // CHECK-NEXT: %m = legato.amax %e dim 1 keepdim : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 1], f32, sram>
    // CHECK-NEXT: %mi = legato.amin %e dim 0 : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[256], f32, sram>
    // CHECK-NEXT: %sm = legato.sum %e dim 1 : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10], f32, sram>
    // CHECK-NEXT: %mn = legato.mean %e dim 1 keepdim : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 1], f32, sram>
    %m = legato.amax %e dim 1 keepdim : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 1], f32, sram>
    %mi = legato.amin %e dim 0 : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[256], f32, sram>
    %sm = legato.sum %e dim -1 : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10], f32, sram>
    %mn = legato.mean %e dim 1 keepdim : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 1], f32, sram>
    // CHECK-NEXT: %rs = legato.reshape %e : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 16, 16], f32, sram>
    // CHECK-NEXT: %t = legato.transpose %e [1, 0] : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[256, ?10], f32, sram>
    // CHECK-NEXT: %bc = legato.broadcast_to %m : !legato.tensor<[?10, 1], f32, sram> -> !legato.tensor<[3, ?10, 256], f32, sram>
    %rs = legato.reshape %e : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 16, 16], f32, sram>
    %t = legato.transpose %e [1, 0] : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[256, ?10], f32, sram>
    %bc = legato.broadcast_to %m : !legato.tensor<[?10, 1], f32, sram> -> !legato.tensor<[3, ?10, 256], f32, sram>
    // CHECK-NEXT: %sl = legato.slice %e [0, 8] [?, 8] [1, 2] : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 8], f32, sram>
    // CHECK-NEXT: %sl2 = legato.slice %e [0, 0] [4, 8] [1, 1] : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
    %sl = legato.slice %e [0, 8] [?, 8] [1, 2] : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?10, 8], f32, sram>
    %sl2 = legato.slice %e [0, 0] [4, 8] [1, 1] : !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
    // CHECK-NEXT: %cat = legato.cat %e, %e dim 0 : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?20, 256], f32, sram>
    // CHECK-NEXT: %cat2 = legato.cat %sl2, %sl2, %sl2 dim 1 : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 24], f32, sram>
    %cat = legato.cat %e, %e dim 0 : !legato.tensor<[?10, 256], f32, sram>, !legato.tensor<[?10, 256], f32, sram> -> !legato.tensor<[?20, 256], f32, sram>
    %cat2 = legato.cat %sl2, %sl2, %sl2 dim -1 : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 24], f32, sram>
    // CHECK-NEXT: %id = legato.core_id : index
    %id = legato.core_id : index
    // CHECK-NEXT: legato.yield %sl2, %id : !legato.tensor<[4, 8], f32, sram>, index
    legato.yield %sl2, %id : !legato.tensor<[4, 8], f32, sram>, index
  }
  // CHECK-NEXT: }
  // CHECK-NEXT: legato.on all_cores (%y = %r0, %i = %r1) {
  // CHECK-NEXT:   %z = legato.exp %y : !legato.tensor<[4, 8], f32, sram>
  legato.on all_cores (%y = %r0, %i = %r1) {
    %z = legato.exp %y : !legato.tensor<[4, 8], f32, sram>
    legato.yield
  }
  legato.return
}
