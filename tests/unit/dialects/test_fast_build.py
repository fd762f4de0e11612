"""`FastBuildOperation`'s builder makes the op xDSL's `IRDLOperation` builder makes, and raises
xDSL's error when the arguments do not fit the definition."""

import pytest
from xdsl.dialects.builtin import IndexType, IntAttr, StringAttr, UnrealizedConversionCastOp
from xdsl.ir import Block, Region
from xdsl.irdl import IRDLOperation
from xdsl.printer import Printer

from legato.dialects import backend as be
from legato.dialects import core
from legato.dialects import legato as lg
from legato.dialects.fast_build import FastBuildOperation


def _values(n):
    block = Block(arg_types=[IndexType()] * n)
    return block, list(block.args)


def _by_xdsl(cls, **kwargs):
    op = cls.__new__(cls)
    IRDLOperation.__init__(op, **kwargs)
    return op


def _same(a, b) -> None:
    assert type(a) is type(b)
    assert list(a.operands) == list(b.operands)
    assert [r.type for r in a.results] == [r.type for r in b.results]
    assert a.properties == b.properties and list(a.properties) == list(b.properties)
    assert a.attributes == b.attributes
    assert len(a.regions) == len(b.regions) and list(a.successors) == list(b.successors)
    # the same fields, each operand's use registered at its index, results owned in order
    assert sorted(vars(a)) == sorted(vars(b)) and a.location == b.location
    # the results and uses have xDSL's fields, in its order
    assert [list(vars(r)) for r in a.results] == [list(vars(r)) for r in b.results]
    assert [list(vars(u)) for u in a._operand_uses] == [list(vars(u)) for u in b._operand_uses]
    for op in (a, b):
        for i, v in enumerate(op.operands):
            assert any(u.operation is op and u.index == i for u in v.uses)
        assert [(r.owner, r.index) for r in op.results] == [(op, i) for i in range(len(op.results))]
    # each op's uses in its operands' use lists in the same order (the newest use first)
    for va, vb in zip(a.operands, b.operands, strict=True):
        assert [u.index for u in va.uses if u.operation is a] == [
            u.index for u in vb.uses if u.operation is b
        ]


def _text(op) -> str:
    from io import StringIO

    out = StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue()


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        # attribute-sized segments (a variadic and an optional operand), None properties
        (
            core.AllocOp,
            lambda v: dict(
                operands=[v[:2], [v[2]]],
                result_types=[core.BufType([(-1, 8), (-1, 4)], "f32", "sram")],
                properties={"core": None, "memory": StringAttr("sram"), "offset": None},
            ),
        ),
        (
            core.AllocOp,
            lambda v: dict(
                operands=[[], None],
                result_types=[core.BufType([8], "f32", "sram")],
                properties={"memory": StringAttr("sram")},
            ),
        ),
        # single operands given bare and as one-element lists, an optional one empty
        (be.AddOp, lambda v: dict(operands=[v[0], [v[1]]], result_types=[be.reg()])),
        # every operand and result single and given bare (the builder's shortest path)
        (be.AddOp, lambda v: dict(operands=[v[0], v[1]], result_types=[be.reg()])),
        (be.AddOp, lambda v: dict(operands=[v[0], v[0]], result_types=[be.reg()])),
        (be.AddOp, lambda v: dict(operands=(v[0], v[1]), result_types=[[be.reg()]])),
        (be.LiOp, lambda v: dict(properties={"imm": IntAttr(3)}, result_types=[be.reg()])),
        (be.DmaOp, lambda v: dict(operands=[v[0], v[1], v[2], []])),
        (be.DmaOp, lambda v: dict(operands=[v[0], v[1], v[2], [v[3]]])),
    ],
)
def test_the_fast_builder_makes_xdsls_op(cls, kwargs):
    _, v = _values(4)
    args = kwargs(v)
    fast = cls.__new__(cls)
    FastBuildOperation.__init__(fast, **args)
    _same(fast, _by_xdsl(cls, **args))


def test_an_op_with_a_region_is_xdsls_op():
    block = Block()
    block.add_op(lg.YieldOp())
    on = lg.OnOp(lg.ContextAttr.core(0), [], [], Region(block))
    ref = _by_xdsl(
        lg.OnOp,
        operands=[[]],
        result_types=[[]],
        properties={"ctx": lg.ContextAttr.core(0)},
        regions=[Region(Block([lg.YieldOp()]))],
    )
    _same(on, ref)
    assert _text(on) == _text(ref)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(operands=[]),  # too few operands
        dict(operands=[None, None], result_types=[be.reg()]),  # None for a single operand
        dict(operands=["x", []], result_types=[be.reg()]),  # an empty list for a single one
        dict(operands=[[0, 1], [1]], result_types=[be.reg()]),  # two for a single one
    ],
)
def test_arguments_that_do_not_fit_raise_xdsls_error(kwargs):
    _, v = _values(2)
    ops = [
        [v[0] if a == "x" else [v[i] for i in a] if isinstance(a, list) else a for a in ops]
        for ops in [kwargs["operands"]]
    ][0]
    args = {**kwargs, "operands": ops}
    with pytest.raises(ValueError) as theirs:
        _by_xdsl(be.AddOp, **args)
    with pytest.raises(ValueError) as ours:
        fast = be.AddOp.__new__(be.AddOp)
        FastBuildOperation.__init__(fast, **args)
    assert str(ours.value) == str(theirs.value)


def test_op_type_checks_answer_as_abcmeta():
    """Every op class of the three dialects takes the plain type checks (`_ConcreteOpMeta`),
    which answer `isinstance`/`issubclass` as `ABCMeta`'s own check does, for ops of every
    class and for other objects; a virtual subclass is refused instead of being ignored."""
    import abc

    from legato.dialects.fast_build import _ConcreteOpMeta

    classes = [c for d in (lg.Legato, core.Core, be.Backend) for c in d.operations]
    assert classes and all(type(c) is _ConcreteOpMeta for c in classes)
    block, (v,) = _values(1)
    probes = [lg.YieldOp(), be.LabelOp("l"), lg.ReturnOp(), v, block, 3, None]
    for cls in classes:
        for x in probes:
            assert isinstance(x, cls) is abc.ABCMeta.__instancecheck__(cls, x)
            assert issubclass(type(x), cls) is abc.ABCMeta.__subclasscheck__(cls, type(x))
    assert isinstance(be.LabelOp("l"), be.LabelOp) and not isinstance(lg.YieldOp(), be.LabelOp)
    with pytest.raises(TypeError, match="virtual subclasses of Legato's ops"):
        be.LabelOp.register(int)


@pytest.mark.parametrize(
    "cls", ["AddiOp", "MuliOp", "SubiOp", "DivSIOp", "RemSIOp", "MinSIOp", "MaxSIOp"]
)
def test_the_frontends_index_ops_are_xdsls(cls):
    """The frontend's index arithmetic built directly (`build_flat`) is the op xDSL's own
    builders make: operands and their uses, result type, properties (the default overflow
    flags where the op has them), location."""
    from xdsl.dialects import arith

    from legato.frontend.runtime import index_binary, index_constant

    _, (a, b) = _values(2)
    op_cls = getattr(arith, cls)
    _same(index_binary(op_cls, a, b), op_cls(a, b))
    for value in (0, 7, -3, 1 << 40):
        _same(index_constant(value), arith.ConstantOp.from_int_and_width(value, IndexType()))


def test_build_flat_makes_creates_op():
    """`build_flat` of an xDSL op (the lowering's unrealized casts) is `create`'s op."""
    from legato.dialects.fast_build import build_flat

    _, (a,) = _values(1)
    t = core.BufType([8], "f32", "sram")
    _same(
        build_flat(UnrealizedConversionCastOp, [a], [t]),
        UnrealizedConversionCastOp.create(operands=[a], result_types=[t]),
    )


def test_clone_flat_is_xdsls_clone():
    """`clone_flat` (the register allocator's re-emitted values) makes `op.clone()`'s op: the
    operands and their uses, the properties and attributes (copies), the location, the
    results' name hints and the printed text; an op with a region is xDSL's clone."""
    from xdsl.dialects.builtin import FileLineColLoc

    from legato.dialects.fast_build import clone_flat

    _, (a, b) = _values(2)
    li = be.LiOp(7)
    li.results[0].name_hint = "seven"
    li.attributes["tag"] = StringAttr("x")
    li.location = FileLineColLoc(StringAttr("k.py"), IntAttr(3), IntAttr(4))
    ld = be.LdOp(a, 8)
    for op in (li, ld, be.AddOp(a, b), be.LsaOp("sram", 64)):
        ours, theirs = clone_flat(op), op.clone()
        _same(ours, theirs)
        assert ours.properties is not op.properties and ours.attributes is not op.attributes
        assert [r.name_hint for r in ours.results] == [r.name_hint for r in theirs.results]
        assert _text(ours) == _text(theirs) and ours.location is op.location
    on = lg.OnOp(lg.ContextAttr.core(0), [], [], Region(Block([lg.YieldOp()])))
    assert _text(clone_flat(on)) == _text(on.clone())
