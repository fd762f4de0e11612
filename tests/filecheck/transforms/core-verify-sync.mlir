// RUN: legato-opt %s --split-input-file -p core-verify-sync --verify-diagnostics | filecheck %s
//
// core-verify-sync runs every program's synchronisation abstractly (an all_cores program once
// per core, loops with static bounds iteration by iteration) and refuses, at the op, what would
// block forever or overwrite a receive buffer in use; the message names the other line. Each
// expected-error below is the whole message.

// A receive no transfer notifies.
core.kernel @k args [] {
  core.program @c0 on core(0) {
    // expected-error @+1 {{core.wait_queue on core 0: no dma of the kernel notifies sram queue 3 on core 0: this wait would block forever}}
    core.wait_queue sram queue 3
    core.end
  }
}

// -----

// Two receives, one transfer: the second names the send.
core.kernel @k args [#core.arg<0, [8], f32, shared_dram, read>] {
  core.program @top on top {
    %a = core.arg 0 : !core.buf<[8], f32, shared_dram>
    %d = core.alloc on core(0) sram {buffer = "x0"} : !core.buf<[8], f32, sram>
    core.dma %a to %d notify core(0) sram queue 0 : !core.buf<[8], f32, shared_dram>, !core.buf<[8], f32, sram> loc("k.py":12:5)
    core.end
  }
  core.program @c0 on core(0) {
    core.wait_queue sram queue 0 loc("k.py":15:5)
    // expected-error @+1 {{core.wait_queue: core 0 waits on sram queue 0 2 times but the kernel's DMAs notify it only 1 time(s), the last at k.py:12: wait 2 would block forever}}
    core.wait_queue sram queue 0
    core.end
  }
}

// -----

// A static loop counts its iterations: three sends for four receives.
core.kernel @k args [#core.arg<0, [8], f32, shared_dram, read>] {
  core.program @top on top {
    %a = core.arg 0 : !core.buf<[8], f32, shared_dram>
    %lb = arith.constant 0 : index
    %ub = arith.constant 3 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %ub step %st {
      %d = core.alloc on core(0) sram : !core.buf<[8], f32, sram>
      core.dma %a to %d notify core(0) sram queue 0 : !core.buf<[8], f32, shared_dram>, !core.buf<[8], f32, sram> loc("k.py":30:9)
    }
    core.end
  }
  core.program @c0 on core(0) {
    %lb = arith.constant 0 : index
    %ub = arith.constant 4 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %ub step %st {
      // expected-error @+1 {{core.wait_queue: core 0 waits on sram queue 0 4 times but the kernel's DMAs notify it only 3 time(s), the last at k.py:30: wait 4 would block forever}}
      core.wait_queue sram queue 0
    }
    core.end
  }
}

// -----

// A semaphore nothing posts.
core.kernel @k args [] {
  core.program @c0 on core(0) {
    // expected-error @+1 {{core.sem_wait: semaphore 2 is never posted in the kernel (no core.sem_post of it): this wait would block forever}}
    core.sem_wait 2 count 1
    core.end
  }
}

// -----

// Posts short of the waits.
core.kernel @k args [] {
  core.program @top on top {
    core.sem_post 4 count 1 loc("k.py":20:9)
    core.end
  }
  core.program @c0 on core(0) {
    // expected-error @+1 {{core.sem_wait: the kernel posts semaphore 4 only 1 time(s), the last post at k.py:20, but waits for it 2 time(s): a wait would block forever}}
    core.sem_wait 4 count 2
    core.end
  }
}

// -----

// Enough posts, in an order that cannot happen: each module waits for what the other posts
// after its own wait.
core.kernel @k args [] {
  core.program @top on top {
    // expected-error @+1 {{core.sem_wait: this wait of top for semaphore 1 would block forever: the post that would release it, at k.py:36 (core 0), comes after core 0 waits at k.py:35 for semaphore 0, which never returns}}
    core.sem_wait 1 count 1
    core.sem_post 0 count 1 loc("k.py":31:9)
    core.end
  }
  core.program @c0 on core(0) {
    core.sem_wait 0 count 1 loc("k.py":35:5)
    core.sem_post 1 count 1 loc("k.py":36:5)
    core.end
  }
}

// -----

// The same cycle through queues: each core receives before it sends.
core.kernel @k args [] {
  core.program @c0 on core(0) {
    // expected-error @+1 {{core.wait_queue: wait 1 of core 0 on sram queue 0 would block forever: the dma that would release it, at k.py:51 (core 1), comes after core 1 waits at k.py:50 on sram queue 0, which never returns}}
    core.wait_queue sram queue 0
    %d = core.alloc on core(1) sram {buffer = "x0"} : !core.buf<[8], f32, sram>
    %s = core.alloc sram : !core.buf<[8], f32, sram>
    core.dma %s to %d notify core(1) sram queue 0 : !core.buf<[8], f32, sram>, !core.buf<[8], f32, sram> loc("k.py":41:9)
    core.end
  }
  core.program @c1 on core(1) {
    core.wait_queue sram queue 0 loc("k.py":50:5)
    %d = core.alloc on core(0) sram {buffer = "x1"} : !core.buf<[8], f32, sram>
    %s = core.alloc sram : !core.buf<[8], f32, sram>
    core.dma %s to %d notify core(0) sram queue 0 : !core.buf<[8], f32, sram>, !core.buf<[8], f32, sram> loc("k.py":51:9)
    core.end
  }
}

// -----

// Barrier arrivals naming different counts.
core.kernel @k args [] {
  core.program @c0 on core(0) {
    core.barrier 1 count 2 loc("k.py":5:5)
    core.end
  }
  core.program @c1 on core(1) {
    // expected-error @+1 {{core.barrier 1: counts 2 (at k.py:5, core 0) and 3 (here, core 1) differ (the machine faults when arrivals disagree)}}
    core.barrier 1 count 3
    core.end
  }
}

// -----

// A barrier of every core that core 0 never reaches: its loop runs core_id times.
core.kernel @k args [] {
  core.program @cores on all_cores {
    %c = core.core_id : index
    %lb = arith.constant 0 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %c step %st {
      // expected-error @+1 {{core.barrier 0 waits for 32 modules but only 31 arrive (core 1, core 2, core 3 and 28 more at}}
      core.barrier 0 count 32
    }
    core.end
  }
}

// -----

// Queue capacity: a second transfer into the one receive buffer before core 1 received the
// first would overwrite it.
core.kernel @k args [] {
  core.program @c0 on core(0) {
    %s = core.alloc sram : !core.buf<[8], f32, sram>
    %lb = arith.constant 0 : index
    %ub = arith.constant 2 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %ub step %st {
      %d = core.alloc on core(1) sram {buffer = "x0"} : !core.buf<[8], f32, sram>
      // expected-error @+1 {{core.dma: transfer 2 into receive buffer x0 on core 1 can arrive before core 1 received transfer 1 (sent by this dma, an iteration earlier): the buffer holds one transfer, and nothing orders this send after that receive; it would overwrite data not yet received}}
      core.dma %s to %d notify core(1) sram queue 0 : !core.buf<[8], f32, sram>, !core.buf<[8], f32, sram>
    }
    core.end
  }
  core.program @c1 on core(1) {
    %lb = arith.constant 0 : index
    %ub = arith.constant 2 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %ub step %st {
      core.wait_queue sram queue 0
      %r = core.alloc sram {buffer = "x0"} : !core.buf<[8], f32, sram>
      core.vpu_unary exp %r to %r : !core.buf<[8], f32, sram>, !core.buf<[8], f32, sram>
    }
    core.end
  }
}

// -----

// Queue capacity: core 1 signals that it received the transfer, but before its last use of
// the buffer: the next transfer can land while the VPU reads it.
core.kernel @k args [] {
  core.program @c0 on core(0) {
    %s = core.alloc sram : !core.buf<[8], f32, sram>
    %lb = arith.constant 0 : index
    %ub = arith.constant 2 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %ub step %st {
      %d = core.alloc on core(1) sram {buffer = "x0"} : !core.buf<[8], f32, sram>
      // expected-error @+1 {{core.dma: transfer 2 into receive buffer x0 on core 1 is not ordered after core 1's last use of transfer 1 at k.py:70: it can overwrite the buffer while it is in use (wait for a signal the receiver sends after that use)}}
      core.dma %s to %d notify core(1) sram queue 0 : !core.buf<[8], f32, sram>, !core.buf<[8], f32, sram>
      core.sem_wait 3 count 1
    }
    core.end
  }
  core.program @c1 on core(1) {
    %lb = arith.constant 0 : index
    %ub = arith.constant 2 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %ub step %st {
      core.wait_queue sram queue 0
      core.sem_post 3 count 1
      %r = core.alloc sram {buffer = "x0"} : !core.buf<[8], f32, sram>
      core.vpu_unary exp %r to %r : !core.buf<[8], f32, sram>, !core.buf<[8], f32, sram> loc("k.py":70:7)
    }
    core.end
  }
}

// -----

// The same with the signal after the last use: proven.
// CHECK: core.program @c1
core.kernel @k args [] {
  core.program @c0 on core(0) {
    %s = core.alloc sram : !core.buf<[8], f32, sram>
    %lb = arith.constant 0 : index
    %ub = arith.constant 2 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %ub step %st {
      %d = core.alloc on core(1) sram {buffer = "x0"} : !core.buf<[8], f32, sram>
      core.dma %s to %d notify core(1) sram queue 0 : !core.buf<[8], f32, sram>, !core.buf<[8], f32, sram>
      core.sem_wait 3 count 1
    }
    core.end
  }
  core.program @c1 on core(1) {
    %lb = arith.constant 0 : index
    %ub = arith.constant 2 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %ub step %st {
      core.wait_queue sram queue 0
      %r = core.alloc sram {buffer = "x0"} : !core.buf<[8], f32, sram>
      core.vpu_unary exp %r to %r : !core.buf<[8], f32, sram>, !core.buf<[8], f32, sram>
      core.sem_post 3 count 1
    }
    core.end
  }
}

// -----

// A send to a runtime core of the SPMD program is evaluated per core: the ring to the next
// core is proven.
// CHECK: core.program @cores on all_cores
core.kernel @k args [] {
  core.program @cores on all_cores {
    %c = core.core_id : index
    %one = arith.constant 1 : index
    %n = arith.constant 32 : index
    %c1 = arith.addi %c, %one : index
    %nxt = arith.remsi %c1, %n : index
    %s = core.alloc sram : !core.buf<[8], f32, sram>
    %d = core.alloc on core(%nxt) sram {buffer = "x0"} : !core.buf<[8], f32, sram>
    core.dma %s to %d notify core(%nxt) sram queue 1 : !core.buf<[8], f32, sram>, !core.buf<[8], f32, sram>
    core.wait_queue sram queue 1
    core.end
  }
}

// -----

// A loop with runtime bounds: its counts are left to the run (no error here; the compiler
// logs the wait on `legato.sync`).
// CHECK: core.program @c0
core.kernel @k args [#core.arg<0, [?8], f32, shared_dram, read>] {
  core.program @top on top {
    %a = core.arg 0 : !core.buf<[?8], f32, shared_dram>
    %m = core.dim %a, 0 : index
    %lb = arith.constant 0 : index
    %st = arith.constant 1 : index
    scf.for %i = %lb to %m step %st {
      core.sem_post 5 count 1
    }
    core.end
  }
  core.program @c0 on core(0) {
    core.sem_wait 5 count 3
    core.end
  }
}

// -----

// Two cores wait for one semaphore: which takes the first post is run order. In the order the
// proof runs, core 1 takes it and top then waits forever; in another, core 0 does and all
// complete. Not refused: the waits are left to the run (the emulator's deadlock report).
// CHECK: core.program @c0
core.kernel @k args [] {
  core.program @top on top {
    core.sem_post 0 count 1
    core.sem_wait 1 count 1
    core.sem_post 0 count 1
    core.end
  }
  core.program @c1 on core(1) {
    core.sem_wait 0 count 1
    core.end
  }
  core.program @c0 on core(0) {
    core.sem_wait 0 count 1
    core.sem_post 1 count 1
    core.end
  }
}
