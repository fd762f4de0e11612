"""The Bertha instruction set: one table of every instruction, its encoding and its timing class.

Every instruction is one 64-bit little-endian word::

     63            32 31    26 25    20 19    14 13     8 7       0
    +----------------+--------+--------+--------+--------+---------+
    |     imm32      |   d    |   c    |   b    |   a    | opcode  |
    +----------------+--------+--------+--------+--------+---------+

`FORMATS` says, per instruction format, which assembly operands go to which field; docs/isa.md is
the human-readable version of this file and must agree with it (a unit test checks the mnemonic
list).  Decoding is strict: a field an instruction does not use must be zero, and every code
(memory space, dtype, flags) must be valid, so every word decodes to exactly one canonical text and
back to the same word.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from legato import opset

ISA_VERSION = 1
NUM_REGS = 32
WORD_BYTES = 8

# Timing classes (docs/isa.md): S scalar, M scalar memory access, D DMA unit, X MPU unit,
# V VPU unit, Q synchronisation (blocks issue until a condition holds), P a PIM unit (docs/pim.md).
TIMING_CLASSES = ("S", "M", "D", "X", "V", "Q", "P")

# Core-local memory spaces addressable by `lsa`, DMA notifications and `qwait`.
SPACES = {"sram": 1, "mpu_buffer": 2, "private_dram": 3}
SPACE_NAMES = {v: k for k, v in SPACES.items()}

# Element types understood by the MPU / VPU.
DTYPES = {"bf16": 1, "f32": 2, "f16": 3, "i32": 5}  # 4 is i1 (a vpu.sel condition)
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
DTYPE_SIZES = {"bf16": 2, "f32": 4, "f16": 2, "i32": 4}
# Condition types of vpu.sel: a float mask of a VPU dtype, or i1 (one byte per element); an
# element is true when it is nonzero (NaN is true, -0.0 false).
COND_DTYPES = {**DTYPES, "i1": 4}
COND_DTYPE_NAMES = {v: k for k, v in COND_DTYPES.items()}
COND_DTYPE_SIZES = {**DTYPE_SIZES, "i1": 1}
# Result types of vpu.cvt: a VPU dtype, i64 (a float converted to an int64 index the way
# torch's `.to(torch.int64)` does: `legato.opset.CAST_INT_RESULTS`) or i1 (one byte, 1 where
# the float is nonzero, as torch's `.to(torch.bool)`). The VPU computes nothing else on i64;
# gathers and `ld` read it; vpu.sel takes i1 as its condition.
CVT_DTYPES = {**DTYPES, "i1": 4, "i64": 6}
CVT_DTYPE_NAMES = {v: k for k, v in CVT_DTYPES.items()}
CVT_DTYPE_SIZES = {**DTYPE_SIZES, "i1": 1, "i64": 8}

# Core selector modes (lsa, dma notify).
CORE_SELF = 0  # the running core
CORE_STATIC = 1  # core index in the instruction
CORE_REG = 2  # core index in a register

# mpu.mm flags (imm32 bits).
MM_ACC = 1 << 0
MM_F32 = 1 << 1

# pim.gemv flags (imm32 bits; `arch.pim.ACC`).
PIM_ACC = 1 << 0

# VPU broadcast modes of the second source (imm32 bits 5:4).
BC_NONE, BC_SCALAR, BC_ROW, BC_COL = 0, 1, 2, 3
BC_NAMES = {BC_SCALAR: "scalar", BC_ROW: "row", BC_COL: "col"}

# dma notify encoding inside imm32.
NOTIFY_PRESENT = 1 << 31
# dma2d: rshape = rows << 32 | row bytes, rstride = dst stride << 32 | src stride (each 32-bit)
DMA2D_FIELD_MAX = (1 << 32) - 1


def dma2d_pack(high: int, low: int) -> int:
    """The 64-bit register value of a dma2d shape (rows, row bytes) or stride (dst, src) pair,
    as a signed register value."""
    if not (0 <= high <= DMA2D_FIELD_MAX and 0 <= low <= DMA2D_FIELD_MAX):
        raise ValueError(f"dma2d field out of range: {high}, {low}")
    v = high << 32 | low
    return v - (1 << 64) if v >> 63 else v


def dma2d_unpack(value: int) -> tuple[int, int]:
    """(high, low) 32-bit unsigned halves of a dma2d register value."""
    value &= (1 << 64) - 1
    return value >> 32, value & 0xFFFFFFFF


MAX_QUEUE = 255
MAX_SYNC_ID = 63

IMM_MIN = -(1 << 31)
IMM_MAX = (1 << 31) - 1
UIMM_MAX = (1 << 32) - 1


class DecodeError(ValueError):
    """A 64-bit word that is not a valid Bertha instruction."""


@dataclass(frozen=True)
class OpInfo:
    mnemonic: str
    opcode: int
    format: str
    timing: str
    doc: str


# format -> (operand kinds in assembly order, fields used).  Operand kinds:
#   rd/rs: register; imm: signed imm32; uimm: unsigned imm32; mem: imm(rs); label: branch target;
#   cspace: [coreK.|core(rK).]SPACE; notify: optional [coreK.|core(rK).]SPACE.qN;
#   queue: SPACE.qN; id: 0..63; count: 0..2^31-1; dtype; mmflags; bcast (optional).
FORMATS: dict[str, str] = {
    "none": "",
    "ri": "rd, imm",
    "lsa": "rd, cspace, uimm",
    "rrr": "rd, rs1, rs2",
    "rri": "rd, rs1, imm",
    "ld": "rd, imm(rs1)",
    "st": "rs2, imm(rs1)",
    "br": "rs1, rs2, label",
    "jmp": "label",
    "dma": "rdst, rsrc, rlen[, notify]",
    "dma2d": "rdst, rsrc, rshape, rstride[, notify]",
    "qwait": "SPACE.qN",
    "sync": "id, count",
    "mpu_ldw": "rsrc, rk, rn",
    "mpu_mm": "rdst, rsrc, rm, mmflags",
    "vbin": "rdst, rsrc1, rsrc2, rn, dtype[, bcast]",
    "vun": "rdst, rsrc, rn, dtype",
    "vcvt": "rdst, rsrc, rn, dtype_dst, dtype_src",
    "vfill": "rdst, rn, rbits, dtype",
    "v2d": "rdst, rsrc, rrows, rcols, dtype",
    "vsel": "rdst, rcond, rsrc, rn, dtype, cond_dtype",
    "dbg": "rs1, rs2, uimm",
    "pim": "rdst, rx, rw, rshape[, acc]",
}

_OPS: list[OpInfo] = []


def _op(mnemonic: str, opcode: int, fmt: str, timing: str, doc: str) -> None:
    assert fmt in FORMATS and timing in TIMING_CLASSES
    _OPS.append(OpInfo(mnemonic, opcode, fmt, timing, doc))


# Opcode 0x00 is deliberately invalid: a zeroed word never executes.
_op("nop", 0x01, "none", "S", "nothing")
_op("halt", 0x02, "none", "S", "stop this module's program")
_op("li", 0x03, "ri", "S", "rd = sext(imm32)")
_op("lih", 0x04, "ri", "S", "rd = (imm32 << 32) | (rd & 0xffffffff)")
_op("lsa", 0x05, "lsa", "S", "rd = base(core, SPACE) + zext(imm32)")
for _i, (_m, _d) in enumerate(
    [
        ("add", "rd = rs1 + rs2"),
        ("sub", "rd = rs1 - rs2"),
        ("mul", "rd = rs1 * rs2 (low 64 bits)"),
        ("div", "rd = rs1 / rs2, signed, truncating; rs2 == 0 faults"),
        ("rem", "rd = rs1 % rs2, signed, sign of rs1; rs2 == 0 faults"),
        ("and", "rd = rs1 & rs2"),
        ("or", "rd = rs1 | rs2"),
        ("xor", "rd = rs1 ^ rs2"),
        ("shl", "rd = rs1 << (rs2 & 63)"),
        ("shr", "rd = rs1 >> (rs2 & 63), logical"),
        ("sra", "rd = rs1 >> (rs2 & 63), arithmetic"),
        ("min", "rd = min(rs1, rs2), signed"),
        ("max", "rd = max(rs1, rs2), signed"),
        ("slt", "rd = 1 if rs1 < rs2 (signed) else 0"),
        ("seq", "rd = 1 if rs1 == rs2 else 0"),
    ]
):
    _op(_m, 0x10 + _i, "rrr", "S", _d)
for _i, (_m, _d) in enumerate(
    [
        ("addi", "rd = rs1 + sext(imm32)"),
        ("muli", "rd = rs1 * sext(imm32)"),
        ("andi", "rd = rs1 & sext(imm32)"),
        ("shli", "rd = rs1 << (imm32 & 63)"),
        ("shri", "rd = rs1 >> (imm32 & 63), logical"),
        ("divi", "rd = rs1 / sext(imm32), signed, truncating; imm32 == 0 faults"),
        ("remi", "rd = rs1 % sext(imm32), signed; imm32 == 0 faults"),
    ]
):
    _op(_m, 0x20 + _i, "rri", "S", _d)
_op("ld", 0x28, "ld", "M", "rd = mem64[rs1 + sext(imm32)]")
_op("st", 0x29, "st", "M", "mem64[rs1 + sext(imm32)] = rs2")
_op("beq", 0x30, "br", "S", "if rs1 == rs2: pc += imm32")
_op("bne", 0x31, "br", "S", "if rs1 != rs2: pc += imm32")
_op("blt", 0x32, "br", "S", "if rs1 < rs2 (signed): pc += imm32")
_op("bge", 0x33, "br", "S", "if rs1 >= rs2 (signed): pc += imm32")
_op("jmp", 0x34, "jmp", "S", "pc += imm32")
_op("dma", 0x40, "dma", "D", "copy rlen bytes rsrc -> rdst; on completion notify a core queue")
_op(
    "qwait",
    0x41,
    "qwait",
    "Q",
    "block until this core's queue (SPACE, N) has an arrival; consume it",
)
_op(
    "dma2d",
    0x46,
    "dma2d",
    "D",
    "copy rows of a 2-D block: rshape = rows << 32 | row bytes, rstride = dst stride << 32 | "
    "src stride; one transfer, notify as dma",
)
_op("dmawait", 0x42, "none", "Q", "block until every DMA this module issued completed")
_op("barrier", 0x43, "sync", "Q", "block until `count` modules arrived at barrier `id`")
_op("sem.post", 0x44, "sync", "Q", "semaphore[id] += count")
_op("sem.wait", 0x45, "sync", "Q", "block until semaphore[id] >= count, then subtract count")
_op("mpu.ldw", 0x50, "mpu_ldw", "X", "MPU weight tile = bf16 [rk, rn] at rsrc (row-major)")
_op("mpu.mm", 0x51, "mpu_mm", "X", "dst[rm, N] (+)= src[rm, K] @ W[K, N], fp32 accumulation")
# The VPU's instructions are the rows of the op table (`legato.opset`): one per op kind that has
# an instruction of its own.
for _row in opset.OPS:
    if _row.unit == opset.VPU and _row.mnemonic is not None:
        assert _row.opcode is not None and _row.format is not None
        _op(_row.mnemonic, _row.opcode, _row.format, "V", _row.isa_doc)

# The debug instructions (`dbg.print`, `dbg.assert`) are the op table's DEBUG rows; timing class M:
# they read memory through the scoreboard (and take no cycle themselves, docs/isa.md).
for _row in opset.family(opset.DEBUG):
    assert _row.mnemonic is not None and _row.opcode is not None and _row.format is not None
    _op(_row.mnemonic, _row.opcode, _row.format, "M", _row.isa_doc)

# PIM (docs/pim.md; only a chip built with use_pim=True runs it): the unit of the channel that
# holds the weight region at rw computes dst[N] (+)= x[K] @ W[K, N], x moved in and the result
# out by DMAs of the issuing core; rshape = K << 32 | N.
_op(
    "pim.gemv",
    0x58,
    "pim",
    "P",
    "dst[N] (+)= x[K] @ W[K, N] on the PIM unit of rw's channel (W in PIM layout at rw); "
    "rshape = K << 32 | N",
)

OPS: tuple[OpInfo, ...] = tuple(_OPS)
BY_MNEMONIC: dict[str, OpInfo] = {o.mnemonic: o for o in OPS}
BY_OPCODE: dict[int, OpInfo] = {o.opcode: o for o in OPS}
assert len(BY_MNEMONIC) == len(OPS) and len(BY_OPCODE) == len(OPS)

# VPU transcendental ops run at vpu_transcendental_per_cycle instead of vpu_lanes.
VPU_TRANSCENDENTAL = frozenset(
    o.mnemonic for o in opset.OPS if o.mnemonic and o.cost == opset.TRANSCENDENTAL
)


@dataclass(frozen=True)
class Instruction:
    """One decoded instruction: its table entry and its raw fields (imm as 32-bit unsigned)."""

    op: OpInfo
    a: int = 0
    b: int = 0
    c: int = 0
    d: int = 0
    imm: int = 0  # raw 32-bit field, 0 <= imm < 2**32

    @property
    def mnemonic(self) -> str:
        return self.op.mnemonic

    @property
    def simm(self) -> int:
        """imm32 sign-extended."""
        return self.imm - (1 << 32) if self.imm & (1 << 31) else self.imm

    def encode(self) -> int:
        return encode(self)


def make(
    mnemonic: str, a: int = 0, b: int = 0, c: int = 0, d: int = 0, imm: int = 0
) -> Instruction:
    """An instruction from a mnemonic and fields (imm may be negative); validated like a decode.
    The same fields give the same (immutable) instruction, validated once: a kernel repeats
    most of its instructions (an invalid one raises every time, nothing is remembered)."""
    return _make(mnemonic, a, b, c, d, imm)


@lru_cache(maxsize=1 << 16)
def _make(mnemonic: str, a: int, b: int, c: int, d: int, imm: int) -> Instruction:
    op = BY_MNEMONIC[mnemonic]
    ins = Instruction(op, a, b, c, d, imm & 0xFFFFFFFF)
    validate(ins)
    return ins


def encode(ins: Instruction) -> int:
    for name in "abcd":
        v = getattr(ins, name)
        if not 0 <= v < 64:
            raise ValueError(f"{ins.op.mnemonic}: field {name}={v} does not fit 6 bits")
    if not 0 <= ins.imm <= UIMM_MAX:
        raise ValueError(f"{ins.op.mnemonic}: imm {ins.imm} does not fit 32 bits")
    return ins.op.opcode | ins.a << 8 | ins.b << 14 | ins.c << 20 | ins.d << 26 | ins.imm << 32


def decode(word: int) -> Instruction:
    """Decode one word; raises DecodeError when it is not a canonical valid instruction."""
    if not 0 <= word < (1 << 64):
        raise DecodeError(f"word {word:#x} is not a 64-bit value")
    opcode = word & 0xFF
    op = BY_OPCODE.get(opcode)
    if op is None:
        raise DecodeError(f"invalid opcode {opcode:#04x} in word {word:#018x}")
    ins = Instruction(
        op,
        (word >> 8) & 63,
        (word >> 14) & 63,
        (word >> 20) & 63,
        (word >> 26) & 63,
        (word >> 32) & 0xFFFFFFFF,
    )
    validate(ins)
    return ins


# Which fields hold registers, per format (everything else of a..d must be zero unless the
# format gives it a meaning, checked below).
REG_FIELDS: dict[str, str] = {
    "none": "",
    "ri": "a",
    "lsa": "a",
    "rrr": "abc",
    "rri": "ab",
    "ld": "ab",
    "st": "ab",
    "br": "ab",
    "jmp": "",
    "dma": "abc",
    "dma2d": "abcd",
    "qwait": "",
    "sync": "",
    "mpu_ldw": "abc",
    "mpu_mm": "abc",
    "vbin": "abcd",
    "vun": "abc",
    "vcvt": "abc",
    "vfill": "abc",
    "v2d": "abcd",
    "vsel": "abcd",
    "dbg": "ab",
    "pim": "abcd",
}


def _bad(ins: Instruction, why: str):
    raise DecodeError(f"invalid {ins.op.mnemonic} encoding: {why}")


def validate(ins: Instruction) -> None:
    """Check every field of `ins` against its format (the decoder's strictness)."""
    fmt = ins.op.format
    regs = REG_FIELDS[fmt]
    special = {
        "lsa": "bcd",
        "dma": "d",
        "qwait": "a",
        "sync": "a",
    }.get(fmt, "")
    for f in "abcd":
        v = getattr(ins, f)
        if not 0 <= v < 64:
            _bad(ins, f"field {f}={v} out of range")
        if f not in regs and f not in special and v != 0:
            _bad(ins, f"unused field {f} is {v}, must be 0")
        if f in regs and v >= NUM_REGS:
            _bad(ins, f"register field {f}={v} is not r0..r31")
    imm = ins.imm
    if not 0 <= imm <= UIMM_MAX:
        _bad(ins, f"imm {imm} out of range")
    if fmt in ("none", "rrr", "mpu_ldw") and imm != 0:
        _bad(ins, f"unused imm is {imm:#x}, must be 0")
    if fmt == "lsa":
        if ins.b not in SPACE_NAMES:
            _bad(ins, f"memory space code {ins.b}")
        if ins.d == CORE_SELF and ins.c != 0:
            _bad(ins, "core field set for the running core")
        if ins.d == CORE_REG and ins.c >= NUM_REGS:
            _bad(ins, f"core register {ins.c}")
        if ins.d not in (CORE_SELF, CORE_STATIC, CORE_REG):
            _bad(ins, f"core mode {ins.d}")
    elif fmt == "dma2d":
        # the notify word of dma, except that a register core (mode 2) is named in bits 7:0
        # (field d holds rstride)
        if imm & NOTIFY_PRESENT:
            space, mode = (imm >> 16) & 0xF, (imm >> 20) & 0x3
            rest = imm & ~(NOTIFY_PRESENT | 0xFF | 0xFF00 | 0xF0000 | 0x300000)
            if rest:
                _bad(ins, f"reserved notify bits {rest:#x}")
            if space not in SPACE_NAMES:
                _bad(ins, f"notify space code {space}")
            if mode == 3:
                _bad(ins, "notify core mode 3")
            if mode == CORE_SELF and imm & 0xFF:
                _bad(ins, "notify core index set for the running core")
            if mode == CORE_REG and (imm & 0xFF) >= NUM_REGS:
                _bad(ins, f"notify core register {imm & 0xFF}")
        elif imm != 0:
            _bad(ins, "notify fields set without the notify bit")
    elif fmt == "dma":
        if imm & NOTIFY_PRESENT:
            core = imm & 0xFF
            space = (imm >> 16) & 0xF
            mode = (imm >> 20) & 0x3
            rest = imm & ~(NOTIFY_PRESENT | 0xFF | 0xFF00 | 0xF0000 | 0x300000)
            if rest:
                _bad(ins, f"reserved notify bits {rest:#x}")
            if space not in SPACE_NAMES:
                _bad(ins, f"notify space code {space}")
            if mode == 3:
                _bad(ins, "notify core mode 3")
            if mode != CORE_STATIC and core != 0:
                _bad(ins, "notify core index set without a static core")
            if mode == CORE_REG:
                if ins.d >= NUM_REGS:
                    _bad(ins, f"notify core register {ins.d}")
            elif ins.d != 0:
                _bad(ins, "field d set without a register core")
        elif imm != 0 or ins.d != 0:
            _bad(ins, "notify fields set without the notify bit")
    elif fmt == "qwait":
        if ins.a not in SPACE_NAMES:
            _bad(ins, f"memory space code {ins.a}")
        if imm > MAX_QUEUE:
            _bad(ins, f"queue {imm} > {MAX_QUEUE}")
    elif fmt == "sync":
        if ins.a > MAX_SYNC_ID:
            _bad(ins, f"id {ins.a}")
        if imm > IMM_MAX:
            _bad(ins, f"count {imm} does not fit 31 bits")
    elif fmt == "mpu_mm":
        if imm & ~(MM_ACC | MM_F32):
            _bad(ins, f"reserved flag bits {imm:#x}")
        if imm & MM_ACC and not imm & MM_F32:
            _bad(ins, "acc needs an f32 destination")
    elif fmt == "vbin":
        dt = imm & 0xF
        mode = (imm >> 4) & 0x3
        if dt not in DTYPE_NAMES:
            _bad(ins, f"dtype code {dt}")
        if (imm >> 6) & 0x3:
            _bad(ins, "reserved bits 7:6")
        period = imm >> 8
        if mode in (BC_ROW, BC_COL) and period == 0:
            _bad(ins, "broadcast period 0")
        if mode in (BC_NONE, BC_SCALAR) and period != 0:
            _bad(ins, "period set without a row/col broadcast")
    elif fmt == "pim":
        if imm & ~PIM_ACC:
            _bad(ins, f"reserved flag bits {imm:#x}")
    elif fmt in ("vun", "vfill", "v2d"):
        if imm not in DTYPE_NAMES:
            _bad(ins, f"dtype code {imm}")
    elif fmt == "vsel" and (
        imm & ~0xFF or (imm & 0xF) not in DTYPE_NAMES or (imm >> 4) not in COND_DTYPE_NAMES
    ):
        _bad(ins, f"dtype codes {imm:#x}")
    elif fmt == "vcvt" and (
        imm & ~0xFF or (imm & 0xF) not in CVT_DTYPE_NAMES or (imm >> 4) not in DTYPE_NAMES
    ):
        _bad(ins, f"dtype codes {imm:#x}")


def decode_program(data: bytes) -> list[Instruction]:
    """Decode a text section (a multiple of 8 bytes)."""
    if len(data) % WORD_BYTES:
        raise DecodeError(f"program of {len(data)} bytes is not a whole number of 8-byte words")
    out = []
    for i in range(0, len(data), WORD_BYTES):
        word = int.from_bytes(data[i : i + WORD_BYTES], "little")
        try:
            out.append(decode(word))
        except DecodeError as e:
            raise DecodeError(f"instruction {i // WORD_BYTES}: {e}") from None
    return out


def words_to_bytes(words) -> bytes:
    return b"".join(int(w).to_bytes(WORD_BYTES, "little") for w in words)


def bytes_to_words(data: bytes) -> list[int]:
    if len(data) % WORD_BYTES:
        raise DecodeError(f"{len(data)} bytes is not a whole number of 8-byte words")
    return [int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data), 8)]


_MASK64 = (1 << 64) - 1


def alu(mnemonic: str, a: int, b: int) -> int:
    """The result of scalar ALU op `mnemonic` (`add`, ..., `seq`; the `*i` forms pass their
    immediate as `b`) on signed 64-bit operands, before wrapping to 64 bits. Division truncates
    toward zero; division or remainder by zero raises ZeroDivisionError. The emulator and the
    backend interpreter both call this, so the two agree by construction."""
    if mnemonic == "add":
        return a + b
    if mnemonic == "sub":
        return a - b
    if mnemonic == "mul":
        return a * b
    if mnemonic in ("div", "rem"):
        if b == 0:
            raise ZeroDivisionError(f"{mnemonic} by zero")
        q = abs(a) // abs(b)
        q = q if (a >= 0) == (b >= 0) else -q
        return q if mnemonic == "div" else a - q * b
    if mnemonic == "and":
        return a & b
    if mnemonic == "or":
        return a | b
    if mnemonic == "xor":
        return a ^ b
    if mnemonic == "shl":
        return a << (b & 63)
    if mnemonic == "shr":
        return (a & _MASK64) >> (b & 63)
    if mnemonic == "sra":
        return a >> (b & 63)
    if mnemonic == "min":
        return min(a, b)
    if mnemonic == "max":
        return max(a, b)
    if mnemonic == "slt":
        return int(a < b)
    if mnemonic == "seq":
        return int(a == b)
    raise ValueError(f"{mnemonic} is not an ALU instruction")
