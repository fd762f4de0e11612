// RUN: legato-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Syntax errors of the backend dialect.

backend.program @p on core(0) {
    %t = backend.entry_reg "r5" : !backend.reg<r5>
}
// CHECK: entry register must be one of r0, r1, r2, got 'r5'

// -----

backend.program @p on core(0) {
    %t = backend.li 1 : !backend.reg<r32>
}
// CHECK: Invalid register name r32 for register type backend.reg.

// -----

backend.program @p on core(0) {
    backend.label "1abc"
}
// CHECK: invalid label name '1abc'

// -----

backend.program @p on core(0) {
    backend.qwait shared_dram queue 0
}
// CHECK: unknown memory space 'shared_dram'; expected one of sram, mpu_buffer, private_dram

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.vpu_exp %a, %a, %a, f64 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: unknown element type 'f64'; expected one of bf16, f32, f16

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.vpu_sel %a, %a, %a, %a, f32, i8 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: unknown element type 'i8'; expected one of bf16, f32, f16, i32, i1

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.vpu_sel %a, %a, %a, %a, i1, i1 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: unknown element type 'i1'; expected one of bf16, f32, f16

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.vpu_add %a, %a, %a, %a, f32, bc.diag(3) : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: expected bc.scalar, bc.row(P) or bc.col(P), got 'bc.diag'

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.mpu_mm %a, %a, %a, f16 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: unknown output 'f16'; expected one of bf16, f32
