"""Compile-time context: the target model, the device and its execution contexts.

Inside a kernel, `legato.get_model()` is the kernel's target ComputeModel and
`legato.get_context().get_device()` a `Device` whose `get_top()` / `get_core(i)` /
`get_all_cores()` name the execution contexts used in `with` statements. The frontend evaluates
these calls statically while it holds the compilation's `CompileContext` in a contextvar; outside
any compilation they fall back to `legato.model.default_model()` so annotations evaluated at `def`
time work.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

from legato.errors import LegatoError
from legato.model.compute_model import ComputeModel, default_model


@dataclass(frozen=True)
class ExecContext:
    """An execution context: `top`, `core(i)` or `all_cores`. Used as `with <ctx>:` in kernels."""

    kind: str  # "top" | "core" | "all_cores"
    index: int | None = None

    @property
    def is_core(self) -> bool:
        return self.kind == "core"

    @property
    def is_runtime_core(self) -> bool:
        """`get_core(i)` of a runtime index `i` (a request_load target in an all-cores region)."""
        return self.kind == "core" and not isinstance(self.index, int)

    def __str__(self) -> str:
        if self.is_runtime_core:
            return "core(<runtime index>)"
        return f"core({self.index})" if self.kind == "core" else self.kind

    def __enter__(self):
        raise LegatoError(
            f"`with {self}` only has a meaning inside a @legato.compile kernel "
            "(the kernel body is compiled, not run as Python)"
        )

    def __exit__(self, *exc):  # pragma: no cover - __enter__ always raises
        return False


class Device:
    """The virtual device of a ComputeModel: its top module and its cores."""

    def __init__(self, model: ComputeModel):
        self.model = model

    @property
    def num_cores(self) -> int:
        return self.model.num_cores

    def get_top(self) -> ExecContext:
        """The top module: orchestration and top-side load requests."""
        return ExecContext("top")

    def get_core(self, index: int) -> ExecContext:
        """Core `index` (0 <= index < num_cores). In an all-cores region `index` may be a runtime
        index (e.g. `(legato.core_id() + 1) % n`): only as a `request_load` target."""
        if type(index).__name__ == "IRScalar":  # legato.frontend.runtime: checked where used
            return ExecContext("core", index)  # type: ignore[arg-type]
        if isinstance(index, bool) or not isinstance(index, int):
            raise LegatoError(f"get_core: core index must be a compile-time int, got {index!r}")
        if not 0 <= index < self.model.num_cores:
            raise LegatoError(
                f"core index {index} is out of range: target '{self.model.name}' has "
                f"{self.model.num_cores} cores (valid indices 0..{self.model.num_cores - 1})"
            )
        return ExecContext("core", index)

    def get_all_cores(self) -> ExecContext:
        """Every core runs the region (SPMD); `legato.core_id()` gives each core its index."""
        return ExecContext("all_cores")

    def __repr__(self) -> str:
        return f"<legato Device {self.model.name} with {self.model.num_cores} cores>"


class CompileContext:
    """What a backend factory receives as `ctx`, and what `legato.get_context()` returns."""

    def __init__(self, model: ComputeModel | None = None, kernel_name: str | None = None):
        self.model = model
        self.kernel_name = kernel_name

    def get_device(self) -> Device:
        return Device(self.model if self.model is not None else default_model())

    def get_model(self) -> ComputeModel:
        return self.model if self.model is not None else default_model()

    def __repr__(self) -> str:
        name = self.model.name if self.model is not None else "default"
        return f"<legato CompileContext target={name} kernel={self.kernel_name}>"


_current: contextvars.ContextVar[CompileContext | None] = contextvars.ContextVar(
    "legato_compile_context", default=None
)


def current() -> CompileContext | None:
    """The compilation in progress, if any."""
    return _current.get()


@contextlib.contextmanager
def compiling(ctx: CompileContext):
    """Make `ctx` the current compilation (for `get_model()` / `get_context()`)."""
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


def get_model() -> ComputeModel:
    """The kernel's target model inside a compilation; `default_model()` outside one.

    This is `legato.get_model()`: annotations evaluated at `def` time see the default model, and
    inside a kernel the frontend evaluates it statically to the kernel's target.
    """
    ctx = _current.get()
    if ctx is not None and ctx.model is not None:
        return ctx.model
    return default_model()


def get_context() -> CompileContext:
    """The compilation context (`get_context().get_device()`); a default one outside kernels."""
    ctx = _current.get()
    return ctx if ctx is not None else CompileContext(None)
