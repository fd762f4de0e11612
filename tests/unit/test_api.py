"""The public API: @legato.compile backends, kernel calls (argument checks, in-place results),
sessions, the JIT cache. The compiler and runtime are replaced by a fake here (see
frontend/frontend_helpers.py) so these test the API alone; tests/unit/frontend/test_frontend_e2e.py
runs the real thing."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "frontend"))

from frontend_helpers import (
    SEED_KERNEL,
    install_fake_toolchain,
    line_of,
    load_source,
    use_cache_dir,
)

import legato


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    return use_cache_dir(tmp_path, monkeypatch)


@pytest.fixture
def fake_toolchain(monkeypatch, cache_dir):
    return install_fake_toolchain(monkeypatch)


@pytest.fixture
def seed(tmp_path):
    return load_source(tmp_path, SEED_KERNEL)


def _args(n=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, 256, generator=g).bfloat16()
    b = torch.randn(256, 128, generator=g).bfloat16()
    return a, b, torch.zeros(10, 128, dtype=torch.bfloat16)


# -- API surface ---------------------------------------------------------------------------------


def test_public_names_exist():
    for name in (
        "compile",
        "function",
        "session",
        "OutputType",
        "types",
        "tensor",
        "get_model",
        "get_context",
        "constexpr",
        "static_range",
        "core_id",
        "sync",
        "__version__",
    ):
        assert hasattr(legato, name), name
    assert [t.name for t in legato.OutputType] == ["MLIR", "CORE_IR", "BACKEND_IR", "ASM", "BINARY"]
    assert legato.get_model().tensor_type(legato.types.float("bfloat16"), [2], "sram").rank == 1
    assert legato.get_context().get_device().num_cores == 32
    assert list(legato.static_range(3)) == [0, 1, 2]


@pytest.mark.parametrize(
    "backend, name, cores",
    [("bertha", "bertha", 32), ("bertha-evt1", "bertha-evt1", 64)],
)
def test_backend_by_name(backend, name, cores):
    def k(a: legato.get_model().tensor_type(legato.types.float("bfloat16"), [4], "shared_dram")):
        pass

    kern = legato.compile(backend=backend)(k)
    assert kern.model.name == name and kern.model.num_cores == cores


def test_backend_module_and_factory(seed):
    from legato.model import bertha

    def k(a: legato.get_model().tensor_type(legato.types.float("bfloat16"), [4], "shared_dram")):
        pass

    assert legato.compile(backend=bertha)(k).model == bertha.evt0()
    seen = []

    def factory(ctx):
        seen.append(ctx)
        return bertha.Bertha(ctx, "bertha", 8, False, 4, 1 << 30)

    kern = legato.compile(backend=factory)(k)
    assert kern.model.num_cores == 8 and len(seen) == 1
    assert seed.simple_matmul.model.num_cores == 32


def test_unknown_backend_name_is_refused():
    with pytest.raises(legato.LegatoError, match="unknown backend 'berta'.*bertha"):
        legato.compile(backend="berta")(lambda: None)


# -- argument checks (before anything compiles) --------------------------------------------------


def test_wrong_dtype_names_argument_types_and_def_line(seed, fake_toolchain):
    a, b, _ = _args()
    out = torch.zeros(10, 128, dtype=torch.float32)
    with pytest.raises(legato.LegatoError) as info:
        seed.simple_matmul(a, b, out)
    msg = str(info.value)
    path = Path(seed.__file__)
    assert "'out'" in msg and "bf16" in msg and "float32" in msg
    assert f"{path}:{line_of(path, 'def simple_matmul')}" in msg
    assert fake_toolchain.compiled == []


def test_dynamic_dim_above_bound_is_refused(seed, fake_toolchain):
    a, b, out = _args(11)
    with pytest.raises(legato.LegatoError) as info:
        seed.simple_matmul(a, b, out)
    msg = str(info.value)
    assert "'a'" in msg and "11" in msg and "upper bound 10" in msg
    assert fake_toolchain.compiled == [] and fake_toolchain.runs == []


@pytest.mark.parametrize(
    "args, needle",
    [
        ((torch.zeros(10, 255, dtype=torch.bfloat16),), "dim 1 must be 256"),
        ((torch.zeros(10, 256, 1, dtype=torch.bfloat16),), "rank-2"),
        (([[1.0]],), "torch tensor or numpy array"),
    ],
)
def test_shape_rank_and_kind_are_checked(seed, fake_toolchain, args, needle):
    _, b, out = _args()
    with pytest.raises(legato.LegatoError, match=needle):
        seed.simple_matmul(args[0], b, out)


def test_wrong_argument_count(seed, fake_toolchain):
    a, b, _ = _args()
    with pytest.raises(legato.LegatoError, match="takes 3 argument"):
        seed.simple_matmul(a, b)


# -- calls, in-place results, cache ---------------------------------------------------------------


def _expected(a, b):
    from legato.numerics import matmul_acc

    a_np = a.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    b_np = b.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return matmul_acc(a_np, b_np).astype(ml_dtypes.bfloat16)


def test_call_writes_results_in_place_and_reuses_the_binary(seed, fake_toolchain):
    k = seed.simple_matmul
    for n in range(1, 11):
        a, b, out = _args(n, seed=n)
        k(a, b, out)
        got = out[:n].view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(got, _expected(a, b))
    assert k.compile_count == 1 and fake_toolchain.compiled == ["simple_matmul"]
    assert k.last_run.cycles == 123


def test_numpy_and_non_contiguous_arguments(seed, fake_toolchain):
    a, b, _ = _args()
    a_np = a.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    b_np = b.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    out_np = np.zeros((10, 128), ml_dtypes.bfloat16)
    seed.simple_matmul(a_np, b_np, out_np)
    np.testing.assert_array_equal(out_np, _expected(a, b))
    # A transposed view as output: written back through the view.
    big = torch.zeros(128, 10, dtype=torch.bfloat16)
    seed.simple_matmul(a, b, big.t())
    np.testing.assert_array_equal(
        big.t().contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16), _expected(a, b)
    )


def test_disk_cache_survives_the_process_and_source_edits_recompile(
    tmp_path, fake_toolchain, cache_dir
):
    path = tmp_path / "kmod.py"
    path.write_text(SEED_KERNEL)
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("kmod")
        a, b, out = _args()
        mod.simple_matmul(a, b, out)
        assert mod.simple_matmul.compile_count == 1
        entries = list(cache_dir.rglob("*.json"))
        assert len(entries) == 1 and not list(cache_dir.rglob(".tmp-*"))

        # A fresh process (empty memory cache), same source: read from disk, no compile.
        legato.jit.clear_memory_cache()
        mod = importlib.reload(mod)
        mod.simple_matmul(a, b, out)
        assert mod.simple_matmul.compile_count == 0
        assert len(fake_toolchain.compiled) == 1

        # Edit the kernel: recompiled.
        path.write_text(
            SEED_KERNEL.replace(
                "result = loaded_a @ loaded_b", "result = loaded_a @ loaded_b  # edited"
            )
        )
        _drop_bytecode(tmp_path)
        mod = importlib.reload(mod)
        mod.simple_matmul(a, b, out)
        assert mod.simple_matmul.compile_count == 1
        assert len(fake_toolchain.compiled) == 2
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("kmod", None)


def _drop_bytecode(directory: Path) -> None:
    for pyc in directory.rglob("*.pyc"):
        pyc.unlink()
    importlib.invalidate_caches()


def test_corrupted_cache_entry_is_recompiled(seed, fake_toolchain, cache_dir):
    a, b, out = _args()
    seed.simple_matmul(a, b, out)
    (entry,) = cache_dir.rglob("*.json")
    entry.write_text(entry.read_text()[:-40] + "garbage")
    legato.jit.clear_memory_cache()
    seed.simple_matmul(a, b, out)
    assert seed.simple_matmul.compile_count == 2
    legato.jit.clear_memory_cache()
    seed.simple_matmul(a, b, out)  # the rewritten entry is good again
    assert seed.simple_matmul.compile_count == 2


def test_helper_and_global_changes_change_the_key(tmp_path, fake_toolchain):
    src = """
import legato
N = 2

@legato.function
def helper(x):
    return x + x

@legato.compile(backend="bertha")
def k(a: legato.get_model().tensor_type(legato.types.float("bfloat16"), [4, 8], "shared_dram")):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(N), "sram")
    with device.get_core(N):
        y = helper(legato.tensor.receive(a, 0, "sram"))
"""
    mod = load_source(tmp_path, src)
    key = mod.k.cache_key()
    mod.N = 3
    assert mod.k.cache_key() != key
    mod.N = 2
    assert mod.k.cache_key() == key
    mod2 = load_source(tmp_path, src.replace("return x + x", "return x * x"))
    assert mod2.k.cache_key() != key


def test_constexpr_values_are_part_of_the_key(tmp_path, fake_toolchain):
    src = """
import legato

@legato.compile(backend="bertha")
def k(a: legato.get_model().tensor_type(legato.types.float("bfloat16"), [4, 8], "shared_dram"),
      core: legato.constexpr):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(core), "sram")
    with device.get_core(core):
        y = legato.tensor.receive(a, 0, "sram")
"""
    mod = load_source(tmp_path, src)
    a = torch.zeros(4, 8, dtype=torch.bfloat16)
    mod.k(a, 1)
    mod.k(a, 1)
    mod.k(a, core=2)
    assert mod.k.compile_count == 2
    assert "legato.on core(2)" in mod.k.to_mlir(core=2)


# -- sessions -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output_type, suffix, content",
    [
        (legato.OutputType.MLIR, ".mlir", "legato.kernel @simple_matmul"),
        (legato.OutputType.CORE_IR, ".core.mlir", "core simple_matmul"),
        (legato.OutputType.BACKEND_IR, ".backend.mlir", "backend simple_matmul"),
        (legato.OutputType.ASM, ".s", "asm simple_matmul"),
        (legato.OutputType.BINARY, ".elf", "\x7fELF"),
    ],
)
def test_session_writes_the_stage_and_still_runs(
    seed, fake_toolchain, tmp_path, output_type, suffix, content
):
    out_dir = tmp_path / "out" / "nested"
    a, b, out = _args()
    with legato.session(output_type=output_type, output_path=out_dir):
        seed.simple_matmul(a, b, out)
    written = out_dir / f"simple_matmul{suffix}"
    assert written.exists()
    assert content in written.read_bytes().decode("latin-1")
    assert fake_toolchain.runs, "the kernel still ran"
    assert out.abs().sum() > 0


def test_session_is_scoped(seed, fake_toolchain, tmp_path):
    with legato.session(output_type=legato.OutputType.ASM, output_path=tmp_path / "s"):
        assert legato.jit.current_session().output_type is legato.OutputType.ASM
    assert legato.jit.current_session() is None


def test_compile_without_running(seed, fake_toolchain):
    arts = seed.simple_matmul.compile()
    assert arts.binary.startswith(b"\x7fELF") and fake_toolchain.runs == []
    a, b, out = _args()
    assert seed.simple_matmul.compile(a, b, out) is arts
    assert seed.simple_matmul.compile_count == 1


def test_cache_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("LEGATO_CACHE_DIR", raising=False)
    assert legato.jit.cache_dir() == Path.home() / ".cache" / "legato"
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path))
    assert legato.jit.cache_dir() == tmp_path
    assert os.fspath(legato.jit.cache_dir()) == str(tmp_path)


def test_lower_gives_every_stage(seed, fake_toolchain):
    k = seed.simple_matmul
    assert "legato.kernel @simple_matmul" in k.lower(legato.OutputType.MLIR)
    assert 'loc("' in k.lower("mlir")
    assert k.lower(legato.OutputType.ASM) == "asm simple_matmul"
    assert k.lower("binary").startswith(b"\x7fELF")
    assert fake_toolchain.runs == []


def test_lower_takes_the_ir_levels_names_and_refuses_others(seed):
    """`lower("core")` names the level as the interpreters do (`level="core"`); an unknown
    stage is a LegatoError listing the stages, not a KeyError from the enum."""
    k = seed.simple_matmul
    assert k.lower("core") == k.lower("core_ir") == k.lower(legato.OutputType.CORE_IR)
    assert "backend." in k.lower("backend")
    assert k.lower("elf") == k.lower("binary")
    with pytest.raises(legato.LegatoError, match=r"no stage 'cor'; the stages are .*core"):
        k.lower("cor")


def test_a_kernel_that_does_nothing_runs_at_every_level():
    """An empty body is a no-op on every interpreter, so the binary is one too (a top program
    that ends at once), not a BinaryError from the ELF writer. The argument is left as it was."""
    from tests.corpus.one_core import one_core

    @legato.compile(backend=one_core)
    def nothing(
        x: legato.get_model().tensor_type(legato.types.float("float32"), [4, 8], "shared_dram"),
    ):
        pass

    x = torch.arange(32.0).reshape(4, 8)
    for level in ("legato", "core", "backend"):
        nothing.interpret(x, level=level)
    nothing(x)
    assert torch.equal(x, torch.arange(32.0).reshape(4, 8))
    assert "core.program @top" in nothing.lower("core")
