"""The one registry of target names.

Every place that takes a target by name reads it: `@legato.compile(backend="bertha-evt1")`, the
passes' and `legato-opt -t asm`'s `target` option (`legato.model.ir.model_of`), torch's
`legato.device`, `legato-run --model` and `legato-objdump --target`. A name maps to a factory
`fn(ctx) -> ComputeModel`; `legato.register_backend(name, factory)` adds one for all of them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from legato.errors import LegatoError
from legato.model import bertha
from legato.model.compute_model import ComputeModel

Factory = Callable[[object], ComputeModel]

# "bertha" is the seed's name of EVT0; "bertha-evt0" says it explicitly.
_TARGETS: dict[str, Factory] = {
    "bertha": bertha.evt0,
    "bertha-evt0": bertha.evt0,
    "bertha-evt1": bertha.evt1,
    # the same chips with their PIM units (use_pim=True, docs/pim.md)
    "bertha-pim": bertha.evt0_pim,
    "bertha-evt1-pim": bertha.evt1_pim,
}


def register_target(name: str, factory: Factory) -> None:
    """Make `name` select `factory(ctx) -> ComputeModel` everywhere a target is named."""
    _TARGETS[name] = factory


def target_names() -> list[str]:
    """Every registered target name, sorted."""
    return sorted(_TARGETS)


def target_factory(name: str) -> Factory | None:
    """The factory registered for `name`, or None."""
    return _TARGETS.get(name)


def target_model(name: str, ctx=None) -> ComputeModel | None:
    """The ComputeModel of target `name` (its factory called with `ctx`), or None if unknown."""
    factory = _TARGETS.get(name)
    return None if factory is None else factory(ctx)


def resolve_backend(backend) -> Factory:
    """A factory `fn(ctx) -> ComputeModel` for `backend` (factory, module with `get_model`, name,
    or a ComputeModel)."""
    if isinstance(backend, ComputeModel):
        return lambda ctx: backend
    if isinstance(backend, str):
        if backend not in _TARGETS:
            raise LegatoError(
                f"unknown backend {backend!r}; registered backends: {', '.join(target_names())}"
            )
        return _TARGETS[backend]
    if inspect.ismodule(backend):
        if not callable(getattr(backend, "get_model", None)):
            raise LegatoError(
                f"backend module {backend.__name__} has no get_model(ctx) to build its ComputeModel"
            )
        return backend.get_model
    if callable(backend):
        return backend
    raise LegatoError(
        f"backend must be a factory fn(ctx) -> ComputeModel, a module with get_model, or a "
        f"registered name ({', '.join(target_names())}); got {backend!r}"
    )
