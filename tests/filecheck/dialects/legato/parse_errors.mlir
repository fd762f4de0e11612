// RUN: legato-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Syntax errors of the legato dialect, reported with their location.

legato.kernel @k(%a : !legato.tensor<[4], f32, nowhere>) {
  legato.return
}
// CHECK: parse_errors.mlir:5:48
// CHECK: unknown memory space 'nowhere'; expected one of shared_dram, virtual_dram, mpu_dram, pim_dram, sram, private_dram, mpu_buffer, mpu_weight

// -----

legato.kernel @k(%a : !legato.tensor<[4], f64, sram>) {
  legato.return
}
// CHECK: unsupported element type f64; expected one of bf16, f16, f32, i32, i64, i8, i1

// -----

legato.kernel @k(%a : !legato.tensor<[?, 4], f32, sram>) {
  legato.return
}
// CHECK: Expected integer literal (the bound of a dynamic dim, as in ?128)

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, sram>) {
  legato.on somewhere {
    legato.yield
  }
  legato.return
}
// CHECK: unknown context 'somewhere'; expected top, core(i) or all_cores

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, sram>) {
  legato.on core(-1) {
    legato.yield
  }
  legato.return
}
// CHECK: core index must be non-negative, got -1

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(0) memory sram queue -2 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}
// CHECK: queue must be non-negative, got -2

// -----

legato.kernel @k(%a : !legato.tensor<[4], f32, sram>) -> !legato.tensor<[4], f32, sram> {
  legato.return
}
// CHECK: legato.kernel has no results (outputs are written in place)

// -----

legato.kernel @k() {
  legato.on core(0) {
    %c = legato.constant 1.0 : f32
    legato.yield
  }
  legato.return
}
// CHECK: legato.constant: expected a !legato.tensor type, got f32
