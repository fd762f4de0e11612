"""`compiler.gc_paused`: the collector off inside, back on after; the objects made inside moved
to the oldest generation unscanned, within `PROMOTE_MAX` and never undoing someone else's
`gc.freeze()`; what died among them still collected by a full collection."""

import gc
import weakref

import pytest

from legato import compiler


class _Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it


def _in_generation(obj, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation=generation))


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    compiler._promoted[0] = 0  # noqa: SLF001
    if not was:
        gc.disable()


def test_objects_made_inside_go_to_the_oldest_generation():
    with compiler.gc_paused():
        assert not gc.isenabled()
        kept = [_Node() for _ in range(20000)]
        dead = weakref.ref(_Node())  # garbage in a cycle, made inside
    assert gc.isenabled()
    assert gc.get_count()[0] < 100  # nothing young left for the next young collection
    assert _in_generation(kept[-1], 2) and not _in_generation(kept[-1], 0)
    assert compiler._promoted[0] >= 20000  # noqa: SLF001
    assert dead() is not None
    gc.collect(1)  # a young or middle collection does not scan it again ...
    assert dead() is not None
    gc.collect()  # ... the next full one frees it, and resets the count
    assert dead() is None and compiler._promoted[0] == 0  # noqa: SLF001


def test_beyond_the_bound_the_collector_keeps_its_own_generations():
    compiler._promoted[0] = compiler.PROMOTE_MAX  # noqa: SLF001
    with compiler.gc_paused():
        kept = [_Node() for _ in range(20000)]
    assert gc.get_count()[0] >= 20000 or not _in_generation(kept[-1], 2)
    assert compiler._promoted[0] == compiler.PROMOTE_MAX  # noqa: SLF001


def test_a_freeze_of_someone_else_is_kept():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with compiler.gc_paused():
            kept = [_Node() for _ in range(20000)]
        assert gc.get_freeze_count() == frozen
        assert not _in_generation(kept[-1], 2)
    finally:
        gc.unfreeze()


def test_a_disabled_collector_stays_disabled_and_nothing_moves():
    gc.disable()
    with compiler.gc_paused():
        kept = [_Node() for _ in range(20000)]
    assert not gc.isenabled()
    assert not _in_generation(kept[-1], 2) and compiler._promoted[0] == 0  # noqa: SLF001
