"""The xDSL interpreter functions every level registers besides its own dialect's."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.interpreter import InterpreterFunctions, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.builtin import BuiltinFunctions, scalar_attr
from xdsl.interpreters.scf import ScfFunctions


@register_impls
class IndexFunctions(InterpreterFunctions):
    """The `arith` index ops Legato emits that xDSL's arith interpreter lacks (min, max, and
    divui: a reshape's runtime dim)."""

    def _pair(self, args) -> tuple[int, int]:
        return args[0].value.data, args[1].value.data

    @impl(arith.MinSIOp)
    def run_minsi(self, interpreter, op: arith.MinSIOp, args):
        a, b = self._pair(args)
        return (scalar_attr(min(a, b), op.result.type, interpreter.index_bitwidth),)

    @impl(arith.MaxSIOp)
    def run_maxsi(self, interpreter, op: arith.MaxSIOp, args):
        a, b = self._pair(args)
        return (scalar_attr(max(a, b), op.result.type, interpreter.index_bitwidth),)

    @impl(arith.DivUIOp)
    def run_divui(self, interpreter, op: arith.DivUIOp, args):
        a, b = self._pair(args)
        if b == 0:
            raise ZeroDivisionError(f"arith.divui by zero: {op}")
        mask = (1 << interpreter.index_bitwidth) - 1  # unsigned: the operands' bits
        return (scalar_attr((a & mask) // (b & mask), op.result.type, interpreter.index_bitwidth),)


def base_functions() -> tuple[InterpreterFunctions, ...]:
    """arith (index math), scf (loops, ifs), builtin (casts)."""
    return (ArithFunctions(), IndexFunctions(), ScfFunctions(), BuiltinFunctions())
