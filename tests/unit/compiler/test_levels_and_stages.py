"""The seed kernel at every level: legato, core and backend interpreters and the emulator agree
bit for bit; every session stage is written and the IR stages re-parse with `legato-opt`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import legato
from legato.errors import LegatoError
from legato.model import bertha
from legato.numerics import matmul_acc

REPO = Path(__file__).resolve().parents[3]


@legato.compile(backend=bertha)
def seed_matmul(
    a: legato.get_model().tensor_type(
        legato.types.float("bfloat16"), ((-1, 10), 256), "shared_dram"
    ),
    b: legato.get_model().tensor_type(legato.types.float("bfloat16"), [256, 128], "mpu_dram"),
    out: legato.get_model().tensor_type(legato.types.float("bfloat16"), [10, 128], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
        legato.tensor.request_load(b, device.get_core(0), "mpu_buffer")
    with device.get_core(0):
        weight_type = legato.get_model().tensor_type(
            legato.types.float("bfloat16"), [256, 128], "mpu_weight"
        )
        loaded_a = legato.tensor.receive(a, 0, "sram")
        loaded_b = legato.tensor.receive_type(weight_type, 0, None, "mpu_buffer")
        legato.tensor.memcpy(out, loaded_a @ loaded_b)


@pytest.mark.parametrize("n", [1, 6, 10])
def test_every_level_agrees_with_the_emulator(n):
    g = torch.Generator().manual_seed(n)
    a = torch.randn(n, 256, generator=g).bfloat16()
    b = torch.randn(256, 128, generator=g).bfloat16()
    expected = matmul_acc(a.float().numpy(), b.float().numpy()).astype(np.float32)
    expected = torch.from_numpy(expected).bfloat16()
    results = {}
    for level in ("legato", "core", "backend"):
        out = torch.full((10, 128), 7.0, dtype=torch.bfloat16)
        seed_matmul.interpret(a, b, out, level=level)
        results[level] = out
    out = torch.full((10, 128), 7.0, dtype=torch.bfloat16)
    seed_matmul(a, b, out)
    results["emulator"] = out
    for level, got in results.items():
        assert torch.equal(got[:n], expected), level
        # rows past the runtime extent are untouched
        assert torch.all(got[n:] == 7.0), level


def test_unknown_level_is_refused():
    a = torch.zeros(2, 256, dtype=torch.bfloat16)
    b = torch.zeros(256, 128, dtype=torch.bfloat16)
    out = torch.zeros(10, 128, dtype=torch.bfloat16)
    with pytest.raises(LegatoError, match="unknown level 'asm'"):
        seed_matmul.interpret(a, b, out, level="asm")


def test_ir_stages_reparse_with_legato_opt(tmp_path):
    a = torch.randn(3, 256).bfloat16()
    b = torch.randn(256, 128).bfloat16()
    out = torch.zeros(10, 128, dtype=torch.bfloat16)
    for stage in (legato.OutputType.MLIR, legato.OutputType.CORE_IR, legato.OutputType.BACKEND_IR):
        with legato.session(output_type=stage, output_path=tmp_path):
            seed_matmul(a, b, out)
    files = sorted(tmp_path.glob("seed_matmul*"))
    assert [f.name for f in files] == [
        "seed_matmul.backend.mlir",
        "seed_matmul.core.mlir",
        "seed_matmul.mlir",
    ]
    for f in files:
        r = subprocess.run(
            [sys.executable, str(REPO / "tools" / "legato-opt"), str(f)],
            capture_output=True,
            check=False,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        assert "seed_matmul" in r.stdout


def test_written_ir_lowers_with_legato_opt_to_the_same_assembly(tmp_path):
    """The MLIR stage fed to `legato-opt -t asm` gives the assembly the JIT produced."""
    a = torch.randn(3, 256).bfloat16()
    b = torch.randn(256, 128).bfloat16()
    out = torch.zeros(10, 128, dtype=torch.bfloat16)
    with legato.session(output_type=legato.OutputType.MLIR, output_path=tmp_path):
        seed_matmul(a, b, out)
    r = subprocess.run(
        [
            sys.executable,
            str(REPO / "tools" / "legato-opt"),
            str(tmp_path / "seed_matmul.mlir"),
            "-t",
            "asm",
        ],
        capture_output=True,
        check=False,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == seed_matmul.last_artifacts.asm


def test_binary_names_the_kernel_arguments():
    from legato.targets.bertha.elf import read_elf

    a = torch.randn(2, 256).bfloat16()
    b = torch.randn(256, 128).bfloat16()
    seed_matmul(a, b, torch.zeros(10, 128, dtype=torch.bfloat16))
    layout = read_elf(seed_matmul.last_artifacts.binary).layout
    assert [arg.name for arg in layout.args] == ["a", "b", "out"]
    assert [arg.access for arg in layout.args] == ["read", "read", "write"]


def test_compile_error_traceback_stops_at_the_call(tmp_path):
    """A compile error names the kernel's line; the compiler's own frames are not shown."""
    import traceback

    from legato.errors import CompileError

    @legato.compile(backend=bertha)
    def bad(
        a: legato.get_model().tensor_type(legato.types.float("bfloat16"), [4, 8], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        with device.get_top():
            legato.tensor.request_load(a, device.get_core(0), "sramm")

    with pytest.raises(CompileError) as e:
        bad(torch.zeros(4, 8, dtype=torch.bfloat16))
    assert "unknown memory space 'sramm'" in str(e.value)
    assert f"{__file__}:" in str(e.value)
    frames = [f.filename for f in traceback.extract_tb(e.value.__traceback__)]
    assert not any("/legato/frontend/" in f or "/legato/transforms/" in f for f in frames), frames
