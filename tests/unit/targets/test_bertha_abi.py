"""Instruction Table layout and packing."""

import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legato.targets.bertha.abi import ABIError, Arg, ArgLayout, ScalarSpec, TupleSpec, scalar_bits
from legato.types import TensorSpec, bf16, f16, f32, i1, i8, i32, i64

A = TensorSpec.make(bf16, [(-1, 10), 256], "shared_dram")
W = TensorSpec.make(bf16, [256, 128], "mpu_dram")
D2 = TensorSpec.make(f32, [(-1, 4), 3, (-1, 9)], "shared_dram")


MASK = (1 << 64) - 1


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
    with pytest.raises(
        ABIError, match="argument 'a': dim 0 is 11, above its declared upper bound 10"
    ):
        lay.pack([0x1000], [(11, 256)])
    with pytest.raises(ABIError, match="argument 'a': dim 1 must be 256 .*, got 255"):
        lay.pack([0x1000], [(3, 255)])
    with pytest.raises(ABIError, match="expected a rank-2 tensor .*, got shape \\(3,\\)"):
        lay.pack([0x1000], [(3,)])
    with pytest.raises(
        ABIError, match="dtype mismatch: expected bf16 \\(torch.bfloat16\\), got f32"
    ):
        lay.check_tensor(0, f32, (3, 256))
    with pytest.raises(ABIError, match="takes 1 arguments, got 2"):
        lay.pack([1, 2], [(1, 256), (1, 256)])


def test_scalars_and_tuples():
    lay = ArgLayout(
        [
            Arg("n", ScalarSpec(i64)),
            Arg("x", ScalarSpec(f32)),
            Arg("t", TupleSpec((A, ScalarSpec(i32), TupleSpec((W,))))),
            Arg("k", ScalarSpec(i32)),
        ]
    )
    assert lay.scalar_offset(0) == 8 and lay.scalar_offset(1) == 16
    assert lay.address_offset(2, 0) == 24 and lay.dim_offset(2, 0, 0) == 32
    assert lay.scalar_offset(2, 1) == 40 and lay.address_offset(2, 2, 0) == 48
    assert lay.scalar_offset(3) == 56
    b = lay.pack(
        [-3, 1.5, [0x10, 7, [0x20]], 5], [None, None, [(4, 256), None, [(256, 128)]], None]
    )
    w = words(b)
    assert w[0] == 64 and w[1] == -3
    assert w[2] == struct.unpack("<I", struct.pack("<f", 1.5))[0]  # float bits, zero-extended
    assert w[3:] == [0x10, 4, 7, 0x20, 5]
    with pytest.raises(ABIError, match="does not fit i32"):
        lay.pack([0, 0, [0, 1 << 40, [0]], 0], [None, None, [(1, 256), None, [(256, 128)]], None])


def test_json_round_trip():
    lay = ArgLayout(
        [Arg("a", A, "read"), Arg("s", ScalarSpec(f32)), Arg("t", TupleSpec((D2, W)), "readwrite")]
    )
    j = lay.to_json()
    again = ArgLayout.from_json(j)
    assert again == lay and again.to_json() == j
    assert j["args"][0]["type"]["shape"] == [[-1, 10], 256]
    assert [o["word"] for o in j["args"][2]["offsets"]] == [4, 5, 6, 7]


# ---- every dtype's scalar encoding ----------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, value, word",
    [
        (i64, -3, -3),
        (i32, -1, -1),  # sign-extended to 64 bits
        (i32, 2**31 - 1, 2**31 - 1),
        (i8, -128, -128),
        (i1, True, 1),
        (i1, 0, 0),
        (i1, np.bool_(True), 1),
        (i64, np.int64(-7), -7),
        (i64, 4.0, 4),
        (i32, np.array(5), 5),
        (f32, 1.5, struct.unpack("<I", struct.pack("<f", 1.5))[0]),
        (
            f32,
            -2.0,
            struct.unpack("<I", struct.pack("<f", -2.0))[0],
        ),  # bits zero-extended, not sign
        (f16, 1.0, 0x3C00),
        (bf16, 1.0, 0x3F80),
        (bf16, -1.0, 0xBF80),
        (f32, 3, struct.unpack("<I", struct.pack("<f", 3.0))[0]),
    ],
)
def test_scalar_words(dtype, value, word):
    lay = ArgLayout([Arg("s", ScalarSpec(dtype))])
    w = struct.unpack("<Qq", lay.pack([value]))
    assert w[0] == 16 and w[1] == word


@pytest.mark.parametrize(
    "dtype, value, msg",
    [
        (i32, 1 << 31, "argument 's': scalar 2147483648 does not fit i32"),
        (i8, -129, "does not fit i8"),
        (i64, 2.5, "argument 's' is a scalar i64, got the float 2.5"),
        (i64, "3", "argument 's' is a scalar i64, got str"),
        (i64, None, "got NoneType"),
        (i1, 2, "scalar i1 \\(a bool\\), got 2"),
        (f32, True, "scalar f32, got a bool"),
        (f32, np.zeros(2), "scalar f32, got an array of shape \\(2,\\)"),
    ],
)
def test_bad_scalars(dtype, value, msg):
    lay = ArgLayout([Arg("s", ScalarSpec(dtype))])
    with pytest.raises(ABIError, match=msg):
        lay.pack([value])


def test_tuple_errors_name_the_element():
    lay = ArgLayout([Arg("t", TupleSpec((A, TupleSpec((ScalarSpec(i32), W)))))])
    with pytest.raises(ABIError, match="argument 't' is a tuple of 2 elements"):
        lay.pack([[0x10]], [[(1, 256)]])
    with pytest.raises(
        ABIError, match=r"argument 't\[0\]': dim 0 is 11, above its declared upper bound 10"
    ):
        lay.pack([[0x10, [1, 0x20]]], [[(11, 256), [None, (256, 128)]]])
    with pytest.raises(ABIError, match=r"argument 't\[1\]\[0\]' is a scalar i32, got str"):
        lay.pack([[0x10, ["x", 0x20]]], [[(1, 256), [None, (256, 128)]]])
    with pytest.raises(ABIError, match=r"argument 't\[1\]\[1\]': no runtime shape"):
        lay.pack([[0x10, [1, 0x20]]], [[(1, 256), [None, None]]])
    with pytest.raises(ABIError, match=r"argument 0\[1\] is not a tensor"):
        lay.address_offset(0, 1)
    with pytest.raises(ABIError, match=r"argument 0\[0\] is not a scalar"):
        lay.scalar_offset(0, 0)


def test_empty_signature_is_one_word():
    lay = ArgLayout([])
    assert lay.size_bytes == lay.max_size_bytes == 8
    assert words(lay.pack([])) == [8]


def test_inconsistent_recorded_layout_is_refused():
    j = ArgLayout([Arg("a", A), Arg("w", W)]).to_json()
    bad = json.loads(json.dumps(j))
    bad["table_size"] = 40
    with pytest.raises(ABIError, match="recorded table size 40 differs from the layout's 32"):
        ArgLayout.from_json(bad)
    bad = json.loads(json.dumps(j))
    bad["args"][1]["offsets"][0]["word"] = 2  # w's address recorded on a's dim word
    with pytest.raises(ABIError, match="recorded offsets of argument 'w'"):
        ArgLayout.from_json(bad)


# ---- property: any signature packs into aligned, disjoint, fixed-size words ----------------

_dims = st.one_of(st.integers(1, 64), st.tuples(st.just(-1), st.integers(1, 64)))
_tensors = st.builds(
    lambda dt, shape: TensorSpec.make(dt, shape, "shared_dram"),
    st.sampled_from([bf16, f32, i32]),
    st.lists(_dims, min_size=1, max_size=4),
)
_scalars = st.builds(ScalarSpec, st.sampled_from([i64, i32, i8, i1, f32, bf16, f16]))
_types = st.recursive(
    _tensors | _scalars,
    lambda inner: st.builds(
        lambda es: TupleSpec(tuple(es)), st.lists(inner, min_size=1, max_size=3)
    ),
    max_leaves=8,
)


def _leaves(t, path=()):
    if isinstance(t, TupleSpec):
        for j, e in enumerate(t.elements):
            yield from _leaves(e, path + (j,))
    else:
        yield path, t


def _value_and_shape(t, rnd):
    if isinstance(t, TupleSpec):
        pairs = [_value_and_shape(e, rnd) for e in t.elements]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if isinstance(t, ScalarSpec):
        return (rnd.random() < 0.5 if t.dtype == i1 else rnd.randint(-100, 100)), None
    shape = tuple(rnd.randint(0, d.bound) if d.is_dynamic else d.size for d in t.dims)
    return rnd.randrange(0x10000, 1 << 40, 8), shape


@settings(max_examples=60, deadline=None)
@given(st.lists(_types, max_size=5), st.randoms(use_true_random=False))
def test_layout_property(types, rnd):
    lay = ArgLayout(types)
    # the size depends only on the signature (computed before any value is known) ...
    expected_words = 1 + sum(
        1 + len(t.dynamic_dims) if isinstance(t, TensorSpec) else 1
        for a in types
        for _, t in _leaves(a)
    )
    assert lay.num_words == expected_words
    assert lay.size_bytes == lay.max_size_bytes == 8 * expected_words
    # ... every entry is one aligned word, in signature order, no gaps, no overlaps
    offsets = []
    for i, a in enumerate(types):
        for path, t in _leaves(a):
            if isinstance(t, TensorSpec):
                offsets.append(lay.address_offset(i, *path))
                offsets += [lay.dim_offset(i, d, *path) for d in t.dynamic_dims]
            else:
                offsets.append(lay.scalar_offset(i, *path))
    assert offsets == list(range(8, lay.size_bytes, 8))
    # packing writes word 0 = size and each value at its offset, whatever the runtime shapes
    pairs = [_value_and_shape(a, rnd) for a in types]
    table = lay.pack([p[0] for p in pairs], [p[1] for p in pairs])
    assert len(table) == lay.size_bytes
    w = struct.unpack(f"<{lay.num_words}q", table)
    assert w[0] == lay.size_bytes
    for i, (a, (value, shape)) in enumerate(zip(types, pairs)):
        for path, t in _leaves(a):
            v, s = value, shape
            for j in path:
                v, s = v[j], s[j]
            if isinstance(t, TensorSpec):
                assert w[lay.address_word(i, *path)] == v
                for d in t.dynamic_dims:
                    assert w[lay.dim_word(i, d, *path)] == s[d]
            else:
                assert w[lay.scalar_word(i, *path)] & MASK == scalar_bits(t.dtype, v)
    # the recorded layout round-trips and is accepted as consistent
    assert ArgLayout.from_json(json.loads(json.dumps(lay.to_json()))) == lay
