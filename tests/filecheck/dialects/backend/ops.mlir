// RUN: legato-opt %s | legato-opt | filecheck %s
// RUN: legato-opt %s --print-op-generic | legato-opt | filecheck %s

// Custom-form and generic-form round trips of every backend op (one per ISA instruction).

// CHECK-LABEL: backend.kernel @every_instruction args [#core.arg<0, [4], f32, shared_dram, read>] {
backend.kernel @every_instruction args [#core.arg<0, [4], f32, shared_dram, read>] {
  // CHECK-NEXT: backend.program @top on top {
  backend.program @top on top {
    // CHECK-NEXT: %t = backend.entry_reg "r1" : !backend.reg<r1>
    %t = backend.entry_reg "r1" : !backend.reg<r1>
    // CHECK-NEXT: %a = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg<r3>
    %a = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg<r3>
    // CHECK-NEXT: %d = backend.lsa core(0) sram, 0 : !backend.reg<r4>
    %d = backend.lsa core(0) sram, 0 : !backend.reg<r4>
    // CHECK-NEXT: backend.dma %d, %a, %a notify core(0) sram queue 0 : (!backend.reg<r4>, !backend.reg<r3>, !backend.reg<r3>) -> ()
    backend.dma %d, %a, %a notify core(0) sram queue 0 : (!backend.reg<r4>, !backend.reg<r3>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.halt
    backend.halt
  // CHECK-NEXT: }
  }
  // CHECK-NEXT: backend.program @core0 on core(0) mem {sram = 40960 : i64, mpu_buffer = 65536 : i64} {
  backend.program @core0 on core(0) mem {sram = 40960 : i64, mpu_buffer = 65536 : i64} {
    // CHECK-NEXT: %z = backend.entry_reg "r0" : !backend.reg<r0>
    %z = backend.entry_reg "r0" : !backend.reg<r0>
    // CHECK-NEXT: %t = backend.entry_reg "r1" : !backend.reg<r1>
    %t = backend.entry_reg "r1" : !backend.reg<r1>
    // CHECK-NEXT: %c = backend.entry_reg "r2" : !backend.reg<r2>
    %c = backend.entry_reg "r2" : !backend.reg<r2>
    // CHECK-NEXT: %a = backend.li 7 : !backend.reg<r3>
    %a = backend.li 7 : !backend.reg<r3>
    // CHECK-NEXT: %big = backend.li 4294967295 : !backend.reg<r4>
    %big = backend.li 4294967295 : !backend.reg<r4>
    // CHECK-NEXT: %hi = backend.lih %big, -1 : (!backend.reg<r4>) -> !backend.reg<r4>
    %hi = backend.lih %big, -1 : (!backend.reg<r4>) -> !backend.reg<r4>
    // CHECK-NEXT: %s0 = backend.lsa sram, 16 : !backend.reg<r5>
    %s0 = backend.lsa sram, 16 : !backend.reg<r5>
    // CHECK-NEXT: %s1 = backend.lsa core(3) mpu_buffer, 0 : !backend.reg<r6>
    %s1 = backend.lsa core(3) mpu_buffer, 0 : !backend.reg<r6>
    // CHECK-NEXT: %s2 = backend.lsa core(%c) private_dram, 4096 : (!backend.reg<r2>) -> !backend.reg<r7>
    %s2 = backend.lsa core(%c) private_dram, 4096 : (!backend.reg<r2>) -> !backend.reg<r7>
    // CHECK-NEXT: %add0 = backend.add %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %add0 = backend.add %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %sub0 = backend.sub %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %sub0 = backend.sub %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %mul0 = backend.mul %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %mul0 = backend.mul %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %div0 = backend.div %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %div0 = backend.div %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %rem0 = backend.rem %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %rem0 = backend.rem %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %and0 = backend.and %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %and0 = backend.and %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %or0 = backend.or %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %or0 = backend.or %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %xor0 = backend.xor %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %xor0 = backend.xor %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %shl0 = backend.shl %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %shl0 = backend.shl %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %shr0 = backend.shr %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %shr0 = backend.shr %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %sra0 = backend.sra %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %sra0 = backend.sra %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %min0 = backend.min %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %min0 = backend.min %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %max0 = backend.max %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %max0 = backend.max %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %slt0 = backend.slt %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %slt0 = backend.slt %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %seq0 = backend.seq %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    %seq0 = backend.seq %a, %t : (!backend.reg<r3>, !backend.reg<r1>) -> !backend.reg<r8>
    // CHECK-NEXT: %addi0 = backend.addi %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    %addi0 = backend.addi %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    // CHECK-NEXT: %muli0 = backend.muli %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    %muli0 = backend.muli %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    // CHECK-NEXT: %andi0 = backend.andi %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    %andi0 = backend.andi %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    // CHECK-NEXT: %shli0 = backend.shli %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    %shli0 = backend.shli %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    // CHECK-NEXT: %shri0 = backend.shri %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    %shri0 = backend.shri %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    // CHECK-NEXT: %divi0 = backend.divi %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    %divi0 = backend.divi %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    // CHECK-NEXT: %remi0 = backend.remi %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    %remi0 = backend.remi %a, -3 : (!backend.reg<r3>) -> !backend.reg<r9>
    // CHECK-NEXT: %ld = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg<r10>
    %ld = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg<r10>
    // CHECK-NEXT: backend.st %ld, %t, -16 : (!backend.reg<r10>, !backend.reg<r1>) -> ()
    backend.st %ld, %t, -16 : (!backend.reg<r10>, !backend.reg<r1>) -> ()
    // CHECK-NEXT: backend.label "top_of_loop"
    backend.label "top_of_loop"
    // CHECK-NEXT: backend.beq %a, %ld, "top_of_loop" : (!backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.beq %a, %ld, "top_of_loop" : (!backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.bne %a, %ld, "top_of_loop" : (!backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.bne %a, %ld, "top_of_loop" : (!backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.blt %a, %ld, "top_of_loop" : (!backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.blt %a, %ld, "top_of_loop" : (!backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.bge %a, %ld, "top_of_loop" : (!backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.bge %a, %ld, "top_of_loop" : (!backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.jmp "done"
    backend.jmp "done"
    // CHECK-NEXT: backend.dma %s0, %ld, %a : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>) -> ()
    backend.dma %s0, %ld, %a : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.dma %s0, %ld, %a notify sram queue 255 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>) -> ()
    backend.dma %s0, %ld, %a notify sram queue 255 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.dma %s0, %ld, %a notify core(63) mpu_buffer queue 1 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>) -> ()
    backend.dma %s0, %ld, %a notify core(63) mpu_buffer queue 1 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.dma %s0, %ld, %a notify core(%c) private_dram queue 2 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>, !backend.reg<r2>) -> ()
    backend.dma %s0, %ld, %a notify core(%c) private_dram queue 2 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>, !backend.reg<r2>) -> ()
    // CHECK-NEXT: backend.dma2d %s0, %ld, %a, %ld : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.dma2d %s0, %ld, %a, %ld : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.dma2d %s0, %ld, %a, %ld notify core(3) sram queue 4 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.dma2d %s0, %ld, %a, %ld notify core(3) sram queue 4 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.dma2d %s0, %ld, %a, %ld notify core(%c) mpu_buffer queue 2 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>, !backend.reg<r10>, !backend.reg<r2>) -> ()
    backend.dma2d %s0, %ld, %a, %ld notify core(%c) mpu_buffer queue 2 : (!backend.reg<r5>, !backend.reg<r10>, !backend.reg<r3>, !backend.reg<r10>, !backend.reg<r2>) -> ()
    // CHECK-NEXT: backend.qwait mpu_buffer queue 7
    backend.qwait mpu_buffer queue 7
    // CHECK-NEXT: backend.dmawait
    backend.dmawait
    // CHECK-NEXT: backend.barrier 63, 33
    backend.barrier 63, 33
    // CHECK-NEXT: backend.sem_post 2, 1
    backend.sem_post 2, 1
    // CHECK-NEXT: backend.sem_wait 2, 4
    backend.sem_wait 2, 4
    // CHECK-NEXT: backend.mpu_ldw %s1, %a, %ld : (!backend.reg<r6>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.mpu_ldw %s1, %a, %ld : (!backend.reg<r6>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.mpu_mm %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.mpu_mm %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.mpu_mm %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.mpu_mm %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.mpu_mm %s0, %s2, %a, f32 acc : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.mpu_mm %s0, %s2, %a, f32 acc : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.pim_gemv %s0, %s2, %a, %big : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r4>) -> ()
    backend.pim_gemv %s0, %s2, %a, %big : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r4>) -> ()
    // CHECK-NEXT: backend.pim_gemv %s0, %s2, %a, %big acc : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r4>) -> ()
    backend.pim_gemv %s0, %s2, %a, %big acc : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r4>) -> ()
    // CHECK-NEXT: backend.vpu_add %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_add %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_sub %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_sub %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_mul %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_mul %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_div %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_div %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_max %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_max %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_min %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_min %s0, %s0, %s2, %a, bf16 : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_add %s0, %s0, %s2, %a, f32, bc.scalar : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_add %s0, %s0, %s2, %a, f32, bc.scalar : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_mul %s0, %s0, %s2, %a, f16, bc.row(64) : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_mul %s0, %s0, %s2, %a, f16, bc.row(64) : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_sub %s0, %s0, %s2, %a, f32, bc.col(16) : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_sub %s0, %s0, %s2, %a, f32, bc.col(16) : (!backend.reg<r5>, !backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_neg %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_neg %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_abs %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_abs %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_exp %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_exp %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_log %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_log %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_sqrt %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_sqrt %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_rsqrt %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_rsqrt %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_tanh %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_tanh %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_sigmoid %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_sigmoid %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_silu %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_silu %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_gelu %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_gelu %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_copy %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_copy %s0, %s2, %a, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_cvt %s0, %s2, %a, bf16, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    backend.vpu_cvt %s0, %s2, %a, bf16, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>) -> ()
    // CHECK-NEXT: backend.vpu_fill %s0, %a, %ld, bf16 : (!backend.reg<r5>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.vpu_fill %s0, %a, %ld, bf16 : (!backend.reg<r5>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.vpu_rsum %s0, %s2, %a, %ld, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.vpu_rsum %s0, %s2, %a, %ld, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.vpu_rmax %s0, %s2, %a, %ld, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.vpu_rmax %s0, %s2, %a, %ld, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.vpu_transpose %s0, %s2, %a, %ld, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.vpu_transpose %s0, %s2, %a, %ld, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.vpu_sel %s0, %s2, %a, %ld, bf16, i1 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.vpu_sel %s0, %s2, %a, %ld, bf16, i1 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: backend.vpu_sel %s0, %s2, %a, %ld, f32, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    backend.vpu_sel %s0, %s2, %a, %ld, f32, f32 : (!backend.reg<r5>, !backend.reg<r7>, !backend.reg<r3>, !backend.reg<r10>) -> ()
    // CHECK-NEXT: %u = backend.add %a, %a : (!backend.reg<r3>, !backend.reg<r3>) -> !backend.reg
    %u = backend.add %a, %a : (!backend.reg<r3>, !backend.reg<r3>) -> !backend.reg
    // CHECK-NEXT: %j = backend.addi %u, 1 : (!backend.reg) -> !backend.reg<j0>
    %j = backend.addi %u, 1 : (!backend.reg) -> !backend.reg<j0>
    // CHECK-NEXT: backend.label "done"
    backend.label "done"
    // CHECK-NEXT: backend.nop
    backend.nop
    // CHECK-NEXT: backend.halt
    backend.halt
  // CHECK-NEXT: }
  }
  // CHECK-NEXT: backend.program @spmd on all_cores {
  backend.program @spmd on all_cores {
    // CHECK-NEXT: backend.halt
    backend.halt
  // CHECK-NEXT: }
  }
// CHECK-NEXT: }
}
