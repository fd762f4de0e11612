"""Synchronisation between modules: barriers and semaphores (docs/isa.md, `barrier`,
`sem.post`, `sem.wait`; docs/architecture.md, *Machine model*).

* A barrier `barrier ID, COUNT` is a generation counter: the COUNT-th arrival at ID releases
  every module that arrived in that generation and starts the next one (the barrier resets).
  Every arrival of one generation must name the same COUNT. An arrival at time t is released at
  the latest arrival time of its generation + 1 (the emulator's timing; the interpreters pass
  no time and only ask whether the generation passed).
* A semaphore holds a count: `post` adds, a wait blocks until the value is at least its count,
  then subtracts it. Semaphores are keyed by whatever the executor names them by (the ISA's id,
  or (context, sem) at the legato level); a post records its time (the emulator's wait issues
  no earlier than the last post).

The executors do the blocking (the emulator's scheduler, the interpreters' `Scheduler`); this
module holds the state and the rules.
"""

from __future__ import annotations

from collections.abc import Hashable

from legato.targets.bertha.arch.errors import Trap


class _Barrier:
    __slots__ = ("arrived", "count", "gen")

    def __init__(self, count: int):
        self.gen = 0
        self.arrived: list[int] = []  # arrival times of the current generation
        self.count = count


class Barriers:
    """Every barrier id's generation, arrivals and count."""

    def __init__(self):
        self._state: dict[int, _Barrier] = {}
        # (id, generation) -> the cycle its modules are released at
        self.released: dict[tuple[int, int], int] = {}

    def arrive(self, bid: int, count: int, time: int = 0) -> tuple[int, bool]:
        """One module arrives at barrier `bid` of `count` modules at `time`: (the generation
        it waits for, whether this arrival completed it). `Trap` when the generation's earlier
        arrivals named another count."""
        st = self._state.get(bid)
        if st is None:
            st = self._state[bid] = _Barrier(count)
        if st.arrived and st.count != count:
            raise Trap(f"barrier {bid} entered with count {count} but others use {st.count}")
        st.count = count
        gen = st.gen
        st.arrived.append(time)
        if len(st.arrived) < count:
            return gen, False
        self.released[(bid, gen)] = max(st.arrived) + 1
        st.gen += 1
        st.arrived = []
        return gen, True

    def passed(self, bid: int, gen: int) -> bool:
        """Whether generation `gen` of barrier `bid` has been released."""
        return self._state[bid].gen > gen

    def arrived(self, bid: int) -> int:
        """How many modules wait at barrier `bid` now (its current generation)."""
        st = self._state.get(bid)
        return 0 if st is None else len(st.arrived)

    def count(self, bid: int) -> int:
        """The module count the current generation of barrier `bid` was entered with."""
        return self._state[bid].count


class Semaphores:
    """Semaphore values (0 until posted) and the time of each one's last post."""

    def __init__(self):
        self._value: dict[Hashable, int] = {}
        self._posted_at: dict[Hashable, int] = {}

    def post(self, sid: Hashable, count: int, time: int = 0) -> None:
        self._value[sid] = self._value.get(sid, 0) + count
        self._posted_at[sid] = time

    def value(self, sid: Hashable) -> int:
        return self._value.get(sid, 0)

    def ready(self, sid: Hashable, count: int) -> bool:
        """Whether a wait for `count` on `sid` can go on now."""
        return self._value.get(sid, 0) >= count

    def posted_at(self, sid: Hashable) -> int:
        """The time of the last post to `sid` (0 if none)."""
        return self._posted_at.get(sid, 0)

    def take(self, sid: Hashable, count: int) -> None:
        """A wait that was `ready` goes on: subtract its count."""
        self._value[sid] = self._value.get(sid, 0) - count
