"""Fixtures of the legato torch backend tests."""

import os

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _legato_cache(tmp_path_factory):
    """One JIT cache for the session (probes and kernels compile once), never ~/.cache."""
    old = os.environ.get("LEGATO_CACHE_DIR")
    os.environ["LEGATO_CACHE_DIR"] = str(tmp_path_factory.mktemp("legato-cache"))
    yield
    if old is None:
        os.environ.pop("LEGATO_CACHE_DIR", None)
    else:
        os.environ["LEGATO_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def pytest_collection_modifyitems(config, items):
    """`@pytest.mark.slow` cases run only with LEGATO_SLOW_TESTS=1 (CI's time is limited)."""
    if os.environ.get("LEGATO_SLOW_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set LEGATO_SLOW_TESTS=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
