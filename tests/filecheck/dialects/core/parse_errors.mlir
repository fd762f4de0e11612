// RUN: legato-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Syntax errors of the core dialect.

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, readonly>] {
}
// CHECK: unknown access 'readonly'; expected read, write or readwrite

// -----

core.kernel @k args [] {
  core.program @c on core(0) {
    %a = core.alloc sram : !core.buf<[4], f32, sram>
    core.vpu_binary pow %a, %a to %a : !core.buf<[4], f32, sram>, !core.buf<[4], f32, sram>, !core.buf<[4], f32, sram>
    core.end
  }
}
// CHECK: unknown vpu_binary kind 'pow'; expected one of add, sub, mul, div, max, min, eq, ne, lt, le, gt, ge

// -----

core.kernel @k args [] {
  core.program @c on core(0) {
    %a = core.alloc sram : !core.buf<[4], f32, sram>
    core.vpu_unary cbrt %a to %a : !core.buf<[4], f32, sram>, !core.buf<[4], f32, sram>
    core.end
  }
}
// CHECK: unknown vpu_unary kind 'cbrt'

// -----

core.kernel @k args [] {
  core.program @c on core(0) {
    %a = core.alloc sram : !core.buf<[4], f32, sram>
    core.vpu_reduce mean %a to %a : !core.buf<[4], f32, sram>, !core.buf<[4], f32, sram>
    core.end
  }
}
// CHECK: unknown vpu_reduce kind 'mean'; expected one of sum, max, min

// -----

core.kernel @k args [] {
  core.program @c on core(0) {
    %a = core.alloc sram : tensor<4xf32>
    core.end
  }
}
// CHECK: core.alloc: expected a !core.buf type

// -----

core.kernel @k args [] {
  core.program @c on everywhere {
    core.end
  }
}
// CHECK: unknown context 'everywhere'; expected top, core(i) or all_cores
