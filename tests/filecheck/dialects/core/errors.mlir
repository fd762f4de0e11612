// RUN: legato-opt %s --split-input-file --verify-diagnostics
// Every verifier error of the core dialect.

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{core.arg 1: the kernel has only 1 arguments}}
    %a = core.arg 1 : !core.buf<[4], f32, shared_dram>
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{core.arg 0: type !core.buf<[8], f32, shared_dram> differs from the kernel's !core.buf<[4], f32, shared_dram>}}
    %a = core.arg 0 : !core.buf<[8], f32, shared_dram>
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %a = core.arg 0 : !core.buf<[4], f32, shared_dram>
    // expected-error @+1 {{core.dim: dim 1 is out of range for !core.buf<[4], f32, shared_dram>}}
    %n = core.dim %a, 1 : index
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{core.alloc: memory space 'shared_dram' is not allowed here; expected one of sram, private_dram, mpu_buffer, mpu_weight}}
    %b = core.alloc shared_dram : !core.buf<[4], f32, shared_dram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{core.alloc: space 'sram' differs from the type's 'private_dram'}}
    %b = core.alloc sram : !core.buf<[4], f32, private_dram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{core.alloc: !core.buf<[?4], f32, sram> has 1 dynamic dims but 0 dims operands were given}}
    %b = core.alloc sram : !core.buf<[?4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{core.alloc: `on` takes core(i), got top}}
    %b = core.alloc on top sram : !core.buf<[4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{core.alloc: offset must be non-negative}}
    %b = core.alloc sram {offset = -8 : i64} : !core.buf<[4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %b = core.alloc sram : !core.buf<[4, 8], f32, sram>
    // expected-error @+1 {{core.subview: needs 2 offsets and sizes, got 1 and 1}}
    %v = core.subview %b [0] [4] : !core.buf<[4, 8], f32, sram> -> !core.buf<[4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %b = core.alloc sram : !core.buf<[4, 8], f32, sram>
    // expected-error @+1 {{core.subview: the result keeps the rank, element type and space of the source}}
    %v = core.subview %b [0, 0] [2, 8] : !core.buf<[4, 8], f32, sram> -> !core.buf<[2, 8], bf16, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %b = core.alloc sram : !core.buf<[4, 8], f32, sram>
    // expected-error @+1 {{core.subview: result dim 1 must be 8, got 4}}
    %v = core.subview %b [0, 0] [2, 8] : !core.buf<[4, 8], f32, sram> -> !core.buf<[2, 4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %b = core.alloc sram : !core.buf<[4, 8], f32, sram>
    // expected-error @+1 {{core.subview: dim 0: offset 3 + size 2 exceeds the source size 4}}
    %v = core.subview %b [3, 0] [2, 8] : !core.buf<[4, 8], f32, sram> -> !core.buf<[2, 8], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %b = core.alloc sram : !core.buf<[4, 8], f32, sram>
    %c = arith.constant 2 : index
    // expected-error @+1 {{core.subview: dim 0 has a dynamic size, so the result dim must be dynamic with a bound <= 4, got 2}}
    %v = core.subview %b [0, 0] [%c, 8] : !core.buf<[4, 8], f32, sram> -> !core.buf<[2, 8], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %a = core.arg 0 : !core.buf<[4], f32, shared_dram>
    %b = core.alloc sram : !core.buf<[4], f32, sram>
    // expected-error @+1 {{core.dma: notify takes core(i), got all_cores}}
    core.dma %a to %b notify all_cores sram queue 0 : !core.buf<[4], f32, shared_dram>, !core.buf<[4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %a = core.arg 0 : !core.buf<[4], f32, shared_dram>
    %b = core.alloc sram : !core.buf<[4], f32, sram>
    // expected-error @+1 {{core.dma notify: memory space 'mpu_weight' is not allowed here; expected one of sram, mpu_buffer, private_dram}}
    core.dma %a to %b notify core(1) mpu_weight queue 0 : !core.buf<[4], f32, shared_dram>, !core.buf<[4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %a = core.arg 0 : !core.buf<[4], f32, shared_dram>
    %b = core.alloc mpu_weight : !core.buf<[4], f32, mpu_weight>
    // expected-error @+1 {{core.dma: mpu_weight is not addressable; use core.mpu_load_weight}}
    core.dma %a to %b : !core.buf<[4], f32, shared_dram>, !core.buf<[4], f32, mpu_weight>
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %a = core.arg 0 : !core.buf<[4], f32, shared_dram>
    %b = core.alloc sram : !core.buf<[4], bf16, sram>
    // expected-error @+1 {{core.dma: element types differ (f32 and bf16); give `bytes %n` for a raw copy}}
    core.dma %a to %b : !core.buf<[4], f32, shared_dram>, !core.buf<[4], bf16, sram>
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [?8], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %a = core.arg 0 : !core.buf<[?8], f32, shared_dram>
    %b = core.alloc sram : !core.buf<[4], f32, sram>
    // expected-error @+1 {{core.dma: the source (32 bytes at most) does not fit the destination (16 bytes)}}
    core.dma %a to %b : !core.buf<[?8], f32, shared_dram>, !core.buf<[4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{core.wait_queue: memory space 'shared_dram' is not allowed here; expected one of sram, mpu_buffer, private_dram}}
    core.wait_queue shared_dram queue 0
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %w = core.alloc sram : !core.buf<[256, 128], bf16, sram>
    // expected-error @+1 {{core.mpu_load_weight: the weight must be in mpu_buffer, got sram}}
    core.mpu_load_weight %w : !core.buf<[256, 128], bf16, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %w = core.alloc mpu_buffer : !core.buf<[256, 128], f32, mpu_buffer>
    // expected-error @+1 {{core.mpu_load_weight: the weight must be 2-D bf16}}
    core.mpu_load_weight %w : !core.buf<[256, 128], f32, mpu_buffer>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %w = core.alloc mpu_buffer : !core.buf<[512, 128], bf16, mpu_buffer>
    // expected-error @+1 {{core.mpu_load_weight: weight tile [512, 128] exceeds the MPU's [256, 128]}}
    core.mpu_load_weight %w : !core.buf<[512, 128], bf16, mpu_buffer>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %x = core.alloc sram : !core.buf<[4, 256], f32, sram>
    %o = core.alloc sram : !core.buf<[4, 128], f32, sram>
    // expected-error @+1 {{core.mpu_matmul: the input must be bf16}}
    core.mpu_matmul %x, %o {accumulate = false} : !core.buf<[4, 256], f32, sram>, !core.buf<[4, 128], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %x = core.alloc sram : !core.buf<[4, 256], bf16, sram>
    %o = core.alloc sram : !core.buf<[4, 128], i32, sram>
    // expected-error @+1 {{core.mpu_matmul: the output must be f32 or bf16}}
    core.mpu_matmul %x, %o {accumulate = false} : !core.buf<[4, 256], bf16, sram>, !core.buf<[4, 128], i32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %x = core.alloc sram : !core.buf<[4, 256], bf16, sram>
    %o = core.alloc sram : !core.buf<[4, 128], bf16, sram>
    // expected-error @+1 {{core.mpu_matmul: accumulate needs an f32 output}}
    core.mpu_matmul %x, %o {accumulate = true} : !core.buf<[4, 256], bf16, sram>, !core.buf<[4, 128], bf16, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %x = core.alloc sram : !core.buf<[4, 256], bf16, sram>
    %o = core.alloc sram : !core.buf<[8, 128], f32, sram>
    // expected-error @+1 {{core.mpu_matmul: input rows 4 differ from output rows 8}}
    core.mpu_matmul %x, %o {accumulate = false} : !core.buf<[4, 256], bf16, sram>, !core.buf<[8, 128], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %x = core.alloc sram : !core.buf<[4, 512], bf16, sram>
    %o = core.alloc sram : !core.buf<[4, 128], f32, sram>
    // expected-error @+1 {{core.mpu_matmul: K = 512 or N = 128 exceeds the MPU's [256, 128] weight tile}}
    core.mpu_matmul %x, %o {accumulate = false} : !core.buf<[4, 512], bf16, sram>, !core.buf<[4, 128], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %x = core.alloc sram : !core.buf<[4, 256], bf16, sram>
    %o = core.alloc sram : !core.buf<[4], f32, sram>
    // expected-error @+1 {{core.mpu_matmul: input and output must be 2-D, got [4, 256] and [4]}}
    core.mpu_matmul %x, %o {accumulate = false} : !core.buf<[4, 256], bf16, sram>, !core.buf<[4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %a = core.alloc sram : !core.buf<[4, 8], f32, sram>
    %b = core.alloc sram : !core.buf<[4, 8], bf16, sram>
    // expected-error @+1 {{core.vpu_binary: operands and out must have one element type}}
    core.vpu_binary add %a, %b to %a : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], bf16, sram>, !core.buf<[4, 8], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %c = core.alloc sram : !core.buf<[4, 8], i32, sram>
    %a = core.alloc sram : !core.buf<[4, 8], f32, sram>
    // expected-error @+1 {{core.vpu_select: the condition must be i1 or a float mask, got i32}}
    core.vpu_select %c, %a to %a : !core.buf<[4, 8], i32, sram>, !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %c = core.alloc sram : !core.buf<[4, 8], i1, sram>
    %a = core.alloc sram : !core.buf<[4, 8], f32, sram>
    %b = core.alloc sram : !core.buf<[4, 8], bf16, sram>
    // expected-error @+1 {{core.vpu_select: src and out must have one floating-point element type}}
    core.vpu_select %c, %a to %b : !core.buf<[4, 8], i1, sram>, !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], bf16, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %c = core.alloc sram : !core.buf<[8], i1, sram>
    %a = core.alloc sram : !core.buf<[4, 8], f32, sram>
    // expected-error @+1 {{core.vpu_select: condition [8], src [4, 8] and out [4, 8] must have one shape (broadcast them first)}}
    core.vpu_select %c, %a to %a : !core.buf<[8], i1, sram>, !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %i = arith.constant 0 : index
    %x = core.alloc sram : !core.buf<[4], i32, sram>
    // expected-error @+1 {{core.load_index reads a 1-D i64 buffer (one 8-byte load), got !core.buf<[4], i32, sram>}}
    %v = core.load_index %x[%i] : !core.buf<[4], i32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %a = core.alloc sram : !core.buf<[4, 8], f32, sram>
    %b = core.alloc sram : !core.buf<[4, 4], f32, sram>
    // expected-error @+1 {{core.vpu_binary: rhs [4, 4] does not broadcast to out [4, 8]}}
    core.vpu_binary max %a, %b to %a : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 4], f32, sram>, !core.buf<[4, 8], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %a = core.arg 0 : !core.buf<[4], f32, shared_dram>
    // expected-error @+1 {{core.vpu_binary: the VPU works on sram, private_dram, mpu_buffer, got shared_dram}}
    core.vpu_binary add %a, %a to %a : !core.buf<[4], f32, shared_dram>, !core.buf<[4], f32, shared_dram>, !core.buf<[4], f32, shared_dram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %a = core.alloc sram : !core.buf<[4, 8], f32, sram>
    %b = core.alloc sram : !core.buf<[4, 8], bf16, sram>
    // expected-error @+1 {{core.vpu_unary exp: input and out must have one element type (use cast)}}
    core.vpu_unary exp %a to %b : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], bf16, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %a = core.alloc sram : !core.buf<[4, 8], i32, sram>
    // expected-error @+1 {{core.vpu_unary exp needs a floating-point input}}
    core.vpu_unary exp %a to %a : !core.buf<[4, 8], i32, sram>, !core.buf<[4, 8], i32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %a = core.alloc sram : !core.buf<[4, 8], f32, sram>
    %b = core.alloc sram : !core.buf<[4, 4], f32, sram>
    // expected-error @+1 {{core.vpu_unary: input [4, 8] does not broadcast to out [4, 4]}}
    core.vpu_unary copy %a to %b : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 4], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %a = core.alloc sram : !core.buf<[4, 8], f32, sram>
    %b = core.alloc sram : !core.buf<[8], f32, sram>
    // expected-error @+1 {{core.vpu_reduce: out [8] must be the input [4, 8] without its last dim, or with it set to 1}}
    core.vpu_reduce sum %a to %b : !core.buf<[4, 8], f32, sram>, !core.buf<[8], f32, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %a = core.alloc sram : !core.buf<[4, 8], f32, sram>
    %b = core.alloc sram : !core.buf<[4], bf16, sram>
    // expected-error @+1 {{core.vpu_reduce: out must have the input's element type or f32}}
    core.vpu_reduce max %a to %b : !core.buf<[4, 8], f32, sram>, !core.buf<[4], bf16, sram>
    core.end
  }
}

// -----

core.kernel @k args [] {
  core.program @core0 on core(0) {
    %a = core.alloc sram : !core.buf<[4], i32, sram>
    // expected-error @+1 {{core.vpu_fill: a float value needs a float buffer and an integer value an integer buffer}}
    core.vpu_fill 0.5 to %a : !core.buf<[4], i32, sram>
    core.end
  }
}

// -----

// expected-error @+1 {{core.kernel: args must be listed in order; entry 0 has index 1}}
core.kernel @k args [#core.arg<1, [4], f32, shared_dram, read>] {
}

// -----

core.kernel @k args [] {
  // expected-error @+1 {{core.program: the body must end with core.end}}
  core.program @top on top {
    core.dma_wait
  }
}

// -----

core.kernel @k args [] {
  core.program @top on top {
    scf.execute_region {
      // expected-error @+1 {{'core.end' expects parent op 'core.program'}}
      core.end
    }
    core.end
  }
}

// -----

// expected-error @+1 {{core.kernel holds only core.program ops, found core.dma_wait}}
core.kernel @k args [] {
  core.program @top on top {
    core.end
  }
  core.dma_wait
}

// -----

// expected-error @+1 {{Redefinition of symbol}}
core.kernel @k args [] {
  core.program @top on top {
    core.end
  }
  core.program @top on core(0) {
    core.end
  }
}

// -----

// A runtime core (`on core(%c)`) only in an all_cores program (the same layout on every core).
builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %c = core.core_id : index
      // expected-error @+1 {{core.alloc: `on core(%c)` (a runtime core) only in an all_cores program}}
      %b = core.alloc on core(%c) sram : !core.buf<[4, 32], f32, sram>
      core.end
    }
  }
}
