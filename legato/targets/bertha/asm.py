"""Bertha assembler and disassembler.

File format (what the compiler emits; docs/isa.md has the full reference)::

    ; comment
    .kernel simple_matmul
    .program top on top
        ld r3, 8(r1)
        dma r4, r3, r5, core0.sram.q0
        halt
    .program core0 on core(0)
    .mem sram 40960
    loop:
        qwait sram.q0
        bne r3, r0, loop
        halt

`assemble(text)` -> `AsmModule` (programs with encoded words); `disassemble(module)` -> canonical
text; `assemble(disassemble(m))` gives the same words and `disassemble(assemble(t)) == t` for
canonical text `t`.  Errors are `AsmError` with `line:col`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from legato.errors import LegatoError
from legato.targets.bertha import isa
from legato.targets.bertha.isa import (
    BC_COL,
    BC_NAMES,
    BC_NONE,
    BC_ROW,
    BC_SCALAR,
    CORE_REG,
    CORE_SELF,
    CORE_STATIC,
    DTYPE_NAMES,
    DTYPES,
    MM_ACC,
    MM_F32,
    NOTIFY_PRESENT,
    SPACE_NAMES,
    SPACES,
    Instruction,
)

MEMORY_DIRECTIVE_SPACES = ("sram", "mpu_buffer", "private_dram")


class AsmError(LegatoError):
    """An assembly error at `line:col` (1-based)."""

    def __init__(self, message: str, line: int = 0, col: int = 0, filename: str = "<asm>"):
        self.message = message
        self.line = line
        self.col = col
        self.filename = filename
        super().__init__(f"{filename}:{line}:{col}: {message}")


@dataclass
class AsmProgram:
    name: str
    context: str  # "top", "core(i)" or "all_cores"
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    memory: dict[str, int] = field(default_factory=dict)  # declared footprint per core space

    @property
    def words(self) -> list[int]:
        return [isa.encode(i) for i in self.instructions]

    @property
    def code(self) -> bytes:
        return isa.words_to_bytes(self.words)


@dataclass
class AsmModule:
    kernel: str | None
    programs: list[AsmProgram]

    def program(self, name: str) -> AsmProgram:
        for p in self.programs:
            if p.name == name:
                return p
        raise KeyError(name)


# --------------------------------------------------------------------------------------------
# contexts

_CTX_RE = re.compile(r"^(top|all_cores|core\((\d+)\))$")


def parse_context(text: str) -> tuple[str, int | None]:
    """`top` -> ("top", None); `core(3)` -> ("core", 3); `all_cores` -> ("all_cores", None)."""
    m = _CTX_RE.match(text.strip())
    if not m:
        raise ValueError(f"unknown context {text!r}; expected top, core(i) or all_cores")
    if m.group(2) is not None:
        return "core", int(m.group(2))
    return m.group(1), None


def format_context(kind: str, index: int | None = None) -> str:
    return f"core({index})" if kind == "core" else kind


# --------------------------------------------------------------------------------------------
# operand parsing

_REG_RE = re.compile(r"^r(\d+)$")
_INT_RE = re.compile(r"^[+-]?(0x[0-9a-fA-F]+|0b[01]+|\d+)$")
_IDENT_RE = re.compile(r"^[A-Za-z_.$][\w.$]*$")
_MEM_RE = re.compile(r"^(.*)\(\s*(r\d+)\s*\)$")
_CORE_PREFIX_RE = re.compile(r"^(?:core(\d+)|core\((r\d+)\))\.(.*)$")
_QUEUE_RE = re.compile(r"^([a-z_]+)\.q(\d+)$")
_BC_RE = re.compile(r"^bc\.(scalar|row|col)(?:\((.*)\))?$")


class _Err(Exception):
    """A parse error; `col_offset` is the operand index (None: the mnemonic)."""

    def __init__(self, message: str, col_offset: int | None = 0):
        super().__init__(message)
        self.message = message
        self.col_offset = col_offset


def _int(text: str, what: str = "integer") -> int:
    t = text.strip()
    if not _INT_RE.match(t):
        raise _Err(f"expected {what}, got {text!r}")
    return int(t, 0)


def _reg(text: str) -> int:
    m = _REG_RE.match(text.strip())
    if not m:
        raise _Err(f"expected a register r0..r31, got {text!r}")
    n = int(m.group(1))
    if n >= isa.NUM_REGS or (len(m.group(1)) > 1 and m.group(1)[0] == "0"):
        raise _Err(f"no register {text!r}; registers are r0..r31")
    return n


def _imm(text: str, lo: int = isa.IMM_MIN, hi: int = isa.IMM_MAX, what: str = "immediate") -> int:
    v = _int(text, what)
    if not lo <= v <= hi:
        raise _Err(f"{what} {v} out of range [{lo}, {hi}]")
    return v & 0xFFFFFFFF


def _space(text: str) -> int:
    t = text.strip()
    if t not in SPACES:
        raise _Err(f"unknown memory space {t!r}; expected one of {', '.join(SPACES)}")
    return SPACES[t]


def _core_prefixed(text: str) -> tuple[int, int, str]:
    """`[coreK.|core(rN).]REST` -> (mode, core-or-reg, REST)."""
    t = text.strip()
    m = _CORE_PREFIX_RE.match(t)
    if not m:
        if t.startswith("core"):
            raise _Err(f"bad core selector in {t!r}; write coreK.SPACE or core(rN).SPACE")
        return CORE_SELF, 0, t
    if m.group(1) is not None:
        k = int(m.group(1))
        if k > 63:
            raise _Err(f"core index {k} > 63")
        return CORE_STATIC, k, m.group(3)
    return CORE_REG, _reg(m.group(2)), m.group(3)


def _queue(text: str) -> tuple[int, int]:
    t = text.strip()
    m = _QUEUE_RE.match(t)
    if not m:
        raise _Err(f"expected a queue SPACE.qN (e.g. sram.q0), got {t!r}")
    q = int(m.group(2))
    if q > isa.MAX_QUEUE:
        raise _Err(f"queue {q} > {isa.MAX_QUEUE}")
    return _space(m.group(1)), q


def _dtype(text: str) -> int:
    t = text.strip()
    if t not in DTYPES:
        raise _Err(f"unknown element type {t!r}; expected one of {', '.join(DTYPES)}")
    return DTYPES[t]


def _cond_dtype(text: str) -> int:
    t = text.strip()
    if t not in isa.COND_DTYPES:
        raise _Err(f"unknown condition type {t!r}; expected one of {', '.join(isa.COND_DTYPES)}")
    return isa.COND_DTYPES[t]


def _cvt_dtype(text: str) -> int:
    t = text.strip()
    if t not in isa.CVT_DTYPES:
        raise _Err(f"unknown result type {t!r}; expected one of {', '.join(isa.CVT_DTYPES)}")
    return isa.CVT_DTYPES[t]


def _label(text: str) -> str | int:
    t = text.strip()
    if _INT_RE.match(t) and t[0] in "+-":
        return _imm(t, what="branch offset")
    if not _IDENT_RE.match(t) or _REG_RE.match(t):
        raise _Err(f"expected a label, got {t!r}")
    return t


def _split_operands(text: str, col0: int) -> list[tuple[str, int]]:
    """Split on top-level commas; returns (operand, 1-based column)."""
    out = []
    depth = 0
    start = 0
    for i, ch in enumerate(text + ","):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            piece = text[start:i]
            lead = len(piece) - len(piece.lstrip())
            out.append((piece.strip(), col0 + start + lead))
            start = i + 1
    if len(out) == 1 and out[0][0] == "":
        return []
    return out


def _parse_instruction(mnemonic: str, ops: list[tuple[str, int]], ctx_kind: str):
    """-> (fields dict, label-or-None, index of label operand).  Raises _Err with operand index."""
    op = isa.BY_MNEMONIC[mnemonic]
    fmt = op.format
    f = {"a": 0, "b": 0, "c": 0, "d": 0, "imm": 0}
    label = None

    def need(n_min, n_max=None):
        n_max = n_min if n_max is None else n_max
        if not n_min <= len(ops) <= n_max:
            want = str(n_min) if n_min == n_max else f"{n_min} to {n_max}"
            raise _Err(
                f"{mnemonic} takes {want} operands ({isa.FORMATS[fmt] or 'none'}), got {len(ops)}"
            )

    def at(i, fn, *args):
        try:
            return fn(ops[i][0], *args)
        except _Err as e:
            e.col_offset = i
            raise

    if fmt == "none":
        need(0)
    elif fmt == "ri":
        need(2)
        f["a"] = at(0, _reg)
        hi = isa.UIMM_MAX if mnemonic == "li" else isa.IMM_MAX
        f["imm"] = at(1, _imm, isa.IMM_MIN, hi)
    elif fmt == "lsa":
        need(3)
        f["a"] = at(0, _reg)
        mode, core, rest = at(1, _core_prefixed)
        try:
            f["b"] = _space(rest)
        except _Err as e:
            e.col_offset = 1
            raise
        f["c"], f["d"] = core, mode
        if mode == CORE_SELF and ctx_kind == "top":
            raise _Err("top has no core memory of its own; write coreK.SPACE", 1)
        f["imm"] = at(2, _imm, 0, isa.UIMM_MAX, "offset")
    elif fmt == "rrr" or fmt == "mpu_ldw":
        need(3)
        f["a"], f["b"], f["c"] = at(0, _reg), at(1, _reg), at(2, _reg)
    elif fmt == "rri":
        need(3)
        f["a"], f["b"] = at(0, _reg), at(1, _reg)
        f["imm"] = at(2, _imm)
    elif fmt in ("ld", "st"):
        need(2)
        f["a"] = at(0, _reg)
        m = _MEM_RE.match(ops[1][0])
        if not m:
            raise _Err(f"expected a memory operand imm(rN), got {ops[1][0]!r}", 1)
        f["b"] = at(1, lambda _t: _reg(m.group(2)))
        off = m.group(1).strip() or "0"
        f["imm"] = at(1, lambda _t: _imm(off, what="offset"))
    elif fmt == "br":
        need(3)
        f["a"], f["b"] = at(0, _reg), at(1, _reg)
        label = (at(2, _label), 2)
    elif fmt == "jmp":
        need(1)
        label = (at(0, _label), 0)
    elif fmt == "dma":
        need(3, 4)
        f["a"], f["b"], f["c"] = at(0, _reg), at(1, _reg), at(2, _reg)
        if len(ops) == 4:
            mode, core, rest = at(3, _core_prefixed)
            space, q = at(3, lambda _t: _queue(rest))
            if mode == CORE_SELF and ctx_kind == "top":
                raise _Err("top has no queues; name the core: coreK.SPACE.qN", 3)
            imm = NOTIFY_PRESENT | (q << 8) | (space << 16) | (mode << 20)
            if mode == CORE_STATIC:
                imm |= core
            elif mode == CORE_REG:
                f["d"] = core
            f["imm"] = imm
    elif fmt == "dma2d":
        need(4, 5)
        f["a"], f["b"], f["c"], f["d"] = at(0, _reg), at(1, _reg), at(2, _reg), at(3, _reg)
        if len(ops) == 5:
            mode, core, rest = at(4, _core_prefixed)
            space, q = at(4, lambda _t: _queue(rest))
            if mode == CORE_SELF and ctx_kind == "top":
                raise _Err("top has no queues; name the core: coreK.SPACE.qN", 4)
            # a static core index or a core register number, both in bits 7:0
            f["imm"] = NOTIFY_PRESENT | (q << 8) | (space << 16) | (mode << 20) | core
    elif fmt == "qwait":
        need(1)
        if ctx_kind == "top":
            raise _Err("qwait: top has no queues; only cores receive", None)
        f["a"], f["imm"] = at(0, _queue)
    elif fmt == "sync":
        need(2)
        f["a"] = at(0, _imm, 0, isa.MAX_SYNC_ID, "id")
        f["imm"] = at(1, _imm, 0, isa.IMM_MAX, "count")
    elif fmt == "mpu_mm":
        need(4, 5)
        if ctx_kind == "top":
            raise _Err("top has no MPU", None)
        f["a"], f["b"], f["c"] = at(0, _reg), at(1, _reg), at(2, _reg)
        out = ops[3][0]
        if out == "f32":
            flags = MM_F32
        elif out == "bf16":
            flags = 0
        else:
            raise _Err(f"mpu.mm output type must be bf16 or f32, got {out!r}", 3)
        if len(ops) == 5:
            if ops[4][0] != "acc":
                raise _Err(f"unknown mpu.mm flag {ops[4][0]!r}; the only flag is acc", 4)
            if not flags & MM_F32:
                raise _Err("acc needs an f32 destination (bf16 output cannot accumulate)", 4)
            flags |= MM_ACC
        f["imm"] = flags
    elif fmt == "vbin":
        need(5, 6)
        f["a"], f["b"], f["c"], f["d"] = (at(i, _reg) for i in range(4))
        imm = at(4, _dtype)
        if len(ops) == 6:
            m = _BC_RE.match(ops[5][0])
            if not m:
                raise _Err(f"expected bc.scalar, bc.row(P) or bc.col(P), got {ops[5][0]!r}", 5)
            kind = {"scalar": BC_SCALAR, "row": BC_ROW, "col": BC_COL}[m.group(1)]
            if kind == BC_SCALAR:
                if m.group(2) is not None:
                    raise _Err("bc.scalar takes no period", 5)
            else:
                if m.group(2) is None:
                    raise _Err(f"bc.{m.group(1)} needs a period, e.g. bc.{m.group(1)}(128)", 5)
                p = at(5, lambda _t: _int(m.group(2), "period"))
                if not 1 <= p < (1 << 24):
                    raise _Err(f"period {p} out of range [1, {(1 << 24) - 1}]", 5)
                imm |= p << 8
            imm |= kind << 4
        f["imm"] = imm
    elif fmt == "vun":
        need(4)
        f["a"], f["b"], f["c"] = at(0, _reg), at(1, _reg), at(2, _reg)
        f["imm"] = at(3, _dtype)
    elif fmt == "vcvt":
        need(5)
        f["a"], f["b"], f["c"] = at(0, _reg), at(1, _reg), at(2, _reg)
        f["imm"] = at(3, _cvt_dtype) | at(4, _dtype) << 4
    elif fmt == "vfill":
        need(4)
        f["a"], f["b"], f["c"] = at(0, _reg), at(1, _reg), at(2, _reg)
        f["imm"] = at(3, _dtype)
    elif fmt == "v2d":
        need(5)
        f["a"], f["b"], f["c"], f["d"] = (at(i, _reg) for i in range(4))
        f["imm"] = at(4, _dtype)
    elif fmt == "vsel":
        need(6)
        f["a"], f["b"], f["c"], f["d"] = (at(i, _reg) for i in range(4))
        f["imm"] = at(4, _dtype) | at(5, _cond_dtype) << 4
    elif fmt == "pim":
        need(4, 5)
        if ctx_kind == "top":
            raise _Err("top has no local memory for a PIM operand", None)
        f["a"], f["b"], f["c"], f["d"] = (at(i, _reg) for i in range(4))
        if len(ops) == 5:
            if ops[4][0] != "acc":
                raise _Err(f"unknown pim.gemv flag {ops[4][0]!r}; the only flag is acc", 4)
            f["imm"] = isa.PIM_ACC
    elif fmt == "dbg":
        need(3)
        f["a"], f["b"] = at(0, _reg), at(1, _reg)
        f["imm"] = at(2, _imm, 0, isa.UIMM_MAX, "debug entry")
    else:  # pragma: no cover - the table and this function are kept in step by tests
        raise AssertionError(fmt)
    if op.format in ("vbin", "vun", "vcvt", "vfill", "v2d", "vsel") and ctx_kind == "top":
        raise _Err("top has no VPU", None)
    if op.format == "mpu_ldw" and ctx_kind == "top":
        raise _Err("top has no MPU", None)
    return f, label


# --------------------------------------------------------------------------------------------
# assembler

_LABEL_RE = re.compile(r"^\s*([A-Za-z_.$][\w.$]*)\s*:")
_MNEM_RE = re.compile(r"^\s*([A-Za-z_][\w.]*)")


def assemble(text: str, *, filename: str = "<asm>") -> AsmModule:
    """Assemble a whole file into an `AsmModule`."""
    kernel: str | None = None
    programs: list[AsmProgram] = []
    cur: AsmProgram | None = None
    cur_ctx_kind = ""
    pending: list[tuple[AsmProgram, int, str, int, int]] = []  # prog, idx, label, line, col
    fields_list: dict[int, list] = {}

    def err(msg, line, col):
        return AsmError(msg, line, col, filename)

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(";", 1)[0].rstrip()
        if not line.strip():
            continue
        stripped = line.lstrip()
        col0 = len(line) - len(stripped) + 1
        if stripped.startswith("."):
            parts = stripped.split()
            d = parts[0]
            if d == ".kernel":
                if len(parts) != 2 or not _IDENT_RE.match(parts[1]):
                    raise err(".kernel takes one name", lineno, col0)
                if kernel is not None:
                    raise err("second .kernel directive", lineno, col0)
                if programs:
                    raise err(".kernel must come before the first .program", lineno, col0)
                kernel = parts[1]
                continue
            if d == ".program":
                if len(parts) != 4 or parts[2] != "on":
                    raise err(
                        ".program takes NAME on CONTEXT, e.g. `.program core0 on core(0)`",
                        lineno,
                        col0,
                    )
                name = parts[1]
                if not _IDENT_RE.match(name):
                    raise err(f"bad program name {name!r}", lineno, col0 + len(".program "))
                if any(p.name == name for p in programs):
                    raise err(f"program {name!r} defined twice", lineno, col0)
                try:
                    kind, index = parse_context(parts[3])
                except ValueError as e:
                    raise err(str(e), lineno, line.index(parts[3]) + 1) from None
                if index is not None and index > 63:
                    raise err(f"core index {index} > 63", lineno, line.index(parts[3]) + 1)
                cur = AsmProgram(name, format_context(kind, index))
                cur_ctx_kind = kind
                programs.append(cur)
                continue
            if d == ".mem":
                if cur is None:
                    raise err(".mem outside a .program", lineno, col0)
                if len(parts) != 3 or parts[1] not in MEMORY_DIRECTIVE_SPACES:
                    raise err(
                        ".mem takes SPACE BYTES with SPACE one of "
                        + ", ".join(MEMORY_DIRECTIVE_SPACES),
                        lineno,
                        col0,
                    )
                if cur_ctx_kind == "top":
                    raise err("top has no core memory; .mem belongs to core programs", lineno, col0)
                try:
                    n = _int(parts[2], "byte count")
                except _Err as e:
                    raise err(e.message, lineno, line.index(parts[2]) + 1) from None
                if n < 0:
                    raise err("negative byte count", lineno, line.index(parts[2]) + 1)
                if parts[1] in cur.memory:
                    raise err(f".mem {parts[1]} given twice", lineno, col0)
                cur.memory[parts[1]] = n
                continue
            # a label starting with '.' falls through to label handling
            if not _LABEL_RE.match(line):
                raise err(f"unknown directive {d!r}", lineno, col0)
        rest = line
        while True:
            m = _LABEL_RE.match(rest)
            if not m:
                break
            if cur is None:
                raise err("label outside a .program", lineno, m.start(1) + 1)
            name = m.group(1)
            if name in cur.labels:
                raise err(
                    f"label {name!r} defined twice in program {cur.name!r}", lineno, m.start(1) + 1
                )
            cur.labels[name] = len(cur.instructions)
            rest = " " * m.end() + rest[m.end() :]
        if not rest.strip():
            continue
        if cur is None:
            raise err(
                "instruction outside a .program (start one with `.program NAME on CTX`)",
                lineno,
                col0,
            )
        mm = _MNEM_RE.match(rest)
        mcol = len(rest) - len(rest.lstrip()) + 1
        if not mm:
            raise err(f"cannot parse {rest.strip()!r}", lineno, mcol)
        mnemonic = mm.group(1)
        if mnemonic not in isa.BY_MNEMONIC:
            raise err(f"unknown instruction {mnemonic!r}", lineno, mcol)
        after = rest[mm.end() :]
        if after and not after[0].isspace():
            raise err(f"unknown instruction {mnemonic + after.split()[0]!r}", lineno, mcol)
        ops = _split_operands(after, mm.end() + 1)
        for o, c in ops:
            if o == "":
                raise err("empty operand", lineno, c)
        try:
            f, label = _parse_instruction(mnemonic, ops, cur_ctx_kind)
        except _Err as e:
            if e.col_offset is None or not ops or "operands" in e.message:
                c = mcol
            else:
                c = ops[min(e.col_offset, len(ops) - 1)][1]
            raise err(e.message, lineno, c) from None
        idx = len(cur.instructions)
        if label is not None:
            lname, li = label
            pending.append((cur, idx, lname, lineno, ops[li][1]))
        fields_list[id(cur), idx] = (mnemonic, f, lineno, mcol)
        cur.instructions.append(None)  # type: ignore[arg-type]

    # resolve labels and build instructions
    label_at = {(id(p), i): (lab, ln, c) for p, i, lab, ln, c in pending}
    for prog in programs:
        for idx in range(len(prog.instructions)):
            mnemonic, f, lineno, mcol = fields_list[id(prog), idx]
            if (id(prog), idx) in label_at:
                lab, ln, c = label_at[id(prog), idx]
                if isinstance(lab, int):
                    f["imm"] = lab
                elif lab not in prog.labels:
                    raise err(f"undefined label {lab!r} in program {prog.name!r}", ln, c)
                else:
                    f["imm"] = (prog.labels[lab] - idx) & 0xFFFFFFFF
            try:
                prog.instructions[idx] = isa.make(
                    mnemonic, f["a"], f["b"], f["c"], f["d"], f["imm"]
                )
            except (isa.DecodeError, ValueError) as e:  # pragma: no cover - parser guards
                raise err(str(e), lineno, mcol) from None
    for prog in programs:
        for lab, target in prog.labels.items():
            if target > len(prog.instructions):  # pragma: no cover
                raise err(f"label {lab!r} past the end", 0, 0)
    return AsmModule(kernel, programs)


# --------------------------------------------------------------------------------------------
# disassembler


def _r(n: int) -> str:
    return f"r{n}"


def _core_sel(mode: int, core: int) -> str:
    if mode == CORE_SELF:
        return ""
    if mode == CORE_STATIC:
        return f"core{core}."
    return f"core({_r(core)})."


def format_instruction(ins: Instruction, label: str | None = None) -> str:
    """The canonical assembly of one instruction; `label` replaces a branch offset."""
    op = ins.op
    fmt = op.format
    m = op.mnemonic
    a, b, c, d, imm = ins.a, ins.b, ins.c, ins.d, ins.imm
    if fmt == "none":
        return m
    if fmt == "ri":
        return f"{m} {_r(a)}, {ins.simm}"
    if fmt == "lsa":
        return f"{m} {_r(a)}, {_core_sel(d, c)}{SPACE_NAMES[b]}, {imm}"
    if fmt in ("rrr", "mpu_ldw"):
        return f"{m} {_r(a)}, {_r(b)}, {_r(c)}"
    if fmt == "rri":
        return f"{m} {_r(a)}, {_r(b)}, {ins.simm}"
    if fmt in ("ld", "st"):
        return f"{m} {_r(a)}, {ins.simm}({_r(b)})"
    if fmt in ("br", "jmp"):
        target = label if label is not None else f"{ins.simm:+d}"
        return f"{m} {_r(a)}, {_r(b)}, {target}" if fmt == "br" else f"{m} {target}"
    if fmt == "dma":
        s = f"{m} {_r(a)}, {_r(b)}, {_r(c)}"
        if imm & NOTIFY_PRESENT:
            mode = (imm >> 20) & 3
            core = d if mode == CORE_REG else imm & 0xFF
            s += f", {_core_sel(mode, core)}{SPACE_NAMES[(imm >> 16) & 0xF]}.q{(imm >> 8) & 0xFF}"
        return s
    if fmt == "dma2d":
        s = f"{m} {_r(a)}, {_r(b)}, {_r(c)}, {_r(d)}"
        if imm & NOTIFY_PRESENT:
            mode = (imm >> 20) & 3
            s += (
                f", {_core_sel(mode, imm & 0xFF)}{SPACE_NAMES[(imm >> 16) & 0xF]}"
                f".q{(imm >> 8) & 0xFF}"
            )
        return s
    if fmt == "qwait":
        return f"{m} {SPACE_NAMES[a]}.q{imm}"
    if fmt == "sync":
        return f"{m} {a}, {imm}"
    if fmt == "mpu_mm":
        s = f"{m} {_r(a)}, {_r(b)}, {_r(c)}, {'f32' if imm & MM_F32 else 'bf16'}"
        return s + (", acc" if imm & MM_ACC else "")
    if fmt == "vbin":
        s = f"{m} {_r(a)}, {_r(b)}, {_r(c)}, {_r(d)}, {DTYPE_NAMES[imm & 0xF]}"
        mode = (imm >> 4) & 3
        if mode == BC_SCALAR:
            s += ", bc.scalar"
        elif mode in (BC_ROW, BC_COL):
            s += f", bc.{BC_NAMES[mode]}({imm >> 8})"
        else:
            assert mode == BC_NONE
        return s
    if fmt in ("vun", "vfill"):
        return f"{m} {_r(a)}, {_r(b)}, {_r(c)}, {DTYPE_NAMES[imm]}"
    if fmt == "vcvt":
        dst = isa.CVT_DTYPE_NAMES[imm & 0xF]
        return f"{m} {_r(a)}, {_r(b)}, {_r(c)}, {dst}, {DTYPE_NAMES[imm >> 4]}"
    if fmt == "v2d":
        return f"{m} {_r(a)}, {_r(b)}, {_r(c)}, {_r(d)}, {DTYPE_NAMES[imm]}"
    if fmt == "vsel":
        return (
            f"{m} {_r(a)}, {_r(b)}, {_r(c)}, {_r(d)}, {DTYPE_NAMES[imm & 0xF]}, "
            f"{isa.COND_DTYPE_NAMES[imm >> 4]}"
        )
    if fmt == "dbg":
        return f"{m} {_r(a)}, {_r(b)}, {imm}"
    if fmt == "pim":
        s = f"{m} {_r(a)}, {_r(b)}, {_r(c)}, {_r(d)}"
        return s + (", acc" if imm & isa.PIM_ACC else "")
    raise AssertionError(fmt)  # pragma: no cover


def disassemble_program(instructions: list[Instruction]) -> list[str]:
    """Canonical lines for one program: branch targets become labels `L<index>`."""
    n = len(instructions)
    targets = set()
    for i, ins in enumerate(instructions):
        if ins.op.format in ("br", "jmp") and 0 <= i + ins.simm <= n:
            targets.add(i + ins.simm)
    lines = []
    for i, ins in enumerate(instructions):
        if i in targets:
            lines.append(f"L{i}:")
        label = None
        if ins.op.format in ("br", "jmp") and (i + ins.simm) in targets:
            label = f"L{i + ins.simm}"
        lines.append("    " + format_instruction(ins, label))
    if n in targets:  # a branch to just past the end still needs its label
        lines.append(f"L{n}:")
    return lines


def disassemble_words(words) -> list[str]:
    return disassemble_program([isa.decode(w) for w in words])


def disassemble(module) -> str:
    """Canonical text of an `AsmModule` or a `legato.targets.bertha.elf.Binary`."""
    out = []
    if getattr(module, "kernel", None):
        out.append(f".kernel {module.kernel}")
    for p in module.programs:
        out.append(f".program {p.name} on {p.context}")
        for space in MEMORY_DIRECTIVE_SPACES:
            if space in (p.memory or {}):
                out.append(f".mem {space} {p.memory[space]}")
        instrs = p.instructions if hasattr(p, "instructions") else [isa.decode(w) for w in p.words]
        out.extend(disassemble_program(instrs))
    return "\n".join(out) + "\n"
