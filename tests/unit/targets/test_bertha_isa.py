"""ISA table, encoding and the ASM -> words -> ASM round trip."""

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legato.targets.bertha import isa
from legato.targets.bertha.asm import assemble, disassemble, format_instruction

DOCS = Path(__file__).resolve().parents[3] / "docs" / "isa.md"

# One canonical line per mnemonic (core program context).
EXAMPLES = {
    "nop": "nop",
    "halt": "halt",
    "li": "li r3, -5",
    "lih": "lih r3, 4096",
    "lsa": "lsa r4, core3.mpu_buffer, 128",
    "ld": "ld r3, 8(r1)",
    "st": "st r5, -16(r2)",
    "jmp": "jmp L0",
    "dma": "dma r4, r3, r5, core0.sram.q0",
    "dma2d": "dma2d r4, r3, r5, r6, core(r7).sram.q1",
    "qwait": "qwait mpu_buffer.q7",
    "dmawait": "dmawait",
    "barrier": "barrier 2, 33",
    "sem.post": "sem.post 5, 1",
    "sem.wait": "sem.wait 5, 32",
    "mpu.ldw": "mpu.ldw r3, r5, r6",
    "mpu.mm": "mpu.mm r8, r7, r4, f32, acc",
    "vpu.cvt": "vpu.cvt r1, r2, r3, bf16, f32",
    "vpu.fill": "vpu.fill r1, r2, r0, f32",
    "vpu.sel": "vpu.sel r1, r2, r3, r4, bf16, i1",
    "dbg.print": "dbg.print r5, r6, 4294967295",
    "dbg.assert": "dbg.assert r5, r0, 3",
    "pim.gemv": "pim.gemv r9, r10, r11, r12, acc",
}


def example(op: isa.OpInfo) -> str:
    if op.mnemonic in EXAMPLES:
        return EXAMPLES[op.mnemonic]
    return {
        "rrr": f"{op.mnemonic} r1, r2, r31",
        "rri": f"{op.mnemonic} r1, r2, -7",
        "br": f"{op.mnemonic} r1, r2, L0",
        "vbin": f"{op.mnemonic} r1, r2, r3, r4, bf16, bc.col(64)",
        "vun": f"{op.mnemonic} r1, r2, r3, f16",
        "v2d": f"{op.mnemonic} r1, r2, r3, r4, f32",
    }[op.format]


def test_every_instruction_round_trips():
    body = "\n".join("    " + example(op) for op in isa.OPS)
    text = f".kernel k\n.program core0 on core(0)\nL0:\n{body}\n"
    mod = assemble(text)
    assert len(mod.programs[0].instructions) == len(isa.OPS)
    assert disassemble(mod) == text
    words = mod.programs[0].words
    for op, w in zip(isa.OPS, words, strict=True):
        assert w & 0xFF == op.opcode
        assert isa.encode(isa.decode(w)) == w
    assert assemble(disassemble(mod)).programs[0].words == words


def test_table_is_consistent():
    assert len({o.opcode for o in isa.OPS}) == len(isa.OPS)
    assert all(0 < o.opcode < 256 for o in isa.OPS)
    with pytest.raises(isa.DecodeError, match="invalid opcode"):
        isa.decode(0)  # a zeroed word never executes


def test_docs_list_every_mnemonic():
    text = DOCS.read_text()
    documented = set(re.findall(r"^\| `([a-z0-9.]+)` \| `0x([0-9a-f]{2})`", text, re.MULTILINE))
    table = {(o.mnemonic, f"{o.opcode:02x}") for o in isa.OPS}
    assert documented == table


def test_field_layout():
    w = assemble(".program p on core(0)\n    add r1, r2, r3\n").programs[0].words[0]
    assert w == isa.BY_MNEMONIC["add"].opcode | 1 << 8 | 2 << 14 | 3 << 20
    w = assemble(".program p on core(0)\n    li r1, -1\n").programs[0].words[0]
    assert w >> 32 == 0xFFFFFFFF and (w >> 8) & 63 == 1


def test_strict_decoding_rejects_unused_fields():
    w = isa.encode(isa.make("halt"))
    with pytest.raises(isa.DecodeError, match="unused field a"):
        isa.decode(w | 1 << 8)
    with pytest.raises(isa.DecodeError, match="unused imm"):
        isa.decode(w | 1 << 40)
    mm = isa.encode(isa.make("mpu.mm", 1, 2, 3, imm=isa.MM_F32))
    with pytest.raises(isa.DecodeError, match="reserved flag"):
        isa.decode(mm | 1 << 36)


# ---- hypothesis: random valid instructions ---------------------------------------------------
reg = st.integers(0, 31)
imm = st.integers(isa.IMM_MIN, isa.IMM_MAX)
space = st.sampled_from(sorted(isa.SPACES))
dtype = st.sampled_from(sorted(isa.DTYPES))


@st.composite
def operands(draw, op):
    r = lambda: f"r{draw(reg)}"
    f = op.format
    if f == "none":
        return ""
    if f == "ri":
        return f"{r()}, {draw(imm)}"
    if f == "lsa":
        sel = draw(st.sampled_from(["", "static", "reg"]))
        pre = {"": "", "static": f"core{draw(st.integers(0, 63))}.", "reg": f"core({r()})."}[sel]
        return f"{r()}, {pre}{draw(space)}, {draw(st.integers(0, isa.UIMM_MAX))}"
    if f in ("rrr", "mpu_ldw"):
        return f"{r()}, {r()}, {r()}"
    if f == "rri":
        return f"{r()}, {r()}, {draw(imm)}"
    if f in ("ld", "st"):
        return f"{r()}, {draw(imm)}({r()})"
    if f in ("br", "jmp"):
        target = draw(st.sampled_from(["L0", "L1"]))
        return f"{r()}, {r()}, {target}" if f == "br" else target
    if f == "dma":
        s = f"{r()}, {r()}, {r()}"
        sel = draw(st.sampled_from([None, "", "static", "reg"]))
        if sel is None:
            return s
        pre = {"": "", "static": f"core{draw(st.integers(0, 63))}.", "reg": f"core({r()})."}[sel]
        return s + f", {pre}{draw(space)}.q{draw(st.integers(0, 255))}"
    if f == "dma2d":
        s = f"{r()}, {r()}, {r()}, {r()}"
        sel = draw(st.sampled_from([None, "", "static", "reg"]))
        if sel is None:
            return s
        pre = {"": "", "static": f"core{draw(st.integers(0, 63))}.", "reg": f"core({r()})."}[sel]
        return s + f", {pre}{draw(space)}.q{draw(st.integers(0, 255))}"
    if f == "qwait":
        return f"{draw(space)}.q{draw(st.integers(0, 255))}"
    if f == "sync":
        return f"{draw(st.integers(0, 63))}, {draw(st.integers(0, isa.IMM_MAX))}"
    if f == "mpu_mm":
        return f"{r()}, {r()}, {r()}, " + draw(st.sampled_from(["bf16", "f32", "f32, acc"]))
    if f == "vbin":
        s = f"{r()}, {r()}, {r()}, {r()}, {draw(dtype)}"
        bc = draw(st.sampled_from([None, "scalar", "row", "col"]))
        if bc == "scalar":
            s += ", bc.scalar"
        elif bc:
            s += f", bc.{bc}({draw(st.integers(1, (1 << 24) - 1))})"
        return s
    if f in ("vun", "vfill"):
        return f"{r()}, {r()}, {r()}, {draw(dtype)}"
    if f == "vcvt":
        dst = draw(st.sampled_from(sorted(isa.CVT_DTYPES)))  # i64 too
        return f"{r()}, {r()}, {r()}, {dst}, {draw(dtype)}"
    if f == "v2d":
        return f"{r()}, {r()}, {r()}, {r()}, {draw(dtype)}"
    if f == "vsel":
        cdt = draw(st.sampled_from(sorted(isa.COND_DTYPES)))
        return f"{r()}, {r()}, {r()}, {r()}, {draw(dtype)}, {cdt}"
    if f == "dbg":
        return f"{r()}, {r()}, {draw(st.integers(0, isa.UIMM_MAX))}"
    if f == "pim":
        return f"{r()}, {r()}, {r()}, {r()}" + draw(st.sampled_from(["", ", acc"]))
    raise AssertionError(f)


@st.composite
def program_text(draw):
    ops = draw(st.lists(st.sampled_from(isa.OPS), min_size=2, max_size=12))
    lines = []
    for op in ops:
        o = draw(operands(op))
        lines.append(f"    {op.mnemonic} {o}".rstrip())
    lines.insert(0, "L0:")
    lines.insert(2, "L1:")
    return ".program p on core(1)\n" + "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(program_text())
def test_random_programs_round_trip(text):
    mod = assemble(text)
    words = mod.programs[0].words
    canon = disassemble(mod)
    again = assemble(canon)
    assert again.programs[0].words == words
    assert disassemble(again) == canon
    for w in words:
        ins = isa.decode(w)
        assert isa.encode(ins) == w
        if ins.op.format not in ("br", "jmp"):
            assert format_instruction(ins).split()[0] == ins.op.mnemonic


@settings(max_examples=500, deadline=None)
@given(st.integers(0, (1 << 64) - 1))
def test_random_words_decode_canonically_or_fail(word):
    try:
        ins = isa.decode(word)
    except isa.DecodeError:
        return
    assert isa.encode(ins) == word
    text = ".program p on core(0)\n    " + format_instruction(ins) + "\n"
    assert assemble(text).programs[0].words == [word]


def test_vcvt_takes_i64_only_as_its_result():
    mod = assemble(".program p on core(1)\n    vpu.cvt r1, r2, r3, i64, f32\n")
    (w,) = mod.programs[0].words
    assert isa.decode(w).imm == isa.CVT_DTYPES["i64"] | isa.DTYPES["f32"] << 4
    assert "vpu.cvt r1, r2, r3, i64, f32" in disassemble(mod)
    with pytest.raises(Exception, match="unknown element type 'i64'"):
        assemble(".program p on core(1)\n    vpu.cvt r1, r2, r3, f32, i64\n")
    with pytest.raises(Exception, match="unknown element type 'i64'"):
        assemble(".program p on core(1)\n    vpu.add r1, r2, r3, r4, i64\n")
