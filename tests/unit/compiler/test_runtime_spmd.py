"""Runtime loops, SPMD with core_id, barriers, semaphores and core-to-core transfers, called
from Python (compile + emulator), against torch; runaway loops hit the instruction limits.
(The same kernels run at every IR level in the differential corpus.)"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)

from legato.interp import StepLimitExceeded
from legato.interp.api import run
from legato.targets.bertha.runtime import run_binary
from tests.corpus import runtime_kernels as rk


@pytest.mark.parametrize("rows", [1, 8, 13, 64])
def test_runtime_loop_over_row_tiles_of_a_dynamic_input(rows):
    x = torch.randn(rows, 32)
    out, total = torch.zeros(64, 32), torch.zeros(1, 32)
    rk.row_tiles(x, out, total)
    torch.testing.assert_close(out[:rows], x * 2 + 1, rtol=0, atol=0)
    assert (out[rows:] == 0).all()
    torch.testing.assert_close(total, x.sum(0, keepdim=True))
    asm = rk.row_tiles.lower("ASM")
    # one loop, not unrolled: the body's instructions appear once
    assert asm.count("blt r31") == 1 and asm.count("dma ") == 4  # init, load, store, total


@pytest.mark.parametrize("rows", [5, 16, 37])
def test_mpu_inside_a_runtime_loop(rows):
    x = torch.randn(rows, 256).bfloat16()
    w = torch.randn(256, 128).bfloat16()
    out = torch.zeros(64, 128, dtype=torch.bfloat16)
    rk.loop_matmul(x, w, out)
    ref = (x.float() @ w.float()).bfloat16()
    torch.testing.assert_close(out[:rows].float(), ref.float(), rtol=2**-7, atol=1e-2)


def test_spmd_matmul_on_four_cores():
    a = torch.randn(rk.NC * rk.R, 256).bfloat16()
    w = torch.randn(256, 128).bfloat16()
    out = torch.zeros(rk.NC * rk.R, 128, dtype=torch.bfloat16)
    rk.spmd_matmul(a, w, out)
    torch.testing.assert_close(
        out.float(), (a.float() @ w.float()).bfloat16().float(), rtol=2**-7, atol=1e-2
    )
    asm = rk.spmd_matmul.lower("ASM")
    assert ".program cores on all_cores" in asm


def test_spmd_barriers_and_semaphore():
    a = torch.randn(rk.NC * rk.R, 64)
    out = torch.zeros_like(a)
    rk.spmd_exchange(a, out)
    torch.testing.assert_close(out, torch.roll(torch.exp(a), -rk.R, 0) + 1)
    asm = rk.spmd_exchange.lower("ASM")
    assert asm.count(f"barrier 0, {rk.NC}") == 2
    assert "sem.post 0, 1" in asm and f"sem.wait 0, {rk.NC}" in asm


def test_core_to_core_request_load():
    a = torch.randn(rk.R, 64)
    out = torch.zeros_like(a)
    rk.core_to_core(a, out)
    torch.testing.assert_close(out, a * a + 1)
    asm = rk.core_to_core.lower("ASM")
    assert "core1.sram" in asm  # core 0 addresses core 1's memory


def test_spmd_request_load_to_a_runtime_core():
    a = torch.randn(rk.NC * rk.R, 64)
    out = torch.zeros_like(a)
    rk.spmd_ring(a, out)
    two = a * 2
    torch.testing.assert_close(
        out, a + torch.roll(two, rk.R, 0) - torch.roll(two, 2 * rk.R, 0) * 0.5, rtol=0, atol=0
    )
    asm = rk.spmd_ring.lower("ASM")
    # one program; the sender addresses and notifies the core in a register (lsa/notify CORE_REG)
    assert asm.count(".program") == 1
    assert "core(r" in asm and asm.count(".sram.q1") >= 2


def _spmd_error(body: str, tmp_path, name: str):
    """Compile a four-core kernel whose all-cores region is `body`; the CompileError."""
    import importlib.util

    from legato.errors import CompileError

    src = tmp_path / f"{name}.py"
    src.write_text(
        "import legato\n"
        "from tests.corpus.runtime_kernels import four_cores, tt\n\n"
        "@legato.compile(backend=four_cores)\n"
        f"def {name}(a: tt([8, 64], 'shared_dram'), out: tt([8, 64], 'shared_dram')):\n"
        "    device = legato.get_context().get_device()\n" + body
    )
    spec = importlib.util.spec_from_file_location(name, src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(CompileError) as e:
        getattr(mod, name).to_mlir()
    return str(e.value)


@pytest.mark.parametrize(
    "body, message, line",
    [
        (
            "    with device.get_all_cores():\n"
            "        with device.get_core(legato.core_id()):\n            pass\n",
            "needs a compile-time core index",
            8,
        ),
        (
            "    with device.get_all_cores():\n"
            "        x = legato.tensor.load(a)\n"
            "        legato.tensor.request_load(x, device.get_core(legato.core_id()), 'mpu_buffer')\n",
            "supports memory 'sram' only",
            9,
        ),
        (
            "    with device.get_all_cores():\n"
            "        legato.sync.signal(device.get_core(legato.core_id()))\n",
            "of a compile-time i",
            8,
        ),
    ],
)
def test_spmd_runtime_core_errors(body, message, line, tmp_path):
    err = _spmd_error(body, tmp_path, f"k{abs(hash(body)) % 10000}")
    assert message in err and f".py:{line}:" in err, err


def test_with_get_core_of_a_runtime_index_is_refused(tmp_path):
    err = _spmd_error(
        "    with device.get_all_cores():\n"
        "        c = legato.core_id()\n"
        "    with device.get_core(c):\n        pass\n",
        tmp_path,
        "with_runtime",
    )
    assert ".py:9:" in err, err


def test_spmd_on_all_32_cores():
    a = torch.randn(128, 64).bfloat16()
    out = torch.zeros_like(a)
    rk.spmd32_silu(a, out)
    torch.testing.assert_close(
        out.float(), torch.nn.functional.silu(a.float()).bfloat16().float(), rtol=2**-7, atol=1e-2
    )


RUNAWAY = """
import legato

f32 = legato.types.float("float32")


@legato.compile(backend="bertha")
def runaway(x: legato.get_model().tensor_type(f32, ((-1, 64), 8), "shared_dram")):
    device = legato.get_context().get_device()
    with device.get_core(0):
        for i in range(x.size(0) * 1000000000):
            t = legato.tensor.load(x[0:1, :])
"""


def test_a_runaway_loop_is_stopped_by_the_instruction_limits(tmp_path):
    path = tmp_path / "runaway_kernel.py"
    path.write_text(RUNAWAY)
    import importlib.util

    spec = importlib.util.spec_from_file_location("runaway_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    k = mod.runaway
    x = np.ones((64, 8), np.float32)
    binary = k.lower("BINARY")
    with pytest.raises(Exception, match="instruction limit of 10000 exceeded"):
        run_binary(binary, k.model, [x], instruction_limit=10_000)
    with pytest.raises(StepLimitExceeded):
        run(k.emit_module(), "legato", [x], k.model, max_steps=10_000)


def test_more_semaphores_than_the_hardware_has_is_a_compile_error():
    from legato.compiler import compile_kernel
    from legato.errors import CompileError
    from legato.interp.api import parse_module
    from legato.model import bertha

    waits = "\n".join(f"      legato.wait sem {i} count 1" for i in range(65))
    text = f"""
legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {{
  legato.on top {{
{waits}
    legato.yield
  }}
  legato.return
}}"""
    with pytest.raises(CompileError, match="more than 64 .context, semaphore. pairs"):
        compile_kernel(parse_module(text), bertha.evt0())
