// RUN: legato-opt %s | filecheck %s
//
// The runtime ops of the legato dialect round-trip: legato.dim, legato.dynamic_slice (static
// and index entries), legato.load, legato.barrier/signal/wait, inside scf.for with a carried
// tensor (verifier errors: runtime-errors.mlir).

builtin.module {
  legato.kernel @k(%x : !legato.tensor<[?64, 32], f32, shared_dram>) {
    legato.on all_cores {
      %n = legato.dim %x, 0 : !legato.tensor<[?64, 32], f32, shared_dram>
      %c0 = arith.constant 0 : index
      %c4 = arith.constant 4 : index
      %i = legato.core_id : index
      %s = legato.dynamic_slice %x [%i, 0] [%c4, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[?4, 32], f32, shared_dram>
      %t = legato.load %s memory sram : !legato.tensor<[?4, 32], f32, shared_dram> -> !legato.tensor<[?4, 32], f32, sram>
      %r = scf.for %j = %c0 to %n step %c4 iter_args(%a = %t) -> (!legato.tensor<[?4, 32], f32, sram>) {
        %b = legato.exp %a : !legato.tensor<[?4, 32], f32, sram>
        scf.yield %b : !legato.tensor<[?4, 32], f32, sram>
      }
      legato.barrier
      legato.signal to top sem 2 count 4
      legato.yield
    }
    legato.on top {
      legato.wait sem 2 count 4
      legato.yield
    }
    legato.return
  }
}

// CHECK:      %n = legato.dim %x, 0 : !legato.tensor<[?64, 32], f32, shared_dram>
// CHECK:      %s = legato.dynamic_slice %x [%i, 0] [%c4, 32] : !legato.tensor<[?64, 32], f32, shared_dram> -> !legato.tensor<[?4, 32], f32, shared_dram>
// CHECK-NEXT: %t = legato.load %s memory sram : !legato.tensor<[?4, 32], f32, shared_dram> -> !legato.tensor<[?4, 32], f32, sram>
// CHECK-NEXT: %r = scf.for %j = %c0 to %n step %c4 iter_args(%a = %t) -> (!legato.tensor<[?4, 32], f32, sram>) {
// CHECK:      legato.barrier
// CHECK-NEXT: legato.signal to top sem 2 count 4
// CHECK:      legato.wait sem 2 count 4
