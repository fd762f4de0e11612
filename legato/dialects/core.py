"""The `core` dialect: one program per module with its own PC (`OutputType.CORE_IR`).

Buffers are memory, not values: `!core.buf<[?10, 256], bf16, sram>` names a region of one
memory space; ops read and write buffers. DMA descriptors, queue waits, MPU and VPU work are
explicit. Scalar index arithmetic uses `arith`, loops use `scf.for`. See docs/architecture.md,
"Level 2".

Contexts (`top`, `core(i)`, `all_cores`) reuse `legato.dialects.legato.ContextAttr`.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SSAValue,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
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
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException

from legato import opset
from legato.dialects.debug import AssertOpBase, PrintOpBase
from legato.dialects.fast_build import FastBuildOperation, install_fast_accessors
from legato.dialects.legato import (
    ELEMENT_TYPES,
    ContextAttr,
    ShapedSpaceType,
    broadcast_dim,
    context_from_str,
    format_scalar,
    is_float_type,
    parse_context,
    parse_defined_operand,
    parse_nonneg_int,
    parse_scalar,
    parse_shape_elem_space,
    parse_space,
    remembers_hash,
    verify_memory_space,
)
from legato.dialects.shared_attrs import bool_attr, i64_array, int_attr, str_attr
from legato.dialects.slicing import DYNAMIC as SLICE_DYNAMIC
from legato.dialects.slicing import parse_sliced, print_sliced, split_mixed
from legato.types import CORE_SPACES, Dim

DYNAMIC = SLICE_DYNAMIC  # (legato.dialects.slicing)
"""Sentinel for a dynamic entry in `core.subview` offsets/sizes (as in memref.subview)."""

QUEUE_SPACES = ("sram", "mpu_buffer", "private_dram")
"""Memory spaces that have arrival queues (the ISA's SPACE)."""

VPU_SPACES = ("sram", "private_dram", "mpu_buffer")
"""Memory spaces the VPU reads and writes."""

BUFFER_ATTR = "buffer"
"""The `core.alloc` attribute naming one buffer allocated in several programs (both ends of a
transfer): `core-plan-memory` gives every alloc of one name one offset."""

ACCESS_KINDS = ("read", "write", "readwrite")

VPU_BINARY_KINDS = opset.binary_kinds()
"""`core.vpu_binary` kinds (`legato.opset`'s binary rows)."""
VPU_UNARY_KINDS = opset.unary_kinds()
"""`core.vpu_unary` kinds (`legato.opset`'s unary rows, then `cast`)."""
VPU_REDUCE_KINDS = opset.reduce_kinds()
"""`core.vpu_reduce` kinds (over the last axis)."""


# ---------------------------------------------------------------------------------------------
# Attributes and types
# ---------------------------------------------------------------------------------------------


@remembers_hash
@irdl_attr_definition(init=False)
class BufType(ShapedSpaceType):
    """`!core.buf<[?10, 256], bf16, sram>`: a buffer in one memory space.

    `BufType(dims, element_type, memory)`, `BufType.from_spec(spec)`, `b.to_spec()`;
    `BufType.from_tensor(t)` from a `!legato.tensor` (same parameters).
    """

    name = "core.buf"

    @classmethod
    def from_tensor(cls, t: ShapedSpaceType) -> BufType:
        return cls(t.dims, t.element_type, t.memory)


@irdl_attr_definition(init=False)
class ArgAttr(ParametrizedAttribute):
    """`#core.arg<0, [?10, 256], bf16, shared_dram, read>`: kernel argument i, its buffer type
    (or a scalar type: `#core.arg<2, i64, read>`) and its access (`read`, `write`,
    `readwrite`). Builder: `ArgAttr(index, type, access)` (`type` a BufType or scalar type)."""

    name = "core.arg"

    index: IntAttr
    type: Attribute
    access: StringAttr

    def __init__(self, index: int | IntAttr, type: Attribute, access: str | StringAttr = "read"):
        super().__init__(
            index if isinstance(index, IntAttr) else IntAttr(index),
            type,
            access if isinstance(access, StringAttr) else StringAttr(access),
        )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            index = parse_nonneg_int(parser, "argument index")
            parser.parse_punctuation(",")
            if parser._current_token.text == "[":
                t: Attribute = BufType.new(parse_shape_elem_space(parser))
            else:
                t = parser.parse_type()
            parser.parse_punctuation(",")
            pos = parser.pos
            access = parser.parse_identifier(context_msg=" (read, write or readwrite)")
            if access not in ACCESS_KINDS:
                parser.raise_error(
                    f"unknown access '{access}'; expected read, write or readwrite", pos, parser.pos
                )
        return (index, t, StringAttr(access))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(f"{self.index.data}, ")
            if isinstance(self.type, BufType):
                printer.print_string(self.type.dims_str() + ", ")
                printer.print_attribute(self.type.element_type)
                printer.print_string(", " + self.type.memory.data)
            else:
                printer.print_attribute(self.type)
            printer.print_string(f", {self.access.data}")

    def verify(self) -> None:
        if self.access.data not in ACCESS_KINDS:
            raise VerifyException(
                f"core.arg: unknown access '{self.access.data}'; expected read, write or readwrite"
            )
        if not isinstance(self.type, BufType) and self.type not in (
            *ELEMENT_TYPES.values(),
            IndexType(),
            Float64Type(),
        ):
            raise VerifyException(f"core.arg: unsupported argument type {self.type}")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _ctx(ctx: ContextAttr | str) -> ContextAttr:
    return context_from_str(ctx) if isinstance(ctx, str) else ctx


def _parse_core_or_reg(parser: Parser) -> ContextAttr | Parser.UnresolvedOperand:
    """`core(i)`, `core(%c)` (a runtime core index), `top` or `all_cores`."""
    if parser.parse_optional_keyword("core") is not None:
        with parser.in_parens():
            if (o := parser.parse_optional_unresolved_operand()) is not None:
                return o
            return ContextAttr.core(parser.parse_integer(allow_boolean=False, allow_negative=False))
    return parse_context(parser)


_str, _int = str_attr, int_attr


def _buf(value: SSAValue, what: str) -> BufType:
    if not isinstance(value.type, BufType):
        raise VerifyException(f"{what} must be a !core.buf, got {value.type}")
    return value.type


def _parse_props_in_attr_dict(
    parser: Parser, prop_names: Sequence[str]
) -> tuple[dict[str, Attribute], dict[str, Attribute]]:
    """Parse `{...}` where some keys are properties (`{offset = 0 : i64}`)."""
    attrs = parser.parse_optional_attr_dict()
    props = {k: attrs.pop(k) for k in prop_names if k in attrs}
    return props, attrs


def _print_props_in_attr_dict(
    printer: Printer, props: dict[str, Attribute | None], attrs: dict[str, Attribute]
) -> None:
    merged = {k: v for k, v in props.items() if v is not None} | dict(attrs)
    printer.print_op_attributes(merged)


def _print_types(printer: Printer, values: Sequence[SSAValue]) -> None:
    printer.print_string(" : ")
    printer.print_list((v.type for v in values), printer.print_attribute)


def _parse_operands_with_types(
    parser: Parser, unresolved: Sequence[Parser.UnresolvedOperand]
) -> list[SSAValue]:
    parser.parse_punctuation(":")
    pos = parser.pos
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    if len(types) != len(unresolved):
        parser.raise_error(
            f"expected {len(unresolved)} operand types, got {len(types)}", pos, parser.pos
        )
    return [parser.resolve_operand(u, t) for u, t in zip(unresolved, types)]


def _parse_kind(parser: Parser, kinds: Sequence[str], what: str) -> StringAttr:
    pos = parser.pos
    kind = parser.parse_identifier(context_msg=f" ({what} kind)")
    if kind not in kinds:
        parser.raise_error(
            f"unknown {what} kind '{kind}'; expected one of {', '.join(kinds)}", pos, parser.pos
        )
    return StringAttr(kind)


# ---------------------------------------------------------------------------------------------
# Structure
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class KernelOp(FastBuildOperation):
    """`core.kernel @name args [#core.arg<...>, ...] { core.program ... }`

    Builder: `KernelOp(name, args, body=None)`; `args` a sequence of `ArgAttr`; without
    `body` an empty one-block region is created (`op.body.block`).
    """

    name = "core.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    args = prop_def(ArrayAttr[ArgAttr])
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), SymbolTable(), NoTerminator(), IsolatedFromAbove())

    def __init__(self, name: str, args: Sequence[ArgAttr], body: Region | None = None):
        super().__init__(
            properties={"sym_name": StringAttr(name), "args": ArrayAttr(args)},
            regions=[body if body is not None else Region(Block())],
        )

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        parser.parse_keyword("args")
        pos = parser.pos
        args = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_attribute)
        for a in args:
            if not isinstance(a, ArgAttr):
                parser.raise_error(f"expected #core.arg<...>, got {a}", pos, parser.pos)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        if not body.blocks:
            body.add_block(Block())
        op = KernelOp(name, args, body)  # type: ignore[arg-type]
        if attrs is not None:
            op.attributes |= attrs.data
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" args [")
        printer.print_list(self.args.data, printer.print_attribute)
        printer.print_string("]")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)

    def verify_(self) -> None:
        for i, a in enumerate(self.args.data):
            if a.index.data != i:
                raise VerifyException(
                    f"core.kernel: args must be listed in order; entry {i} has index {a.index.data}"
                )
        for op in self.body.block.ops:
            if not isinstance(op, ProgramOp):
                raise VerifyException(f"core.kernel holds only core.program ops, found {op.name}")

    @property
    def programs(self) -> list[ProgramOp]:
        return [op for op in self.body.block.ops if isinstance(op, ProgramOp)]


@irdl_op_definition
class ProgramOp(FastBuildOperation):
    """`core.program @core0 on core(0) { ... core.end }`: the program of one module (`top`,
    `core(i)`), or one SPMD text run by every core (`all_cores`).

    Builder: `ProgramOp(name, ctx, body=None)` (`ctx` a ContextAttr or its spelling); without
    `body` an empty block is created (`op.body.block`; the builder must add `core.end`).
    """

    name = "core.program"

    sym_name = prop_def(SymbolNameConstraint())
    ctx = prop_def(ContextAttr)
    body = region_def()

    # NoTerminator: the verifier itself requires core.end, with a clearer message.
    traits = traits_def(
        SymbolOpInterface(), IsolatedFromAbove(), HasParent(KernelOp), NoTerminator()
    )

    def __init__(self, name: str, ctx: ContextAttr | str, body: Region | None = None):
        super().__init__(
            properties={"sym_name": StringAttr(name), "ctx": _ctx(ctx)},
            regions=[body if body is not None else Region(Block())],
        )

    @classmethod
    def parse(cls, parser: Parser) -> ProgramOp:
        name = parser.parse_symbol_name().data
        parser.parse_keyword("on")
        ctx = parse_context(parser)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        op = ProgramOp(name, ctx, body)
        if attrs is not None:
            op.attributes |= attrs.data
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(f" on {self.ctx.spelling}")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=True)

    def verify_(self) -> None:
        if len(self.body.blocks) != 1:
            raise VerifyException("core.program: the body must be a single block")
        if self.body.block.args:
            raise VerifyException("core.program: the body takes no block arguments")
        if not isinstance(self.body.block.last_op, EndOp):
            raise VerifyException("core.program: the body must end with core.end")

    @property
    def kernel(self) -> KernelOp | None:
        parent = self.parent_op()
        return parent if isinstance(parent, KernelOp) else None


@irdl_op_definition
class EndOp(FastBuildOperation):
    """`core.end`: terminator of a `core.program` (the program halts). Builder: `EndOp()`."""

    name = "core.end"
    traits = traits_def(IsTerminator(), HasParent(ProgramOp))
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


def _enclosing(op: Operation, cls: type[Operation]) -> Operation | None:
    p = op.parent_op()
    while p is not None and not isinstance(p, cls):
        p = p.parent_op()
    return p


@irdl_op_definition
class ArgOp(FastBuildOperation):
    """`%a = core.arg <i> : !core.buf<...>` (or a scalar type): kernel argument i (address and
    dynamic dims read from the Instruction Table). Builder: `ArgOp(index, result_type)`."""

    name = "core.arg"

    index = prop_def(IntAttr)
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, index: int | IntAttr, result_type: Attribute):
        super().__init__(result_types=[result_type], properties={"index": _int(index)})

    @classmethod
    def parse(cls, parser: Parser) -> ArgOp:
        index = parse_nonneg_int(parser, "argument index")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = ArgOp(index, parser.parse_type())
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.index.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        kernel = _enclosing(self, KernelOp)
        if not isinstance(kernel, KernelOp):
            return
        i = self.index.data
        if i >= len(kernel.args.data):
            raise VerifyException(
                f"core.arg {i}: the kernel has only {len(kernel.args.data)} arguments"
            )
        expected = kernel.args.data[i].type
        if self.result.type != expected:
            raise VerifyException(
                f"core.arg {i}: type {self.result.type} differs from the kernel's {expected}"
            )


@irdl_op_definition
class DimOp(FastBuildOperation):
    """`%n = core.dim %buf, <d> : index`: runtime size of dim d. Builder: `DimOp(buf, d)`."""

    name = "core.dim"

    buf = operand_def(BufType)
    dim = prop_def(IntAttr)
    result = result_def(IndexType)

    traits = traits_def(Pure())

    def __init__(self, buf: SSAValue | Operation, dim: int | IntAttr):
        super().__init__(operands=[buf], result_types=[IndexType()], properties={"dim": _int(dim)})

    @classmethod
    def parse(cls, parser: Parser) -> DimOp:
        buf = parse_defined_operand(parser, "expected a buffer value")
        parser.parse_punctuation(",")
        dim = parse_nonneg_int(parser, "dim")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        parser.parse_keyword("index")
        op = DimOp(buf, dim)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.buf)
        printer.print_string(f", {self.dim.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : index")

    def verify_(self) -> None:
        t = _buf(self.buf, "core.dim operand")
        if self.dim.data >= t.rank:
            raise VerifyException(f"core.dim: dim {self.dim.data} is out of range for {t}")


@irdl_op_definition
class AllocOp(FastBuildOperation):
    """`%b = core.alloc [on core(i) | on core(%c)] <space> [dims(%d, ...)] [{offset = N : i64}] : !core.buf<...>`

    A buffer in a core's memory (default: the running program's core); one `dims` operand per
    dynamic dim of the type. `offset` (byte offset in the space) is absent before memory planning.
    `on core(%c)` (an `index` value, in an `all_cores` program only): the same SPMD buffer (same
    offset) in the memory of core %c, chosen at run time (a core-to-core send's destination).
    Builder: `AllocOp(result_type, dyn_dims=(), core=None, offset=None)`; the space is the type's;
    `core` an int, a ContextAttr or an `index` SSA value.
    """

    name = "core.alloc"

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    dyn_dims = var_operand_def(IndexType)
    core_reg = opt_operand_def(IndexType)
    core = opt_prop_def(ContextAttr)
    memory = prop_def(StringAttr)
    offset = opt_prop_def(IntegerAttr)
    result = result_def(BufType)

    def __init__(
        self,
        result_type: BufType,
        dyn_dims: Sequence[SSAValue | Operation] = (),
        core: ContextAttr | str | int | None = None,
        offset: int | IntegerAttr | None = None,
        memory: str | None = None,
    ):
        core_reg: list[SSAValue | Operation] = []
        if isinstance(core, SSAValue | Operation):
            core_reg, core = [core], None
        if isinstance(core, int):
            core = ContextAttr.core(core)
        elif isinstance(core, str):
            core = context_from_str(core)
        if isinstance(offset, int):
            offset = IntegerAttr(offset, i64)
        super().__init__(
            operands=[dyn_dims, core_reg],
            result_types=[result_type],
            properties={
                "core": core,
                "memory": str_attr(memory if memory is not None else result_type.space),
                "offset": offset,
            },
        )

    @classmethod
    def parse(cls, parser: Parser) -> AllocOp:
        core = None
        if parser.parse_optional_keyword("on") is not None:
            core = _parse_core_or_reg(parser)
        memory = parse_space(parser)
        dims: list[Parser.UnresolvedOperand] = []
        if parser.parse_optional_keyword("dims") is not None:
            dims = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_unresolved_operand
            )
        props, attrs = _parse_props_in_attr_dict(parser, ("offset",))
        parser.parse_punctuation(":")
        t = parser.parse_type()
        if not isinstance(t, BufType):
            parser.raise_error(f"core.alloc: expected a !core.buf type, got {t}")
        if isinstance(core, UnresolvedOperand):
            core = parser.resolve_operand(core, IndexType())
        op = AllocOp(
            t,
            [parser.resolve_operand(d, IndexType()) for d in dims],
            core,
            props.get("offset"),  # type: ignore[arg-type]
            memory.data,
        )
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        if self.core is not None:
            printer.print_string(f" on {self.core.spelling}")
        elif self.core_reg is not None:
            printer.print_string(" on core(")
            printer.print_ssa_value(self.core_reg)
            printer.print_string(")")
        printer.print_string(f" {self.memory.data}")
        if self.dyn_dims:
            printer.print_string(" dims(")
            printer.print_list(self.dyn_dims, printer.print_ssa_value)
            printer.print_string(")")
        _print_props_in_attr_dict(printer, {"offset": self.offset}, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        t = self.result.type
        assert isinstance(t, BufType)
        verify_memory_space(self.memory.data, "core.alloc", CORE_SPACES)
        if t.space != self.memory.data:
            raise VerifyException(
                f"core.alloc: space '{self.memory.data}' differs from the type's '{t.space}'"
            )
        if len(self.dyn_dims) != len(t.dynamic_dims):
            raise VerifyException(
                f"core.alloc: {t} has {len(t.dynamic_dims)} dynamic dims but "
                f"{len(self.dyn_dims)} dims operands were given"
            )
        if self.core is not None and not self.core.is_core:
            raise VerifyException(f"core.alloc: `on` takes core(i), got {self.core.spelling}")
        if self.core is not None and self.core_reg is not None:
            raise VerifyException("core.alloc: `on` takes one core, static or a register")
        if self.core_reg is not None:
            prog = self.parent_op()
            while prog is not None and not isinstance(prog, ProgramOp):
                prog = prog.parent_op()
            if prog is not None and not prog.ctx.is_all_cores:
                raise VerifyException(
                    "core.alloc: `on core(%c)` (a runtime core) only in an all_cores program, "
                    "where every core has the same buffer layout"
                )
        if self.offset is not None and self.offset.value.data < 0:
            raise VerifyException("core.alloc: offset must be non-negative")


@irdl_op_definition
class SubviewOp(FastBuildOperation):
    """`%v = core.subview %buf [%i, 0] [64, 128] : T -> T2`: a view of `%buf` (row-major
    parent strides). Offsets and sizes are each an integer or an index value; a dynamic size
    gives a dynamic result dim whose bound must not exceed the source dim's bound.
    Builder: `SubviewOp(source, offsets, sizes, result_type=None)`; `offsets`/`sizes` entries
    are ints or index SSA values (a static-size result type is inferred when omitted).
    """

    name = "core.subview"

    source = operand_def(BufType)
    offsets = var_operand_def(IndexType)
    sizes = var_operand_def(IndexType)
    static_offsets = prop_def(DenseArrayBase.constr(i64))
    static_sizes = prop_def(DenseArrayBase.constr(i64))
    result = result_def(BufType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    def __init__(
        self,
        source: SSAValue | Operation,
        offsets: Sequence[int | SSAValue | Operation],
        sizes: Sequence[int | SSAValue | Operation],
        result_type: BufType | None = None,
    ):
        dyn_off, st_off = split_mixed(offsets)
        dyn_size, st_size = split_mixed(sizes)
        if result_type is None:
            src = SSAValue.get(source).type
            assert isinstance(src, BufType)
            if DYNAMIC in st_size:
                raise ValueError("SubviewOp: give result_type when a size is dynamic")
            result_type = src.with_dims(st_size)
        super().__init__(
            operands=[source, dyn_off, dyn_size],
            result_types=[result_type],
            properties={
                "static_offsets": i64_array(st_off),
                "static_sizes": i64_array(st_size),
            },
        )

    @classmethod
    def parse(cls, parser: Parser) -> SubviewOp:
        src, offsets, sizes, r, attrs = parse_sliced(parser)
        op = SubviewOp(src, offsets, sizes, r)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        print_sliced(printer, self, self.source)

    def verify_(self) -> None:
        src = _buf(self.source, "core.subview source")
        res = _buf(self.result, "core.subview result")
        offs = self.static_offsets.get_values()
        sizes = self.static_sizes.get_values()
        if len(offs) != src.rank or len(sizes) != src.rank:
            raise VerifyException(
                f"core.subview: needs {src.rank} offsets and sizes, got {len(offs)} and "
                f"{len(sizes)}"
            )
        if offs.count(DYNAMIC) != len(self.offsets) or sizes.count(DYNAMIC) != len(self.sizes):
            raise VerifyException("core.subview: dynamic entries and operands do not match")
        if res.rank != src.rank or res.element_type != src.element_type or res.memory != src.memory:
            raise VerifyException(
                "core.subview: the result keeps the rank, element type and space of the source"
            )
        for i, (o, s, sd, rd) in enumerate(zip(offs, sizes, src.dims, res.dims)):
            if s == DYNAMIC:
                if not rd.is_dynamic or rd.bound > sd.bound:
                    raise VerifyException(
                        f"core.subview: dim {i} has a dynamic size, so the result dim must be "
                        f"dynamic with a bound <= {sd.bound}, got {rd}"
                    )
                continue
            if rd != Dim(s, s):
                raise VerifyException(f"core.subview: result dim {i} must be {s}, got {rd}")
            if s < 0 or (o != DYNAMIC and (o < 0 or o + s > sd.bound)):
                raise VerifyException(
                    f"core.subview: dim {i}: offset {o} + size {s} exceeds the source "
                    f"{'bound' if sd.is_dynamic else 'size'} {sd.bound}"
                )
            if o == DYNAMIC and s > sd.bound:
                raise VerifyException(
                    f"core.subview: dim {i}: size {s} exceeds the source bound {sd.bound}"
                )


@irdl_op_definition
class ViewOp(FastBuildOperation):
    """`%v = core.view %buf [dims(%d, ...)] : T -> T2`: the same contiguous memory seen with
    another shape (a reshape without a copy); one `dims` operand per dynamic dim of the result.
    Builder: `ViewOp(source, result_type, dyn_dims=())`."""

    name = "core.view"

    source = operand_def(BufType)
    dyn_dims = var_operand_def(IndexType)
    result = result_def(BufType)

    traits = traits_def(Pure())

    def __init__(
        self,
        source: SSAValue | Operation,
        result_type: BufType,
        dyn_dims: Sequence[SSAValue | Operation] = (),
    ):
        super().__init__(operands=[source, dyn_dims], result_types=[result_type])

    @classmethod
    def parse(cls, parser: Parser) -> ViewOp:
        src = parser.parse_unresolved_operand()
        dims: list[Parser.UnresolvedOperand] = []
        if parser.parse_optional_keyword("dims") is not None:
            dims = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_unresolved_operand
            )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        parser.parse_punctuation("->")
        r = parser.parse_type()
        op = ViewOp(
            parser.resolve_operand(src, t),
            r,  # type: ignore[arg-type]
            [parser.resolve_operand(d, IndexType()) for d in dims],
        )
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.source)
        if self.dyn_dims:
            printer.print_string(" dims(")
            printer.print_list(self.dyn_dims, printer.print_ssa_value)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        src = _buf(self.source, "core.view source")
        res = _buf(self.result, "core.view result")
        if src.element_type != res.element_type or src.memory != res.memory:
            raise VerifyException("core.view keeps the element type and memory space")
        if len(self.dyn_dims) != len(res.dynamic_dims):
            raise VerifyException(
                f"core.view: {res} has {len(res.dynamic_dims)} dynamic dims but "
                f"{len(self.dyn_dims)} dims operands were given"
            )
        if res.num_elements_bound > src.num_elements_bound:
            raise VerifyException(
                f"core.view: {res.dims_str()} holds more elements than {src.dims_str()}"
            )


# ---------------------------------------------------------------------------------------------
# Data movement and synchronization
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class DmaOp(FastBuildOperation):
    """`core.dma %src to %dst [bytes %n] [notify core(i)|core(%c) <space> queue <q>] : T_src, T_dst`

    Asynchronous copy of the runtime extent of `%src` (or `%n` bytes) into `%dst`; on completion
    one arrival is signalled on core i's queue (space, q) when `notify` is given (`core(%c)`: the
    core whose index is the `index` value %c at run time).
    Builder: `DmaOp(src, dst, nbytes=None, notify=None)`; `notify` = (core, space, queue) with
    core a ContextAttr, `"core(i)"`, an int or an `index` SSA value.
    """

    name = "core.dma"

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    src = operand_def(BufType)
    dst = operand_def(BufType)
    nbytes = opt_operand_def(IndexType)
    notify_core_reg = opt_operand_def(IndexType)
    notify_core = opt_prop_def(ContextAttr)
    notify_space = opt_prop_def(StringAttr)
    notify_queue = opt_prop_def(IntAttr)

    def __init__(
        self,
        src: SSAValue | Operation,
        dst: SSAValue | Operation,
        nbytes: SSAValue | Operation | None = None,
        notify: tuple[ContextAttr | str | int, str, int] | None = None,
    ):
        props: dict[str, Attribute | None] = {}
        core_reg: list[SSAValue | Operation] = []
        if notify is not None:
            core, space, queue = notify
            if isinstance(core, int):
                core = ContextAttr.core(core)
            if isinstance(core, SSAValue | Operation):
                core_reg = [core]
            props = {
                "notify_core": None if core_reg else _ctx(core),  # type: ignore[arg-type]
                "notify_space": str_attr(space),
                "notify_queue": int_attr(queue),
            }
        super().__init__(
            operands=[src, dst, [nbytes] if nbytes is not None else [], core_reg],
            properties=props,
        )

    @property
    def has_notify(self) -> bool:
        return self.notify_core is not None or self.notify_core_reg is not None

    @classmethod
    def parse(cls, parser: Parser) -> DmaOp:
        src = parser.parse_unresolved_operand()
        parser.parse_keyword("to")
        dst = parser.parse_unresolved_operand()
        nbytes = None
        if parser.parse_optional_keyword("bytes") is not None:
            nbytes = parser.parse_unresolved_operand()
        notify = None
        if parser.parse_optional_keyword("notify") is not None:
            core = _parse_core_or_reg(parser)
            space = parse_space(parser)
            parser.parse_keyword("queue")
            queue = parse_nonneg_int(parser, "queue")
            notify = (core, space.data, queue.data)
        attrs = parser.parse_optional_attr_dict()
        src_v, dst_v = _parse_operands_with_types(parser, [src, dst])
        n_v = parser.resolve_operand(nbytes, IndexType()) if nbytes is not None else None
        if notify is not None and isinstance(notify[0], UnresolvedOperand):
            notify = (parser.resolve_operand(notify[0], IndexType()), notify[1], notify[2])
        op = DmaOp(src_v, dst_v, n_v, notify)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.src)
        printer.print_string(" to ")
        printer.print_ssa_value(self.dst)
        if self.nbytes is not None:
            printer.print_string(" bytes ")
            printer.print_ssa_value(self.nbytes)
        if self.notify_core is not None:
            assert self.notify_space is not None and self.notify_queue is not None
            printer.print_string(
                f" notify {self.notify_core.spelling} {self.notify_space.data} "
                f"queue {self.notify_queue.data}"
            )
        elif self.notify_core_reg is not None:
            assert self.notify_space is not None and self.notify_queue is not None
            printer.print_string(" notify core(")
            printer.print_ssa_value(self.notify_core_reg)
            printer.print_string(f") {self.notify_space.data} queue {self.notify_queue.data}")
        printer.print_op_attributes(self.attributes)
        _print_types(printer, [self.src, self.dst])

    def verify_(self) -> None:
        src = _buf(self.src, "core.dma source")
        dst = _buf(self.dst, "core.dma destination")
        core = self.notify_core if self.notify_core is not None else self.notify_core_reg
        if self.notify_core is not None and self.notify_core_reg is not None:
            raise VerifyException("core.dma: notify takes one core, static or a register")
        given = [core, self.notify_space, self.notify_queue]
        if any(g is not None for g in given) and not all(g is not None for g in given):
            raise VerifyException("core.dma: notify needs a core, a space and a queue")
        if self.notify_core is not None:
            if not self.notify_core.is_core:
                raise VerifyException(
                    f"core.dma: notify takes core(i), got {self.notify_core.spelling}"
                )
            assert self.notify_space is not None
            verify_memory_space(self.notify_space.data, "core.dma notify", QUEUE_SPACES)
        if "mpu_weight" in (src.space, dst.space):
            raise VerifyException(
                "core.dma: mpu_weight is not addressable; use core.mpu_load_weight"
            )
        if self.nbytes is None:
            if src.element_type != dst.element_type:
                raise VerifyException(
                    f"core.dma: element types differ ({src.element_type} and "
                    f"{dst.element_type}); give `bytes %n` for a raw copy"
                )
            if src.max_bytes > dst.max_bytes:
                raise VerifyException(
                    f"core.dma: the source ({src.max_bytes} bytes at most) does not fit the "
                    f"destination ({dst.max_bytes} bytes)"
                )


@irdl_op_definition
class WaitQueueOp(FastBuildOperation):
    """`core.wait_queue <space> queue <q>`: block until one arrival on this core's queue
    (space, q); consume it. Builder: `WaitQueueOp(space, queue)`."""

    name = "core.wait_queue"

    memory = prop_def(StringAttr)
    queue = prop_def(IntAttr)

    def __init__(self, memory: str | StringAttr, queue: int | IntAttr):
        super().__init__(properties={"memory": _str(memory), "queue": _int(queue)})

    @classmethod
    def parse(cls, parser: Parser) -> WaitQueueOp:
        memory = parse_space(parser)
        parser.parse_keyword("queue")
        queue = parse_nonneg_int(parser, "queue")
        op = WaitQueueOp(memory, queue)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.memory.data} queue {self.queue.data}")
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        verify_memory_space(self.memory.data, "core.wait_queue", QUEUE_SPACES)


@irdl_op_definition
class DmaWaitOp(FastBuildOperation):
    """`core.dma_wait`: block until every DMA this program issued completed.
    Builder: `DmaWaitOp()`."""

    name = "core.dma_wait"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class CoreIdOp(FastBuildOperation):
    """`%i = core.core_id : index`: the running core's index (0 on top). Builder: `CoreIdOp()`."""

    name = "core.core_id"
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self):
        super().__init__(result_types=[IndexType()])


class SyncOp(FastBuildOperation, ABC):
    """Base of `core.barrier`, `core.sem_post`, `core.sem_wait`: `<op> <id> count <n>`."""

    sync_id = prop_def(IntAttr)
    count = prop_def(IntAttr)

    def __init__(self, sync_id: int | IntAttr, count: int | IntAttr):
        super().__init__(properties={"sync_id": _int(sync_id), "count": _int(count)})

    @classmethod
    def parse(cls, parser: Parser):
        sync_id = parse_nonneg_int(parser, "barrier id")
        parser.parse_keyword("count")
        count = parse_nonneg_int(parser, "count")
        op = cls(sync_id, count)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.sync_id.data} count {self.count.data}")
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        if not 0 <= self.sync_id.data <= MAX_SYNC_ID:
            raise VerifyException(f"{self.name}: id must be in 0..{MAX_SYNC_ID}")
        if self.count.data < 1:
            raise VerifyException(f"{self.name}: count must be at least 1")


MAX_SYNC_ID = 63
SEM_ATTR = "legato.sem"
"""On a `core.sem_post` / `core.sem_wait` lowered from the DSL: the semaphore as the user named
it, `"<sem> of <context>"` (the chip's ids are numbered per (context, sem) in order of first
appearance), so that diagnostics speak the user's numbers."""


@irdl_op_definition
class BarrierOp(SyncOp):
    """`core.barrier <id> count <n>`: block until n modules arrived at barrier `id` (the ISA's
    `barrier ID, COUNT`; the barrier then resets). Builder: `BarrierOp(id, count)`."""

    name = "core.barrier"


@irdl_op_definition
class SemPostOp(SyncOp):
    """`core.sem_post <id> count <n>`: chip-wide semaphore `id` += n (ISA `sem.post`).
    Builder: `SemPostOp(id, count)`."""

    name = "core.sem_post"


@irdl_op_definition
class SemWaitOp(SyncOp):
    """`core.sem_wait <id> count <n>`: block until semaphore `id` >= n, then subtract n (ISA
    `sem.wait`). Builder: `SemWaitOp(id, count)`."""

    name = "core.sem_wait"


# ---------------------------------------------------------------------------------------------
# MPU
# ---------------------------------------------------------------------------------------------

MPU_MAX_K = 256
MPU_MAX_N = 128


@irdl_op_definition
class MpuLoadWeightOp(FastBuildOperation):
    """`core.mpu_load_weight %w : !core.buf<[K, N], bf16, mpu_buffer>`: load the MPU's weight
    tile (K <= 256, N <= 128). Builder: `MpuLoadWeightOp(w)`."""

    name = "core.mpu_load_weight"

    weight = operand_def(BufType)
    assembly_format = "$weight attr-dict `:` type($weight)"

    def __init__(self, weight: SSAValue | Operation):
        super().__init__(operands=[weight])

    def verify_(self) -> None:
        w = _buf(self.weight, "core.mpu_load_weight operand")
        if w.space != "mpu_buffer":
            raise VerifyException(
                f"core.mpu_load_weight: the weight must be in mpu_buffer, got {w.space}"
            )
        if w.dtype.name != "bf16" or w.rank != 2:
            raise VerifyException(f"core.mpu_load_weight: the weight must be 2-D bf16, got {w}")
        k, n = w.get_bounds()
        if k > MPU_MAX_K or n > MPU_MAX_N:
            raise VerifyException(
                f"core.mpu_load_weight: weight tile [{k}, {n}] exceeds the MPU's "
                f"[{MPU_MAX_K}, {MPU_MAX_N}]"
            )


@irdl_op_definition
class MpuMatmulOp(FastBuildOperation):
    """`core.mpu_matmul %in, %out {accumulate = false} : T_in, T_out`:
    `%out[M, N] (+)= %in[M, K] @ W` with the loaded weight tile; `%in` bf16, `%out` f32 or bf16
    (accumulate needs f32). Builder: `MpuMatmulOp(input, out, accumulate=False)`."""

    name = "core.mpu_matmul"

    input = operand_def(BufType)
    out = operand_def(BufType)
    accumulate = prop_def(BoolAttr)

    def __init__(
        self, input: SSAValue | Operation, out: SSAValue | Operation, accumulate: bool = False
    ):
        super().__init__(operands=[input, out], properties={"accumulate": bool_attr(accumulate)})

    @property
    def is_accumulate(self) -> bool:
        return bool(self.accumulate.value.data)

    @classmethod
    def parse(cls, parser: Parser) -> MpuMatmulOp:
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        props, attrs = _parse_props_in_attr_dict(parser, ("accumulate",))
        a_v, b_v = _parse_operands_with_types(parser, [a, b])
        acc = props.get("accumulate")
        if acc is not None and not isinstance(acc, IntegerAttr):
            parser.raise_error("core.mpu_matmul: accumulate must be true or false")
        op = MpuMatmulOp(a_v, b_v, bool(acc.value.data) if acc is not None else False)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        printer.print_string(", ")
        printer.print_ssa_value(self.out)
        _print_props_in_attr_dict(printer, {"accumulate": self.accumulate}, self.attributes)
        _print_types(printer, [self.input, self.out])

    def verify_(self) -> None:
        x = _buf(self.input, "core.mpu_matmul input")
        o = _buf(self.out, "core.mpu_matmul output")
        if x.rank != 2 or o.rank != 2:
            raise VerifyException(
                f"core.mpu_matmul: input and output must be 2-D, got {x.dims_str()} and "
                f"{o.dims_str()}"
            )
        if x.dtype.name != "bf16":
            raise VerifyException(f"core.mpu_matmul: the input must be bf16, got {x}")
        if o.dtype.name not in ("f32", "bf16"):
            raise VerifyException(f"core.mpu_matmul: the output must be f32 or bf16, got {o}")
        if self.is_accumulate and o.dtype.name != "f32":
            raise VerifyException("core.mpu_matmul: accumulate needs an f32 output")
        if x.dims[0] != o.dims[0]:
            raise VerifyException(
                f"core.mpu_matmul: input rows {x.dims[0]} differ from output rows {o.dims[0]}"
            )
        if x.get_bounds()[1] > MPU_MAX_K or o.get_bounds()[1] > MPU_MAX_N:
            raise VerifyException(
                f"core.mpu_matmul: K = {x.dims[1]} or N = {o.dims[1]} exceeds the MPU's "
                f"[{MPU_MAX_K}, {MPU_MAX_N}] weight tile"
            )
        for t in (x, o):
            if t.space not in VPU_SPACES:
                raise VerifyException(
                    f"core.mpu_matmul: operands must be in {', '.join(VPU_SPACES)}, got {t.space}"
                )


# ---------------------------------------------------------------------------------------------
# PIM (docs/pim.md)
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class PimGemvOp(FastBuildOperation):
    """`core.pim_gemv %x, %w, %out : T_x, T_w, T_out`: `%out[P] = %x[K] @ %w[K, N]` on the PIM
    units of a chip with `use_pim` (docs/pim.md): `%x` bf16 in core memory, `%w` bf16 `[K, N]`
    in `pim_dram` (shared DRAM in the PIM layout, `arch.pim.PimLayout`), `%out` f32 `[P]` in
    core memory, P >= N: each channel's unit writes its own padded columns (the columns past N
    hold nothing). Builder: `PimGemvOp(x, w, out)`."""

    name = "core.pim_gemv"

    x = operand_def(BufType)
    w = operand_def(BufType)
    out = operand_def(BufType)

    def __init__(self, x: SSAValue | Operation, w: SSAValue | Operation, out: SSAValue | Operation):
        super().__init__(operands=[x, w, out])

    @classmethod
    def parse(cls, parser: Parser) -> PimGemvOp:
        names = [parser.parse_unresolved_operand()]
        for _ in range(2):
            parser.parse_punctuation(",")
            names.append(parser.parse_unresolved_operand())
        attrs = parser.parse_optional_attr_dict()
        values = _parse_operands_with_types(parser, names)
        op = PimGemvOp(*values)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        _print_types(printer, list(self.operands))

    def verify_(self) -> None:
        x = _buf(self.x, "core.pim_gemv x")
        w = _buf(self.w, "core.pim_gemv weight")
        o = _buf(self.out, "core.pim_gemv output")
        if x.rank != 1 or w.rank != 2 or o.rank != 1:
            raise VerifyException(
                f"core.pim_gemv: x must be 1-D, the weight 2-D, the output 1-D, got "
                f"{x.dims_str()}, {w.dims_str()}, {o.dims_str()}"
            )
        if x.dtype.name != "bf16" or w.dtype.name != "bf16" or o.dtype.name != "f32":
            raise VerifyException(
                f"core.pim_gemv: x and the weight must be bf16 and the output f32, got {x}, "
                f"{w}, {o}"
            )
        if w.space != "pim_dram":
            raise VerifyException(f"core.pim_gemv: the weight must be in pim_dram, got {w.space}")
        if not (x.is_static and w.is_static and o.is_static):
            raise VerifyException("core.pim_gemv: operands must have static dims")
        k, n = w.get_shape()
        if x.get_shape()[0] != k or o.get_shape()[0] < n:
            raise VerifyException(
                f"core.pim_gemv: x {x.dims_str()} and output {o.dims_str()} do not fit the "
                f"weight {w.dims_str()}"
            )
        for t in (x, o):
            if t.space not in VPU_SPACES:
                raise VerifyException(
                    f"core.pim_gemv: x and the output must be in {', '.join(VPU_SPACES)}, got "
                    f"{t.space}"
                )


# ---------------------------------------------------------------------------------------------
# VPU
# ---------------------------------------------------------------------------------------------


def _verify_vpu_space(op: Operation, *types: ShapedSpaceType) -> None:
    for t in types:
        if t.space not in VPU_SPACES:
            raise VerifyException(
                f"{op.name}: the VPU works on {', '.join(VPU_SPACES)}, got {t.space}"
            )


def _broadcasts_to(x: ShapedSpaceType, out: ShapedSpaceType) -> bool:
    if x.rank > out.rank:
        return False
    for d, t in zip(x.dims, out.dims[out.rank - x.rank :]):
        if d != t and d.size != 1 and broadcast_dim(d, t) != t:
            return False
    return True


@irdl_op_definition
class VpuBinaryOp(FastBuildOperation):
    """`core.vpu_binary <kind> %lhs, %rhs to %out : T_lhs, T_rhs, T_out`, kind a binary row of
    `legato.opset` (add, sub, mul, div, max, min; the comparisons eq, ne, lt, le, gt, ge write
    1 or 0 in the element type). Operands broadcast (torch rules) to `%out`'s shape; one element type.
    Builder: `VpuBinaryOp(kind, lhs, rhs, out)`."""

    name = "core.vpu_binary"

    KINDS: ClassVar[tuple[str, ...]] = VPU_BINARY_KINDS

    kind = prop_def(StringAttr)
    lhs = operand_def(BufType)
    rhs = operand_def(BufType)
    out = operand_def(BufType)

    def __init__(
        self,
        kind: str,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
        out: SSAValue | Operation,
    ):
        super().__init__(operands=[lhs, rhs, out], properties={"kind": str_attr(kind)})

    @classmethod
    def parse(cls, parser: Parser) -> VpuBinaryOp:
        kind = _parse_kind(parser, VPU_BINARY_KINDS, "vpu_binary")
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        parser.parse_keyword("to")
        o = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        vals = _parse_operands_with_types(parser, [a, b, o])
        op = VpuBinaryOp(kind.data, *vals)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.kind.data} ")
        printer.print_ssa_value(self.lhs)
        printer.print_string(", ")
        printer.print_ssa_value(self.rhs)
        printer.print_string(" to ")
        printer.print_ssa_value(self.out)
        printer.print_op_attributes(self.attributes)
        _print_types(printer, [self.lhs, self.rhs, self.out])

    def verify_(self) -> None:
        if self.kind.data not in VPU_BINARY_KINDS:
            raise VerifyException(
                f"core.vpu_binary: unknown kind '{self.kind.data}'; expected one of "
                f"{', '.join(VPU_BINARY_KINDS)}"
            )
        a = _buf(self.lhs, "core.vpu_binary lhs")
        b = _buf(self.rhs, "core.vpu_binary rhs")
        o = _buf(self.out, "core.vpu_binary out")
        _verify_vpu_space(self, a, b, o)
        if not (a.element_type == b.element_type == o.element_type):
            raise VerifyException("core.vpu_binary: operands and out must have one element type")
        for name, t in (("lhs", a), ("rhs", b)):
            if not _broadcasts_to(t, o):
                raise VerifyException(
                    f"core.vpu_binary: {name} {t.dims_str()} does not broadcast to out "
                    f"{o.dims_str()}"
                )


class _VpuKindOp(FastBuildOperation, ABC):
    """`core.vpu_<family> <kind> %in to %out : T_in, T_out`: one input buffer, one output buffer
    and an operation kind from the family's `KINDS`. Builder: `Op(kind, input, out)`."""

    KINDS: ClassVar[tuple[str, ...]] = ()

    kind = prop_def(StringAttr)
    input = operand_def(BufType)
    out = operand_def(BufType)

    def __init__(self, kind: str, input: SSAValue | Operation, out: SSAValue | Operation):
        super().__init__(operands=[input, out], properties={"kind": StringAttr(kind)})

    @classmethod
    def parse(cls, parser: Parser) -> _VpuKindOp:
        kind = _parse_kind(parser, cls.KINDS, cls.name.removeprefix("core."))
        a = parser.parse_unresolved_operand()
        parser.parse_keyword("to")
        o = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        vals = _parse_operands_with_types(parser, [a, o])
        op = cls(kind.data, *vals)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.kind.data} ")
        printer.print_ssa_value(self.input)
        printer.print_string(" to ")
        printer.print_ssa_value(self.out)
        printer.print_op_attributes(self.attributes)
        _print_types(printer, [self.input, self.out])


@irdl_op_definition
class VpuUnaryOp(_VpuKindOp):
    """`core.vpu_unary <kind> %in to %out : T_in, T_out`, kind a unary row of `legato.opset`
    (neg, abs, exp, log, ..., copy) or cast. Same shape (`%in` may broadcast to `%out`); one
    element type except for `cast`. Builder: `VpuUnaryOp(kind, input, out)`."""

    name = "core.vpu_unary"
    KINDS: ClassVar[tuple[str, ...]] = VPU_UNARY_KINDS

    def verify_(self) -> None:
        kind = self.kind.data
        if kind not in VPU_UNARY_KINDS:
            raise VerifyException(
                f"core.vpu_unary: unknown kind '{kind}'; expected one of "
                f"{', '.join(VPU_UNARY_KINDS)}"
            )
        x = _buf(self.input, "core.vpu_unary input")
        o = _buf(self.out, "core.vpu_unary out")
        _verify_vpu_space(self, x, o)
        if kind != "cast" and x.element_type != o.element_type:
            raise VerifyException(
                f"core.vpu_unary {kind}: input and out must have one element type (use cast)"
            )
        if kind != "cast" and opset.BY_KIND[opset.UNARY, kind].float_only:
            if not is_float_type(x.element_type):
                raise VerifyException(f"core.vpu_unary {kind} needs a floating-point input")
        if not _broadcasts_to(x, o):
            raise VerifyException(
                f"core.vpu_unary: input {x.dims_str()} does not broadcast to out {o.dims_str()}"
            )


@irdl_op_definition
class VpuReduceOp(_VpuKindOp):
    """`core.vpu_reduce <kind> %in to %out : T_in, T_out`, kind in sum, max, min, over the last
    axis: `%out` is `%in`'s shape without the last dim, or with it set to 1. `%out` has `%in`'s
    element type, or f32 (wider accumulation). Builder: `VpuReduceOp(kind, input, out)`."""

    name = "core.vpu_reduce"
    KINDS: ClassVar[tuple[str, ...]] = VPU_REDUCE_KINDS

    def verify_(self) -> None:
        kind = self.kind.data
        if kind not in VPU_REDUCE_KINDS:
            raise VerifyException(
                f"core.vpu_reduce: unknown kind '{kind}'; expected one of "
                f"{', '.join(VPU_REDUCE_KINDS)}"
            )
        x = _buf(self.input, "core.vpu_reduce input")
        o = _buf(self.out, "core.vpu_reduce out")
        _verify_vpu_space(self, x, o)
        if x.rank == 0:
            raise VerifyException("core.vpu_reduce: the input needs at least one dim")
        if o.element_type != x.element_type and not isinstance(o.element_type, Float32Type):
            raise VerifyException("core.vpu_reduce: out must have the input's element type or f32")
        if o.dims not in (x.dims[:-1], (*x.dims[:-1], Dim(1, 1))):
            raise VerifyException(
                f"core.vpu_reduce: out {o.dims_str()} must be the input {x.dims_str()} "
                "without its last dim, or with it set to 1"
            )


@irdl_op_definition
class VpuTransposeOp(FastBuildOperation):
    """`core.vpu_transpose %in to %out : T_in, T_out`: `%out[c, r] = %in[r, c]` for a 2-D
    `%in` [R, C] and `%out` [C, R] (one element type). Builder: `VpuTransposeOp(input, out)`."""

    name = "core.vpu_transpose"

    input = operand_def(BufType)
    out = operand_def(BufType)

    def __init__(self, input: SSAValue | Operation, out: SSAValue | Operation):
        super().__init__(operands=[input, out])

    @classmethod
    def parse(cls, parser: Parser) -> VpuTransposeOp:
        a = parser.parse_unresolved_operand()
        parser.parse_keyword("to")
        o = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        vals = _parse_operands_with_types(parser, [a, o])
        op = VpuTransposeOp(*vals)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        printer.print_string(" to ")
        printer.print_ssa_value(self.out)
        printer.print_op_attributes(self.attributes)
        _print_types(printer, [self.input, self.out])

    def verify_(self) -> None:
        x = _buf(self.input, "core.vpu_transpose input")
        o = _buf(self.out, "core.vpu_transpose out")
        _verify_vpu_space(self, x, o)
        if x.element_type != o.element_type:
            raise VerifyException("core.vpu_transpose: input and out must have one element type")
        if x.rank != 2 or o.dims != (x.dims[1], x.dims[0]):
            raise VerifyException(
                f"core.vpu_transpose: out {o.dims_str()} must be the 2-D input "
                f"{x.dims_str()} transposed"
            )


@irdl_op_definition
class VpuFillOp(FastBuildOperation):
    """`core.vpu_fill <value> to %out : T`: fill a buffer with one scalar (`inf`, `-inf`,
    `nan` allowed). Builder: `VpuFillOp(value, out)`."""

    name = "core.vpu_fill"

    value = prop_def(FloatAttr | IntegerAttr)
    out = operand_def(BufType)

    def __init__(self, value: float | FloatAttr | IntegerAttr, out: SSAValue | Operation):
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, int | float):
            t = SSAValue.get(out).type
            if (
                isinstance(t, BufType)
                and is_float_type(t.element_type)
                or (isinstance(value, float) and not value.is_integer())
            ):
                value = FloatAttr(float(value), Float64Type())
            else:
                value = IntegerAttr(int(value), i64)
        super().__init__(operands=[out], properties={"value": value})

    @property
    def scalar(self) -> float:
        return self.value.value.data

    @classmethod
    def parse(cls, parser: Parser) -> VpuFillOp:
        v = parse_scalar(parser)
        parser.parse_keyword("to")
        o = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        (o_v,) = _parse_operands_with_types(parser, [o])
        op = VpuFillOp(v, o_v)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {format_scalar(self.scalar)} to ")
        printer.print_ssa_value(self.out)
        printer.print_op_attributes(self.attributes)
        _print_types(printer, [self.out])

    def verify_(self) -> None:
        o = _buf(self.out, "core.vpu_fill out")
        _verify_vpu_space(self, o)
        if is_float_type(o.element_type) != isinstance(self.value, FloatAttr):
            raise VerifyException(
                "core.vpu_fill: a float value needs a float buffer and an integer value an "
                "integer buffer"
            )


@irdl_op_definition
class LoadIndexOp(FastBuildOperation):
    """`%v = core.load_index %buf[%i] : T`: element `%i` of a 1-D i64 buffer (any memory) read
    into an `index` value (one scalar `ld`; an element the program wrote by DMA must be waited
    for first). Builder: `LoadIndexOp(buf, i)`."""

    name = "core.load_index"

    buf = operand_def(BufType)
    index = operand_def(IndexType)
    result = result_def(IndexType)

    assembly_format = "$buf `[` $index `]` attr-dict `:` type($buf)"

    def __init__(self, buf: SSAValue | Operation, index: SSAValue | Operation):
        super().__init__(operands=[buf, index], result_types=[IndexType()])

    def verify_(self) -> None:
        t = _buf(self.buf, "core.load_index operand")
        if t.rank != 1 or t.dtype.name != "i64":
            raise VerifyException(
                f"core.load_index reads a 1-D i64 buffer (one 8-byte load), got {t}"
            )


@irdl_op_definition
class VpuSelectOp(FastBuildOperation):
    """`core.vpu_select %cond, %src to %out : T_cond, T_src, T_out`: `%out[i] = %src[i]` where
    `%cond[i]` is nonzero, else `%out[i]` keeps its value (a merge; `vpu.sel`). One shape for
    all three; `%src` and `%out` have one float element type; `%cond` is i1 (one byte per
    element) or a float mask (nonzero is true, NaN included). Builder: `VpuSelectOp(cond, src,
    out)`."""

    name = "core.vpu_select"

    cond = operand_def(BufType)
    src = operand_def(BufType)
    out = operand_def(BufType)

    def __init__(
        self, cond: SSAValue | Operation, src: SSAValue | Operation, out: SSAValue | Operation
    ):
        super().__init__(operands=[cond, src, out])

    @classmethod
    def parse(cls, parser: Parser) -> VpuSelectOp:
        c = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        a = parser.parse_unresolved_operand()
        parser.parse_keyword("to")
        o = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        vals = _parse_operands_with_types(parser, [c, a, o])
        op = VpuSelectOp(*vals)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.cond)
        printer.print_string(", ")
        printer.print_ssa_value(self.src)
        printer.print_string(" to ")
        printer.print_ssa_value(self.out)
        printer.print_op_attributes(self.attributes)
        _print_types(printer, [self.cond, self.src, self.out])

    def verify_(self) -> None:
        c = _buf(self.cond, "core.vpu_select condition")
        x = _buf(self.src, "core.vpu_select src")
        o = _buf(self.out, "core.vpu_select out")
        _verify_vpu_space(self, c, x, o)
        if x.element_type != o.element_type or not is_float_type(o.element_type):
            raise VerifyException(
                "core.vpu_select: src and out must have one floating-point element type"
            )
        if c.dtype.name != "i1" and not is_float_type(c.element_type):
            raise VerifyException(
                f"core.vpu_select: the condition must be i1 or a float mask, got {c.dtype.name}"
            )
        if not (c.dims == x.dims == o.dims):
            raise VerifyException(
                f"core.vpu_select: condition {c.dims_str()}, src {x.dims_str()} and out "
                f"{o.dims_str()} must have one shape (broadcast them first)"
            )


# -- kernel debugging (`legato.device_print` / `legato.device_assert`; opset's DEBUG rows) ------


@irdl_op_definition
class PrintOp(PrintOpBase):
    """`core.print "y =" (%buf, %n : !core.buf<...>, index)`: report the message and the values
    (a buffer's runtime extent, read through its view; an index) when the program reaches it;
    `dbg.print` per value (docs/isa.md, *Debug instructions*). Builder: `PrintOp(message,
    values)`."""

    name = "core.print"
    VALUE_TYPE: ClassVar[type[Attribute]] = BufType
    VALUE_KIND: ClassVar[str] = "buffer"


@irdl_op_definition
class AssertOp(AssertOpBase):
    """`core.assert %cond, "message" : !core.buf<...>`: every element of `%cond` (a buffer, or
    an index) is nonzero, else the run stops with a `DeviceAssertError` at this op's location
    (`dbg.assert`). Builder: `AssertOp(cond, message)`."""

    name = "core.assert"
    VALUE_TYPE: ClassVar[type[Attribute]] = BufType
    VALUE_KIND: ClassVar[str] = "buffer"


Core = Dialect(
    "core",
    [
        KernelOp,
        ProgramOp,
        EndOp,
        ArgOp,
        DimOp,
        AllocOp,
        SubviewOp,
        ViewOp,
        DmaOp,
        WaitQueueOp,
        DmaWaitOp,
        CoreIdOp,
        BarrierOp,
        SemPostOp,
        SemWaitOp,
        MpuLoadWeightOp,
        MpuMatmulOp,
        PimGemvOp,
        VpuBinaryOp,
        VpuUnaryOp,
        VpuReduceOp,
        VpuFillOp,
        VpuTransposeOp,
        VpuSelectOp,
        LoadIndexOp,
        PrintOp,
        AssertOp,
    ],
    [BufType, ArgAttr],
)
install_fast_accessors(Core)  # the same accessors, without xDSL's per-read dispatch
