// Two cores each wait for the other's transfer: the run stops and names both waits.
// RUN: not %python -m legato.tools.run %s -a zeros -a zeros 2>&1 | filecheck %s

// CHECK:      legato-run: error: deadlock: no context can make progress
// CHECK-NEXT:   core 0: blocked in 'legato.receive' at dead.py:4:8 waiting for a transfer on core 0 memory sram queue 0
// CHECK-NEXT:   core 1: blocked in 'legato.receive' at dead.py:8:8 waiting for a transfer on core 1 memory sram queue 0

legato.kernel @dead(%a : !legato.tensor<[4], f32, shared_dram>, %out : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram> loc("dead.py":4:8)
    legato.request_load %x to core(1) memory sram queue 0 : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.on core(1) {
    %y = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram> loc("dead.py":8:8)
    legato.request_load %y to core(0) memory sram queue 0 : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
