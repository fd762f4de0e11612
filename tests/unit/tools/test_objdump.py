"""`legato-objdump` on a binary compiled from the seed kernel, and on broken files."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "targets"))

from seed_kernel import seed_binary

from legato.model import bertha
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import read_elf
from legato.tools.objdump import run


@pytest.fixture(scope="module")
def elf(tmp_path_factory):
    path = tmp_path_factory.mktemp("objdump") / "simple_matmul.elf"
    path.write_bytes(seed_binary(bertha.evt0()))
    return path


def objdump(capsys, *argv):
    status = run([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_prints_metadata_table_and_disassembly(elf, capsys):
    status, out, err = objdump(capsys, elf)
    assert status == 0 and err == ""
    binary = read_elf(elf.read_bytes())
    assert f"{elf}: Bertha ELF64 binary, {elf.stat().st_size} bytes, format version 1" in out
    assert "kernel:    simple_matmul" in out
    assert (
        f"chip bertha, generation evt0, 32 cores, fingerprint {bertha.evt0().fingerprint()}" in out
    )
    assert "pipeline convert-legato-to-core," in out
    assert f"checksum:  sha256 {binary.checksum}" in out
    # programs with their contexts and memory footprints
    prog_lines = {
        line.split()[0]: line
        for line in out.splitlines()
        if line.startswith("  ") and " instructions (" in line
    }
    assert set(prog_lines) == {"top", "core0"}
    assert "on top" in prog_lines["top"] and "memory: -" in prog_lines["top"]
    core0 = binary.program("core0")
    assert "on core(0)" in prog_lines["core0"]
    assert f"sram {core0.memory['sram']} B" in prog_lines["core0"]
    assert f"mpu_buffer {core0.memory['mpu_buffer']} B" in prog_lines["core0"]
    assert f"{len(core0.words)} instructions ({8 * len(core0.words)} B)" in prog_lines["core0"]
    # the Instruction Table: every word, its byte offset, argument, entry kind, type, access
    assert "Instruction Table: 5 words, 40 bytes (maximum 40 bytes" in out
    table = out[out.index("Instruction Table") : out.index("Disassembly of")].splitlines()[2:]
    rows = [r.split(None, 4) for r in table if r.strip()]
    assert [r[:2] for r in rows] == [["0", "0"], ["1", "8"], ["2", "16"], ["3", "24"], ["4", "32"]]
    assert "tensor<[?10, 256], bf16, shared_dram>  [read]" in table[1]
    assert "dim 0" in table[2] and "bound 10" in table[2]
    assert "tensor<[256, 128], bf16, mpu_dram>  [read]" in table[3]
    assert "tensor<[10, 128], bf16, shared_dram>  [write]" in table[4]
    # disassembly of each program: index, the encoded word, the instruction
    for p in binary.programs:
        assert f"Disassembly of program {p.name} (section .text.{p.name}, on {p.context}):" in out
        for i, w in enumerate(p.words):
            assert f"{i}:  {w:016x}    " in out
    assert "mpu.mm r6, r5, r3, bf16" in out or "mpu.mm " in out
    assert "qwait sram.q0" in out and "dma " in out and "halt" in out


def test_asm_output_reassembles_to_the_same_words(elf, capsys):
    status, out, _ = objdump(capsys, elf, "--asm")
    assert status == 0
    module = assemble(out)
    binary = read_elf(elf.read_bytes())
    assert [p.name for p in module.programs] == [p.name for p in binary.programs]
    for a, b in zip(module.programs, binary.programs, strict=True):
        assert a.words == b.words and a.memory == b.memory and a.context == b.context


def test_json_output(elf, capsys):
    status, out, _ = objdump(capsys, elf, "--json")
    assert status == 0
    d = json.loads(out)
    assert d["kernel"] == "simple_matmul" and d["target"]["chip"] == "bertha"
    assert [p["context"] for p in d["programs"]] == ["top", "core(0)"]
    assert d["args"]["max_table_size"] == 40
    assert [r["word"] for r in d["table"]] == [0, 1, 2, 3, 4]
    assert d["programs"][0]["disassembly"][0]["text"].startswith("ld ")
    status, out, _ = objdump(capsys, elf, "--json", "--no-disassembly")
    assert "disassembly" not in json.loads(out)["programs"][0]


def test_no_disassembly(elf, capsys):
    status, out, _ = objdump(capsys, elf, "--no-disassembly")
    assert status == 0 and "Instruction Table" in out and "Disassembly" not in out


def test_target_check(elf, capsys):
    assert objdump(capsys, elf, "--target", "bertha")[0] == 0
    status, out, err = objdump(capsys, elf, "--target", "bertha-evt1")
    assert status == 1 and out == ""
    assert err.startswith(f"legato-objdump: error: {elf}: binary was built for another target: ")
    assert "chip is 'bertha' in the binary but 'bertha-evt1'" in err


def _section(data, name):
    s = ELFFile(io.BytesIO(data)).get_section_by_name(name)
    return s["sh_offset"], s["sh_size"]


def _corruptions(data: bytes):
    text_off, _ = _section(data, ".text.core0")
    args_off, args_size = _section(data, ".legato.args")
    flip = bytearray(data)
    flip[text_off + 3] ^= 0x40
    meta = bytearray(data)
    meta[args_off : args_off + args_size] = meta[args_off : args_off + args_size].replace(
        b'"bf16"', b'"f32" ', 1
    )
    machine = bytearray(data)
    machine[18:20] = b"\x3e\x00"
    version = bytearray(data)
    version[48] = 9
    return {
        "flipped instruction bit": (bytes(flip), "checksum mismatch"),
        "edited metadata": (bytes(meta), "checksum mismatch"),
        "truncated": (data[: len(data) - 100], "truncated or corrupt: the section header table"),
        "truncated header": (
            data[:40],
            "truncated: the ELF header needs 64 bytes, the file has 40",
        ),
        "other machine": (bytes(machine), "machine is 0x003e"),
        "format version": (bytes(version), "format version is 9"),
        "not ELF": (b"hello, world\n" * 10, "not an ELF file"),
        "empty": (b"", "not an ELF file"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "flipped instruction bit",
        "edited metadata",
        "truncated",
        "truncated header",
        "other machine",
        "format version",
        "not ELF",
        "empty",
    ],
)
def test_invalid_binaries_exit_nonzero_with_the_reason(elf, tmp_path, capsys, case):
    data, reason = _corruptions(elf.read_bytes())[case]
    bad = tmp_path / "bad.elf"
    bad.write_bytes(data)
    status, out, err = objdump(capsys, bad)
    assert status == 1 and out == ""
    assert err.startswith(f"legato-objdump: error: {bad}: ")
    assert reason in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_unreadable_file(tmp_path, capsys):
    status, _, err = objdump(capsys, tmp_path / "missing.elf")
    assert status == 1 and "cannot read: No such file or directory" in err
    status, _, err = objdump(capsys, tmp_path)
    assert status == 1 and "cannot read" in err


@pytest.mark.parametrize(
    "script",
    [
        [sys.executable, str(ROOT / "tools" / "legato-objdump")],
        [sys.executable, "-m", "legato.tools.objdump"],
    ],
)
def test_command_line(elf, tmp_path, script):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run(
        [*script, str(elf)], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert ok.returncode == 0 and "Disassembly of program core0" in ok.stdout
    bad = tmp_path / "bad.elf"
    bad.write_bytes(elf.read_bytes()[:-8])
    res = subprocess.run(
        [*script, str(bad)], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 1
    assert res.stderr.startswith("legato-objdump: error:") and "Traceback" not in res.stderr
    usage = subprocess.run(
        [*script], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert usage.returncode == 2 and "usage: legato-objdump" in usage.stderr
