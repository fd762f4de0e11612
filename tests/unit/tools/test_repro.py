"""`LEGATO_REPRO=DIR`: a failing frontend, compile or run writes a folder whose `repro.py`, run in
a fresh process, fails with the same error.

The kernels are defined here, in a real file: the frontend reads their source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import legato
import legato.model.bertha as bertha

ROOT = Path(__file__).resolve().parents[3]
F32 = legato.types.float("float32")
BF16 = legato.types.float("bfloat16")
T = legato.get_model().tensor_type(F32, [8, 64], "shared_dram")
TB = legato.get_model().tensor_type(BF16, [8, 64], "shared_dram")


@legato.compile(backend=bertha)
def steps(x: T, out: T):
    device = legato.get_context().get_device()
    with device.get_core(0):
        o = legato.tensor.load(out)
        t = legato.tensor.load(x[:, 0:16])
        legato.tensor.memcpy(o[:, ::4], t)  # into a slice with a step: refused by the lowering
        legato.tensor.memcpy(out, o)


@legato.compile(backend=bertha)
def unknown_op(x: T, out: T):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.no_such_op(legato.tensor.load(x)))


@legato.compile(backend=bertha)
def slow(x: TB, out: TB):
    device = legato.get_context().get_device()
    with device.get_core(0):
        t = legato.tensor.load(x)
        legato.tensor.memcpy(out, legato.tensor.exp(t) + t)


def _bundles(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())


def _reproduce(bundle: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LEGATO_REPRO", None)
    return subprocess.run(
        [sys.executable, str(bundle / "repro.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=bundle.parent,  # not the checkout: the script stands alone
        timeout=300,
    )


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


@pytest.fixture
def repro_dir(tmp_path, monkeypatch):
    d = tmp_path / "repro"
    monkeypatch.setenv("LEGATO_REPRO", str(d))
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    legato.jit.clear_memory_cache()
    return d


def test_compile_failure_bundle_reproduces(repro_dir):
    x, out = np.ones((8, 64), np.float32), np.zeros((8, 64), np.float32)
    with pytest.raises(legato.CompileError) as info:
        steps(x, out)
    (bundle,) = _bundles(repro_dir)
    assert info.value.repro_bundle == bundle
    assert any(str(bundle) in n for n in info.value.__notes__)
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["stage"] == "compile" and meta["kernel"] == "steps"
    assert (bundle / "kernel.mlir").read_text().count("legato.kernel @steps") == 1
    assert 'loc("' in (bundle / "kernel.mlir").read_text()  # the Python locations kept
    assert not (bundle / "kernel.core.mlir").exists()  # the level it did not reach
    assert (bundle / "source.py").read_text() == Path(__file__).read_text()
    done = _reproduce(bundle)
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == _error_text(info.value).strip()


def test_frontend_failure_bundle_reproduces(repro_dir):
    x, out = np.ones((8, 64), np.float32), np.zeros((8, 64), np.float32)
    with pytest.raises(legato.CompileError) as info:
        unknown_op(x, out)
    (bundle,) = _bundles(repro_dir)
    assert json.loads((bundle / "meta.json").read_text())["stage"] == "frontend"
    assert not (bundle / "kernel.mlir").exists()
    done = _reproduce(bundle)
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == _error_text(info.value).strip()


def test_run_failure_bundle_reproduces(repro_dir):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 64)).astype(np.float32).astype(ml_dtypes.bfloat16)
    out = np.zeros_like(x)
    with legato.session(cycle_limit=50), pytest.raises(legato.LegatoRuntimeError) as info:
        slow(x, out)
    assert "cycle limit of 50" in str(info.value)
    (bundle,) = _bundles(repro_dir)
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["stage"] == "run" and meta["limits"]["cycles"] == 50
    for level in ("kernel.mlir", "kernel.core.mlir", "kernel.backend.mlir", "kernel.elf"):
        assert (bundle / level).stat().st_size > 0
    saved = np.load(bundle / "inputs" / "arg0.npy")  # bf16, readable as such
    assert saved.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(saved.view(np.uint16), x.view(np.uint16))
    done = _reproduce(bundle)
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == _error_text(info.value).strip()


def test_no_bundle_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("LEGATO_REPRO", raising=False)
    monkeypatch.chdir(tmp_path)
    x, out = np.ones((8, 64), np.float32), np.zeros((8, 64), np.float32)
    with pytest.raises(legato.CompileError) as info:
        steps(x, out)
    assert getattr(info.value, "repro_bundle", None) is None
    assert list(tmp_path.iterdir()) == []
