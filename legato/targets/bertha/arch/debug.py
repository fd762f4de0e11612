"""Kernel debugging: what `legato.device_print` and `legato.device_assert` report, at every level.

A *site* is one `device_print(message, *values)` or `device_assert(cond, message)` of a kernel,
numbered per kernel; each of its values is one *entry* (one `dbg.print` / `dbg.assert`
instruction in a binary, its `imm32`, described in the binary's `.legato.debug` section,
docs/isa.md *Debug instructions*). Every executor (the emulator, the legato, core and backend
interpreters) builds the same `PrintRecord` from the values it reads: the module (`top`,
`core3`), its core index, the cycle (the emulator's issue cycle; None in the interpreters,
which have no time), the site's source location and message, and the values (an int for an
index, a numpy array for a tensor). The record's `text()` is the line printed; `key()` is what
two levels must agree on. A failed assert raises `DeviceAssertError` naming the source line, the
module and the failing elements. Pure Python over numpy, no IR.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from legato.errors import DeviceAssertError

NP_DTYPES = {
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "i1": np.dtype(np.bool_),
}
"""The element types a debug entry reads (a tensor of any type the compiler keeps in memory)."""

MAX_SHOWN = 8
"""A failed assert names at most this many failing element indices."""


@dataclass(frozen=True)
class Entry:
    """One value of one site: `op` ("print" or "assert"), the site's number, message and source
    location (file, line, col), this value's position `arg` of `nargs`, and what the value is:
    `kind` "index" (the register is the value), "tensor" (the register is its address; `dtype`,
    `shape` with -1 for the one dynamic dim, whose size the element count gives) or "none" (a
    print of a message alone)."""

    op: str
    site: int
    message: str
    loc: tuple[str, int, int] | None
    arg: int = 0
    nargs: int = 1
    kind: str = "index"
    dtype: str | None = None
    shape: tuple[int, ...] = ()

    def to_json(self) -> dict:
        return {
            "op": self.op,
            "site": self.site,
            "message": self.message,
            "loc": list(self.loc) if self.loc is not None else None,
            "arg": self.arg,
            "nargs": self.nargs,
            "kind": self.kind,
            "dtype": self.dtype,
            "shape": list(self.shape),
        }

    @classmethod
    def from_json(cls, d: dict) -> Entry:
        loc = d.get("loc")
        return cls(
            d["op"],
            int(d["site"]),
            str(d["message"]),
            (str(loc[0]), int(loc[1]), int(loc[2])) if loc else None,
            int(d["arg"]),
            int(d["nargs"]),
            d["kind"],
            d.get("dtype"),
            tuple(int(x) for x in d.get("shape", ())),
        )

    def validate(self) -> str | None:
        """Why this entry is malformed, or None."""
        if self.op not in ("print", "assert"):
            return f"op {self.op!r} is neither print nor assert"
        if self.kind not in ("index", "tensor", "none"):
            return f"value kind {self.kind!r}"
        if not 0 <= self.arg < max(self.nargs, 1):
            return f"value {self.arg} of {self.nargs}"
        if self.kind == "tensor":
            if self.dtype not in NP_DTYPES:
                return f"element type {self.dtype!r}"
            if sum(d == -1 for d in self.shape) > 1 or any(d < -1 for d in self.shape):
                return f"shape {list(self.shape)} (at most one dynamic dim, -1)"
        if self.op == "assert" and self.kind == "none":
            return "an assert without a condition"
        return None

    def shape_of(self, count: int) -> tuple[int, ...]:
        """The runtime shape of a tensor value of `count` elements."""
        static = int(np.prod([d for d in self.shape if d != -1], dtype=np.int64))
        if -1 not in self.shape:
            return self.shape
        dyn = count // static if static else 0
        return tuple(dyn if d == -1 else d for d in self.shape)

    def nbytes(self, count: int) -> int:
        return count * NP_DTYPES[self.dtype].itemsize if self.kind == "tensor" else 0


def where(loc: tuple[str, int, int] | None) -> str:
    return f"{loc[0]}:{loc[1]}" if loc is not None else "<no source location>"


@dataclass
class PrintRecord:
    """One executed `device_print`: module, core, cycle (None without timing), site, values."""

    module: str
    core: int | None
    cycle: int | None
    site: int
    message: str
    loc: tuple[str, int, int] | None
    values: list = field(default_factory=list)

    def text(self) -> str:
        """`[core0 (core 0) cycle 812] k.py:14: x = [[1. 2.] ...] 3`."""
        who = self.module if self.core is None else f"{self.module} (core {self.core})"
        if self.cycle is not None:
            who += f" cycle {self.cycle}"
        parts = [f"[{who}] {where(self.loc)}:"]
        if self.message:
            parts.append(self.message)
        parts += [format_value(v) for v in self.values]
        return " ".join(parts)

    def key(self) -> tuple:
        """What every level prints alike: all but the cycle and the site's number (the
        binary's), values as their bits."""
        vals = tuple(
            (str(v.dtype), v.shape, v.tobytes()) if isinstance(v, np.ndarray) else int(v)
            for v in self.values
        )
        return (self.module, self.core, self.message, self.loc, vals)


def format_value(v) -> str:
    if not isinstance(v, np.ndarray):
        return str(int(v))
    shown = v.astype(np.float32) if v.dtype == NP_DTYPES["bf16"] else v
    return np.array2string(shown, threshold=64, max_line_width=1 << 30).replace("\n", "")


def read_tensor(entry: Entry, raw: np.ndarray, count: int) -> np.ndarray:
    """The tensor value of `entry` from `raw`, its `count` elements as read from memory."""
    return raw.view(NP_DTYPES[entry.dtype])[:count].reshape(entry.shape_of(count)).copy()


def emit(record: PrintRecord, out=None) -> None:
    """Print `record` (to `out`, default the current sys.stdout) as it happens."""
    print(record.text(), file=out or sys.stdout, flush=True)


def check_assert(entry: Entry, value, module: str, core: int | None, cycle: int | None) -> None:
    """Raise `DeviceAssertError` unless every element of `value` (an int or an array) is
    nonzero (NaN counts as true, as in `vpu.sel`)."""
    arr = np.asarray(value)
    if arr.dtype == NP_DTYPES["bf16"]:
        arr = arr.astype(np.float32)
    false = arr == 0
    if not false.any():
        return
    who = module if core is None else f"{module} (core {core})"
    when = f" at cycle {cycle}" if cycle is not None else ""
    msg = f"device_assert failed at {where(entry.loc)}"
    msg += f": {entry.message}" if entry.message else ""
    if arr.ndim == 0:
        detail = f"the condition is {format_value(value)}"
    else:
        idx = [tuple(int(i) for i in ix) for ix in np.argwhere(false)[:MAX_SHOWN]]
        more = ", ..." if int(false.sum()) > MAX_SHOWN else ""
        detail = (
            f"{int(false.sum())} of {arr.size} elements of the condition are false, at "
            + ", ".join(str(i) for i in idx)
            + more
            + f"; the condition: {format_value(value)}"
        )
    err = DeviceAssertError(f"{msg} ({who}{when}): {detail}")
    err.loc, err.module, err.core, err.cycle, err.value = entry.loc, module, core, cycle, value
    raise err


class Collector:
    """A site's values as an executor reads them, one entry at a time (a module runs its
    entries in order): `add` returns the finished record at the site's last value."""

    def __init__(self):
        self._partial: dict[tuple[str, int], list] = {}

    def add(
        self, entry: Entry, value, module: str, core: int | None, cycle: int | None
    ) -> PrintRecord | None:
        key = (module, entry.site)
        vals = self._partial.setdefault(key, [])
        if entry.kind != "none":
            vals.append(value)
        if entry.arg + 1 < entry.nargs:
            return None
        del self._partial[key]
        return PrintRecord(module, core, cycle, entry.site, entry.message, entry.loc, vals)
