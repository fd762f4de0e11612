"""Authenticity of binaries (issue 17, item 6): the checksum is integrity only, so the attacks
below recompute it; the runtime refuses an `isa_version` it does not implement, a signed-binary
check (`key=`) refuses unsigned, re-signed or modified binaries, and an argument flipped from
`read` to `write` in the metadata is refused against the kernel's own signature."""

import json

import numpy as np
import pytest
from bertha_helpers import build, tensor

from legato import jit
from legato.errors import LegatoRuntimeError
from legato.targets.bertha import elf
from legato.targets.bertha.elf import BinaryError, SignatureError, sign_binary, verify_signature
from legato.targets.bertha.emulator import EmulatorFault
from legato.targets.bertha.runtime import run_binary
from legato.types import i64
from tests.corpus.one_core import double

# Writes 42 into its argument `a`, which the signature declares `read`.
WRITES_INPUT = """\
.program top on top
    ld r3, 8(r1)
    li r4, 42
    st r4, 0(r3)
    halt
"""
KEY = b"k" * 32


def rewrite(binary: bytes, section: str, contents: bytes) -> bytes:
    """`binary` with `section`'s contents replaced and the (unkeyed) checksum recomputed: what
    anyone can do to a binary."""
    raw = elf._raw_sections(binary)
    secs = [(n, contents if n == section else d) for n, _t, _f, d in raw[:-1]]
    shstrtab = elf._shstrtab([n for n, _ in secs])
    digest = elf.section_digest(
        [(n, d) for n, d in secs if n != elf.CHECKSUM_SECTION] + [(".shstrtab", shstrtab)]
    )
    return elf.layout_elf(
        [(n, digest.encode() if n == elf.CHECKSUM_SECTION else d) for n, d in secs]
    )


def edit_json(binary: bytes, section: str, fn) -> bytes:
    (contents,) = [d for n, _t, _f, d in elf._raw_sections(binary) if n == section]
    meta = json.loads(contents)
    fn(meta)
    return rewrite(binary, section, elf._json_bytes(meta))


def flip_access(binary: bytes, name: str, access: str) -> bytes:
    def fn(meta):
        (arg,) = [a for a in meta["args"] if a["name"] == name]
        arg["access"] = access

    return edit_json(binary, ".legato.args", fn)


def test_a_rehashed_binary_is_accepted_by_the_checksum(model):
    # The premise: the checksum is integrity only; a modified, re-hashed binary reads fine.
    binary = build(WRITES_INPUT, [tensor("a", i64, [1], "read")], model)
    elf.read_elf(flip_access(binary, "a", "write"))


def test_other_isa_version_is_refused(model):
    binary = build(WRITES_INPUT, [tensor("a", i64, [1], "write")], model)
    for version in (2, 0, None, "1"):
        bad = edit_json(binary, ".legato.compiler", lambda m, v=version: m.update(isa_version=v))
        with pytest.raises(
            BinaryError, match=r"isa_version is .*this runtime implements ISA version 1"
        ):
            run_binary(bad, model, [np.zeros(1, np.int64)])
    bad = edit_json(binary, ".legato.compiler", lambda m: m.pop("isa_version"))
    with pytest.raises(BinaryError, match="isa_version is None"):
        elf.read_elf(bad)


def test_flipped_access_is_refused_against_the_kernels_signature(model):
    binary = build(WRITES_INPUT, [tensor("a", i64, [1], "read")], model)
    a = np.zeros(1, np.int64)
    with pytest.raises(EmulatorFault, match="read-only"):  # the honest binary cannot write it
        run_binary(binary, model, [a])
    flipped = flip_access(binary, "a", "write")
    # Without the kernel's own signature the runtime trusts the metadata: the attack lands.
    run_binary(flipped, model, [a])
    assert a[0] == 42
    a[0] = 0
    with pytest.raises(
        BinaryError, match="marks it 'write' but the kernel's signature says 'read'"
    ):
        run_binary(flipped, model, [a], expected_access=["read"])
    assert a[0] == 0


# ---- signatures ----------------------------------------------------------------------------


@pytest.fixture
def signed(model):
    return sign_binary(build(WRITES_INPUT, [tensor("a", i64, [1], "write")], model), KEY)


def test_a_signed_binary_runs_with_its_key_and_without_one(signed, model):
    assert verify_signature(signed, KEY).signature
    for key in (KEY, None):
        a = np.zeros(1, np.int64)
        run_binary(signed, model, [a], key=key)
        assert a[0] == 42
    # signing is idempotent and a re-signed binary with another key replaces the signature
    assert sign_binary(signed, KEY) == signed
    other = sign_binary(signed, b"o" * 32)
    verify_signature(other, b"o" * 32)
    with pytest.raises(SignatureError, match="does not verify"):
        verify_signature(other, KEY)


def test_unsigned_binary_is_refused_when_a_key_is_required(model):
    binary = build(WRITES_INPUT, [tensor("a", i64, [1], "write")], model)
    with pytest.raises(SignatureError, match="binary is not signed"):
        run_binary(binary, model, [np.zeros(1, np.int64)], key=KEY)


def test_signed_binary_modified_and_rehashed_is_refused(signed, model):
    other = build(WRITES_INPUT.replace("42", "7"), [tensor("a", i64, [1], "write")], model)
    code = b"".join(w.to_bytes(8, "little") for w in elf.read_elf(other).programs[0].words)
    flipped_code = rewrite(signed, ".text.top", code)
    elf.read_elf(flipped_code)  # consistent: the checksum was recomputed
    a = np.zeros(1, np.int64)
    with pytest.raises(SignatureError, match="does not verify"):
        run_binary(flipped_code, model, [a], key=KEY)
    assert a[0] == 0
    with pytest.raises(SignatureError, match="does not verify"):
        run_binary(flip_access(signed, "a", "readwrite"), model, [a], key=KEY)


def test_a_short_or_missing_key_is_refused(signed):
    with pytest.raises(SignatureError, match="at least 16 bytes, got 3"):
        verify_signature(signed, b"abc")
    with pytest.raises(SignatureError, match="got str"):
        sign_binary(signed, "a string")


def test_a_malformed_signature_section_is_refused(signed):
    bad = rewrite(signed, elf.SIGNATURE_SECTION, b"zz" * 32)
    with pytest.raises(BinaryError, match="not 64 lowercase hex digits"):
        elf.read_elf(bad)


# ---- through the JIT --------------------------------------------------------------------------


def test_the_jit_refuses_a_binary_whose_metadata_flips_an_input(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path))
    jit.clear_memory_cache()
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = np.zeros_like(x)
    double(x, out)
    artifacts = double.last_artifacts
    assert artifacts.arg_access == ["read", "write"]
    stored = jit.cache.disk_load(double.last_key)
    assert stored.arg_access == ["read", "write"]  # recorded in the signed entry
    artifacts.binary = flip_access(bytes(artifacts.binary), "x", "readwrite")
    try:
        with pytest.raises(
            LegatoRuntimeError, match="argument 'x': the binary's metadata marks it 'readwrite'"
        ):
            double(x, out)
    finally:
        jit.clear_memory_cache()


# ---- legato-run on binaries -------------------------------------------------------------------


def test_legato_run_signs_verifies_and_runs_binaries(tmp_path, capsys):
    from legato.model.targets import target_model
    from legato.tools import run

    model = target_model("bertha")
    path = tmp_path / "k.elf"
    path.write_bytes(build(WRITES_INPUT, [tensor("a", i64, [1], "write")], model))
    key, other = tmp_path / "key", tmp_path / "other"
    key.write_bytes(KEY)
    other.write_bytes(b"o" * 32)
    assert run.main([str(path), "-a", "zeros"]) == 0
    assert capsys.readouterr().out == "%a : tensor<[1], i64, shared_dram> = [42]\n"
    # unsigned, a key required: refused with a clear error, nothing printed
    assert run.main([str(path), "-a", "zeros", "--key", str(key)]) == 1
    err = capsys.readouterr()
    assert "legato-run: error: binary is not signed" in err.err and "[42]" not in err.out
    signed = tmp_path / "signed.elf"
    assert run.main([str(path), "--sign", str(key), "-o", str(signed)]) == 0
    assert run.main([str(signed), "-a", "zeros", "--key", str(key)]) == 0
    assert "[42]" in capsys.readouterr().out
    assert run.main([str(signed), "-a", "zeros", "--key", str(other)]) == 1
    assert "does not verify with the given key" in capsys.readouterr().err
    assert run.main([str(path), "--sign", str(key)]) == 1
    assert "--sign needs -o" in capsys.readouterr().err
