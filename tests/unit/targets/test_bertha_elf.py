"""ELF writer/reader: layout, readelf, pyelftools, validation and the checksum."""

import io
import json
import shutil
import struct
import subprocess

import pytest
from bertha_helpers import small_model, tensor
from elftools.elf.elffile import ELFFile

from legato.targets.bertha.abi import ArgLayout
from legato.targets.bertha.asm import assemble, disassemble
from legato.targets.bertha.elf import (
    EM_BERTHA,
    BinaryError,
    ChecksumError,
    TargetMismatchError,
    check_target,
    read_elf,
    write_elf,
)
from legato.types import bf16

SRC = """\
.kernel k
.program top on top
    ld r3, 8(r1)
    halt
.program core0 on core(0)
.mem sram 1024
L0:
    qwait sram.q0
    bne r3, r0, L0
    halt
.program spmd on all_cores
    halt
"""


def make(model=None):
    model = model or small_model()
    layout = ArgLayout(
        [tensor("a", bf16, [(-1, 10), 256]), tensor("out", bf16, [10, 128], "write")]
    )
    return write_elf(assemble(SRC), model, layout, compiler={"pipeline": "test"}), model, layout


def test_write_read_round_trip():
    data, model, layout = make()
    b = read_elf(data)
    assert b.kernel == "k"
    assert [(p.name, p.context) for p in b.programs] == [
        ("top", "top"),
        ("core0", "core(0)"),
        ("spmd", "all_cores"),
    ]
    assert b.program("core0").memory == {"sram": 1024}
    assert b.layout == layout
    assert b.target["fingerprint"] == model.fingerprint()
    assert b.compiler["pipeline"] == "test" and b.compiler["format_version"] == 1
    assert disassemble(b) == SRC
    check_target(b, model)


def test_pyelftools_view():
    data, _, _ = make()
    elf = ELFFile(io.BytesIO(data))
    assert elf.elfclass == 64 and elf.little_endian
    assert elf.header["e_type"] == "ET_EXEC"
    assert struct.unpack_from("<H", data, 18)[0] == EM_BERTHA
    names = [s.name for s in elf.iter_sections()]
    for n in (
        ".text.top",
        ".text.core0",
        ".text.spmd",
        ".symtab",
        ".strtab",
        ".shstrtab",
        ".legato.target",
        ".legato.compiler",
        ".legato.programs",
        ".legato.args",
        ".legato.checksum",
    ):
        assert n in names
    syms = {s.name: s for s in elf.get_section_by_name(".symtab").iter_symbols() if s.name}
    assert set(syms) == {"top", "core0", "spmd"}
    for name, s in syms.items():
        assert s["st_info"]["type"] == "STT_FUNC"
        assert elf.get_section(s["st_shndx"]).name == f".text.{name}"
        assert s["st_value"] == 0
    assert syms["core0"]["st_size"] == 3 * 8
    meta = json.loads(elf.get_section_by_name(".legato.programs").data())
    assert meta["programs"][1] == {
        "name": "core0",
        "context": "core",
        "core": 0,
        "section": ".text.core0",
        "instructions": 3,
        "memory": {"sram": 1024},
    }


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf not installed")
def test_readelf_reads_it(tmp_path):
    data, _, _ = make()
    path = tmp_path / "k.elf"
    path.write_bytes(data)
    out = subprocess.run(
        ["readelf", "-h", "-S", "-s", str(path)], capture_output=True, text=True, check=True
    )
    assert "ELF64" in out.stdout and "little endian" in out.stdout
    assert "0xbe27" in out.stdout.lower()
    assert ".text.core0" in out.stdout and ".legato.checksum" in out.stdout
    assert "FUNC    GLOBAL DEFAULT" in out.stdout
    assert "Error" not in out.stderr and "Warning" not in out.stderr


def _section_offset(data, name):
    elf = ELFFile(io.BytesIO(data))
    s = elf.get_section_by_name(name)
    return s["sh_offset"], s["sh_size"]


def test_checksum_detects_tampering():
    data, _, _ = make()
    off, size = _section_offset(data, ".text.core0")
    bad = bytearray(data)
    bad[off + 9] ^= 0x01  # flip a bit of an instruction's a field
    with pytest.raises(ChecksumError, match="checksum mismatch"):
        read_elf(bytes(bad))
    off, size = _section_offset(data, ".legato.args")
    bad = bytearray(data)
    bad[off : off + size] = bad[off : off + size].replace(b'"bf16"', b'"f32" ', 1)
    with pytest.raises(ChecksumError):
        read_elf(bytes(bad))


@pytest.mark.parametrize(
    "patch, msg",
    [
        (lambda b: b.__setitem__(slice(0, 4), b"\x7fELG"), "not an ELF file"),
        (lambda b: b.__setitem__(4, 1), "ELFCLASS64"),
        (lambda b: b.__setitem__(5, 2), "little endian"),
        (lambda b: b.__setitem__(slice(18, 20), struct.pack("<H", 0x3E)), "machine is 0x003e"),
        (lambda b: b.__setitem__(slice(48, 52), struct.pack("<I", 7)), "format version is 7"),
    ],
)
def test_header_validation(patch, msg):
    data, _, _ = make()
    bad = bytearray(data)
    patch(bad)
    with pytest.raises(BinaryError, match=msg):
        read_elf(bytes(bad))


def test_truncated_file():
    data, _, _ = make()
    with pytest.raises(BinaryError):
        read_elf(data[: len(data) // 2])
    with pytest.raises(BinaryError, match="not an ELF"):
        read_elf(b"")


def test_target_mismatch_says_what_differs():
    data, _, _ = make(small_model("bertha"))
    b = read_elf(data)
    with pytest.raises(
        TargetMismatchError, match="chip is 'bertha' in the binary but 'bertha-evt1'"
    ):
        check_target(b, small_model("bertha-evt1"))
    with pytest.raises(TargetMismatchError, match="num_cores is 4 in the binary but 8"):
        check_target(b, small_model("bertha", cores=8))
    with pytest.raises(TargetMismatchError, match="num_memory_channels: binary 8, model 4"):
        check_target(b, small_model("bertha", channels=4))
