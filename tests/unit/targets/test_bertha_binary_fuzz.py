"""Every byte of a Bertha binary is checked (issue 7, item 1): flipped, truncated, extended or
overwritten variants of a real compiled binary are refused with a `BinaryError` (never another
exception, never a hang), and only the untouched binary runs (and computes the right result).

The reader covers every byte: section names and contents by the SHA-256 checksum, the ELF header,
section headers and padding by the canonical-layout comparison (docs/binary.md)."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seed_kernel import seed_args, seed_binary

from legato.model import bertha
from legato.targets.bertha.elf import BinaryError, read_elf
from legato.targets.bertha.runtime import load_binary, run_binary

MODEL = bertha.evt0()


@pytest.fixture(scope="module")
def original() -> bytes:
    return seed_binary(MODEL)


def check_variant(variant: bytes, original: bytes) -> None:
    args, expected = seed_args(rows=7, seed=1)
    try:
        run_binary(variant, MODEL, args, trace=False)
    except BinaryError:
        assert variant != original, "the untouched binary was refused"
        return
    # only a variant identical to the original may run (flips that cancel out, ...)
    assert variant == original, "a modified binary was accepted"
    assert args[2].tobytes() == expected.tobytes()


def test_original_runs(original):
    check_variant(original, original)


@pytest.mark.parametrize("mask", [0x01, 0x80])
def test_every_single_byte_flip_is_refused(original, mask):
    for i in range(len(original)):
        bad = bytearray(original)
        bad[i] ^= mask
        with pytest.raises(BinaryError):
            read_elf(bytes(bad))


def test_every_truncation_is_refused(original):
    for n in range(len(original)):
        with pytest.raises(BinaryError):
            read_elf(original[:n])


def test_appended_bytes_are_refused(original):
    for extra in (b"\0", b"\0" * 8, b"junk"):
        with pytest.raises(BinaryError, match="extra bytes at the end"):
            read_elf(original + extra)


flips = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), min_size=1, max_size=6)


@st.composite
def variants(draw):
    data = bytearray(seed_binary(MODEL))
    kind = draw(st.sampled_from(["flip", "truncate", "flip+truncate", "overwrite", "splice"]))
    if "flip" in kind:
        for pos, mask in draw(flips):
            data[pos % len(data)] ^= mask
    if "truncate" in kind:
        data = data[: draw(st.integers(0, len(data)))]
    if kind == "overwrite" and data:
        start = draw(st.integers(0, len(data) - 1))
        blob = draw(st.binary(min_size=1, max_size=64))
        data[start : start + len(blob)] = blob
    if kind == "splice":  # delete or insert a run of bytes
        start = draw(st.integers(0, len(data)))
        if draw(st.booleans()):
            del data[start : start + draw(st.integers(1, 64))]
        else:
            data[start:start] = draw(st.binary(min_size=1, max_size=64))
    return bytes(data)


@settings(
    max_examples=300 * int(os.environ.get("LEGATO_FUZZ_SCALE", "1")),  # larger: raise the scale
    deadline=10_000,
    derandomize=True,  # seeded: the same cases every run
    suppress_health_check=[HealthCheck.too_slow],
)
@given(variant=variants())
def test_random_corruptions_are_refused_or_harmless(original, variant):
    check_variant(variant, original)
    # load_binary (what the JIT and tools use) agrees
    if variant != original:
        with pytest.raises(BinaryError):
            load_binary(variant, MODEL)


def test_non_bytes_input_is_refused():
    with pytest.raises(BinaryError):
        read_elf(12345)
    with pytest.raises(BinaryError, match="not an ELF file"):
        read_elf(np.zeros(100, np.uint8).tobytes())
