# RUN: %python %s | filecheck %s
#
# Every error of the SPMD core-to-core pairing (request_load to a runtime core), one module each.

from xdsl.parser import Parser

from legato.compiler import context
from legato.errors import CompileError
from legato.transforms.registry import get_all_passes

CASES = []
CASES.append("""// (c + 1) % 4 on 32 cores: cores 0..3 would each receive eight transfers, into one buffer.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[8, 64], f32, shared_dram>) {
    legato.on all_cores {
      %c = legato.core_id : index
      %one = arith.constant 1 : index
      %n = arith.constant 4 : index
      %c1 = arith.addi %c, %one : index
      %next = arith.remsi %c1, %n : index
      %x = legato.load %a memory sram : !legato.tensor<[8, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, sram>
      legato.request_load %x to core(%next) memory sram queue 1 : !legato.tensor<[8, 64], f32, sram>
      %y = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: the target core of this request_load is not a permutation of the 32 cores (core 0 receives from [3, 7, 11, 15, 19, 23, 27, 31];
CASES.append("""// Two sends on one queue to different cores: arrivals from two senders have no fixed order.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[8, 64], f32, shared_dram>) {
    legato.on all_cores {
      %c = legato.core_id : index
      %one = arith.constant 1 : index
      %n = arith.constant 32 : index
      %c1 = arith.addi %c, %one : index
      %next = arith.remsi %c1, %n : index
      %c31 = arith.constant 31 : index
      %p0 = arith.addi %c, %c31 : index
      %prev = arith.remsi %p0, %n : index
      %x = legato.load %a memory sram : !legato.tensor<[8, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, sram>
      legato.request_load %x to core(%next) memory sram queue 1 : !legato.tensor<[8, 64], f32, sram>
      legato.request_load %x to core(%prev) memory sram queue 1 : !legato.tensor<[8, 64], f32, sram>
      %y = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      %z = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: every request_load to a runtime core on sram queue 1 must target the same core
CASES.append("""// One send, two receives on the queue.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[8, 64], f32, shared_dram>) {
    legato.on all_cores {
      %c = legato.core_id : index
      %x = legato.load %a memory sram : !legato.tensor<[8, 64], f32, shared_dram> -> !legato.tensor<[8, 64], f32, sram>
      legato.request_load %x to core(%c) memory sram queue 1 : !legato.tensor<[8, 64], f32, sram>
      %y = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      %z = legato.receive_type queue 1 memory sram : !legato.tensor<[8, 64], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: the all-cores region sends 1 transfer(s) to a runtime core on sram queue 1 and receives 2
CASES.append("""// The target must be computable from core_id and constants.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[?8, 64], f32, shared_dram>) {
    legato.on all_cores {
      %d = legato.dim %a, 0 : !legato.tensor<[?8, 64], f32, shared_dram>
      %x = legato.load %a memory sram : !legato.tensor<[?8, 64], f32, shared_dram> -> !legato.tensor<[?8, 64], f32, sram>
      legato.request_load %x to core(%d) memory sram queue 1 : !legato.tensor<[?8, 64], f32, sram>
      %y = legato.receive %x queue 1 memory sram : !legato.tensor<[?8, 64], f32, sram> -> !legato.tensor<[?8, 64], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: the target core of a request_load in an all-cores region must be computed from legato.core_id() and compile-time ints

for text in CASES:
    module = Parser(context(), text, "case.mlir").parse_module()
    try:
        get_all_passes()["convert-legato-to-core"]()().apply(context(), module)
    except CompileError as e:
        print(str(e).splitlines()[0])
    else:
        print("no error")
    print("-----")
