// RUN: legato-opt %s -p convert-legato-to-core | filecheck %s --check-prefix=CORE
// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory,convert-core-to-backend | filecheck %s --check-prefix=BACKEND
// RUN: legato-opt %s -p convert-legato-to-core,core-plan-memory,convert-core-to-backend,backend-allocate-registers -t asm | filecheck %s --check-prefix=ASM
//
// The elementwise ops added as rows of legato/opset.py: each legato op lowers to its core kind
// and selects its one VPU instruction; clamp is vpu.max then vpu.min with a bc.scalar bound. Comparisons write a 0/1 mask in the operands' dtype,
// which legato.where takes as its float condition (vpu.sel with a float CDT).

builtin.module {
  legato.kernel @k(%a0 : !legato.tensor<[4, 8], f32, shared_dram>, %a1 : !legato.tensor<[4, 8], f32, shared_dram>, %out : !legato.tensor<[4, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a0 to core(0) memory sram queue 0 : !legato.tensor<[4, 8], f32, shared_dram>
      legato.request_load %a1 to core(0) memory sram queue 1 : !legato.tensor<[4, 8], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive %a0 queue 0 memory sram : !legato.tensor<[4, 8], f32, shared_dram> -> !legato.tensor<[4, 8], f32, sram>
      %y = legato.receive %a1 queue 1 memory sram : !legato.tensor<[4, 8], f32, shared_dram> -> !legato.tensor<[4, 8], f32, sram>
      %u0 = legato.abs %x : !legato.tensor<[4, 8], f32, sram>
      %u1 = legato.erf %u0 : !legato.tensor<[4, 8], f32, sram>
      %u2 = legato.gelu_tanh %u1 : !legato.tensor<[4, 8], f32, sram>
      %u3 = legato.softplus %u2 : !legato.tensor<[4, 8], f32, sram>
      %u4 = legato.log1p %u3 : !legato.tensor<[4, 8], f32, sram>
      %u5 = legato.clamp %u4 min -1.0 max 2.0 : !legato.tensor<[4, 8], f32, sram>
      %c0 = legato.eq %u5, %y : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %c1 = legato.ne %c0, %y : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %c2 = legato.lt %c1, %y : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %c3 = legato.le %c2, %y : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %c4 = legato.gt %c3, %y : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %c5 = legato.ge %c4, %y : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      %r = legato.where %c5, %x, %y : !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      legato.memcpy %out, %r : !legato.tensor<[4, 8], f32, shared_dram>, !legato.tensor<[4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}

// CORE:      core.program @core0 on core(0) {
// CORE:        core.vpu_unary abs %[[X:[0-9]+]] to %[[U0:[0-9]+]] : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
// CORE:        core.vpu_unary erf %[[U0]] to %[[U1:[0-9]+]]
// CORE:        core.vpu_unary gelu_tanh %[[U1]] to %[[U2:[0-9]+]]
// CORE:        core.vpu_unary softplus %[[U2]] to %[[U3:[0-9]+]]
// CORE:        core.vpu_unary log1p %[[U3]] to %[[U4:[0-9]+]]
// CORE:        core.vpu_fill -1.0 to %[[LO:[0-9]+]] : !core.buf<[], f32, sram>
// CORE:        core.vpu_binary max %[[U4]], %[[LO]] to %[[M:[0-9]+]] : !core.buf<[4, 8], f32, sram>, !core.buf<[], f32, sram>, !core.buf<[4, 8], f32, sram>
// CORE:        core.vpu_fill 2.0 to %[[HI:[0-9]+]] : !core.buf<[], f32, sram>
// CORE:        core.vpu_binary min %[[M]], %[[HI]] to %[[U5:[0-9]+]]
// CORE:        core.vpu_binary eq %[[U5]], %[[Y:[0-9]+]] to %[[C0:[0-9]+]]
// CORE:        core.vpu_binary ne %[[C0]], %[[Y]] to %[[C1:[0-9]+]]
// CORE:        core.vpu_binary lt %[[C1]], %[[Y]] to %[[C2:[0-9]+]]
// CORE:        core.vpu_binary le %[[C2]], %[[Y]] to %[[C3:[0-9]+]]
// CORE:        core.vpu_binary gt %[[C3]], %[[Y]] to %[[C4:[0-9]+]]
// CORE:        core.vpu_binary ge %[[C4]], %[[Y]] to %[[C5:[0-9]+]]
// CORE:        core.vpu_unary copy %[[Y]] to %[[R:[0-9]+]]
// CORE-NEXT:   core.vpu_select %[[C5]], %[[X]] to %[[R]] : !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>

// BACKEND:     backend.program @core0 on core(0)
// BACKEND:       backend.vpu_abs %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, f32 : (!backend.reg, !backend.reg, !backend.reg) -> ()
// BACKEND:       backend.vpu_erf {{.*}}, f32
// BACKEND:       backend.vpu_gelu_tanh {{.*}}, f32
// BACKEND:       backend.vpu_softplus {{.*}}, f32
// BACKEND:       backend.vpu_log1p {{.*}}, f32
// BACKEND:       backend.vpu_fill
// BACKEND:       backend.vpu_max {{.*}}, f32, bc.scalar :
// BACKEND:       backend.vpu_fill
// BACKEND:       backend.vpu_min {{.*}}, f32, bc.scalar :
// BACKEND:       backend.vpu_eq %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, f32 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
// BACKEND:       backend.vpu_ne {{.*}}, f32
// BACKEND:       backend.vpu_lt {{.*}}, f32
// BACKEND:       backend.vpu_le {{.*}}, f32
// BACKEND:       backend.vpu_gt {{.*}}, f32
// BACKEND:       backend.vpu_ge {{.*}}, f32
// BACKEND:       backend.vpu_copy {{.*}}, f32
// BACKEND:       backend.vpu_sel {{.*}}, f32, f32 :

// ASM:     .program core0 on core(0)
// ASM:       vpu.abs r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, f32
// ASM-NEXT:  {{.*}}
// ASM-NEXT:  {{.*}}
// ASM-NEXT:  vpu.erf r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, f32
// ASM:       vpu.gelu.tanh r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, f32
// ASM:       vpu.softplus
// ASM:       vpu.log1p
// ASM:       vpu.max r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, f32, bc.scalar
// ASM:       vpu.min r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, f32, bc.scalar
// ASM:       vpu.eq r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, f32
// ASM:       vpu.ne
// ASM:       vpu.lt
// ASM:       vpu.le
// ASM:       vpu.gt
// ASM:       vpu.ge
// ASM:       vpu.sel r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, r{{[0-9]+}}, f32, f32
