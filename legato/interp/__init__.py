"""Interpreters of Legato's three IR levels (xDSL interpreter functions, numpy values).

`run(module, level, args, model)` runs a module at its level; see `legato.interp.api.run`.
Modules: `legato` (value-semantics tensors), `core` (programs, placed buffers, DMA, MPU/VPU),
`backend` (registers and Bertha instructions), `scheduler` (concurrent contexts, deadlock
reports), `memory` (the address map), `semantics` (the op rules every level shares).
"""

from legato.interp.api import LEVELS, RunResult, RunStats, detect_level, parse_module, run
from legato.interp.errors import (
    DeadlockError,
    InterpArgumentError,
    InterpError,
    InvalidModuleError,
    MemoryFault,
    StepLimitExceeded,
    TimeLimitExceeded,
    UnsupportedOpError,
)

__all__ = [
    "LEVELS",
    "DeadlockError",
    "InterpArgumentError",
    "InterpError",
    "InvalidModuleError",
    "MemoryFault",
    "RunResult",
    "RunStats",
    "StepLimitExceeded",
    "TimeLimitExceeded",
    "UnsupportedOpError",
    "detect_level",
    "parse_module",
    "run",
]
