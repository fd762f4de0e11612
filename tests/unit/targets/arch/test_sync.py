"""Barriers (generation counters) and semaphores of the machine model."""

import pytest

from legato.targets.bertha.arch.errors import Trap
from legato.targets.bertha.arch.sync import Barriers, Semaphores


def test_barrier_releases_its_generation_at_the_last_arrival():
    b = Barriers()
    assert b.arrive(3, 3, time=10) == (0, False)
    assert b.arrive(3, 3, time=40) == (0, False)
    assert b.arrived(3) == 2 and not b.passed(3, 0)
    assert 0 not in {gen for (bid, gen) in b.released if bid == 3}
    assert b.arrive(3, 3, time=25) == (0, True)
    assert b.passed(3, 0) and b.arrived(3) == 0
    assert b.released[(3, 0)] == 41  # the latest arrival + 1, not the last one to arrive


def test_barrier_resets_for_the_next_generation():
    b = Barriers()
    b.arrive(0, 2)
    b.arrive(0, 2)
    assert b.arrive(0, 2, time=5) == (1, False)
    assert not b.passed(0, 1) and b.passed(0, 0)
    # barriers are independent
    assert b.arrive(1, 1) == (0, True)


def test_barrier_count_must_agree_within_a_generation():
    b = Barriers()
    b.arrive(2, 4)
    with pytest.raises(Trap, match="barrier 2 entered with count 3 but others use 4"):
        b.arrive(2, 3)
    assert b.count(2) == 4
    # once released, the next generation may use another count
    c = Barriers()
    c.arrive(2, 1)
    assert c.arrive(2, 2) == (1, False)


def test_semaphores_count_and_remember_the_last_post():
    s = Semaphores()
    assert s.value(5) == 0 and not s.ready(5, 1) and s.ready(5, 0)
    s.post(5, 2, time=7)
    s.post(5, 1, time=9)
    assert s.value(5) == 3 and s.posted_at(5) == 9 and s.posted_at(6) == 0
    assert s.ready(5, 3) and not s.ready(5, 4)
    s.take(5, 3)
    assert s.value(5) == 0
    key = ("core(1)", 0)  # any hashable names a semaphore (the legato level's (context, sem))
    s.post(key, 1)
    assert s.ready(key, 1) and not s.ready(("top", 0), 1)
