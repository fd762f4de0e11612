"""Which modules a program runs on, and the core id each sees."""

from legato.targets.bertha.arch.modules import context_cores, core_id


def test_context_cores():
    assert context_cores("top", None, 4) == [None]
    assert context_cores("core", 2, 4) == [2]
    assert context_cores("all_cores", None, 3) == [0, 1, 2]


def test_core_id_is_zero_on_top():
    assert core_id(None) == 0
    assert core_id(5) == 5
