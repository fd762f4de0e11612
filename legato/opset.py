"""The op table: every elementwise op kind (and the VPU's other instruction families) once.

A row says what the op is at every level: its legato name (the `legato.tensor` stub, the
frontend's builtin and the `legato.<name>` op), its core kind (`core.vpu_unary <kind>`,
`core.vpu_binary <kind>`, ...), its unit, the element types it computes on, its cost class
(the timing model's and the roofline's plain vs transcendental rate), its ISA instruction
(mnemonic, opcode, format) and its semantics (a float64 function, and an exact int64 one for the
integer types the VPU computes on). Everything below is derived from the rows:

- `legato.dialects.legato`: the elementwise op classes (`legato.exp`, `legato.lt`, ...);
- `legato.dialects.core`: the `vpu_unary` / `vpu_binary` / `vpu_reduce` kinds;
- `legato.dialects.backend`: the VPU instruction classes (`backend.vpu_exp`, ...);
- `legato.targets.bertha.isa`: the VPU instructions' opcodes, formats and timing class;
- `legato.targets.bertha.vpu`: the numerics (rounding rules around the row's function);
- `legato.tensor` and the frontend: the names and their signatures;
- `legato.transforms`: the legato -> core kinds and instruction selection;
- the interpreters and the emulator's VPU dispatch; `legato.torch.capabilities`.

Adding an elementwise op is one row here plus its float64 function in `legato.numerics` (and
its tests: docs/architecture.md, "Adding an op").

This module imports only `legato.numerics`, so every layer may import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from legato import numerics

VPU, MPU, DBG = "VPU", "MPU", "DBG"
PLAIN, TRANSCENDENTAL = "plain", "transcendental"
"""Cost classes: plain ops run at `vpu_lanes` elements per cycle, transcendental ones at
`vpu_transcendental_per_cycle` (`legato.targets.bertha.timing.vpu_cycles`)."""

FLOATS = ("bf16", "f32", "f16")
"""The float element types the VPU computes on."""
INTS = ("i32",)
"""The integer element types the VPU computes on (wrapping two's complement)."""

UNARY, BINARY, CLAMP, REDUCE, CAST, SELECT, FILL, TRANSPOSE, MATMUL, DEBUG = (
    "unary",
    "binary",
    "clamp",
    "reduce",
    "cast",
    "select",
    "fill",
    "transpose",
    "matmul",
    "debug",
)


@dataclass(frozen=True)
class OpKind:
    """One op kind. `name` is its legato name (None: no legato op, e.g. the core-only `copy`);
    `kind` its core kind; `mnemonic`/`opcode`/`format` its ISA instruction (None: no
    instruction of its own, e.g. `core.vpu_reduce min`, which the lowering rewrites);
    `f64(*xs)` its value on float64 arrays (the VPU rounds it to f32, then to the element type);
    `i64(*xs)` its exact value on int64 arrays for the `INTS` in `dtypes` (wrapped to the type);
    `f32_exact`: computing in float32 directly gives the same bits (`vpu.F32_EXACT`);
    `commutative`: the lowering may swap the operands (to put a broadcast operand second)."""

    family: str
    kind: str
    name: str | None
    mnemonic: str | None
    opcode: int | None
    format: str | None
    cost: str
    dtypes: tuple[str, ...]
    f64: Callable[..., np.ndarray] | None = None
    i64: Callable[..., np.ndarray] | None = None
    unit: str = VPU
    commutative: bool = False
    f32_exact: bool = False
    doc: str = ""

    @property
    def arity(self) -> int:
        return 2 if self.family == BINARY else 1

    @property
    def float_only(self) -> bool:
        return not any(d in INTS for d in self.dtypes)

    @property
    def legato_class_name(self) -> str:
        """`ExpOp`, `MaximumOp`, `GeluTanhOp`: the legato dialect's class for this op."""
        assert self.name is not None
        return _camel(self.name) + "Op"

    @property
    def backend_class_name(self) -> str | None:
        """`VpuExpOp`, `VpuGeluTanhOp`: the backend dialect's class for this instruction."""
        if self.mnemonic is None:
            return None
        return "Vpu" + _camel(self.mnemonic.removeprefix("vpu.").replace(".", "_")) + "Op"

    @property
    def backend_op_name(self) -> str | None:
        """`backend.vpu_exp`, `backend.vpu_gelu_tanh`."""
        if self.mnemonic is None:
            return None
        return "backend.vpu_" + self.mnemonic.removeprefix("vpu.").replace(".", "_")

    @property
    def isa_doc(self) -> str:
        if self.doc:
            return self.doc
        if self.family == BINARY:
            return f"dst[i] = src1[i] {self.kind} src2[i'] over rn elements"
        return f"dst[i] = {self.kind}(src[i]) over rn elements"


def _camel(s: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in s.split("_"))


_ANY = FLOATS + INTS


def _un(kind, opcode, cost, f64, *, name="", dtypes=FLOATS, i64=None, f32_exact=False, mn=""):
    return OpKind(
        UNARY,
        kind,
        kind if name == "" else name,
        mn or f"vpu.{kind}",
        opcode,
        "vun",
        cost,
        dtypes,
        f64,
        i64,
        f32_exact=f32_exact,
    )


def _bin(kind, opcode, f64, *, name="", i64=None, commutative=False, f32_exact=False):
    return OpKind(
        BINARY,
        kind,
        name or kind,
        f"vpu.{kind}",
        opcode,
        "vbin",
        PLAIN,
        _ANY if i64 is not None else FLOATS,
        f64,
        i64,
        commutative=commutative,
        f32_exact=f32_exact,
    )


def _cmp(kind, opcode, f64, i64, commutative=False):
    return OpKind(
        BINARY,
        kind,
        kind,
        f"vpu.{kind}",
        opcode,
        "vbin",
        PLAIN,
        _ANY,
        f64,
        i64,
        commutative=commutative,
        doc=f"dst[i] = 1 if src1[i] {kind} src2[i'] else 0 (in DT) over rn elements",
    )


_OTHER_DOCS = {
    "vpu.cvt": "dst[i] = round(src[i]) to dtype_dst (to i32 / i64: truncated), rn elements",
    "vpu.fill": "dst[i] = element with bit pattern rbits, rn elements",
    "vpu.rsum": "dst[r] = sum_c src[r, c], fp32 sequential, rounded once",
    "vpu.rmax": "dst[r] = max_c src[r, c]",
    "vpu.transpose": "dst[c, r] = src[r, c]",
    "vpu.sel": "dst[i] = src[i] if cond[i] != 0 else dst[i], rn elements",
}


def _other(fam, kind, name, mnemonic, opcode, fmt, dtypes):
    return OpKind(
        fam, kind, name, mnemonic, opcode, fmt, PLAIN, dtypes, doc=_OTHER_DOCS.get(mnemonic, "")
    )


N = numerics
OPS: tuple[OpKind, ...] = (
    # -- binary (vbin: `rdst, rsrc1, rsrc2, rn, dtype[, bcast]`) --------------------------------
    _bin("add", 0x60, np.add, i64=np.add, commutative=True, f32_exact=True),
    _bin("sub", 0x61, np.subtract, i64=np.subtract, f32_exact=True),
    _bin("mul", 0x62, np.multiply, i64=np.multiply, commutative=True, f32_exact=True),
    _bin("div", 0x63, np.divide, f32_exact=True),
    _bin("max", 0x64, np.maximum, name="maximum", i64=np.maximum, commutative=True),
    _bin("min", 0x65, np.minimum, name="minimum", i64=np.minimum, commutative=True),
    # comparisons: a 0/1 mask in the operands' element type (`legato.where` takes it as is)
    _cmp("eq", 0x66, N.EQ, N.INT_EQ, commutative=True),
    _cmp("ne", 0x67, N.NE, N.INT_NE, commutative=True),
    _cmp("lt", 0x68, N.LT, N.INT_LT),
    _cmp("le", 0x69, N.LE, N.INT_LE),
    _cmp("gt", 0x6A, N.GT, N.INT_GT),
    _cmp("ge", 0x6B, N.GE, N.INT_GE),
    # -- unary (vun: `rdst, rsrc, rn, dtype`) ---------------------------------------------------
    _un("neg", 0x70, PLAIN, np.negative, dtypes=_ANY, i64=np.negative),
    _un("abs", 0x71, PLAIN, np.abs, dtypes=_ANY, i64=np.abs),
    _un("exp", 0x72, TRANSCENDENTAL, np.exp),
    _un("log", 0x73, TRANSCENDENTAL, np.log),
    _un("sqrt", 0x74, PLAIN, np.sqrt, f32_exact=True),
    _un("rsqrt", 0x75, TRANSCENDENTAL, N.rsqrt),
    _un("tanh", 0x76, TRANSCENDENTAL, np.tanh),
    _un("sigmoid", 0x77, TRANSCENDENTAL, N.sigmoid),
    _un("silu", 0x78, TRANSCENDENTAL, N.silu),
    _un("gelu", 0x79, TRANSCENDENTAL, N.gelu),
    _un("copy", 0x7A, PLAIN, N.identity, name=None, dtypes=_ANY, i64=N.identity),
    _un("cos", 0x7B, TRANSCENDENTAL, np.cos),
    _un("sin", 0x7C, TRANSCENDENTAL, np.sin),
    _un("erf", 0x90, TRANSCENDENTAL, N.erf),
    _un("gelu_tanh", 0x91, TRANSCENDENTAL, N.gelu_tanh, mn="vpu.gelu.tanh"),
    _un("softplus", 0x92, TRANSCENDENTAL, N.softplus),
    _un("log1p", 0x93, TRANSCENDENTAL, np.log1p),
    # clamp(x, lo, hi) = min(max(x, lo), hi): vpu.max and vpu.min with a bc.scalar bound
    OpKind(CLAMP, "clamp", "clamp", None, None, None, PLAIN, _ANY),
    # -- the other VPU families ------------------------------------------------------------------
    _other(CAST, "cast", "cast", "vpu.cvt", 0x80, "vcvt", FLOATS),
    _other(FILL, "fill", None, "vpu.fill", 0x81, "vfill", _ANY),
    _other(REDUCE, "sum", "sum", "vpu.rsum", 0x82, "v2d", FLOATS),
    _other(REDUCE, "max", "amax", "vpu.rmax", 0x83, "v2d", FLOATS),
    _other(REDUCE, "min", "amin", None, None, None, FLOATS),  # no instruction: -max(-x)
    _other(TRANSPOSE, "transpose", None, "vpu.transpose", 0x84, "v2d", _ANY),
    _other(SELECT, "select", None, "vpu.sel", 0x85, "vsel", _ANY),
    # -- the MPU (its instructions, mpu.ldw and mpu.mm, are in the ISA table) -------------------
    OpKind(MATMUL, "matmul", "matmul", None, None, None, PLAIN, ("bf16", "f32"), unit=MPU),
    # -- kernel debugging: `legato.device_print` / `legato.device_assert` (docs/isa.md,
    # *Debug instructions*): the emulator reads the value, takes no cycle, and reports it
    OpKind(
        DEBUG,
        "print",
        "device_print",
        "dbg.print",
        0x48,
        "dbg",
        PLAIN,
        (),  # computes nothing: reads a value of any type (`arch.debug.NP_DTYPES`)
        unit=DBG,
        doc="report value rs1 (a scalar, or the address of rs2 elements) with debug entry ID",
    ),
    OpKind(
        DEBUG,
        "assert",
        "device_assert",
        "dbg.assert",
        0x49,
        "dbg",
        PLAIN,
        (),  # computes nothing: reads a value of any type (`arch.debug.NP_DTYPES`)
        unit=DBG,
        doc="fault unless every element of rs1 (as dbg.print) is nonzero; debug entry ID",
    ),
)
"""Every row, in ISA opcode-table order within each family."""


CAST_INT_RESULTS = ("i32", "i64", "i1")
"""The integer types `cast` (`vpu.cvt`) converts a float to, truncating toward zero as torch's
`.to(torch.int64)` (saturating; NaN gives 0): how a kernel computes an int64 index (argmax) in
f32 and returns it. i64 is a `vpu.cvt` result type only: the VPU computes nothing on it. i1
(one byte, 0 or 1) is true where the float is nonzero (NaN too), as torch's `.to(torch.bool)`:
how a kernel returns a comparison's mask as a bool tensor."""


def family(fam: str) -> tuple[OpKind, ...]:
    return tuple(o for o in OPS if o.family == fam)


BY_KIND: dict[tuple[str, str], OpKind] = {(o.family, o.kind): o for o in OPS}
"""(family, core kind) -> row."""
BY_MNEMONIC: dict[str, OpKind] = {o.mnemonic: o for o in OPS if o.mnemonic}
"""ISA mnemonic -> row."""
ELEMENTWISE: dict[str, OpKind] = {o.name: o for o in OPS if o.family in (UNARY, BINARY) and o.name}
"""legato name -> row, the elementwise ops a kernel can name (`legato.tensor.<name>`)."""
assert len(BY_KIND) == len(OPS) and len(BY_MNEMONIC) == sum(1 for o in OPS if o.mnemonic)


def unary_kinds() -> tuple[str, ...]:
    """The `core.vpu_unary` kinds: the unary rows, then `cast` (`vpu.cvt`)."""
    return tuple(o.kind for o in family(UNARY)) + ("cast",)


def binary_kinds() -> tuple[str, ...]:
    return tuple(o.kind for o in family(BINARY))


def reduce_kinds() -> tuple[str, ...]:
    return tuple(o.kind for o in family(REDUCE))


def legato_unary() -> tuple[OpKind, ...]:
    """The unary rows with a legato op, in table order."""
    return tuple(o for o in family(UNARY) if o.name)


def legato_binary() -> tuple[OpKind, ...]:
    return tuple(o for o in family(BINARY) if o.name)


def is_transcendental(mnemonic: str) -> bool:
    """Whether ISA instruction `mnemonic` runs at the VPU's transcendental rate."""
    row = BY_MNEMONIC.get(mnemonic)
    return row is not None and row.cost == TRANSCENDENTAL


def accepts(row: OpKind, dtype: str) -> bool:
    """Whether the VPU computes `row` on element type `dtype` (a builtin type name)."""
    return dtype in row.dtypes


def dtypes_text(row: OpKind) -> str:
    """The element types of `row` for a message: 'bf16, f32, f16 and i32'."""
    d = list(row.dtypes)
    return d[0] if len(d) == 1 else ", ".join(d[:-1]) + " and " + d[-1]
