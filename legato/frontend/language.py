"""The language's markers: what a kernel's source names that is not a tensor op.

`legato.constexpr` (a compile-time parameter), `legato.static_range` (an unrolled loop),
`legato.core_id()` (the running core), `legato.device_print` / `legato.device_assert` (kernel
debugging) and `@legato.function` (an inlined helper), plus `Param`,
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


def device_print(message: str = "", *values):
    """`legato.device_print("x =", x, n)` inside a kernel: when the running context reaches it,
    print `message` and the values (tensors, runtime index values; a compile-time value is
    printed into the message) with the module, core and cycle. Every level prints it alike:
    the emulator, and `kernel.interpret(level=...)` (without the cycle)."""
    raise LegatoError("legato.device_print() only exists inside a @legato.compile kernel")


device_print._legato_op = "device_print"


def device_assert(cond, message: str = ""):
    """`legato.device_assert(x > 0, "x must be positive")` inside a kernel: every element of
    `cond` (a tensor, or a runtime index) must be nonzero when the running context reaches it,
    else the run stops with a `legato.DeviceAssertError` naming this line, the module and the
    failing elements. A compile-time condition is checked at compile time."""
    raise LegatoError("legato.device_assert() only exists inside a @legato.compile kernel")


device_assert._legato_op = "device_assert"


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
