"""Bertha's machine model: the rules of the chip that every executor of its programs shares.

The emulator (`legato.targets.bertha.emulator`, binaries with timing) and the core and backend
interpreters (`legato.interp`, IR without timing) run programs on the same machine; this
package is that machine, written once, in pure Python over numpy (no IR):

* `address_map`: where each memory space lives in the 64-bit physical address space, and which
  region (space, core) an address falls in;
* `memory`: the sparse, lazily mapped physical memory with bounds-checked access (`Trap` /
  `AccessFault` with the address; the executor adds the module / PC or the IR op);
* `sync`: barriers (generation counters) and semaphores;
* `dma`: the DMA descriptor rules (dma2d shape and strides, notify decoding, which engine's
  port a transfer uses) and the arrival queues (FIFO per core, space and queue);
* `units`: the compute units' operand rules (operands in the running core's own memory, the
  MPU's weight tile bounds);
* `debug`: what `device_print` / `device_assert` report (debug entries, print records, the
  assert rule), alike for the emulator and every interpreter.

docs/architecture.md (*Machine model*) describes the rules; tests/unit/targets/arch tests them.
"""
