"""The JIT cache key: it changes when anything that changes the compiled program changes (the
versions of the libraries codegen uses, what the frontend reads at compile time), and only then."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import subprocess
import sys

import numpy as np
import pytest

import legato
from legato.jit import cache
from tests.corpus.one_core import f32, one_core


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


# -- what the frontend reads at compile time, across processes ------------------------------------

HELPERS = """
K = 2.0


def factor():
    return K


def scale():
    return factor()
"""

KERNEL = """
import numpy as np

import legato
from legato import jit
from legato.model import bertha
from helpmod import scale

f32 = legato.types.float("float32")


def one_core(ctx):
    return bertha.Bertha(ctx, "bertha", 1, False, 4, 1 << 30)


@legato.compile(backend=one_core)
def k(
    x: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
    out: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * scale())


x = np.ones((4, 8), np.float32)
out = np.zeros_like(x)
k(x, out)
print(float(out[0, 0]), jit.stats["compiles"])
"""


def _run(directory, cache_dir) -> tuple[float, int]:
    env = dict(os.environ, LEGATO_CACHE_DIR=str(cache_dir), PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(directory), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(directory / "kmain.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    value, compiles = done.stdout.split()
    return float(value), int(compiles)


def test_a_transitive_helper_constant_edited_on_disk_recompiles(tmp_path):
    (tmp_path / "helpmod.py").write_text(HELPERS)
    (tmp_path / "kmain.py").write_text(KERNEL)
    cache_dir = tmp_path / "cache"
    assert _run(tmp_path, cache_dir) == (2.0, 1)
    assert _run(tmp_path, cache_dir) == (2.0, 0)  # another process: the disk cache
    # An unrelated edit (a new constant no helper reads): no recompile.
    (tmp_path / "helpmod.py").write_text(HELPERS + "\nUNUSED = 7\n")
    assert _run(tmp_path, cache_dir) == (2.0, 0)
    # The constant that `factor` (called by `scale`, called by the kernel) reads: recompiled.
    (tmp_path / "helpmod.py").write_text(HELPERS.replace("K = 2.0", "K = 3.0"))
    assert _run(tmp_path, cache_dir) == (3.0, 1)
    assert _run(tmp_path, cache_dir) == (3.0, 0)


# -- attributes, arrays, shadowing (in process: the key is read from the live values) -------------


OFFSET = 1.0


class Config:
    def __init__(self, scale):
        self.scale = scale

    def factor(self):
        return self.scale + OFFSET


cfg = Config(2.0)
TABLE = np.arange(8, dtype=np.float32)
n = 5  # a global that the kernel's local `n` shadows


@legato.compile(backend=one_core)
def reads(
    x: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
    out: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        n = x.size(0)
        legato.tensor.memcpy(
            out, legato.tensor.load(x, "sram") * cfg.scale * float(TABLE[1]) * n * cfg.factor()
        )


def test_an_attribute_read_at_compile_time_is_in_the_key(monkeypatch):
    key = reads.cache_key()
    monkeypatch.setattr(cfg, "scale", 3.0)
    assert reads.cache_key() != key
    monkeypatch.setattr(cfg, "scale", 2.0)
    assert reads.cache_key() == key


def test_a_numpy_array_global_is_in_the_key_by_dtype_shape_and_bytes(monkeypatch):
    key = reads.cache_key()
    TABLE[1] = 5.0
    try:
        assert reads.cache_key() != key  # the same array object, other bytes
    finally:
        TABLE[1] = 1.0
    assert reads.cache_key() == key
    monkeypatch.setitem(globals(), "TABLE", TABLE.astype(np.float64))
    assert reads.cache_key() != key
    monkeypatch.setitem(globals(), "TABLE", np.concatenate([TABLE, TABLE]))
    assert reads.cache_key() != key


def test_a_global_that_a_kernel_local_shadows_is_not_in_the_key(monkeypatch):
    key = reads.cache_key()
    monkeypatch.setitem(globals(), "n", 6)
    assert reads.cache_key() == key


def test_a_method_helper_its_object_and_its_globals_are_in_the_key(monkeypatch):
    key = reads.cache_key()
    monkeypatch.setitem(globals(), "OFFSET", 2.0)  # read by `cfg.factor()` at compile time
    assert reads.cache_key() != key
    monkeypatch.undo()
    assert reads.cache_key() == key
    cfg.extra = 1  # `self` gained state the method may read
    try:
        assert reads.cache_key() != key
    finally:
        del cfg.extra
    assert reads.cache_key() == key


FACTOR = 2.0


def _helper_factor():
    return FACTOR


@legato.compile(backend=one_core)
def by_globals(
    x: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
    out: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * FACTOR * _helper_factor())


def test_an_unchanged_key_is_not_hashed_again_and_a_rebound_name_still_changes_it(monkeypatch):
    from legato.frontend import deps

    key = by_globals.cache_key()
    hashed = []
    real = deps._value_fingerprint
    monkeypatch.setattr(deps, "_value_fingerprint", lambda v, *a: hashed.append(v) or real(v, *a))
    assert by_globals.cache_key() == key
    assert hashed == []  # every name read the same immutable object: nothing re-hashed
    monkeypatch.setitem(globals(), "FACTOR", 3.0)  # rebinding a global the kernel and helper read
    assert by_globals.cache_key() != key
    monkeypatch.setitem(globals(), "FACTOR", 2.0)
    assert by_globals.cache_key() == key

    def _helper_factor():  # a redefined helper (a new code object)
        return FACTOR * 1.0

    monkeypatch.setitem(globals(), "_helper_factor", _helper_factor)
    assert by_globals.cache_key() != key
    monkeypatch.undo()
    assert by_globals.cache_key() == key


# -- helpers of every form: a lambda, a partial, a classmethod, a class attribute read as self.x --

LAMBDA_K = 2.0
lambda_helper = lambda: LAMBDA_K  # noqa: E731 - the form under test


def _mul(a, b):
    return a * b


partial_helper = functools.partial(_mul, 2.0)


class Scales:
    scale = 2.0  # a class attribute: no instance has it among its fields

    @classmethod
    def by_class(cls):
        return cls.scale

    def by_instance(self):
        return self.scale

    def ping(self):  # methods that reach each other through `self`: followed once
        return self.pong() if False else self.scale

    def pong(self):
        return self.ping()


scales = Scales()


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self):
        return self.k


scaler = Scaler(2.0)  # a callable object


@legato.compile(backend=one_core)
def by_forms(
    x: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
    out: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        s = lambda_helper() * partial_helper(1.0) * Scales.by_class()
        s = s * scales.by_instance() * scales.ping() * scaler()
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * s)


@pytest.mark.parametrize(
    "change",
    [
        lambda mp: mp.setitem(globals(), "LAMBDA_K", 3.0),  # a global a lambda helper reads
        lambda mp: mp.setitem(globals(), "partial_helper", functools.partial(_mul, 3.0)),
        lambda mp: mp.setattr(Scales, "scale", 3.0),  # read as cls.scale and self.scale
        lambda mp: mp.setattr(scaler, "k", 3.0),  # a field its __call__ reads
    ],
    ids=["lambda", "partial", "class_attribute", "callable_object"],
)
def test_a_value_a_helper_of_any_form_reads_is_in_the_key(monkeypatch, change):
    """Found by the trust audit: each of these changes used to leave the key (and a cached
    binary computing with the old value: 2.0 instead of 3.0) unchanged."""
    x = np.ones((4, 8), np.float32)
    key = by_forms.cache_key()
    change(monkeypatch)
    assert by_forms.cache_key() != key
    out = np.zeros_like(x)
    by_forms(x, out)
    # the helpers run in Python now give what a fresh compile computes with
    want = lambda_helper() * partial_helper(1.0) * Scales.by_class()
    want *= scales.by_instance() * scales.ping() * scaler()
    assert want != 2.0**6
    np.testing.assert_array_equal(out, np.full_like(x, want))
    monkeypatch.undo()
    assert by_forms.cache_key() == key
