# RUN: %python %s | filecheck %s
#
# Every error the tensor-op lowering of convert-legato-to-core raises, one module each.

from xdsl.parser import Parser

from legato.compiler import context
from legato.errors import CompileError
from legato.transforms.registry import get_all_passes


def run_cases(cases, *passes):
    for text in cases:
        module = Parser(context(), text, "case.mlir").parse_module()
        try:
            for name in passes:
                get_all_passes()[name]()().apply(context(), module)
        except CompileError as e:
            print(str(e).splitlines()[0])
        else:
            print("no error")
        print("-----")


CASES = []
CASES.append("""// An operand in shared memory: the VPU computes on core memory.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
    legato.on core(0) {
      %r = legato.exp %a : !legato.tensor<[4], f32, shared_dram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: legato.exp: the operand is in shared_dram; tensor ops compute in a core's memory (sram, private_dram, mpu_buffer): receive it or memcpy it into sram first
CASES.append("""// Integer division has no VPU instruction (i32: add sub mul maximum minimum).
builtin.module {
  legato.kernel @k() {
    legato.on core(0) {
      %c = legato.constant 1 : !legato.tensor<[4], i32, sram>
      %r = legato.div %c, %c : !legato.tensor<[4], i32, sram>, !legato.tensor<[4], i32, sram> -> !legato.tensor<[4], i32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: legato.div on i32 is not supported: the VPU computes on bf16, f32 and f16 (i32: add, sub, mul, maximum, minimum, eq, ne, lt, le, gt, ge, neg, abs, clamp); cast with legato.tensor.to(x, ...) first
CASES.append("""// A constant in shared memory.
builtin.module {
  legato.kernel @k() {
    legato.on core(0) {
      %c = legato.constant 1.0 : !legato.tensor<[4], f32, shared_dram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: legato.constant: the result would be in shared_dram; tensor ops compute in a core's memory (sram): compute in sram and memcpy the result out
CASES.append("""// A broadcast along a dynamic dim that the VPU has no form for (b's leading 1 to a's ?4).
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[?4, 1, 8], f32, shared_dram>, %b : !legato.tensor<[1, ?4, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?4, 1, 8], f32, shared_dram>
      legato.request_load %b to core(0) memory sram queue 1 : !legato.tensor<[1, ?4, 8], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive_type from %a queue 0 memory sram : !legato.tensor<[?4, 1, 8], f32, shared_dram> -> !legato.tensor<[?4, 1, 8], f32, sram>
      %y = legato.receive_type from %b queue 1 memory sram : !legato.tensor<[1, ?4, 8], f32, shared_dram> -> !legato.tensor<[1, ?4, 8], f32, sram>
      %r = legato.sub %x, %y : !legato.tensor<[?4, 1, 8], f32, sram>, !legato.tensor<[1, ?4, 8], f32, sram> -> !legato.tensor<[?4, ?4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: broadcasting [?4, 1, 8] to [?4, ?4, 8] along a dynamic dim (dim 1) that is not a leading or trailing broadcast the VPU has is not supported; use static shapes there
CASES.append("""// A transpose behind a dynamic leading dim.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[?4, 2, 3], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?4, 2, 3], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive_type from %a queue 0 memory sram : !legato.tensor<[?4, 2, 3], f32, shared_dram> -> !legato.tensor<[?4, 2, 3], f32, sram>
      %r = legato.transpose %x [0, 2, 1] : !legato.tensor<[?4, 2, 3], f32, sram> -> !legato.tensor<[?4, 3, 2], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: legato.transpose: moving dims past a dynamic leading dim is not supported; transpose or reduce over trailing dims, or make the leading dims static
CASES.append("""// A permutation that is not a swap of two trailing groups.
builtin.module {
  legato.kernel @k() {
    legato.on core(0) {
      %c = legato.constant 1.0 : !legato.tensor<[2, 3, 4, 5], f32, sram>
      %r = legato.transpose %c [1, 0, 3, 2] : !legato.tensor<[2, 3, 4, 5], f32, sram> -> !legato.tensor<[3, 2, 5, 4], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: transpose with permutation [1, 0, 3, 2] is not supported: the VPU swaps two trailing groups of dims (e.g. [1, 0] or [0, 2, 1]); compose such transposes
CASES.append("""// mean over a dynamic dim.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[?4], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?4], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive_type from %a queue 0 memory sram : !legato.tensor<[?4], f32, shared_dram> -> !legato.tensor<[?4], f32, sram>
      %r = legato.mean %x dim 0 : !legato.tensor<[?4], f32, sram> -> !legato.tensor<[], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: mean over a dynamic dim is not supported (its size is not known when the divisor is built); use sum and divide by the size
CASES.append("""// A reshape to two dynamic dims.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[?4, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?4, 8], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive_type from %a queue 0 memory sram : !legato.tensor<[?4, 8], f32, shared_dram> -> !legato.tensor<[?4, 8], f32, sram>
      %r = legato.reshape %x : !legato.tensor<[?4, 8], f32, sram> -> !legato.tensor<[?2, ?16], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: reshape to [?2, ?16] has 2 dynamic dims; their runtime sizes cannot be inferred (at most one dynamic dim)
CASES.append("""// Writing into a slice with a step (it is a copy).
builtin.module {
  legato.kernel @k() {
    legato.on core(0) {
      %c = legato.constant 1.0 : !legato.tensor<[8], f32, sram>
      %d = legato.constant 2.0 : !legato.tensor<[4], f32, sram>
      %r = legato.slice %c [0] [4] [2] : !legato.tensor<[8], f32, sram> -> !legato.tensor<[4], f32, sram>
      legato.memcpy %r, %d : !legato.tensor<[4], f32, sram>, !legato.tensor<[4], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: writing into a slice with a step is not supported (a strided slice is a copy): write a step-1 slice, or scatter the rows
CASES.append("""// A slice with a step on top (no memory to copy into).
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[8], f32, shared_dram>) {
    legato.on top {
      %r = legato.slice %a [0] [4] [2] : !legato.tensor<[8], f32, shared_dram> -> !legato.tensor<[4], f32, shared_dram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: a slice with a step (strides [2]) on top: a strided slice is a copy made in a core's memory (the top module has none); slice in the core, e.g. `legato.tensor.load(x[:, ::2])`
CASES.append("""// cat along a dynamic dim.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[?4, 8], f32, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?4, 8], f32, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive_type from %a queue 0 memory sram : !legato.tensor<[?4, 8], f32, shared_dram> -> !legato.tensor<[?4, 8], f32, sram>
      %r = legato.cat %x, %x dim 0 : !legato.tensor<[?4, 8], f32, sram>, !legato.tensor<[?4, 8], f32, sram> -> !legato.tensor<[?8, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: cat along dim 0, which is dynamic in an input, is not supported; concatenate along a static dim
CASES.append("""// The MPU multiplies bf16.
builtin.module {
  legato.kernel @k() {
    legato.on core(0) {
      %c = legato.constant 1.0 : !legato.tensor<[2, 4], f16, sram>
      %w = legato.constant 1.0 : !legato.tensor<[4, 4], f16, mpu_buffer>
      %r = legato.matmul %c, %w : !legato.tensor<[2, 4], f16, sram>, !legato.tensor<[4, 4], f16, mpu_buffer> -> !legato.tensor<[2, 4], f16, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: the MPU multiplies bf16 operands (f32 as three bf16 passes); got f16 @ f16 (cast with legato.tensor.to(x, bfloat16) or float32)
CASES.append("""// A weight left in shared memory.
builtin.module {
  legato.kernel @k(%b : !legato.tensor<[4, 4], bf16, shared_dram>) {
    legato.on core(0) {
      %c = legato.constant 1.0 : !legato.tensor<[2, 4], bf16, sram>
      %r = legato.matmul %c, %b : !legato.tensor<[2, 4], bf16, sram>, !legato.tensor<[4, 4], bf16, shared_dram> -> !legato.tensor<[2, 4], bf16, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: matmul's right operand must be an MPU weight (mpu_weight or mpu_buffer), not shared_dram; receive it with memory 'mpu_buffer'
CASES.append("""// A weight with dynamic dims.
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[2, ?4], bf16, shared_dram>, %b : !legato.tensor<[?4, 4], bf16, shared_dram>) {
    legato.on top {
      legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[2, ?4], bf16, shared_dram>
      legato.request_load %b to core(0) memory mpu_buffer queue 0 : !legato.tensor<[?4, 4], bf16, shared_dram>
      legato.yield
    }
    legato.on core(0) {
      %x = legato.receive %a queue 0 memory sram : !legato.tensor<[2, ?4], bf16, shared_dram> -> !legato.tensor<[2, ?4], bf16, sram>
      %w = legato.receive %b queue 0 memory mpu_buffer : !legato.tensor<[?4, 4], bf16, shared_dram> -> !legato.tensor<[?4, 4], bf16, mpu_buffer>
      %r = legato.matmul %x, %w : !legato.tensor<[2, ?4], bf16, sram>, !legato.tensor<[?4, 4], bf16, mpu_buffer> -> !legato.tensor<[2, 4], bf16, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: an MPU weight must have static dims

CASES.append("""// An i1 condition that broadcasts (the VPU moves only float elements).
builtin.module {
  legato.kernel @k(%c : !legato.tensor<[4, 1], i1, sram>) {
    legato.on core(0) {
      %a = legato.constant 1.0 : !legato.tensor<[4, 8], f32, sram>
      %r = legato.where %c, %a, %a : !legato.tensor<[4, 1], i1, sram>, !legato.tensor<[4, 8], f32, sram>, !legato.tensor<[4, 8], f32, sram> -> !legato.tensor<[4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: legato.where: the i1 condition [4, 1] broadcasts to [4, 8]; the VPU moves only float elements, so an i1 condition must have the result's shape (or use a float mask)
CASES.append("""// Selecting integers: the VPU selects float elements.
builtin.module {
  legato.kernel @k(%c : !legato.tensor<[4], i1, sram>, %a : !legato.tensor<[4], i32, sram>) {
    legato.on core(0) {
      %r = legato.where %c, %a, %a : !legato.tensor<[4], i1, sram>, !legato.tensor<[4], i32, sram>, !legato.tensor<[4], i32, sram> -> !legato.tensor<[4], i32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: legato.where on i32 is not supported: the VPU computes on bf16, f32 and f16 (i32: add, sub, mul, maximum, minimum, eq, ne, lt, le, gt, ge, neg, abs, clamp); cast with legato.tensor.to(x, ...) first
CASES.append("""// Gather indices in shared memory: the core reads them from its own memory.
builtin.module {
  legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i64, shared_dram>) {
    legato.on core(0) {
      %r = legato.gather %t, %i : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, shared_dram> -> !legato.tensor<[4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: legato.gather: the index tensor is in shared_dram; tensor ops compute in a core's memory (sram, private_dram, mpu_buffer): receive it or memcpy it into sram first
CASES.append("""// A gather on top (top has no memory to gather into).
builtin.module {
  legato.kernel @k(%t : !legato.tensor<[16, 8], f32, shared_dram>, %i : !legato.tensor<[4], i64, shared_dram>) {
    legato.on top {
      %r = legato.gather %t, %i : !legato.tensor<[16, 8], f32, shared_dram>, !legato.tensor<[4], i64, shared_dram> -> !legato.tensor<[4, 8], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
# CHECK: error: legato.gather runs in a core context, not on top

run_cases(CASES, "convert-legato-to-core")
