// RUN: legato-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of the backend dialect.

backend.program @p on core(0) {
    %t = backend.entry_reg "r1" : !backend.reg<r3>
}
// CHECK: backend.entry_reg: result type must be !backend.reg<r1>

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    %b = backend.lih %a, 1 : (!backend.reg<r3>) -> !backend.reg<r4>
}
// CHECK: backend.lih reads and writes rd: operand !backend.reg<r3> and result !backend.reg<r4> must be the same register

// -----

backend.program @p on core(0) {
    %a = backend.li 4294967296 : !backend.reg<r3>
}
// CHECK: backend.li: immediate 4294967296 out of range [-2147483648, 4294967295]

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    %b = backend.addi %a, 2147483648 : (!backend.reg<r3>) -> !backend.reg<r3>
}
// CHECK: backend.addi: immediate 2147483648 out of range [-2147483648, 2147483647]

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    %b = backend.divi %a, 0 : (!backend.reg<r3>) -> !backend.reg<r3>
}
// CHECK: backend.divi: division by a zero immediate

// -----

backend.program @p on core(0) {
    %a = backend.lsa sram, -4 : !backend.reg<r3>
}
// CHECK: backend.lsa: offset -4 out of range [0, 4294967295]

// -----

backend.program @p on core(0) {
    %a = backend.lsa core(64) sram, 0 : !backend.reg<r3>
}
// CHECK: backend.lsa: core index 64 out of range [0, 63]

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    %b = backend.ld %a, 4294967296 : (!backend.reg<r3>) -> !backend.reg<r3>
}
// CHECK: backend.ld: offset 4294967296 out of range

// -----

backend.program @p on core(0) {
    backend.label "a"
    backend.label "a"
}
// CHECK: backend.program @p: label 'a' defined twice

// -----

backend.program @p on core(0) {
    backend.jmp "nowhere"
}
// CHECK: backend.program @p: backend.jmp targets undefined label 'nowhere'

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.bne %a, %a, "x" : (!backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: backend.program @p: backend.bne targets undefined label 'x'

// -----

backend.program @p on top {
    backend.qwait sram queue 0
}
// CHECK: backend.program @p on top: backend.qwait needs a core (top has no queues, MPU or VPU)

// -----

backend.program @p on top {
    %a = backend.li 1 : !backend.reg<r3>
    backend.vpu_exp %a, %a, %a, f32 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: backend.program @p on top: backend.vpu_exp needs a core

// -----

backend.program @p on top {
    %a = backend.li 1 : !backend.reg<r3>
    backend.dma %a, %a, %a notify sram queue 0 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: backend.dma: top has no queues; name the core to notify

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.dma %a, %a, %a notify sram queue 256 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: backend.dma: queue 256 out of range [0, 255]

// -----

backend.program @p on core(0) {
    backend.qwait sram queue 300
}
// CHECK: backend.qwait: queue 300 out of range [0, 255]

// -----

backend.program @p on core(0) {
    backend.barrier 64, 1
}
// CHECK: backend.barrier: id 64 out of range [0, 63]

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.mpu_mm %a, %a, %a, bf16 acc : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: backend.mpu_mm: acc needs an f32 destination

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.vpu_add %a, %a, %a, %a, f32, bc.row(0) : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}
// CHECK: backend.vpu_add: bc.row needs a period in [1, 16777215]

// -----

backend.program @p on core(0) mem {dram = 4 : i64} {
}
// CHECK: backend.program: mem space 'dram' is not one of sram, mpu_buffer, private_dram

// -----

backend.kernel @k {
  backend.halt
}
// CHECK: backend.kernel holds only backend.program, found backend.halt
