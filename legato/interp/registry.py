"""The xDSL interpreter functions every level registers besides its own dialect's.

xDSL's interpreter represents an integer scalar as an `IntegerAttr`, and building one (with its
verification) cost ~50-80 us: more than the op. On the tiny decoder layer the `arith.constant`,
`addi` and `muli` ops were a quarter of the core interpreter's time. `int_scalar` keeps the
values it made (attributes are immutable), and `ScalarArith` / `ScalarScf` are xDSL's
`ArithFunctions` / `ScfFunctions` with their hot integer ops (constants, add, sub, mul, and a
loop's induction variable) built through it: the same values, made once.
"""

from __future__ import annotations

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.builtin import BuiltinFunctions, scalar_attr
from xdsl.interpreters.scf import ScfFunctions
from xdsl.ir import Attribute

#: at most this many cached scalars (a long loop's induction variables): then the cache restarts
INT_SCALARS_MAX = 1 << 16
_int_scalars: dict[tuple[int, Attribute, int], IntegerAttr] = {}


def int_scalar(value: int, value_type: Attribute, index_bitwidth: int) -> IntegerAttr:
    """`scalar_attr(value, value_type, index_bitwidth)` for an integer or index type, made once
    per (value, type, index width)."""
    key = (value, value_type, index_bitwidth)
    found = _int_scalars.get(key)
    if found is None:
        if len(_int_scalars) >= INT_SCALARS_MAX:
            _int_scalars.clear()
        found = _int_scalars[key] = scalar_attr(value, value_type, index_bitwidth)  # type: ignore[arg-type]
    return found


@register_impls
class ScalarArith(ArithFunctions):
    """xDSL's arith functions; constants, addi, subi and muli through `int_scalar` (the
    verifier has checked their integer or index types)."""

    @impl(arith.ConstantOp)
    def run_constant(self, interpreter: Interpreter, op: arith.ConstantOp, args: PythonValues):
        value = op.value
        if isinstance(value, IntegerAttr) and isinstance(value.type, IndexType):
            return (int_scalar(value.value.data, value.type, interpreter.index_bitwidth),)
        # xDSL's own (its other integer and float constants are their attribute); the
        # decorated method returns an OpImplResult
        return super().run_constant(interpreter, op, args).values

    @impl(arith.AddiOp)
    def run_addi(self, interpreter: Interpreter, op: arith.AddiOp, args: PythonValues):
        a, b = args[0].value.data, args[1].value.data
        return (int_scalar(a + b, op.result.type, interpreter.index_bitwidth),)

    @impl(arith.SubiOp)
    def run_subi(self, interpreter: Interpreter, op: arith.SubiOp, args: PythonValues):
        a, b = args[0].value.data, args[1].value.data
        return (int_scalar(a - b, op.result.type, interpreter.index_bitwidth),)

    @impl(arith.MuliOp)
    def run_muli(self, interpreter: Interpreter, op: arith.MuliOp, args: PythonValues):
        a, b = args[0].value.data, args[1].value.data
        return (int_scalar(a * b, op.result.type, interpreter.index_bitwidth),)


@register_impls
class ScalarScf(ScfFunctions):
    """xDSL's scf functions; `scf.for`'s induction variable through `int_scalar`."""

    @impl(scf.ForOp)
    def run_for(self, interpreter: Interpreter, op: scf.ForOp, args: PythonValues):
        lb, ub, step, *loop_args = args
        loop_args = tuple(loop_args)
        iv_type, width = op.lb.type, interpreter.index_bitwidth
        for i in range(lb.value.data, ub.value.data, step.value.data):
            loop_args = interpreter.run_ssacfg_region(
                op.body, (int_scalar(i, iv_type, width), *loop_args), "for_loop"
            )
        return loop_args


@register_impls
class IndexFunctions(InterpreterFunctions):
    """The `arith` index ops Legato emits that xDSL's arith interpreter lacks (min, max, and
    divui: a reshape's runtime dim)."""

    def _pair(self, args) -> tuple[int, int]:
        return args[0].value.data, args[1].value.data

    @impl(arith.MinSIOp)
    def run_minsi(self, interpreter, op: arith.MinSIOp, args):
        a, b = self._pair(args)
        return (int_scalar(min(a, b), op.result.type, interpreter.index_bitwidth),)

    @impl(arith.MaxSIOp)
    def run_maxsi(self, interpreter, op: arith.MaxSIOp, args):
        a, b = self._pair(args)
        return (int_scalar(max(a, b), op.result.type, interpreter.index_bitwidth),)

    @impl(arith.DivUIOp)
    def run_divui(self, interpreter, op: arith.DivUIOp, args):
        a, b = self._pair(args)
        if b == 0:
            raise ZeroDivisionError(f"arith.divui by zero: {op}")
        mask = (1 << interpreter.index_bitwidth) - 1  # unsigned: the operands' bits
        return (scalar_attr((a & mask) // (b & mask), op.result.type, interpreter.index_bitwidth),)


def base_functions() -> tuple[InterpreterFunctions, ...]:
    """arith (index math), scf (loops, ifs), builtin (casts)."""
    return (ScalarArith(), IndexFunctions(), ScalarScf(), BuiltinFunctions())
