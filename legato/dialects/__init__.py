"""Legato's dialects: `legato` (frontend level), `core` (programs, buffers, DMA) and `backend`
(one op per Bertha instruction). `get_all_dialects()` maps names to lazy factories."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Our dialects, by name, as factories (imported on first use)."""

    def get_legato() -> Dialect:
        from legato.dialects.legato import Legato

        return Legato

    def get_core() -> Dialect:
        from legato.dialects.core import Core

        return Core

    def get_backend() -> Dialect:
        from legato.dialects.backend import Backend

        return Backend

    return {"legato": get_legato, "core": get_core, "backend": get_backend}
