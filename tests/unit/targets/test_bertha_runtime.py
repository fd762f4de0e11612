"""run_binary refuses, before running, what does not match; and runs what does."""

import io

import numpy as np
import pytest
from bertha_helpers import BF16, build, small_model, tensor
from elftools.elf.elffile import ELFFile

from legato.targets.bertha.abi import ABIError, Arg, ScalarSpec
from legato.targets.bertha.elf import BinaryError, ChecksumError, TargetMismatchError
from legato.targets.bertha.runtime import run_binary
from legato.types import bf16, f32, i64

SRC = """\
.program top on top
    ld r3, 8(r1)       ; out
    ld r4, 16(r1)      ; a
    ld r5, 24(r1)      ; a dim 0
    ld r6, 32(r1)      ; scalar n
    add r7, r5, r6
    st r7, 0(r3)
    halt
"""
ARGS = [tensor("out", i64, [1], "write"), tensor("a", bf16, [(-1, 10), 4]),
        Arg("n", ScalarSpec(i64))]


@pytest.fixture
def binary(model):
    return build(SRC, ARGS, model)


def test_runs_and_writes_back(binary, model):
    out = np.zeros(1, np.int64)
    res = run_binary(binary, model, [out, np.zeros((7, 4), BF16), 100])
    assert out[0] == 107
    assert res.instructions["top"] == 7


def test_refuses_other_target(binary):
    with pytest.raises(TargetMismatchError, match="generation is 'evt0' in the binary but 'evt1'"):
        run_binary(binary, small_model("bertha-evt1"), [np.zeros(1, np.int64),
                                                        np.zeros((1, 4), BF16), 1])


def test_refuses_tampered_binary(binary, model):
    elf = ELFFile(io.BytesIO(binary))
    off = elf.get_section_by_name(".text.top")["sh_offset"]
    bad = bytearray(binary)
    bad[off + 32] ^= 0x10
    with pytest.raises(ChecksumError):
        run_binary(bytes(bad), model, [np.zeros(1, np.int64), np.zeros((1, 4), BF16), 1])
    with pytest.raises(BinaryError, match="not an ELF"):
        run_binary(b"hello", model, [])


@pytest.mark.parametrize(
    "args, msg",
    [
        (lambda: [np.zeros(1, np.int64)], "takes 3 arguments \\(out, a, n\\), got 1"),
        (lambda: [np.zeros(1, np.int64), np.zeros((11, 4), BF16), 1],
         "argument 'a' dim 0 is 11 but its bound is 10"),
        (lambda: [np.zeros(1, np.int64), np.zeros((3, 5), BF16), 1],
         "argument 'a' dim 1 is 5 but the kernel expects 4"),
        (lambda: [np.zeros(1, np.int64), np.zeros((3, 4), np.float32), 1],
         "argument 'a' has dtype f32 but the kernel expects bf16"),
        (lambda: [np.zeros(1, np.int64), np.zeros((3, 4, 1), BF16), 1], "argument 'a' has rank 3"),
        (lambda: [[0], np.zeros((3, 4), BF16), 1], "argument 'out' must be a numpy array"),
        (lambda: [np.zeros(1, np.int64), np.zeros((3, 4), BF16), np.zeros(2)],
         "argument 'n' is a scalar"),
    ],
)
def test_refuses_mismatched_arguments(binary, model, args, msg):
    out_before = np.zeros(1, np.int64)
    with pytest.raises(ABIError, match=msg):
        run_binary(binary, model, args())
    assert out_before[0] == 0


def test_refuses_oversized_footprint(model):
    src = f".program c on core(0)\n.mem sram {model.sram_size + 1}\n    halt\n"
    with pytest.raises(BinaryError, match="needs 2097153 bytes of sram"):
        run_binary(build(src, [], model), model, [])


def test_f32_scalar_bits(model):
    src = ".program top on top\n    ld r3, 8(r1)\n    ld r4, 16(r1)\n    st r4, 0(r3)\n    halt\n"
    out = np.zeros(1, np.int64)
    b = build(src, [tensor("out", i64, [1], "write"), Arg("x", ScalarSpec(f32))], model)
    run_binary(b, model, [out, 2.5])
    assert out.view(np.float32)[0] == 2.5


def test_refuses_two_programs_on_one_core(model):
    src = ".program s on all_cores\n    halt\n.program c on core(2)\n    halt\n"
    with pytest.raises(BinaryError, match="core 2 would run two programs: 's' and 'c'"):
        run_binary(build(src, [], model), model, [])
