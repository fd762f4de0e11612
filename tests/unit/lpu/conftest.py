"""Fixtures of the legato.lpu tests."""

from tests.unit.session_cache import legato_session_cache  # noqa: F401 (autouse here)
