// RUN: legato-opt %s -p convert-core-to-backend | filecheck %s
// RUN: legato-opt %s -p convert-core-to-backend,backend-allocate-registers | filecheck %s --check-prefix=ALLOC
//
// scf.for: the index is pinned to r31 (r30 in a nested loop), an empty loop is skipped by bge,
// the body ends with addi + blt; min/max on indices and the sync ops select one instruction.
// After allocation, values defined before a loop and used in it keep their register across it.

builtin.module {
  core.kernel @k args [#core.arg<0, [?64, 8], f32, shared_dram, read>] {
    core.program @core0 on core(0) {
      %0 = core.arg 0 : !core.buf<[?64, 8], f32, shared_dram>
      %n = core.dim %0, 0 : index
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %c0 to %n step %c4 {
        %r = arith.subi %n, %i : index
        %m = arith.minsi %r, %c4 : index
        %k = arith.maxsi %m, %c0 : index
        scf.for %j = %c0 to %k step %c1 {
          %o = arith.addi %i, %j : index
          %v = core.subview %0 [%o, 0] [1, 8] : !core.buf<[?64, 8], f32, shared_dram> -> !core.buf<[1, 8], f32, shared_dram>
          %b = core.alloc sram {offset = 0 : i64} : !core.buf<[1, 8], f32, sram>
          core.dma %v to %b : !core.buf<[1, 8], f32, shared_dram>, !core.buf<[1, 8], f32, sram>
        }
      }
      core.sem_post 3 count 1
      core.sem_wait 4 count 2
      core.barrier 0 count 5
      core.end
    }
  }
}

// CHECK:      %[[N:.*]] = backend.ld %{{.*}}, 16
// CHECK:      %[[I0:.*]] = backend.addi %{{.*}}, 0 : (!backend.reg) -> !backend.reg<r31>
// CHECK-NEXT: backend.bge %[[I0]], %[[N]], "core0_loop0_end"
// CHECK-NEXT: backend.label "core0_loop0"
// CHECK-NEXT: %[[R:.*]] = backend.sub %[[N]], %[[I0]]
// CHECK-NEXT: %[[M:.*]] = backend.min %[[R]], %{{.*}}
// CHECK-NEXT: %[[K:.*]] = backend.max %[[M]], %{{.*}}
// CHECK-NEXT: %[[J0:.*]] = backend.addi %{{.*}}, 0 : (!backend.reg) -> !backend.reg<r30>
// CHECK-NEXT: backend.bge %[[J0]], %[[K]], "core0_loop1_end"
// CHECK-NEXT: backend.label "core0_loop1"
// CHECK-NEXT: %{{.*}} = backend.add %[[I0]], %[[J0]]
// CHECK:      backend.dma
// CHECK-NEXT: %[[J1:.*]] = backend.addi %[[J0]], 1 : (!backend.reg<r30>) -> !backend.reg<r30>
// CHECK-NEXT: backend.blt %[[J1]], %[[K]], "core0_loop1"
// CHECK-NEXT: backend.label "core0_loop1_end"
// CHECK-NEXT: %[[I1:.*]] = backend.addi %[[I0]], 4 : (!backend.reg<r31>) -> !backend.reg<r31>
// CHECK-NEXT: backend.blt %[[I1]], %[[N]], "core0_loop0"
// CHECK-NEXT: backend.label "core0_loop0_end"
// CHECK-NEXT: backend.sem_post 3, 1
// CHECK-NEXT: backend.sem_wait 4, 2
// CHECK-NEXT: backend.barrier 0, 5
// CHECK-NEXT: backend.halt

// ALLOC:      %[[N:.*]] = backend.ld %{{.*}}, 16 : (!backend.reg<r1>) -> !backend.reg<[[RN:r[0-9]+]]>
// ALLOC:      backend.blt %{{.*}}, %{{.*}}, "core0_loop1" : (!backend.reg<r30>, !backend.reg<[[RK:r[0-9]+]]>) -> ()
// ALLOC:      backend.blt %{{.*}}, %{{.*}}, "core0_loop0" : (!backend.reg<r31>, !backend.reg<[[RN]]>) -> ()
