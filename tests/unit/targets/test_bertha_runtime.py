"""run_binary refuses, before running, what does not match; and runs what does."""

import io

import numpy as np
import pytest
from bertha_helpers import BF16, build, small_model, tensor
from elftools.elf.elffile import ELFFile

from legato.targets.bertha.abi import ABIError, Arg, ArgLayout, ScalarSpec, TupleSpec
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import BinaryError, ChecksumError, TargetMismatchError, write_elf
from legato.targets.bertha.runtime import run_binary
from legato.types import TensorSpec, bf16, f32, i64

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
ARGS = [
    tensor("out", i64, [1], "write"),
    tensor("a", bf16, [(-1, 10), 4]),
    Arg("n", ScalarSpec(i64)),
]


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
        run_binary(
            binary, small_model("bertha-evt1"), [np.zeros(1, np.int64), np.zeros((1, 4), BF16), 1]
        )


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
        (
            lambda: [np.zeros(1, np.int64), np.zeros((11, 4), BF16), 1],
            "argument 'a': dim 0 is 11, above its declared upper bound 10",
        ),
        (
            lambda: [np.zeros(1, np.int64), np.zeros((3, 5), BF16), 1],
            "argument 'a': dim 1 must be 4 .*, got 5",
        ),
        (
            lambda: [np.zeros(1, np.int64), np.zeros((3, 4), np.float32), 1],
            r"argument 'a': dtype mismatch: expected bf16 \(torch.bfloat16\), got f32",
        ),
        (
            lambda: [np.zeros(1, np.int64), np.zeros((3, 4, 1), BF16), 1],
            "argument 'a': expected a rank-2 tensor",
        ),
        (lambda: [[0], np.zeros((3, 4), BF16), 1], "argument 'out' must be a numpy array"),
        (
            lambda: [np.zeros(1, np.int64), np.zeros((3, 4), BF16), np.zeros(2)],
            "argument 'n' is a scalar i64, got an array of shape",
        ),
    ],
)
def test_refuses_mismatched_arguments(binary, model, args, msg):
    out_before = np.zeros(1, np.int64)
    with pytest.raises(ABIError, match=msg):
        run_binary(binary, model, args())
    assert out_before[0] == 0


def test_refuses_oversized_footprint(model):
    src = f".program c on core(0)\n.mem sram {model.sram_size + 1}\n    halt\n"
    binary = build(src, [], model)
    for _ in range(2):  # (every run: a refusal is not remembered as checked)
        with pytest.raises(BinaryError, match="needs 2097153 bytes of sram"):
            run_binary(binary, model, [])


def test_f32_scalar_bits(model):
    src = ".program top on top\n    ld r3, 8(r1)\n    ld r4, 16(r1)\n    st r4, 0(r3)\n    halt\n"
    out = np.zeros(1, np.int64)
    b = build(src, [tensor("out", i64, [1], "write"), Arg("x", ScalarSpec(f32))], model)
    run_binary(b, model, [out, 2.5])
    assert out.view(np.float32)[0] == 2.5


def test_refuses_two_programs_on_one_core(model):
    src = ".program s on all_cores\n    halt\n.program c on core(2)\n    halt\n"
    binary = build(src, [], model)
    for _ in range(2):
        with pytest.raises(BinaryError, match="core 2 would run two programs: 's' and 'c'"):
            run_binary(binary, model, [])


# ---- tuples and scalars through the emulator -----------------------------------------------

TUPLE_SRC = """\
.program top on top
    ld r3, 8(r1)       ; out
    ld r4, 16(r1)      ; t[0]: address of x
    ld r5, 24(r1)      ; t[0]: x dim 0
    ld r6, 32(r1)      ; t[1][0]: scalar k
    ld r7, 40(r1)      ; t[1][1]: address of y
    ld r8, 0(r1)       ; word 0: the table's size
    add r9, r5, r6
    st r9, 0(r3)       ; out[0] = x.shape[0] + k
    st r8, 8(r3)       ; out[1] = table size
    st r6, 0(r4)       ; x[0] = k   (written back: t is readwrite)
    st r5, 0(r7)       ; y[0] = x.shape[0]
    halt
"""
TUPLE_ARGS = [
    tensor("out", i64, [2], "write"),
    Arg(
        "t",
        TupleSpec(
            (
                TensorSpec.make(i64, [(-1, 8)], "shared_dram"),
                TupleSpec((ScalarSpec(i64), TensorSpec.make(i64, [1], "shared_dram"))),
            )
        ),
        "readwrite",
    ),
]


def test_tuple_argument_end_to_end(model):
    b = build(TUPLE_SRC, TUPLE_ARGS, model)
    out, x, y = np.zeros(2, np.int64), np.zeros(5, np.int64), np.zeros(1, np.int64)
    run_binary(b, model, [out, (x, [-40, y])])
    assert list(out) == [5 - 40, 48]  # 6 words: size, out, x, x.dim0, k, y
    assert x[0] == -40 and y[0] == 5


@pytest.mark.parametrize(
    "t, msg",
    [
        (
            lambda: (np.zeros(9, np.int64), [1, np.zeros(1, np.int64)]),
            r"argument 't\[0\]': dim 0 is 9, above its declared upper bound 8",
        ),
        (
            lambda: (np.zeros(2, np.int64), [1.5, np.zeros(1, np.int64)]),
            r"argument 't\[1\]\[0\]' is a scalar i64, got the float 1.5",
        ),
        (
            lambda: (np.zeros(2, np.int64), [1, np.zeros(2, np.int64)]),
            r"argument 't\[1\]\[1\]': dim 0 must be 1 .*, got 2",
        ),
        (lambda: (np.zeros(2, np.int64),), r"argument 't' must be a tuple of 2 elements"),
        (lambda: np.zeros(2, np.int64), r"argument 't' must be a tuple of 2 elements"),
    ],
)
def test_tuple_argument_refused_before_running(model, t, msg):
    b = build(TUPLE_SRC, TUPLE_ARGS, model)
    out = np.full(2, 7, np.int64)
    with pytest.raises(ABIError, match=msg):
        run_binary(b, model, [out, t()])
    assert list(out) == [7, 7]  # nothing ran, nothing was written back


@pytest.mark.parametrize(
    "value, msg",
    [
        ("1", "argument 'n' is a scalar i64, got str"),
        (2.5, "argument 'n' is a scalar i64, got the float 2.5"),
        (1 << 63, "does not fit i64"),
    ],
)
def test_bad_scalar_refused_before_running(binary, model, value, msg):
    out = np.full(1, 7, np.int64)
    with pytest.raises(ABIError, match=msg):
        run_binary(binary, model, [out, np.zeros((3, 4), BF16), value])
    assert out[0] == 7


class _RecordedLayout(ArgLayout):
    """Writes a `.legato.args` whose max_table_size is `max_size` (a forged/broken compiler)."""

    def __init__(self, args, max_size):
        super().__init__(args)
        self.max_size = max_size

    def to_json(self):
        return {**super().to_json(), "max_table_size": self.max_size}


def test_max_table_size_checked_at_run_time(model):
    b = write_elf(assemble(SRC), model, _RecordedLayout(ARGS, 24))
    with pytest.raises(BinaryError, match="max_table_size 24 is below the table's 40 bytes"):
        run_binary(b, model, [np.zeros(1, np.int64), np.zeros((3, 4), BF16), 1])
    # a larger recorded maximum is fine: the table is packed at its fixed size
    b = write_elf(assemble(SRC), model, _RecordedLayout(ARGS, 64))
    out = np.zeros(1, np.int64)
    run_binary(b, model, [out, np.zeros((3, 4), BF16), 1])
    assert out[0] == 4
