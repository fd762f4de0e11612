"""The modules of the chip and the programs they run (docs/architecture.md, *Machine model*).

Bertha has one `top` sequencer and `num_cores` cores, each a module with its own PC. A program
runs on `top`, on one core (`core(i)`), or on every core (`all_cores`: one SPMD text); each
module runs at most one program. At entry r2 holds the running core's index (0 on top), which
is also what a core-id query answers.
"""

from __future__ import annotations


def context_cores(kind: str, index: int | None, num_cores: int) -> list[int | None]:
    """The cores a program of context `kind` ("top", "core" with `index`, "all_cores") runs
    on; None stands for top. The caller checks that a core index is below `num_cores`."""
    if kind == "top":
        return [None]
    if kind == "core":
        return [index]
    return list(range(num_cores))


def core_id(core: int | None) -> int:
    """The core index a module sees (entry register r2, `core_id`): 0 on top."""
    return 0 if core is None else core
