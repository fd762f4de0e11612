// RUN: legato-opt %s --split-input-file --verify-diagnostics
// Every verifier error of the backend dialect.

backend.program @p on core(0) {
    // expected-error @+1 {{backend.entry_reg: result type must be !backend.reg<r1>}}
    %t = backend.entry_reg "r1" : !backend.reg<r3>
}

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    // expected-error @+1 {{backend.lih reads and writes rd: operand !backend.reg<r3> and result !backend.reg<r4> must be the same register}}
    %b = backend.lih %a, 1 : (!backend.reg<r3>) -> !backend.reg<r4>
}

// -----

backend.program @p on core(0) {
    // expected-error @+1 {{backend.li: immediate 4294967296 out of range [-2147483648, 4294967295]}}
    %a = backend.li 4294967296 : !backend.reg<r3>
}

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    // expected-error @+1 {{backend.addi: immediate 2147483648 out of range [-2147483648, 2147483647]}}
    %b = backend.addi %a, 2147483648 : (!backend.reg<r3>) -> !backend.reg<r3>
}

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    // expected-error @+1 {{backend.divi: division by a zero immediate}}
    %b = backend.divi %a, 0 : (!backend.reg<r3>) -> !backend.reg<r3>
}

// -----

backend.program @p on core(0) {
    // expected-error @+1 {{backend.lsa: offset -4 out of range [0, 4294967295]}}
    %a = backend.lsa sram, -4 : !backend.reg<r3>
}

// -----

backend.program @p on core(0) {
    // expected-error @+1 {{backend.lsa: core index 64 out of range [0, 63]}}
    %a = backend.lsa core(64) sram, 0 : !backend.reg<r3>
}

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    // expected-error @+1 {{backend.ld: offset 4294967296 out of range}}
    %b = backend.ld %a, 4294967296 : (!backend.reg<r3>) -> !backend.reg<r3>
}

// -----

// expected-error @+1 {{backend.program @p: label 'a' defined twice}}
backend.program @p on core(0) {
    backend.label "a"
    backend.label "a"
}

// -----

// expected-error @+1 {{backend.program @p: backend.jmp targets undefined label 'nowhere'}}
backend.program @p on core(0) {
    backend.jmp "nowhere"
}

// -----

// expected-error @+1 {{backend.program @p: backend.bne targets undefined label 'x'}}
backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    backend.bne %a, %a, "x" : (!backend.reg<r3>, !backend.reg<r3>) -> ()
}

// -----

// expected-error @+1 {{backend.program @p on top: backend.qwait needs a core (top has no queues, MPU or VPU)}}
backend.program @p on top {
    backend.qwait sram queue 0
}

// -----

// expected-error @+1 {{backend.program @p on top: backend.vpu_exp needs a core}}
backend.program @p on top {
    %a = backend.li 1 : !backend.reg<r3>
    backend.vpu_exp %a, %a, %a, f32 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}

// -----

backend.program @p on top {
    %a = backend.li 1 : !backend.reg<r3>
    // expected-error @+1 {{backend.dma: top has no queues; name the core to notify}}
    backend.dma %a, %a, %a notify sram queue 0 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    // expected-error @+1 {{backend.dma: queue 256 out of range [0, 255]}}
    backend.dma %a, %a, %a notify sram queue 256 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}

// -----

backend.program @p on core(0) {
    // expected-error @+1 {{backend.qwait: queue 300 out of range [0, 255]}}
    backend.qwait sram queue 300
}

// -----

backend.program @p on core(0) {
    // expected-error @+1 {{backend.barrier: id 64 out of range [0, 63]}}
    backend.barrier 64, 1
}

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    // expected-error @+1 {{backend.mpu_mm: acc needs an f32 destination}}
    backend.mpu_mm %a, %a, %a, bf16 acc : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}

// -----

backend.program @p on core(0) {
    %a = backend.li 1 : !backend.reg<r3>
    // expected-error @+1 {{backend.vpu_add: bc.row needs a period in [1, 16777215]}}
    backend.vpu_add %a, %a, %a, %a, f32, bc.row(0) : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>, !backend.reg<r3>) -> ()
}

// -----

// expected-error @+1 {{backend.program: mem space 'dram' is not one of sram, mpu_buffer, private_dram}}
backend.program @p on core(0) mem {dram = 4 : i64} {
}

// -----

// expected-error @+1 {{backend.kernel holds only backend.program, found backend.halt}}
backend.kernel @k {
  backend.halt
}
