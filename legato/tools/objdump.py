"""`legato-objdump`: show what a Bertha binary holds, after validating it like the runtime does.

    legato-objdump FILE [--no-disassembly] [--asm] [--json] [--target bertha|bertha-evt1]

Prints the metadata (target, compiler, kernel, programs with their contexts and memory
footprints), the Instruction Table layout (argument names, types, access, word and byte offsets,
maximum size) and the disassembly of every program (index, encoded word, instruction; branch
targets as labels).  `--asm` prints instead the canonical assembly text, which `legato`'s
assembler encodes back to the same words.  `--json` prints everything as one JSON object.
`--target` also checks that the binary runs on that chip (as `run_binary` would).

An invalid binary (not ELF, truncated, tampered with, wrong format version, bad metadata, an
invalid instruction, another target with `--target`) is reported as
`legato-objdump: error: FILE: <reason>` with exit status 1; an unreadable file likewise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from legato.model.targets import target_model, target_names
from legato.targets.bertha import isa
from legato.targets.bertha.abi import TupleSpec
from legato.targets.bertha.asm import disassemble, format_instruction
from legato.targets.bertha.elf import Binary, BinaryError, check_target, read_elf
from legato.types import TensorSpec

PROG = "legato-objdump"
MEMORY_SPACES = ("sram", "mpu_buffer", "private_dram")


# ---- text ------------------------------------------------------------------------------------
def _memory_text(memory: dict) -> str:
    parts = [f"{s} {memory[s]} B" for s in MEMORY_SPACES if s in memory]
    parts += [f"{s} {n} B" for s, n in sorted(memory.items()) if s not in MEMORY_SPACES]
    return ", ".join(parts) if parts else "-"


def _type_at(t, path):
    for j in path:
        t = t.elements[j]
    return t


def table_rows(binary: Binary) -> list[dict]:
    """One row per Instruction Table word, word 0 (the table size) included."""
    layout = binary.layout
    rows = [
        {
            "word": 0,
            "offset": 0,
            "arg": None,
            "name": "-",
            "entry": "table size",
            "type": "u64",
            "access": "",
        }
    ]
    for i, a in enumerate(layout.args):
        for s in layout.slots:
            if s.arg != i:
                continue
            word = layout._slot_word(s)
            name = a.name + "".join(f"[{j}]" for j in s.path)
            t = _type_at(a.type, s.path)
            if s.kind == "address":
                entry, ty = "address", str(t)
            elif s.kind == "dim":
                entry, ty = f"dim {s.dim}", f"i64 (runtime size, bound {t.dims[s.dim].bound})"
            else:
                entry, ty = "scalar", str(t)
            rows.append(
                {
                    "word": word,
                    "offset": word * 8,
                    "arg": i,
                    "name": name,
                    "entry": entry,
                    "type": ty,
                    "access": a.access,
                }
            )
    rows.sort(key=lambda r: r["word"])
    return rows


def _signature_text(binary: Binary) -> list[str]:
    out = []
    for a in binary.layout.args:
        kind = (
            "tensor"
            if isinstance(a.type, TensorSpec)
            else "tuple"
            if isinstance(a.type, TupleSpec)
            else "scalar"
        )
        out.append(f"  {a.name}: {a.type}  ({kind}, {a.access})")
    return out


def disassembly_lines(program) -> list[str]:
    """`index: word  instruction` lines, with `L<index>:` lines at branch targets."""
    instrs = [isa.decode(w) for w in program.words]
    n = len(instrs)
    targets = {
        i + ins.simm
        for i, ins in enumerate(instrs)
        if ins.op.format in ("br", "jmp") and 0 <= i + ins.simm <= n
    }
    width = max(len(str(max(n - 1, 0))), 3)
    lines = []
    for i, (w, ins) in enumerate(zip(program.words, instrs, strict=True)):
        if i in targets:
            lines.append(f"L{i}:")
        label = None
        if ins.op.format in ("br", "jmp") and (i + ins.simm) in targets:
            label = f"L{i + ins.simm}"
        lines.append(f"  {i:>{width}}:  {w:016x}    {format_instruction(ins, label)}")
    if n in targets:
        lines.append(f"L{n}:")
    return lines


def describe(binary: Binary, size: int, path: str = "", disassembly: bool = True) -> str:
    t, c = binary.target, binary.compiler
    out = [
        f"{path}: Bertha ELF64 binary, {size} bytes, format version {c.get('format_version')}",
        f"kernel:    {binary.kernel or '-'}",
        (
            f"target:    chip {t.get('chip')}, generation {t.get('generation')}, "
            f"{t.get('num_cores')} cores, fingerprint {t.get('fingerprint')}"
        ),
        (
            f"compiler:  legato {c.get('version')}, ISA version {c.get('isa_version')}, "
            f"pipeline {c.get('pipeline') or '-'}"
        ),
        f"checksum:  sha256 {binary.checksum}",
    ]
    extra = {
        k: v
        for k, v in c.items()
        if k not in ("version", "format_version", "isa_version", "pipeline")
    }
    for k in sorted(extra):
        out.append(f"           {k}: {json.dumps(extra[k], sort_keys=True)}")
    params = t.get("params") or {}
    if params:
        out.append("model parameters:")
        keys = sorted(params)
        for j in range(0, len(keys), 3):
            out.append("  " + ", ".join(f"{k}={params[k]}" for k in keys[j : j + 3]))

    out.append("")
    out.append(f"programs ({len(binary.programs)}):")
    w = max(len(p.name) for p in binary.programs)
    cw = max(len(p.context) for p in binary.programs)
    for p in binary.programs:
        out.append(
            f"  {p.name:<{w}}  on {p.context:<{cw}}  {'.text.' + p.name:<{w + 6}}  "
            f"{len(p.words):>5} instructions ({len(p.words) * isa.WORD_BYTES} B)  "
            f"memory: {_memory_text(p.memory)}"
        )

    layout = binary.layout
    out.append("")
    out.append(f"arguments ({len(layout.args)}):")
    out.extend(_signature_text(binary))
    out.append("")
    maxsz = binary.args_meta.get("max_table_size", layout.max_size_bytes)
    out.append(
        f"Instruction Table: {layout.num_words} words, {layout.size_bytes} bytes "
        f"(maximum {maxsz} bytes, computed from the signature); address in r1 at entry"
    )
    rows = table_rows(binary)
    nw = max(len(r["name"]) for r in rows + [{"name": "argument"}])
    ew = max(len(r["entry"]) for r in rows)
    out.append(f"  {'word':>4}  {'offset':>6}  {'argument':<{nw}}  {'entry':<{ew}}  type  [access]")
    for r in rows:
        acc = f"  [{r['access']}]" if r["access"] else ""
        out.append(
            f"  {r['word']:>4}  {r['offset']:>6}  {r['name']:<{nw}}  {r['entry']:<{ew}}  "
            f"{r['type']}{acc}"
        )

    if disassembly:
        for p in binary.programs:
            out.append("")
            out.append(f"Disassembly of program {p.name} (section .text.{p.name}, on {p.context}):")
            out.extend(disassembly_lines(p))
    return "\n".join(out) + "\n"


def to_json(binary: Binary, size: int, disassembly: bool = True) -> dict:
    d = {
        "size": size,
        "kernel": binary.kernel,
        "target": binary.target,
        "compiler": binary.compiler,
        "checksum": binary.checksum,
        "programs": [
            {
                "name": p.name,
                "context": p.context,
                "section": f".text.{p.name}",
                "instructions": len(p.words),
                "memory": p.memory,
            }
            for p in binary.programs
        ],
        "args": binary.args_meta,
        "table": table_rows(binary),
    }
    if disassembly:
        for entry, p in zip(d["programs"], binary.programs, strict=True):
            entry["disassembly"] = [
                {"index": i, "word": f"{w:016x}", "text": format_instruction(isa.decode(w))}
                for i, w in enumerate(p.words)
            ]
    return d


# ---- driver ----------------------------------------------------------------------------------
def _model(name: str):
    model = target_model(name)
    if model is None:
        raise BinaryError(f"unknown target {name!r} (expected one of {', '.join(target_names())})")
    return model


def _fail(path: str, reason: str, status: int = 1) -> int:
    sys.stderr.write(f"{PROG}: error: {path}: {reason}\n")
    return status


def run(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Show a Bertha binary's metadata, Instruction Table layout and disassembly.",
    )
    ap.add_argument("file", metavar="FILE", help="a Bertha ELF binary")
    ap.add_argument("--no-disassembly", action="store_true", help="metadata and table only")
    ap.add_argument(
        "--asm",
        action="store_true",
        help="print the canonical assembly text instead (re-assembles to the same words)",
    )
    ap.add_argument("--json", action="store_true", help="print everything as one JSON object")
    ap.add_argument(
        "--target",
        metavar="NAME",
        help="also check that the binary runs on this chip (bertha, bertha-evt1)",
    )
    args = ap.parse_args(argv)
    path = args.file
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return _fail(path, f"cannot read: {e.strerror or e}")
    try:
        binary = read_elf(data)
        if args.target:
            check_target(binary, _model(args.target))
    except BinaryError as e:
        return _fail(path, str(e))
    except Exception as e:  # noqa: BLE001 - a reader bug must still not print a traceback
        return _fail(path, f"internal error while reading the binary: {type(e).__name__}: {e}", 3)
    if args.json:
        text = json.dumps(to_json(binary, len(data), not args.no_disassembly), indent=1) + "\n"
    elif args.asm:
        text = disassemble(binary)
    else:
        text = describe(binary, len(data), path, not args.no_disassembly)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `legato-objdump x.elf | head`
        return 0
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv))


if __name__ == "__main__":
    main()
