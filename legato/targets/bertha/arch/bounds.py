"""Per-operand extents: what one address operand of an instruction may touch (issue 17, item 2).

Memory faults only when an access leaves every allocation, so an out-of-bounds slice of one
argument that lands in the next (arguments are packed in shared DRAM) would silently read or
write it. The compiler knows which buffer each address was derived from; for every instruction
whose address or length depends on a runtime value it records, per address field (`a`..`d` of
the instruction word), the buffer's extent (the binary's `.legato.bounds`, docs/binary.md):

* `Extent(arg=i)`: argument `i`'s allocation in shared DRAM (its runtime bytes; the runtime
  knows where it placed it);
* `Extent(space=s, offset=o, size=n)`: the planned buffer at byte `o` of core memory `s`, `n`
  bytes (on whichever core the address names: the core index is checked elsewhere).

Before an instruction with extents issues, `check` verifies that every bounded operand's bytes
(`access_spans`: the same footprint the emulator reads and writes) lie in its extent, else it
raises `OutOfBounds` (a `Trap`: the emulator and the interpreters report it at the instruction,
with the kernel's source line). Statically addressed accesses are proven in bounds by the
compiler's verifiers and carry no extent, so checking costs nothing where nothing is runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from legato.targets.bertha.arch.address_map import (
    CORE_SPACE_OFFSET,
    CORE_WINDOW_BASE,
    CORE_WINDOW_SIZE,
)
from legato.targets.bertha.arch.dma import dma2d_geometry
from legato.targets.bertha.arch.errors import Trap
from legato.targets.bertha.arch.pim import region_span as pim_region_span
from legato.targets.bertha.isa import (
    BC_COL,
    BC_ROW,
    BC_SCALAR,
    COND_DTYPE_NAMES,
    COND_DTYPE_SIZES,
    CVT_DTYPE_NAMES,
    CVT_DTYPE_SIZES,
    DTYPE_NAMES,
    DTYPE_SIZES,
    MM_F32,
    dma2d_unpack,
)

FIELDS = ("a", "b", "c", "d")


@dataclass(frozen=True)
class Extent:
    """An argument's allocation (`arg`), or `size` bytes at `offset` of core memory `space`."""

    arg: int | None = None
    space: str | None = None
    offset: int = 0
    size: int = 0

    def __post_init__(self):
        if (self.arg is None) == (self.space is None):
            raise ValueError("an extent is an argument or a core buffer")
        if self.arg is not None and self.arg < 0:
            raise ValueError(f"argument index {self.arg} is negative")
        if self.space is not None:
            if self.space not in CORE_SPACE_OFFSET:
                raise ValueError(f"{self.space!r} is not a core memory space")
            if self.offset < 0 or self.size < 0:
                raise ValueError(f"buffer at {self.offset} of {self.size} bytes")

    def text(self) -> str:
        """`arg 1` or `sram 128+64` (offset+size): the IR attribute's spelling."""
        return (
            f"arg {self.arg}" if self.arg is not None else f"{self.space} {self.offset}+{self.size}"
        )

    @classmethod
    def parse(cls, text: str) -> Extent:
        """The inverse of `text`; ValueError on anything else."""
        head, _, rest = text.partition(" ")
        if head == "arg":
            if not rest.isdigit():
                raise ValueError(f"bad extent {text!r}: expected `arg N`")
            return cls(arg=int(rest))
        off, plus, size = rest.partition("+")
        if not (plus and off.isdigit() and size.isdigit()):
            raise ValueError(f"bad extent {text!r}: expected `arg N` or `SPACE OFFSET+SIZE`")
        return cls(space=head, offset=int(off), size=int(size))

    def to_json(self):
        return {"arg": self.arg} if self.arg is not None else [self.space, self.offset, self.size]

    @classmethod
    def from_json(cls, obj) -> Extent:
        if isinstance(obj, dict) and set(obj) == {"arg"} and _is_int(obj["arg"]):
            return cls(arg=obj["arg"])
        if (
            isinstance(obj, list)
            and len(obj) == 3
            and isinstance(obj[0], str)
            and _is_int(obj[1])
            and _is_int(obj[2])
        ):
            return cls(space=obj[0], offset=obj[1], size=obj[2])
        raise ValueError(f"bad extent {obj!r}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# The address fields of each instruction format, with whether the access writes.
ADDRESS_FIELDS: dict[str, dict[str, bool]] = {
    "ld": {"b": False},
    "st": {"b": True},
    "dma": {"a": True, "b": False},
    "dma2d": {"a": True, "b": False},
    "mpu_ldw": {"a": False},
    "mpu_mm": {"a": True, "b": False},
    "vbin": {"a": True, "b": False, "c": False},
    "vun": {"a": True, "b": False},
    "vcvt": {"a": True, "b": False},
    "vfill": {"a": True},
    "vsel": {"a": True, "b": False, "c": False},
    "v2d": {"a": True, "b": False},
    "pim": {"a": True, "b": False, "c": False},  # pim.gemv dst (f32 y), x, the weight region
}


def access_spans(
    fmt: str,
    mnemonic: str,
    imm: int,
    value: Callable[[str], int],
    weight_shape=None,
    model=None,
) -> dict[str, tuple[int, int]]:
    """{field: (address, bytes)} of every address operand of an instruction of format `fmt`
    (docs/isa.md), `value(field)` giving a field's register value, `weight_shape` the
    loaded MPU tile (K, N) for `mpu.mm` and `model` the chip (its memory channels space the
    blocks of a `pim.gemv` weight region; without it the region is left out). Sizes are the
    bytes the instruction touches (a PIM region: its first block to one past its last, as the
    emulator's scoreboard sees it)."""
    v = value
    if fmt == "pim":
        k, n = dma2d_unpack(v("d"))  # K << 32 | N
        spans = {"a": (v("a"), n * 4), "b": (v("b"), k * 2)}
        if model is not None:
            spans["c"] = (v("c"), pim_region_span(model, k, n))
        return spans
    if fmt in ("ld", "st"):
        return {"b": (v("b") + imm, 8)}
    if fmt == "dma":
        n = v("c")
        return {"a": (v("a"), n), "b": (v("b"), n)}
    if fmt == "dma2d":
        _r, _row, _ds, _ss, sspan, dspan = dma2d_geometry(v("c"), v("d"))
        return {"a": (v("a"), dspan), "b": (v("b"), sspan)}
    if fmt == "mpu_ldw":
        return {"a": (v("a"), v("b") * v("c") * 2)}
    if fmt == "mpu_mm":
        if weight_shape is None:
            return {}  # faults on its own: no tile loaded
        k, n = weight_shape
        rows = v("c")
        return {"a": (v("a"), rows * n * (4 if imm & MM_F32 else 2)), "b": (v("b"), rows * k * 2)}
    if fmt == "vbin":
        n, sz = v("d"), DTYPE_SIZES[DTYPE_NAMES[imm & 0xF]]
        mode, period = (imm >> 4) & 3, imm >> 8
        n2 = {
            0: n,
            BC_SCALAR: 1 if n else 0,
            BC_ROW: -(-n // period) if period else 0,
            BC_COL: min(n, period),
        }[mode]
        return {"a": (v("a"), n * sz), "b": (v("b"), n * sz), "c": (v("c"), n2 * sz)}
    if fmt == "vun":
        n, sz = v("c"), DTYPE_SIZES[DTYPE_NAMES[imm]]
        return {"a": (v("a"), n * sz), "b": (v("b"), n * sz)}
    if fmt == "vcvt":
        n = v("c")
        dsz = CVT_DTYPE_SIZES[CVT_DTYPE_NAMES[imm & 0xF]]
        return {"a": (v("a"), n * dsz), "b": (v("b"), n * DTYPE_SIZES[DTYPE_NAMES[imm >> 4]])}
    if fmt == "vfill":
        return {"a": (v("a"), v("b") * DTYPE_SIZES[DTYPE_NAMES[imm]])}
    if fmt == "vsel":
        n = v("d")
        sz = DTYPE_SIZES[DTYPE_NAMES[imm & 0xF]]
        csz = COND_DTYPE_SIZES[COND_DTYPE_NAMES[imm >> 4]]
        return {"a": (v("a"), n * sz), "b": (v("b"), n * csz), "c": (v("c"), n * sz)}
    if fmt == "v2d":
        rows, cols = v("c"), v("d")
        sz = DTYPE_SIZES[DTYPE_NAMES[imm]]
        out = rows * cols if mnemonic == "vpu.transpose" else rows
        return {"a": (v("a"), out * sz), "b": (v("b"), rows * cols * sz)}
    return {}


FIT_CHECK_CAUSE = (
    "out of bounds: the copy's source does not fit its destination at run time (a copy "
    "between two runtime sizes: a longer source, or a strided copy whose runtime dims differ "
    "past its rows; the compiler checks it with `div r, r, r`)"
)
"""What a fault of the compiler's fit check says (`convert-core-to-backend`, `_fits`: a copy
between runtime sizes computes its length times `ok / ok`, ok = 0 when the source does not fit)
instead of the division's own `div by zero`."""


def fit_check_cause(mnemonic: str, same_operands: bool) -> str | None:
    """`FIT_CHECK_CAUSE` when a faulting `mnemonic rd, rs1, rs2` is the fit check: a `div` of
    a register by itself (`same_operands`: rs1 and rs2 are one register, or one SSA value)."""
    return FIT_CHECK_CAUSE if mnemonic == "div" and same_operands else None


class OutOfBounds(Trap):
    """An access outside the extent of the buffer its address was derived from: `what` names
    the buffer (`argument 'b' ...`), `size` its bytes, `range` the access's bytes as offsets
    into it ([start, end); None when the address is not in that kind of memory at all)."""

    def __init__(self, what: str, write: bool, size: int, rng, addr: int, nbytes: int):
        verb = "writes" if write else "reads"
        if rng is None:
            where = f"{nbytes} bytes at {addr:#x}, outside core memory, for"
        else:
            where = f"bytes [{rng[0]}, {rng[1]}) of"
        super().__init__(
            f"out of bounds: {verb} {where} {what}, which has {size} bytes (an index or slice "
            "past its end?)",
            addr,
        )
        self.what, self.write, self.size, self.range = what, write, size, rng


@dataclass(frozen=True)
class Resolved:
    """One bounded operand of one instruction: `field`, its extent as [`lo`, `hi`) — absolute
    addresses (an argument) or offsets inside a core window (`window`: a core buffer) — and
    `what` names it in messages."""

    field: str
    lo: int
    hi: int
    window: bool
    what: str


def resolve(
    table: dict[int, dict[str, Extent]], args: dict[int, tuple[int, int, str]]
) -> dict[int, tuple[Resolved, ...]]:
    """Per pc, the bounded operands of one program's extents `table` with the arguments'
    allocations `args` (index -> (address, bytes, name)). An extent naming an argument the
    run did not place (a scalar) bounds nothing: the access then faults as the memory does."""
    out: dict[int, tuple[Resolved, ...]] = {}
    for pc, fields in table.items():
        row = []
        for f, e in sorted(fields.items()):
            if e.arg is not None:
                if e.arg not in args:
                    continue
                addr, n, name = args[e.arg]
                row.append(Resolved(f, addr, addr + n, False, name))
            else:
                lo = CORE_SPACE_OFFSET[e.space] + e.offset
                row.append(
                    Resolved(
                        f,
                        lo,
                        lo + e.size,
                        True,
                        f"the {e.space} buffer at offset {e.offset} ({e.size} bytes planned)",
                    )
                )
        if row:
            out[pc] = tuple(row)
    return out


def check(row: tuple[Resolved, ...], spans: dict[str, tuple[int, int]], writes) -> None:
    """`OutOfBounds` unless every operand of `row` accesses bytes inside its extent; `spans`
    from `access_spans`, `writes` the format's `ADDRESS_FIELDS` entry."""
    for r in row:
        span = spans.get(r.field)
        if span is None or span[1] <= 0:
            continue  # an empty access touches nothing
        addr, n = span
        at = addr
        if r.window:
            if addr < CORE_WINDOW_BASE:
                at = -1  # not in any core window: outside the buffer by definition
            else:
                at = (addr - CORE_WINDOW_BASE) % CORE_WINDOW_SIZE
        if not (r.lo <= at and at + n <= r.hi):
            rng = None if at < 0 else (at - r.lo, at - r.lo + n)
            raise OutOfBounds(r.what, writes.get(r.field, False), r.hi - r.lo, rng, addr, n)
