"""`FastBuildOperation`: the base of Legato's IRDL ops, whose builder (`__init__`) makes the same
op as xDSL's `irdl_op_init` at a fraction of its cost.

xDSL's generic builder re-derives, for every op built, how its operands, results, regions and
successors map onto the definition (walking the definition's fields, ABC instance checks on
each argument) and packs a new segment-size array per op; it was ~20% of a bench kernel's
lowering passes. Here the definition's shape is derived once per op class, the common case (the
arguments fit the definition) is built directly, and the segment-size arrays (immutable
attributes) are shared. Anything else (a wrong number or shape of arguments, unequal
same-size variadics) goes to xDSL's builder, which raises its own error: the ops and the errors
are xDSL's.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from functools import cache

from xdsl.dialects.builtin import UNKNOWN_LOC, DenseArrayBase, i32
from xdsl.ir import (
    Attribute,
    BlockArgument,
    Dialect,
    Operation,
    OpResult,
    SSAValue,
    SSAValues,
    Use,
)
from xdsl.ir import core as ir_core
from xdsl.irdl import (
    AttrSizedOperandSegments,
    AttrSizedRegionSegments,
    AttrSizedResultSegments,
    AttrSizedSuccessorSegments,
    IRDLOperation,
    OptionalDef,
    SameVariadicOperandSize,
    SameVariadicResultSize,
    VariadicDef,
)
from xdsl.irdl.operations import (
    BaseAttrAccessor,
    BeforeVariadicSingleAccessor,
    VarIRConstruct,
    irdl_build_regions_arg,
)

_SINGLE, _OPTIONAL, _VARIADIC = 0, 1, 2


class _Fallback(Exception):
    """The arguments do not fit the fast path: xDSL's builder decides (and raises)."""


def _kinds(defs) -> tuple[int, ...]:
    return tuple(
        _OPTIONAL
        if isinstance(d, OptionalDef)
        else _VARIADIC
        if isinstance(d, VariadicDef)
        else _SINGLE
        for _, d in defs
    )


@cache
def _plan(cls: type) -> tuple:
    """(operand, result, region, successor kinds, segment-size properties/attributes to set,
    same-size variadic checks) of an op class's definition."""
    d = cls.get_irdl_definition()
    segments = []
    same = []
    for option in d.options:
        if isinstance(option, AttrSizedOperandSegments):
            segments.append((0, option.as_property, AttrSizedOperandSegments.attribute_name))
        elif isinstance(option, AttrSizedResultSegments):
            segments.append((1, option.as_property, AttrSizedResultSegments.attribute_name))
        elif isinstance(option, AttrSizedRegionSegments):
            segments.append((2, option.as_property, AttrSizedRegionSegments.attribute_name))
        elif isinstance(option, AttrSizedSuccessorSegments):
            segments.append((3, option.as_property, AttrSizedSuccessorSegments.attribute_name))
        elif isinstance(option, SameVariadicOperandSize):
            same.append(0)
        elif isinstance(option, SameVariadicResultSize):
            same.append(1)
        else:
            return None  # an option the fast path does not know: always xDSL's builder
    return (
        (_kinds(d.operands), _kinds(d.results), _kinds(d.regions), _kinds(d.successors)),
        tuple(segments),
        tuple(same),
    )


@cache
def _sizes_attr(sizes: tuple[int, ...]) -> DenseArrayBase:
    attr = DenseArrayBase.from_list(i32, sizes)
    _SEGMENT_VALUES[id(attr)] = attr.get_values()
    return attr


_NOTHING: tuple[tuple, tuple] = ((), ())  # no construct of a kind, none given


def _build(kinds: tuple[int, ...], args, convert) -> tuple[list, list[int]]:
    if len(args) != len(kinds):
        raise _Fallback
    if not kinds:
        return _NOTHING  # type: ignore[return-value]
    out: list = []
    sizes: list[int] = []
    for kind, a in zip(kinds, args):
        t = type(a)
        if t is OpResult or t is BlockArgument:  # one value (not a Sequence)
            out.append(a)
            sizes.append(1)
        elif a is None:
            if kind == _SINGLE:
                raise _Fallback
            sizes.append(0)
        elif (
            t is list
            or t is tuple
            or not (_ONE_ITEM[t] if t in _ONE_ITEM else _ONE_ITEM.setdefault(t, _one_item(a)))
        ):
            n = len(a)
            if (kind == _SINGLE and n != 1) or (kind == _OPTIONAL and n > 1):
                raise _Fallback
            out.extend(a if convert is None else [convert(x) for x in a])
            sizes.append(n)
        else:
            out.append(a if convert is None else convert(a))
            sizes.append(1)
    return out, sizes


def _init_flat(op: Operation, operands: list, result_types: list, props: dict, attrs: dict):
    """What `Operation.__init__` makes of an op without regions or successors (`props` and
    `attrs` fresh dicts it may keep): its operands and their uses, its results, its properties,
    attributes and unknown location, then the class's `__post_init__` (IRDL's defaults).

    The uses and results are made as their dataclass builders make them (the same instance
    fields, in the same order: a `Use`'s four, an `OpResult`'s `_type`, `op`, `index`; the
    fields without an `init` stay the class defaults) and each use is pushed on its value's
    use list as `IRWithUses.add_use` pushes it, without a Python call per object (~2x faster
    on the bench GEMM's ~12k ops)."""
    values = _new_tuple(SSAValues, operands)
    uses = []
    for i, v in enumerate(values):
        u = _new(Use)
        u._operation = op  # noqa: SLF001
        u._index = i  # noqa: SLF001
        u._prev_use = None  # noqa: SLF001
        first = v.first_use
        u._next_use = first  # noqa: SLF001
        if first is not None:
            first._prev_use = u  # noqa: SLF001
        v.first_use = u
        uses.append(u)
    op._operands = values  # noqa: SLF001
    op._operand_uses = tuple(uses)  # noqa: SLF001
    results = []
    for i, t in enumerate(result_types):
        r = _new(OpResult)
        r._type = t  # noqa: SLF001
        r.op = op
        r.index = i
        results.append(r)
    op.results = _new_tuple(SSAValues, results)
    op.properties = props
    op.attributes = attrs
    op.location = UNKNOWN_LOC
    op._successors = ()  # noqa: SLF001
    op._successor_uses = ()  # noqa: SLF001
    op.regions = ()
    post_init = type(op).__post_init__
    if post_init is _IRDL_POST_INIT:
        # IRDL's: the definition's defaults of absent properties and attributes, from a list
        # derived once per class (xDSL walks the definition, ABC checks, on every op)
        props_, attrs_ = _defaults(type(op))
        for name, value in props_:
            if name not in props:
                props[name] = value
        for name, value in attrs_:
            if name not in attrs:
                attrs[name] = value
        _OP_POST_INIT(op)
    else:
        post_init(op)


_new = object.__new__
_new_tuple = tuple.__new__


def _check_builders() -> None:
    """The fields `_init_flat` sets are the ones xDSL's dataclass builders of `Use` and
    `OpResult` set (a pinned xDSL that changed them would make other objects)."""
    op = object()
    use, result = Use(op, 0), OpResult(i32, op, 0)  # type: ignore[arg-type]
    if list(vars(use)) != ["_operation", "_index", "_prev_use", "_next_use"] or list(
        vars(result)
    ) != ["_type", "op", "index"]:  # pragma: no cover
        raise AssertionError("xDSL's Use / OpResult builders set other fields")
    if (
        vars(ir_core.IRWithUses)["add_use"].__code__.co_names
        != ("first_use", "_next_use", "_prev_use")
        or SSAValues.__new__ is not tuple.__new__
        or SSAValues.__init__ is not object.__init__
    ):  # pragma: no cover
        raise AssertionError("xDSL's use lists or SSAValues changed")


_check_builders()


_IRDL_POST_INIT = IRDLOperation.__post_init__
_OP_POST_INIT = Operation.__post_init__


@cache
def _defaults(cls: type) -> tuple[tuple, tuple]:
    """The (name, default) properties and attributes `IRDLOperation.__post_init__` sets on an op
    of `cls` that lacks them, in its order."""
    d = cls.get_irdl_definition()
    return tuple(
        tuple(
            (name, f.default_value)
            for name, f in fields.items()
            if not isinstance(f, OptionalDef) and f.default_value is not None
        )
        for fields in (d.properties, d.attributes)
    )


def build_flat(
    cls: type[Operation], operands, result_types, properties: Mapping[str, Attribute] | None = None
) -> Operation:
    """`cls.create(operands=..., result_types=..., properties=...)` for an op class without
    regions or successors (xDSL's own ops too: the frontend's `arith` index arithmetic, whose
    builders go through xDSL's generic `irdl_op_init`): the same op, without its per-argument
    dispatch. `operands` are SSA values."""
    op = cls.__new__(cls)
    _init_flat(op, list(operands), list(result_types), dict(properties or {}), {})
    return op


_UNKNOWN = object()
#: per op class: (operands, results) when every operand and result of its definition is a
#: single one and it has no regions, successors or options (`_plan`'s fast case), else None
_SIMPLE: dict[type, tuple[int, int] | None] = {}
#: per type: whether `_build` takes an argument of it as one item (not None nor a sequence)
_ONE_ITEM: dict[type, bool] = {}


def _simple_shape(cls: type) -> tuple[int, int] | None:
    plan = _plan(cls)
    if plan is None:
        return None
    (k_ops, k_res, k_reg, k_succ), segments, same = plan
    if k_reg or k_succ or segments or same or any(k != _SINGLE for k in k_ops + k_res):
        return None
    return len(k_ops), len(k_res)


def _one_item(a) -> bool:
    """`_build`'s test of one argument, per type: ABC checks answer by the type (a virtual
    subclass of `Sequence` registered later would not be seen; none is)."""
    if type(a) is OpResult or type(a) is BlockArgument:
        return True
    return a is not None and not (type(a) is list or type(a) is tuple or isinstance(a, Sequence))


def clone_flat(op: Operation) -> Operation:
    """`op.clone()` (xDSL's: the same operands, result types, copies of the properties and
    attributes, the location and the results' name hints) of an op without regions or
    successors, built by `_init_flat`; any other op is cloned by xDSL."""
    if op.regions or op._successors:  # noqa: SLF001
        return op.clone()
    cls = type(op)
    new = cls.__new__(cls)
    _init_flat(
        new,
        list(op._operands),  # noqa: SLF001
        [r.type for r in op.results],
        op.properties.copy(),
        op.attributes.copy(),
    )
    new.location = op.location
    for old_result, new_result in zip(op.results, new.results, strict=True):
        new_result.name_hint = old_result.name_hint
    return new


def _value(x) -> SSAValue:
    return x if isinstance(x, SSAValue) else SSAValue.get(x)


def _dropping_none(m: Mapping[str, Attribute | None]) -> dict[str, Attribute]:
    return {k: v for k, v in m.items() if v is not None}


class FastBuildOperation(IRDLOperation):
    """An `IRDLOperation` whose builder is the fast one of this module (same ops, same
    errors as `IRDLOperation`'s)."""

    def __init__(
        self,
        *,
        operands: Sequence | None = None,
        result_types: Sequence | None = None,
        properties: Mapping[str, Attribute | None] | None = None,
        attributes: Mapping[str, Attribute | None] | None = None,
        successors: Sequence | None = None,
        regions: Sequence | None = None,
    ):
        cls = type(self)
        shape = _SIMPLE.get(cls, _UNKNOWN)
        if shape is _UNKNOWN:
            shape = _SIMPLE[cls] = _simple_shape(cls)
        if shape is not None and not regions and not successors:
            # all single operands and results, given bare: what `_build` makes of them
            values, types = operands or (), result_types or ()
            if len(values) == shape[0] and len(types) == shape[1]:
                for a in values:
                    if type(a) is not OpResult and type(a) is not BlockArgument:
                        break
                else:
                    for t in types:
                        one = _ONE_ITEM.get(type(t))
                        if one is None:
                            one = _ONE_ITEM[type(t)] = _one_item(t)
                        if not one:
                            break
                    else:
                        _init_flat(
                            self,
                            list(values),
                            list(types),
                            _dropping_none(properties) if properties else {},
                            _dropping_none(attributes) if attributes else {},
                        )
                        return
        plan = _plan(cls)
        try:
            if plan is None:
                raise _Fallback
            (k_ops, k_res, k_reg, k_succ), segments, same = plan
            built = (
                _build(k_ops, operands or (), _value),
                _build(k_res, result_types or (), None),
                _build(k_reg, [irdl_build_regions_arg(r) for r in regions or ()], None),
                _build(k_succ, successors or (), None),
            )
            for construct in same:
                kinds = (k_ops, k_res)[construct]
                sizes = [n for n, k in zip(built[construct][1], kinds) if k != _SINGLE]
                if any(n != sizes[0] for n in sizes[1:]):
                    raise _Fallback
        except _Fallback:
            # xDSL's builder: the same op when the arguments fit, else its error
            IRDLOperation.__init__(
                self,
                operands=operands,
                result_types=result_types,
                properties=properties,
                attributes=attributes,
                successors=successors,
                regions=regions,
            )
            return
        props = _dropping_none(properties) if properties else {}
        attrs = _dropping_none(attributes) if attributes else {}
        for construct, as_property, name in segments:
            (props if as_property else attrs)[name] = _sizes_attr(tuple(built[construct][1]))
        if built[2][0] or built[3][0]:
            Operation.__init__(
                self,
                operands=built[0][0],
                result_types=built[1][0],
                properties=props,
                attributes=attrs,
                successors=built[3][0],
                regions=built[2][0],
            )
        else:
            _init_flat(self, built[0][0], built[1][0], props, attrs)


# -- accessors -----------------------------------------------------------------------------------

#: the decoded values of each shared segment-size attribute `_sizes_attr` made, by its id (those
#: attributes live as long as its cache: an id here is never another object's)
_SEGMENT_VALUES: dict[int, tuple[int, ...]] = {}

_ARGS = {
    VarIRConstruct.OPERAND: "_operands",  # what `op.operands` views (the same elements, slices)
    VarIRConstruct.RESULT: "results",
    VarIRConstruct.REGION: "regions",
}


class _SegmentAccessor:
    """xDSL's accessor of a construct sized by a segment attribute (`BaseAttrAccessor`), its
    attribute decoded once when it is one of the shared ones (`_sizes_attr`)."""

    __slots__ = ("acc", "args", "container", "name")

    def __init__(self, acc: BaseAttrAccessor):
        self.acc, self.args = acc, _ARGS[acc.construct]
        self.container = "properties" if acc.option.as_property else "attributes"
        self.name = acc.option.attribute_name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self.acc
        attr = getattr(obj, self.container)[self.name]
        values = _SEGMENT_VALUES.get(id(attr))
        if values is None:
            values = attr.get_values()
        return self.acc.index(values, getattr(obj, self.args))

    def __set__(self, obj, value):
        self.acc.__set__(obj, value)


def _single(field: str, idx: int) -> property:
    if field in ("_operands", "results"):
        # xDSL's `SSAValues` (a tuple) indexes in a Python `__getitem__`: tuple's own, in C
        get = tuple.__getitem__
        return property(lambda op: get(getattr(op, field), idx))
    return property(lambda op: getattr(op, field)[idx])


def install_fast_accessors(dialect: Dialect) -> None:
    """Replace the operand, result and region accessors of `dialect`'s ops with ones that give
    the same values, without xDSL's per-read dispatch: a single construct before any variadic
    one reads its tuple directly (xDSL: the construct kind's `match`, a fresh operand view,
    its `__getitem__`), and a segment-sized one decodes a shared segment attribute once
    instead of unpacking its bytes on every read (~5% of the GEMM's compile together)."""
    for cls in dialect.operations:
        _concrete_type_checks(cls)
        for name, acc in list(vars(cls).items()):
            if type(acc) is BeforeVariadicSingleAccessor and acc.construct in _ARGS:
                setattr(cls, name, _single(_ARGS[acc.construct], acc.idx))
            elif isinstance(acc, BaseAttrAccessor) and acc.construct in _ARGS:
                setattr(cls, name, _SegmentAccessor(acc))


class _ConcreteOpMeta(abc.ABCMeta):
    """The metaclass of Legato's concrete op classes: `isinstance(x, SomeOp)` and
    `issubclass` are the plain type checks (`type`'s, in C) instead of `ABCMeta`'s (a Python
    `__instancecheck__` and its caches on every call, mostly on the negative path: which op is
    this). The same answers for a class without virtual subclasses and without a
    `__subclasshook__`, which is what `_concrete_type_checks` swaps: ~230k checks, ~7% of the
    GEMM's compile. Registering a virtual subclass on such a class is refused."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__

    def register(cls, subclass):
        raise TypeError(f"{cls.__name__}: virtual subclasses of Legato's ops are not supported")


def _concrete_type_checks(cls: type) -> None:
    """`cls` (an op class) to `_ConcreteOpMeta` when that changes no answer: an `ABCMeta` class
    with no subclasses, no virtual ones (its ABC registry is empty) and no `__subclasshook__`
    of its own or inherited."""
    if type(cls) is not abc.ABCMeta or cls.__subclasses__():
        return
    if abc._get_dump(cls)[0] or any("__subclasshook__" in vars(c) for c in cls.__mro__[:-1]):  # type: ignore[attr-defined]  # noqa: SLF001
        return
    cls.__class__ = _ConcreteOpMeta


# -- identity hashes -----------------------------------------------------------------------------


def _identity_hashes() -> None:
    """xDSL's SSA values, IR nodes (ops, blocks, regions), IRDL ops (which define it again) and
    uses compare by identity and hash by `id(self)` in a Python `__hash__`, which every dict and
    set of them (every pass keeps several) calls per lookup. `object.__hash__` is the same identity hash in C (equal exactly
    when the objects are the same; the order of a set of them was never reproducible across
    runs either way): ~6% of the GEMM's compile."""
    a, b = object(), object()
    for cls in (ir_core.SSAValue, ir_core._IRNode, ir_core.Use, IRDLOperation):  # noqa: SLF001
        eq, hash_ = cls.__eq__, cls.__hash__
        if not (eq(a, a) is True and eq(a, b) is False and hash_(a) == id(a)):  # pragma: no cover
            raise AssertionError(f"xDSL's {cls.__name__} no longer compares and hashes by id")
        cls.__hash__ = object.__hash__  # type: ignore[method-assign]


_identity_hashes()
