"""Fixtures of the frontend tests (helpers live in frontend_helpers.py)."""

import pytest
from frontend_helpers import install_fake_toolchain, use_cache_dir


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    return use_cache_dir(tmp_path, monkeypatch)


@pytest.fixture
def fake_toolchain(monkeypatch, cache_dir):
    return install_fake_toolchain(monkeypatch)
