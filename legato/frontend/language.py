"""The language's markers: what a kernel's source names that is not a tensor op.

`legato.constexpr` (a compile-time parameter), `legato.static_range` (an unrolled loop),
`legato.core_id()` (the running core) and `@legato.function` (an inlined helper), plus `Param`,
a kernel parameter as the frontend reads it from the signature. The frontend recognizes these
objects while it evaluates a kernel; as plain Python they do what the docstrings say.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from legato.errors import LegatoError
from legato.frontend.source import LegatoFunction
from legato.types import TensorSpec


class constexpr:
    """Annotation of a compile-time parameter: `n: legato.constexpr`. Its value is part of the
    cache key, and the kernel body sees it as a static Python value."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"


def static_range(*args):
    """`for i in legato.static_range(n):` unrolls at compile time (a plain `range` in Python)."""
    return range(*args)


static_range._legato_static_range = True


def core_id():
    """The index of the running core inside a `with device.get_all_cores():` region."""
    raise LegatoError("legato.core_id() only exists inside a @legato.compile kernel")


core_id._legato_op = "core_id"


def function(fn):
    """`@legato.function`: a helper written in Legato, inlined into the kernels that call it."""
    if isinstance(fn, LegatoFunction):
        return fn
    if not callable(fn):
        raise LegatoError("@legato.function decorates a function")
    return LegatoFunction(fn)


@dataclass(frozen=True)
class Param:
    """A kernel parameter: a tensor (`spec`) or a compile-time value (`constexpr`)."""

    name: str
    kind: str  # "tensor" | "constexpr"
    spec: TensorSpec | None = None
    default: object = inspect.Parameter.empty
