"""The `legato` dialect: what the frontend emits (`OutputType.MLIR`).

Value-semantics tensors whose type carries shape (static or bounded dynamic dims), element type
and memory space; a kernel op with typed arguments; context ops (`legato.on`) whose regions run
on the top sequencer, one core or every core; data movement between contexts; tensor ops with
torch-like semantics. See docs/architecture.md, "Level 1".

Type syntax:      `!legato.tensor<[?10, 256], bf16, shared_dram>`  (`?N`: dynamic, bound N)
Context syntax:   `top`, `core(3)`, `all_cores`; as an attribute `#legato.context<core(3)>`.

Every tensor op's builder infers its result type when `result_type` is omitted, with the same
function its verifier uses, so the frontend and the verifier cannot disagree.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BFloat16Type,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
    Operation,
    OpResult,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from legato import opset
from legato.dialects.debug import AssertOpBase, PrintOpBase
from legato.dialects.fast_build import FastBuildOperation, install_fast_accessors
from legato.dialects.shared_attrs import i64_array, int_attr, str_attr
from legato.dialects.slicing import DYNAMIC, join_mixed, parse_sliced, print_sliced, split_mixed
from legato.types import (
    CORE_SPACES,
    MEMORY_SPACES,
    SHARED_SPACES,
    Dim,
    DType,
    TensorSpec,
    dtype_from_name,
    parse_dim,
)

# ---------------------------------------------------------------------------------------------
# Element types
# ---------------------------------------------------------------------------------------------

ELEMENT_TYPES: dict[str, TypeAttribute] = {
    "bf16": BFloat16Type(),
    "f16": Float16Type(),
    "f32": Float32Type(),
    "i32": i32,
    "i64": i64,
    "i8": i8,
    "i1": i1,
}
"""The builtin element types a tensor or buffer may hold, by their IR spelling."""

#: the classes of ELEMENT_TYPES' attributes (type attributes all)
_ELEMENT_TYPE_CLASSES = frozenset(type(t) for t in ELEMENT_TYPES.values())


def element_type(dtype: DType | str | Attribute) -> TypeAttribute:
    """The builtin type attribute of a `DType` (or of its name, `"bf16"`); attributes pass."""
    if type(dtype) in _ELEMENT_TYPE_CLASSES:  # one of ELEMENT_TYPES' (the common case)
        return dtype
    if isinstance(dtype, Attribute):
        assert isinstance(dtype, TypeAttribute)
        return dtype
    name = dtype.name if isinstance(dtype, DType) else dtype
    if name not in ELEMENT_TYPES:
        raise ValueError(
            f"unsupported element type {name!r}; expected one of {list(ELEMENT_TYPES)}"
        )
    return ELEMENT_TYPES[name]


def element_type_name(attr: Attribute) -> str:
    """The IR spelling (`bf16`, `f32`, ...) of a builtin element type."""
    for name, t in ELEMENT_TYPES.items():
        if t is attr:  # the shared instance (the types are distinct: the same answer)
            return name
    for name, t in ELEMENT_TYPES.items():
        if t == attr:
            return name
    raise ValueError(f"unsupported element type {attr}")


def dtype_of_element_type(attr: Attribute) -> DType:
    """The `legato.types.DType` of a builtin element type."""
    return dtype_from_name(element_type_name(attr))


def is_float_type(attr: Attribute) -> bool:
    return isinstance(attr, BFloat16Type | Float16Type | Float32Type | Float64Type)


# ---------------------------------------------------------------------------------------------
# Shaped types: shared by !legato.tensor and !core.buf
# ---------------------------------------------------------------------------------------------

DimLike = int | tuple[int, int] | list[int] | Dim

# (class, dims, element type, memory) -> the one instance of that type (`ShapedSpaceType`)
_SHAPED_TYPES: dict[tuple, ShapedSpaceType] = {}


def remembers_hash(cls: type) -> type:
    """A concrete `ShapedSpaceType` class (after `irdl_attr_definition`) whose instances
    remember their hash: the dataclass's value hash (the same value, so every dict and set
    of them is as before), of the shape's and bounds' attribute arrays, the element type and
    the memory space, recomputed recursively on every lookup otherwise (the frontend's verify
    keys and every map of types hash them). The instances are immutable; the remembered
    value is not pickled (`ShapedSpaceType.__getstate__`)."""
    value_hash = cls.__hash__

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = value_hash(self)
        return h

    cls.__hash__ = __hash__  # type: ignore[method-assign]
    return cls


def _to_dim(entry: DimLike) -> Dim:
    if isinstance(entry, Dim):
        return entry
    return parse_dim(entry)


@dataclass(frozen=True, init=False)
class ShapedSpaceType(ParametrizedAttribute, TypeAttribute, ABC):
    """Base of `!legato.tensor` and `!core.buf`: shape with bounded dynamic dims, element
    type and memory space. Syntax of the parameters: `<[?10, 256], bf16, sram>`.

    Parameters: `shape` (static size, or -1 for a dynamic dim), `bounds` (upper bound of each
    dim; equal to the size when static), `element_type` (a builtin type), `memory` (a memory
    space name, see `legato.types.MEMORY_SPACES`).

    Build with `T(dims, element_type, memory)`: `dims` entries are ints, `(-1, bound)` or
    `legato.types.Dim`; `element_type` a `DType`, its name or a builtin type attribute.
    """

    shape: ArrayAttr[IntAttr]
    bounds: ArrayAttr[IntAttr]
    element_type: Attribute
    memory: StringAttr

    # One instance per distinct (class, dims, element type, memory): attributes are immutable
    # values compared by value, so sharing one is invisible, and building and verifying the
    # type and its 2 * rank + 3 parameter attributes again was ~15% of a big kernel's compile
    # (the builders and verifiers infer result types all the time). `new` (the parser, generic
    # rebuilds) and unpickling call `__new__` without arguments and get a fresh instance.
    def __new__(cls, *args, **kwargs):
        if not args and not kwargs:
            return super().__new__(cls)
        key = cls._instance_key(*args, **kwargs)
        hit = _SHAPED_TYPES.get(key)
        if hit is not None:
            return hit
        fresh = super().__new__(cls)
        object.__setattr__(fresh, "_key", key)  # taken by __init__ once it has verified
        return fresh

    @classmethod
    def _instance_key(
        cls,
        dims: Iterable[DimLike],
        element_type_: DType | str | Attribute,
        memory: str | StringAttr,
    ) -> tuple:
        return (
            cls,
            tuple(_to_dim(d) for d in dims),
            element_type(element_type_),
            memory.data if isinstance(memory, StringAttr) else memory,
        )

    def __init__(
        self,
        dims: Iterable[DimLike],
        element_type_: DType | str | Attribute,
        memory: str | StringAttr,
    ):
        if "memory" in self.__dict__:
            return  # a shared instance, built and verified already
        key = self.__dict__.pop("_key", None) or self._instance_key(dims, element_type_, memory)
        _, ds, elem, space = key
        super().__init__(
            ArrayAttr([IntAttr(-1 if d.is_dynamic else d.size) for d in ds]),
            ArrayAttr([IntAttr(d.bound) for d in ds]),
            elem,
            memory if isinstance(memory, StringAttr) else StringAttr(space),
        )
        if len(_SHAPED_TYPES) >= 1 << 16:
            _SHAPED_TYPES.clear()  # a bound on memory, not on correctness
        _SHAPED_TYPES[key] = self

    # -- conversions -------------------------------------------------------------------------

    @classmethod
    def from_spec(cls, spec: TensorSpec):
        """The type of a `legato.types.TensorSpec` (same dims, dtype and memory)."""
        return cls(spec.dims, spec.dtype, spec.memory)

    def to_spec(self) -> TensorSpec:
        """The `legato.types.TensorSpec` of this type."""
        return TensorSpec(self.dtype, self.dims, self.memory.data)

    # -- accessors ---------------------------------------------------------------------------

    @property
    def dims(self) -> tuple[Dim, ...]:
        # remembered on the (immutable) type: not a parameter, so neither compared nor printed
        dims = self.__dict__.get("_dims")
        if dims is None:
            dims = self.__dict__["_dims"] = tuple(
                Dim(None if s.data == -1 else s.data, b.data)
                for s, b in zip(self.shape.data, self.bounds.data, strict=True)
            )
        return dims

    @property
    def rank(self) -> int:
        return len(self.shape.data)

    def get_num_dims(self) -> int:
        return self.rank

    def get_shape(self) -> tuple[int, ...]:
        """Static sizes, -1 for a dynamic dim."""
        return tuple(s.data for s in self.shape.data)

    def get_bounds(self) -> tuple[int, ...]:
        return tuple(b.data for b in self.bounds.data)

    def get_element_type(self) -> Attribute:
        return self.element_type

    @property
    def dtype(self) -> DType:
        return dtype_of_element_type(self.element_type)

    @property
    def space(self) -> str:
        return self.memory.data

    @property
    def dynamic_dims(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.shape.data) if s.data == -1)

    @property
    def is_static(self) -> bool:
        return not self.dynamic_dims

    @property
    def num_elements_bound(self) -> int:
        return math.prod(self.get_bounds())

    @property
    def max_bytes(self) -> int:
        return self.num_elements_bound * self.dtype.itemsize

    def with_memory(self, memory: str):
        return type(self)(self.dims, self.element_type, memory)

    def with_dims(self, dims: Iterable[DimLike]):
        return type(self)(dims, self.element_type, self.memory)

    def with_element_type(self, elem: DType | str | Attribute):
        return type(self)(self.dims, elem, self.memory)

    def dims_str(self) -> str:
        return "[" + ", ".join(str(d) for d in self.dims) + "]"

    def __getstate__(self) -> dict:
        # the remembered hash (`remembers_hash`) stays in this process: a string's hash, the
        # memory space's, differs between processes
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    # -- syntax ------------------------------------------------------------------------------

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return parse_shape_elem_space(parser)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.dims_str() + ", ")
            printer.print_attribute(self.element_type)
            printer.print_string(", " + self.memory.data)

    def verify(self) -> None:
        if len(self.shape.data) != len(self.bounds.data):
            raise VerifyException(f"{self.name}: shape and bounds have different ranks")
        for i, (s, b) in enumerate(zip(self.shape.data, self.bounds.data)):
            if s.data == -1:
                if b.data <= 0:
                    raise VerifyException(
                        f"{self.name}: dynamic dim {i} needs a positive bound, got {b.data}"
                    )
            elif s.data < 0:
                raise VerifyException(f"{self.name}: dim {i} has negative size {s.data}")
            elif s.data != b.data:
                raise VerifyException(
                    f"{self.name}: static dim {i} has size {s.data} but bound {b.data}"
                )
        if self.element_type not in ELEMENT_TYPES.values():
            raise VerifyException(
                f"{self.name}: unsupported element type {self.element_type}; expected one of "
                f"{', '.join(ELEMENT_TYPES)}"
            )
        if self.memory.data not in MEMORY_SPACES:
            raise VerifyException(
                f"{self.name}: unknown memory space '{self.memory.data}'; expected one of "
                f"{', '.join(MEMORY_SPACES)}"
            )


def parse_shape_elem_space(
    parser: AttrParser,
) -> tuple[ArrayAttr[IntAttr], ArrayAttr[IntAttr], Attribute, StringAttr]:
    """Parse `[?10, 256], bf16, sram` into (shape, bounds, element type, memory)."""

    def parse_dim_entry() -> tuple[int, int]:
        if parser.parse_optional_punctuation("?") is not None:
            bound = parser.parse_integer(
                allow_boolean=False,
                allow_negative=False,
                context_msg=" (the bound of a dynamic dim, as in ?128)",
            )
            return (-1, bound)
        size = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return (size, size)

    entries = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parse_dim_entry)
    parser.parse_punctuation(",")
    pos = parser.pos
    elem = parser.parse_type()
    if elem not in ELEMENT_TYPES.values():
        parser.raise_error(
            f"unsupported element type {elem}; expected one of {', '.join(ELEMENT_TYPES)}",
            pos,
            parser.pos,
        )
    parser.parse_punctuation(",")
    pos = parser.pos
    memory = parser.parse_identifier(context_msg=" (a memory space)")
    if memory not in MEMORY_SPACES:
        parser.raise_error(
            f"unknown memory space '{memory}'; expected one of {', '.join(MEMORY_SPACES)}",
            pos,
            parser.pos,
        )
    return (
        ArrayAttr([IntAttr(s) for s, _ in entries]),
        ArrayAttr([IntAttr(b) for _, b in entries]),
        elem,
        StringAttr(memory),
    )


@remembers_hash
@irdl_attr_definition(init=False)
class TensorType(ShapedSpaceType):
    """`!legato.tensor<[?10, 256], bf16, shared_dram>`: a value-semantics tensor.

    `TensorType(dims, element_type, memory)`, `TensorType.from_spec(spec)`, `t.to_spec()`.
    """

    name = "legato.tensor"


# ---------------------------------------------------------------------------------------------
# Execution contexts
# ---------------------------------------------------------------------------------------------

CONTEXT_KINDS = ("top", "core", "all_cores")


@irdl_attr_definition(init=False)
class ContextAttr(ParametrizedAttribute):
    """An execution context: `top`, `core(i)` or `all_cores`.

    Attribute syntax `#legato.context<core(0)>`; inside ops it is written bare (`on core(0)`).
    Build with `ContextAttr.top()`, `ContextAttr.core(i)`, `ContextAttr.all_cores()`, or
    `ContextAttr("core", 3)`.
    """

    name = "legato.context"

    kind: StringAttr
    index: IntAttr | NoneAttr

    def __init__(self, kind: str | StringAttr, index: int | IntAttr | NoneAttr | None = None):
        if isinstance(kind, str):
            kind = StringAttr(kind)
        if index is None:
            index = NoneAttr()
        elif isinstance(index, int):
            index = IntAttr(index)
        super().__init__(kind, index)

    @staticmethod
    def top() -> ContextAttr:
        return _shared_context("top", None)

    @staticmethod
    def core(i: int) -> ContextAttr:
        return _shared_context("core", i) if type(i) is int else ContextAttr("core", i)

    @staticmethod
    def all_cores() -> ContextAttr:
        return _shared_context("all_cores", None)

    @property
    def is_top(self) -> bool:
        return self.kind.data == "top"

    @property
    def is_core(self) -> bool:
        """True for `core(i)` (a single core), false for `all_cores`."""
        return self.kind.data == "core"

    @property
    def is_all_cores(self) -> bool:
        return self.kind.data == "all_cores"

    @property
    def core_index(self) -> int | None:
        return self.index.data if isinstance(self.index, IntAttr) else None

    @property
    def spelling(self) -> str:
        """`top`, `core(3)` or `all_cores`."""
        if self.is_core:
            return f"core({self.core_index})"
        return self.kind.data

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            ctx = parse_context(parser)
        return (ctx.kind, ctx.index)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.spelling)

    def verify(self) -> None:
        kind = self.kind.data
        if kind not in CONTEXT_KINDS:
            raise VerifyException(f"unknown context '{kind}'; expected top, core(i) or all_cores")
        if kind == "core":
            if not isinstance(self.index, IntAttr):
                raise VerifyException("context core(i) needs a core index")
            if self.index.data < 0:
                raise VerifyException(f"core index must be non-negative, got {self.index.data}")
        elif isinstance(self.index, IntAttr):
            raise VerifyException(f"context '{kind}' takes no core index")


#: one `ContextAttr` per (kind, core index) the builders were asked for (an immutable value:
#: the lowering names a core per op it emits, and each new attribute ran xDSL's checks)
_CONTEXTS: dict[tuple[str, int | None], ContextAttr] = {}


def _shared_context(kind: str, index: int | None) -> ContextAttr:
    attr = _CONTEXTS.get((kind, index))
    if attr is None:
        if len(_CONTEXTS) >= 1 << 12:
            _CONTEXTS.clear()
        attr = _CONTEXTS[(kind, index)] = ContextAttr(kind, index)
    return attr


def parse_context(parser: AttrParser) -> ContextAttr:
    """Parse `top`, `all_cores` or `core(i)` (bare, as written inside ops)."""
    pos = parser.pos
    kind = parser.parse_identifier(context_msg=" (a context: top, core(i) or all_cores)")
    if kind == "core":
        with parser.in_parens():
            index = parser.parse_integer(allow_boolean=False)
        if index < 0:
            parser.raise_error(f"core index must be non-negative, got {index}", pos, parser.pos)
        return ContextAttr.core(index)
    if kind in ("top", "all_cores"):
        return ContextAttr(kind)
    parser.raise_error(
        f"unknown context '{kind}'; expected top, core(i) or all_cores", pos, parser.pos
    )


def print_context(printer: Printer, ctx: ContextAttr) -> None:
    printer.print_string(ctx.spelling)


# ---------------------------------------------------------------------------------------------
# Small syntax helpers shared with the core dialect
# ---------------------------------------------------------------------------------------------


def parse_space(parser: AttrParser) -> StringAttr:
    """A bare memory-space name (`sram`); validity is checked by the verifiers."""
    return StringAttr(parser.parse_identifier(context_msg=" (a memory space)"))


def parse_nonneg_int(parser: AttrParser, what: str) -> IntAttr:
    pos = parser.pos
    value = parser.parse_integer(allow_boolean=False, context_msg=f" ({what})")
    if value < 0:
        parser.raise_error(f"{what} must be non-negative, got {value}", pos, parser.pos)
    return IntAttr(value)


def parse_scalar(parser: Parser) -> int | float:
    """An int or float literal; also `inf`, `-inf`, `nan`."""
    neg = parser.parse_optional_punctuation("-") is not None
    if parser.parse_optional_keyword("inf") is not None:
        v: int | float = math.inf
    elif parser.parse_optional_keyword("nan") is not None:
        v = math.nan
    else:
        v = parser.parse_number()
    return -v if neg else v


def format_scalar(v: float) -> str:
    """Inverse of `parse_scalar` (floats keep a `.`/exponent so they re-parse as floats)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        mantissa, e, exponent = text.partition("e")
        if e and "." not in mantissa:
            text = f"{mantissa}.0e{exponent}"  # MLIR's float literal needs the `.`: 1.0e-06
        return text
    return str(v)


def parse_defined_operand(parser: Parser, msg: str = "expected an operand") -> SSAValue:
    """An operand that is already defined (its type is taken from its definition)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return parser.parse_operand(msg)


_int_attr, _str_attr = int_attr, str_attr


def _i64_array(values: Sequence[int] | DenseArrayBase) -> DenseArrayBase:
    if isinstance(values, DenseArrayBase):
        return values
    return i64_array(values)


def _parse_int_list(parser: Parser, allow_question: bool = False) -> list[int]:
    def entry() -> int:
        if allow_question and parser.parse_optional_punctuation("?") is not None:
            return -1
        return parser.parse_integer(allow_boolean=False)

    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, entry)


def _print_int_list(printer: Printer, values: Iterable[int], question: bool = False) -> None:
    with printer.in_square_brackets():
        printer.print_list(
            values, lambda v: printer.print_string("?" if question and v == -1 else str(v))
        )


def verify_memory_space(space: str, what: str, allowed: Sequence[str] = MEMORY_SPACES) -> None:
    if space not in MEMORY_SPACES:
        raise VerifyException(
            f"{what}: unknown memory space '{space}'; expected one of {', '.join(MEMORY_SPACES)}"
        )
    if space not in allowed:
        raise VerifyException(
            f"{what}: memory space '{space}' is not allowed here; expected one of "
            f"{', '.join(allowed)}"
        )


def _tensor(value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{what} must be a !legato.tensor, got {value.type}")
    return value.type


# ---------------------------------------------------------------------------------------------
# Shape inference (shared by builders and verifiers)
# ---------------------------------------------------------------------------------------------


def _fmt_dims(dims: Sequence[Dim]) -> str:
    return "[" + ", ".join(map(str, dims)) + "]"


def broadcast_dim(a: Dim, b: Dim) -> Dim | None:
    """Torch broadcasting of one dim pair, or None when they do not broadcast.

    Equal dims stay; a static 1 takes the other; two dynamic dims are equal at run time
    (bound = the smaller bound); a dynamic dim against a static N > 1 is N (requires N <= bound).
    """
    if a == b:
        return a
    if a.size == 1:
        return b
    if b.size == 1:
        return a
    if a.is_dynamic and b.is_dynamic:
        return Dim(None, min(a.bound, b.bound))
    if a.is_dynamic and b.size <= a.bound:
        return b
    if b.is_dynamic and a.size <= b.bound:
        return a
    return None


def broadcast_shapes(a: Sequence[Dim], b: Sequence[Dim]) -> tuple[Dim, ...]:
    """Torch/numpy broadcasting of two shapes (aligned on the right). Raises VerifyException."""
    rank = max(len(a), len(b))
    pa = (Dim(1, 1),) * (rank - len(a)) + tuple(a)
    pb = (Dim(1, 1),) * (rank - len(b)) + tuple(b)
    out: list[Dim] = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        d = broadcast_dim(x, y)
        if d is None:
            raise VerifyException(
                f"shapes {_fmt_dims(a)} and {_fmt_dims(b)} are not broadcastable "
                f"(dim {i}: {x} vs {y})"
            )
        out.append(d)
    return tuple(out)


def infer_elementwise(lhs: TensorType, rhs: TensorType) -> TensorType:
    if lhs.element_type != rhs.element_type:
        raise VerifyException(
            f"operands have different element types ({lhs.element_type} and "
            f"{rhs.element_type}); insert a legato.cast"
        )
    return TensorType(broadcast_shapes(lhs.dims, rhs.dims), lhs.element_type, lhs.memory)


def infer_matmul(lhs: TensorType, rhs: TensorType) -> TensorType:
    if lhs.rank < 2 or rhs.rank != 2:
        raise VerifyException(
            f"legato.matmul expects lhs [..., M, K] and rhs [K, N], got {lhs.dims_str()} "
            f"and {rhs.dims_str()}"
        )
    k_l, k_r = lhs.dims[-1], rhs.dims[0]
    if k_l != k_r:
        raise VerifyException(
            f"legato.matmul inner dimensions differ: lhs {lhs.dims_str()} has K = {k_l}, "
            f"rhs {rhs.dims_str()} has K = {k_r}"
        )
    if lhs.element_type != rhs.element_type:
        raise VerifyException(
            f"legato.matmul operands have different element types ({lhs.element_type} and "
            f"{rhs.element_type})"
        )
    return TensorType((*lhs.dims[:-1], rhs.dims[1]), lhs.element_type, lhs.memory)


def normalize_dim(dim: int, rank: int, what: str = "dim") -> int:
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise VerifyException(f"{what} {dim} is out of range for rank {rank}")
    return dim % max(rank, 1)


def infer_reduce(x: TensorType, dim: int, keepdim: bool) -> TensorType:
    d = normalize_dim(dim, x.rank)
    dims = list(x.dims)
    if keepdim:
        dims[d] = Dim(1, 1)
    else:
        del dims[d]
    return x.with_dims(dims)


def infer_transpose(x: TensorType, perm: Sequence[int]) -> TensorType:
    if sorted(perm) != list(range(x.rank)):
        raise VerifyException(
            f"permutation {list(perm)} is not a permutation of the {x.rank} dims of {x.dims_str()}"
        )
    return x.with_dims([x.dims[p] for p in perm])


def infer_slice(
    x: TensorType, offsets: Sequence[int], sizes: Sequence[int], strides: Sequence[int]
) -> TensorType:
    if not (len(offsets) == len(sizes) == len(strides) == x.rank):
        raise VerifyException(
            f"slice needs one offset, size and stride per dim of {x.dims_str()}, got "
            f"{len(offsets)}, {len(sizes)} and {len(strides)}"
        )
    out: list[Dim] = []
    for i, (d, o, s, st) in enumerate(zip(x.dims, offsets, sizes, strides)):
        if o < 0 or st <= 0:
            raise VerifyException(f"slice dim {i}: offset must be >= 0 and stride > 0")
        if s == -1:
            if not d.is_dynamic or o != 0 or st != 1:
                raise VerifyException(
                    f"slice dim {i}: size '?' (the whole runtime extent) needs a dynamic dim, "
                    "offset 0 and stride 1"
                )
            out.append(d)
            continue
        if s < 0:
            raise VerifyException(f"slice dim {i}: negative size {s}")
        if s > 0 and o + (s - 1) * st >= d.bound:
            raise VerifyException(
                f"slice dim {i}: offset {o}, size {s}, stride {st} reads past the "
                f"{'bound' if d.is_dynamic else 'size'} {d.bound}"
            )
        out.append(Dim(s, s))
    return x.with_dims(out)


def infer_cat(inputs: Sequence[TensorType], dim: int) -> TensorType:
    if not inputs:
        raise VerifyException("legato.cat needs at least one input")
    first = inputs[0]
    d = normalize_dim(dim, first.rank)
    size, bound, dynamic = 0, 0, False
    for i, t in enumerate(inputs):
        if t.rank != first.rank or t.element_type != first.element_type:
            raise VerifyException(
                f"legato.cat input {i} ({t}) does not match input 0 ({first}) in rank or "
                "element type"
            )
        for j, (a, b) in enumerate(zip(t.dims, first.dims)):
            if j != d and a != b:
                raise VerifyException(
                    f"legato.cat inputs differ in dim {j} ({a} vs {b}); only dim {d} may differ"
                )
        dd = t.dims[d]
        dynamic |= dd.is_dynamic
        bound += dd.bound
        size += dd.bound
    dims = list(first.dims)
    dims[d] = Dim(None, bound) if dynamic else Dim(size, size)
    return first.with_dims(dims)


def verify_broadcast_to(x: TensorType, target: TensorType) -> None:
    if target.rank < x.rank:
        raise VerifyException(
            f"cannot broadcast {x.dims_str()} to the smaller rank {target.dims_str()}"
        )
    for i, d in enumerate(x.dims):
        t = target.dims[target.rank - x.rank + i]
        if d == t or d.size == 1:
            continue
        if d.is_dynamic and not t.is_dynamic and t.size <= d.bound:
            continue
        raise VerifyException(f"cannot broadcast {x.dims_str()} to {target.dims_str()}")
    if x.element_type != target.element_type or x.memory != target.memory:
        raise VerifyException(
            "legato.broadcast_to keeps the element type and memory space of its input"
        )


def verify_reshape(x: TensorType, r: TensorType) -> None:
    if x.element_type != r.element_type or x.memory != r.memory:
        raise VerifyException("legato.reshape keeps the element type and memory space")
    if x.is_static != r.is_static or x.num_elements_bound != r.num_elements_bound:
        raise VerifyException(
            f"legato.reshape cannot reshape {x.dims_str()} to {r.dims_str()}: the element "
            "counts (bounds for dynamic dims) must agree, and both or neither be dynamic"
        )


def _check_result(op: Operation, actual: Attribute, expected: Attribute) -> None:
    if actual != expected:
        raise VerifyException(f"{op.name}: result type {actual} does not match expected {expected}")


# ---------------------------------------------------------------------------------------------
# Structure: kernel, context regions, terminators
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class KernelOp(FastBuildOperation):
    """`legato.kernel @name(%a : T, ...) [attributes {target = "bertha"}] { ... legato.return }`

    Builder: `KernelOp(name, arg_types, body=None, target=None)`; without `body` a region with
    one block whose arguments have `arg_types` is created (`op.body.block.args`).
    """

    name = "legato.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    target = opt_prop_def(StringAttr)
    arg_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])
    body = region_def()

    # NoTerminator: the verifier itself requires legato.return, with a clearer message.
    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator())

    def __init__(
        self,
        name: str,
        arg_types: Sequence[Attribute] | FunctionType,
        body: Region | None = None,
        target: str | None = None,
        arg_attrs: ArrayAttr[DictionaryAttr] | None = None,
    ):
        ft = (
            arg_types
            if isinstance(arg_types, FunctionType)
            else FunctionType.from_lists(list(arg_types), [])
        )
        if body is None:
            body = Region(Block(arg_types=ft.inputs.data))
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": ft,
                "target": StringAttr(target) if target is not None else None,
                "arg_attrs": arg_attrs,
            },
            regions=[body],
        )

    @property
    def args(self) -> tuple[BlockArgument, ...]:
        return self.body.block.args

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name, inputs, outputs, region, extra, arg_attrs, _ = parse_func_op_like(
            parser, reserved_attr_names=("sym_name", "function_type", "arg_attrs")
        )
        if outputs:
            parser.raise_error("legato.kernel has no results (outputs are written in place)")
        target = None
        attrs: dict[str, Attribute] = dict(extra.data) if extra is not None else {}
        if isinstance(attrs.get("target"), StringAttr):
            target = attrs.pop("target").data  # type: ignore[union-attr]
        op = KernelOp(name, inputs, region, target, arg_attrs)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        attrs = dict(self.attributes)
        if self.target is not None:
            attrs["target"] = self.target
        print_func_op_like(
            printer,
            self.sym_name,
            self.function_type,
            self.body,
            attrs,
            arg_attrs=self.arg_attrs,
            reserved_attr_names=("sym_name", "function_type", "arg_attrs"),
        )

    def verify_(self) -> None:
        if self.function_type.outputs.data:
            raise VerifyException("legato.kernel has no results (outputs are written in place)")
        if len(self.body.blocks) != 1:
            raise VerifyException("legato.kernel: the body must be a single block")
        block = self.body.block
        if tuple(block.arg_types) != tuple(self.function_type.inputs.data):
            raise VerifyException(
                "legato.kernel: entry block argument types differ from the signature"
            )
        for i, t in enumerate(block.arg_types):
            if not isinstance(t, TensorType | IntegerType | IndexType | Float32Type):
                raise VerifyException(f"legato.kernel argument {i} has unsupported type {t}")
        last = block.last_op
        if not isinstance(last, ReturnOp):
            raise VerifyException("legato.kernel body must end with legato.return")


@irdl_op_definition
class ReturnOp(FastBuildOperation):
    """`legato.return`: terminator of a `legato.kernel`. Builder: `ReturnOp()`."""

    name = "legato.return"
    traits = traits_def(IsTerminator(), HasParent(KernelOp))
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class YieldOp(FastBuildOperation):
    """`legato.yield [%v, ... : T, ...]`: terminator of a `legato.on` region; its operands
    become the results of the `legato.on`. Builder: `YieldOp(*values)`."""

    name = "legato.yield"
    values = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(OnOp)))
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])


def _value_anchor(value: SSAValue) -> Operation | None:
    if isinstance(value, OpResult):
        return value.op
    assert isinstance(value, BlockArgument)
    return value.block.parent_op()


def _is_inside(op: Operation | None, ancestor: Operation) -> bool:
    while op is not None:
        if op is ancestor:
            return True
        op = op.parent_op()
    return False


@irdl_op_definition
class OnOp(FastBuildOperation):
    """`%r = legato.on <ctx> [(%x = %v, ...)] [-> (T, ...)] { ... legato.yield %y : T }`

    A region executed in context `<ctx>` (`top`, `core(i)`, `all_cores`). Each input `%v` (a
    result of an earlier `legato.on` of the same context) is bound to block argument `%x` of the
    same type. The results are the values of the region's `legato.yield`.

    Builder: `OnOp(ctx, inputs=(), result_types=(), body=None)`; `ctx` is a `ContextAttr` or its
    spelling (`"top"`, `"core(0)"`, `"all_cores"`). Without `body` a block with one argument per
    input is created (`op.body.block`). Scoping rule (verified): a value used inside must be
    defined inside, be a block argument of this region, or a `legato.kernel` argument.
    """

    name = "legato.on"

    ctx = prop_def(ContextAttr)
    inputs = var_operand_def()
    res = var_result_def()
    body = region_def()

    # NoTerminator: the verifier itself requires legato.yield, with a clearer message.
    traits = traits_def(NoTerminator())

    def __init__(
        self,
        ctx: ContextAttr | str,
        inputs: Sequence[SSAValue | Operation] = (),
        result_types: Sequence[Attribute] = (),
        body: Region | None = None,
    ):
        if isinstance(ctx, str):
            ctx = context_from_str(ctx)
        if body is None:
            body = Region(Block(arg_types=[SSAValue.get(v).type for v in inputs]))
        super().__init__(
            operands=[inputs],
            result_types=[result_types],
            properties={"ctx": ctx},
            regions=[body],
        )

    @classmethod
    def parse(cls, parser: Parser) -> OnOp:
        ctx = parse_context(parser)
        args: list[Parser.Argument] = []
        inputs: list[SSAValue] = []
        if parser.parse_optional_punctuation("(") is not None:

            def assignment() -> None:
                arg = parser.parse_argument(expect_type=False)
                parser.parse_punctuation("=")
                value = parse_defined_operand(
                    parser, "expected an input value (a result of an earlier legato.on)"
                )
                inputs.append(value)
                args.append(arg.resolve(value.type))

            assignment()
            while parser.parse_optional_punctuation(",") is not None:
                assignment()
            parser.parse_punctuation(")")
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            result_types = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_type
            )
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region(args)
        op = OnOp(ctx, inputs, result_types, body)
        if attrs is not None:
            op.attributes |= attrs.data
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        print_context(printer, self.ctx)
        if self.inputs:
            printer.print_string(" (")
            printer.print_list(
                zip(self.body.block.args, self.inputs),
                lambda p: (
                    printer.print_block_argument(p[0], print_type=False),
                    printer.print_string(" = "),
                    printer.print_ssa_value(p[1]),
                ),
            )
            printer.print_string(")")
        if self.res:
            printer.print_string(" -> (")
            printer.print_list(self.result_types, printer.print_attribute)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=True)

    def verify_(self) -> None:
        where = f"legato.on {self.ctx.spelling}"
        if len(self.body.blocks) != 1:
            raise VerifyException(f"{where}: the region must be a single block")
        block = self.body.block
        if tuple(block.arg_types) != tuple(v.type for v in self.inputs):
            raise VerifyException(
                f"{where}: the region needs one block argument per input, of the input's type"
            )
        for i, v in enumerate(self.inputs):
            owner = v.owner if isinstance(v, OpResult) else None
            if not isinstance(owner, OnOp) or owner is self:
                raise VerifyException(
                    f"{where}: input {i} must be a result of an earlier legato.on of the same "
                    "context; values cross regions only by `legato.yield`"
                )
            if owner.ctx != self.ctx:
                raise VerifyException(
                    f"{where}: input {i} comes from legato.on {owner.ctx.spelling}; inputs must "
                    "come from an earlier legato.on of the same context (data moves between "
                    "contexts only by request_load/receive or memcpy)"
                )
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException(f"{where}: the region must end with legato.yield")
        if tuple(v.type for v in last.values) != tuple(self.result_types):
            raise VerifyException(
                f"{where}: result types ({', '.join(map(str, self.result_types))}) differ from "
                f"the types yielded ({', '.join(str(v.type) for v in last.values)})"
            )
        # The scoping rule.
        for op in self.body.walk():
            for operand in op._operands:  # noqa: SLF001 (the tuple `operands` views)
                anchor = _value_anchor(operand)
                if anchor is not None and _is_inside(anchor, self):
                    continue
                if isinstance(operand, BlockArgument) and isinstance(anchor, KernelOp):
                    continue
                what = f"%{operand.name_hint}" if operand.name_hint else "a value"
                raise VerifyException(
                    f"{where}: {what} used by {op.name} is defined outside this region; values "
                    "cross regions only by `legato.yield` (yield it from an earlier legato.on "
                    "of the same context and pass it as an input)"
                )


def context_from_str(text: str) -> ContextAttr:
    """`"top"`, `"core(3)"`, `"all_cores"` -> ContextAttr."""
    text = text.strip()
    if text in ("top", "all_cores"):
        return ContextAttr(text)
    if text.startswith("core(") and text.endswith(")"):
        return ContextAttr.core(int(text[5:-1]))
    raise ValueError(f"unknown context {text!r}; expected top, core(i) or all_cores")


# ---------------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class RequestLoadOp(FastBuildOperation):
    """`legato.request_load %src to core(i)|core(%c) memory <space> queue <q> : T`

    Start a transfer of `%src` into memory `<space>` of core i; the receiver takes it with
    `legato.receive`/`legato.receive_type` on (space, q). `core(%c)` (in an `all_cores` region):
    the core whose index is the `index` value %c at run time; `target` is then `all_cores` (the
    receivers are instances of the same SPMD program).
    Builder: `RequestLoadOp(src, target, memory, queue=0)`; `target` a ContextAttr, its
    spelling, or an `index` SSA value.
    """

    name = "legato.request_load"

    src = operand_def(TensorType)
    target_core = opt_operand_def(IndexType)
    target = prop_def(ContextAttr)
    memory = prop_def(StringAttr)
    queue = prop_def(IntAttr)

    def __init__(
        self,
        src: SSAValue | Operation,
        target: ContextAttr | str,
        memory: str | StringAttr,
        queue: int | IntAttr = 0,
    ):
        core: list[SSAValue | Operation] = []
        if isinstance(target, SSAValue | Operation):
            core, target = [target], ContextAttr.all_cores()
        if isinstance(target, str):
            target = context_from_str(target)
        super().__init__(
            operands=[src, core],
            properties={"target": target, "memory": _str_attr(memory), "queue": _int_attr(queue)},
        )

    @classmethod
    def parse(cls, parser: Parser) -> RequestLoadOp:
        src = parser.parse_unresolved_operand()
        parser.parse_keyword("to")
        target: ContextAttr | UnresolvedOperand
        if parser.parse_optional_keyword("core") is not None:
            with parser.in_parens():
                o = parser.parse_optional_unresolved_operand()
                target = (
                    o
                    if o is not None
                    else ContextAttr.core(
                        parser.parse_integer(allow_boolean=False, allow_negative=False)
                    )
                )
        else:
            target = parse_context(parser)
        parser.parse_keyword("memory")
        memory = parse_space(parser)
        parser.parse_keyword("queue")
        queue = parse_nonneg_int(parser, "queue")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        if not isinstance(target, ContextAttr):
            target = parser.resolve_operand(target, IndexType())
        op = RequestLoadOp(parser.resolve_operand(src, t), target, memory, queue)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.src)
        if self.target_core is not None:
            printer.print_string(" to core(")
            printer.print_ssa_value(self.target_core)
            printer.print_string(f") memory {self.memory.data}")
        else:
            printer.print_string(f" to {self.target.spelling} memory {self.memory.data}")
        printer.print_string(f" queue {self.queue.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.src.type)

    def verify_(self) -> None:
        if self.target_core is not None:
            if not self.target.is_all_cores:
                raise VerifyException(
                    "legato.request_load: a runtime core target needs target = all_cores"
                )
        elif not self.target.is_core:
            raise VerifyException(
                f"legato.request_load: target must be core(i), got {self.target.spelling}"
            )
        verify_memory_space(self.memory.data, "legato.request_load", CORE_SPACES)
        if self.memory.data == "mpu_weight":
            raise VerifyException(
                "legato.request_load: load into mpu_buffer, then receive_type as mpu_weight"
            )
        if self.queue.data < 0:
            raise VerifyException("legato.request_load: queue must be non-negative")


@irdl_op_definition
class ReceiveOp(FastBuildOperation):
    """`%r = legato.receive %like queue <q> memory <space> : T_like -> T`

    Block until the next transfer of (this core, space, q) arrived. The result has `%like`'s
    shape and element type in `space`; its runtime dims are `%like`'s.
    Builder: `ReceiveOp(like, queue, memory, result_type=None)` (inferred from `like`).
    """

    name = "legato.receive"

    like = operand_def(TensorType)
    queue = prop_def(IntAttr)
    memory = prop_def(StringAttr)
    result = result_def(TensorType)

    def __init__(
        self,
        like: SSAValue | Operation,
        queue: int | IntAttr,
        memory: str | StringAttr,
        result_type: TensorType | None = None,
    ):
        memory = _str_attr(memory)
        if result_type is None:
            like_t = SSAValue.get(like).type
            assert isinstance(like_t, TensorType)
            result_type = like_t.with_memory(memory.data)
        super().__init__(
            operands=[like],
            result_types=[result_type],
            properties={"queue": _int_attr(queue), "memory": memory},
        )

    @classmethod
    def parse(cls, parser: Parser) -> ReceiveOp:
        like = parser.parse_unresolved_operand()
        parser.parse_keyword("queue")
        queue = parse_nonneg_int(parser, "queue")
        parser.parse_keyword("memory")
        memory = parse_space(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        like_t = parser.parse_type()
        parser.parse_punctuation("->")
        res_t = parser.parse_type()
        op = ReceiveOp(parser.resolve_operand(like, like_t), queue, memory, res_t)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.like)
        printer.print_string(f" queue {self.queue.data} memory {self.memory.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.like.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        verify_memory_space(self.memory.data, "legato.receive", CORE_SPACES)
        like, res = self.like.type, self.result.type
        assert isinstance(like, TensorType) and isinstance(res, TensorType)
        if res.memory != self.memory:
            raise VerifyException(
                f"legato.receive: result memory space '{res.space}' differs from the receive "
                f"memory '{self.memory.data}'"
            )
        if res.dims != like.dims or res.element_type != like.element_type:
            raise VerifyException(
                f"legato.receive: result {res} must have the shape and element type of "
                f"%like ({like})"
            )


@irdl_op_definition
class ReceiveTypeOp(FastBuildOperation):
    """`%r = legato.receive_type [from %src] queue <q> memory <space> : [T_src ->] T`

    Like `legato.receive` with the result type given. If T's space differs from `space`
    (only `mpu_weight` received through `mpu_buffer`), the value is moved there on arrival.
    Dynamic dims come from `%src`; without `%src` T must be static.
    Builder: `ReceiveTypeOp(result_type, queue, memory, src=None)`.
    """

    name = "legato.receive_type"

    src = opt_operand_def(TensorType)
    queue = prop_def(IntAttr)
    memory = prop_def(StringAttr)
    result = result_def(TensorType)

    def __init__(
        self,
        result_type: TensorType,
        queue: int | IntAttr,
        memory: str | StringAttr,
        src: SSAValue | Operation | None = None,
    ):
        super().__init__(
            operands=[[src] if src is not None else []],
            result_types=[result_type],
            properties={"queue": _int_attr(queue), "memory": _str_attr(memory)},
        )

    @classmethod
    def parse(cls, parser: Parser) -> ReceiveTypeOp:
        src = None
        if parser.parse_optional_keyword("from") is not None:
            src = parser.parse_unresolved_operand()
        parser.parse_keyword("queue")
        queue = parse_nonneg_int(parser, "queue")
        parser.parse_keyword("memory")
        memory = parse_space(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        src_v = None
        if src is not None:
            parser.parse_punctuation("->")
            src_v = parser.resolve_operand(src, t)
            t = parser.parse_type()
        op = ReceiveTypeOp(t, queue, memory, src_v)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        if self.src is not None:
            printer.print_string(" from ")
            printer.print_ssa_value(self.src)
        printer.print_string(f" queue {self.queue.data} memory {self.memory.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        if self.src is not None:
            printer.print_attribute(self.src.type)
            printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        verify_memory_space(self.memory.data, "legato.receive_type", CORE_SPACES)
        res = self.result.type
        assert isinstance(res, TensorType)
        verify_memory_space(res.space, "legato.receive_type result", CORE_SPACES)
        if res.space != self.memory.data and not (
            res.space == "mpu_weight" and self.memory.data == "mpu_buffer"
        ):
            raise VerifyException(
                f"legato.receive_type: result memory space '{res.space}' differs from the "
                f"receive memory '{self.memory.data}'; only mpu_weight may be received through "
                "mpu_buffer"
            )
        if self.src is None:
            if not res.is_static:
                raise VerifyException(
                    f"legato.receive_type: result {res} has dynamic dims; give `from %src` "
                    "to take them from the source"
                )
        else:
            src = self.src.type
            assert isinstance(src, TensorType)
            if src.dims != res.dims or src.element_type != res.element_type:
                raise VerifyException(
                    f"legato.receive_type: result {res} must have the shape and element type "
                    f"of the source ({src})"
                )


@irdl_op_definition
class MemcpyOp(FastBuildOperation):
    """`legato.memcpy %dst, %src : T_dst, T_src`: copy `%src` into `%dst` (core memory <->
    shared memory, or within a core). Shapes agree, a dynamic dim up to its bound.
    Builder: `MemcpyOp(dst, src)`."""

    name = "legato.memcpy"

    dst = operand_def(TensorType)
    src = operand_def(TensorType)

    assembly_format = "$dst `,` $src attr-dict `:` type($dst) `,` type($src)"

    def __init__(self, dst: SSAValue | Operation, src: SSAValue | Operation):
        super().__init__(operands=[dst, src])

    def verify_(self) -> None:
        dst, src = self.dst.type, self.src.type
        assert isinstance(dst, TensorType) and isinstance(src, TensorType)
        if dst.element_type != src.element_type:
            raise VerifyException(
                f"legato.memcpy: element types differ ({dst.element_type} and "
                f"{src.element_type}); insert a legato.cast"
            )
        if dst.rank != src.rank:
            raise VerifyException(
                f"legato.memcpy: shapes {dst.dims_str()} and {src.dims_str()} differ in rank"
            )
        for i, (d, s) in enumerate(zip(dst.dims, src.dims)):
            # equal dims, or a dynamic side whose runtime extent fits: the copy moves the
            # runtime extent of %src, which must not exceed what %dst can hold.
            ok = d == s or ((d.is_dynamic or s.is_dynamic) and s.bound <= d.bound)
            if not ok:
                raise VerifyException(
                    f"legato.memcpy: shapes {dst.dims_str()} and {src.dims_str()} disagree "
                    f"in dim {i}"
                )
        if dst.space in SHARED_SPACES and src.space in SHARED_SPACES:
            raise VerifyException(
                f"legato.memcpy: cannot copy from shared memory ({src.space}) to shared memory "
                f"({dst.space}); copy through a core memory"
            )
        if dst.space == "mpu_weight":
            raise VerifyException("legato.memcpy: mpu_weight is written only by receive_type")


# ---------------------------------------------------------------------------------------------
# Tensor ops
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class MatmulOp(FastBuildOperation):
    """`%r = legato.matmul %a, %b : Ta, Tb -> Tr`: `[..., M, K] @ [K, N] -> [..., M, N]`,
    fp32 accumulation; result dtype = lhs dtype (rounded once), or `f32` for bf16 operands (the
    fp32 accumulator itself, no rounding); f32 operands multiply as three bf16 passes
    (`legato.numerics.matmul_f32_split`); result memory = lhs memory.
    Builder: `MatmulOp(lhs, rhs, result_type=None)` (inferred when omitted)."""

    name = "legato.matmul"

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(
        self,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        result_type: TensorType | None = None,
    ):
        if result_type is None:
            result_type = infer_matmul(SSAValue.get(lhs).type, SSAValue.get(rhs).type)  # type: ignore[arg-type]
        super().__init__(operands=[lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        expected = infer_matmul(self.lhs.type, self.rhs.type)  # type: ignore[arg-type]
        rt = self.result.type
        if (
            isinstance(rt, TensorType)
            and element_type_name(rt.element_type) == "f32"
            and element_type_name(expected.element_type) == "bf16"
        ):
            expected = TensorType(expected.dims, rt.element_type, expected.memory)
        _check_result(self, rt, expected)


class ElementwiseBinaryOp(FastBuildOperation, ABC):
    """Base of `legato.add/sub/mul/div/maximum/minimum`:
    `%r = legato.add %a, %b : Ta, Tb -> Tr`, torch broadcasting, same element types; the
    result is in lhs's memory. Builder: `AddOp(lhs, rhs, result_type=None)`."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(
        self,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        result_type: TensorType | None = None,
    ):
        if result_type is None:
            result_type = infer_elementwise(SSAValue.get(lhs).type, SSAValue.get(rhs).type)  # type: ignore[arg-type]
        super().__init__(operands=[lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        expected = infer_elementwise(self.lhs.type, self.rhs.type)  # type: ignore[arg-type]
        _check_result(self, self.result.type, expected)


class ElementwiseUnaryOp(FastBuildOperation, ABC):
    """Base of `legato.neg/exp/log/sqrt/rsqrt/tanh/sigmoid/silu/gelu/cos/sin`:
    `%r = legato.exp %x : T` (result type = operand type; all but neg need a float type).
    Builder: `ExpOp(x)`."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input)"
    FLOAT_ONLY: ClassVar[bool] = True

    def __init__(self, input: SSAValue | Operation):
        super().__init__(operands=[input], result_types=[SSAValue.get(input).type])

    def verify_(self) -> None:
        t = self.input.type
        assert isinstance(t, TensorType)
        if self.FLOAT_ONLY and not is_float_type(t.element_type):
            raise VerifyException(f"{self.name} needs a floating-point tensor, got {t}")


def _elementwise_class(row: opset.OpKind) -> type[IRDLOperation]:
    """The legato op class of the op table's row `row` (`legato.<name>` over the family's base,
    which holds the operands, syntax and verifier)."""
    unary = row.family == opset.UNARY
    cls = type(
        row.legato_class_name,
        (ElementwiseUnaryOp if unary else ElementwiseBinaryOp,),
        {
            "__module__": __name__,
            "__doc__": f"`legato.{row.name}`: elementwise {row.name} (`legato.opset` row).",
            "__annotations__": {"FLOAT_ONLY": ClassVar[bool], "ROW": ClassVar[opset.OpKind]},
            "name": f"legato.{row.name}",
            "FLOAT_ONLY": row.float_only,
            "ROW": row,
        },
    )
    return irdl_op_definition(cls)


ELEMENTWISE_OPS: dict[str, type[IRDLOperation]] = {
    row.name: _elementwise_class(row) for row in (*opset.legato_binary(), *opset.legato_unary())
}
"""legato name -> op class (`exp` -> `ExpOp`, `maximum` -> `MaximumOp`), from the op table."""
globals().update({c.__name__: c for c in ELEMENTWISE_OPS.values()})


@irdl_op_definition
class ClampOp(FastBuildOperation):
    """`%r = legato.clamp %x [min <lo>] [max <hi>] : T`: `minimum(maximum(x, lo), hi)` with
    scalar bounds (torch.clamp; NaN in x stays NaN; at least one bound). The bounds are
    rounded to T's element type first (the same bits as torch, rounding being monotonic).
    Builder: `ClampOp(x, lo=None, hi=None)`."""

    name = "legato.clamp"

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    lo = opt_prop_def(FloatAttr | IntegerAttr, prop_name="min")
    hi = opt_prop_def(FloatAttr | IntegerAttr, prop_name="max")
    result = result_def(T)

    traits = traits_def(Pure())

    def __init__(
        self,
        input: SSAValue | Operation,
        lo: float | None = None,
        hi: float | None = None,
    ):
        t = SSAValue.get(input).type
        assert isinstance(t, TensorType)
        super().__init__(
            operands=[input],
            result_types=[t],
            properties={"min": _bound_attr(lo, t), "max": _bound_attr(hi, t)},
        )

    @property
    def bounds(self) -> tuple[int | float | None, int | float | None]:
        """(lo, hi), None for an absent bound."""
        return tuple(b.value.data if b is not None else None for b in (self.lo, self.hi))  # type: ignore[return-value]

    @classmethod
    def parse(cls, parser: Parser) -> ClampOp:
        x = parser.parse_unresolved_operand()
        lo = parse_scalar(parser) if parser.parse_optional_keyword("min") is not None else None
        hi = parse_scalar(parser) if parser.parse_optional_keyword("max") is not None else None
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = ClampOp(parser.resolve_operand(x, t), lo, hi)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        for word, b in zip(("min", "max"), self.bounds):
            if b is not None:
                printer.print_string(f" {word} {format_scalar(b)}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)

    def verify_(self) -> None:
        t = self.input.type
        assert isinstance(t, TensorType)
        if self.lo is None and self.hi is None:
            raise VerifyException("legato.clamp needs a min or a max bound")
        for b in (self.lo, self.hi):
            if b is not None and is_float_type(t.element_type) != isinstance(b, FloatAttr):
                raise VerifyException(
                    "legato.clamp: a float tensor takes float bounds and an integer tensor "
                    f"integer bounds, got {format_scalar(b.value.data)} for {t}"
                )


def _bound_attr(v: float | None, t: TensorType) -> FloatAttr | IntegerAttr | None:
    if v is None:
        return None
    if is_float_type(t.element_type):
        return FloatAttr(float(v), Float64Type())
    if isinstance(v, float) and not v.is_integer():
        return FloatAttr(v, Float64Type())  # refused by the verifier, with the value
    return IntegerAttr(int(v), i64)


@irdl_op_definition
class CastOp(FastBuildOperation):
    """`%r = legato.cast %x : T -> T2`: convert element type (same shape and memory).
    Builder: `CastOp(x, dtype)` (`dtype` a DType, its name or a builtin type) or
    `CastOp(x, result_type=T2)`."""

    name = "legato.cast"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(
        self,
        input: SSAValue | Operation,
        dtype: DType | str | Attribute | None = None,
        result_type: TensorType | None = None,
    ):
        if result_type is None:
            assert dtype is not None, "CastOp needs a dtype or a result_type"
            t = SSAValue.get(input).type
            assert isinstance(t, TensorType)
            result_type = t.with_element_type(dtype)
        super().__init__(operands=[input], result_types=[result_type])

    def verify_(self) -> None:
        x, r = self.input.type, self.result.type
        assert isinstance(x, TensorType) and isinstance(r, TensorType)
        if x.dims != r.dims or x.memory != r.memory:
            raise VerifyException(
                "legato.cast changes only the element type; shape and memory must be kept"
            )


class ReductionOp(FastBuildOperation, ABC):
    """Base of `legato.sum/mean/amax/amin`:
    `%r = legato.sum %x dim <d> [keepdim] : T -> T2`.
    Builder: `SumOp(x, dim, keepdim=False, result_type=None)`; `dim` may be negative (it is
    stored normalized)."""

    input = operand_def(TensorType)
    dim = prop_def(IntAttr)
    keepdim = prop_def(BoolAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    FLOAT_ONLY: ClassVar[bool] = False

    def __init__(
        self,
        input: SSAValue | Operation,
        dim: int,
        keepdim: bool = False,
        result_type: TensorType | None = None,
    ):
        t = SSAValue.get(input).type
        assert isinstance(t, TensorType)
        dim = normalize_dim(dim, t.rank)
        if result_type is None:
            result_type = infer_reduce(t, dim, keepdim)
        super().__init__(
            operands=[input],
            result_types=[result_type],
            properties={"dim": IntAttr(dim), "keepdim": BoolAttr.from_bool(keepdim)},
        )

    @classmethod
    def parse(cls, parser: Parser):
        x = parser.parse_unresolved_operand()
        parser.parse_keyword("dim")
        dim = parser.parse_integer(allow_boolean=False)
        keepdim = parser.parse_optional_keyword("keepdim") is not None
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        parser.parse_punctuation("->")
        r = parser.parse_type()
        if isinstance(t, TensorType) and -t.rank <= dim < t.rank:
            dim %= t.rank
        op = cls.create(
            operands=[parser.resolve_operand(x, t)],
            result_types=[r],
            properties={"dim": IntAttr(dim), "keepdim": BoolAttr.from_bool(keepdim)},
        )
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        printer.print_string(f" dim {self.dim.data}")
        if self.keepdim.value.data:
            printer.print_string(" keepdim")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        t = self.input.type
        assert isinstance(t, TensorType)
        if not 0 <= self.dim.data < max(t.rank, 1) or t.rank == 0:
            raise VerifyException(f"{self.name}: dim {self.dim.data} is out of range for {t}")
        if self.FLOAT_ONLY and not is_float_type(t.element_type):
            raise VerifyException(f"{self.name} needs a floating-point tensor, got {t}")
        expected = infer_reduce(t, self.dim.data, bool(self.keepdim.value.data))
        _check_result(self, self.result.type, expected)


@irdl_op_definition
class SumOp(ReductionOp):
    name = "legato.sum"


@irdl_op_definition
class MeanOp(ReductionOp):
    name = "legato.mean"
    FLOAT_ONLY: ClassVar[bool] = True


@irdl_op_definition
class AmaxOp(ReductionOp):
    name = "legato.amax"


@irdl_op_definition
class AminOp(ReductionOp):
    name = "legato.amin"


class _NewShapeOp(FastBuildOperation, ABC):
    """`%r = legato.<op> %x : T -> T2`: the same values seen with another shape (subclasses say
    which shapes are allowed). Builder: `Op(x, result_type)` or `Op(x, dims=[...])`."""

    input = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(
        self,
        input: SSAValue | Operation,
        result_type: TensorType | None = None,
        dims: Sequence[DimLike] | None = None,
    ):
        if result_type is None:
            assert dims is not None, f"{type(self).__name__} needs a result_type or dims"
            t = SSAValue.get(input).type
            assert isinstance(t, TensorType)
            result_type = t.with_dims(dims)
        super().__init__(operands=[input], result_types=[result_type])


@irdl_op_definition
class ReshapeOp(_NewShapeOp):
    """`%r = legato.reshape %x : T -> T2` (same element count, bounds for dynamic dims).
    Builder: `ReshapeOp(x, result_type)` or `ReshapeOp(x, dims=[...])`."""

    name = "legato.reshape"

    def verify_(self) -> None:
        verify_reshape(self.input.type, self.result.type)  # type: ignore[arg-type]


@irdl_op_definition
class TransposeOp(FastBuildOperation):
    """`%r = legato.transpose %x [1, 0] : T -> T2`: result dim i = input dim perm[i].
    Builder: `TransposeOp(x, perm, result_type=None)`."""

    name = "legato.transpose"

    input = operand_def(TensorType)
    perm = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(
        self,
        input: SSAValue | Operation,
        perm: Sequence[int],
        result_type: TensorType | None = None,
    ):
        if result_type is None:
            result_type = infer_transpose(SSAValue.get(input).type, list(perm))  # type: ignore[arg-type]
        super().__init__(
            operands=[input], result_types=[result_type], properties={"perm": _i64_array(perm)}
        )

    @classmethod
    def parse(cls, parser: Parser) -> TransposeOp:
        x = parser.parse_unresolved_operand()
        perm = _parse_int_list(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        parser.parse_punctuation("->")
        r = parser.parse_type()
        op = TransposeOp(parser.resolve_operand(x, t), perm, r)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        printer.print_string(" ")
        _print_int_list(printer, self.perm.get_values())
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        expected = infer_transpose(self.input.type, self.perm.get_values())  # type: ignore[arg-type]
        _check_result(self, self.result.type, expected)


@irdl_op_definition
class BroadcastToOp(_NewShapeOp):
    """`%r = legato.broadcast_to %x : T -> T2` (torch `broadcast_to`).
    Builder: `BroadcastToOp(x, result_type)` or `BroadcastToOp(x, dims=[...])`."""

    name = "legato.broadcast_to"

    def verify_(self) -> None:
        verify_broadcast_to(self.input.type, self.result.type)  # type: ignore[arg-type]


@irdl_op_definition
class SliceOp(FastBuildOperation):
    """`%r = legato.slice %x [offsets] [sizes] [strides] : T -> T2` (static).
    A size `?` keeps a dynamic dim whole (offset 0, stride 1).
    Builder: `SliceOp(x, offsets, sizes, strides=None, result_type=None)` (size -1 = `?`)."""

    name = "legato.slice"

    input = operand_def(TensorType)
    static_offsets = prop_def(DenseArrayBase.constr(i64))
    static_sizes = prop_def(DenseArrayBase.constr(i64))
    static_strides = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(
        self,
        input: SSAValue | Operation,
        offsets: Sequence[int],
        sizes: Sequence[int],
        strides: Sequence[int] | None = None,
        result_type: TensorType | None = None,
    ):
        if strides is None:
            strides = [1] * len(offsets)
        if result_type is None:
            result_type = infer_slice(SSAValue.get(input).type, offsets, sizes, strides)  # type: ignore[arg-type]
        super().__init__(
            operands=[input],
            result_types=[result_type],
            properties={
                "static_offsets": _i64_array(offsets),
                "static_sizes": _i64_array(sizes),
                "static_strides": _i64_array(strides),
            },
        )

    @classmethod
    def parse(cls, parser: Parser) -> SliceOp:
        x = parser.parse_unresolved_operand()
        offsets = _parse_int_list(parser)
        sizes = _parse_int_list(parser, allow_question=True)
        strides = _parse_int_list(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        parser.parse_punctuation("->")
        r = parser.parse_type()
        op = SliceOp(parser.resolve_operand(x, t), offsets, sizes, strides, r)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        printer.print_string(" ")
        _print_int_list(printer, self.static_offsets.get_values())
        printer.print_string(" ")
        _print_int_list(printer, self.static_sizes.get_values(), question=True)
        printer.print_string(" ")
        _print_int_list(printer, self.static_strides.get_values())
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        expected = infer_slice(
            self.input.type,  # type: ignore[arg-type]
            self.static_offsets.get_values(),
            self.static_sizes.get_values(),
            self.static_strides.get_values(),
        )
        _check_result(self, self.result.type, expected)


@irdl_op_definition
class CatOp(FastBuildOperation):
    """`%r = legato.cat %a, %b dim <d> : Ta, Tb -> Tr` (torch `cat`).
    Builder: `CatOp(inputs, dim, result_type=None)`."""

    name = "legato.cat"

    inputs = var_operand_def(TensorType)
    dim = prop_def(IntAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(
        self,
        inputs: Sequence[SSAValue | Operation],
        dim: int,
        result_type: TensorType | None = None,
    ):
        types = [SSAValue.get(v).type for v in inputs]
        if types and isinstance(types[0], TensorType):
            dim = normalize_dim(dim, types[0].rank)
        if result_type is None:
            result_type = infer_cat(types, dim)  # type: ignore[arg-type]
        super().__init__(
            operands=[inputs], result_types=[result_type], properties={"dim": IntAttr(dim)}
        )

    @classmethod
    def parse(cls, parser: Parser) -> CatOp:
        xs = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        parser.parse_keyword("dim")
        dim = parser.parse_integer(allow_boolean=False)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ts = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        parser.parse_punctuation("->")
        r = parser.parse_type()
        if len(ts) != len(xs):
            parser.raise_error(f"expected {len(xs)} operand types, got {len(ts)}")
        op = CatOp(parser.resolve_operands(xs, ts, parser.pos), dim, r)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.inputs, printer.print_ssa_value)
        printer.print_string(f" dim {self.dim.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list((v.type for v in self.inputs), printer.print_attribute)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        types = [v.type for v in self.inputs]
        if not types:
            raise VerifyException("legato.cat needs at least one input")
        if not 0 <= self.dim.data < max(types[0].rank, 1):  # type: ignore[union-attr]
            raise VerifyException(f"legato.cat: dim {self.dim.data} is out of range")
        expected = infer_cat(types, self.dim.data)  # type: ignore[arg-type]
        _check_result(self, self.result.type, expected)


@irdl_op_definition
class ConstantOp(FastBuildOperation):
    """`%c = legato.constant 2.5 : !legato.tensor<[], bf16, sram>`: a tensor filled with one
    scalar (static shape). Builder: `ConstantOp(value, result_type)`; `value` int or float
    (`inf`, `-inf`, `nan` are written as such)."""

    name = "legato.constant"

    value = prop_def(FloatAttr | IntegerAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(self, value: float | FloatAttr | IntegerAttr, result_type: TensorType):
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, int | float):
            if is_float_type(result_type.element_type) or (
                isinstance(value, float) and not value.is_integer()
            ):
                value = FloatAttr(float(value), Float64Type())
            else:
                value = IntegerAttr(int(value), i64)
        super().__init__(result_types=[result_type], properties={"value": value})

    @property
    def scalar(self) -> int | float:
        return self.value.value.data

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        v = parse_scalar(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        t = parser.parse_type()
        if not isinstance(t, TensorType):
            parser.raise_error(
                f"legato.constant: expected a !legato.tensor type, got {t}", pos, parser.pos
            )
        op = ConstantOp(v, t)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" " + format_scalar(self.scalar))
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        t = self.result.type
        assert isinstance(t, TensorType)
        if not t.is_static:
            raise VerifyException(f"legato.constant: the result {t} must have a static shape")
        if is_float_type(t.element_type) != isinstance(self.value, FloatAttr):
            raise VerifyException(
                "legato.constant: a float value needs a float tensor and an integer value an "
                "integer tensor"
            )


@irdl_op_definition
class CoreIdOp(FastBuildOperation):
    """`%i = legato.core_id : index`: the index of the running core (SPMD regions).
    Builder: `CoreIdOp()`."""

    name = "legato.core_id"
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self):
        super().__init__(result_types=[IndexType()])


# ---------------------------------------------------------------------------------------------
# Runtime scalars, dynamic slices, core-side loads, synchronization (issue 4)
# ---------------------------------------------------------------------------------------------

DYNAMIC_INDEX = DYNAMIC  # (legato.dialects.slicing)
"""Marker of a dynamic entry in `legato.dynamic_slice`'s static offset/size arrays."""


@irdl_op_definition
class DimOp(FastBuildOperation):
    """`%n = legato.dim %x, <d> : T`: the runtime size of dim d of `%x` (an `index`).
    Builder: `DimOp(x, d)`."""

    name = "legato.dim"

    input = operand_def(TensorType)
    dim = prop_def(IntAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    def __init__(self, input: SSAValue | Operation, dim: int | IntAttr):
        super().__init__(
            operands=[input], result_types=[IndexType()], properties={"dim": _int_attr(dim)}
        )

    @classmethod
    def parse(cls, parser: Parser) -> DimOp:
        x = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        dim = parse_nonneg_int(parser, "dim")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = DimOp(parser.resolve_operand(x, t), dim)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        printer.print_string(f", {self.dim.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)

    def verify_(self) -> None:
        t = _tensor(self.input, "legato.dim operand")
        if self.dim.data >= t.rank:
            raise VerifyException(f"legato.dim: dim {self.dim.data} is out of range for {t}")


@irdl_op_definition
class DynamicSliceOp(FastBuildOperation):
    """`%r = legato.dynamic_slice %x [%o, 0] [%s, 64] : T -> T2`: a unit-stride slice whose
    offsets and sizes are each a static int or an `index` value. A dynamic size makes the result
    dim dynamic (its bound is the result type's); a static size keeps it static. At run time
    every `offset + size` must lie within the runtime size of the dim (the frontend clamps sizes
    on dynamic dims, as Python slicing does).
    Builder: `DynamicSliceOp(x, offsets, sizes, result_type)` (entries int or SSA values)."""

    name = "legato.dynamic_slice"

    input = operand_def(TensorType)
    offsets = var_operand_def(IndexType)
    sizes = var_operand_def(IndexType)
    static_offsets = prop_def(DenseArrayBase.constr(i64))
    static_sizes = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    def __init__(
        self,
        input: SSAValue | Operation,
        offsets: Sequence[int | SSAValue | Operation],
        sizes: Sequence[int | SSAValue | Operation],
        result_type: TensorType,
    ):
        dyn_off, st_off = split_mixed(offsets)
        dyn_size, st_size = split_mixed(sizes)
        super().__init__(
            operands=[input, dyn_off, dyn_size],
            result_types=[result_type],
            properties={
                "static_offsets": _i64_array(st_off),
                "static_sizes": _i64_array(st_size),
            },
        )

    def mixed_offsets(self) -> list[int | SSAValue]:
        return join_mixed(self.offsets, self.static_offsets.get_values())

    def mixed_sizes(self) -> list[int | SSAValue]:
        return join_mixed(self.sizes, self.static_sizes.get_values())

    @classmethod
    def parse(cls, parser: Parser) -> DynamicSliceOp:
        x, offsets, sizes, r, attrs = parse_sliced(parser)
        op = DynamicSliceOp(x, offsets, sizes, r)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        print_sliced(printer, self, self.input)

    def verify_(self) -> None:
        x = _tensor(self.input, "legato.dynamic_slice operand")
        r = _tensor(self.result, "legato.dynamic_slice result")
        offs = self.static_offsets.get_values()
        sizes = self.static_sizes.get_values()
        if len(offs) != x.rank or len(sizes) != x.rank:
            raise VerifyException(
                f"legato.dynamic_slice: needs {x.rank} offsets and sizes, got {len(offs)} and "
                f"{len(sizes)}"
            )
        if offs.count(DYNAMIC_INDEX) != len(self.offsets) or sizes.count(DYNAMIC_INDEX) != len(
            self.sizes
        ):
            raise VerifyException("legato.dynamic_slice: dynamic entries and operands differ")
        if r.rank != x.rank or r.element_type != x.element_type or r.memory != x.memory:
            raise VerifyException(
                "legato.dynamic_slice: the result keeps the rank, element type and memory of "
                "its operand"
            )
        for i, (o, s, xd, rd) in enumerate(zip(offs, sizes, x.dims, r.dims)):
            if s == DYNAMIC_INDEX:
                if not rd.is_dynamic or rd.bound > xd.bound:
                    raise VerifyException(
                        f"legato.dynamic_slice: dim {i} has a runtime size, so the result dim "
                        f"must be dynamic with a bound <= {xd.bound}, got {rd}"
                    )
                continue
            if rd != Dim(s, s):
                raise VerifyException(f"legato.dynamic_slice: result dim {i} must be {s}, got {rd}")
            end = s if o == DYNAMIC_INDEX else o + s
            if s < 0 or (o != DYNAMIC_INDEX and o < 0) or end > xd.bound:
                raise VerifyException(
                    f"legato.dynamic_slice: dim {i}: offset {'?' if o == DYNAMIC_INDEX else o} "
                    f"+ size {s} exceeds the {'bound' if xd.is_dynamic else 'size'} {xd.bound}"
                )


@irdl_op_definition
class LoadOp(FastBuildOperation):
    """`%r = legato.load %x memory <space> : T -> T2`: copy `%x` (shared or core memory) into
    the running core's memory `space`; the result has `%x`'s shape and element type.
    Builder: `LoadOp(x, memory, result_type=None)`."""

    name = "legato.load"

    input = operand_def(TensorType)
    memory = prop_def(StringAttr)
    result = result_def(TensorType)

    def __init__(
        self,
        input: SSAValue | Operation,
        memory: str | StringAttr,
        result_type: TensorType | None = None,
    ):
        memory = _str_attr(memory)
        if result_type is None:
            t = SSAValue.get(input).type
            assert isinstance(t, TensorType)
            result_type = t.with_memory(memory.data)
        super().__init__(
            operands=[input], result_types=[result_type], properties={"memory": memory}
        )

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        x = parser.parse_unresolved_operand()
        parser.parse_keyword("memory")
        memory = parse_space(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        parser.parse_punctuation("->")
        r = parser.parse_type()
        op = LoadOp(parser.resolve_operand(x, t), memory, r)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        printer.print_string(f" memory {self.memory.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        x = _tensor(self.input, "legato.load operand")
        r = _tensor(self.result, "legato.load result")
        allowed = [s for s in CORE_SPACES if s != "mpu_weight"]
        verify_memory_space(self.memory.data, "legato.load", allowed)
        if r.space != self.memory.data:
            raise VerifyException(
                f"legato.load: result memory '{r.space}' differs from '{self.memory.data}'"
            )
        if r.dims != x.dims or r.element_type != x.element_type:
            raise VerifyException(
                f"legato.load: result {r} must have the shape and element type of {x}"
            )


@irdl_op_definition
class BarrierOp(FastBuildOperation):
    """`legato.barrier`: every core of the enclosing `all_cores` region waits until all of them
    arrived (their earlier memcpys have completed). Builder: `BarrierOp()`."""

    name = "legato.barrier"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()

    def verify_(self) -> None:
        on = _enclosing_on(self)
        if on is not None and not on.ctx.is_all_cores:
            raise VerifyException(
                f"legato.barrier synchronizes the cores of an all_cores region, not "
                f"{on.ctx.spelling}; use legato.signal / legato.wait between contexts"
            )


# ---------------------------------------------------------------------------------------------
# Kernel debugging (`legato.device_print`, `legato.device_assert`; opset's DEBUG rows)
# ---------------------------------------------------------------------------------------------

# what the user can do, at the DSL's level, about an operand the debug ops refuse
_DEBUG_HINTS = (
    "; print the tensor before it is loaded as a weight",
    "; slice it to one first",
)


@irdl_op_definition
class DevicePrintOp(PrintOpBase):
    """`legato.device_print "x =" (%x, %n : !legato.tensor<...>, index)`: when the running
    context reaches it, report `message` and the values (tensors: their runtime extent, in any
    memory but mpu_weight; index values) with the module, core and cycle (docs/language.md,
    *Debugging*). Builder: `DevicePrintOp(message, values)`."""

    name = "legato.device_print"
    VALUE_TYPE: ClassVar[type[Attribute]] = TensorType
    VALUE_KIND: ClassVar[str] = "tensor"
    HINTS: ClassVar[tuple[str, str]] = _DEBUG_HINTS


@irdl_op_definition
class DeviceAssertOp(AssertOpBase):
    """`legato.device_assert %cond, "message" : T`: when the running context reaches it, every
    element of `%cond` (a tensor of any element type, or an index) must be nonzero; else the
    run stops with a `DeviceAssertError` naming this op's source line, the module and the
    failing elements. Builder: `DeviceAssertOp(cond, message)`."""

    name = "legato.device_assert"
    VALUE_TYPE: ClassVar[type[Attribute]] = TensorType
    VALUE_KIND: ClassVar[str] = "tensor"
    HINTS: ClassVar[tuple[str, str]] = _DEBUG_HINTS


def _enclosing_on(op: Operation) -> OnOp | None:
    p = op.parent_op()
    while p is not None and not isinstance(p, OnOp):
        p = p.parent_op()
    return p


@irdl_op_definition
class SignalOp(FastBuildOperation):
    """`legato.signal to <ctx> sem <s> count <n>`: add n to semaphore s of context `<ctx>`
    (`top` or `core(i)`), after this context's earlier memcpys completed.
    Builder: `SignalOp(target, sem, count=1)`."""

    name = "legato.signal"

    target = prop_def(ContextAttr)
    sem = prop_def(IntAttr)
    count = prop_def(IntAttr)

    def __init__(self, target: ContextAttr | str, sem: int | IntAttr, count: int | IntAttr = 1):
        if isinstance(target, str):
            target = context_from_str(target)
        super().__init__(
            properties={"target": target, "sem": _int_attr(sem), "count": _int_attr(count)}
        )

    @classmethod
    def parse(cls, parser: Parser) -> SignalOp:
        parser.parse_keyword("to")
        target = parse_context(parser)
        parser.parse_keyword("sem")
        sem = parse_nonneg_int(parser, "semaphore")
        parser.parse_keyword("count")
        count = parse_nonneg_int(parser, "count")
        op = SignalOp(target, sem, count)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(
            f" to {self.target.spelling} sem {self.sem.data} count {self.count.data}"
        )
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        if self.target.is_all_cores:
            raise VerifyException(
                "legato.signal targets one context (top or core(i)), not all_cores"
            )
        if self.count.data < 1:
            raise VerifyException("legato.signal: count must be at least 1")


@irdl_op_definition
class WaitOp(FastBuildOperation):
    """`legato.wait sem <s> count <n>`: block until semaphore s of the running context reaches
    n, then subtract n. Not in `all_cores` regions (use `legato.barrier`).
    Builder: `WaitOp(sem, count=1)`."""

    name = "legato.wait"

    sem = prop_def(IntAttr)
    count = prop_def(IntAttr)

    def __init__(self, sem: int | IntAttr, count: int | IntAttr = 1):
        super().__init__(properties={"sem": _int_attr(sem), "count": _int_attr(count)})

    @classmethod
    def parse(cls, parser: Parser) -> WaitOp:
        parser.parse_keyword("sem")
        sem = parse_nonneg_int(parser, "semaphore")
        parser.parse_keyword("count")
        count = parse_nonneg_int(parser, "count")
        op = WaitOp(sem, count)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" sem {self.sem.data} count {self.count.data}")
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        if self.count.data < 1:
            raise VerifyException("legato.wait: count must be at least 1")
        on = _enclosing_on(self)
        if on is not None and on.ctx.is_all_cores:
            raise VerifyException(
                "legato.wait cannot run in an all_cores region (every core would wait on one "
                "semaphore); use legato.barrier there, or wait on top / in a core(i) region"
            )


# ---------------------------------------------------------------------------------------------
# Selection and gathers
# ---------------------------------------------------------------------------------------------


def infer_where(cond: TensorType, a: TensorType, b: TensorType) -> TensorType:
    if cond.dtype.name != "i1" and not is_float_type(cond.element_type):
        raise VerifyException(
            f"legato.where: the condition must be i1 (bool) or a float mask, got {cond.dtype.name}"
        )
    if a.element_type != b.element_type:
        raise VerifyException(
            f"legato.where: the two values have different element types ({a.element_type} and "
            f"{b.element_type}); insert a legato.cast"
        )
    dims = broadcast_shapes(broadcast_shapes(cond.dims, a.dims), b.dims)
    return TensorType(dims, a.element_type, a.memory)


@irdl_op_definition
class WhereOp(FastBuildOperation):
    """`%r = legato.where %cond, %a, %b : Tc, Ta, Tb -> Tr`: `a` where `cond` is true, else `b`
    (torch.where), all three broadcast (torch rules). `cond` is i1 or a float mask (true where
    nonzero, NaN included); `a` and `b` have one element type, the result's; the result is in
    `a`'s memory. Elements are selected, never rounded. Builder: `WhereOp(cond, a, b,
    result_type=None)`."""

    name = "legato.where"

    cond = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    traits = traits_def(Pure())
    assembly_format = (
        "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($lhs) `,` type($rhs) `->` "
        "type($result)"
    )

    def __init__(
        self,
        cond: SSAValue | Operation,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        result_type: TensorType | None = None,
    ):
        if result_type is None:
            result_type = infer_where(*(SSAValue.get(v).type for v in (cond, lhs, rhs)))  # type: ignore[arg-type]
        super().__init__(operands=[cond, lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        expected = infer_where(self.cond.type, self.lhs.type, self.rhs.type)  # type: ignore[arg-type]
        _check_result(self, self.result.type, expected)


GATHER_INDEX_TYPES = ("i64",)


def infer_gather(
    table: TensorType, indices: TensorType, memory: str = "sram", more: tuple = ()
) -> TensorType:
    """The result type of `table[indices, *more]`: one index tensor per leading dim of
    `table` (all i64, of one shape), dims `indices.dims + table.dims[1 + len(more):]`."""
    k = 1 + len(more)
    if table.rank < k:
        raise VerifyException(
            f"legato.gather: {k} index tensors need a table of at least {k} dims, got "
            f"{table.dims_str()}"
        )
    for t in (indices, *more):
        if t.dtype.name not in GATHER_INDEX_TYPES:
            raise VerifyException(
                f"legato.gather: indices must be {' or '.join(GATHER_INDEX_TYPES)} (the core "
                f"reads each with one 8-byte load), got {t.dtype.name}"
            )
    for t in more:
        if t.dims != indices.dims:
            raise VerifyException(
                f"legato.gather: the index tensors have different shapes ({indices.dims_str()} "
                f"and {t.dims_str()}); broadcast them first"
            )
    return TensorType((*indices.dims, *table.dims[k:]), table.element_type, memory)


@irdl_op_definition
class GatherOp(FastBuildOperation):
    """`%r = legato.gather %table, %indices[, %more...] : Tt, Ti[, Tm...] -> Tr`: rows of
    `table` selected by `indices` (torch's `embedding(indices, table)`, `table[indices]`):
    `r[i..., :] = table[indices[i...], ...]`, result dims `indices.dims + table.dims[1:]`.
    With `more` index tensors (of `indices`' shape), `table[indices, *more]` (torch's
    `x[i0, i1]`): the `1 + len(more)` leading dims of `table` are indexed, one per tensor, and
    the result has dims `indices.dims + table.dims[1 + len(more):]`. Indices are i64; the table
    may stay in shared memory (one DMA per row). The result is in a core memory (its type says
    which). Every index must lie in `[0, d)` of its dim `d` (out of range faults, never a
    silent row); with the `wrap` property, in `[-d, d)`, a negative index counting from the
    end (torch's indexing `x[idx]`: `i + d` for `i < 0`). With the `offset` property `c`, the
    first index selects row `indices[i...] + c` (int64, wrapping as torch's add: torch's
    `embedding(table, p + c)`, OPT's learned positions), before the wrap and the range check.
    Builder: `GatherOp(table, indices, result_type=None, wrap=False, more=(), offset=0)`
    (default: sram)."""

    name = "legato.gather"

    table = operand_def(TensorType)
    indices = operand_def(TensorType)
    more = var_operand_def(TensorType)
    result = result_def(TensorType)
    wrap = opt_prop_def(UnitAttr)
    offset = opt_prop_def(IntegerAttr[I64])

    traits = traits_def(Pure())
    assembly_format = (
        "$table `,` $indices (`,` $more^)? (`wrap` $wrap^)? (`offset` $offset^)? attr-dict `:` "
        "type($table) `,` "
        "type($indices) (`,` type($more)^)? `->` type($result)"
    )

    def __init__(
        self,
        table: SSAValue | Operation,
        indices: SSAValue | Operation,
        result_type: TensorType | None = None,
        wrap: bool = False,
        more=(),
        offset: int = 0,
    ):
        more = [SSAValue.get(m) for m in more]
        if result_type is None:
            result_type = infer_gather(
                SSAValue.get(table).type,  # type: ignore[arg-type]
                SSAValue.get(indices).type,  # type: ignore[arg-type]
                more=tuple(m.type for m in more),
            )
        super().__init__(
            operands=[table, indices, more],
            result_types=[result_type],
            properties={
                **({"wrap": UnitAttr()} if wrap else {}),
                **({"offset": IntegerAttr(int(offset), i64)} if offset else {}),
            },
        )

    def verify_(self) -> None:
        r = _tensor(self.result, "legato.gather result")
        verify_memory_space(
            r.space, "legato.gather result", [s for s in CORE_SPACES if s != "mpu_weight"]
        )
        if self.table.type.space == "mpu_weight":  # type: ignore[attr-defined]
            raise VerifyException("legato.gather: the table cannot be an MPU weight")
        expected = infer_gather(
            self.table.type,  # type: ignore[arg-type]
            self.indices.type,  # type: ignore[arg-type]
            r.space,
            tuple(m.type for m in self.more),
        )
        _check_result(self, r, expected)


def verify_scatter(table: TensorType, indices: TensorType, rows: TensorType) -> None:
    """Raise VerifyException unless `rows` fits `table[indices] = rows` (torch's `index_copy_`
    along dim 0): i64 indices, rows of dims indices.dims + table.dims[1:], one element type."""
    if table.rank < 1:
        raise VerifyException("legato.scatter: the table needs at least one dim (its rows)")
    if indices.dtype.name not in GATHER_INDEX_TYPES:
        raise VerifyException(
            f"legato.scatter: indices must be {' or '.join(GATHER_INDEX_TYPES)} (the core reads "
            f"each with one 8-byte load), got {indices.dtype.name}"
        )
    if rows.element_type != table.element_type:
        raise VerifyException(
            f"legato.scatter: rows of {rows.element_type} into a table of {table.element_type}; "
            "insert a legato.cast"
        )
    want = (*indices.dims, *table.dims[1:])
    ok = rows.rank == len(want) and all(
        r == w or ((r.is_dynamic or w.is_dynamic) and r.bound <= w.bound)
        for r, w in zip(rows.dims, want)
    )
    if not ok:
        raise VerifyException(
            f"legato.scatter: rows {rows.dims_str()} do not match indices {indices.dims_str()} "
            f"followed by the table's row dims {table.dims_str()}[1:]"
        )


@irdl_op_definition
class ScatterOp(FastBuildOperation):
    """`legato.scatter %table, %indices, %rows : Tt, Ti, Tr`: `table[indices[i...]] =
    rows[i...]` (torch's `index_copy_(0, indices, rows)`; the inverse of `legato.gather`):
    each i64 index selects a row of `table` (any memory, e.g. a paged KV cache in shared DRAM,
    written in place with one DMA per row); `rows` and `indices` are in core memory. Every
    index must lie in `[0, rows)` (out of range faults); with repeated indices the last write
    wins only if the rows are equal (the DMAs are not ordered).
    Builder: `ScatterOp(table, indices, rows)`."""

    name = "legato.scatter"

    table = operand_def(TensorType)
    indices = operand_def(TensorType)
    rows = operand_def(TensorType)

    assembly_format = (
        "$table `,` $indices `,` $rows attr-dict `:` type($table) `,` type($indices) `,` "
        "type($rows)"
    )

    def __init__(
        self,
        table: SSAValue | Operation,
        indices: SSAValue | Operation,
        rows: SSAValue | Operation,
    ):
        super().__init__(operands=[table, indices, rows])

    def verify_(self) -> None:
        t, i, r = self.table.type, self.indices.type, self.rows.type
        assert isinstance(t, TensorType) and isinstance(i, TensorType) and isinstance(r, TensorType)
        if t.space == "mpu_weight":
            raise VerifyException("legato.scatter: the table cannot be an MPU weight")
        for what, v in (("indices", i), ("rows", r)):
            verify_memory_space(
                v.space, f"legato.scatter {what}", [s for s in CORE_SPACES if s != "mpu_weight"]
            )
        verify_scatter(t, i, r)


Legato = Dialect(
    "legato",
    [
        KernelOp,
        OnOp,
        YieldOp,
        ReturnOp,
        RequestLoadOp,
        ReceiveOp,
        ReceiveTypeOp,
        MemcpyOp,
        MatmulOp,
        *ELEMENTWISE_OPS.values(),
        ClampOp,
        CastOp,
        SumOp,
        MeanOp,
        AmaxOp,
        AminOp,
        ReshapeOp,
        TransposeOp,
        BroadcastToOp,
        SliceOp,
        CatOp,
        ConstantOp,
        CoreIdOp,
        DimOp,
        DynamicSliceOp,
        LoadOp,
        BarrierOp,
        SignalOp,
        WaitOp,
        DevicePrintOp,
        DeviceAssertOp,
        WhereOp,
        GatherOp,
        ScatterOp,
    ],
    [TensorType, ContextAttr],
)
install_fast_accessors(Legato)  # the same accessors, without xDSL's per-read dispatch
