"""Fixtures of the legato.numpy tests."""

from tests.unit.session_cache import legato_session_cache  # noqa: F401 (autouse here)
