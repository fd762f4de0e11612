"""The JIT behind `@legato.compile`, one module per concern:

| module | holds |
|---|---|
| `kernel` | `Kernel` (what `@legato.compile` returns: bind, compile, run, interpret) and `compile` |
| `session` | `legato.session(...)` and `OutputType` (the stage a session writes out) |
| `cache` | the in-memory and on-disk JIT cache |
| `autotuner` | `@legato.autotune`: constexpr configs ranked by simulated cycles, choices stored |

The language markers (`constexpr`, `static_range`, `core_id`, `function`) live in
`legato.frontend.language`, the target registry (`register_backend`, `resolve_backend`) in
`legato.model.targets`, torch <-> numpy in `legato.arrays`; they are re-exported here because
`legato.jit.<name>` is how existing code reaches them.
"""

from legato.frontend.language import Param, constexpr, core_id, function, static_range
from legato.jit.autotuner import AutotuneError, Autotuner, Config, TuneReport, autotune
from legato.jit.cache import cache_dir, clear_memory_cache, stats
from legato.jit.cache import disk_load as _disk_load
from legato.jit.kernel import Kernel, compile
from legato.jit.session import OutputType, Session, current_session, session
from legato.model.targets import register_target as register_backend
from legato.model.targets import resolve_backend

__all__ = [
    "AutotuneError",
    "Autotuner",
    "Config",
    "TuneReport",
    "autotune",
    "Kernel",
    "OutputType",
    "Param",
    "Session",
    "_disk_load",
    "cache_dir",
    "clear_memory_cache",
    "compile",
    "constexpr",
    "core_id",
    "current_session",
    "function",
    "register_backend",
    "resolve_backend",
    "session",
    "static_range",
    "stats",
]
