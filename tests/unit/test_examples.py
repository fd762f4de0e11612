"""The examples the README points at run as written (the README's first command runs the seed's
matmul example), and say what they did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, cwd: Path) -> str:
    env = {**os.environ, "LEGATO_CACHE_DIR": str(cwd / "cache")}
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_seed_matmul_example(tmp_path):
    out = _run("simple_matmul.py", tmp_path)
    assert "max |out - torch reference| = 0" in out
    assert "n=1: same rows as n=10 -> True; compiles so far: 1" in out
    assert (tmp_path / "simple_matmul" / "simple_matmul.elf").read_bytes()[:4] == b"\x7fELF"


def test_torch_mlp_example(tmp_path):
    out = _run("torch_mlp.py", tmp_path)
    assert "Legato kernel(s)" in out and "cycles/token" in out


def test_numpy_attention_example(tmp_path):
    out = _run("numpy_attention.py", tmp_path)
    assert "max |legato - numpy| = " in out and "1 on NumPy" in out
    diff = float(out.split("max |legato - numpy| = ")[1].split()[0])
    assert diff < 1e-3
    assert "np.cumsum" in out and "Legato kernel numpy_block_k0" in out


def test_lpu_eager_example(tmp_path):
    out = _run("lpu_eager.py", tmp_path)
    for step in (0, 1):
        line = out.split(f"pass {step}: output on lpu:0, max |lpu - cpu| = ")[1].split()[0]
        assert float(line) < 0.05  # bf16 softmax probabilities
    assert "legato aten.addmm.default: 4 call(s)" in out
    assert "cpu    aten.tril.default: 2 call(s)" in out


def test_pim_gemv_example(tmp_path):
    out = _run("pim_gemv.py", tmp_path)
    err = float(out.split("max |out - numpy|:")[1].split()[0])
    assert err < 2**-6  # one bf16 rounding of outputs below 2
    assert "PIM bytes (read inside the channels): 33554432" in out
