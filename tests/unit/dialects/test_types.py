"""TensorType/BufType <-> legato.types.TensorSpec, element types and contexts."""

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import BFloat16Type, Float32Type, ModuleOp, StringAttr, i32
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from legato import types
from legato.dialects.core import BufType, Core
from legato.dialects.legato import (
    ContextAttr,
    Legato,
    TensorType,
    broadcast_shapes,
    context_from_str,
    dtype_of_element_type,
    element_type,
)
from legato.types import Dim, TensorSpec


def ctx() -> Context:
    c = Context()
    c.load_dialect(Legato)
    c.load_dialect(Core)
    return c


SPECS = [
    TensorSpec.make(types.bf16, [(-1, 10), 256], "shared_dram"),
    TensorSpec.make(types.f32, [4, 8, 16], "sram"),
    TensorSpec.make(types.i32, [], "private_dram"),
    TensorSpec.make(types.f16, [(-1, 1), (-1, 7)], "mpu_buffer"),
    TensorSpec.make(types.i8, 5, "mpu_dram"),
    TensorSpec.make(types.bf16, [256, 128], "mpu_weight"),
]


@pytest.mark.parametrize("spec", SPECS, ids=str)
@pytest.mark.parametrize("cls", [TensorType, BufType])
def test_spec_round_trip(spec, cls):
    t = cls.from_spec(spec)
    assert t.to_spec() == spec
    assert t.dims == spec.dims
    assert t.dtype == spec.dtype
    assert t.space == spec.memory
    assert t.rank == spec.rank
    assert t.dynamic_dims == spec.dynamic_dims
    assert t.max_bytes == spec.max_bytes
    t.verify()


@pytest.mark.parametrize("spec", SPECS, ids=str)
@pytest.mark.parametrize("cls", [TensorType, BufType])
def test_text_round_trip(spec, cls):
    t = cls.from_spec(spec)
    text = str(t)
    assert text.startswith(f"!{cls.name}<[")
    parsed = Parser(ctx(), text).parse_type()
    assert parsed == t
    assert parsed.to_spec() == spec


def test_syntax():
    t = TensorType([(-1, 10), 256], "bf16", "shared_dram")
    assert str(t) == "!legato.tensor<[?10, 256], bf16, shared_dram>"
    assert t.get_shape() == (-1, 256)
    assert t.get_bounds() == (10, 256)
    assert t.element_type == BFloat16Type()
    assert str(BufType([Dim(None, 3)], types.f32, "sram")) == "!core.buf<[?3], f32, sram>"


def test_builders_accept_every_spelling():
    a = TensorType([2, (-1, 4)], types.f32, "sram")
    b = TensorType([Dim(2, 2), Dim(None, 4)], "f32", "sram")
    c = TensorType((2, [-1, 4]), Float32Type(), "sram")
    assert a == b == c
    assert a.with_memory("private_dram").space == "private_dram"
    assert a.with_element_type("bf16").dtype == types.bf16
    assert a.with_dims([3]).dims == (Dim(3, 3),)
    assert BufType.from_tensor(a).to_spec() == a.to_spec()


def test_element_types():
    for name in ("bf16", "f16", "f32", "i32", "i64", "i8", "i1"):
        attr = element_type(name)
        assert dtype_of_element_type(attr) == types.dtype_from_name(name)
        assert element_type(types.dtype_from_name(name)) == attr
    assert element_type(i32) is i32
    with pytest.raises(ValueError, match="unsupported element type"):
        element_type("f64")


def test_unbounded_dynamic_dim_is_rejected():
    with pytest.raises(TypeError, match="no upper bound"):
        TensorType([-1], "f32", "sram")


def test_verify_rejects_bad_parameters():
    with pytest.raises(VerifyException, match="unknown memory space 'dram'"):
        TensorType([4], "f32", "dram").verify()


def test_contexts():
    assert ContextAttr.top().spelling == "top"
    assert ContextAttr.core(3).spelling == "core(3)"
    assert ContextAttr.all_cores().spelling == "all_cores"
    assert context_from_str("core(12)") == ContextAttr.core(12)
    assert context_from_str("all_cores").is_all_cores
    assert ContextAttr.core(2).core_index == 2 and ContextAttr.top().core_index is None
    assert str(ContextAttr.core(1)) == "#legato.context<core(1)>"
    assert Parser(ctx(), "#legato.context<all_cores>").parse_attribute() == ContextAttr.all_cores()
    with pytest.raises(ValueError):
        context_from_str("cores")
    with pytest.raises(VerifyException, match="takes no core index"):
        ContextAttr("top", 1).verify()


def test_broadcast_shapes():
    d = lambda *xs: tuple(Dim(None, -x) if x < 0 else Dim(x, x) for x in xs)
    assert broadcast_shapes(d(4, 1), d(3)) == d(4, 3)
    assert broadcast_shapes(d(-10, 256), d(1, 256)) == d(-10, 256)
    assert broadcast_shapes(d(-10, 256), d()) == d(-10, 256)
    assert broadcast_shapes(d(-10), d(-8)) == d(-8)
    assert broadcast_shapes(d(-10), d(6)) == d(6)
    with pytest.raises(VerifyException, match="not broadcastable"):
        broadcast_shapes(d(4, 3), d(4))
    with pytest.raises(VerifyException, match="not broadcastable"):
        broadcast_shapes(d(-4), d(6))


def test_module_with_types_verifies():
    m = Parser(
        ctx(),
        "legato.kernel @k(%a : !legato.tensor<[?10, 256], bf16, shared_dram>) {\n"
        "  legato.return\n}",
    ).parse_module()
    assert isinstance(m, ModuleOp)
    m.verify()


def test_equal_shaped_types_are_one_instance_and_a_bad_one_fails_every_time():
    """`TensorType`/`BufType` share one instance per distinct value (a cache of built and
    verified types); the parser's path (`new`) and pickling still build fresh, equal ones."""
    import pickle

    t = TensorType([(-1, 8), 256], "bf16", "sram")
    assert TensorType([(-1, 8), 256], "bf16", "sram") is t
    assert TensorType([Dim(None, 8), Dim(256, 256)], "bf16", StringAttr("sram")) is t
    assert TensorType([8, 256], "bf16", "sram") != t
    b = BufType([(-1, 8), 256], "bf16", "sram")
    assert b is not t and b != t and b.dims == t.dims
    assert TensorType.new(t.parameters) == t
    assert pickle.loads(pickle.dumps(t)) == t
    # the remembered hash stays in the process (a string's hash differs between processes)
    assert hash(t) == t.__dict__["_hash"]
    fresh = pickle.loads(pickle.dumps(t))
    assert "_hash" not in fresh.__dict__ and hash(fresh) == hash(t) and {t: 1}[fresh] == 1
    for _ in range(2):  # a type that does not verify is never cached
        with pytest.raises(VerifyException, match="unknown memory space 'nowhere'"):
            TensorType([4], "bf16", "nowhere")
