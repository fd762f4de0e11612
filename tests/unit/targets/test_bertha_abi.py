"""Instruction Table layout and packing."""

import struct

import pytest

from legato.targets.bertha.abi import ABIError, Arg, ArgLayout, ScalarSpec, TupleSpec
from legato.types import TensorSpec, bf16, f32, i32, i64

A = TensorSpec.make(bf16, [(-1, 10), 256], "shared_dram")
W = TensorSpec.make(bf16, [256, 128], "mpu_dram")
D2 = TensorSpec.make(f32, [(-1, 4), 3, (-1, 9)], "shared_dram")


def words(b):
    return list(struct.unpack(f"<{len(b) // 8}q", b))


def test_layout_offsets():
    lay = ArgLayout([A, W, D2])
    # word 0 size; A: addr, dim0; W: addr; D2: addr, dim0, dim2
    assert lay.address_offset(0) == 8 and lay.dim_offset(0, 0) == 16
    assert lay.address_offset(1) == 24
    assert lay.address_offset(2) == 32
    assert lay.dim_offset(2, 0) == 40 and lay.dim_offset(2, 2) == 48
    assert lay.address_word(2) == 4 and lay.dim_word(2, 2) == 6
    assert lay.size_bytes == lay.max_size_bytes == 56
    with pytest.raises(ABIError, match="dim 1 is not a dynamic dim"):
        lay.dim_offset(2, 1)
    with pytest.raises(ABIError, match="dim 0 is not a dynamic dim"):
        lay.dim_offset(1, 0)


def test_pack():
    lay = ArgLayout([A, W, D2])
    b = lay.pack([0x1000, 0x2000, 0x3000], [(7, 256), (256, 128), (2, 3, 9)])
    assert words(b) == [56, 0x1000, 7, 0x2000, 0x3000, 2, 9]
    assert len(b) % 8 == 0


def test_bounds_and_shapes_are_checked():
    lay = ArgLayout([A], names=["a"])
    with pytest.raises(ABIError, match="argument 'a' dim 0 is 11 but its bound is 10"):
        lay.pack([0x1000], [(11, 256)])
    with pytest.raises(ABIError, match="argument 'a' dim 1 is 255 but the kernel expects 256"):
        lay.pack([0x1000], [(3, 255)])
    with pytest.raises(ABIError, match="rank 1"):
        lay.pack([0x1000], [(3,)])
    with pytest.raises(ABIError, match="dtype f32 but the kernel expects bf16"):
        lay.check_tensor(0, f32, (3, 256))
    with pytest.raises(ABIError, match="takes 1 arguments, got 2"):
        lay.pack([1, 2], [(1, 256), (1, 256)])


def test_scalars_and_tuples():
    lay = ArgLayout([Arg("n", ScalarSpec(i64)), Arg("x", ScalarSpec(f32)),
                     Arg("t", TupleSpec((A, ScalarSpec(i32), TupleSpec((W,))))),
                     Arg("k", ScalarSpec(i32))])
    assert lay.scalar_offset(0) == 8 and lay.scalar_offset(1) == 16
    assert lay.address_offset(2, 0) == 24 and lay.dim_offset(2, 0, 0) == 32
    assert lay.scalar_offset(2, 1) == 40 and lay.address_offset(2, 2, 0) == 48
    assert lay.scalar_offset(3) == 56
    b = lay.pack([-3, 1.5, [0x10, 7, [0x20]], 5], [None, None, [(4, 256), None, [(256, 128)]], None])
    w = words(b)
    assert w[0] == 64 and w[1] == -3
    assert w[2] == struct.unpack("<I", struct.pack("<f", 1.5))[0]  # float bits, zero-extended
    assert w[3:] == [0x10, 4, 7, 0x20, 5]
    with pytest.raises(ABIError, match="does not fit i32"):
        lay.pack([0, 0, [0, 1 << 40, [0]], 0], [None, None, [(1, 256), None, [(256, 128)]], None])


def test_json_round_trip():
    lay = ArgLayout([Arg("a", A, "read"), Arg("s", ScalarSpec(f32)),
                     Arg("t", TupleSpec((D2, W)), "readwrite")])
    j = lay.to_json()
    again = ArgLayout.from_json(j)
    assert again == lay and again.to_json() == j
    assert j["args"][0]["type"]["shape"] == [[-1, 10], 256]
    assert [o["word"] for o in j["args"][2]["offsets"]] == [4, 5, 6, 7]
