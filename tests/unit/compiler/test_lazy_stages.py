"""No text round trips unless an output is asked for (issue 12, item 5): a compile prints no IR
and no assembly; a stage is printed when read (the same text as when recorded during the
compile); `interpret(level=L)` lowers only as far as L, from the module in memory."""

from __future__ import annotations

import pytest
import torch

import legato
from legato import compiler
from legato.dialects import backend as be
from legato.errors import CompileError
from legato.model import bertha
from legato.transforms import pipelines

BF16 = legato.types.float("bfloat16")
X = legato.get_model().tensor_type(BF16, [8, 64], "shared_dram")
Y = legato.get_model().tensor_type(BF16, [8, 16], "shared_dram")


def _every_fourth(x: X, out: X):
    device = legato.get_context().get_device()
    with device.get_core(0):
        t = legato.tensor.load(x)
        o = legato.tensor.load(out)
        legato.tensor.memcpy(o[:, 0:64:4], t[:, 0:16])  # into a step: the lowering refuses it
        legato.tensor.memcpy(out, o)


def _scaled(x: X, out: X):
    device = legato.get_context().get_device()
    with device.get_core(0):
        t = legato.tensor.to(legato.tensor.load(x), legato.types.float("float32"))
        legato.tensor.memcpy(out, legato.tensor.to(legato.tensor.exp(t) * 0.5, BF16))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(legato.jit.cache, "_memory_cache", {})
    return tmp_path


@pytest.fixture
def printing(monkeypatch):
    """Counts every IR print and every assembly print."""
    calls = {"ir": 0, "asm": 0}
    print_ir, print_assembly = compiler.print_ir, be.print_assembly

    def count_ir(*a, **k):
        calls["ir"] += 1
        return print_ir(*a, **k)

    def count_asm(*a, **k):
        calls["asm"] += 1
        return print_assembly(*a, **k)

    monkeypatch.setattr(compiler, "print_ir", count_ir)
    monkeypatch.setattr(be, "print_assembly", count_asm)
    return calls


def test_legato_level_interprets_a_kernel_whose_lowering_fails(fresh_cache):
    kernel = legato.compile(backend=bertha)(_every_fourth)
    x = torch.randn(8, 64).bfloat16()
    out = torch.zeros(8, 64, dtype=torch.bfloat16)
    kernel.interpret(x, out, level="legato")
    want = torch.zeros(8, 64, dtype=torch.bfloat16)
    want[:, ::4] = x[:, :16]
    assert torch.equal(out, want)  # the oracle, where the compiler cannot go
    assert kernel.compile_count == 0
    with pytest.raises(CompileError, match="writing into a slice with a step"):
        kernel.interpret(x, out, level="core")
    with pytest.raises(CompileError, match="writing into a slice with a step"):
        kernel(x, out)


def test_interpret_lowers_no_further_than_its_level(fresh_cache, monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("interpret(level='core') ran the core-to-backend pipeline")

    monkeypatch.setattr(pipelines, "core_to_backend", refuse)
    kernel = legato.compile(backend=bertha)(_scaled)
    x = torch.randn(8, 64).bfloat16()
    got = {}
    for level in ("legato", "core"):
        out = torch.zeros(8, 64, dtype=torch.bfloat16)
        kernel.interpret(x, out, level=level)
        got[level] = out
    assert torch.equal(got["legato"], got["core"])
    assert kernel.compile_count == 0 and kernel.last_artifacts is None


def test_a_call_prints_no_ir_and_no_assembly(fresh_cache, printing):
    kernel = legato.compile(backend=bertha)(_scaled)
    x = torch.randn(8, 64).bfloat16()
    out = torch.zeros(8, 64, dtype=torch.bfloat16)
    kernel(x, out)
    assert kernel.compile_count == 1
    assert printing == {"ir": 0, "asm": 0}
    ref = torch.zeros(8, 64, dtype=torch.bfloat16)
    kernel.interpret(x, ref, level="backend")
    assert torch.equal(out, ref)


@pytest.mark.parametrize("stage", ["mlir", "core_ir", "backend_ir", "asm"])
def test_a_stage_read_later_is_the_stage_recorded_during_the_compile(stage):
    kernel = legato.compile(backend=bertha)(_scaled)
    model = kernel.model
    recorded = compiler.compile_kernel(kernel.emit_module(), model, record=[stage])
    assert stage in recorded.recorded()
    lazy = compiler.compile_kernel(kernel.emit_module(), model)
    assert lazy.recorded() == {}
    assert lazy.stage(stage) == recorded.stage(stage)
    from_source = compiler.compile_kernel(kernel.emit_module(), model, source=kernel.emit_module)
    assert from_source.stage(stage) == recorded.stage(stage)
    assert lazy.binary == recorded.binary == from_source.binary


@pytest.mark.parametrize("output_type", list(legato.OutputType))
def test_session_outputs_equal_the_recorded_stage_also_from_the_disk_cache(
    fresh_cache, output_type
):
    kernel = legato.compile(backend=bertha)(_scaled)
    x = torch.randn(8, 64).bfloat16()
    out = torch.zeros(8, 64, dtype=torch.bfloat16)
    if output_type is legato.OutputType.BINARY:
        expected = compiler.compile_kernel(kernel.emit_module(), kernel.model, kernel.name).binary
    else:
        art = compiler.compile_kernel(
            kernel.emit_module(), kernel.model, kernel.name, record=[output_type.value]
        )
        expected = art.stage(output_type.value).encode()
    written = []
    for where in ("compile", "memory", "disk"):
        if where == "disk":
            legato.jit.clear_memory_cache()
        path = fresh_cache / where
        with legato.session(output_type=output_type, output_path=path):
            kernel(x, out)
        written.append((path / f"_scaled{output_type.suffix}").read_bytes())
    assert written == [expected] * 3
    assert kernel.compile_count == 1  # the disk hit printed its missing stage without a compile


def test_unknown_recorded_stage_is_refused():
    kernel = legato.compile(backend=bertha)(_scaled)
    with pytest.raises(CompileError, match="cannot record stage"):
        compiler.compile_kernel(kernel.emit_module(), kernel.model, record=["binary_ir"])


@pytest.mark.parametrize("from_frontend", [True, False])
@pytest.mark.parametrize(
    "verify_each, env, levels",
    [
        (False, "1", []),
        (True, "", ["legato", "core", "backend"]),
        (None, "1", ["legato", "core", "backend"]),
        (None, "", []),
        (None, "0", []),
    ],
)
def test_levels_verified(monkeypatch, verify_each, env, levels, from_frontend):
    """The legato input is verified unless it is the frontend's own output (whose every op was
    verified as it was built); the core and backend levels only when asked (the option, else
    $LEGATO_VERIFY_EACH), and the binary is the same either way."""
    seen = []
    verify = compiler._verify
    monkeypatch.setattr(
        compiler, "_verify", lambda m, stage: (seen.append(stage), verify(m, stage))
    )
    monkeypatch.setenv(compiler.VERIFY_EACH_ENV, env)
    kernel = legato.compile(backend=bertha)(_scaled)
    module = kernel.emit_module()
    if not from_frontend:
        module = module.clone()  # the same IR, not marked as the frontend's
        levels = levels or ["legato"]
    art = compiler.compile_kernel(module, kernel.model, verify_each=verify_each)
    assert seen == levels
    monkeypatch.setattr(compiler, "_verify", verify)
    full = compiler.compile_kernel(kernel.emit_module(), kernel.model, verify_each=True)
    assert art.binary == full.binary


# A backend that does not verify under verify_each is a located internal error: tests/unit/
# test_locations.py::test_a_lowering_that_breaks_the_ir_is_a_located_error_without_an_ir_dump.


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fails", [False, True])
def test_the_garbage_collector_is_paused_during_a_compile_and_restored(monkeypatch, enabled, fails):
    import gc

    states = []
    real = pipelines.core_to_backend

    def observed(model=None):
        pipeline = real(model)

        class Observed:
            def apply(self, ctx, module):
                states.append(gc.isenabled())
                if fails:
                    raise CompileError("stop here")
                pipeline.apply(ctx, module)

        return Observed()

    monkeypatch.setattr(pipelines, "core_to_backend", observed)
    kernel = legato.compile(backend=bertha)(_scaled)
    (gc.enable if enabled else gc.disable)()
    try:
        if fails:
            with pytest.raises(CompileError, match="stop here"):
                compiler.compile_kernel(kernel.emit_module(), kernel.model)
        else:
            compiler.compile_kernel(kernel.emit_module(), kernel.model)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
    assert states == [False]


def test_the_frontend_runs_with_the_garbage_collector_paused(monkeypatch):
    import gc

    from legato.jit import kernel as jit_kernel

    states = []
    real = jit_kernel.emit_kernel
    monkeypatch.setattr(
        jit_kernel, "emit_kernel", lambda *a: (states.append(gc.isenabled()), real(*a))[1]
    )
    kernel = legato.compile(backend=bertha)(_scaled)
    assert gc.isenabled()
    kernel.emit_module()
    assert states == [False] and gc.isenabled()
