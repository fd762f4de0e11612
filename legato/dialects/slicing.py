"""What `legato.dynamic_slice` and `core.subview` share: offsets and sizes given as mixed lists
(ints static, index SSA values dynamic), stored as dynamic operands plus static arrays with
`DYNAMIC` marking the dynamic entries, and the syntax `%src [o, ...] [s, ...] : T -> R`."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType
from xdsl.dialects.utils.dynamic_index_list import (
    parse_dynamic_index_list_without_types,
    print_dynamic_index_list,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.parser import Parser
from xdsl.printer import Printer

DYNAMIC = -(2**63)  # a static entry that stands for the next dynamic operand


def split_mixed(values: Sequence[int | SSAValue | Operation]) -> tuple[list[SSAValue], list[int]]:
    """(dynamic operands, static entries with DYNAMIC where an operand goes)."""
    dyn = [SSAValue.get(v) for v in values if not isinstance(v, int)]
    static = [v if isinstance(v, int) else DYNAMIC for v in values]
    return dyn, static


def join_mixed(dyn: Sequence[SSAValue], static: Sequence[int]) -> list[int | SSAValue]:
    it = iter(dyn)
    return [next(it) if v == DYNAMIC else v for v in static]


def parse_sliced(parser: Parser):
    """`%src [offsets] [sizes] {attrs} : T -> R` -> (src, offsets, sizes, result type, attrs)."""
    src = parser.parse_unresolved_operand()
    dyn_off, st_off = parse_dynamic_index_list_without_types(parser, DYNAMIC)
    dyn_size, st_size = parse_dynamic_index_list_without_types(parser, DYNAMIC)
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    t = parser.parse_type()
    parser.parse_punctuation("->")
    r: Attribute = parser.parse_type()
    idx = IndexType()

    def mixed(dyn, static) -> list[int | SSAValue]:
        return join_mixed([parser.resolve_operand(d, idx) for d in dyn], static)

    return (
        parser.resolve_operand(src, t),
        mixed(dyn_off, st_off),
        mixed(dyn_size, st_size),
        r,
        attrs,
    )


def print_sliced(printer: Printer, op: IRDLOperation, src: SSAValue) -> None:
    printer.print_string(" ")
    printer.print_ssa_value(src)
    printer.print_string(" ")
    print_dynamic_index_list(printer, DYNAMIC, op.offsets, op.static_offsets.get_values())  # type: ignore[attr-defined]
    printer.print_string(" ")
    print_dynamic_index_list(printer, DYNAMIC, op.sizes, op.static_sizes.get_values())  # type: ignore[attr-defined]
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    printer.print_attribute(src.type)
    printer.print_string(" -> ")
    printer.print_attribute(op.result.type)  # type: ignore[attr-defined]
