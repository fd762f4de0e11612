// RUN: legato-opt %s --split-input-file --verify-diagnostics
//
// SSA dominance: a value used before its definition is a located error, never a crash of the
// backend lowering (it was a KeyError in convert-core-to-backend).

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %c1 = arith.constant 1 : index
    // expected-error @+1 {{arith.addi: operand 0 (%k) is used before its definition by arith.constant (defined at}}
    %j = arith.addi %k, %c1 : index
    %k = arith.constant 4 : index
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c4 step %c1 {
      // expected-error @below {{arith.muli: operand 0 (%n) is used before its definition by arith.addi}}
      %m = arith.muli %n, %c1 : index
    }
    %n = arith.addi %c1, %c1 : index
    core.end
  }
}

// -----

// Valid: a use in a nested region of a value defined before the region's op, and uses in
// each program of its own values.
core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c4 step %c1 {
      %m = arith.muli %i, %c4 : index
    }
    core.end
  }
  core.program @core1 on core(1) {
    %c3 = arith.constant 3 : index
    %x = arith.addi %c3, %c3 : index
    core.end
  }
}

// -----

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @core0 on core(0) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %c0) -> (index) {
      // expected-error @+1 {{arith.addi: operand 1 (%r) is used inside the regions of scf.for, which defines it}}
      %s = arith.addi %acc, %r : index
      scf.yield %s : index
    }
    core.end
  }
}
