"""Fixtures of the legato torch backend tests."""

import os

import pytest
import torch

from tests.unit.session_cache import legato_session_cache  # noqa: F401 (autouse here)


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
