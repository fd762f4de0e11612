"""The interpreters' cached integer scalars (`registry.ScalarArith` / `ScalarScf`) compute what
xDSL's own arith and scf functions compute, wrap-around included."""

from __future__ import annotations

import pytest
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.ir import Block, Region

from legato.interp.registry import ScalarArith, ScalarScf, int_scalar

I64, IDX = IntegerType(64), IndexType()
BIG = 2**63 - 1


def _module(t) -> ModuleOp:
    """f(a, b) = ((a + b) * b - a, sum over i in [0, 5) of i * b): a loop with an iter_arg."""
    block = Block(arg_types=[t, t])
    a, b = block.args
    with ImplicitBuilder(block):
        s = arith.AddiOp(a, b)
        m = arith.MuliOp(s, b)
        d = arith.SubiOp(m, a)
        zero = arith.ConstantOp(IntegerAttr(0, IDX))
        five = arith.ConstantOp(IntegerAttr(5, IDX))
        one = arith.ConstantOp(IntegerAttr(1, IDX))
        init = arith.ConstantOp(IntegerAttr(0, t))
        body = Block(arg_types=[IDX, t])
        with ImplicitBuilder(body):
            iv = body.args[0]
            ivt = arith.IndexCastOp(iv, t) if t != IDX else None
            term = arith.MuliOp(ivt.result if ivt else iv, b)
            acc = arith.AddiOp(body.args[1], term)
            scf.YieldOp(acc)
        loop = scf.ForOp(zero, five, one, [init], Region(body))
        func.ReturnOp(d, loop.results[0])
    f = func.FuncOp("f", ((t, t), (t, t)), Region(block))
    return ModuleOp([f])


@pytest.mark.parametrize("t", [I64, IDX], ids=["i64", "index"])
@pytest.mark.parametrize("a,b", [(3, 4), (-7, 2), (BIG, 1), (BIG, BIG), (-(2**63), -1)])
def test_same_values_as_xdsl(t, a, b):
    module = _module(t)
    outs = []
    for fns in ((ArithFunctions(), ScfFunctions()), (ScalarArith(), ScalarScf())):
        interp = Interpreter(module)
        for f in (*fns, FuncFunctions()):
            interp.register_implementations(f)
        args = (IntegerAttr(a, I64, truncate_bits=True), IntegerAttr(b, I64, truncate_bits=True))
        outs.append(interp.call_op("f", args))
    assert outs[0] == outs[1]


def test_int_scalar_is_made_once_and_wraps():
    x = int_scalar(BIG + 1, IDX, 64)
    assert x is int_scalar(BIG + 1, IDX, 64)
    assert x.value.data == -(2**63)  # index is 64-bit signed here: wraps as xDSL's does
    assert int_scalar(5, IDX, 32) is not int_scalar(5, IDX, 64)  # the width is in the key
