"""Bertha binaries: ELF64 little-endian, `e_machine = 0xBE27` (docs/binary.md).

`write_elf(...)` builds the file by hand with `struct`; `read_elf(data)` parses it with pyelftools,
validates it and returns a `Binary`.  Every problem is a `BinaryError` saying what differs.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import struct
from dataclasses import dataclass, field

from legato.errors import LegatoRuntimeError
from legato.targets.bertha import isa
from legato.targets.bertha.abi import ArgLayout
from legato.targets.bertha.arch.bounds import ADDRESS_FIELDS, Extent
from legato.targets.bertha.arch.debug import Entry
from legato.targets.bertha.asm import AsmModule, parse_context
from legato.types import TensorSpec
from legato.version import __version__

EM_BERTHA = 0xBE27
ET_EXEC = 2
FORMAT_VERSION = 1
ELF_MAGIC = b"\x7fELF"

SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 0, 1, 2, 3
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4
STB_GLOBAL, STT_FUNC = 1, 2

METADATA_SECTIONS = (".legato.target", ".legato.compiler", ".legato.programs", ".legato.args")
CHECKSUM_SECTION = ".legato.checksum"
SIGNATURE_SECTION = ".legato.signature"
LINES_SECTION = ".legato.lines"
BOUNDS_SECTION = ".legato.bounds"
DEBUG_SECTION = ".legato.debug"
MIN_KEY_BYTES = 16


class BinaryError(LegatoRuntimeError):
    """A binary that cannot be run: malformed, tampered with, or for something else."""


class ChecksumError(BinaryError):
    pass


class TargetMismatchError(BinaryError):
    pass


class SignatureError(BinaryError):
    """A binary required to be signed with a key is unsigned, or signed with another key, or
    modified since it was signed."""


@dataclass
class Program:
    name: str
    context: str  # "top", "core(i)" or "all_cores"
    words: list[int]
    memory: dict[str, int] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return parse_context(self.context)[0]

    @property
    def core(self) -> int | None:
        return parse_context(self.context)[1]

    @property
    def instructions(self) -> list[isa.Instruction]:
        return [isa.decode(w) for w in self.words]


@dataclass
class Binary:
    kernel: str | None
    programs: list[Program]
    target: dict
    compiler: dict
    programs_meta: dict
    args_meta: dict
    checksum: str = ""
    signature: str | None = None  # the `.legato.signature` HMAC, hex, when signed
    # `.legato.lines`: per program, per pc, the kernel source (file, line, col) or None
    lines: dict[str, list[tuple[str, int, int] | None]] = field(default_factory=dict)
    # `.legato.bounds`: per program, per pc, per address field, the extent it may touch
    bounds: dict[str, dict[int, dict[str, Extent]]] = field(default_factory=dict)
    # `.legato.debug`: the debug entries `dbg.print` / `dbg.assert` name by their imm32
    debug: list[Entry] = field(default_factory=list)

    def source_of(self, program: str, pc: int) -> tuple[str, int, int] | None:
        """The kernel source line of instruction `pc` of `program`, when the binary has one."""
        table = self.lines.get(program)
        return table[pc] if table is not None and 0 <= pc < len(table) else None

    @property
    def layout(self) -> ArgLayout:
        return ArgLayout.from_json(self.args_meta)

    def program(self, name: str) -> Program:
        for p in self.programs:
            if p.name == name:
                return p
        raise KeyError(name)


def target_json(model) -> dict:
    out = {
        "chip": model.name,
        "generation": model.generation,
        "fingerprint": model.fingerprint(),
        "num_cores": model.num_cores,
        "params": model.params(),
    }
    if model.use_pim:
        # a binary for a chip with PIM units (docs/pim.md) may run pim.gemv: only such a chip
        # runs it (`check_target`); a binary for a chip without PIM is unchanged
        out["pim"] = {"units": model.num_memory_channels}
    return out


def _context_json(ctx: str) -> dict:
    kind, index = parse_context(ctx)
    d = {"context": kind}
    if index is not None:
        d["core"] = index
    return d


def section_digest(sections: list[tuple[str, bytes]]) -> str:
    """SHA-256 over (name, NUL, 8-byte length, contents) of each section, in order."""
    h = hashlib.sha256()
    for name, data in sections:
        h.update(name.encode() + b"\0")
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
    return h.hexdigest()


def _json_bytes(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def write_elf(
    module: AsmModule,
    model,
    layout: ArgLayout,
    *,
    compiler: dict | None = None,
    kernel: str | None = None,
    lines: dict[str, list[tuple[str, int, int] | None]] | None = None,
    bounds: dict[str, dict[int, dict[str, Extent]]] | None = None,
    debug: list[Entry] | None = None,
) -> bytes:
    """Encode an assembled module into a Bertha ELF binary for `model`.

    `compiler`: extra entries for `.legato.compiler` (e.g. `{"pipeline": "..."}`). `lines`: the
    line table, per program one (file, line, col) or None per instruction; written as
    `.legato.lines` when any instruction has one. `bounds`: per program, {pc: {field: Extent}}
    for the instructions whose accesses the runtime checks (`arch.bounds`), written as
    `.legato.bounds` when there is any. `debug`: the entries of the kernel's `dbg.print` /
    `dbg.assert` instructions (`arch.debug.Entry`, indexed by their imm32), written as
    `.legato.debug` when there is any (a kernel without them has no such section)."""
    kernel = kernel or module.kernel
    progs = module.programs
    if not progs:
        raise BinaryError("a binary needs at least one program")
    comp = {
        "version": __version__,
        "format_version": FORMAT_VERSION,
        "isa_version": isa.ISA_VERSION,
        "pipeline": None,
    }
    comp.update(compiler or {})
    comp["format_version"] = FORMAT_VERSION
    programs_meta = {
        "kernel": kernel,
        "programs": [
            {
                "name": p.name,
                **_context_json(p.context),
                "section": f".text.{p.name}",
                "instructions": len(p.instructions),
                "memory": dict(p.memory),
            }
            for p in progs
        ],
    }
    sections: list[tuple[str, bytes]] = [(f".text.{p.name}", p.code) for p in progs]
    sections.append((".legato.target", _json_bytes(target_json(model))))
    sections.append((".legato.compiler", _json_bytes(comp)))
    sections.append((".legato.programs", _json_bytes(programs_meta)))
    sections.append((".legato.args", _json_bytes(layout.to_json())))
    if lines and any(any(x is not None for x in v) for v in lines.values()):
        sections.append((LINES_SECTION, _json_bytes(_lines_json(lines, progs))))
    if bounds and any(bounds.values()):
        names = {p.name for p in progs}
        if not set(bounds) <= names:
            raise BinaryError(f"bounds for unknown programs {sorted(set(bounds) - names)}")
        table = {
            name: [
                [pc, f, e.to_json()]
                for pc, fields in sorted(rows.items())
                for f, e in sorted(fields.items())
            ]
            for name, rows in bounds.items()
            if rows
        }
        sections.append((BOUNDS_SECTION, _json_bytes({"programs": table})))
    if debug:
        for i, e in enumerate(debug):
            bad = e.validate()
            if bad is not None:
                raise BinaryError(f"debug entry {i}: {bad}")
        sections.append((DEBUG_SECTION, _json_bytes({"entries": [e.to_json() for e in debug]})))
    # symbols: one STT_FUNC per program entry
    strtab = b"\0"
    syms = [b"\0" * 24]
    for i, p in enumerate(progs):
        name_off = len(strtab)
        strtab += p.name.encode() + b"\0"
        syms.append(
            struct.pack(
                "<IBBHQQ",
                name_off,
                (STB_GLOBAL << 4) | STT_FUNC,
                0,
                1 + i,
                0,
                len(p.instructions) * isa.WORD_BYTES,
            )
        )
    sections.append((".symtab", b"".join(syms)))
    sections.append((".strtab", strtab))
    shstrtab = _shstrtab([n for n, _ in sections] + [CHECKSUM_SECTION])
    digest = section_digest(sections + [(".shstrtab", shstrtab)])
    sections.append((CHECKSUM_SECTION, digest.encode()))
    return layout_elf(sections)


def _lines_json(lines, progs) -> dict:
    """`{"files": [path, ...], "programs": {name: [[pc, file index, line, col], ...]}}`: a row
    where the location changes, holding from its pc to the next row's (file index -1: none)."""
    files: list[str] = []
    out: dict[str, list[list[int]]] = {}
    for p in progs:
        table = lines.get(p.name) or []
        if len(table) != len(p.instructions):
            raise BinaryError(
                f"line table of program {p.name!r} has {len(table)} entries for "
                f"{len(p.instructions)} instructions"
            )
        rows, last = [], ()
        for pc, loc in enumerate(table):
            key = tuple(loc) if loc is not None else None
            if key == last:
                continue
            last = key
            if key is None:
                rows.append([pc, -1, 0, 0])
            else:
                if key[0] not in files:
                    files.append(key[0])
                rows.append([pc, files.index(key[0]), int(key[1]), int(key[2])])
        out[p.name] = rows
    return {"files": files, "programs": out}


def _read_lines(meta, programs) -> dict[str, list[tuple[str, int, int] | None]]:
    """The per-pc table of a `.legato.lines` object; BinaryError naming what is malformed."""
    lm = _Meta(LINES_SECTION)
    files = lm.get(meta, "files", list, "the line table")
    if not all(isinstance(f, str) for f in files):
        raise BinaryError(f"{LINES_SECTION}: files must be strings")
    table = lm.get(meta, "programs", dict, "the line table")
    sizes = {p.name: len(p.words) for p in programs}
    out = {}
    for name, rows in table.items():
        if name not in sizes:
            raise BinaryError(f"{LINES_SECTION}: no program {name!r}")
        if not isinstance(rows, list):
            raise BinaryError(f"{LINES_SECTION}: rows of {name!r} are not a list")
        per_pc: list = []
        prev = -1
        for row in rows:
            ok = (
                isinstance(row, list)
                and len(row) == 4
                and all(isinstance(v, int) and not isinstance(v, bool) for v in row)
            )
            if not ok or not prev < row[0] < sizes[name] or not -1 <= row[1] < len(files):
                raise BinaryError(f"{LINES_SECTION}: bad row {row!r} for program {name!r}")
            per_pc += [per_pc[-1] if per_pc else None] * (row[0] - len(per_pc))
            prev = row[0]
            per_pc.append(None if row[1] < 0 else (files[row[1]], row[2], row[3]))
        per_pc += [per_pc[-1] if per_pc else None] * (sizes[name] - len(per_pc))
        out[name] = per_pc
    return out


def _read_bounds(meta, programs, layout: ArgLayout) -> dict[str, dict[int, dict[str, Extent]]]:
    """The extents of a `.legato.bounds` object, each row checked: a program and pc that
    exist, an address field of that instruction, a valid extent naming a tensor argument or a
    core memory; BinaryError naming what is malformed."""
    table = _Meta(BOUNDS_SECTION).get(meta, "programs", dict, "the bounds table")
    by_name = {p.name: p for p in programs}
    tensors = {i for i, a in enumerate(layout.args) if isinstance(a.type, TensorSpec)}
    out: dict[str, dict[int, dict[str, Extent]]] = {}
    for name, rows in table.items():
        p = by_name.get(name)
        if p is None or not isinstance(rows, list):
            raise BinaryError(f"{BOUNDS_SECTION}: no program {name!r}, or its rows not a list")
        per: dict[int, dict[str, Extent]] = {}
        for row in rows:
            try:
                pc, f, ext = row
                if not (
                    isinstance(pc, int) and not isinstance(pc, bool) and 0 <= pc < len(p.words)
                ):
                    raise ValueError(f"no instruction {pc!r}")
                fmt = isa.decode(p.words[pc]).op.format
                if f not in ADDRESS_FIELDS.get(fmt, {}):
                    raise ValueError(f"field {f!r} of a {fmt} instruction is not an address")
                e = Extent.from_json(ext)
                if e.arg is not None and e.arg not in tensors:
                    raise ValueError(f"argument {e.arg} is not a tensor argument")
                if f in per.setdefault(pc, {}):
                    raise ValueError(f"field {f!r} given twice")
            except (TypeError, ValueError) as err:
                raise BinaryError(
                    f"{BOUNDS_SECTION}: bad row {row!r} for program {name!r}: {err}"
                ) from None
            per[pc][f] = e
        out[name] = per
    return out


def _shstrtab(names: list[str]) -> bytes:
    return b"\0" + b"".join(n.encode() + b"\0" for n in names + [".shstrtab"])


def _section_kind(name: str) -> tuple[int, int, int, int]:
    """(sh_type, sh_flags, sh_addralign, sh_entsize) of a section, from its name alone."""
    if name.startswith(".text."):
        return SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 8, 0
    if name == ".symtab":
        return SHT_SYMTAB, 0, 8, 24
    if name in (".strtab", ".shstrtab"):
        return SHT_STRTAB, 0, 1, 0
    return SHT_PROGBITS, 0, 1, 0


def layout_elf(sections: list[tuple[str, bytes]]) -> bytes:
    """The canonical file for `sections` ((name, contents) in order, `.shstrtab` excluded: it is
    generated and placed last).  Everything but the contents (ELF header, section headers,
    padding, `.shstrtab`) is a function of the names and sizes, so a reader can rebuild the file
    from what it parsed and compare byte for byte: every byte of a valid binary is checked
    (contents and names by the checksum, the rest by this layout)."""
    names = [n for n, _ in sections]
    shstrtab = _shstrtab(names)
    all_sections = list(sections) + [(".shstrtab", shstrtab)]
    name_off, pos = {}, 1
    for n in names + [".shstrtab"]:
        name_off.setdefault(n, pos)
        pos += len(n.encode()) + 1
    out = bytearray(64)
    offsets = []
    for _name, data in all_sections:
        out += b"\0" * (-len(out) % 8)
        offsets.append(len(out))
        out += data
    out += b"\0" * (-len(out) % 8)
    shoff = len(out)
    shnum = len(all_sections) + 1
    out += b"\0" * 64  # null section header
    strtab_index = names.index(".strtab") + 1 if ".strtab" in names else 0
    for i, (name, data) in enumerate(all_sections):
        typ, flags, align, entsize = _section_kind(name)
        link = info = 0
        if typ == SHT_SYMTAB:
            link, info = strtab_index, 1
        out += struct.pack(
            "<IIQQQQIIQQ",
            name_off[name],
            typ,
            flags,
            0,
            offsets[i],
            len(data),
            link,
            info,
            align,
            entsize,
        )
    ident = ELF_MAGIC + bytes([2, 1, 1, 0]) + b"\0" * 8
    out[0:64] = ident + struct.pack(
        "<HHIQQQIHHHHHH",
        ET_EXEC,
        EM_BERTHA,
        1,
        0,
        0,
        shoff,
        FORMAT_VERSION,
        64,
        0,
        0,
        64,
        shnum,
        shnum - 1,
    )
    return bytes(out)


_HEADER_FIELDS = [  # (offset, size, name) of the ELF64 header, for messages
    (0, 16, "e_ident"),
    (16, 2, "e_type"),
    (18, 2, "e_machine"),
    (20, 4, "e_version"),
    (24, 8, "e_entry"),
    (32, 8, "e_phoff"),
    (40, 8, "e_shoff"),
    (48, 4, "e_flags"),
    (52, 2, "e_ehsize"),
    (54, 2, "e_phentsize"),
    (56, 2, "e_phnum"),
    (58, 2, "e_shentsize"),
    (60, 2, "e_shnum"),
    (62, 2, "e_shstrndx"),
]
_SHDR_FIELDS = [
    (0, 4, "sh_name"),
    (4, 4, "sh_type"),
    (8, 8, "sh_flags"),
    (16, 8, "sh_addr"),
    (24, 8, "sh_offset"),
    (32, 8, "sh_size"),
    (40, 4, "sh_link"),
    (44, 4, "sh_info"),
    (48, 8, "sh_addralign"),
    (56, 8, "sh_entsize"),
]
MAX_SECTIONS = 4096
MAX_PROGRAMS = 65  # top plus one per core


def _field(fields, rel: int) -> str:
    for off, size, name in fields:
        if off <= rel < off + size:
            return name
    return "?"  # pragma: no cover


def _raw_sections(data: bytes) -> list[tuple[str, int, int, bytes]]:
    """(name, sh_type, sh_flags, contents) of every section but the null one, from the section
    header table, with every offset and size checked against the file (BinaryError)."""
    n = len(data)
    (shoff,) = struct.unpack_from("<Q", data, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    if shentsize != 64:
        raise BinaryError(f"ELF section header size is {shentsize}, expected 64")
    if not 2 <= shnum <= MAX_SECTIONS:
        raise BinaryError(f"ELF header says {shnum} sections (expected 2..{MAX_SECTIONS})")
    if shoff > n or shnum * 64 > n - shoff:
        raise BinaryError(
            f"truncated or corrupt: the section header table ({shnum} x 64 bytes at "
            f"offset {shoff:#x}) runs past the end of the {n}-byte file"
        )
    if not 0 < shstrndx < shnum:
        raise BinaryError(
            f"ELF section name table index {shstrndx} is out of range (1..{shnum - 1})"
        )
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(shnum)]

    def contents(i: int) -> bytes:
        _nm, _t, _f, _a, off, size, *_ = headers[i]
        if off > n or size > n - off:
            raise BinaryError(
                f"truncated or corrupt: section {i} ({size} bytes at offset "
                f"{off:#x}) runs past the end of the {n}-byte file"
            )
        return data[off : off + size]

    shstr = contents(shstrndx)
    out = []
    for i in range(1, shnum):
        name_off, typ, flags = headers[i][0], headers[i][1], headers[i][2]
        end = shstr.find(b"\0", name_off) if name_off < len(shstr) else -1
        if end < 0:
            raise BinaryError(
                f"section {i}: name offset {name_off} is outside the section name table"
            )
        try:
            name = shstr[name_off:end].decode("utf-8")
        except UnicodeDecodeError:
            raise BinaryError(f"section {i}: its name is not valid UTF-8") from None
        out.append((name, typ, flags, contents(i)))
    return out


def _first_difference(data: bytes, canon: bytes, names: list[str]) -> str:
    """Where `data` departs from its canonical layout, for the error message."""
    if len(data) != len(canon) and data[: len(canon)] == canon[: len(data)]:
        return (
            f"the file is {len(data)} bytes but its sections lay out in {len(canon)} "
            f"({'extra bytes at the end' if len(data) > len(canon) else 'truncated'})"
        )
    i = next(k for k in range(min(len(data), len(canon))) if data[k] != canon[k])
    if i < 64:
        where = f"ELF header field {_field(_HEADER_FIELDS, i)}"
    else:
        (shoff,) = struct.unpack_from("<Q", canon, 40)
        if i >= shoff:
            k, rel = divmod(i - shoff, 64)
            sec = "null" if k == 0 else names[k - 1] if k - 1 < len(names) else ".shstrtab"
            where = f"section header {k} ({sec}) field {_field(_SHDR_FIELDS, rel)}"
        else:
            where = "padding between sections"
    return f"byte {i:#x} ({where}) is {data[i]:#04x}, expected {canon[i]:#04x}"


class _Meta:
    """Typed access to a metadata JSON object; any mismatch is a BinaryError naming the path."""

    def __init__(self, section: str):
        self.section = section

    def get(self, obj, key, kind, what: str, *, optional: bool = False):
        if not isinstance(obj, dict):
            raise BinaryError(f"{self.section}: {what} is not a JSON object")
        if key not in obj:
            if optional:
                return None
            raise BinaryError(f"{self.section}: {what} has no {key!r}")
        v = obj[key]
        if optional and v is None:
            return None
        if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
            raise BinaryError(f"{self.section}: {what}.{key} is {v!r}, expected an integer")
        if not isinstance(v, kind):
            raise BinaryError(
                f"{self.section}: {what}.{key} is {v!r}, expected {getattr(kind, '__name__', kind)}"
            )
        return v


def read_elf(data: bytes) -> Binary:
    """Parse and validate a Bertha binary; raises BinaryError (ChecksumError for a content
    change) saying what differs, and nothing else, whatever the input.

    Order: ELF identification and header (magic, class, data, machine, type, format version);
    section table bounds; the checksum over every section's name and contents; the canonical
    layout (the file must be byte for byte what `layout_elf` makes of its sections, so header,
    section header and padding bytes are checked too); pyelftools parse; metadata, symbols and
    code (every word a valid instruction)."""
    from elftools.elf.elffile import ELFFile

    try:
        data = bytes(data)
    except TypeError:
        raise BinaryError(f"a binary is bytes, got {type(data).__name__}") from None
    if data[:4] != ELF_MAGIC:
        raise BinaryError(f"not an ELF file: magic is {data[:4]!r}, expected {ELF_MAGIC!r}")
    if len(data) < 64:
        raise BinaryError(f"truncated: the ELF header needs 64 bytes, the file has {len(data)}")
    if data[4] != 2:
        raise BinaryError(
            f"ELF class is {data[4]} (ELFCLASS{32 if data[4] == 1 else '?'}), "
            "expected 2 (ELFCLASS64)"
        )
    if data[5] != 1:
        raise BinaryError(f"ELF data encoding is {data[5]}, expected 1 (little endian)")
    e_type, machine = struct.unpack_from("<HH", data, 16)
    if machine != EM_BERTHA:
        raise BinaryError(f"ELF machine is {machine:#06x}, expected {EM_BERTHA:#06x} (Bertha)")
    if e_type != ET_EXEC:
        raise BinaryError(f"ELF type is {e_type}, expected {ET_EXEC} (ET_EXEC)")
    (flags,) = struct.unpack_from("<I", data, 48)
    if flags != FORMAT_VERSION:
        raise BinaryError(
            f"binary format version is {flags}, this runtime reads version {FORMAT_VERSION}"
        )
    raw = _raw_sections(data)
    names = [r[0] for r in raw]
    if names.count(CHECKSUM_SECTION) != 1:
        raise ChecksumError(
            f"binary has {names.count(CHECKSUM_SECTION) or 'no'} "
            f"{CHECKSUM_SECTION} section{'s' if names.count(CHECKSUM_SECTION) else ''}"
        )
    if len(set(names)) != len(names):
        dup = sorted({x for x in names if names.count(x) > 1})
        raise BinaryError(f"duplicate section names: {', '.join(dup)}")
    stored_raw = raw[names.index(CHECKSUM_SECTION)][3]
    stored = stored_raw.decode("ascii", "replace")
    actual = section_digest([(n, d) for n, _t, _f, d in raw if n != CHECKSUM_SECTION])
    if stored != actual:
        raise ChecksumError(
            f"checksum mismatch: {CHECKSUM_SECTION} says {stored[:16]!r}..., the "
            f"sections hash to {actual[:16]}... (the binary was modified)"
        )
    if names[-1] != ".shstrtab":
        raise BinaryError(f"the last section is {names[-1]!r}, expected .shstrtab")
    canon = layout_elf([(n, d) for n, _t, _f, d in raw[:-1]])
    if canon != data:
        raise BinaryError(
            "not a canonical Bertha binary (header or section table was modified): "
            + _first_difference(data, canon, names)
        )
    try:
        elf = ELFFile(io.BytesIO(data))
        symtab = elf.get_section_by_name(".symtab")
        symbols = {}
        if symtab is not None:
            for sym in symtab.iter_symbols():
                if sym.name:
                    symbols[sym.name] = (
                        sym["st_info"]["type"],
                        sym["st_shndx"],
                        sym["st_value"],
                        sym["st_size"],
                    )
    except Exception as e:  # noqa: BLE001 - pyelftools raises many types; all mean malformed
        raise BinaryError(f"malformed ELF ({type(e).__name__}): {e}") from None
    if symtab is None:
        raise BinaryError("binary has no .symtab section")
    by_name = {n: d for n, _t, _f, d in raw}
    meta = {}
    for name in METADATA_SECTIONS:
        if name not in by_name:
            raise BinaryError(f"binary has no {name} section")
        try:
            meta[name] = json.loads(by_name[name])
        except (ValueError, RecursionError) as e:
            raise BinaryError(f"{name} is not valid JSON: {e}") from None
        if not isinstance(meta[name], dict):
            raise BinaryError(f"{name} is not a JSON object")
    comp = meta[".legato.compiler"]
    if comp.get("format_version") != FORMAT_VERSION:
        raise BinaryError(
            f".legato.compiler format_version is {comp.get('format_version')!r}, "
            f"expected {FORMAT_VERSION}"
        )
    isa_version = comp.get("isa_version")
    if isa_version != isa.ISA_VERSION:
        raise BinaryError(
            f".legato.compiler isa_version is {isa_version!r}: the binary's instructions are for "
            f"ISA version {isa_version!r}, this runtime implements ISA version {isa.ISA_VERSION}"
            " (recompile the kernel with this Legato)"
        )
    signature = None
    if SIGNATURE_SECTION in by_name:
        signature = by_name[SIGNATURE_SECTION].decode("ascii", "replace")
        if len(signature) != 64 or any(c not in "0123456789abcdef" for c in signature):
            raise BinaryError(f"{SIGNATURE_SECTION} is not 64 lowercase hex digits")
    target = meta[".legato.target"]
    tm = _Meta(".legato.target")
    for key in ("chip", "generation", "fingerprint"):
        tm.get(target, key, str, "the target")
    tm.get(target, "num_cores", int, "the target")
    pm = meta[".legato.programs"]
    pmeta = _Meta(".legato.programs")
    kernel = pmeta.get(pm, "kernel", str, "the program table", optional=True)
    plist = pmeta.get(pm, "programs", list, "the program table")
    if not 1 <= len(plist) <= MAX_PROGRAMS:
        raise BinaryError(
            f".legato.programs lists {len(plist)} programs (expected 1..{MAX_PROGRAMS})"
        )
    programs = []
    seen: set[str] = set()
    text_sections = {n for n in names if n.startswith(".text.")}
    for j, p in enumerate(plist):
        what = f"program {j}"
        pname = pmeta.get(p, "name", str, what)
        what = f"program {pname!r}"
        if pname in seen:
            raise BinaryError(f"two programs are named {pname!r}")
        seen.add(pname)
        sec = pmeta.get(p, "section", str, what)
        if sec != f".text.{pname}" or sec not in by_name:
            raise BinaryError(f"{what}: section {sec} missing (expected .text.{pname})")
        text_sections.discard(sec)
        code = by_name[sec]
        if len(code) % isa.WORD_BYTES:
            raise BinaryError(
                f"{what}: {sec} is {len(code)} bytes, not a whole number of "
                f"{isa.WORD_BYTES}-byte instructions"
            )
        count = pmeta.get(p, "instructions", int, what)
        if count != len(code) // isa.WORD_BYTES:
            raise BinaryError(
                f"{what}: .legato.programs says {count} instructions, {sec} holds "
                f"{len(code) // isa.WORD_BYTES}"
            )
        if count == 0:
            raise BinaryError(f"{what} has no instructions")
        sym = symbols.get(pname)
        if sym is None or sym[0] != "STT_FUNC":
            raise BinaryError(f"{what}: no STT_FUNC entry symbol")
        shndx = names.index(sec) + 1
        if sym[1] != shndx or sym[2] != 0 or sym[3] != len(code):
            raise BinaryError(
                f"{what}: its symbol does not cover {sec} from its first "
                f"instruction (section {sym[1]}, value {sym[2]}, size {sym[3]})"
            )
        words = isa.bytes_to_words(code)
        for i, w in enumerate(words):
            try:
                isa.decode(w)
            except isa.DecodeError as e:
                raise BinaryError(f"{what} instruction {i}: {e}") from None
        kind = pmeta.get(p, "context", str, what)
        if kind == "core":
            core = pmeta.get(p, "core", int, what)
            if not 0 <= core < MAX_PROGRAMS - 1:
                raise BinaryError(f"{what}: core index {core} out of range")
            ctx = f"core({core})"
        elif kind in ("top", "all_cores"):
            ctx = kind
        else:
            raise BinaryError(f"{what}: unknown context {kind!r}")
        memory = pmeta.get(p, "memory", dict, what)
        for space, nbytes in memory.items():
            if space not in ("sram", "mpu_buffer", "private_dram"):
                raise BinaryError(f"{what}: unknown memory space {space!r} in its footprint")
            if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
                raise BinaryError(
                    f"{what}: footprint of {space} is {nbytes!r}, expected a non-negative integer"
                )
        programs.append(Program(pname, ctx, words, dict(memory)))
    if text_sections:
        raise BinaryError(f"code sections without a program: {', '.join(sorted(text_sections))}")
    args_meta = meta[".legato.args"]
    try:
        layout = ArgLayout.from_json(args_meta)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as e:
        raise BinaryError(
            f".legato.args is not a valid argument layout: {type(e).__name__}: {e}"
        ) from None
    recorded = args_meta.get("max_table_size")
    if recorded is not None and (
        isinstance(recorded, bool) or not isinstance(recorded, int) or recorded < layout.size_bytes
    ):
        raise BinaryError(
            f".legato.args: max_table_size {recorded!r} is below the table's "
            f"{layout.size_bytes} bytes"
        )
    lines = {}
    if LINES_SECTION in by_name:
        try:
            lines_meta = json.loads(by_name[LINES_SECTION])
        except (ValueError, RecursionError) as e:
            raise BinaryError(f"{LINES_SECTION} is not valid JSON: {e}") from None
        lines = _read_lines(lines_meta, programs)
    bounds = {}
    if BOUNDS_SECTION in by_name:
        try:
            bounds_meta = json.loads(by_name[BOUNDS_SECTION])
        except (ValueError, RecursionError) as e:
            raise BinaryError(f"{BOUNDS_SECTION} is not valid JSON: {e}") from None
        bounds = _read_bounds(bounds_meta, programs, layout)
    debug = _read_debug(by_name.get(DEBUG_SECTION), programs)
    return Binary(
        kernel, programs, target, comp, pm, args_meta, stored, signature, lines, bounds, debug
    )


_DBG_OPCODES = frozenset(o.opcode for o in isa.OPS if o.format == "dbg")


def _read_debug(data: bytes | None, programs: list[Program]) -> list[Entry]:
    """The entries of a `.legato.debug` section (None: there is none), each checked, and every
    `dbg.*` instruction's imm32 naming one of them (a `dbg.assert` an assert entry, a
    `dbg.print` a print entry). Without the section nothing is scanned (a binary without
    debug instructions pays nothing); a debug instruction of such a binary faults when it runs."""
    if data is None:
        return []
    try:
        meta = json.loads(data)
        rows = meta["entries"]
        if not isinstance(rows, list):
            raise TypeError("entries is not a list")
        entries = [Entry.from_json(r) for r in rows]
    except (ValueError, RecursionError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise BinaryError(f"{DEBUG_SECTION} is not a valid debug table: {e}") from None
    for i, e in enumerate(entries):
        bad = e.validate()
        if bad is not None:
            raise BinaryError(f"{DEBUG_SECTION}: entry {i}: {bad}")
    for p in programs:
        for pc, w in enumerate(p.words):
            if w & 0xFF not in _DBG_OPCODES:
                continue
            ins = isa.decode(w)
            if ins.imm >= len(entries) or entries[ins.imm].op != ins.mnemonic[4:]:
                raise BinaryError(
                    f"program {p.name} pc {pc}: {ins.mnemonic} names debug entry {ins.imm}, "
                    f"which {DEBUG_SECTION} does not hold as a {ins.mnemonic[4:]} entry"
                )
    return entries


def _check_key(key: bytes) -> bytes:
    if not isinstance(key, (bytes, bytearray)) or len(key) < MIN_KEY_BYTES:
        raise SignatureError(
            f"a signing key is at least {MIN_KEY_BYTES} bytes, got "
            + (f"{len(key)}" if isinstance(key, (bytes, bytearray)) else type(key).__name__)
        )
    return bytes(key)


def _keyed_digest(key: bytes, sections: list[tuple[str, bytes]]) -> str:
    """HMAC-SHA256 under `key` of the sections framed as `section_digest` frames them."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for name, data in sections:
        mac.update(name.encode() + b"\0" + struct.pack("<Q", len(data)) + data)
    return mac.hexdigest()


def sign_binary(data: bytes, key: bytes) -> bytes:
    """`data` (a valid binary, signed or not) with a `.legato.signature` section: HMAC-SHA256
    under `key` over every section but the checksum and the signature themselves (`.shstrtab`
    included, so the section names are covered), framed as the checksum frames them. The
    checksum is then recomputed over everything, the signature included. Only a holder of `key`
    can make a signature `verify_signature` accepts; the checksum, which anyone can recompute,
    is integrity only."""
    key = _check_key(key)
    read_elf(data)
    raw = _raw_sections(bytes(data))
    base = [(n, d) for n, _t, _f, d in raw if n not in (CHECKSUM_SECTION, SIGNATURE_SECTION)]
    base = base[:-1]  # .shstrtab, regenerated
    shstrtab = _shstrtab([n for n, _ in base] + [SIGNATURE_SECTION, CHECKSUM_SECTION])
    sig = _keyed_digest(key, base + [(".shstrtab", shstrtab)]).encode()
    signed = base + [(SIGNATURE_SECTION, sig)]
    digest = section_digest(signed + [(".shstrtab", shstrtab)])
    return layout_elf(signed + [(CHECKSUM_SECTION, digest.encode())])


def verify_signature(data: bytes, key: bytes) -> Binary:
    """The `Binary` read from `data` if it carries a `.legato.signature` made with `key` over
    its current contents; SignatureError when it is unsigned, signed with another key or
    modified since (BinaryError for a file that is not a valid binary at all)."""
    key = _check_key(key)
    binary = read_elf(data)
    if binary.signature is None:
        raise SignatureError(
            f"binary is not signed (no {SIGNATURE_SECTION} section) but a signature with the "
            "given key is required"
        )
    raw = _raw_sections(bytes(data))
    covered = [(n, d) for n, _t, _f, d in raw if n not in (CHECKSUM_SECTION, SIGNATURE_SECTION)]
    if not hmac.compare_digest(binary.signature, _keyed_digest(key, covered)):
        raise SignatureError(
            f"{SIGNATURE_SECTION} does not verify with the given key: the binary was signed "
            "with another key or modified after signing"
        )
    return binary


def check_target(binary: Binary, model) -> None:
    """Raise TargetMismatchError saying what differs when `binary` was built for another chip."""
    t = binary.target
    # (the chip's parameters only when the fingerprints differ: `params` copies the model,
    # and a cached call checks the target on every run)
    mine = {
        "chip": model.name,
        "generation": model.generation,
        "fingerprint": model.fingerprint(),
        "num_cores": model.num_cores,
    }
    diffs = []
    if "pim" in t and not model.use_pim:
        diffs.append(
            f"the binary was built for a chip with PIM ({t['pim'].get('units')} PIM units, "
            f"use_pim=True) but {model.name} has none (use_pim=False)"
        )
    for key in ("chip", "generation", "num_cores"):
        if t.get(key) != mine[key]:
            diffs.append(f"{key} is {t.get(key)!r} in the binary but {mine[key]!r} on this model")
    if not diffs and t.get("fingerprint") != mine["fingerprint"]:
        params = t.get("params") or {}
        pd = [
            f"{k}: binary {params.get(k)!r}, model {v!r}"
            for k, v in target_json(model)["params"].items()
            if params.get(k) != v
        ]
        diffs.append(
            "model fingerprint differs ("
            + ("; ".join(pd) or f"{t.get('fingerprint')} vs {mine['fingerprint']}")
            + ")"
        )
    if diffs:
        raise TargetMismatchError("binary was built for another target: " + "; ".join(diffs))
