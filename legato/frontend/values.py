"""The frontend's values: tensors (`IRValue`), runtime indices (`IRScalar`) and the region a
value was made in (`RegionState`), with how errors name them (`describe`, `op_symbol`).

They live here, below `codegen` and its `runtime` mixin, because both build and inspect them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from xdsl.ir import Block, SSAValue

import legato.dialects.legato as L
from legato.context import ExecContext
from legato.frontend.source import FunctionSource
from legato.types import DType, TensorSpec

# --------------------------------------------------------------------------------------------
# Values


@dataclass(eq=False)
class IRValue:
    """A tensor value of the kernel: an SSA value, its type, and where it was made.

    `region` is the `RegionState` that defined it (None for kernel arguments, which every region
    may use). A value yielded out of a region is an `IRValue` with `yielded_from` set to the
    context it may be used in (later regions of that context receive it as an input).
    """

    ssa: SSAValue
    spec: TensorSpec
    region: RegionState | None = None
    name: str | None = None
    yielded_from: ExecContext | None = None
    defined_at: ast.AST | None = None
    source: FunctionSource | None = None

    @property
    def type(self) -> L.TensorType:
        return self.ssa.type  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<tensor {self.name or '?'}: {self.spec}>"


@dataclass(eq=False)
class RegionState:
    """A `with <ctx>:` region being emitted."""

    ctx: ExecContext
    block: Block
    node: ast.With
    source: FunctionSource
    inputs: list[SSAValue] = field(default_factory=list)  # operands of the legato.on
    input_args: dict[int, IRValue] = field(default_factory=dict)  # id(outer ssa) -> block arg
    yields: list[tuple[str, IRValue]] = field(default_factory=list)
    yield_node: ast.AST | None = None


@dataclass(eq=False)
class IRScalar:
    """A runtime index: `const + sum(coef * atom)` (atoms are `index` SSA values)."""

    terms: tuple[tuple[SSAValue, int], ...]
    const: int = 0
    region: object = None  # the RegionState its atoms belong to
    name: str | None = None

    @staticmethod
    def atom(ssa: SSAValue, region) -> IRScalar:
        return IRScalar(((ssa, 1),), 0, region)

    def __repr__(self) -> str:
        return f"<runtime index {self.name or '?'}>"


def describe(value) -> str:
    if isinstance(value, IRScalar):
        return f"runtime index '{value.name}'" if value.name else "a runtime index"
    if isinstance(value, IRValue):
        return f"tensor '{value.name}' ({value.spec})" if value.name else f"a tensor ({value.spec})"
    if isinstance(value, ExecContext):
        return f"context {value}"
    if value is None:
        return "None"
    if isinstance(value, (int, float, str, tuple, list, TensorSpec, DType)):
        return (
            f"{type(value).__name__} {value!r}" if not isinstance(value, TensorSpec) else str(value)
        )
    return type(value).__name__


def op_symbol(op) -> str:
    return {
        ast.Add: "+",
        ast.Sub: "-",
        ast.Mult: "*",
        ast.Div: "/",
        ast.FloorDiv: "//",
        ast.Mod: "%",
        ast.Pow: "**",
        ast.LShift: "<<",
        ast.RShift: ">>",
        ast.BitOr: "|",
        ast.BitAnd: "&",
        ast.BitXor: "^",
        ast.MatMult: "@",
        ast.USub: "-",
        ast.UAdd: "+",
        ast.Not: "not",
        ast.Invert: "~",
    }.get(type(op), type(op).__name__)
