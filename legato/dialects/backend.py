"""The `backend` dialect: Bertha ISA, one op per instruction (`OutputType.BACKEND_IR`, then ASM).

Registers are SSA values of type `!backend.reg` (unallocated) or `!backend.reg<r5>` (allocated,
r0..r31). An op whose instruction writes `rd` has one result (the written register); every
other register of the instruction (also addresses that are *read*, like the `rdst` of a `dma`)
is an operand. Immediates and special fields (memory spaces, queues, dtypes, flags) are
properties. Every instruction op has `assembly_line() -> str`: the exact assembly text of
`legato/targets/bertha/asm.py` once registers are allocated (e.g. `ld r3, 8(r1)`).

Control flow is flat: a `backend.program` holds one block; `backend.label "loop"` marks a branch
target and the branch ops name their target label (`backend.bne %a, %b, "loop"`). SSA models the
data dependencies of straight-line code; a value carried around a loop (a loop counter) is
written in the registers the lowering chose for it (`!backend.reg<r9>` on both the initial
definition and the update), so the register allocator only assigns unallocated values and
treats allocated ones as fixed.

Syntax summary (IR form; see each class):

    backend.kernel @k {                                   (.kernel k)
      backend.program @core0 on core(0) mem {sram = 4096 : i64} {
        %t = backend.entry_reg "r1" : !backend.reg<r1>    (no text; r0, r1, r2 at entry)
        %a = backend.ld %t, 8 : (!backend.reg<r1>) -> !backend.reg
        %d = backend.lsa core(3) sram, 0 : !backend.reg
        backend.label "loop"                              (loop:)
        backend.dma %d, %a, %n notify core(3) sram queue 0 : (...) -> ()
        backend.bne %a, %n, "loop" : (!backend.reg, !backend.reg) -> ()
        backend.halt
      }
    }
"""

from __future__ import annotations

import functools
import re
from abc import ABC
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, ClassVar

from xdsl.backend.assembly_printer import OneLineAssemblyPrintable
from xdsl.backend.register_type import RegisterType
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FileLineColLoc,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    IsolatedFromAbove,
    MemoryReadEffect,
    NoMemoryEffect,
    NoTerminator,
    Pure,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException

from legato import opset
from legato.dialects.fast_build import FastBuildOperation, install_fast_accessors
from legato.dialects.legato import ContextAttr, context_from_str, parse_context
from legato.dialects.shared_attrs import UNIT, int_attr, str_attr
from legato.targets.bertha import isa
from legato.targets.bertha.arch import debug
from legato.targets.bertha.arch.bounds import ADDRESS_FIELDS, Extent
from legato.targets.bertha.asm import AsmModule, AsmProgram, format_context
from legato.targets.bertha.asm import parse_context as parse_asm_context

NUM_REGS = 32
SPACES = ("sram", "mpu_buffer", "private_dram")
DTYPES = ("bf16", "f32", "f16", "i32")
IMM_MIN, IMM_MAX, UIMM_MAX = -(1 << 31), (1 << 31) - 1, (1 << 32) - 1
MAX_QUEUE = 255
MAX_SYNC_ID = 63
MAX_CORE = 63
ENTRY_REGS = ("r0", "r1", "r2")
"""Registers with a defined value at entry: r0 = 0, r1 = Instruction Table, r2 = core index."""

_LABEL_RE = re.compile(r"^[A-Za-z_.$][\w.$]*$")


# ---------------------------------------------------------------------------------------------
# Register type
# ---------------------------------------------------------------------------------------------


@irdl_attr_definition
class RegType(RegisterType):
    """`!backend.reg` (unallocated) or `!backend.reg<r5>` (r0..r31); `!backend.reg<j3>` is
    xDSL's "infinite" register j3 (for allocators that color before assigning).
    Builders: `RegType.unallocated()`, `RegType.from_name("r5")`, `RegType.from_index(5)`,
    `reg(5)`."""

    name = "backend.reg"

    @classmethod
    def index_by_name(cls) -> dict[str, int]:
        return {f"r{i}": i for i in range(NUM_REGS)}

    @classmethod
    def infinite_register_prefix(cls) -> str:
        return "j"

    @classmethod
    def allocatable_registers(cls) -> Sequence[RegType]:
        """r3..r31 (r0 is zero; r1 and r2 hold the entry values)."""
        return tuple(cls.from_index(i) for i in range(3, NUM_REGS))


def reg(index: int | str | None = None) -> RegType:
    """`reg()` unallocated, `reg(5)` or `reg("r5")` allocated."""
    if index is None:
        return _UNALLOCATED
    if isinstance(index, str):
        return RegType.from_name(index)
    return _allocated(index)


# Register types are immutable values: every instruction's operands and results share these
# instead of building and verifying a new attribute each (~3 per instruction).
_UNALLOCATED = RegType.unallocated()


@functools.cache
def _allocated(index: int) -> RegType:
    return RegType.from_index(index)


def _rn(value: SSAValue) -> str:
    """The assembly name of a register value; raises when unallocated."""
    t = value.type
    assert isinstance(t, RegType)
    if not t.is_allocated or t.register_name.startswith("j"):
        owner = value.owner
        name = owner.name if isinstance(owner, Operation) else "block argument"
        raise ValueError(f"{name}: register {t} is not allocated to r0..r31")
    return t.register_name


def _ri(value: SSAValue) -> int:
    """The register number of a register value (an ISA field); raises when unallocated."""
    t = value.type
    if type(t) is RegType and type(t.index) is IntAttr and t.index.data >= 0:
        return t.index.data  # the common case, without the ABC instance checks below
    assert isinstance(t, RegType)
    if not isinstance(t.index, IntAttr) or t.index.data < 0:
        _rn(value)  # raises, naming the op
    return t.index.data  # type: ignore[union-attr]


Fields = tuple[int, int, int, int, int]
"""The raw fields (a, b, c, d, imm) of one instruction word (`legato.targets.bertha.isa`)."""


def _core_fields(core: IntAttr | None, core_reg: SSAValue | None) -> tuple[int, int]:
    """(core selector mode, static core index or register number) of `lsa` / a dma notify."""
    if core is not None:
        return isa.CORE_STATIC, core.data
    if core_reg is not None:
        return isa.CORE_REG, _ri(core_reg)
    return isa.CORE_SELF, 0


def _offset_to(op: Operation, target: StringAttr, pc: int, labels: dict[str, int]) -> int:
    """The pc-relative offset of a branch at `pc` to label `target`."""
    if target.data not in labels:
        raise ValueError(f"{op.name} at instruction {pc}: undefined label {target.data!r}")
    return labels[target.data] - pc


# ---------------------------------------------------------------------------------------------
# Syntax helpers
# ---------------------------------------------------------------------------------------------


def _parse_imm(parser: Parser) -> int:
    return parser.parse_integer(allow_boolean=False)


def _parse_label(parser: Parser) -> StringAttr:
    pos = parser.pos
    text = parser.parse_str_literal(" (a label name)")
    if not _LABEL_RE.match(text):
        parser.raise_error(f"invalid label name {text!r}", pos, parser.pos)
    return StringAttr(text)


def _parse_enum(parser: Parser, allowed: Sequence[str], what: str) -> StringAttr:
    pos = parser.pos
    text = parser.parse_identifier(context_msg=f" ({what})")
    if text not in allowed:
        parser.raise_error(
            f"unknown {what} '{text}'; expected one of {', '.join(allowed)}", pos, parser.pos
        )
    return StringAttr(text)


def _parse_types(
    parser: Parser, operands: Sequence[Parser.UnresolvedOperand], has_result: bool
) -> tuple[list[SSAValue], list[Attribute]]:
    """`: T` (no operands, one result), `: (T, ...) -> T` or `: (T, ...) -> ()`."""
    if not operands and not has_result:
        return [], []
    parser.parse_punctuation(":")
    if not operands:
        return [], [parser.parse_type()]
    pos = parser.pos
    ins = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
    if len(ins) != len(operands):
        parser.raise_error(
            f"expected {len(operands)} operand types, got {len(ins)}", pos, parser.pos
        )
    parser.parse_punctuation("->")
    if has_result:
        outs = [parser.parse_type()]
    else:
        parser.parse_punctuation("(")
        parser.parse_punctuation(")")
        outs = []
    return [parser.resolve_operand(o, t) for o, t in zip(operands, ins)], outs


def _print_types(printer: Printer, op: Operation) -> None:
    if not op.operands and not op.results:
        return
    printer.print_string(" : ")
    if not op.operands:
        printer.print_attribute(op.results[0].type)
        return
    printer.print_string("(")
    printer.print_list((o.type for o in op.operands), printer.print_attribute)
    printer.print_string(") -> ")
    if op.results:
        printer.print_attribute(op.results[0].type)
    else:
        printer.print_string("()")


def _check_imm(op: Operation, value: int, lo: int, hi: int, what: str = "immediate") -> None:
    if not lo <= value <= hi:
        raise VerifyException(f"{op.name}: {what} {value} out of range [{lo}, {hi}]")


_int = int_attr


BOUNDS_ATTR = "legato.bounds"
"""Discardable attribute of an instruction op whose accesses the runtime checks: `{b = "arg 1",
a = "sram 0+128"}`, per address field (`a`..`d` of the instruction word) the extent its bytes
must lie in (`legato.targets.bertha.arch.bounds`; the binary's `.legato.bounds`)."""


def op_bounds(op: Operation) -> dict[str, Extent]:
    """{field: Extent} of `op`'s `legato.bounds` ({} without one); VerifyException when it is
    malformed or names a field that is not one of the instruction's addresses."""
    attr = op.attributes.get(BOUNDS_ATTR)
    if attr is None:
        return {}
    mnemonic = getattr(op, "MNEMONIC", "")
    fmt = isa.BY_MNEMONIC[mnemonic].format if mnemonic in isa.BY_MNEMONIC else None
    allowed = ADDRESS_FIELDS.get(fmt, {})
    if not isinstance(attr, DictionaryAttr):
        raise VerifyException(f"{op.name}: {BOUNDS_ATTR} must be a dictionary")
    out = {}
    for f, v in attr.data.items():
        if f not in allowed:
            raise VerifyException(
                f"{op.name}: {BOUNDS_ATTR} names field {f!r}, which is not an address of "
                f"{mnemonic or op.name} (its addresses: {', '.join(allowed) or 'none'})"
            )
        try:
            if not isinstance(v, StringAttr):
                raise ValueError(f"{v} is not a string")
            out[f] = Extent.parse(v.data)
        except ValueError as e:
            raise VerifyException(f"{op.name}: {BOUNDS_ATTR} field {f!r}: {e}") from None
    return out


class BackendOp(FastBuildOperation, OneLineAssemblyPrintable, ABC):
    """Base of every backend op. `MNEMONIC` is the ISA mnemonic (empty for pseudo-ops)."""

    MNEMONIC: ClassVar[str] = ""

    def assembly_line(self) -> str | None:
        raise NotImplementedError

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        """The instruction's fields (a, b, c, d, imm; imm may be negative) once registers are
        allocated: what the assembler makes of `assembly_line()`. `pc` is the op's instruction
        index in its program, `labels` the index each label of the program names."""
        raise NotImplementedError

    def immediate(self) -> int:
        """The imm32 field as far as it does not depend on registers: what sizes the
        instruction's accesses (`arch.bounds.access_spans`): dtypes, broadcast, offsets."""
        offset = getattr(self, "offset", None)
        return offset.data if isinstance(offset, IntAttr) else 0

    def instruction(self, pc: int, labels: dict[str, int]) -> isa.Instruction:
        """The encoded instruction (validated like a decode) of this op: `MNEMONIC`'s entry of
        the ISA table with `fields(pc, labels)`."""
        try:
            return isa.make(self.MNEMONIC, *self.fields(pc, labels))
        except (isa.DecodeError, ValueError) as e:
            raise ValueError(f"{self.name} at instruction {pc}: {e}") from None

    def _finish(self, parser: Parser) -> None:
        self.attributes |= parser.parse_optional_attr_dict()

    def _print_attrs(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)


# ---------------------------------------------------------------------------------------------
# Structure and pseudo-ops
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class KernelOp(FastBuildOperation):
    """`backend.kernel @name { backend.program ... }`: the programs of one kernel (the ASM
    `.kernel` directive). Optional `args`: the kernel's argument descriptors (`#core.arg`),
    carried for the binary's metadata. Builder: `KernelOp(name, programs=(), args=None)`."""

    name = "backend.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    args = opt_prop_def(ArrayAttr)
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), SymbolTable(), NoTerminator(), IsolatedFromAbove())

    def __init__(
        self,
        name: str,
        programs: Sequence[Operation] = (),
        args: ArrayAttr | Sequence[Attribute] | None = None,
    ):
        if args is not None and not isinstance(args, ArrayAttr):
            args = ArrayAttr(args)
        super().__init__(
            properties={"sym_name": StringAttr(name), "args": args},
            regions=[Region(Block(programs))],
        )

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        args = None
        if parser.parse_optional_keyword("args") is not None:
            args = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, parser.parse_attribute
            )
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        if not body.blocks:
            body.add_block(Block())
        op = cls.create(
            properties={"sym_name": StringAttr(name)}
            | ({"args": ArrayAttr(args)} if args is not None else {}),
            regions=[body],
        )
        if attrs is not None:
            op.attributes |= attrs.data
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        if self.args is not None:
            printer.print_string(" args [")
            printer.print_list(self.args.data, printer.print_attribute)
            printer.print_string("]")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)

    @property
    def programs(self) -> list[ProgramOp]:
        return [op for op in self.body.block.ops if isinstance(op, ProgramOp)]

    def verify_(self) -> None:
        for op in self.body.block.ops:
            if not isinstance(op, ProgramOp):
                raise VerifyException(f"backend.kernel holds only backend.program, found {op.name}")


class OpVerifyException(VerifyException):
    """A kernel-wide check failed at one of its ops (`op`): `legato-opt` reports the error at
    that op's location."""

    def __init__(self, message: str, op: Operation | None = None):
        super().__init__(message)
        self.op = op


def _num_cores(kernel: Operation) -> int | None:
    """The model's core count, when the enclosing module carries the model (`legato.model`)."""
    module = kernel.parent_op()
    attr = module.attributes.get("legato.model") if module is not None else None
    if isinstance(attr, DictionaryAttr):
        n = attr.data.get("num_cores")
        if isinstance(n, IntegerAttr):
            return n.value.data
    return None


_SYNC_NONE, _SYNC_DMA, _SYNC_LSA, _SYNC_QWAIT, _SYNC_POST, _SYNC_WAIT, _SYNC_BARRIER = range(7)


@functools.cache
def _sync_kind(cls: type) -> int:
    """Which of `verify_sync`'s cases an op class is (decided once per class: the instance
    checks against each case per op were most of its time)."""
    for kind, case in (
        (_SYNC_DMA, (DmaOp, Dma2dOp)),
        (_SYNC_LSA, LsaOp),
        (_SYNC_QWAIT, QwaitOp),
        (_SYNC_POST, SemPostOp),
        (_SYNC_WAIT, SemWaitOp),
        (_SYNC_BARRIER, BarrierOp),
    ):
        if issubclass(cls, case):
            return kind
    return _SYNC_NONE


@functools.cache
def encodes(cls: type) -> bool:
    """Whether ops of class `cls` are instructions of their program (a backend op with a
    mnemonic, not a label): what `ProgramOp.encode` numbers."""
    return issubclass(cls, BackendOp) and bool(cls.MNEMONIC) and not issubclass(cls, LabelOp)


def programs(root: Operation) -> Iterator[ProgramOp]:
    """Every `backend.program` in `root`, in `walk()` order, without walking their bodies."""
    if isinstance(root, ProgramOp):
        yield root
        return
    for region in root.regions:
        for block in region.blocks:
            for op in block.ops:
                yield from programs(op)


@dataclass(frozen=True)
class Unsettled:
    """A wait `verify_sync` could not prove released by counting: `op` (a `qwait` or
    `sem_wait`) and `reason`, why its count is dynamic. Left to the emulator's deadlock report."""

    op: Operation
    reason: str

    def __str__(self) -> str:
        return f"{self.op.name} at {source_line(self.op)} ({self.reason})"


def verify_sync(kernel: KernelOp, num_cores: int | None = None) -> list[Unsettled]:
    """What would deadlock or fault on the machine and is visible in the IR: a `qwait` on a
    (core, space, queue) that no `dma`/`dma2d` of the kernel notifies, a `sem.wait` on a
    semaphore nothing posts, `barrier`s of one id with different counts or with more modules
    counted than programs reach it, and (when the module carries the model) a core index past
    the model's cores. Where no program on either side loops (branches) or names a core in a
    register, the counts are proven too: a core's k-th `qwait` on a queue needs a k-th DMA
    notifying it, a semaphore's waits as many posts (`_verify_counts`); such an error names both
    source lines, the blocking wait (its location) and the last send or post (in the message),
    as does a barrier count mismatch (both arrivals). Loops make counts dynamic: then queues
    and semaphores are checked for a sender at all, barriers for the modules that can reach
    them, and the rest is left to the emulator's deadlock report. `num_cores`: the model's, else
    the module's `legato.model`'s, else core indices are not range-checked. OpVerifyException
    naming the op at fault. Returns the waits whose counts were not proven (`Unsettled`, in
    program order), so that a caller can tell the user what is left to the emulator."""
    n = num_cores if num_cores is not None else _num_cores(kernel)
    notified: set[tuple] = set()  # (core or "*", space, queue)
    posted: set[int] = set()
    barriers: dict[int, list[tuple[Operation, int]]] = {}  # id -> [(op, modules)]
    waits: list[tuple[Operation, list[int] | None]] = []
    # the static counts (programs without branches): (core, space, queue) -> the notifying
    # DMAs, one entry per send; sem id -> [(post, count)]; queue -> the qwaits; sem id -> waits
    sends: dict[tuple, list[Operation]] = {}
    posts: dict[int, list[tuple[Operation, int]]] = {}
    qwaits: dict[tuple, list[Operation]] = {}
    sem_waits: dict[int, list[tuple[Operation, int]]] = {}
    dynamic: set = set()  # queues / semaphores some looping or register-addressed op touches
    why: dict = {}  # a dynamic key -> the first reason it became dynamic

    def make_dynamic(key, reason: str) -> None:
        dynamic.add(key)
        why.setdefault(key, reason)

    def check_core(op: Operation, k: int, what: str) -> None:
        if n is not None and not 0 <= k < n:
            raise OpVerifyException(
                f"{op.name}: {what} core {k} is out of range: the model has {n} cores "
                f"(valid indices 0..{n - 1})",
                op,
            )

    for prog in kernel.programs:
        ctx = prog.ctx
        if ctx.is_core:
            check_core(prog, ctx.core_index, "the program runs on")
            cores: list[int] | None = [ctx.core_index]
        elif ctx.is_all_cores:
            cores = list(range(n)) if n is not None else None
        else:
            cores = []
        modules = 1 if not ctx.is_all_cores else (n if n is not None else 0)
        ops = list(iter(prog.body.block.ops))  # iter: no length hint (a walk of its own)
        loops = cores is None or any(isinstance(op, (LabelOp, JmpOp, BranchOp)) for op in ops)
        if cores is None:
            loop_why = f"program {prog.sym_name.data} runs on all cores of an unknown count"
        else:
            loop_why = f"program {prog.sym_name.data} branches"
        for op in ops:
            kind = _sync_kind(type(op))
            if kind == _SYNC_NONE:
                continue
            if kind == _SYNC_DMA and op.notify is not None:
                space, queue = op.notify_space.data, op.notify_queue.data  # type: ignore[union-attr]
                if op.notify_core is not None:
                    check_core(op, op.notify_core.data, "the notified")
                    notified.add((op.notify_core.data, space, queue))
                    senders = [op.notify_core.data] * max(modules, 1)
                elif op.notify_core_reg is not None or cores is None:
                    notified.add(("*", space, queue))
                    senders = None
                else:
                    notified.update((c, space, queue) for c in cores)
                    senders = cores
                if senders is None:
                    make_dynamic(
                        (space, queue), f"a dma at {source_line(op)} names its core in a register"
                    )
                elif loops:
                    make_dynamic((space, queue), loop_why)
                else:
                    for c in senders:
                        sends.setdefault((c, space, queue), []).append(op)
            elif kind == _SYNC_LSA and op.core is not None:
                check_core(op, op.core.data, "the addressed")
            elif kind == _SYNC_QWAIT:
                waits.append((op, cores))
                key = (op.space.data, op.queue.data)
                if loops:
                    make_dynamic(key, loop_why)
                else:
                    for c in cores or ():
                        qwaits.setdefault((c, *key), []).append(op)
            elif kind == _SYNC_POST:
                posted.add(op.sync_id.data)
                if loops or not modules:
                    make_dynamic(op.sync_id.data, loop_why)
                posts.setdefault(op.sync_id.data, []).append((op, op.count.data * modules))
            elif kind == _SYNC_WAIT and op.count.data > 0:
                waits.append((op, None))
                if loops or not modules:
                    make_dynamic(op.sync_id.data, loop_why)
                sem_waits.setdefault(op.sync_id.data, []).append((op, op.count.data * modules))
            elif kind == _SYNC_BARRIER:
                barriers.setdefault(op.sync_id.data, []).append((op, modules))
    for op, cores in waits:
        if isinstance(op, SemWaitOp):
            if op.sync_id.data not in posted:
                raise OpVerifyException(
                    f"backend.sem_wait: semaphore {op.sync_id.data} is never posted in the "
                    "kernel (no backend.sem_post of it): this wait would block forever",
                    op,
                )
            continue
        assert isinstance(op, QwaitOp)
        space, queue = op.space.data, op.queue.data
        for c in cores if cores is not None else ["*"]:
            if c == "*":
                ok = any(k[1:] == (space, queue) for k in notified)
            else:
                ok = (c, space, queue) in notified or ("*", space, queue) in notified
            if not ok:
                where = "" if c == "*" else f" on core {c}"
                raise OpVerifyException(
                    f"backend.qwait{where}: no dma of the kernel notifies {space} queue "
                    f"{queue}{where}: this wait would block forever",
                    op,
                )
    _verify_counts(sends, qwaits, posts, sem_waits, dynamic)
    for bid, arrivals in barriers.items():
        first, count = arrivals[0][0], arrivals[0][0].count.data
        for op, _m in arrivals:
            if op.count.data != count:
                raise OpVerifyException(
                    f"backend.barrier {bid}: counts {count} (at {source_line(first)}) and "
                    f"{op.count.data} (at {source_line(op)}) differ (the machine faults when "
                    "arrivals disagree)",
                    op,
                )
        reach = sum(m for _op, m in arrivals)
        unknown = any(m == 0 for _op, m in arrivals)
        if not unknown and reach < count:
            raise OpVerifyException(
                f"backend.barrier {bid} waits for {count} modules but only {reach} program "
                "module(s) reach it: it would block forever",
                first,
            )
    unsettled = []
    for op, _cores in waits:
        key = op.sync_id.data if isinstance(op, SemWaitOp) else (op.space.data, op.queue.data)
        if key in dynamic:
            what = f"semaphore {key}" if isinstance(op, SemWaitOp) else f"{key[0]} queue {key[1]}"
            unsettled.append(Unsettled(op, f"{what}: {why[key]}"))
    return unsettled


def source_line(op: Operation) -> str:
    """`file:line` of `op`'s source location, else the op and its program."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}"
    prog = op.parent_op()
    name = prog.sym_name.data if isinstance(prog, ProgramOp) else "?"
    return f"{op.name} in program {name} (no source location)"


def _verify_counts(sends, qwaits, posts, sem_waits, dynamic) -> None:
    """The proofs of `verify_sync` on static counts (no program on either side loops or names
    a core in a register): the k-th qwait of a queue needs a k-th DMA notifying it, and the
    waits of a semaphore need as many posts. A violation names both source lines: the wait
    that blocks forever and the last send or post that could have released it."""
    for key, ws in qwaits.items():
        if key[1:] in dynamic:
            continue
        got = sends.get(key, [])
        if got and len(ws) > len(got):
            core, space, queue = key
            op = ws[len(got)]
            raise OpVerifyException(
                f"backend.qwait: core {core} waits on {space} queue {queue} {len(ws)} times but "
                f"the kernel's DMAs notify it only {len(got)} time(s), the last at "
                f"{source_line(got[-1])}: wait {len(got) + 1} (at {source_line(op)}) would "
                "block forever",
                op,
            )
    for sem, ws in sem_waits.items():
        if sem in dynamic or sem not in posts:
            continue  # never posted: refused below with the wait alone
        total = sum(c for _op, c in posts[sem])
        need = sum(c for _op, c in ws)
        if need > total:
            op = ws[-1][0]
            raise OpVerifyException(
                f"backend.sem_wait: the kernel posts semaphore {sem} only {total} time(s), the "
                f"last post at {source_line(posts[sem][-1][0])}, but waits for it {need} "
                f"time(s), the last wait at {source_line(op)}: a wait would block forever",
                op,
            )


@irdl_op_definition
class ProgramOp(FastBuildOperation):
    """`backend.program @core0 on core(0) [mem {sram = 4096 : i64, ...}] { ... }`: one
    module's instruction stream (ASM `.program core0 on core(0)` and `.mem` lines). The body is
    one block of backend ops, no terminator (end with `backend.halt`).
    Builder: `ProgramOp(name, ctx, ops=(), mem=None)`; `mem` a dict space -> bytes."""

    name = "backend.program"

    sym_name = prop_def(SymbolNameConstraint())
    ctx = prop_def(ContextAttr)
    mem = opt_prop_def(DictionaryAttr)
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), NoTerminator(), IsolatedFromAbove())

    def __init__(
        self,
        name: str,
        ctx: ContextAttr | str,
        ops: Sequence[Operation] = (),
        mem: dict[str, int] | DictionaryAttr | None = None,
    ):
        if isinstance(ctx, str):
            ctx = context_from_str(ctx)
        if isinstance(mem, dict):
            mem = DictionaryAttr({k: IntegerAttr(v, i64) for k, v in mem.items()})
        super().__init__(
            properties={"sym_name": StringAttr(name), "ctx": ctx, "mem": mem},
            regions=[Region(Block(ops))],
        )

    @property
    def memory(self) -> dict[str, int]:
        """Declared footprint per core space (bytes)."""
        if self.mem is None:
            return {}
        return {k: v.value.data for k, v in self.mem.data.items()}  # type: ignore[union-attr]

    @classmethod
    def parse(cls, parser: Parser) -> ProgramOp:
        name = parser.parse_symbol_name().data
        parser.parse_keyword("on")
        ctx = parse_context(parser)
        mem = None
        if parser.parse_optional_keyword("mem") is not None:
            mem = DictionaryAttr(parser.parse_optional_attr_dict())
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        if not body.blocks:
            body.add_block(Block())
        op = cls.create(
            properties={"sym_name": StringAttr(name), "ctx": ctx}
            | ({"mem": mem} if mem is not None else {}),
            regions=[body],
        )
        if attrs is not None:
            op.attributes |= attrs.data
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(f" on {self.ctx.spelling}")
        if self.mem is not None:
            printer.print_string(" mem ")
            printer.print_attr_dict(self.mem.data)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=True)

    def verify_(self) -> None:
        if self.body.block.args:
            raise VerifyException("backend.program: the body takes no block arguments")
        for space, v in self.mem.data.items() if self.mem is not None else ():
            if space not in SPACES:
                raise VerifyException(
                    f"backend.program: mem space '{space}' is not one of {', '.join(SPACES)}"
                )
            if not isinstance(v, IntegerAttr) or v.value.data < 0:
                raise VerifyException(f"backend.program: mem {space} must be a byte count")
        labels: set[str] = set()
        for op in self.body.block.ops:
            if isinstance(op, LabelOp):
                if op.label.data in labels:
                    raise VerifyException(
                        f"backend.program @{self.sym_name.data}: label '{op.label.data}' "
                        "defined twice"
                    )
                labels.add(op.label.data)
        for op in self.body.block.ops:
            target = getattr(op, "target", None)
            if isinstance(op, BranchOp | JmpOp) and target.data not in labels:  # type: ignore[union-attr]
                raise VerifyException(
                    f"backend.program @{self.sym_name.data}: {op.name} targets undefined label "
                    f"'{target.data}'"  # type: ignore[union-attr]
                )
            if self.ctx.is_top and isinstance(op, CoreOnlyOp):
                raise VerifyException(
                    f"backend.program @{self.sym_name.data} on top: {op.name} needs a core "
                    "(top has no queues, MPU or VPU)"
                )

    def encode(self, ops: Sequence[Operation] | None = None) -> AsmProgram:
        """The program's instructions, encoded straight from the ops (no assembly text): the
        same `AsmProgram` that `asm.assemble` makes of `assembly_lines()`. `ops`: the ops of
        its body, when the caller has listed them already."""
        instructions: list[BackendOp] = []
        labels: dict[str, int] = {}
        for op in self.body.block.ops if ops is None else ops:
            if encodes(type(op)):
                instructions.append(op)  # type: ignore[arg-type]
            elif isinstance(op, LabelOp):
                labels[op.label.data] = len(instructions)
            elif not isinstance(op, BackendOp):
                raise TypeError(f"{op.name} in backend.program has no encoding")
        mem = self.memory
        return AsmProgram(
            self.sym_name.data,
            format_context(*parse_asm_context(self.ctx.spelling)),
            [op.instruction(pc, labels) for pc, op in enumerate(instructions)],
            labels,
            {space: mem[space] for space in SPACES if space in mem},
        )

    def assembly_lines(self) -> list[str]:
        """The program as ASM lines: `.program`, `.mem`, then labels and indented
        instructions."""
        lines = [f".program {self.sym_name.data} on {self.ctx.spelling}"]
        mem = self.memory
        for space in SPACES:
            if space in mem:
                lines.append(f".mem {space} {mem[space]}")
        for op in self.body.block.ops:
            if not isinstance(op, BackendOp):
                raise TypeError(f"{op.name} in backend.program has no assembly")
            line = op.assembly_line()
            if line is None:
                continue
            lines.append(line if isinstance(op, LabelOp) else "    " + line)
        return lines


def print_assembly(module: ModuleOp | KernelOp | ProgramOp, output: IO[str] | None = None) -> str:
    """The ASM text of every backend kernel/program in `module` (what the assembler reads);
    also written to `output` when given."""
    lines: list[str] = []
    for op in module.walk():
        if isinstance(op, KernelOp):
            lines.append(f".kernel {op.sym_name.data}")
        elif isinstance(op, ProgramOp):
            lines.extend(op.assembly_lines())
    text = "\n".join(lines) + "\n"
    if output is not None:
        output.write(text)
    return text


def _kernels(root: Operation) -> Iterator[KernelOp]:
    """Every `backend.kernel` in `root`, in `walk()` order, without walking their programs."""
    for region in root.regions:
        for block in region.blocks:
            for op in block.ops:
                if isinstance(op, KernelOp):
                    yield op
                elif not isinstance(op, ProgramOp):
                    yield from _kernels(op)


def encode(
    module: ModuleOp | KernelOp | ProgramOp,
    ops: Mapping[ProgramOp, Sequence[Operation]] | None = None,
) -> AsmModule:
    """Every backend kernel/program in `module` encoded to instruction words, straight from the
    ops: equal to `asm.assemble(print_assembly(module))`, without the text. `ops`: each
    program's ops, when the caller has listed them already."""
    kernel: str | None = None
    if isinstance(module, KernelOp):
        kernel = module.sym_name.data
    elif not isinstance(module, ProgramOp):
        kernel = next((op.sym_name.data for op in _kernels(module)), None)
    # the programs, without walking every instruction of them (`module.walk()` did)
    return AsmModule(kernel, [p.encode(None if ops is None else ops[p]) for p in programs(module)])


@irdl_op_definition
class LabelOp(BackendOp):
    """`backend.label "loop"`: a branch target (ASM `loop:`). Builder: `LabelOp("loop")`."""

    name = "backend.label"
    label = prop_def(StringAttr)

    def __init__(self, label: str | StringAttr):
        super().__init__(
            properties={"label": label if isinstance(label, StringAttr) else StringAttr(label)}
        )

    @classmethod
    def parse(cls, parser: Parser) -> LabelOp:
        op = LabelOp(_parse_label(parser))
        op._finish(parser)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.label.data)
        self._print_attrs(printer)

    def verify_(self) -> None:
        if not _LABEL_RE.match(self.label.data):
            raise VerifyException(f"backend.label: invalid label name {self.label.data!r}")

    def assembly_line(self) -> str:
        return f"{self.label.data}:"


@irdl_op_definition
class EntryRegOp(BackendOp):
    """`%t = backend.entry_reg "r1" : !backend.reg<r1>`: a register the hardware sets at
    entry (r0 = 0, r1 = Instruction Table address, r2 = core index). No assembly.
    Builder: `EntryRegOp("r1")`."""

    name = "backend.entry_reg"
    traits = traits_def(Pure())
    reg = prop_def(StringAttr)
    result = result_def(RegType)

    def __init__(self, register: str):
        super().__init__(
            properties={"reg": StringAttr(register)}, result_types=[RegType.from_name(register)]
        )

    @classmethod
    def parse(cls, parser: Parser) -> EntryRegOp:
        pos = parser.pos
        name = parser.parse_str_literal(" (r0, r1 or r2)")
        if name not in ENTRY_REGS:
            parser.raise_error(
                f"entry register must be one of {', '.join(ENTRY_REGS)}, got {name!r}",
                pos,
                parser.pos,
            )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls.create(properties={"reg": StringAttr(name)}, result_types=[t])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.reg.data)
        self._print_attrs(printer)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    def verify_(self) -> None:
        if self.reg.data not in ENTRY_REGS:
            raise VerifyException(
                f"backend.entry_reg: '{self.reg.data}' is not set at entry; expected one of "
                f"{', '.join(ENTRY_REGS)}"
            )
        if self.result.type != RegType.from_name(self.reg.data):
            raise VerifyException(
                f"backend.entry_reg: result type must be !backend.reg<{self.reg.data}>"
            )

    def assembly_line(self) -> None:
        return None


# ---------------------------------------------------------------------------------------------
# Instructions without operands
# ---------------------------------------------------------------------------------------------


class NullaryOp(BackendOp, ABC):
    """`backend.nop`, `backend.halt`, `backend.dmawait`. Builder: `HaltOp()`."""

    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()

    def assembly_line(self) -> str:
        return self.MNEMONIC

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return 0, 0, 0, 0, 0


@irdl_op_definition
class NopOp(NullaryOp):
    name = "backend.nop"
    MNEMONIC: ClassVar[str] = "nop"


@irdl_op_definition
class HaltOp(NullaryOp):
    name = "backend.halt"
    MNEMONIC: ClassVar[str] = "halt"


@irdl_op_definition
class DmaWaitOp(NullaryOp):
    name = "backend.dmawait"
    MNEMONIC: ClassVar[str] = "dmawait"


# ---------------------------------------------------------------------------------------------
# Scalar
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class LiOp(BackendOp):
    """`%d = backend.li 42 : !backend.reg` (`li rd, imm`; imm in [-2^31, 2^32-1], sign-extended
    from 32 bits). Builder: `LiOp(imm, rd=None)` (`rd` a RegType, default unallocated)."""

    name = "backend.li"
    MNEMONIC: ClassVar[str] = "li"
    traits = traits_def(Pure())
    imm = prop_def(IntAttr)
    rd = result_def(RegType)

    def __init__(self, imm: int | IntAttr, rd: RegType | None = None):
        super().__init__(properties={"imm": _int(imm)}, result_types=[rd or reg()])

    @classmethod
    def parse(cls, parser: Parser) -> LiOp:
        imm = _parse_imm(parser)
        attrs = parser.parse_optional_attr_dict()
        _, outs = _parse_types(parser, [], True)
        op = cls.create(properties={"imm": IntAttr(imm)}, result_types=outs)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.imm.data}")
        self._print_attrs(printer)
        _print_types(printer, self)

    def verify_(self) -> None:
        _check_imm(self, self.imm.data, IMM_MIN, UIMM_MAX)

    def assembly_line(self) -> str:
        v = self.imm.data
        if v > IMM_MAX:  # canonical text is the sign-extended value
            v -= 1 << 32
        return f"li {_rn(self.rd)}, {v}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.rd), 0, 0, 0, self.imm.data


@irdl_op_definition
class LihOp(BackendOp):
    """`%d = backend.lih %lo, 5 : (!backend.reg<r3>) -> !backend.reg<r3>`
    (`lih rd, imm`: rd = imm << 32 | low half of rd). The instruction reads and writes rd, so
    `%lo` and the result must get the same register. Builder: `LihOp(lo, imm, rd=None)`."""

    name = "backend.lih"
    MNEMONIC: ClassVar[str] = "lih"
    traits = traits_def(Pure())
    lo = operand_def(RegType)
    imm = prop_def(IntAttr)
    rd = result_def(RegType)

    def __init__(self, lo: SSAValue | Operation, imm: int | IntAttr, rd: RegType | None = None):
        super().__init__(operands=[lo], properties={"imm": _int(imm)}, result_types=[rd or reg()])

    @classmethod
    def parse(cls, parser: Parser) -> LihOp:
        lo = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        imm = _parse_imm(parser)
        attrs = parser.parse_optional_attr_dict()
        ins, outs = _parse_types(parser, [lo], True)
        op = cls.create(operands=ins, properties={"imm": IntAttr(imm)}, result_types=outs)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.lo)
        printer.print_string(f", {self.imm.data}")
        self._print_attrs(printer)
        _print_types(printer, self)

    def verify_(self) -> None:
        _check_imm(self, self.imm.data, IMM_MIN, IMM_MAX)
        lo, rd = self.lo.type, self.rd.type
        assert isinstance(lo, RegType) and isinstance(rd, RegType)
        if lo.is_allocated and rd.is_allocated and lo != rd:
            raise VerifyException(
                f"backend.lih reads and writes rd: operand {lo} and result {rd} must be the "
                "same register"
            )

    def assembly_line(self) -> str:
        return f"lih {_rn(self.rd)}, {self.imm.data}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.rd), 0, 0, 0, self.imm.data


@irdl_op_definition
class LsaOp(BackendOp):
    """`%d = backend.lsa [core(K) | core(%r)] <space>, <offset> : ...`
    (`lsa rd, [coreK.|core(rN).]SPACE, imm`): rd = base of SPACE of the running core, of core K,
    or of the core whose index is in `%r`; plus the unsigned offset.
    Builder: `LsaOp(space, offset, core=None, rd=None)`; `core` an int (static) or a register
    value."""

    name = "backend.lsa"
    MNEMONIC: ClassVar[str] = "lsa"
    traits = traits_def(Pure())
    core_reg = opt_operand_def(RegType)
    core = opt_prop_def(IntAttr)
    space = prop_def(StringAttr)
    offset = prop_def(IntAttr)
    rd = result_def(RegType)

    def __init__(
        self,
        space: str | StringAttr,
        offset: int | IntAttr,
        core: int | SSAValue | Operation | None = None,
        rd: RegType | None = None,
    ):
        props: dict[str, Attribute | None] = {
            "space": str_attr(space),
            "offset": _int(offset),
            "core": IntAttr(core) if isinstance(core, int) else None,
        }
        operands = [] if core is None or isinstance(core, int) else [core]
        super().__init__(operands=[operands], properties=props, result_types=[rd or reg()])

    @classmethod
    def parse(cls, parser: Parser) -> LsaOp:
        core = None
        core_reg = []
        if parser.parse_optional_keyword("core") is not None:
            with parser.in_parens():
                if (o := parser.parse_optional_unresolved_operand()) is not None:
                    core_reg = [o]
                else:
                    core = IntAttr(parser.parse_integer(allow_boolean=False, allow_negative=False))
        space = _parse_enum(parser, SPACES, "memory space")
        parser.parse_punctuation(",")
        offset = _parse_imm(parser)
        attrs = parser.parse_optional_attr_dict()
        ins, outs = _parse_types(parser, core_reg, True)
        props: dict[str, Attribute] = {"space": space, "offset": IntAttr(offset)}
        if core is not None:
            props["core"] = core
        op = cls.create(operands=ins, properties=props, result_types=outs)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        if self.core is not None:
            printer.print_string(f" core({self.core.data})")
        elif self.core_reg is not None:
            printer.print_string(" core(")
            printer.print_ssa_value(self.core_reg)
            printer.print_string(")")
        printer.print_string(f" {self.space.data}, {self.offset.data}")
        self._print_attrs(printer)
        _print_types(printer, self)

    def verify_(self) -> None:
        if self.space.data not in SPACES:
            raise VerifyException(
                f"backend.lsa: unknown space '{self.space.data}'; expected one of {', '.join(SPACES)}"
            )
        _check_imm(self, self.offset.data, 0, UIMM_MAX, "offset")
        if self.core is not None:
            if self.core_reg is not None:
                raise VerifyException(
                    "backend.lsa: give a static core or a core register, not both"
                )
            _check_imm(self, self.core.data, 0, MAX_CORE, "core index")

    def _selector(self) -> str:
        if self.core is not None:
            return f"core{self.core.data}."
        if self.core_reg is not None:
            return f"core({_rn(self.core_reg)})."
        return ""

    def assembly_line(self) -> str:
        return f"lsa {_rn(self.rd)}, {self._selector()}{self.space.data}, {self.offset.data}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        mode, core = _core_fields(self.core, self.core_reg)
        return _ri(self.rd), isa.SPACES[self.space.data], core, mode, self.offset.data


class RRROp(BackendOp, ABC):
    """`%d = backend.add %a, %b : (!backend.reg, !backend.reg) -> !backend.reg`
    (`add rd, rs1, rs2`). Builder: `AddOp(rs1, rs2, rd=None)`."""

    rs1 = operand_def(RegType)
    rs2 = operand_def(RegType)
    rd = result_def(RegType)

    def __init__(
        self, rs1: SSAValue | Operation, rs2: SSAValue | Operation, rd: RegType | None = None
    ):
        super().__init__(operands=[rs1, rs2], result_types=[rd or reg()])

    @classmethod
    def parse(cls, parser: Parser):
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        ins, outs = _parse_types(parser, [a, b], True)
        op = cls.create(operands=ins, result_types=outs)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        self._print_attrs(printer)
        _print_types(printer, self)

    def assembly_line(self) -> str:
        return f"{self.MNEMONIC} {_rn(self.rd)}, {_rn(self.rs1)}, {_rn(self.rs2)}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.rd), _ri(self.rs1), _ri(self.rs2), 0, 0


@irdl_op_definition
class AddOp(RRROp):
    name = "backend.add"
    MNEMONIC: ClassVar[str] = "add"
    traits = traits_def(Pure())


@irdl_op_definition
class SubOp(RRROp):
    name = "backend.sub"
    MNEMONIC: ClassVar[str] = "sub"
    traits = traits_def(Pure())


@irdl_op_definition
class MulOp(RRROp):
    name = "backend.mul"
    MNEMONIC: ClassVar[str] = "mul"
    traits = traits_def(Pure())


@irdl_op_definition
class DivOp(RRROp):
    name = "backend.div"
    MNEMONIC: ClassVar[str] = "div"
    traits = traits_def(NoMemoryEffect())  # not Pure: a zero divisor faults


@irdl_op_definition
class RemOp(RRROp):
    name = "backend.rem"
    MNEMONIC: ClassVar[str] = "rem"
    traits = traits_def(NoMemoryEffect())  # not Pure: a zero divisor faults


@irdl_op_definition
class AndOp(RRROp):
    name = "backend.and"
    MNEMONIC: ClassVar[str] = "and"
    traits = traits_def(Pure())


@irdl_op_definition
class OrOp(RRROp):
    name = "backend.or"
    MNEMONIC: ClassVar[str] = "or"
    traits = traits_def(Pure())


@irdl_op_definition
class XorOp(RRROp):
    name = "backend.xor"
    MNEMONIC: ClassVar[str] = "xor"
    traits = traits_def(Pure())


@irdl_op_definition
class ShlOp(RRROp):
    name = "backend.shl"
    MNEMONIC: ClassVar[str] = "shl"
    traits = traits_def(Pure())


@irdl_op_definition
class ShrOp(RRROp):
    name = "backend.shr"
    MNEMONIC: ClassVar[str] = "shr"
    traits = traits_def(Pure())


@irdl_op_definition
class SraOp(RRROp):
    name = "backend.sra"
    MNEMONIC: ClassVar[str] = "sra"
    traits = traits_def(Pure())


@irdl_op_definition
class MinOp(RRROp):
    name = "backend.min"
    MNEMONIC: ClassVar[str] = "min"
    traits = traits_def(Pure())


@irdl_op_definition
class MaxOp(RRROp):
    name = "backend.max"
    MNEMONIC: ClassVar[str] = "max"
    traits = traits_def(Pure())


@irdl_op_definition
class SltOp(RRROp):
    name = "backend.slt"
    MNEMONIC: ClassVar[str] = "slt"
    traits = traits_def(Pure())


@irdl_op_definition
class SeqOp(RRROp):
    name = "backend.seq"
    MNEMONIC: ClassVar[str] = "seq"
    traits = traits_def(Pure())


class RRIOp(BackendOp, ABC):
    """`%d = backend.addi %a, -4 : (!backend.reg) -> !backend.reg` (`addi rd, rs1, imm`).
    Builder: `AddiOp(rs1, imm, rd=None)`."""

    rs1 = operand_def(RegType)
    imm = prop_def(IntAttr)
    rd = result_def(RegType)

    def __init__(self, rs1: SSAValue | Operation, imm: int | IntAttr, rd: RegType | None = None):
        super().__init__(operands=[rs1], properties={"imm": _int(imm)}, result_types=[rd or reg()])

    @classmethod
    def parse(cls, parser: Parser):
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        imm = _parse_imm(parser)
        attrs = parser.parse_optional_attr_dict()
        ins, outs = _parse_types(parser, [a], True)
        op = cls.create(operands=ins, properties={"imm": IntAttr(imm)}, result_types=outs)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.rs1)
        printer.print_string(f", {self.imm.data}")
        self._print_attrs(printer)
        _print_types(printer, self)

    def verify_(self) -> None:
        _check_imm(self, self.imm.data, IMM_MIN, IMM_MAX)
        if self.MNEMONIC in ("divi", "remi") and self.imm.data == 0:
            raise VerifyException(f"{self.name}: division by a zero immediate")

    def assembly_line(self) -> str:
        return f"{self.MNEMONIC} {_rn(self.rd)}, {_rn(self.rs1)}, {self.imm.data}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.rd), _ri(self.rs1), 0, 0, self.imm.data


@irdl_op_definition
class AddiOp(RRIOp):
    name = "backend.addi"
    MNEMONIC: ClassVar[str] = "addi"
    traits = traits_def(Pure())


@irdl_op_definition
class MuliOp(RRIOp):
    name = "backend.muli"
    MNEMONIC: ClassVar[str] = "muli"
    traits = traits_def(Pure())


@irdl_op_definition
class AndiOp(RRIOp):
    name = "backend.andi"
    MNEMONIC: ClassVar[str] = "andi"
    traits = traits_def(Pure())


@irdl_op_definition
class ShliOp(RRIOp):
    name = "backend.shli"
    MNEMONIC: ClassVar[str] = "shli"
    traits = traits_def(Pure())


@irdl_op_definition
class ShriOp(RRIOp):
    name = "backend.shri"
    MNEMONIC: ClassVar[str] = "shri"
    traits = traits_def(Pure())


@irdl_op_definition
class DiviOp(RRIOp):
    name = "backend.divi"
    MNEMONIC: ClassVar[str] = "divi"
    traits = traits_def(NoMemoryEffect())  # not Pure: a zero divisor faults


@irdl_op_definition
class RemiOp(RRIOp):
    name = "backend.remi"
    MNEMONIC: ClassVar[str] = "remi"
    traits = traits_def(NoMemoryEffect())  # not Pure: a zero divisor faults


@irdl_op_definition
class LdOp(BackendOp):
    """`%d = backend.ld %base, 8 : (!backend.reg) -> !backend.reg` (`ld rd, 8(rs1)`).
    Builder: `LdOp(base, offset=0, rd=None)`."""

    name = "backend.ld"
    MNEMONIC: ClassVar[str] = "ld"
    traits = traits_def(MemoryReadEffect())  # dropped when unused, like a pure op
    base = operand_def(RegType)
    offset = prop_def(IntAttr)
    rd = result_def(RegType)

    def __init__(
        self, base: SSAValue | Operation, offset: int | IntAttr = 0, rd: RegType | None = None
    ):
        super().__init__(
            operands=[base], properties={"offset": _int(offset)}, result_types=[rd or reg()]
        )

    @classmethod
    def parse(cls, parser: Parser) -> LdOp:
        base = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        offset = _parse_imm(parser)
        attrs = parser.parse_optional_attr_dict()
        ins, outs = _parse_types(parser, [base], True)
        op = cls.create(operands=ins, properties={"offset": IntAttr(offset)}, result_types=outs)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.base)
        printer.print_string(f", {self.offset.data}")
        self._print_attrs(printer)
        _print_types(printer, self)

    def verify_(self) -> None:
        _check_imm(self, self.offset.data, IMM_MIN, IMM_MAX, "offset")

    def assembly_line(self) -> str:
        return f"ld {_rn(self.rd)}, {self.offset.data}({_rn(self.base)})"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.rd), _ri(self.base), 0, 0, self.offset.data


@irdl_op_definition
class StOp(BackendOp):
    """`backend.st %value, %base, 8 : (!backend.reg, !backend.reg) -> ()` (`st rs2, 8(rs1)`).
    Builder: `StOp(value, base, offset=0)`."""

    name = "backend.st"
    MNEMONIC: ClassVar[str] = "st"
    value = operand_def(RegType)
    base = operand_def(RegType)
    offset = prop_def(IntAttr)

    def __init__(
        self, value: SSAValue | Operation, base: SSAValue | Operation, offset: int | IntAttr = 0
    ):
        super().__init__(operands=[value, base], properties={"offset": _int(offset)})

    @classmethod
    def parse(cls, parser: Parser) -> StOp:
        v = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        offset = _parse_imm(parser)
        attrs = parser.parse_optional_attr_dict()
        ins, _ = _parse_types(parser, [v, b], False)
        op = cls.create(operands=ins, properties={"offset": IntAttr(offset)})
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        printer.print_string(f", {self.offset.data}")
        self._print_attrs(printer)
        _print_types(printer, self)

    def verify_(self) -> None:
        _check_imm(self, self.offset.data, IMM_MIN, IMM_MAX, "offset")

    def assembly_line(self) -> str:
        return f"st {_rn(self.value)}, {self.offset.data}({_rn(self.base)})"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.value), _ri(self.base), 0, 0, self.offset.data


# ---------------------------------------------------------------------------------------------
# Control flow
# ---------------------------------------------------------------------------------------------


class BranchOp(BackendOp, ABC):
    """`backend.bne %a, %b, "loop" : (!backend.reg, !backend.reg) -> ()`
    (`bne rs1, rs2, loop`). Builder: `BneOp(rs1, rs2, target)`."""

    rs1 = operand_def(RegType)
    rs2 = operand_def(RegType)
    target = prop_def(StringAttr)

    def __init__(
        self, rs1: SSAValue | Operation, rs2: SSAValue | Operation, target: str | StringAttr
    ):
        super().__init__(
            operands=[rs1, rs2],
            properties={"target": target if isinstance(target, StringAttr) else StringAttr(target)},
        )

    @classmethod
    def parse(cls, parser: Parser):
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        target = _parse_label(parser)
        attrs = parser.parse_optional_attr_dict()
        ins, _ = _parse_types(parser, [a, b], False)
        op = cls.create(operands=ins, properties={"target": target})
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        printer.print_string(", ")
        printer.print_string_literal(self.target.data)
        self._print_attrs(printer)
        _print_types(printer, self)

    def assembly_line(self) -> str:
        return f"{self.MNEMONIC} {_rn(self.rs1)}, {_rn(self.rs2)}, {self.target.data}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.rs1), _ri(self.rs2), 0, 0, _offset_to(self, self.target, pc, labels)


@irdl_op_definition
class BeqOp(BranchOp):
    name = "backend.beq"
    MNEMONIC: ClassVar[str] = "beq"


@irdl_op_definition
class BneOp(BranchOp):
    name = "backend.bne"
    MNEMONIC: ClassVar[str] = "bne"


@irdl_op_definition
class BltOp(BranchOp):
    name = "backend.blt"
    MNEMONIC: ClassVar[str] = "blt"


@irdl_op_definition
class BgeOp(BranchOp):
    name = "backend.bge"
    MNEMONIC: ClassVar[str] = "bge"


@irdl_op_definition
class JmpOp(BackendOp):
    """`backend.jmp "loop"` (`jmp loop`). Builder: `JmpOp(target)`."""

    name = "backend.jmp"
    MNEMONIC: ClassVar[str] = "jmp"
    target = prop_def(StringAttr)

    def __init__(self, target: str | StringAttr):
        super().__init__(
            properties={"target": target if isinstance(target, StringAttr) else StringAttr(target)}
        )

    @classmethod
    def parse(cls, parser: Parser) -> JmpOp:
        op = JmpOp(_parse_label(parser))
        op._finish(parser)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.target.data)
        self._print_attrs(printer)

    def assembly_line(self) -> str:
        return f"jmp {self.target.data}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return 0, 0, 0, 0, _offset_to(self, self.target, pc, labels)


# ---------------------------------------------------------------------------------------------
# DMA, queues, synchronization
# ---------------------------------------------------------------------------------------------


class CoreOnlyOp(BackendOp, ABC):
    """Instructions only a core has (queues, MPU, VPU); rejected in a program on top."""


class _DmaMixin:
    """What `backend.dma` and `backend.dma2d` share: their data registers (`DATA`, in order),
    then an optional notify clause `notify [core(K) | core(%r)] <space> queue <q>` (assembly
    `[coreK.|core(rN).]SPACE.qN`); builder, custom syntax, verifier and assembly line."""

    DATA: ClassVar[tuple[str, ...]]
    MNEMONIC: ClassVar[str]

    def _build(self, regs: list, notify) -> None:
        props: dict[str, Attribute | None] = {}
        core_reg: list[SSAValue | Operation] = []
        if notify is not None:
            core, space, queue = notify
            props = {
                "notify": UNIT,
                "notify_space": str_attr(space),
                "notify_queue": int_attr(queue),
                "notify_core": IntAttr(core) if isinstance(core, int) else None,
            }
            if core is not None and not isinstance(core, int):
                core_reg = [core]
        BackendOp.__init__(self, operands=[*regs, core_reg], properties=props)  # type: ignore[arg-type]

    @classmethod
    def parse(cls, parser: Parser):
        regs = _parse_regs(parser, len(cls.DATA))
        props: dict[str, Attribute] = {}
        if parser.parse_optional_keyword("notify") is not None:
            props["notify"] = UnitAttr()
            if parser.parse_optional_keyword("core") is not None:
                with parser.in_parens():
                    if (o := parser.parse_optional_unresolved_operand()) is not None:
                        regs.append(o)
                    else:
                        props["notify_core"] = IntAttr(
                            parser.parse_integer(allow_boolean=False, allow_negative=False)
                        )
            props["notify_space"] = _parse_enum(parser, SPACES, "memory space")
            parser.parse_keyword("queue")
            props["notify_queue"] = IntAttr(
                parser.parse_integer(allow_boolean=False, allow_negative=False)
            )
        attrs = parser.parse_optional_attr_dict()
        ins, _ = _parse_types(parser, regs, False)
        op = cls.create(operands=ins, properties=props)  # type: ignore[attr-defined]
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list([getattr(self, f) for f in self.DATA], printer.print_ssa_value)
        if self.notify is not None:  # type: ignore[attr-defined]
            printer.print_string(" notify")
            if self.notify_core is not None:  # type: ignore[attr-defined]
                printer.print_string(f" core({self.notify_core.data})")  # type: ignore[attr-defined]
            elif self.notify_core_reg is not None:  # type: ignore[attr-defined]
                printer.print_string(" core(")
                printer.print_ssa_value(self.notify_core_reg)  # type: ignore[attr-defined]
                printer.print_string(")")
            space, queue = self.notify_space, self.notify_queue  # type: ignore[attr-defined]
            assert space is not None and queue is not None
            printer.print_string(f" {space.data} queue {queue.data}")
        self._print_attrs(printer)  # type: ignore[attr-defined]
        _print_types(printer, self)  # type: ignore[arg-type]

    def verify_(self) -> None:
        _verify_notify(self)  # type: ignore[arg-type]

    def assembly_line(self) -> str:
        s = f"{self.MNEMONIC} " + ", ".join(_rn(getattr(self, f)) for f in self.DATA)
        if self.notify is not None:  # type: ignore[attr-defined]
            space, queue = self.notify_space, self.notify_queue  # type: ignore[attr-defined]
            assert space is not None and queue is not None
            if self.notify_core is not None:  # type: ignore[attr-defined]
                sel = f"core{self.notify_core.data}."  # type: ignore[attr-defined]
            elif self.notify_core_reg is not None:  # type: ignore[attr-defined]
                sel = f"core({_rn(self.notify_core_reg)})."  # type: ignore[attr-defined]
            else:
                sel = ""
            s += f", {sel}{space.data}.q{queue.data}"
        return s

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        regs = [_ri(getattr(self, f)) for f in self.DATA] + [0] * (4 - len(self.DATA))
        imm = 0
        if self.notify is not None:  # type: ignore[attr-defined]
            space, queue = self.notify_space, self.notify_queue  # type: ignore[attr-defined]
            assert space is not None and queue is not None
            mode, core = _core_fields(self.notify_core, self.notify_core_reg)  # type: ignore[attr-defined]
            imm = isa.NOTIFY_PRESENT | queue.data << 8 | isa.SPACES[space.data] << 16 | mode << 20
            if len(self.DATA) == 4 or mode == isa.CORE_STATIC:
                imm |= core  # dma2d: a static index or a register number, both in bits 7:0
            elif mode == isa.CORE_REG:
                regs[3] = core  # dma: a register core goes in field d
        return regs[0], regs[1], regs[2], regs[3], imm


@irdl_op_definition
class DmaOp(_DmaMixin, BackendOp):
    """`backend.dma %dst, %src, %len [notify [core(K) | core(%r)] <space> queue <q>] :
    (!backend.reg, !backend.reg, !backend.reg[, !backend.reg]) -> ()`
    (`dma rdst, rsrc, rlen[, [coreK.|core(rN).]SPACE.qN]`). Without a core the running core is
    notified (not allowed on top).
    Builder: `DmaOp(dst, src, length, notify=None)`; `notify` = (core, space, queue) with core
    None (running core), an int, or a register value."""

    name = "backend.dma"
    MNEMONIC: ClassVar[str] = "dma"
    DATA: ClassVar[tuple[str, ...]] = ("dst", "src", "length")
    dst = operand_def(RegType)
    src = operand_def(RegType)
    length = operand_def(RegType)
    notify_core_reg = opt_operand_def(RegType)
    notify = opt_prop_def(UnitAttr)
    notify_core = opt_prop_def(IntAttr)
    notify_space = opt_prop_def(StringAttr)
    notify_queue = opt_prop_def(IntAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        src: SSAValue | Operation,
        length: SSAValue | Operation,
        notify: tuple[int | SSAValue | Operation | None, str, int] | None = None,
    ):
        self._build([dst, src, length], notify)


def _verify_notify(self: DmaOp | Dma2dOp) -> None:
    """The notify rules of `backend.dma` and `backend.dma2d`."""
    given = (self.notify_space, self.notify_queue)
    if self.notify is None:
        if (
            any(g is not None for g in given)
            or self.notify_core is not None
            or (self.notify_core_reg is not None)
        ):
            raise VerifyException("backend.dma: notify fields without `notify`")
        return
    if any(g is None for g in given):
        raise VerifyException("backend.dma: notify needs a space and a queue")
    assert self.notify_space is not None and self.notify_queue is not None
    if self.notify_space.data not in SPACES:
        raise VerifyException(
            f"backend.dma: unknown notify space '{self.notify_space.data}'; expected one "
            f"of {', '.join(SPACES)}"
        )
    _check_imm(self, self.notify_queue.data, 0, MAX_QUEUE, "queue")
    if self.notify_core is not None:
        if self.notify_core_reg is not None:
            raise VerifyException("backend.dma: a static notify core and a core register")
        _check_imm(self, self.notify_core.data, 0, MAX_CORE, "core index")
    prog = self.parent_op()
    if (
        isinstance(prog, ProgramOp)
        and prog.ctx.is_top
        and self.notify_core is None
        and self.notify_core_reg is None
    ):
        raise VerifyException("backend.dma: top has no queues; name the core to notify")


@irdl_op_definition
class Dma2dOp(_DmaMixin, BackendOp):
    """`backend.dma2d %dst, %src, %shape, %stride [notify [core(K) | core(%r)] <space> queue
    <q>] : (!backend.reg, !backend.reg, !backend.reg, !backend.reg[, !backend.reg]) -> ()`
    (`dma2d rdst, rsrc, rshape, rstride[, NOTIFY]`): one strided transfer of `rows` rows of
    `row bytes`, `%shape` = rows << 32 | row bytes, `%stride` = dst stride << 32 | src stride
    (`legato.targets.bertha.isa.dma2d_pack`). Notify as `backend.dma`.
    Builder: `Dma2dOp(dst, src, shape, stride, notify=None)`."""

    name = "backend.dma2d"
    MNEMONIC: ClassVar[str] = "dma2d"
    DATA: ClassVar[tuple[str, ...]] = ("dst", "src", "shape", "stride")
    dst = operand_def(RegType)
    src = operand_def(RegType)
    shape = operand_def(RegType)
    stride = operand_def(RegType)
    notify_core_reg = opt_operand_def(RegType)
    notify = opt_prop_def(UnitAttr)
    notify_core = opt_prop_def(IntAttr)
    notify_space = opt_prop_def(StringAttr)
    notify_queue = opt_prop_def(IntAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        src: SSAValue | Operation,
        shape: SSAValue | Operation,
        stride: SSAValue | Operation,
        notify: tuple[int | SSAValue | Operation | None, str, int] | None = None,
    ):
        self._build([dst, src, shape, stride], notify)


@irdl_op_definition
class QwaitOp(CoreOnlyOp):
    """`backend.qwait sram queue 0` (`qwait sram.q0`). Builder: `QwaitOp(space, queue)`."""

    name = "backend.qwait"
    MNEMONIC: ClassVar[str] = "qwait"
    space = prop_def(StringAttr)
    queue = prop_def(IntAttr)

    def __init__(self, space: str | StringAttr, queue: int | IntAttr):
        super().__init__(
            properties={
                "space": str_attr(space),
                "queue": _int(queue),
            }
        )

    @classmethod
    def parse(cls, parser: Parser) -> QwaitOp:
        space = _parse_enum(parser, SPACES, "memory space")
        parser.parse_keyword("queue")
        q = parser.parse_integer(allow_boolean=False, allow_negative=False)
        op = QwaitOp(space, q)
        op._finish(parser)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.space.data} queue {self.queue.data}")
        self._print_attrs(printer)

    def verify_(self) -> None:
        if self.space.data not in SPACES:
            raise VerifyException(
                f"backend.qwait: unknown space '{self.space.data}'; expected one of "
                f"{', '.join(SPACES)}"
            )
        _check_imm(self, self.queue.data, 0, MAX_QUEUE, "queue")

    def assembly_line(self) -> str:
        return f"qwait {self.space.data}.q{self.queue.data}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return isa.SPACES[self.space.data], 0, 0, 0, self.queue.data


class SyncOp(BackendOp, ABC):
    """`backend.barrier 0, 33` (`barrier id, count`; also `sem_post`, `sem_wait`).
    Builder: `BarrierOp(id, count)`."""

    sync_id = prop_def(IntAttr)
    count = prop_def(IntAttr)

    def __init__(self, sync_id: int | IntAttr, count: int | IntAttr):
        super().__init__(properties={"sync_id": _int(sync_id), "count": _int(count)})

    @classmethod
    def parse(cls, parser: Parser):
        i = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(",")
        c = parser.parse_integer(allow_boolean=False)
        op = cls.create(properties={"sync_id": IntAttr(i), "count": IntAttr(c)})
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.sync_id.data}, {self.count.data}")
        self._print_attrs(printer)

    def verify_(self) -> None:
        _check_imm(self, self.sync_id.data, 0, MAX_SYNC_ID, "id")
        _check_imm(self, self.count.data, 0, IMM_MAX, "count")

    def assembly_line(self) -> str:
        return f"{self.MNEMONIC} {self.sync_id.data}, {self.count.data}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return self.sync_id.data, 0, 0, 0, self.count.data


@irdl_op_definition
class BarrierOp(SyncOp):
    name = "backend.barrier"
    MNEMONIC: ClassVar[str] = "barrier"


@irdl_op_definition
class SemPostOp(SyncOp):
    name = "backend.sem_post"
    MNEMONIC: ClassVar[str] = "sem.post"


@irdl_op_definition
class SemWaitOp(SyncOp):
    name = "backend.sem_wait"
    MNEMONIC: ClassVar[str] = "sem.wait"


# ---------------------------------------------------------------------------------------------
# MPU
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class MpuLdwOp(CoreOnlyOp):
    """`backend.mpu_ldw %src, %k, %n : (!backend.reg, !backend.reg, !backend.reg) -> ()`
    (`mpu.ldw rsrc, rk, rn`). Builder: `MpuLdwOp(src, k, n)`."""

    name = "backend.mpu_ldw"
    MNEMONIC: ClassVar[str] = "mpu.ldw"
    src = operand_def(RegType)
    k = operand_def(RegType)
    n = operand_def(RegType)

    def __init__(self, src: SSAValue | Operation, k: SSAValue | Operation, n: SSAValue | Operation):
        super().__init__(operands=[src, k, n])

    @classmethod
    def parse(cls, parser: Parser) -> MpuLdwOp:
        regs = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        if len(regs) != 3:
            parser.raise_error("backend.mpu_ldw takes 3 registers")
        attrs = parser.parse_optional_attr_dict()
        ins, _ = _parse_types(parser, regs, False)
        op = cls.create(operands=ins)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        self._print_attrs(printer)
        _print_types(printer, self)

    def assembly_line(self) -> str:
        return f"mpu.ldw {_rn(self.src)}, {_rn(self.k)}, {_rn(self.n)}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.src), _ri(self.k), _ri(self.n), 0, 0


def _parse_regs(parser: Parser, n: int) -> list[Parser.UnresolvedOperand]:
    """`n` comma-separated register operands."""
    regs = [parser.parse_unresolved_operand()]
    for _ in range(n - 1):
        parser.parse_punctuation(",")
        regs.append(parser.parse_unresolved_operand())
    return regs


def _parse_acc_tail(cls, parser: Parser, regs: list, props: dict[str, Attribute]):
    """The end of an op whose syntax is its registers (and `props` already parsed), an
    optional `acc`, attributes and the operand types (`mpu_mm`, `pim_gemv`): the op."""
    if parser.parse_optional_keyword("acc") is not None:
        props["acc"] = UnitAttr()
    attrs = parser.parse_optional_attr_dict()
    ins, _ = _parse_types(parser, regs, False)
    op = cls.create(operands=ins, properties=props)
    op.attributes |= attrs
    return op


def _print_acc_op(printer: Printer, op, middle: str = "") -> None:
    """What `_parse_acc_tail` reads: the registers, `middle`, ` acc` when set, the attributes
    and the types."""
    printer.print_string(" ")
    printer.print_list(op.operands, printer.print_ssa_value)
    printer.print_string(middle)
    if op.acc is not None:
        printer.print_string(" acc")
    op._print_attrs(printer)
    _print_types(printer, op)


@irdl_op_definition
class MpuMmOp(CoreOnlyOp):
    """`backend.mpu_mm %dst, %src, %m, f32 [acc] : (!backend.reg, !backend.reg, !backend.reg)
    -> ()` (`mpu.mm rdst, rsrc, rm, f32[, acc]`; output bf16 or f32; acc needs f32).
    Builder: `MpuMmOp(dst, src, m, out_dtype="f32", acc=False)`."""

    name = "backend.mpu_mm"
    MNEMONIC: ClassVar[str] = "mpu.mm"
    dst = operand_def(RegType)
    src = operand_def(RegType)
    m = operand_def(RegType)
    out_dtype = prop_def(StringAttr)
    acc = opt_prop_def(UnitAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        src: SSAValue | Operation,
        m: SSAValue | Operation,
        out_dtype: str = "f32",
        acc: bool = False,
    ):
        super().__init__(
            operands=[dst, src, m],
            properties={"out_dtype": str_attr(out_dtype), "acc": UNIT if acc else None},
        )

    @classmethod
    def parse(cls, parser: Parser) -> MpuMmOp:
        regs = _parse_regs(parser, 3)
        parser.parse_punctuation(",")
        props: dict[str, Attribute] = {"out_dtype": _parse_enum(parser, ("bf16", "f32"), "output")}
        return _parse_acc_tail(cls, parser, regs, props)

    def print(self, printer: Printer) -> None:
        _print_acc_op(printer, self, f", {self.out_dtype.data}")

    def verify_(self) -> None:
        if self.out_dtype.data not in ("bf16", "f32"):
            raise VerifyException(
                f"backend.mpu_mm: output must be bf16 or f32, got {self.out_dtype.data}"
            )
        if self.acc is not None and self.out_dtype.data != "f32":
            raise VerifyException("backend.mpu_mm: acc needs an f32 destination")

    def assembly_line(self) -> str:
        s = f"mpu.mm {_rn(self.dst)}, {_rn(self.src)}, {_rn(self.m)}, {self.out_dtype.data}"
        return s + (", acc" if self.acc is not None else "")

    def immediate(self) -> int:
        return (isa.MM_F32 if self.out_dtype.data == "f32" else 0) | (
            isa.MM_ACC if self.acc is not None else 0
        )

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.dst), _ri(self.src), _ri(self.m), 0, self.immediate()


@irdl_op_definition
class PimGemvOp(CoreOnlyOp):
    """`backend.pim_gemv %dst, %x, %w, %shape [acc] : (!backend.reg x4) -> ()` (`pim.gemv
    rdst, rx, rw, rshape[, acc]`, docs/pim.md): the PIM unit of the channel of `%w` computes
    `dst[N] (+)= x[K] @ W[K, N]`, `%shape` = K << 32 | N. Builder: `PimGemvOp(dst, x, w, shape,
    acc=False)`."""

    name = "backend.pim_gemv"
    MNEMONIC: ClassVar[str] = "pim.gemv"
    dst = operand_def(RegType)
    x = operand_def(RegType)
    w = operand_def(RegType)
    shape = operand_def(RegType)
    acc = opt_prop_def(UnitAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        x: SSAValue | Operation,
        w: SSAValue | Operation,
        shape: SSAValue | Operation,
        acc: bool = False,
    ):
        super().__init__(operands=[dst, x, w, shape], properties={"acc": UNIT if acc else None})

    @classmethod
    def parse(cls, parser: Parser) -> PimGemvOp:
        return _parse_acc_tail(cls, parser, _parse_regs(parser, 4), {})

    def print(self, printer: Printer) -> None:
        _print_acc_op(printer, self)

    def assembly_line(self) -> str:
        s = f"pim.gemv {_rn(self.dst)}, {_rn(self.x)}, {_rn(self.w)}, {_rn(self.shape)}"
        return s + (", acc" if self.acc is not None else "")

    def immediate(self) -> int:
        return isa.PIM_ACC if self.acc is not None else 0

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.dst), _ri(self.x), _ri(self.w), _ri(self.shape), self.immediate()


# ---------------------------------------------------------------------------------------------
# VPU
# ---------------------------------------------------------------------------------------------


class VpuRegsOp(CoreOnlyOp, ABC):
    """Base of VPU ops: N register operands, then dtype(s) (and for binaries a broadcast)."""

    REG_COUNT: ClassVar[int]
    DTYPE_PROPS: ClassVar[tuple[str, ...]] = ("dtype",)

    @classmethod
    def parse(cls, parser: Parser):
        regs = _parse_regs(parser, cls.REG_COUNT)
        props: dict[str, Attribute] = {}
        for p in cls.DTYPE_PROPS:
            parser.parse_punctuation(",")
            props[p] = _parse_enum(parser, cls.dtype_choices(p), "element type")
        props |= cls._parse_extra(parser)
        attrs = parser.parse_optional_attr_dict()
        ins, _ = _parse_types(parser, regs, False)
        op = cls.create(operands=ins, properties=props)
        op.attributes |= attrs
        return op

    @classmethod
    def _parse_extra(cls, parser: Parser) -> dict[str, Attribute]:
        return {}

    def _extra_text(self) -> str:
        return ""

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        for p in self.DTYPE_PROPS:
            printer.print_string(f", {self.properties[p].data}")  # type: ignore[attr-defined]
        printer.print_string(self._extra_text())
        self._print_attrs(printer)
        _print_types(printer, self)

    @classmethod
    def dtype_choices(cls, prop: str) -> tuple[str, ...]:
        """The element types property `prop` may name (the VPU's dtypes)."""
        return DTYPES

    def verify_(self) -> None:
        for p in self.DTYPE_PROPS:
            d = self.properties[p].data  # type: ignore[attr-defined]
            choices = self.dtype_choices(p)
            if d not in choices:
                raise VerifyException(
                    f"{self.name}: unknown element type '{d}'; expected one of {', '.join(choices)}"
                )

    def assembly_line(self) -> str:
        regs = ", ".join(_rn(o) for o in self.operands)
        dts = "".join(f", {self.properties[p].data}" for p in self.DTYPE_PROPS)  # type: ignore[attr-defined]
        return f"{self.MNEMONIC} {regs}{dts}{self._extra_text()}"

    def _extra_imm(self) -> int:
        return 0

    def immediate(self) -> int:
        imm = self._extra_imm()
        for i, p in enumerate(self.DTYPE_PROPS):  # dtype codes, 4 bits each from bit 0
            name = self.properties[p].data  # type: ignore[attr-defined]
            imm |= {**isa.COND_DTYPES, **isa.CVT_DTYPES}[name] << 4 * i
        return imm

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        regs = [_ri(o) for o in self.operands] + [0] * (4 - len(self.operands))
        return regs[0], regs[1], regs[2], regs[3], self.immediate()


BCAST_KINDS = ("scalar", "row", "col")


class VpuBinaryOp(VpuRegsOp, ABC):
    """`backend.vpu_add %dst, %a, %b, %n, bf16 [, bc.scalar | bc.row(P) | bc.col(P)] :
    (4 x !backend.reg) -> ()` (`vpu.add rdst, rsrc1, rsrc2, rn, dtype[, bcast]`).
    Builder: `VpuAddOp(dst, src1, src2, n, dtype, bcast=None, period=None)`."""

    REG_COUNT: ClassVar[int] = 4
    dst = operand_def(RegType)
    src1 = operand_def(RegType)
    src2 = operand_def(RegType)
    n = operand_def(RegType)
    dtype = prop_def(StringAttr)
    bcast = opt_prop_def(StringAttr)
    period = opt_prop_def(IntAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        src1: SSAValue | Operation,
        src2: SSAValue | Operation,
        n: SSAValue | Operation,
        dtype: str,
        bcast: str | None = None,
        period: int | None = None,
    ):
        super().__init__(
            operands=[dst, src1, src2, n],
            properties={
                "dtype": StringAttr(dtype),
                "bcast": StringAttr(bcast) if bcast is not None else None,
                "period": IntAttr(period) if period is not None else None,
            },
        )

    @classmethod
    def _parse_extra(cls, parser: Parser) -> dict[str, Attribute]:
        if parser.parse_optional_punctuation(",") is None:
            return {}
        pos = parser.pos
        text = parser.parse_identifier(context_msg=" (bc.scalar, bc.row(P) or bc.col(P))")
        kind = text[3:] if text.startswith("bc.") else ""
        if kind not in BCAST_KINDS:
            parser.raise_error(
                f"expected bc.scalar, bc.row(P) or bc.col(P), got {text!r}", pos, parser.pos
            )
        props: dict[str, Attribute] = {"bcast": StringAttr(kind)}
        if kind != "scalar":
            with parser.in_parens():
                props["period"] = IntAttr(
                    parser.parse_integer(allow_boolean=False, allow_negative=False)
                )
        return props

    def _extra_text(self) -> str:
        if self.bcast is None:
            return ""
        if self.bcast.data == "scalar":
            return ", bc.scalar"
        assert self.period is not None
        return f", bc.{self.bcast.data}({self.period.data})"

    def _extra_imm(self) -> int:
        if self.bcast is None:
            return 0
        kind = {"scalar": isa.BC_SCALAR, "row": isa.BC_ROW, "col": isa.BC_COL}[self.bcast.data]
        period = self.period.data if self.period is not None else 0
        return kind << 4 | period << 8

    def verify_(self) -> None:
        super().verify_()
        if self.bcast is None:
            if self.period is not None:
                raise VerifyException(f"{self.name}: a period without a broadcast")
            return
        if self.bcast.data not in BCAST_KINDS:
            raise VerifyException(
                f"{self.name}: unknown broadcast '{self.bcast.data}'; expected scalar, row or col"
            )
        if self.bcast.data == "scalar":
            if self.period is not None:
                raise VerifyException(f"{self.name}: bc.scalar takes no period")
        elif self.period is None or not 1 <= self.period.data < (1 << 24):
            raise VerifyException(
                f"{self.name}: bc.{self.bcast.data} needs a period in [1, {(1 << 24) - 1}]"
            )


class VpuUnaryOp(VpuRegsOp, ABC):
    """`backend.vpu_exp %dst, %src, %n, f32 : (3 x !backend.reg) -> ()`
    (`vpu.exp rdst, rsrc, rn, dtype`). Builder: `VpuExpOp(dst, src, n, dtype)`."""

    REG_COUNT: ClassVar[int] = 3
    dst = operand_def(RegType)
    src = operand_def(RegType)
    n = operand_def(RegType)
    dtype = prop_def(StringAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        src: SSAValue | Operation,
        n: SSAValue | Operation,
        dtype: str,
    ):
        super().__init__(operands=[dst, src, n], properties={"dtype": StringAttr(dtype)})


def _vpu_class(row: opset.OpKind, base: type[VpuRegsOp]) -> type[VpuRegsOp]:
    """The backend op class of the op table's row `row` (like xDSL's riscv ops over their
    format bases: the base holds the operands, syntax and verifier; the row names it)."""
    name, mnemonic = row.backend_op_name, row.mnemonic
    cls = type(
        row.backend_class_name,
        (base,),
        {
            "__module__": __name__,
            "__doc__": f"`{mnemonic}`: {row.isa_doc} (`legato.opset` row `{row.kind}`).",
            "__annotations__": {"MNEMONIC": ClassVar[str], "ROW": ClassVar[opset.OpKind]},
            "name": name,
            "MNEMONIC": mnemonic,
            "ROW": row,
        },
    )
    return irdl_op_definition(cls)


VPU_ELEMENTWISE_OPS: dict[str, type[VpuRegsOp]] = {
    row.kind: _vpu_class(row, VpuBinaryOp if row.family == opset.BINARY else VpuUnaryOp)
    for row in opset.OPS
    if row.family in (opset.BINARY, opset.UNARY)
}
"""core kind -> the backend class of its instruction (`add` -> `VpuAddOp`), from the op table."""
globals().update({c.__name__: c for c in VPU_ELEMENTWISE_OPS.values()})


@irdl_op_definition
class VpuCvtOp(VpuRegsOp):
    """`backend.vpu_cvt %dst, %src, %n, bf16, f32 : (3 x !backend.reg) -> ()`
    (`vpu.cvt rdst, rsrc, rn, dtype_dst, dtype_src`); `dtype_dst` may be i64 (a float to an
    int64 index, `legato.opset.CAST_INT_RESULTS`).
    Builder: `VpuCvtOp(dst, src, n, dst_dtype, src_dtype)`."""

    name = "backend.vpu_cvt"
    MNEMONIC: ClassVar[str] = "vpu.cvt"
    REG_COUNT: ClassVar[int] = 3
    DTYPE_PROPS: ClassVar[tuple[str, ...]] = ("dst_dtype", "src_dtype")
    dst = operand_def(RegType)
    src = operand_def(RegType)
    n = operand_def(RegType)
    dst_dtype = prop_def(StringAttr)
    src_dtype = prop_def(StringAttr)

    @classmethod
    def dtype_choices(cls, prop: str) -> tuple[str, ...]:
        """The source is a VPU dtype; the result may also be i64 (`isa.CVT_DTYPES`)."""
        return tuple(isa.CVT_DTYPES) if prop == "dst_dtype" else DTYPES

    def __init__(
        self,
        dst: SSAValue | Operation,
        src: SSAValue | Operation,
        n: SSAValue | Operation,
        dst_dtype: str,
        src_dtype: str,
    ):
        super().__init__(
            operands=[dst, src, n],
            properties={"dst_dtype": StringAttr(dst_dtype), "src_dtype": StringAttr(src_dtype)},
        )


@irdl_op_definition
class VpuFillOp(VpuRegsOp):
    """`backend.vpu_fill %dst, %n, %bits, f32 : (3 x !backend.reg) -> ()`
    (`vpu.fill rdst, rn, rbits, dtype`: every element gets the bit pattern in rbits).
    Builder: `VpuFillOp(dst, n, bits, dtype)`."""

    name = "backend.vpu_fill"
    MNEMONIC: ClassVar[str] = "vpu.fill"
    REG_COUNT: ClassVar[int] = 3
    dst = operand_def(RegType)
    n = operand_def(RegType)
    bits = operand_def(RegType)
    dtype = prop_def(StringAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        n: SSAValue | Operation,
        bits: SSAValue | Operation,
        dtype: str,
    ):
        super().__init__(operands=[dst, n, bits], properties={"dtype": StringAttr(dtype)})


class Vpu2dOp(VpuRegsOp, ABC):
    """`backend.vpu_rsum %dst, %src, %rows, %cols, f32 : (4 x !backend.reg) -> ()`
    (`vpu.rsum rdst, rsrc, rrows, rcols, dtype`; also rmax, transpose).
    Builder: `VpuRsumOp(dst, src, rows, cols, dtype)`."""

    REG_COUNT: ClassVar[int] = 4
    dst = operand_def(RegType)
    src = operand_def(RegType)
    rows = operand_def(RegType)
    cols = operand_def(RegType)
    dtype = prop_def(StringAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        src: SSAValue | Operation,
        rows: SSAValue | Operation,
        cols: SSAValue | Operation,
        dtype: str,
    ):
        super().__init__(operands=[dst, src, rows, cols], properties={"dtype": StringAttr(dtype)})


@irdl_op_definition
class VpuRsumOp(Vpu2dOp):
    name = "backend.vpu_rsum"
    MNEMONIC: ClassVar[str] = "vpu.rsum"


@irdl_op_definition
class VpuRmaxOp(Vpu2dOp):
    name = "backend.vpu_rmax"
    MNEMONIC: ClassVar[str] = "vpu.rmax"


@irdl_op_definition
class VpuTransposeOp(Vpu2dOp):
    name = "backend.vpu_transpose"
    MNEMONIC: ClassVar[str] = "vpu.transpose"


COND_DTYPES = (*DTYPES, "i1")


@irdl_op_definition
class VpuSelOp(VpuRegsOp):
    """`backend.vpu_sel %dst, %cond, %src, %n, f32, i1 : (4 x !backend.reg) -> ()`
    (`vpu.sel rdst, rcond, rsrc, rn, dtype, cond_dtype`: dst[i] = src[i] where cond[i] != 0,
    else dst[i] is kept; cond a float mask or i1 bytes).
    Builder: `VpuSelOp(dst, cond, src, n, dtype, cond_dtype)`."""

    name = "backend.vpu_sel"
    MNEMONIC: ClassVar[str] = "vpu.sel"
    REG_COUNT: ClassVar[int] = 4
    DTYPE_PROPS: ClassVar[tuple[str, ...]] = ("dtype", "cond_dtype")
    dst = operand_def(RegType)
    cond = operand_def(RegType)
    src = operand_def(RegType)
    n = operand_def(RegType)
    dtype = prop_def(StringAttr)
    cond_dtype = prop_def(StringAttr)

    def __init__(
        self,
        dst: SSAValue | Operation,
        cond: SSAValue | Operation,
        src: SSAValue | Operation,
        n: SSAValue | Operation,
        dtype: str,
        cond_dtype: str,
    ):
        super().__init__(
            operands=[dst, cond, src, n],
            properties={"dtype": StringAttr(dtype), "cond_dtype": StringAttr(cond_dtype)},
        )

    @classmethod
    def dtype_choices(cls, prop: str) -> tuple[str, ...]:
        return COND_DTYPES if prop == "cond_dtype" else DTYPES


# ---------------------------------------------------------------------------------------------
# Debug instructions (`dbg.print`, `dbg.assert`: the op table's DEBUG rows)
# ---------------------------------------------------------------------------------------------

DEBUG_ATTR = "legato.debug"
"""The debug entry a `dbg.*` instruction names (`arch.debug.Entry` but its location, which is
the op's): a dictionary of op, site, message, arg, nargs, kind, dtype, shape. The binary's
`.legato.debug` table is built from these (`legato.compiler.debug_table`)."""


class DbgOp(BackendOp, ABC):
    """`backend.dbg_print %value, %count, 3 {legato.debug = {...}} : (!backend.reg,
    !backend.reg) -> ()` (`dbg.print rs1, rs2, ID`; also `dbg_assert`): `%value` is an index
    value or a tensor's address, `%count` its element count, `entry` the debug entry's number
    in the kernel (the imm32). Builder: `DbgPrintOp(value, count, entry, debug)`."""

    rs1 = operand_def(RegType)
    rs2 = operand_def(RegType)
    entry = prop_def(IntAttr)

    def __init__(
        self,
        rs1: SSAValue | Operation,
        rs2: SSAValue | Operation,
        entry: int | IntAttr,
        debug: DictionaryAttr | None = None,
    ):
        super().__init__(
            operands=[rs1, rs2],
            properties={"entry": _int(entry)},
            attributes={DEBUG_ATTR: debug} if debug is not None else None,
        )

    @classmethod
    def parse(cls, parser: Parser):
        regs = [parser.parse_unresolved_operand()]
        parser.parse_punctuation(",")
        regs.append(parser.parse_unresolved_operand())
        parser.parse_punctuation(",")
        entry = parser.parse_integer(allow_boolean=False, allow_negative=False)
        attrs = parser.parse_optional_attr_dict()
        ins, _ = _parse_types(parser, regs, False)
        op = cls.create(operands=ins, properties={"entry": IntAttr(entry)})
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        printer.print_string(f", {self.entry.data}")
        self._print_attrs(printer)
        _print_types(printer, self)

    def verify_(self) -> None:
        _check_imm(self, self.entry.data, 0, UIMM_MAX, "debug entry")

    def assembly_line(self) -> str:
        return f"{self.MNEMONIC} {_rn(self.rs1)}, {_rn(self.rs2)}, {self.entry.data}"

    def fields(self, pc: int, labels: dict[str, int]) -> Fields:
        return _ri(self.rs1), _ri(self.rs2), 0, 0, self.entry.data


def debug_entry(op: DbgOp) -> debug.Entry:
    """The debug entry `op` names, from its `legato.debug` description and its location."""
    d = op.attributes.get(DEBUG_ATTR)
    if not isinstance(d, DictionaryAttr):
        raise VerifyException(f"{op.name}: no {DEBUG_ATTR} entry description")
    get = d.data.get
    loc = op.location
    where = (
        (loc.filename.data, loc.line.data, loc.column.data)
        if isinstance(loc, FileLineColLoc)
        else None
    )
    try:
        shape = get("shape")
        dtype = get("dtype")
        entry = debug.Entry(
            op.MNEMONIC[4:],
            get("site").value.data,
            get("message").data,
            where,
            get("arg").value.data,
            get("nargs").value.data,
            get("kind").data,
            dtype.data if dtype is not None else None,
            tuple(x.value.data for x in shape.data) if shape is not None else (),
        )
    except AttributeError as e:
        raise VerifyException(f"{op.name}: malformed {DEBUG_ATTR} ({e})") from None
    bad = entry.validate()
    if bad is not None:
        raise VerifyException(f"{op.name}: {DEBUG_ATTR}: {bad}")
    return entry


@irdl_op_definition
class DbgPrintOp(DbgOp):
    name = "backend.dbg_print"
    MNEMONIC: ClassVar[str] = "dbg.print"


@irdl_op_definition
class DbgAssertOp(DbgOp):
    name = "backend.dbg_assert"
    MNEMONIC: ClassVar[str] = "dbg.assert"


INSTRUCTION_OPS: tuple[type[BackendOp], ...] = (
    NopOp,
    HaltOp,
    LiOp,
    LihOp,
    LsaOp,
    AddOp,
    SubOp,
    MulOp,
    DivOp,
    RemOp,
    AndOp,
    OrOp,
    XorOp,
    ShlOp,
    ShrOp,
    SraOp,
    MinOp,
    MaxOp,
    SltOp,
    SeqOp,
    AddiOp,
    MuliOp,
    AndiOp,
    ShliOp,
    ShriOp,
    DiviOp,
    RemiOp,
    LdOp,
    StOp,
    BeqOp,
    BneOp,
    BltOp,
    BgeOp,
    JmpOp,
    DmaOp,
    Dma2dOp,
    QwaitOp,
    DmaWaitOp,
    BarrierOp,
    SemPostOp,
    SemWaitOp,
    MpuLdwOp,
    MpuMmOp,
    *VPU_ELEMENTWISE_OPS.values(),
    VpuSelOp,
    VpuCvtOp,
    VpuFillOp,
    VpuRsumOp,
    VpuRmaxOp,
    VpuTransposeOp,
    DbgPrintOp,
    DbgAssertOp,
    PimGemvOp,
)
"""One op class per ISA instruction."""

BY_MNEMONIC: dict[str, type[BackendOp]] = {c.MNEMONIC: c for c in INSTRUCTION_OPS}
"""ISA mnemonic -> op class."""


Backend = Dialect(
    "backend",
    [KernelOp, ProgramOp, LabelOp, EntryRegOp, *INSTRUCTION_OPS],
    [RegType],
)
install_fast_accessors(Backend)  # the same accessors, without xDSL's per-read dispatch
