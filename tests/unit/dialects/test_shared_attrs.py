"""`legato.dialects.shared_attrs`: one instance per value, equal to what xDSL builds."""

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
