// RUN: legato-opt %s -p dce | filecheck %s

// Backend ops without side effects carry `Pure` (`div`/`rem`: `NoMemoryEffect`, since a zero
// divisor faults; `ld`: a memory read), so xDSL's dead-code elimination, which
// convert-core-to-backend runs on every program, drops them when nothing reads their result,
// transitively; ops with effects (`st`, DMAs, `qwait`, ...) stay, and so do the values they read.

// CHECK-LABEL: backend.program @core0 on core(0) {
// CHECK-NEXT:    %t = backend.entry_reg "r1"
// CHECK-NEXT:    %a = backend.ld %t, 8
// CHECK-NEXT:    %kept = backend.li 7
// CHECK-NEXT:    backend.st %kept, %a, 0
// CHECK-NEXT:    backend.qwait sram queue 0
// CHECK-NEXT:    backend.halt
// CHECK-NEXT:  }

backend.kernel @dead args [#core.arg<0, [4], f32, shared_dram, read>] {
  backend.program @core0 on core(0) {
    %t = backend.entry_reg "r1" : !backend.reg<r1>
    %a = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg
    %unread = backend.ld %t, 16 : (!backend.reg<r1>) -> !backend.reg
    %one = backend.li 1 : !backend.reg
    %two = backend.addi %one, 1 : (!backend.reg) -> !backend.reg
    %q = backend.div %two, %one : (!backend.reg, !backend.reg) -> !backend.reg
    %r = backend.remi %q, 3 : (!backend.reg) -> !backend.reg
    %s = backend.lsa sram, 64 : !backend.reg
    %m = backend.max %s, %r : (!backend.reg, !backend.reg) -> !backend.reg
    %kept = backend.li 7 : !backend.reg
    backend.st %kept, %a, 0 : (!backend.reg, !backend.reg) -> ()
    backend.qwait sram queue 0
    backend.halt
  }
}
