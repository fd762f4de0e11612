"""Memory planning end to end (issue 4 item 4): a kernel whose core working set exceeds the 2 MiB
SRAM of EVT0 runs correctly with the excess in private DRAM, at every IR level and on the
emulator; one that exceeds SRAM plus private DRAM is a compile error giving the sizes and the
Python line of the tensor that does not fit."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
import textwrap

import pytest
import torch

import legato
import legato.jit
from legato.model import bertha

MiB = 1 << 20

SOURCE = '''
import dataclasses

import legato
import legato.model.bertha as bertha

f32 = legato.types.float("float32")


def tt(shape, memory):
    return legato.get_model().tensor_type(f32, shape, memory)


def small_private_dram(ctx):
    """EVT0 with 4 MiB of private DRAM per core (instead of 1 GiB), so overflowing it is cheap."""
    return dataclasses.replace(bertha.evt0(), private_dram_size=4 << 20)


R, C = 256, 1024  # one [R, C] f32 tensor is 1 MiB


@legato.compile(backend=bertha)
def spills(x: tt([R, C], "shared_dram"), y: tt([R, C], "shared_dram"),
           out: tt([R, C], "shared_dram")):
    """x, y, x * y and the result are 1 MiB each in core 0's memory: 3-4 MiB live at once."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        a = legato.tensor.load(x, "sram")
        b = legato.tensor.load(y, "sram")
        p = a * b
        legato.tensor.memcpy(out, p + a - b)


def two_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 2, False, 8, 1 << 30)


@legato.compile(backend=two_cores)
def spmd_spills(x: tt([2 * R, C], "shared_dram"), out: tt([2 * R, C], "shared_dram")):
    """SPMD: each core holds its own 1 MiB rows, their exp and square (3 MiB): spills on both."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        i = legato.core_id()
        a = legato.tensor.load(x[i * R:(i + 1) * R, :], "sram")
        e = legato.tensor.exp(a)
        legato.tensor.memcpy(out[i * R:(i + 1) * R, :], e * a + a * a)


@legato.compile(backend=small_private_dram)
def too_big(x: tt([2 * R, C], "shared_dram"), y: tt([2 * R, C], "shared_dram"),
            z: tt([2 * R, C], "shared_dram"), out: tt([2 * R, C], "shared_dram")):
    """x, y, z and x * y are 2 MiB each, live together: 8 MiB > 2 MiB SRAM + 4 MiB private DRAM."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        a = legato.tensor.load(x, "sram")
        b = legato.tensor.load(y, "sram")
        c = legato.tensor.load(z, "sram")
        p = a * b  # LINE-TOO-BIG
        legato.tensor.memcpy(out, p + c)
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    d = tmp_path_factory.mktemp("memplan")
    path = d / "memplan_kernels.py"
    path.write_text(textwrap.dedent(SOURCE))
    spec = importlib.util.spec_from_file_location("memplan_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["memplan_kernels"] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("memplan_kernels", None)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(legato.jit.cache, "_memory_cache", {})


def _inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(256, 1024, generator=g), torch.randn(256, 1024, generator=g)


def _expected(x, y):
    return x * y + x - y


def _placements(core_ir: str) -> list[tuple[str, int]]:
    """(space, offset) of every core.alloc of core 0 in the planned core IR."""
    out = []
    for line in core_ir.splitlines():
        if "core.alloc" not in line:
            continue
        off = re.search(r"offset = (\d+)", line)
        placement = re.search(r'placement = "(\w+)"', line)
        space = (
            placement.group(1)
            if placement
            else re.search(r"core.alloc (?:on core\(\d+\) )?(\w+)", line).group(1)
        )
        out.append((space, int(off.group(1)) if off else -1))
    return out


def test_working_set_above_sram_is_planned_into_private_dram(kernels):
    x, y = _inputs()
    out = torch.zeros(256, 1024)
    kernels.spills.interpret(x, y, out, level="legato")  # the legato level has no placement
    core_ir = kernels.spills.compile(x, y, out).core_ir
    places = _placements(core_ir)
    spaces = [s for s, _ in places]
    assert "private_dram" in spaces and "sram" in spaces, places
    # what stays in SRAM fits in it
    assert all(off + MiB <= bertha.evt0().sram_size for s, off in places if s == "sram"), places
    torch.testing.assert_close(out, _expected(x, y), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("level", ["core", "backend"])
def test_spilled_kernel_at_every_level(kernels, level):
    x, y = _inputs()
    out = torch.zeros(256, 1024)
    kernels.spills.interpret(x, y, out, level=level)
    torch.testing.assert_close(out, _expected(x, y), rtol=1e-6, atol=1e-6)


def test_spilled_kernel_on_the_emulator(kernels):
    x, y = _inputs()
    out = torch.zeros(256, 1024)
    kernels.spills(x, y, out)
    torch.testing.assert_close(out, _expected(x, y), rtol=1e-6, atol=1e-6)
    assert kernels.spills.last_run.cycles > 0


def test_spilling_gives_the_same_bits_as_sram_only(kernels):
    """The same kernel on a chip whose SRAM holds everything gives identical results."""
    x, y = _inputs()
    spilled = torch.zeros(256, 1024)
    kernels.spills(x, y, spilled)
    big = legato.compile(backend=lambda ctx: dataclasses.replace(bertha.evt0(), sram_size=8 * MiB))(
        kernels.spills.fn
    )
    roomy = torch.zeros(256, 1024)
    big(x, y, roomy)
    assert "private_dram" not in "".join(s for s, _ in _placements(big.last_artifacts.core_ir))
    assert torch.equal(spilled, roomy)


def test_exceeding_sram_and_private_dram_is_a_compile_error(kernels):
    x = torch.zeros(512, 1024)
    with pytest.raises(legato.CompileError) as info:
        kernels.too_big(x, x, x, torch.zeros(512, 1024))
    msg = str(info.value)
    path = kernels.__file__
    line = next(i + 1 for i, s in enumerate(open(path).read().splitlines()) if "LINE-TOO-BIG" in s)
    assert f"{path}:{line}:" in msg, msg
    assert "p = a * b" in msg and "^" in msg, msg  # the source line and a caret
    assert "out of sram on core(0)" in msg, msg
    assert "needs 2.00 MiB (2097152 bytes)" in msg, msg
    assert "sram holds 2.00 MiB (2097152 bytes)" in msg, msg
    assert "plus 4.00 MiB (4194304 bytes) of private DRAM" in msg, msg


@pytest.mark.parametrize("level", ["core", "backend", "emulator"])
def test_spmd_kernel_spills_on_every_core(kernels, level):
    x = torch.randn(512, 1024, generator=torch.Generator().manual_seed(2))
    out = torch.zeros(512, 1024)
    k = kernels.spmd_spills
    if level == "emulator":
        k(x, out)
    else:
        k.interpret(x, out, level=level)
    assert "private_dram" in [s for s, _ in _placements(k.compile(x, out).core_ir)]
    torch.testing.assert_close(out, torch.exp(x) * x + x * x, rtol=1e-6, atol=1e-6)
