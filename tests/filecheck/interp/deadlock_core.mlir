// Core 0 waits on a queue nobody notifies; top's DMA notifies another queue.
// RUN: not %python -m legato.tools.run %s -a zeros 2>&1 | filecheck %s

// CHECK:      legato-run: error: deadlock: no context can make progress
// CHECK-NEXT:   core 0: blocked in 'core.wait_queue' at k.py:9:4 waiting for an arrival on core 0 sram queue 1
// CHECK-NEXT:   note: core 0 sram queue 0 has 1 unconsumed arrival(s), the first from top's core.dma

core.kernel @k args [#core.arg<0, [4], f32, shared_dram, read>] {
  core.program @top on top {
    %a = core.arg 0 : !core.buf<[4], f32, shared_dram>
    %d = core.alloc on core(0) sram {offset = 0 : i64} : !core.buf<[4], f32, sram>
    core.dma %a to %d notify core(0) sram queue 0 : !core.buf<[4], f32, shared_dram>, !core.buf<[4], f32, sram>
    core.end
  }
  core.program @core0 on core(0) {
    core.wait_queue sram queue 1 loc("k.py":9:4)
    core.end
  }
}
