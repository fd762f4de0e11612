"""convert-legato-to-core as rewrite patterns: what the driver promises around them (an op no
pattern lowers is an error at it; nothing of the legato level or of the conversion's casts is
left; a view's writes reach the argument it views)."""

import pytest
from xdsl.dialects.builtin import UnrealizedConversionCastOp
from xdsl.dialects.test import Test
from xdsl.parser import Parser

from legato.compiler import context
from legato.dialects import core
from legato.errors import CompileError
from legato.transforms.legato_to_core import ConvertLegatoToCorePass


def lower(text: str):
    ctx = context()
    if "test" not in ctx.registered_dialect_names:
        ctx.load_dialect(Test)
    module = Parser(ctx, text, "case.mlir").parse_module()
    ConvertLegatoToCorePass().apply(ctx, module)
    return module


def test_an_op_without_lowering_is_an_error_at_it():
    with pytest.raises(CompileError, match=r"test.op cannot be compiled for .* \(no lowering") as e:
        lower("""
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[4], f32, sram>) {
    legato.on core(0) {
      "test.op"() : () -> ()
      legato.yield
    }
    legato.return
  }
}""")
    # the pattern walker's dump of the whole module is not attached: the error names its op
    assert not getattr(e.value, "__notes__", None)


def test_a_write_through_a_slice_writes_the_argument_and_no_cast_is_left():
    module = lower("""
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[8, 4], f32, shared_dram>,
                   %b : !legato.tensor<[4, 4], f32, shared_dram>) {
    legato.on core(0) {
      %s = legato.slice %a [4, 0] [4, 4] [1, 1] : !legato.tensor<[8, 4], f32, shared_dram> -> !legato.tensor<[4, 4], f32, shared_dram>
      %r = legato.reshape %s : !legato.tensor<[4, 4], f32, shared_dram> -> !legato.tensor<[4, 4], f32, shared_dram>
      legato.memcpy %r, %b : !legato.tensor<[4, 4], f32, shared_dram>, !legato.tensor<[4, 4], f32, shared_dram>
      legato.yield
    }
    legato.return
  }
}""")
    (kernel,) = [op for op in module.walk() if isinstance(op, core.KernelOp)]
    assert [a.access.data for a in kernel.args.data] == ["write", "read"]
    names = {op.name for op in module.walk()}
    assert not any(n.startswith("legato.") for n in names), names
    assert not any(isinstance(op, UnrealizedConversionCastOp) for op in module.walk())


def test_a_value_yielded_to_a_later_region_of_the_context_is_its_buffer():
    module = lower("""
builtin.module {
  legato.kernel @k(%a : !legato.tensor<[4], f32, sram>, %o : !legato.tensor<[4], f32, shared_dram>) {
    %y = legato.on core(0) -> (!legato.tensor<[4], f32, sram>) {
      %e = legato.exp %a : !legato.tensor<[4], f32, sram>
      legato.yield %e : !legato.tensor<[4], f32, sram>
    }
    legato.on core(0) (%x = %y) {
      legato.memcpy %o, %x : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4], f32, sram>
      legato.yield
    }
    legato.return
  }
}""")
    ops = [op for op in module.walk() if isinstance(op, core.VpuUnaryOp | core.DmaOp)]
    unary, dma = ops
    assert dma.operands[0] is unary.operands[1]  # the exp's output buffer is what is copied
    assert not any(isinstance(op, UnrealizedConversionCastOp) for op in module.walk())
