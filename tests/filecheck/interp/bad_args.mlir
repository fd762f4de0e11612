// Arguments that do not match the signature are refused by name, before anything runs.
// RUN: not %python -m legato.tools.run %s -a 'zeros@12x256' -a zeros -a zeros 2>&1 | filecheck %s --check-prefix=BOUND
// RUN: not %python -m legato.tools.run %s -a zeros -a zeros 2>&1 | filecheck %s --check-prefix=COUNT
// RUN: not %python -m legato.tools.run %s -a zeros -a zeros -a zeros --level core 2>&1 | filecheck %s --check-prefix=LEVEL

// BOUND: legato-run: error: kernel 'simple_matmul' argument 0: dim 0 is 12, above its declared upper bound 10
// COUNT: legato-run: error: kernel 'simple_matmul' takes 3 argument(s) (a, b, out), got 2 -a option(s)
// LEVEL: legato-run: error: the module is at the legato level, not the core level

legato.kernel @simple_matmul(%a : !legato.tensor<[?10, 256], bf16, shared_dram>,
                             %b : !legato.tensor<[256, 128], bf16, mpu_dram>,
                             %out : !legato.tensor<[10, 128], bf16, shared_dram>) {
  legato.on top {
    legato.yield
  }
  legato.return
}
