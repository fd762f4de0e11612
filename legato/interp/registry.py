"""The xDSL interpreter functions every level registers besides its own dialect's."""

from __future__ import annotations

from xdsl.interpreter import InterpreterFunctions
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.builtin import BuiltinFunctions
from xdsl.interpreters.scf import ScfFunctions


def base_functions() -> tuple[InterpreterFunctions, ...]:
    """arith (index math), scf (loops, ifs), builtin (casts)."""
    return (ArithFunctions(), ScfFunctions(), BuiltinFunctions())
