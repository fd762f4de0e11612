"""Shared helpers for the frontend tests: kernels written to real files, fake compiler/runtime."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path

PREAMBLE = """\
import legato
import legato.model.bertha as bertha

bf16 = legato.types.float("bfloat16")


def tt(shape, memory, dtype=bf16):
    return legato.get_model().tensor_type(dtype, shape, memory)


"""

SEED_KERNEL = """\
import legato
import legato.model.bertha as bertha


def get_bertha(ctx):
    gigabyte = 1024**3
    return bertha.Bertha(
        ctx,
        "bertha",
        32,  # num_cores
        False,  # use_pim
        8,  # num_memory_channels
        128 * gigabyte,  # shared_memory_size
    )


@legato.compile(backend=get_bertha)
def simple_matmul(
    a: legato.get_model().tensor_type(
        legato.types.float("bfloat16"), ((-1, 10), 256), "shared_dram"
    ),
    b: legato.get_model().tensor_type(
        legato.types.float("bfloat16"), [256, 128], "mpu_dram"
    ),
    out: legato.get_model().tensor_type(
        legato.types.float("bfloat16"), [10, 128], "shared_dram"
    ),
):
    device = legato.get_context().get_device()
    with device.get_top():  # runs on Bertha's top module
        # copy a and b into core 0's sram and mpu_buffer
        legato.tensor.request_load(a, device.get_core(0), "sram")
        legato.tensor.request_load(b, device.get_core(0), "mpu_buffer")
    with device.get_core(0):  # runs on core 0
        weight_type = legato.get_model().tensor_type(
            legato.types.float("bfloat16"), [256, 128], "mpu_weight"
        )
        # receive what the top module sent with request_load
        loaded_a = legato.tensor.receive(a, 0, "sram")
        loaded_b = legato.tensor.receive_type(weight_type, 0, None, "mpu_buffer")
        result = loaded_a @ loaded_b
        legato.tensor.memcpy(out, result)
"""

_counter = [0]


def load_source(tmp_path: Path, source: str, name: str | None = None) -> types.ModuleType:
    """Write `source` to a fresh file under tmp_path and import it."""
    _counter[0] += 1
    name = name or f"legato_test_kernel_{_counter[0]}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_kernel(tmp_path: Path, body: str, name: str = "k"):
    """A module made of PREAMBLE + `body` (dedented); returns (module, path)."""
    module = load_source(tmp_path, PREAMBLE + textwrap.dedent(body))
    return module, Path(module.__file__)


def line_of(path: Path, needle: str, nth: int = 0) -> int:
    """1-based line number of the nth line of `path` containing `needle`."""
    hits = [i + 1 for i, line in enumerate(path.read_text().splitlines()) if needle in line]
    assert len(hits) > nth, f"{needle!r} not found in {path}"
    return hits[nth]


@dataclass
class FakeArtifacts:
    mlir: str
    core_ir: str
    backend_ir: str
    asm: str
    binary: bytes


@dataclass
class FakeRun:
    cycles: int


class FakeToolchain:
    """Stands in for legato.compiler.compile_kernel and the Bertha runtime: records calls;
    the run computes the seed matmul with legato.numerics so results can be checked."""

    def __init__(self):
        self.compiled: list[str] = []
        self.runs: list[list] = []

    def compile_kernel(self, module, model, kernel_name, **options):
        from legato.frontend.codegen import print_module

        self.compiled.append(kernel_name)
        text = print_module(module, debuginfo=False)
        return FakeArtifacts(
            text,
            "core " + kernel_name,
            "backend " + kernel_name,
            "asm " + kernel_name,
            b"\x7fELF" + kernel_name.encode(),
        )

    def run_binary(self, binary, model, args, **options):
        from legato.numerics import matmul_acc

        self.runs.append(args)
        if len(args) == 3 and args[0].ndim == 2:
            a, b, out = args
            n = a.shape[0]
            out[:n] = matmul_acc(a, b).astype(out.dtype)
        return FakeRun(cycles=123)


def use_cache_dir(tmp_path: Path, monkeypatch) -> Path:
    """Point LEGATO_CACHE_DIR at a fresh directory and empty the in-memory cache."""
    import legato.jit

    d = tmp_path / "cache"
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(d))
    legato.jit.clear_memory_cache()
    monkeypatch.setattr(legato.jit.cache, "_memory_cache", {})
    return d


def install_fake_toolchain(monkeypatch) -> FakeToolchain:
    """Replace the compiler and the runtime by a FakeToolchain (whether or not they exist)."""
    fake = FakeToolchain()
    for modname, attr in (
        ("legato.compiler", "compile_kernel"),
        ("legato.targets.bertha.runtime", "run_binary"),
    ):
        try:
            module = importlib.import_module(modname)
        except ImportError:
            module = types.ModuleType(modname)
            monkeypatch.setitem(sys.modules, modname, module)
        monkeypatch.setattr(module, attr, getattr(fake, attr), raising=False)
    # the fake's binaries are not ELF files: the disk cache must not refuse them
    monkeypatch.setattr(
        importlib.import_module("legato.jit.cache"), "validate_cached_binary", lambda binary: None
    )
    return fake
