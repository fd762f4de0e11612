"""Frictions a new kernel author met (issue 18, item 6): a silent spill to private DRAM, IR
argument names `legato-run` did not take, bf16 `.npy` files numpy could not read back."""

from __future__ import annotations

import inspect
import warnings

import ml_dtypes
import numpy as np
import pytest

import legato
import legato.model.bertha as bertha
from legato.tools import run as run_tool

F32 = legato.types.float("float32")
BIG = legato.get_model().tensor_type(F32, [1024, 1024], "shared_dram")  # 4 MiB: twice the sram
SMALL = legato.get_model().tensor_type(F32, [64, 64], "shared_dram")


@legato.compile(backend=bertha)
def big_copy(x: BIG, out: BIG):
    device = legato.get_context().get_device()
    with device.get_core(0):
        t = legato.tensor.load(x)
        legato.tensor.memcpy(out, t + 1.0)


@legato.compile(backend=bertha)
def small_copy(x: SMALL, out: SMALL):
    device = legato.get_context().get_device()
    with device.get_core(0):
        t = legato.tensor.load(x)
        legato.tensor.memcpy(out, t + 1.0)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    legato.jit.clear_memory_cache()


def _line_of(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, t in enumerate(lines) if text in t)


def test_a_spill_to_private_dram_is_a_warning_at_the_buffers_line(fresh_cache):
    with pytest.warns(legato.PerformanceWarning) as record:
        big_copy.compile()
    spills = [w for w in record if issubclass(w.category, legato.PerformanceWarning)]
    assert spills
    loads = [w for w in spills if w.lineno == _line_of(big_copy, "tensor.load(x)")]
    (w,) = loads
    assert w.filename == __file__
    msg = str(w.message)
    assert "[1024, 1024] f32 buffer (4.00 MiB (4194304 bytes))" in msg
    assert "2.00 MiB (2097152 bytes) on bertha" in msg and "private DRAM" in msg
    # and the kernel still runs, correctly
    x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    out = np.zeros_like(x)
    big_copy(x, out)
    np.testing.assert_array_equal(out, x + np.float32(1.0))


def test_a_kernel_that_fits_warns_nothing(fresh_cache):
    with warnings.catch_warnings():
        warnings.simplefilter("error", legato.PerformanceWarning)
        small_copy.compile()


@pytest.mark.parametrize("level", ["legato", "core", "backend"])
def test_legato_run_takes_the_irs_argument_names_at_every_level(level, tmp_path, capsys):
    text = {
        "legato": small_copy.to_mlir,
        "core": lambda: small_copy.lower("core_ir"),
        "backend": lambda: small_copy.lower("backend_ir"),
    }[level]()
    path = tmp_path / f"k.{level}.mlir"
    path.write_text(text)
    status = run_tool.main([str(path), "-a", "out=zeros", "-a", "%x=ones", "--print", "out"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out.startswith("%out : ") and "2." in out
    assert run_tool.main([str(path), "-a", "ones", "-a", "nope=zeros"]) == 1
    assert "has no argument named 'nope' (x, out)" in capsys.readouterr().err
    assert run_tool.main([str(path), "-a", "x=ones"]) == 1
    assert "missing out" in capsys.readouterr().err
    assert run_tool.main([str(path), "-a", "ones", "-a", "x=ones"]) == 1
    assert "argument 'x' is given twice" in capsys.readouterr().err


def test_legato_run_saves_bf16_that_numpy_reads_back_as_bf16(tmp_path, capsys):
    bf = legato.types.float("bfloat16")
    t = legato.get_model().tensor_type(bf, [4, 64], "shared_dram")

    mlir = tmp_path / "k.mlir"
    mlir.write_text(
        "legato.kernel @k(%x : !legato.tensor<[4, 64], bf16, shared_dram>, "
        "%out : !legato.tensor<[4, 64], bf16, shared_dram>) {\n"
        "  legato.on core(0) {\n"
        "    %l = legato.load %x memory sram : !legato.tensor<[4, 64], bf16, shared_dram> -> "
        "!legato.tensor<[4, 64], bf16, sram>\n"
        "    legato.memcpy %out, %l : !legato.tensor<[4, 64], bf16, shared_dram>, "
        "!legato.tensor<[4, 64], bf16, sram>\n"
        "    legato.yield\n  }\n  legato.return\n}\n"
    )
    assert t.dtype.numpy == np.dtype(ml_dtypes.bfloat16)
    saved = tmp_path / "saved"
    assert run_tool.main([str(mlir), "-a", "rand:3", "-a", "zeros", "--save", str(saved)]) == 0, (
        capsys.readouterr().err
    )
    x = np.load(saved / "x.npy")
    out = np.load(saved / "out.npy")
    assert x.dtype == out.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), x.view(np.uint16))
    ref = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)
    np.testing.assert_array_equal(x, ref.astype(ml_dtypes.bfloat16))
    # and legato-run reads its own files back
    capsys.readouterr()
    assert run_tool.main([str(mlir), "-a", str(saved / "x.npy"), "-a", "zeros"]) == 0


def test_a_disk_cache_hit_warns_the_spill_again(fresh_cache):
    # a second run of the script compiles nothing, and is as slow: it says why again
    with pytest.warns(legato.PerformanceWarning) as first:
        big_copy.compile()
    said = sorted(
        (str(w.message), w.lineno) for w in first if w.category is legato.PerformanceWarning
    )
    legato.jit.clear_memory_cache()
    compiles = big_copy.compile_count
    with pytest.warns(legato.PerformanceWarning) as again:
        big_copy.compile()
    assert big_copy.compile_count == compiles  # a disk hit
    assert (
        sorted((str(w.message), w.lineno) for w in again if w.category is legato.PerformanceWarning)
        == said
    )
    assert all(w.filename == __file__ for w in again)
    legato.jit.clear_memory_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("error", legato.PerformanceWarning)
        with pytest.raises(legato.PerformanceWarning):
            big_copy.compile()  # the caller's filters apply to the replay too
