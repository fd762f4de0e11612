"""The Instruction Table: how the host hands a kernel its arguments (docs/architecture.md).

The table is a sequence of little-endian 64-bit words::

    word 0                  the table's size in bytes
    then per argument, in signature order:
      tensor                address, then one word per dynamic dim (runtime size, in dim order)
      scalar                one word: integers two's complement sign-extended to 64 bits, i1 0/1,
                            floats their bit pattern zero-extended
      tuple                 its elements flattened in order (nested tuples too)

Every entry is one word, so everything is 8-byte aligned (docs/binary.md has the details).  The layout depends only on the
signature, so the table's (maximum) size is known at compile time; the compiler reads an
argument's address with `ld rd, layout.address_offset(i)(r1)` and a dynamic dim with
`ld rd, layout.dim_offset(i, dim)(r1)` (byte offsets from the table's base).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from legato.binding import check_type
from legato.errors import ArgumentError
from legato.types import DType, TensorSpec, dtype_from_name, parse_dim

WORD = 8
ACCESS = ("read", "write", "readwrite")
ARG_NAMES_ATTR = "arg_names"
"""The kernel attribute (legato, core and backend level) holding the arguments' names: they
travel to the binary's metadata, so that runtime errors name the argument."""

Footprints = dict[int | None, dict[str, int]]
"""Bytes used per core (None: every core, an `all_cores` program's buffers) and memory space."""


def program_footprint(use: Footprints, core: int | None) -> dict[str, int]:
    """The bytes per space a program reserves on its core, from a kernel's `use`: a core
    program's own buffers and the SPMD ones (`core` its index), or (`core` None, an
    `all_cores` program) the most any core uses."""
    mem: dict[str, int] = dict(use.get(core, {})) if core is not None else {}
    for c, spaces in use.items():
        if core is None or c is None:
            for space, n in spaces.items():
                mem[space] = max(mem.get(space, 0), n)
    return mem


class ABIError(ArgumentError):
    """An argument that does not match the binary's argument layout (`legato.binding` checks
    tensors)."""


@dataclass(frozen=True)
class ScalarSpec:
    dtype: DType

    def __str__(self) -> str:
        return f"scalar<{self.dtype.name}>"


@dataclass(frozen=True)
class TupleSpec:
    elements: tuple  # of TensorSpec | ScalarSpec | TupleSpec

    def __str__(self) -> str:
        return "tuple<" + ", ".join(map(str, self.elements)) + ">"


ArgType = TensorSpec | ScalarSpec | TupleSpec


@dataclass(frozen=True)
class Arg:
    """One kernel argument: its name, type and how the kernel accesses it."""

    name: str
    type: ArgType
    access: str = "read"

    def __post_init__(self):
        if self.access not in ACCESS:
            raise ValueError(f"argument {self.name!r}: access {self.access!r} not in {ACCESS}")


@dataclass(frozen=True)
class Slot:
    """One leaf of the table: the word index of a tensor address, dynamic dim or scalar."""

    kind: str  # "address", "dim", "scalar"
    arg: int
    path: tuple[int, ...]  # element path inside tuples; () for a plain argument
    dim: int | None = None


def _type_words(t: ArgType) -> int:
    if isinstance(t, TensorSpec):
        return 1 + len(t.dynamic_dims)
    if isinstance(t, ScalarSpec):
        return 1
    return sum(_type_words(e) for e in t.elements)


class ArgLayout:
    """The Instruction Table layout of a signature.

    `ArgLayout([TensorSpec, ...])` or `ArgLayout([Arg(name, type, access), ...])`; plain specs
    get names `arg0`, `arg1`, ... and access `readwrite` unless `names`/`access` are given.
    """

    def __init__(
        self,
        args: Sequence,
        names: Sequence[str] | None = None,
        access: Sequence[str] | None = None,
    ):
        norm: list[Arg] = []
        for i, a in enumerate(args):
            if isinstance(a, Arg):
                norm.append(a)
            elif isinstance(a, (TensorSpec, ScalarSpec, TupleSpec)):
                name = names[i] if names else f"arg{i}"
                acc = (
                    access[i]
                    if access
                    else ("read" if not isinstance(a, TensorSpec) else "readwrite")
                )
                norm.append(Arg(name, a, acc))
            else:
                raise TypeError(
                    f"argument {i}: {a!r} is not a TensorSpec, ScalarSpec, TupleSpec or Arg"
                )
        self.args: tuple[Arg, ...] = tuple(norm)
        self.slots: list[Slot] = []
        self._address: dict[tuple[int, tuple[int, ...]], int] = {}
        self._dims: dict[tuple[int, tuple[int, ...], int], int] = {}
        self._scalar: dict[tuple[int, tuple[int, ...]], int] = {}
        word = 1
        for i, a in enumerate(self.args):
            word = self._lay(i, (), a.type, word)
        self.num_words = word

    def _lay(self, i: int, path: tuple[int, ...], t: ArgType, word: int) -> int:
        if isinstance(t, TensorSpec):
            self._address[i, path] = word
            self.slots.append(Slot("address", i, path))
            word += 1
            for d in t.dynamic_dims:
                self._dims[i, path, d] = word
                self.slots.append(Slot("dim", i, path, d))
                word += 1
            return word
        if isinstance(t, ScalarSpec):
            self._scalar[i, path] = word
            self.slots.append(Slot("scalar", i, path))
            return word + 1
        for j, e in enumerate(t.elements):
            word = self._lay(i, path + (j,), e, word)
        return word

    # ---- sizes and offsets -------------------------------------------------------------
    @property
    def size_bytes(self) -> int:
        """The table's size in bytes (word 0 holds it)."""
        return self.num_words * WORD

    @property
    def max_size_bytes(self) -> int:
        """The maximum table size for this signature (= size: every entry has a fixed width)."""
        return self.size_bytes

    def address_word(self, i: int, *path: int) -> int:
        """Word index of tensor argument `i`'s address (`path` selects inside tuples)."""
        try:
            return self._address[i, tuple(path)]
        except KeyError:
            raise ABIError(f"argument {i}{list(path) if path else ''} is not a tensor") from None

    def dim_word(self, i: int, dim: int, *path: int) -> int:
        """Word index of the runtime size of dynamic dim `dim` of tensor argument `i`."""
        try:
            return self._dims[i, tuple(path), dim]
        except KeyError:
            raise ABIError(
                f"argument {i}{list(path) if path else ''} dim {dim} is not a dynamic dim of a tensor"
            ) from None

    def scalar_word(self, i: int, *path: int) -> int:
        try:
            return self._scalar[i, tuple(path)]
        except KeyError:
            raise ABIError(f"argument {i}{list(path) if path else ''} is not a scalar") from None

    def address_offset(self, i: int, *path: int) -> int:
        """Byte offset from the table's base of tensor argument `i`'s address (for `ld`)."""
        return self.address_word(i, *path) * WORD

    def dim_offset(self, i: int, dim: int, *path: int) -> int:
        """Byte offset from the table's base of the runtime size of dynamic dim `dim`."""
        return self.dim_word(i, dim, *path) * WORD

    def scalar_offset(self, i: int, *path: int) -> int:
        return self.scalar_word(i, *path) * WORD

    # ---- checking and packing ----------------------------------------------------------
    def check_tensor(self, i: int, dtype: DType, shape: Sequence[int], path=()) -> None:
        """Raise ABIError saying what differs when a value of `dtype`/`shape` cannot be arg i."""
        spec = self._type_at(i, path)
        name = self._name(i, path)
        if not isinstance(spec, TensorSpec):
            raise ABIError(f"argument {name!r} is a {spec}, got a tensor")
        check_type(spec, dtype, shape, f"argument {name!r}", ABIError)

    def _type_at(self, i: int, path) -> ArgType:
        t = self.args[i].type
        for j in path:
            t = t.elements[j]
        return t

    def _name(self, i: int, path) -> str:
        return self.args[i].name + "".join(f"[{j}]" for j in path)

    def pack(self, values: Sequence, shapes: Sequence | None = None) -> bytes:
        """The table's bytes.

        `values[i]`: for a tensor argument its address (int), for a scalar its value, for a tuple a
        sequence of those.  `shapes[i]`: the tensor's runtime shape (a tuple matching the tuple
        structure for tuples; ignored for scalars).  Shapes are checked against the signature.
        """
        if len(values) != len(self.args):
            raise ABIError(f"kernel takes {len(self.args)} arguments, got {len(values)}")
        shapes = shapes if shapes is not None else [None] * len(values)
        words = [0] * self.num_words
        words[0] = self.size_bytes
        for i, a in enumerate(self.args):
            self._pack(words, i, (), a.type, values[i], shapes[i])
        return struct.pack(f"<{self.num_words}Q", *[w & 0xFFFFFFFFFFFFFFFF for w in words])

    def _pack(self, words, i, path, t, value, shape):
        name = self._name(i, path)
        if isinstance(t, TensorSpec):
            if shape is None:
                raise ABIError(f"argument {name!r}: no runtime shape given")
            self.check_tensor(i, t.dtype, shape, path)
            words[self._address[i, path]] = int(value)
            for d in t.dynamic_dims:
                words[self._dims[i, path, d]] = int(shape[d])
        elif isinstance(t, ScalarSpec):
            words[self._scalar[i, path]] = scalar_bits(t.dtype, value, name)
        else:
            if not isinstance(value, (tuple, list)) or len(value) != len(t.elements):
                raise ABIError(f"argument {name!r} is a tuple of {len(t.elements)} elements")
            shape = shape if shape is not None else [None] * len(t.elements)
            for j, e in enumerate(t.elements):
                self._pack(words, i, path + (j,), e, value[j], shape[j])

    # ---- serialization (the .legato.args section) ---------------------------------------
    def to_json(self) -> dict:
        return {
            "table_size": self.size_bytes,
            "max_table_size": self.max_size_bytes,
            "args": [
                {
                    "name": a.name,
                    "access": a.access,
                    "type": _type_to_json(a.type),
                    "offsets": self._offsets_json(i),
                }
                for i, a in enumerate(self.args)
            ],
        }

    def _offsets_json(self, i: int) -> list:
        return [
            {"kind": s.kind, "path": list(s.path), "dim": s.dim, "word": self._slot_word(s)}
            for s in self.slots
            if s.arg == i
        ]

    def _slot_word(self, s: Slot) -> int:
        if s.kind == "address":
            return self._address[s.arg, s.path]
        if s.kind == "dim":
            return self._dims[s.arg, s.path, s.dim]
        return self._scalar[s.arg, s.path]

    @staticmethod
    def from_json(data: dict) -> ArgLayout:
        """The layout of a `.legato.args` section.  The recorded table size and word offsets
        must be the ones the convention computes from the types (an inconsistent record is an
        `ABIError`), so the runtime packs exactly what the code was compiled to read."""
        layout = ArgLayout(
            [Arg(a["name"], _type_from_json(a["type"]), a["access"]) for a in data["args"]]
        )
        if layout.size_bytes != data.get("table_size", layout.size_bytes):
            raise ABIError(
                f"recorded table size {data['table_size']} differs from the layout's "
                f"{layout.size_bytes}"
            )
        for i, a in enumerate(data["args"]):
            if "offsets" in a and a["offsets"] != layout._offsets_json(i):
                raise ABIError(
                    f"recorded offsets of argument {layout.args[i].name!r} "
                    f"{a['offsets']} differ from the layout's "
                    f"{layout._offsets_json(i)}"
                )
        return layout

    def __eq__(self, other) -> bool:
        return isinstance(other, ArgLayout) and self.args == other.args

    def __repr__(self) -> str:
        return "ArgLayout(" + ", ".join(f"{a.name}: {a.type} {a.access}" for a in self.args) + ")"


def scalar_bits(dtype: DType, value, name: str = "scalar") -> int:
    """The 64-bit table word of a scalar of `dtype` (ABIError naming `name` if `value` is not
    one): integers two's complement sign-extended to 64 bits (range-checked), `i1` 0 or 1,
    floats their IEEE/bf16 bit pattern zero-extended.  Accepts Python and numpy scalars and
    0-d arrays; a float with a fractional part is not an integer scalar."""
    if isinstance(value, np.ndarray):
        if value.ndim:
            raise ABIError(
                f"argument {name!r} is a scalar {dtype.name}, got an array of shape {value.shape}"
            )
        value = value[()]
    if isinstance(value, (np.bool_, bool)):
        value = bool(value)
    elif isinstance(value, (np.integer, np.floating)):
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        raise ABIError(f"argument {name!r} is a scalar {dtype.name}, got {type(value).__name__}")
    if dtype.is_float:
        if isinstance(value, bool):
            raise ABIError(f"argument {name!r} is a scalar {dtype.name}, got a bool")
        raw = np.asarray(value, dtype=dtype.numpy).tobytes()
        return int.from_bytes(raw, "little")
    if isinstance(value, float):
        if not value.is_integer():
            raise ABIError(f"argument {name!r} is a scalar {dtype.name}, got the float {value!r}")
        value = int(value)
    if dtype.name == "i1":
        if value not in (0, 1):
            raise ABIError(f"argument {name!r} is a scalar i1 (a bool), got {value!r}")
        return int(value)
    v = int(value)
    info = np.iinfo(dtype.numpy)
    if not info.min <= v <= info.max:
        raise ABIError(f"argument {name!r}: scalar {v} does not fit {dtype.name}")
    return v & 0xFFFFFFFFFFFFFFFF


def _type_to_json(t: ArgType) -> dict:
    if isinstance(t, TensorSpec):
        return {
            "kind": "tensor",
            "dtype": t.dtype.name,
            "memory": t.memory,
            "shape": [d.size if not d.is_dynamic else [-1, d.bound] for d in t.dims],
        }
    if isinstance(t, ScalarSpec):
        return {"kind": "scalar", "dtype": t.dtype.name}
    return {"kind": "tuple", "elements": [_type_to_json(e) for e in t.elements]}


def _type_from_json(d: dict) -> ArgType:
    if d["kind"] == "tensor":
        return TensorSpec(
            dtype_from_name(d["dtype"]),
            tuple(parse_dim(tuple(s) if isinstance(s, list) else s) for s in d["shape"]),
            d["memory"],
        )
    if d["kind"] == "scalar":
        return ScalarSpec(dtype_from_name(d["dtype"]))
    return TupleSpec(tuple(_type_from_json(e) for e in d["elements"]))
