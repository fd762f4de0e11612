"""Memory planning of runtime loops: a buffer allocated in a loop body lives within one
iteration, so a loop that streams more mpu_buffer tiles than fit at once runs when one
iteration's working set fits (the planner shares space between a body's buffers by their
liveness within the iteration), and one whose iteration does not fit is a compile error at the
user's line, naming the buffers live with it."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import textwrap

import pytest
import torch

import legato
import legato.jit

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)

from tests.corpus import runtime_kernels as rk

SOURCE = '''
import legato
from tests.corpus.runtime_kernels import four_cores, tt, bf16, f32


@legato.compile(backend=four_cores)
def all_tiles_first(
    x: tt(((-1, 64), 256), "shared_dram", bf16),
    w: tt([5 * 256, 128], "mpu_dram", bf16),
    out: tt([64, 128], "shared_dram", f32),
):
    """Five 64 KiB weight tiles loaded before the first is used: live together in every
    iteration, 320 KiB > 256 KiB of mpu_buffer."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        for t in range((x.size(0) + 15) // 16):
            a = legato.tensor.load(x[t * 16 : t * 16 + 16, :])
            ws = ()
            for j in legato.static_range(5):
                ws = ws + (legato.tensor.load(w[j * 256 : j * 256 + 256, :], "mpu_buffer"),)  # TILE
            acc = legato.tensor.matmul(a, ws[0], f32)
            for j in legato.static_range(1, 5):
                acc = acc + legato.tensor.matmul(a, ws[j], f32)
            legato.tensor.memcpy(out[t * 16 : t * 16 + 16, :], acc)
'''


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(legato.jit.cache, "_memory_cache", {})


def _mpu_buffer_offsets(core_ir: str) -> list[int]:
    return [
        int(m.group(1)) for m in re.finditer(r"core\.alloc mpu_buffer \{offset = (\d+)", core_ir)
    ]


@pytest.mark.parametrize("rows", [5, 37, 64])
def test_a_loop_streaming_more_tiles_than_fit_runs(rows):
    g = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, rk.KT * 256, generator=g).bfloat16()
    w = torch.randn(rk.KT * 256, 128, generator=g).bfloat16()
    out = torch.zeros(64, 128, dtype=torch.bfloat16)
    xt = x.reshape(rows, rk.KT, 256).transpose(0, 1).contiguous()
    rk.loop_streamed_weight(xt, w, out)
    ref = (x.float() @ w.float()).bfloat16()
    torch.testing.assert_close(out[:rows].float(), ref.float(), rtol=2**-7, atol=2e-2)
    assert (out[rows:] == 0).all()
    # five 64 KiB tiles in 256 KiB: at most four distinct places, each tile reused in place
    offsets = _mpu_buffer_offsets(str(rk.loop_streamed_weight.compile(xt, w, out).core_ir))
    assert len(offsets) == rk.KT and len(set(offsets)) < rk.KT, offsets


def test_an_iteration_that_does_not_fit_names_the_buffer_and_its_line(tmp_path):
    path = tmp_path / "loop_kernels.py"
    path.write_text(textwrap.dedent(SOURCE))
    spec = importlib.util.spec_from_file_location("loop_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.zeros(20, 256, dtype=torch.bfloat16)
    w = torch.zeros(5 * 256, 128, dtype=torch.bfloat16)
    with pytest.raises(legato.CompileError) as info:
        mod.all_tiles_first(x, w, torch.zeros(64, 128))
    msg = str(info.value)
    line = next(i + 1 for i, s in enumerate(path.read_text().splitlines()) if "# TILE" in s)
    assert f"{path}:{line}:" in msg, msg
    assert "out of mpu_buffer on core(0)" in msg, msg
    assert "live with it in one iteration of its loop" in msg, msg
    # the four tiles placed before it, and the weight buffers' line
    assert f"256.00 KiB (262144 bytes) in 4 x [256, 128] bf16 at loop_kernels.py:{line}" in msg
