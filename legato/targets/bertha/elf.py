"""Bertha binaries: ELF64 little-endian, `e_machine = 0xBE27` (docs/binary.md).

`write_elf(...)` builds the file by hand with `struct`; `read_elf(data)` parses it with pyelftools,
validates it and returns a `Binary`.  Every problem is a `BinaryError` saying what differs.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
from dataclasses import dataclass, field

from legato.targets.bertha import isa
from legato.targets.bertha.abi import ArgLayout
from legato.targets.bertha.asm import AsmModule, parse_context

EM_BERTHA = 0xBE27
ET_EXEC = 2
FORMAT_VERSION = 1
ELF_MAGIC = b"\x7fELF"

SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 0, 1, 2, 3
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4
STB_GLOBAL, STT_FUNC = 1, 2

METADATA_SECTIONS = (".legato.target", ".legato.compiler", ".legato.programs", ".legato.args")
CHECKSUM_SECTION = ".legato.checksum"


class BinaryError(Exception):
    """A binary that cannot be run: malformed, tampered with, or for something else."""


class ChecksumError(BinaryError):
    pass


class TargetMismatchError(BinaryError):
    pass


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

    @property
    def layout(self) -> ArgLayout:
        return ArgLayout.from_json(self.args_meta)

    def program(self, name: str) -> Program:
        for p in self.programs:
            if p.name == name:
                return p
        raise KeyError(name)


def target_json(model) -> dict:
    return {
        "chip": model.name,
        "generation": model.generation,
        "fingerprint": model.fingerprint(),
        "num_cores": model.num_cores,
        "params": model.params(),
    }


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


def write_elf(module: AsmModule, model, layout: ArgLayout, *, compiler: dict | None = None,
              kernel: str | None = None) -> bytes:
    """Encode an assembled module into a Bertha ELF binary for `model`.

    `compiler`: extra entries for `.legato.compiler` (e.g. `{"pipeline": "..."}`)."""
    import legato

    kernel = kernel or module.kernel
    progs = module.programs
    if not progs:
        raise BinaryError("a binary needs at least one program")
    comp = {"version": legato.__version__, "format_version": FORMAT_VERSION,
            "isa_version": isa.ISA_VERSION, "pipeline": None}
    comp.update(compiler or {})
    comp["format_version"] = FORMAT_VERSION
    programs_meta = {
        "kernel": kernel,
        "programs": [
            {"name": p.name, **_context_json(p.context), "section": f".text.{p.name}",
             "instructions": len(p.instructions), "memory": dict(p.memory)}
            for p in progs
        ],
    }
    sections: list[tuple[str, int, int, bytes]] = []  # name, type, flags, data
    for p in progs:
        sections.append((f".text.{p.name}", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, p.code))
    sections.append((".legato.target", SHT_PROGBITS, 0, _json_bytes(target_json(model))))
    sections.append((".legato.compiler", SHT_PROGBITS, 0, _json_bytes(comp)))
    sections.append((".legato.programs", SHT_PROGBITS, 0, _json_bytes(programs_meta)))
    sections.append((".legato.args", SHT_PROGBITS, 0, _json_bytes(layout.to_json())))
    # symbols: one STT_FUNC per program entry
    strtab = b"\0"
    syms = [b"\0" * 24]
    for i, p in enumerate(progs):
        name_off = len(strtab)
        strtab += p.name.encode() + b"\0"
        syms.append(struct.pack("<IBBHQQ", name_off, (STB_GLOBAL << 4) | STT_FUNC, 0, 1 + i, 0,
                                len(p.instructions) * isa.WORD_BYTES))
    symtab_index = len(sections) + 1
    sections.append((".symtab", SHT_SYMTAB, 0, b"".join(syms)))
    sections.append((".strtab", SHT_STRTAB, 0, strtab))
    names = [s[0] for s in sections] + [CHECKSUM_SECTION, ".shstrtab"]
    shstrtab = b"\0"
    name_off = {}
    for n in names:
        name_off[n] = len(shstrtab)
        shstrtab += n.encode() + b"\0"
    covered = [(s[0], s[3]) for s in sections]
    digest = section_digest(covered + [(".shstrtab", shstrtab)])
    sections.append((CHECKSUM_SECTION, SHT_PROGBITS, 0, digest.encode()))
    sections.append((".shstrtab", SHT_STRTAB, 0, shstrtab))

    # layout: header, section contents (8-aligned), section header table
    out = bytearray(64)
    offsets = []
    for _name, _t, _f, data in sections:
        while len(out) % 8:
            out.append(0)
        offsets.append(len(out))
        out += data
    while len(out) % 8:
        out.append(0)
    shoff = len(out)
    shnum = len(sections) + 1
    out += b"\0" * 64  # null section header
    strtab_index = symtab_index + 1
    for i, (name, typ, flags, data) in enumerate(sections):
        link = info = 0
        align, entsize = 1, 0
        if typ == SHT_SYMTAB:
            link, info, align, entsize = strtab_index, 1, 8, 24
        elif name.startswith(".text."):
            align = 8
        out += struct.pack("<IIQQQQIIQQ", name_off[name], typ, flags, 0, offsets[i], len(data),
                           link, info, align, entsize)
    ident = ELF_MAGIC + bytes([2, 1, 1, 0]) + b"\0" * 8
    out[0:64] = ident + struct.pack(
        "<HHIQQQIHHHHHH", ET_EXEC, EM_BERTHA, 1, 0, 0, shoff, FORMAT_VERSION, 64, 0, 0, 64,
        shnum, shnum - 1)
    return bytes(out)


def read_elf(data: bytes) -> Binary:
    """Parse and validate a Bertha binary (magic, class, data, machine, format version,
    checksum, metadata); raises BinaryError saying what differs."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    data = bytes(data)
    if len(data) < 64 or data[:4] != ELF_MAGIC:
        raise BinaryError(f"not an ELF file: magic is {data[:4]!r}, expected {ELF_MAGIC!r}")
    if data[4] != 2:
        raise BinaryError(f"ELF class is {data[4]} (ELFCLASS{32 if data[4] == 1 else '?'}), "
                          "expected 2 (ELFCLASS64)")
    if data[5] != 1:
        raise BinaryError(f"ELF data encoding is {data[5]}, expected 1 (little endian)")
    try:
        elf = ELFFile(io.BytesIO(data))
        hdr = elf.header
        machine = struct.unpack_from("<H", data, 18)[0]
        if machine != EM_BERTHA:
            raise BinaryError(f"ELF machine is {machine:#06x}, expected {EM_BERTHA:#06x} (Bertha)")
        if hdr["e_type"] != "ET_EXEC":
            raise BinaryError(f"ELF type is {hdr['e_type']}, expected ET_EXEC")
        if hdr["e_flags"] != FORMAT_VERSION:
            raise BinaryError(f"binary format version is {hdr['e_flags']}, this runtime reads "
                              f"version {FORMAT_VERSION}")
        sections = []
        for s in elf.iter_sections():
            if s["sh_type"] == "SHT_NULL":
                continue
            sections.append((s.name, s.data(), s))
    except ELFError as e:
        raise BinaryError(f"malformed ELF: {e}") from None
    except (struct.error, ValueError, IndexError) as e:
        raise BinaryError(f"malformed ELF: {e}") from None
    by_name = {n: d for n, d, _s in sections}
    if CHECKSUM_SECTION not in by_name:
        raise ChecksumError(f"binary has no {CHECKSUM_SECTION} section")
    stored = by_name[CHECKSUM_SECTION].decode("ascii", "replace")
    actual = section_digest([(n, d) for n, d, _s in sections if n != CHECKSUM_SECTION])
    if stored != actual:
        raise ChecksumError(f"checksum mismatch: {CHECKSUM_SECTION} says {stored[:16]}..., the "
                            f"sections hash to {actual[:16]}... (the binary was modified)")
    meta = {}
    for name in METADATA_SECTIONS:
        if name not in by_name:
            raise BinaryError(f"binary has no {name} section")
        try:
            meta[name] = json.loads(by_name[name])
        except ValueError as e:
            raise BinaryError(f"{name} is not valid JSON: {e}") from None
    comp = meta[".legato.compiler"]
    if comp.get("format_version") != FORMAT_VERSION:
        raise BinaryError(f".legato.compiler format_version is {comp.get('format_version')}, "
                          f"expected {FORMAT_VERSION}")
    pm = meta[".legato.programs"]
    programs = []
    symbols = {}
    symtab = elf.get_section_by_name(".symtab")
    if symtab is None:
        raise BinaryError("binary has no .symtab section")
    for sym in symtab.iter_symbols():
        if sym.name:
            symbols[sym.name] = sym
    for p in pm.get("programs", []):
        sec = p["section"]
        if sec not in by_name:
            raise BinaryError(f"program {p['name']!r}: section {sec} missing")
        sym = symbols.get(p["name"])
        if sym is None or sym["st_info"]["type"] != "STT_FUNC":
            raise BinaryError(f"program {p['name']!r}: no STT_FUNC entry symbol")
        code = by_name[sec]
        try:
            words = isa.bytes_to_words(code)
            for i, w in enumerate(words):
                try:
                    isa.decode(w)
                except isa.DecodeError as e:
                    raise BinaryError(f"program {p['name']!r} instruction {i}: {e}") from None
        except isa.DecodeError as e:
            raise BinaryError(f"program {p['name']!r}: {e}") from None
        if p["context"] == "core":
            ctx = f"core({p['core']})"
        elif p["context"] in ("top", "all_cores"):
            ctx = p["context"]
        else:
            raise BinaryError(f"program {p['name']!r}: unknown context {p['context']!r}")
        programs.append(Program(p["name"], ctx, words, dict(p.get("memory", {}))))
    return Binary(pm.get("kernel"), programs, meta[".legato.target"], comp, pm,
                  meta[".legato.args"], stored)


def check_target(binary: Binary, model) -> None:
    """Raise TargetMismatchError saying what differs when `binary` was built for another chip."""
    t = binary.target
    mine = target_json(model)
    diffs = []
    for key in ("chip", "generation", "num_cores"):
        if t.get(key) != mine[key]:
            diffs.append(f"{key} is {t.get(key)!r} in the binary but {mine[key]!r} on this model")
    if not diffs and t.get("fingerprint") != mine["fingerprint"]:
        params = t.get("params") or {}
        pd = [f"{k}: binary {params.get(k)!r}, model {v!r}" for k, v in mine["params"].items()
              if params.get(k) != v]
        diffs.append("model fingerprint differs (" + ("; ".join(pd) or
                     f"{t.get('fingerprint')} vs {mine['fingerprint']}") + ")")
    if diffs:
        raise TargetMismatchError("binary was built for another target: " + "; ".join(diffs))
