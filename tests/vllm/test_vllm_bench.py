"""`python -m vllm_legato --bench`, small: the tiny Llama only (conftest.py's `served` fixture runs
`--bench --bench-models tiny-llama --dtype float32 --max-tokens 4 --json`: f32, the forward
graph of the Bertha Llama's f32 engine, whose kernels it shares). Every number of its rows is checked
against the emulator's own counts in the engine's report (per step: the cycles of the step's
Legato kernels, their DRAM bytes) and the chip's ComputeModel; the 7B extrapolation is checked on
rows made up here.
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.vllm


def _bench(served):
    return served["bench"]


def test_bench_rows_at_batch_1_and_8(served):
    res = _bench(served)
    assert [(r["model"], r["batch"]) for r in res["rows"]] == [
        ("tiny-llama", 1),
        ("tiny-llama", 8),
    ]
    assert "| tiny-llama | 8 |" in res["log"], res["log"][-3000:]


def test_bench_numbers_are_the_emulators(served):
    """Each row: the mean of the report's decode steps of that many requests (their cycles and
    DRAM bytes as the emulator counted them), per token and per second at the chip's clock, the
    DRAM roofline from the ComputeModel's channels and bytes per cycle."""
    from vllm_legato.report import Report

    from legato.model.targets import target_model

    res = _bench(served)
    rep = Report.from_json(res["reports"]["tiny-llama"])
    model = target_model(rep.device)
    per_cycle = model.num_memory_channels * model.dram_bytes_per_cycle_per_channel
    for row in res["rows"]:
        b = row["batch"]
        steps = [s for s in rep.steps if s.decode and s.requests == b]
        # 4 tokens per request: its prefill samples the first, 3 decode steps the rest
        assert len(steps) == row["steps"] == 3, rep.steps
        cycles = sum(s.cycles for s in steps) / len(steps)
        assert row["cycles"] == pytest.approx(cycles) and cycles > 0
        # every decode step ran attention and the graph's kernels (more than attention alone)
        assert all(s.cycles > s.attn_cycles > 0 for s in steps)
        lb = sum(s.legato_dram_bytes for s in steps) / len(steps)
        assert row["legato_dram_bytes"] == pytest.approx(lb) and lb > 0
        assert row["roofline_cycles"] == math.ceil(lb / per_cycle)
        assert row["clock_ghz"] == rep.clock_ghz == 1.0
        assert row["us_per_token"] == pytest.approx(cycles / 1e3)
        assert row["tokens_per_s"] == pytest.approx(b * 1e9 / cycles)
        assert 0 < row["efficiency"] <= 1
        assert row["efficiency"] == pytest.approx(row["roofline_cycles"] / cycles)
        hb = sum(s.host_dram_bytes for s in steps) / len(steps)
        assert row["share"] == pytest.approx(lb / (lb + hb))
        assert row["us_per_token_host_at_roofline"] == pytest.approx(
            (cycles + math.ceil(hb / per_cycle)) / 1e3
        )
    one, eight = res["rows"]
    # 8 requests per step: more tokens per second than 1 (the weights are read once per step)
    assert eight["tokens_per_s"] > one["tokens_per_s"]


def test_7b_extrapolation():
    """32 layers = C1 + 31 * (C2 - C1); the LM head (4096 x 32000 bf16) at its DRAM roofline."""
    from vllm_legato.bench import Row, dram_roofline, extrapolate_7b

    one = Row("llama7b-1l", 8, 3, 1000.0, 500.0, 100.0, 10, 1.0, 2)
    two = Row("llama7b-2l", 8, 3, 1600.0, 800.0, 150.0, 13, 1.0, 3)
    head = math.ceil(4096 * 32000 * 2 / 512)  # EVT0: 8 channels x 64 bytes per cycle
    assert dram_roofline("bertha", 4096 * 32000 * 2) == head
    r = extrapolate_7b(one, two, "bertha")
    assert r.cycles == 1000 + 31 * 600 + head
    assert r.legato_dram_bytes == 500 + 31 * 300
    assert r.host_dram_bytes == 100 + 31 * 50
    assert r.roofline_cycles == math.ceil((500 + 31 * 300) / 512) + head
    assert r.tokens_per_s == pytest.approx(8e9 / r.cycles)


def test_7b_extrapolation_with_the_lm_head_on_legato():
    """With the LM head's kernels in the measured rows (vllm_legato.lm_head), C1 holds it: it
    is not charged its roofline again."""
    from vllm_legato.bench import Row, dram_roofline, extrapolate_7b

    one = Row("llama7b-1l", 1, 3, 1000.0, 500.0, 100.0, 10, 1.0, 2, lm_head_cycles=300.0)
    two = Row("llama7b-2l", 1, 3, 1600.0, 800.0, 150.0, 13, 1.0, 3, lm_head_cycles=300.0)
    r = extrapolate_7b(one, two, "bertha")
    assert r.cycles == 1000 + 31 * 600
    assert r.roofline_cycles == dram_roofline("bertha", 500 + 31 * 300)
    assert "LM head on Legato" in r.note
