// RUN: legato-opt %s --split-input-file -t asm --verify-diagnostics | filecheck %s
//
// A backend module that would deadlock or fault for a reason visible in the IR is refused when
// it becomes code (-t asm, -t bin, the compiler's binaries), at the op at fault.

backend.kernel @k args [] {
  backend.program @c0 on core(0) {
    // expected-error @+1 {{backend.qwait on core 0: no dma of the kernel notifies sram queue 3 on core 0: this wait would block forever}}
    backend.qwait sram queue 3
    backend.halt
  }
}

// -----

backend.kernel @k args [] {
  backend.program @c0 on core(0) {
    // expected-error @+1 {{backend.sem_wait: semaphore 2 is never posted in the kernel}}
    backend.sem_wait 2, 1
    backend.halt
  }
}

// -----

backend.kernel @k args [] {
  backend.program @c0 on core(0) {
    // expected-error @+1 {{backend.barrier 0 waits for 3 modules but only 2 program module(s) reach it}}
    backend.barrier 0, 3
    backend.halt
  }
  backend.program @c1 on core(1) {
    backend.barrier 0, 3
    backend.halt
  }
}

// -----

backend.kernel @k args [] {
  backend.program @c0 on core(0) {
    backend.barrier 1, 2 loc("k.py":5:5)
    backend.halt
  }
  backend.program @c1 on core(1) {
    // expected-error @+1 {{backend.barrier 1: counts 2 (at k.py:5) and 3 (at }}
    backend.barrier 1, 3
    backend.halt
  }
}

// -----

// Proofs on static counts name both source lines: the wait that blocks forever and the last
// send (or post) that could have released it.
backend.kernel @k args [] {
  backend.program @top on top {
    %a = backend.lsa core(0) sram, 0 : !backend.reg
    %n = backend.li 64 : !backend.reg
    backend.dma %a, %a, %n notify core(0) sram queue 0 : (!backend.reg, !backend.reg, !backend.reg) -> () loc("k.py":12:9)
    backend.halt
  }
  backend.program @c0 on core(0) {
    backend.qwait sram queue 0 loc("k.py":15:9)
    // expected-error @+1 {{backend.qwait: core 0 waits on sram queue 0 2 times but the kernel's DMAs notify it only 1 time(s), the last at k.py:12: wait 2 (at }}
    backend.qwait sram queue 0
    backend.halt
  }
}

// -----

backend.kernel @k args [] {
  backend.program @top on top {
    backend.sem_post 4, 1 loc("k.py":20:9)
    backend.halt
  }
  backend.program @c0 on core(0) {
    // expected-error @+1 {{backend.sem_wait: the kernel posts semaphore 4 only 1 time(s), the last post at k.py:20, but waits for it 2 time(s), the last wait at }}
    backend.sem_wait 4, 2
    backend.halt
  }
}

// -----

// In a loop the counts are not static: left to the emulator (its deadlock report).
backend.kernel @k args [] {
  backend.program @top on top {
    backend.sem_post 4, 1
    backend.halt
  }
  backend.program @c0 on core(0) {
    %z = backend.li 0 : !backend.reg<r3>
    backend.label "L0"
    backend.sem_wait 4, 2
    backend.beq %z, %z, "L1" : (!backend.reg<r3>, !backend.reg<r3>) -> ()
    backend.label "L1"
    backend.halt
  }
}

// -----

backend.kernel @k args [] {
  // expected-error @+1 {{backend.program: the program runs on core 40 is out of range: the model has 32 cores (valid indices 0..31)}}
  backend.program @c40 on core(40) {
    backend.halt
  }
}

// -----

// Straight-line programs: the counts are exact, one arrival for two waits is refused.
backend.kernel @k args [] {
  backend.program @c0 on core(0) {
    %a = backend.lsa core(1) sram, 0 : !backend.reg<r3>
    %n = backend.li 8 : !backend.reg<r4>
    backend.dma %a, %a, %n notify core(1) sram queue 0 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r4>) -> ()
    backend.halt
  }
  backend.program @c1 on core(1) {
    backend.qwait sram queue 0
    // expected-error @+1 {{backend.qwait: core 1 waits on sram queue 0 2 times but the kernel's DMAs notify it only 1 time(s)}}
    backend.qwait sram queue 0
    backend.halt
  }
}

// -----

// Two posts of 1 for a wait of 3.
backend.kernel @k args [] {
  backend.program @c0 on core(0) {
    backend.sem_post 4, 1
    backend.sem_post 4, 1
    backend.halt
  }
  backend.program @c1 on core(1) {
    // expected-error @+1 {{backend.sem_wait: the kernel posts semaphore 4 only 2 time(s)}}
    backend.sem_wait 4, 3
    backend.halt
  }
}

// -----

// A loop makes the counts dynamic: one post in a loop may pay for any wait.
// CHECK: sem.wait 5, 3
backend.kernel @k args [] {
  backend.program @c0 on core(0) {
    %i = backend.li 3 : !backend.reg<r3>
    backend.label "top"
    backend.sem_post 5, 1
    %j = backend.addi %i, -1 : (!backend.reg<r3>) -> !backend.reg<r3>
    %z = backend.li 0 : !backend.reg<r4>
    backend.bne %j, %z, "top" : (!backend.reg<r3>, !backend.reg<r4>) -> ()
    backend.halt
  }
  backend.program @c1 on core(1) {
    backend.sem_wait 5, 3
    backend.halt
  }
}

// -----

// A paired queue and semaphore are accepted.
// CHECK: .program c1 on core(1)
// CHECK-NEXT: qwait sram.q0
backend.kernel @k args [] {
  backend.program @c0 on core(0) {
    %a = backend.lsa core(1) sram, 0 : !backend.reg<r3>
    %n = backend.li 8 : !backend.reg<r4>
    backend.dma %a, %a, %n notify core(1) sram queue 0 : (!backend.reg<r3>, !backend.reg<r3>, !backend.reg<r4>) -> ()
    backend.sem_post 1, 1
    backend.halt
  }
  backend.program @c1 on core(1) {
    backend.qwait sram queue 0
    backend.sem_wait 1, 1
    backend.halt
  }
}
