# RUN: %python %s | filecheck %s
#
# Every error convert-core-to-backend raises, one module each.

from xdsl.parser import Parser

from legato.compiler import context
from legato.errors import CompileError
from legato.transforms.core_to_backend import ConvertCoreToBackendPass


def run_cases(cases):
    for text in cases:
        module = Parser(context(), text, "case.mlir").parse_module()
        try:
            ConvertCoreToBackendPass().apply(context(), module)
        except CompileError as e:
            print(str(e).splitlines()[0])
        else:
            print("no error")
        print("-----")


CASES = []
# A strided copy over a dynamic dim that is neither the rows of one dma2d nor contiguous with
# them ([?8, 2, 4] of a [?8, 4, 8]: the 2 rows of 4 do not step on to the next of the ?8).
CASES.append("""builtin.module {
  core.kernel @k args [#core.arg<0, [?8, 4, 8], f32, shared_dram, read>] {
    core.program @core0 on core(0) {
      %a = core.arg 0 : !core.buf<[?8, 4, 8], f32, shared_dram>
      %n = core.dim %a, 0 : index
      %b = core.alloc sram dims(%n) {offset = 0 : i64} : !core.buf<[?8, 2, 4], f32, sram>
      %s = core.subview %a [0, 0, 0] [%n, 2, 4] : !core.buf<[?8, 4, 8], f32, shared_dram> -> !core.buf<[?8, 2, 4], f32, shared_dram>
      core.dma %s to %b : !core.buf<[?8, 2, 4], f32, shared_dram>, !core.buf<[?8, 2, 4], f32, sram>
      core.end
    }
  }
}""")
# CHECK: error: a strided copy over a dynamic dim that is neither its rows nor contiguous with them (dims [?8, 2, 4] into [?8, 2, 4]) is not supported; make the dims outside the dynamic one static
# CHECK-NEXT: -----
# A strided copy whose strides are runtime values (a view of a buffer with a dynamic inner dim).
CASES.append("""builtin.module {
  core.kernel @k args [#core.arg<0, [4, ?8, 8], f32, shared_dram, read>] {
    core.program @core0 on core(0) {
      %a = core.arg 0 : !core.buf<[4, ?8, 8], f32, shared_dram>
      %n = core.dim %a, 1 : index
      %b = core.alloc sram dims(%n) {offset = 0 : i64} : !core.buf<[2, ?8, 8], f32, sram>
      %s = core.subview %a [0, 0, 0] [2, %n, 8] : !core.buf<[4, ?8, 8], f32, shared_dram> -> !core.buf<[2, ?8, 8], f32, shared_dram>
      %d = core.subview %b [0, 0, 0] [2, %n, 4] : !core.buf<[2, ?8, 8], f32, sram> -> !core.buf<[2, ?8, 4], f32, sram>
      %e = core.subview %s [0, 0, 0] [2, %n, 4] : !core.buf<[2, ?8, 8], f32, shared_dram> -> !core.buf<[2, ?8, 4], f32, shared_dram>
      core.dma %e to %d : !core.buf<[2, ?8, 4], f32, shared_dram>, !core.buf<[2, ?8, 4], f32, sram>
      core.end
    }
  }
}""")
# CHECK: error: a strided copy (a slice, cat or tile) whose strides depend on a dynamic dim is not supported; only the outermost dim of a strided buffer may be dynamic
# CHECK-NEXT: -----
# The VPU broadcasts only its second operand.
CASES.append("""builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[8], f32, sram>
      %y = core.alloc sram {offset = 4096 : i64} : !core.buf<[4, 8], f32, sram>
      core.vpu_binary sub %x, %y to %y : !core.buf<[8], f32, sram>, !core.buf<[4, 8], f32, sram>, !core.buf<[4, 8], f32, sram>
      core.end
    }
  }
}""")
# CHECK: error: core.vpu_binary sub: the VPU broadcasts only its second operand; the first ([8]) must have the output's shape ([4, 8])
# CHECK-NEXT: -----
# A broadcast pattern the VPU has no form for.
CASES.append("""builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[2, 1, 8], f32, sram>
      %y = core.alloc sram {offset = 4096 : i64} : !core.buf<[2, 4, 8], f32, sram>
      core.vpu_binary add %y, %x to %y : !core.buf<[2, 4, 8], f32, sram>, !core.buf<[2, 1, 8], f32, sram>, !core.buf<[2, 4, 8], f32, sram>
      core.end
    }
  }
}""")
# CHECK: error: core.vpu_binary: [2, 1, 8] does not broadcast to [2, 4, 8] in a form the VPU has (scalar, per row, per column); materialize it first
# CHECK-NEXT: -----
# Only copy broadcasts among unary ops.
CASES.append("""builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[8], f32, sram>
      %y = core.alloc sram {offset = 4096 : i64} : !core.buf<[4, 8], f32, sram>
      core.vpu_unary exp %x to %y : !core.buf<[8], f32, sram>, !core.buf<[4, 8], f32, sram>
      core.end
    }
  }
}""")
# CHECK: error: core.vpu_unary exp: input [8] must have the output's shape [4, 8] (only copy broadcasts)
# CHECK-NEXT: -----
# rsum writes the input's dtype.
CASES.append("""builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[4, 8], bf16, sram>
      %y = core.alloc sram {offset = 4096 : i64} : !core.buf<[4], f32, sram>
      core.vpu_reduce sum %x to %y : !core.buf<[4, 8], bf16, sram>, !core.buf<[4], f32, sram>
      core.end
    }
  }
}""")
# CHECK: error: core.vpu_reduce: vpu.rsum/rmax write the input's dtype (bf16); cast the input to f32 first
# CHECK-NEXT: -----
# No row-min instruction.
CASES.append("""builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[4, 8], f32, sram>
      %y = core.alloc sram {offset = 4096 : i64} : !core.buf<[4], f32, sram>
      core.vpu_reduce min %x to %y : !core.buf<[4, 8], f32, sram>, !core.buf<[4], f32, sram>
      core.end
    }
  }
}""")
# CHECK: error: core.vpu_reduce min has no instruction (the VPU has rsum and rmax); compute -max(-x)
# CHECK-NEXT: -----
# The units read contiguous memory.
CASES.append("""builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[4, 8], f32, sram>
      %y = core.alloc sram {offset = 4096 : i64} : !core.buf<[4, 4], f32, sram>
      %s = core.subview %x [0, 2] [4, 4] : !core.buf<[4, 8], f32, sram> -> !core.buf<[4, 4], f32, sram>
      core.vpu_unary exp %s to %y : !core.buf<[4, 4], f32, sram>, !core.buf<[4, 4], f32, sram>
      core.end
    }
  }
}""")
# CHECK: error: core.vpu_unary: an operand is a strided view; the units read contiguous memory (copy it into a buffer first)
# CHECK-NEXT: -----
# The VPU has no 64-bit integer dtype.
CASES.append("""builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[4], i64, sram>
      core.vpu_fill 1 to %x : !core.buf<[4], i64, sram>
      core.end
    }
  }
}""")
# CHECK: error: core.vpu_fill: the VPU computes on bf16, f32, f16 and i32, not i64
# CHECK-NEXT: -----
# Ops without instruction selection.
CASES.append("""builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %c = arith.constant 1 : index
      %x = arith.xori %c, %c : index
      core.end
    }
  }
}""")
# CHECK: error: arith.xori has no instruction selection for Bertha yet
# CHECK-NEXT: -----
# A loop with iter_args (carried values are buffers at the core level).
CASES.append("""builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%a = %c0) -> (index) {
        scf.yield %a : index
      }
      core.end
    }
  }
}""")
# CHECK: error: scf.for with iter_args has no instruction selection (carried values live in buffers at the core level)
# CHECK-NEXT: -----
# Runtime loops nested deeper than the pinned index registers allow.
NEST = 9
CASES.append(
    "builtin.module {\n  core.kernel @k args [] {\n    core.program @core0 on core(0) {\n"
    "      %c0 = arith.constant 0 : index\n      %c1 = arith.constant 1 : index\n"
    + "".join(f"      scf.for %i{d} = %c0 to %c1 step %c1 {{\n" for d in range(NEST))
    + "      }\n" * NEST
    + "      core.end\n    }\n  }\n}"
)
# CHECK: error: runtime loops nest at most 8 deep on Bertha
# CHECK-NEXT: -----

run_cases(CASES)
