// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s
// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory,convert-core-to-backend | filecheck %s --check-prefix=BE
//
// legato.cast of a float to i64 (how a kernel returns an int64 index: argmax) is a core cast
// into an i64 buffer, selected as vpu.cvt with the i64 result type (truncating toward zero);
// i64 is a vpu.cvt result only, no other VPU instruction takes it.

// CHECK:      %[[O:.*]] = core.alloc sram : !core.buf<[8], i64, sram>
// CHECK-NEXT: core.vpu_unary cast %{{.*}} to %[[O]] : !core.buf<[8], f32, sram>, !core.buf<[8], i64, sram>

// BE:      %[[N:.*]] = backend.li 8
// BE-NEXT: backend.vpu_cvt %{{.*}}, %{{.*}}, %[[N]], i64, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()

builtin.module {
  legato.kernel @k(%x : !legato.tensor<[8], f32, shared_dram>, %out : !legato.tensor<[8], i64, shared_dram>) {
    legato.on top {
      legato.request_load %x to core(0) memory sram queue 0 : !legato.tensor<[8], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %a = legato.receive %x queue 0 memory sram : !legato.tensor<[8], f32, shared_dram> -> !legato.tensor<[8], f32, sram>
      %i = legato.cast %a : !legato.tensor<[8], f32, sram> -> !legato.tensor<[8], i64, sram>
      legato.memcpy %out, %i : !legato.tensor<[8], i64, shared_dram>, !legato.tensor<[8], i64, sram>
      legato.yield
    }
    legato.return
  }
}
