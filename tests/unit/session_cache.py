"""A fixture that the conftests of the packages whose tests compile many kernels (torch, numpy,
lpu) import: importing it into a conftest makes it autouse for that directory."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def legato_session_cache(tmp_path_factory):
    """One JIT cache for the session (probes and kernels compile once), never ~/.cache."""
    old = os.environ.get("LEGATO_CACHE_DIR")
    os.environ["LEGATO_CACHE_DIR"] = str(tmp_path_factory.mktemp("legato-cache"))
    yield
    if old is None:
        os.environ.pop("LEGATO_CACHE_DIR", None)
    else:
        os.environ["LEGATO_CACHE_DIR"] = old
