"""The JIT cache key: it changes when anything that changes the compiled program changes (the
versions of the libraries codegen uses, what the frontend reads at compile time), and only then."""

from __future__ import annotations

import importlib.metadata

import pytest

import legato
from legato.jit import cache
from legato.model import bertha

f32 = legato.types.float("float32")


def one_core(ctx):
    return bertha.Bertha(ctx, "bertha", 1, False, 4, 1 << 30)


@legato.compile(backend=one_core)
def twice(
    x: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
    out: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * 2.0)


@pytest.fixture
def fresh_versions():
    cache.library_versions.cache_clear()
    yield
    cache.library_versions.cache_clear()


@pytest.mark.parametrize("library", ["xdsl", "numpy", "ml_dtypes"])
def test_a_library_version_changes_the_key(library, monkeypatch, fresh_versions):
    key = twice.cache_key()
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: "0.0.0-other" if name == library else real(name),
    )
    cache.library_versions.cache_clear()
    assert dict(cache.library_versions())[library] == "0.0.0-other"
    assert twice.cache_key() != key
    monkeypatch.undo()
    cache.library_versions.cache_clear()
    assert twice.cache_key() == key
