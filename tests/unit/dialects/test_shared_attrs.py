"""`legato.dialects.shared_attrs`: one instance per value, equal to what xDSL builds."""

import pytest
from xdsl.dialects.builtin import IntAttr, StringAttr

from legato.dialects import backend as be
from legato.dialects.shared_attrs import int_attr, str_attr


def test_int_and_str_attrs_are_shared_and_equal_to_fresh_ones():
    assert int_attr(7) is int_attr(7) and int_attr(7) == IntAttr(7)
    assert int_attr(7) is not int_attr(8) and int_attr(-3).data == -3
    assert str_attr("sram") is str_attr("sram") and str_attr("sram") == StringAttr("sram")
    given = IntAttr(5)
    assert int_attr(given) is given and str_attr(StringAttr("x")) == StringAttr("x")
    # a bool stays a bool (True == 1 would otherwise find the int's instance)
    assert type(int_attr(1).data) is int and type(int_attr(True).data) is bool


def test_ops_hold_the_shared_attrs():
    a, b = be.LsaOp("sram", 64), be.LsaOp("sram", 64)
    assert a.space is b.space and a.offset is b.offset
    assert a.space == StringAttr("sram") and a.offset == IntAttr(64)


def test_i64_arrays_and_contexts_are_shared_and_equal_to_fresh_ones():
    from xdsl.dialects.builtin import DenseArrayBase, i64

    from legato.dialects import legato as lg
    from legato.dialects.shared_attrs import i64_array

    for values in ([], [0], [3, -1, 1 << 40], (8, 4)):
        got = i64_array(values)
        assert got == DenseArrayBase.from_list(i64, list(values)) and got is i64_array(values)
        assert got.get_values() == tuple(values)
    # a bool equals an int as a key: not shared with the int's array
    assert i64_array([True]) is not i64_array([1])
    for i in (0, 5, 63):
        assert lg.ContextAttr.core(i) == lg.ContextAttr("core", i)
        assert lg.ContextAttr.core(i) is lg.ContextAttr.core(i)
    assert lg.ContextAttr.top() == lg.ContextAttr("top") and lg.ContextAttr.top().is_top
    assert lg.ContextAttr.all_cores() == lg.ContextAttr("all_cores")
    with pytest.raises(Exception, match="non-negative"):
        lg.ContextAttr.core(-1)
