// RUN: not legato-opt %s --split-input-file --verify-diagnostics 2>&1 | filecheck %s
//
// --verify-diagnostics with MLIR's semantics: an announced error that is produced (on its line,
// its text a substring of the message) passes; a wrong text, a wrong line, a missing error and an
// unexpected one each fail, with one located line each, and the exit status is 1.

// Produced as announced (@+1, same line, @below, @above): no complaint.
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
    %a = core.arg 2 : !core.buf<[4], f32, shared_dram> // expected-error {{has only 1 arguments}}
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %a = core.arg 3 : !core.buf<[4], f32, shared_dram>
    // expected-note @above {{a second designator is skipped}}
    // expected-error @above {{core.arg 3}}
    core.end
  }
}
// The note is never produced (legato-opt reports errors only):
// CHECK: verify-diagnostics.mlir:30: error: expected note "a second designator is skipped" on line 29 was not produced

// -----

// Wrong text:
core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{the kernel has 7 arguments}}
    %a = core.arg 1 : !core.buf<[4], f32, shared_dram>
    core.end
  }
}
// CHECK: verify-diagnostics.mlir:43: error: expected error "the kernel has 7 arguments" on line 44 was not produced (the input produced: {{.*}}verify-diagnostics.mlir:44:5: error: core.arg 1: the kernel has only 1 arguments)
// CHECK: verify-diagnostics.mlir:44: error: unexpected error: {{.*}}verify-diagnostics.mlir:44:5: error: core.arg 1: the kernel has only 1 arguments

// -----

// Wrong line:
core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    // expected-error @+2 {{the kernel has only 1 arguments}}
    %a = core.arg 1 : !core.buf<[4], f32, shared_dram>
    core.end
  }
}
// CHECK: verify-diagnostics.mlir:56: error: expected error "the kernel has only 1 arguments" on line 58 was not produced
// CHECK: verify-diagnostics.mlir:57: error: unexpected error:

// -----

// Missing: the module is valid.
core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    // expected-error @+1 {{anything}}
    %a = core.arg 0 : !core.buf<[4], f32, shared_dram>
    core.end
  }
}
// CHECK: verify-diagnostics.mlir:69: error: expected error "anything" on line 70 was not produced{{$}}

// -----

// Unexpected, a parse error included:
core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %a = core.arg 0 : !core.buf<[4], f32, shared_dram
  }
}
// CHECK: verify-diagnostics.mlir:82: error: unexpected error: {{.*}}verify-diagnostics.mlir:82:3: '>' expected
