// legato-opt as a driver: xDSL's dialects stay available next to ours, pipelines run, errors
// are diagnostics with a location and a non-zero exit status, never a Python traceback.

// RUN: legato-opt %s -p canonicalize,cse | filecheck %s --check-prefix=OK
// RUN: legato-opt %s --split-input-file --print-op-generic | legato-opt --split-input-file | filecheck %s --check-prefixes=OK,ROUND
// RUN: not legato-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=NOPASS
// RUN: not legato-opt %S/Inputs/located_error.mlir 2>&1 | filecheck %s --check-prefix=LOC
// RUN: not legato-opt %S/Inputs/parse_error.mlir 2>&1 | filecheck %s --check-prefix=PARSE

// OK: func.func @host(%arg0: index) -> index {
// OK:   %{{.*}} = arith.addi %arg0, %arg0 : index
func.func @host(%arg0: index) -> index {
  %0 = arith.addi %arg0, %arg0 : index
  %1 = arith.addi %arg0, %arg0 : index
  func.return %0 : index
}

// OK: legato.kernel @k(%a: !legato.tensor<[4], f32, shared_dram>) {
// OK:   legato.on core(0) {
// OK:     %{{.*}} = legato.receive %a queue 0 memory sram
// ROUND:  scf.for
// ROUND:    legato.exp
legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c4 step %c1 {
      %e = legato.exp %x : !legato.tensor<[4], f32, sram>
    }
    legato.yield
  }
  legato.return
}

// NOPASS: no-such-pass
// NOPASS-NOT: Traceback

// LOC: kern.py:12:8: error: legato.matmul inner dimensions differ: lhs [4, 256] has K = 256, rhs [128, 64] has K = 128
// LOC-NOT: Traceback

// PARSE: parse_error.mlir:2:33
// PARSE: unknown memory space 'hbm'
// PARSE-NOT: Traceback
