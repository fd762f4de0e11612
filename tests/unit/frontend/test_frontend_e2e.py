"""End to end: the seed kernel, from Python source to results.

* at the legato level: the frontend's module run by the legato interpreter;
* as a binary: `simple_matmul(a, b, out)` through the compiler and the Bertha runtime
  (skipped while `legato.compiler` does not exist).
Results must equal `legato.numerics.matmul_acc` rounded to bf16 exactly, and torch's
`(a.float() @ b.float()).bfloat16()` within 1 bf16 ulp.
"""

from __future__ import annotations

import importlib.util

import ml_dtypes
import numpy as np
import pytest
import torch
from frontend_helpers import SEED_KERNEL, load_source

import legato
from legato.numerics import matmul_acc

HAVE_COMPILER = importlib.util.find_spec("legato.compiler") is not None


def _bf16_np(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)


def _inputs(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, 256, generator=g).bfloat16()
    b = torch.randn(256, 128, generator=g).bfloat16()
    return a, b


def _check(out_rows: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    exact = matmul_acc(_bf16_np(a), _bf16_np(b)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(_bf16_np(out_rows), exact)
    ref = (a.float() @ b.float()).bfloat16()
    # within one bf16 ulp of torch (its fp32 sum may run in another order)
    ulp = torch.finfo(torch.bfloat16).eps * ref.float().abs().clamp_min(1e-30)
    assert ((out_rows.float() - ref.float()).abs() <= ulp * 1.0001).all()


@pytest.fixture
def seed(tmp_path):
    return load_source(tmp_path, SEED_KERNEL)


@pytest.mark.parametrize("n", [1, 5, 10])
def test_seed_at_the_legato_level(seed, n):
    from legato.interp.api import run

    a, b = _inputs(n, seed=n)
    out = torch.zeros(10, 128, dtype=torch.bfloat16)
    run(seed.simple_matmul.emit_module(), "legato", [a, b, out], seed.simple_matmul.model)
    _check(out[:n], a, b)


@pytest.mark.skipif(not HAVE_COMPILER, reason="legato.compiler not written yet")
def test_seed_binary_for_every_n_with_one_compile(seed, cache_dir, tmp_path):
    k = seed.simple_matmul
    out_dir = tmp_path / "simple_matmul"
    for n in range(1, 11):
        a, b = _inputs(n, seed=n)
        out = torch.zeros(10, 128, dtype=torch.bfloat16)
        with legato.session(output_type=legato.OutputType.BINARY, output_path=out_dir):
            k(a, b, out)
        _check(out[:n], a, b)
        assert k.last_run is not None and k.last_run.cycles > 0
    assert k.compile_count == 1
    assert (out_dir / "simple_matmul.elf").read_bytes()[:4] == b"\x7fELF"
    a, b = _inputs(11)
    with pytest.raises(legato.LegatoError, match="upper bound 10"):
        k(a, b, torch.zeros(10, 128, dtype=torch.bfloat16))


@pytest.mark.skipif(not HAVE_COMPILER, reason="legato.compiler not written yet")
def test_seed_example_verbatim(tmp_path, cache_dir, monkeypatch):
    """The README's quick look, as written (session BINARY into ./simple_matmul)."""
    monkeypatch.chdir(tmp_path)
    src = (
        SEED_KERNEL
        + """
import torch
output = torch.zeros(10, 128, dtype=torch.bfloat16)
with legato.session(output_type=legato.OutputType.BINARY, output_path="simple_matmul"):
    simple_matmul(
        torch.randn(10, 256, dtype=torch.bfloat16),
        torch.randn(256, 128, dtype=torch.bfloat16),
        output,
    )
"""
    )
    mod = load_source(tmp_path, src)
    assert (tmp_path / "simple_matmul" / "simple_matmul.elf").exists()
    assert mod.output.abs().sum() > 0


@pytest.mark.skipif(not HAVE_COMPILER, reason="legato.compiler not written yet")
def test_every_session_stage_with_the_real_compiler(seed, cache_dir, tmp_path):
    import io

    from elftools.elf.elffile import ELFFile

    from legato.interp.api import parse_module

    a, b = _inputs(10)
    suffixes = {}
    for t in legato.OutputType:
        out = torch.zeros(10, 128, dtype=torch.bfloat16)
        with legato.session(output_type=t, output_path=tmp_path / "o"):
            seed.simple_matmul(a, b, out)
        _check(out, a, b)
        suffixes[t] = tmp_path / "o" / f"simple_matmul{t.suffix}"
        assert suffixes[t].stat().st_size > 0
    assert seed.simple_matmul.compile_count == 1
    text = suffixes[legato.OutputType.MLIR].read_text()
    assert 'loc("' in text
    parse_module(text).verify()
    parse_module(suffixes[legato.OutputType.CORE_IR].read_text())
    elf = ELFFile(io.BytesIO(suffixes[legato.OutputType.BINARY].read_bytes()))
    assert elf.header["e_machine"] in (0xBE27, "<unknown>: 0xbe27")


@pytest.mark.skipif(not HAVE_COMPILER, reason="legato.compiler not written yet")
def test_disk_cache_hit_runs_the_same_binary(tmp_path, cache_dir):
    first = load_source(tmp_path, SEED_KERNEL, name="legato_e2e_cache_a")
    a, b = _inputs(4)
    out = torch.zeros(10, 128, dtype=torch.bfloat16)
    first.simple_matmul(a, b, out)
    assert first.simple_matmul.compile_count == 1
    legato.jit.clear_memory_cache()
    # Same source in the same file: a fresh Kernel reads the binary from disk.
    again = load_source(tmp_path, SEED_KERNEL, name="legato_e2e_cache_a")
    out2 = torch.zeros(10, 128, dtype=torch.bfloat16)
    again.simple_matmul(a, b, out2)
    assert again.simple_matmul.compile_count == 0
    assert torch.equal(out, out2)
    assert again.simple_matmul.last_artifacts.binary == first.simple_matmul.last_artifacts.binary
