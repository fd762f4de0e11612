"""`legato.profile`, the static estimate, `legato-prof` and the bench's roofline plot.

The estimate is checked against the emulator's own counts on corpus kernels of every kind
(DMAs to and from arguments, MPU tiles, broadcast copies, loops over runtime bounds, SPMD
programs, gathers); the per-line profile against the run's totals, which it must partition;
the trace's time axis against the model's clock."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import legato
from legato.compiler import compile_kernel, lower
from legato.interp.differential import parse_module
from legato.model import bertha
from legato.profiler import estimate, profiling
from legato.targets.bertha.elf import read_elf
from legato.targets.bertha.runtime import run_binary
from legato.tools import prof as prof_tool
from tests.corpus import dsl_kernels
from tests.corpus.dsl_kernels import _bf16, rmsnorm_rows
from tests.corpus.kernels import CORPUS

BY_NAME = {k.name: k for k in CORPUS}
SAMPLE = [
    "seed_matmul",
    "two_core_matmul",
    "exp_bf16",
    "sum_cols",
    "transpose",
    "broadcast_to",
    "where_float_mask_f32",
    "matmul_f32_tiled",
    "runtime_loop_row_tiles",
    "runtime_loop_streamed_weight",
    "spmd_core_id_matmul",
    "spmd_stream_credits",
    "gather_dynamic_f32",
    "decoder_layer_tiny",
]


def _compiled(name: str, model):
    k = BY_NAME[name]
    art = compile_kernel(parse_module(k.mlir, k.name), model)
    core = parse_module(k.mlir, k.name)
    lower(core, model, "core")
    args = k.make_args(np.random.default_rng(k.seed))
    return k, art, core, args


@pytest.mark.parametrize("name", SAMPLE)
def test_static_estimate_matches_the_emulators_counts(name):
    model = BY_NAME[name].get_model() if BY_NAME[name].model is not None else bertha.evt1()
    _, art, core, args = _compiled(name, model)
    shapes = [tuple(a.shape) if isinstance(a, np.ndarray) else None for a in args]
    est = estimate(core, model, shapes)
    run = run_binary(art.binary, model, args, trace=False)
    assert (est.dram_bytes, est.macs, est.vpu_ops, est.vpu_transcendental_ops) == (
        run.dram_bytes,
        run.mac_count,
        run.vpu_element_ops,
        run.vpu_transcendental_ops,
    )
    assert est.roofline == run.roofline


def test_a_data_dependent_size_is_an_upper_bound():
    """gather: the ids are data, the row DMAs' count is not; the estimate stays exact."""
    model = bertha.evt0()
    _, _, core, args = _compiled("gather_rows_bf16", model)
    shapes = [tuple(a.shape) for a in args]
    est = estimate(core, model, shapes)
    assert est.exact and est.dram_bytes > 0


@pytest.mark.parametrize("name", ["decoder_layer_tiny", "spmd_stream_credits", "seed_matmul"])
def test_per_line_profile_partitions_the_run(name):
    k = BY_NAME[name]
    model = k.get_model() if k.model is not None else bertha.evt1()
    _, art, _, args = _compiled(name, model)
    plain = run_binary(art.binary, model, [a.copy() for a in args], trace=False)
    with profiling() as p:
        run_binary(art.binary, model, args, trace=True)
    (prof,) = p.profiles
    run = prof.run
    # profiling runs every scalar through the reference path: the same timing, to the cycle
    assert run.cycles == plain.cycles and run.unit_busy == plain.unit_busy
    assert run.module_cycles == plain.module_cycles
    lines = prof.lines
    total = {f: sum(s.counts[f] for s in lines) for f in lines[0].counts}
    assert total["cycles"] == sum(run.module_cycles.values())
    assert total["instructions"] == run.total_instructions
    for unit in ("dma", "mpu", "vpu"):
        assert total[unit] == sum(b[unit] for b in run.unit_busy.values())
    assert total["dram_bytes"] == run.dram_bytes
    assert total["macs"] == run.mac_count and total["vpu_ops"] == run.vpu_element_ops
    assert all(0 <= s.counts["stall"] <= s.counts["cycles"] for s in lines)


def _rms_args():
    rng = np.random.default_rng(0)
    x, w = _bf16(rng, (4, 256)), _bf16(rng, (1, 256))
    return x, w, np.zeros((4, 256), x.dtype)


def test_profile_call_prints_the_estimate_then_runs(capsys):
    x, w, out = _rms_args()
    p = legato.profile(rmsnorm_rows, x, w, out)
    printed = capsys.readouterr().out
    assert printed.startswith("legato.profile: rmsnorm_rows: static estimate: DRAM bytes 6144")
    ref = np.zeros_like(out)
    rmsnorm_rows(x, w, ref)
    np.testing.assert_array_equal(out.view(np.uint16), ref.view(np.uint16))  # it ran
    assert p.estimate.dram_bytes == p.run.dram_bytes == 6144
    report = p.report()
    assert "matches the run" in report and "efficiency" in report
    # every line of the kernel that moves or computes is a row, with its text
    rows = {s.line: s for s in p.lines if s.line is not None}
    text = Path(dsl_kernels.__file__).read_text().splitlines()
    mean_line = next(i for i, t in enumerate(text, 1) if "tensor.mean(xi" in t)
    assert rows[mean_line].counts["vpu"] > 0 and "tensor.mean" in rows[mean_line].text


def test_the_with_form_estimates_every_kernel_call(capsys):
    """`with legato.profile()`: each kernel call's profile carries its static estimate (printed
    before the run), which agrees with the run; a raw binary run has none."""
    x, w, out = _rms_args()
    model = rmsnorm_rows.model
    art = compile_kernel(parse_module(rmsnorm_rows.to_mlir(), "rms"), model)
    with legato.profile() as p:
        rmsnorm_rows(x, w, out)
        run_binary(art.binary, model, list(_rms_args()), trace=True)
        rmsnorm_rows(x, w, out)  # estimated once, printed before each run
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and printed[0] == printed[1]
    assert printed[0].startswith("legato.profile: rmsnorm_rows: static estimate: DRAM bytes 6144")
    first, raw, second = p.profiles
    assert first.kernel == second.kernel == "rmsnorm_rows"
    assert first.estimate.dram_bytes == first.run.dram_bytes == 6144
    assert second.estimate.dram_bytes == second.run.dram_bytes == 6144
    assert (second.estimate.macs, second.estimate.vpu_ops) == (
        second.run.mac_count,
        second.run.vpu_element_ops,
    )
    assert raw.estimate is None
    assert "matches the run" in first.report()


def test_run_result_trace_is_at_the_chips_clock():
    """`RunResult.write_trace` (no profiler): microseconds at the chip's clock too."""
    model = bertha.evt1()
    art = compile_kernel(parse_module(rmsnorm_rows.to_mlir(), "rms"), model)
    res = run_binary(art.binary, model, list(_rms_args()), trace=True)
    slices = [e for e in res.trace()["traceEvents"] if e["ph"] == "X"]
    assert slices
    for e in slices:
        assert e["ts"] == pytest.approx(e["args"]["cycle"] / 1200)
        assert e["dur"] == pytest.approx(e["args"]["cycles"] / 1200)


def test_trace_is_at_the_chips_clock_with_source_lines():
    model = bertha.evt1()  # 1.2 GHz: a cycle is 1/1.2 ns
    # the DSL kernel's IR carries its Python locations (the corpus' IR texts do not)
    art = compile_kernel(parse_module(rmsnorm_rows.to_mlir(), "rms"), model)
    with profiling() as p:
        run_binary(art.binary, model, list(_rms_args()), trace=True)
    (prof,) = p.profiles
    trace = prof.trace()
    binary = read_elf(art.binary)
    slices = [e for e in trace["traceEvents"] if e["ph"] in ("X", "b")]
    assert slices
    for e in slices:
        assert e["ts"] == pytest.approx(e["args"]["cycle"] / (model.clock_ghz * 1e3))
        if e["ph"] == "X":
            assert e["dur"] == pytest.approx(e["args"]["cycles"] / 1200)
        mod = prof.profiler.emu.modules[e["pid"]]
        loc = binary.source_of(mod.program.name, e["args"]["pc"])
        if loc is not None:
            assert e["args"]["source"] == f"{loc[0]}:{loc[1]}:{loc[2]}"
            assert e["name"].endswith(f":{loc[1]}")
    assert any("source" in e["args"] for e in slices)
    ends = [e for e in trace["traceEvents"] if e["ph"] == "e"]
    begins = {(e["pid"], e["id"]): e["name"] for e in trace["traceEvents"] if e["ph"] == "b"}
    assert all(begins[(e["pid"], e["id"])] == e["name"] for e in ends)


def test_legato_prof_on_ir_and_binary(tmp_path, capsys):
    mlir = tmp_path / "rms.mlir"
    mlir.write_text(rmsnorm_rows.to_mlir())
    elf = tmp_path / "rms.elf"
    elf.write_bytes(rmsnorm_rows.lower("elf"))
    trace = tmp_path / "t.json"
    assert prof_tool.main([str(mlir), "-a", "rand", "-a", "w=rand:1", "-a", "out=zeros",
                           "--trace", str(trace)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("rmsnorm_rows: static estimate: DRAM bytes 6144")
    assert "efficiency" in out and "matches the run" in out and "dsl_kernels.py:" in out
    assert json.loads(trace.read_text())["otherData"]["clock_ghz"] == 1.0
    assert prof_tool.main([str(elf), "-a", "rand", "-a", "rand:1", "-a", "zeros", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["estimate"] is None and data["dram_bytes"] == 6144
    assert sum(r["cycles"] for r in data["lines"]) == sum(data["module_cycles"].values())
    assert prof_tool.main([str(elf), "-a", "rand", "-a", "nope=1"]) == 1
    assert "no argument named 'nope'" in capsys.readouterr().err


def test_bench_roofline_plot(tmp_path):
    from bench.plot import plot, points

    rows = [
        {"name": "mm", "target": "bertha", "cycles": 1000, "dram_bytes": 4096,
         "mac_count": 65536, "vpu_element_ops": 0, "efficiency": 0.5},
        {"name": "norm", "target": "bertha-evt1", "cycles": 500, "dram_bytes": 2048,
         "mac_count": 0, "vpu_element_ops": 8192, "efficiency": 0.25},
    ]  # fmt: skip
    pts = {p["name"]: p for p in points(rows)}
    assert pts["mm"]["unit"] == "mpu" and pts["mm"]["intensity"] == 16.0
    assert pts["norm"]["unit"] == "vpu" and pts["norm"]["per_cycle"] == 8192 / 500
    png, svg = plot(rows, tmp_path / "r.png"), plot(rows, tmp_path / "r.svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:1000] and b"norm" in svg.read_bytes()


def test_a_binary_without_line_table_is_profiled_per_instruction():
    model = bertha.evt0()
    _, art, _, args = _compiled("seed_matmul", model)  # corpus IR: no Python locations
    assert not read_elf(art.binary).lines
    with profiling() as p:
        run_binary(art.binary, model, args, trace=True)
    (prof,) = p.profiles
    wheres = [s.where for s in prof.lines]
    assert "<no line>" not in wheres
    assert any(w.startswith("core0 pc ") and "mpu.mm" in w for w in wheres)
    assert sum(s.counts["instructions"] for s in prof.lines) == prof.run.total_instructions
    mm = next(s for s in prof.lines if "mpu.mm" in s.where)
    assert mm.counts["macs"] == prof.run.mac_count


F32 = legato.types.float("float32")
TT = legato.get_model().tensor_type(F32, [8, 64], "shared_dram")


@legato.autotune(configs=[legato.Config(rows=r) for r in (2, 8)], key=["x"], workers=1)
@legato.compile(backend=bertha)
def tuned_add(x: TT, out: TT, rows: legato.constexpr):
    device = legato.get_context().get_device()
    with device.get_core(0):
        for i in legato.static_range(8 // rows):
            t = legato.tensor.load(x[i * rows : (i + 1) * rows, :])
            legato.tensor.memcpy(out[i * rows : (i + 1) * rows, :], t + 1.0)


def test_an_autotuned_kernel_is_profiled_with_its_choice(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    legato.jit.clear_memory_cache()
    x = np.ones((8, 64), np.float32)
    out = np.zeros_like(x)
    with pytest.raises(legato.LegatoError, match="not tuned yet"):
        legato.profile(tuned_add, x, out)
    tuned_add(x, out)
    p = legato.profile(tuned_add, np.full_like(x, 2.0), out)
    assert np.array_equal(out, np.full_like(x, 3.0))
    (chosen,) = [r for r in tuned_add.report.rows if r.config == tuned_add.best_config]
    assert p.run.cycles == chosen.cycles  # the tuned config ran, and profiling kept its cycles
    assert p.estimate.dram_bytes == p.run.dram_bytes == 2 * x.nbytes
