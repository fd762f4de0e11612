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
    backend.barrier 1, 2
    backend.halt
  }
  backend.program @c1 on core(1) {
    // expected-error @+1 {{backend.barrier 1: counts 2 and 3 differ}}
    backend.barrier 1, 3
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
    // expected-error @+1 {{backend.qwait: core 1 waits 2 times on sram queue 0 but the kernel's dmas notify it 1 times (straight-line programs: the counts are exact): a wait would block forever}}
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
    // expected-error @+1 {{backend.sem_wait: semaphore 4 is posted 2 in all but waited for 3}}
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
