"""The vllm-legato platform plugin: a tiny random Llama served with `vllm.LLM(...).generate`
on Bertha (attention and the KV cache through the plugin's LEGATO_ATTN backend, Legato kernels)
against stock vLLM on the CPU, with 1 and with 8 concurrent requests of different prompt lengths
(the 8 do not fit one step's token budget: chunked prefill), bf16 and f32.

Engine start-ups are slow on 2 cores, so there are four in all (2 platforms x 2 dtypes), in two
processes run side by side (the platform is chosen once per process): `python -m vllm_legato
--batch8 --logprobs 2` with and without LEGATO_VLLM; each engine serves the single request, then
the 8. Stock vLLM runs with `enforce_eager=True` (its CPU kernels, no compilation); Bertha
compiles the forward through Legato. Logprobs are vLLM's raw logits (`logprobs_mode=raw_logits`).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.vllm

DTYPES = ("bfloat16", "float32")
# token budget per step (max_num_batched_tokens), per dtype: bf16 at 40, fewer than the 8
# prompts' 86 tokens (chunked prefill), f32 at vLLM's default (0: not given)
BUDGETS = {"bfloat16": 40, "float32": 0}
BATCHES = (1, 8)
PROMPT_TOKENS = 86  # of vllm_legato.__main__.BATCH8_PROMPTS
TIMEOUT = int(os.environ.get("LEGATO_VLLM_TEST_TIMEOUT", "1500"))
KV_CACHE_MIB = 64  # python -m vllm_legato's default --kv-cache-mib
# the bf16 rounding of a step's logits: a few bf16 ulps of their magnitude (the LM head's output
# rounding and that of the activations it reads); measured deviations are printed
BF16_ULPS = 4


def _env(**extra):
    env = dict(os.environ)
    env.pop("LEGATO_VLLM", None)
    env.pop("VLLM_TARGET_DEVICE", None)
    env.update(
        VLLM_ENABLE_V1_MULTIPROCESSING="0",  # engine and worker in one process: faster
        VLLM_LOGGING_LEVEL=env.get("VLLM_LOGGING_LEVEL", "WARNING"),
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from vllm_legato.tiny_llama import make_tiny_llama

    root = tmp_path_factory.mktemp("vllm")
    model = make_tiny_llama(root / "tiny-llama", dtype="bfloat16")
    dtypes = [a for d in DTYPES for a in ("--dtype", d)]
    dtypes += [a for d in DTYPES for a in ("--max-num-batched-tokens", str(BUDGETS[d]))]
    procs = {}
    for name, extra, flags in (
        ("stock", {}, ["--enforce-eager"]),
        ("bertha", {"LEGATO_VLLM": "1", "LEGATO_VLLM_REPORT_DIR": str(root / "reports")}, []),
    ):
        out = root / f"{name}.json"
        log = open(root / f"{name}.log", "w")  # noqa: SIM115 -- closed after the wait
        cmd = [
            sys.executable,
            "-m",
            "vllm_legato",
            "--model",
            str(model),
            "--json",
            str(out),
            "--batch8",
            "--logprobs",
            "2",
            *dtypes,
            *flags,
        ]
        procs[name] = (
            subprocess.Popen(cmd, env=_env(**extra), stdout=log, stderr=subprocess.STDOUT),
            out,
            log,
        )
    results = {}
    for name, (proc, out, log) in procs.items():
        try:
            rc = proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "timeout"
        log.close()
        text = (root / f"{name}.log").read_text()
        assert rc == 0, f"{name} run failed ({rc}):\n{text[-6000:]}"
        results[name] = json.loads(out.read_text())
        results[name]["log"] = text
    return results


def _run(served, platform, dtype, batch):
    return {(r["dtype"], r["batch"]): r for r in served[platform]["runs"]}[(dtype, batch)]


def _report(served, dtype):
    from vllm_legato.report import Report

    run = [r for r in served["bertha"]["runs"] if r["dtype"] == dtype and "report" in r][-1]
    return Report.from_json(run["report"]), run["report_text"]


def bf16_rounding(*logits: float) -> float:
    """BF16_ULPS bf16 ulps (2^-7 relative to the power of two below) of the largest |logit|."""
    big = max(abs(x) for x in logits)
    return BF16_ULPS * 2.0 ** (math.floor(math.log2(big)) - 7) if big > 0 else 0.0


def test_platforms_selected(served):
    assert served["stock"]["platform"] == "CpuPlatform"
    assert served["bertha"]["platform"] == "BerthaPlatform"


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_backend_is_legato(served, dtype):
    rep, text = _report(served, dtype)
    assert rep.attention_backend == "LEGATO_ATTN", text
    # every step that served requests ran the attention kernels and the KV-cache writes
    served_steps = [s for s in rep.steps if s.requests]
    assert served_steps and all(s.attn_cycles > 0 for s in served_steps), rep.steps
    assert all(s.kv_write_dram_bytes > 0 for s in served_steps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kv_cache_is_not_copied_per_step(served, dtype):
    """The DRAM bytes the attention kernels move per step (every layer) are those of the blocks
    the step's requests read, far below the KV cache (64 MiB): no copy of the cache per step."""
    rep, text = _report(served, dtype)
    steps = [s for s in rep.steps if s.requests]
    most = max(s.attn_dram_bytes for s in steps)
    print(f"{dtype}: attention DRAM bytes per step: max {most}, cache {KV_CACHE_MIB << 20}")
    assert 0 < most < (KV_CACHE_MIB << 20) // 50, text
    # a decode step's KV-cache write: one row per request and layer (K and V, 2 KV heads x D)
    decode = [s for s in steps if s.decode]
    assert decode
    assert all(s.kv_write_dram_bytes < 64 * 1024 for s in decode)


@pytest.mark.parametrize("batch", BATCHES)
def test_f32_token_identical(served, batch):
    stock = _run(served, "stock", "float32", batch)
    bertha = _run(served, "bertha", "float32", batch)
    assert len(stock["outputs"]) == batch and all(len(o) == 8 for o in stock["outputs"])
    assert bertha["outputs"] == stock["outputs"]


@pytest.mark.parametrize("batch", BATCHES)
def test_bf16_same_answers(served, batch):
    """bf16: token-identical wherever stock's top-2 margin exceeds the bf16 rounding of the
    step; the first step's top-2 logits within that rounding. Reports every differing request
    with the step and stock's margin there."""
    stock = _run(served, "stock", "bfloat16", batch)
    bertha = _run(served, "bertha", "bfloat16", batch)
    bad = []
    for i, (so, bo) in enumerate(zip(stock["outputs"], bertha["outputs"])):
        st, bt = stock["top"][i], bertha["top"][i]
        # first step: the same logits (raw) within the rounding, for the tokens in both top-2s
        first_s, first_b = dict(st[0]), dict(bt[0])
        for tok in set(first_s) & set(first_b):
            tol = bf16_rounding(first_s[tok], first_b[tok])
            dev = abs(first_s[tok] - first_b[tok])
            if dev > tol:
                bad.append(f"request {i}: first-step logit of token {tok} off by {dev} > {tol}")
        if so == bo:
            continue
        k = next(j for j, (a, b) in enumerate(zip(so, bo)) if a != b)
        (t1, l1), (_, l2) = st[k][:2]
        margin = l1 - l2
        tol = bf16_rounding(l1, l2)
        msg = (
            f"request {i} ({stock['prompts'][i]!r}) differs from step {k}: stock's top-2 margin "
            f"there {margin:.5f} (bf16 rounding {tol:.5f}); stock {so[k:]}, bertha {bo[k:]}"
        )
        print(msg)
        if margin > tol:
            bad.append(msg)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("dtype", DTYPES)
def test_report_what_ran_where(served, dtype):
    rep, text = _report(served, dtype)
    print(text)
    assert rep.device == "bertha" and rep.clock_ghz == 1.0
    assert rep.graphs and rep.legato_kernels > 0, text
    # attention and the KV-cache update are vLLM ops, opaque to the graph; the backend they
    # call runs Legato kernels (above)
    assert rep.vllm_ops().get("vllm.unified_attention_with_output") == 2, rep.vllm_ops()
    decode = [s for s in rep.steps if s.decode]
    assert decode and all(s.cycles > s.attn_cycles > 0 for s in decode)
    assert rep.cycles_per_token() > 0 and rep.us_per_token() > 0
    assert "simulated Legato time per generated token" in text
    assert "attention on Legato" in text


def test_chunked_prefill_within_a_small_budget(served):
    """bf16 at a budget of 40 tokens: the 8 prompts (86 tokens) are prefilled in chunks, mixed
    with decodes; the dynamic token dims are bounded by the budget."""
    rep, text = _report(served, "bfloat16")
    assert {g.bound for g in rep.graphs} == {BUDGETS["bfloat16"]}
    assert any(s.tokens == 40 and s.requests and s.requests > 1 for s in rep.steps), rep.steps


def test_vllm_default_scheduler_settings(served):
    """f32 with vLLM's default budget (no cap): the 8 prompts are prefilled in one step."""
    rep, text = _report(served, "float32")
    (bound,) = {g.bound for g in rep.graphs}
    assert bound >= 512, bound
    assert any(s.tokens == PROMPT_TOKENS and s.requests == 8 for s in rep.steps), rep.steps


@pytest.mark.parametrize("dtype", DTYPES)
def test_report_share_of_work_on_legato(served, dtype):
    """Every served step has its DRAM bytes and MACs on Legato (measured) and on the host
    (estimated: extern nodes and the LM head); the report prints the mean share per step."""
    rep, text = _report(served, dtype)
    steps = [s for s in rep.steps if s.requests]
    assert all(s.legato_dram_bytes >= s.attn_dram_bytes > 0 for s in steps), steps
    assert all(s.legato_macs > 0 and s.host_dram_bytes > 0 and s.host_macs > 0 for s in steps)
    for decode in (True, False):
        for what in ("dram_bytes", "macs"):
            assert 0.0 < rep.share(what, decode) < 1.0, (what, decode)
    assert "share on Legato per decode step" in text
    print(
        f"{dtype}: on Legato per decode step: DRAM bytes {rep.share('dram_bytes', True):.1%}, "
        f"MACs {rep.share('macs', True):.1%}; per prefill step: "
        f"{rep.share('dram_bytes', False):.1%}, {rep.share('macs', False):.1%}"
    )
