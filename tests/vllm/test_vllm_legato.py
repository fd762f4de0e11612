"""The vllm-legato platform plugin: a tiny random Llama and a tiny random Qwen2 served with
`vllm.LLM(...).generate` on Bertha (attention and the KV cache through the plugin's LEGATO_ATTN
backend, Legato kernels) against stock vLLM on the CPU, with 1 and with 8 concurrent requests of
different prompt lengths (the 8 do not fit one step's token budget: chunked prefill), and two
chat conversations (`LLM.chat`), bf16 and f32.

Engine start-ups are slow, so the processes (conftest.py's `served` fixture: per model `python -m
vllm_legato --batch8 --chat --logprobs 2` with and without LEGATO_VLLM) run side by side; each
serves bf16 then f32. Stock vLLM runs with `enforce_eager=True` (its CPU kernels, no
compilation); Bertha compiles the forward through Legato. Logprobs are vLLM's raw logits
(`logprobs_mode=raw_logits`).
"""

from __future__ import annotations

import math

import pytest
from conftest import BUDGETS, DTYPES, KV_CACHE_MIB, MODELS

pytestmark = pytest.mark.vllm

BATCHES = (1, 8)
# the 8 prompts' tokens (vllm_legato.__main__.BATCH8_PROMPTS): the Llama's tokenizer is
# word-level, the Qwen2's byte-level (a token per byte)
PROMPT_TOKENS = {"llama": 86, "qwen2": 368}
# the bf16 rounding of a step's logits: a few bf16 ulps of their magnitude (the LM head's output
# rounding and that of the activations it reads); measured deviations are printed
BF16_ULPS = 4


def _run(served, platform, model, dtype, batch):
    runs = served[f"{platform}-{model}"]["runs"]
    return {(r["dtype"], r["batch"]): r for r in runs}[(dtype, batch)]


def _report(served, model, dtype):
    from vllm_legato.report import Report

    runs = served[f"bertha-{model}"]["runs"]
    run = [r for r in runs if r["dtype"] == dtype and "report" in r][-1]
    return Report.from_json(run["report"]), run["report_text"]


def bf16_rounding(*logits: float) -> float:
    """BF16_ULPS bf16 ulps (2^-7 relative to the power of two below) of the largest |logit|."""
    big = max(abs(x) for x in logits)
    return BF16_ULPS * 2.0 ** (math.floor(math.log2(big)) - 7) if big > 0 else 0.0


@pytest.mark.parametrize("model", MODELS)
def test_platforms_selected(served, model):
    assert served[f"stock-{model}"]["platform"] == "CpuPlatform"
    assert served[f"bertha-{model}"]["platform"] == "BerthaPlatform"


ENGINES = [(m, d) for m in MODELS for d in DTYPES]


@pytest.mark.parametrize("model,dtype", ENGINES)
def test_attention_backend_is_legato(served, model, dtype):
    rep, text = _report(served, model, dtype)
    assert rep.attention_backend == "LEGATO_ATTN", text
    # every step that served requests ran the attention kernels and the KV-cache writes
    served_steps = [s for s in rep.steps if s.requests]
    assert served_steps and all(s.attn_cycles > 0 for s in served_steps), rep.steps
    assert all(s.kv_write_dram_bytes > 0 for s in served_steps)


@pytest.mark.parametrize("model,dtype", ENGINES)
def test_kv_cache_is_not_copied_per_step(served, model, dtype):
    """The DRAM bytes the attention kernels move per step (every layer) are those of the blocks
    the step's requests read, far below the KV cache (64 MiB): no copy of the cache per step."""
    rep, text = _report(served, model, dtype)
    steps = [s for s in rep.steps if s.requests]
    most = max(s.attn_dram_bytes for s in steps)
    print(f"{dtype}: attention DRAM bytes per step: max {most}, cache {KV_CACHE_MIB << 20}")
    # the largest step: the Qwen2's f32 prefill of the 8 prompts in one step (368 byte-level
    # tokens, query rows padded to 128 per request) moves ~2.0 MB, 1/33 of the cache
    assert 0 < most < (KV_CACHE_MIB << 20) // 25, text
    # a decode step's KV-cache write: one row per request and layer (K and V, 2 KV heads x D)
    decode = [s for s in steps if s.decode]
    assert decode
    assert all(s.kv_write_dram_bytes < 64 * 1024 for s in decode)


RUNS = [(m, b) for m in MODELS for b in (*BATCHES, "chat")]


@pytest.mark.parametrize("model,batch", RUNS)
def test_f32_token_identical(served, model, batch):
    stock = _run(served, "stock", model, "float32", batch)
    bertha = _run(served, "bertha", model, "float32", batch)
    n = len(stock["prompts"])
    assert n == (batch if batch != "chat" else 2)
    assert len(stock["outputs"]) == n and all(len(o) == 8 for o in stock["outputs"])
    assert bertha["outputs"] == stock["outputs"]


@pytest.mark.parametrize("model,batch", RUNS)
def test_bf16_same_answers(served, model, batch):
    """bf16: token-identical wherever stock's top-2 margin exceeds the bf16 rounding of the
    step; the first step's top-2 logits within that rounding. Reports every differing request
    with the step and stock's margin there."""
    stock = _run(served, "stock", model, "bfloat16", batch)
    bertha = _run(served, "bertha", model, "bfloat16", batch)
    bad = bf16_differences(model, stock, bertha)
    assert not bad, "\n".join(bad)


def bf16_differences(model, stock, bertha) -> list[str]:
    """test_bf16_same_answers' check of two runs of the same prompts: the differences that
    break it (each differing request is printed with its step and stock's margin there)."""
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
            f"{model} request {i} ({stock['prompts'][i]!r}) differs from step {k}: stock's top-2 margin "
            f"there {margin:.5f} (bf16 rounding {tol:.5f}); stock {so[k:]}, bertha {bo[k:]}"
        )
        print(msg)
        if margin > tol:
            bad.append(msg)
    return bad


@pytest.mark.parametrize("model,dtype", ENGINES)
def test_report_what_ran_where(served, model, dtype):
    rep, text = _report(served, model, dtype)
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


@pytest.mark.parametrize("model", MODELS)
def test_chunked_prefill_within_a_small_budget(served, model):
    """bf16 at a budget of 40 tokens: the 8 prompts (86 or 368 tokens) are prefilled in chunks, mixed
    with decodes; the dynamic token dims are bounded by the budget."""
    rep, text = _report(served, model, "bfloat16")
    assert {g.bound for g in rep.graphs} == {BUDGETS["bfloat16"]}
    assert any(s.tokens == 40 and s.requests and s.requests > 1 for s in rep.steps), rep.steps


@pytest.mark.parametrize("model", MODELS)
def test_vllm_default_scheduler_settings(served, model):
    """f32 with vLLM's default budget (no cap): the 8 prompts are prefilled in one step."""
    from transformers import AutoTokenizer
    from vllm_legato.__main__ import BATCH8_PROMPTS

    tok = AutoTokenizer.from_pretrained(served["models"][model])
    assert sum(len(tok(p)["input_ids"]) for p in BATCH8_PROMPTS) == PROMPT_TOKENS[model]
    rep, text = _report(served, model, "float32")
    (bound,) = {g.bound for g in rep.graphs}
    assert bound >= 512, bound
    assert any(s.tokens == PROMPT_TOKENS[model] and s.requests == 8 for s in rep.steps), rep.steps


@pytest.mark.parametrize("model,dtype", ENGINES)
def test_report_share_of_work_on_legato(served, model, dtype):
    """Every served step has its DRAM bytes and MACs on Legato (measured) and on the host
    (estimated: extern nodes and the LM head); the report prints the mean share per step."""
    rep, text = _report(served, model, dtype)
    steps = [s for s in rep.steps if s.requests]
    assert all(s.legato_dram_bytes >= s.attn_dram_bytes > 0 for s in steps), steps
    # host MACs: the extern mms, if any (a step may have every matmul on Legato, the LM
    # head's included: vllm_legato.lm_head; f32 projections too, vllm_legato::linear)
    assert all(s.legato_macs > 0 and s.host_dram_bytes > 0 and s.host_macs >= 0 for s in steps)
    for decode in (True, False):
        assert 0.0 < rep.share("dram_bytes", decode) < 1.0, decode
        assert 0.0 < rep.share("macs", decode) <= 1.0, decode
    assert "share on Legato per decode step" in text
    # issue 16: >= 95% of a step's bytes and MACs, decode and prefill, bf16 and f32
    for decode in (True, False):
        for what in ("dram_bytes", "macs"):
            assert rep.share(what, decode) >= 0.95, (what, decode, rep.share(what, decode))
    print(
        f"{model} {dtype}: on Legato per decode step: DRAM bytes {rep.share('dram_bytes', True):.1%}, "
        f"MACs {rep.share('macs', True):.1%}; per prefill step: "
        f"{rep.share('dram_bytes', False):.1%}, {rep.share('macs', False):.1%}"
    )


@pytest.mark.parametrize("model,dtype", ENGINES)
def test_report_says_what_ran_where_and_why(served, model, dtype):
    """The per-op table of a step (`Report.where`): SiluAndMul runs as the plugin's Legato
    kernel (its cycles and bytes measured), the rotary embedding inside the attention's
    kernels, no host node comes from
    those layers, every host node has the legato backend's reason, and the host rows' bytes
    add up to the steps' host bytes (the nodes' estimates plus the LM head)."""
    rep, text = _report(served, model, dtype)
    assert "what ran where (decode steps" in text, text
    for decode in (True, False):
        rows = rep.where(decode)
        plugin = {r["op"]: r for r in rows if r["where"] == "legato (plugin op)"}
        head = plugin.pop("LM head (compute_logits)", None)
        # SiluAndMul alone: the gate/up (K = 64, N = 256) is chip_linear's in both dtypes (K
        # zero-padded to a whole weight tile), so nothing fuses it with the plugin's linear; in
        # f32 (budget 1024) the qkv (N = 128) and down (N = 64, K = 128) projections are
        # chip_linear's rows over the cores (linear_row_chunks: one core cannot hold 1024
        # rows), and o (N = 64, K = 64), which one core holds and chip_linear cannot tile
        # over 32 cores, runs as vllm_legato::linear, one per layer
        act = "vllm_legato.silu_and_mul"
        if dtype == "float32":
            assert plugin.pop("vllm_legato.linear")["nodes"] == 2, rows
        # the rotary embedding is folded into the attention kernels (ops.fold_rotary): its op
        # is not in the graph
        assert set(plugin) == {act}, rows
        assert "vllm_legato.rotary_neox" not in rep.vllm_ops(), rep.vllm_ops()
        # one per layer (the tiny models have 2)
        assert all(r["nodes"] == 2 and r["cycles"] > 0 and r["bytes"] > 0 for r in plugin.values())
        # the LM head's graph (vllm_legato.lm_head): a Legato mm (chip_linear where it tiles
        # the vocabulary over the cores, else single-core; at most max_num_seqs rows)
        assert head is not None and head["cycles"] > 0 and head["bytes"] > 0, rows
        host = [r for r in rows if r["where"] == "host"]
        assert all(r["reason"] for r in host), host
        assert not [r for r in host if r["module"] in ("SiluAndMul", "RotaryEmbedding")], host
        steps = [s for s in rep.steps if s.requests and bool(s.decode) == decode]
        mean_host = sum(s.host_dram_bytes for s in steps) / len(steps)
        assert sum(r["bytes"] for r in host) == pytest.approx(mean_host)
        # the plugin ops' kernels are part of the step's Legato work
        assert all(
            s.legato_dram_bytes
            >= s.attn_dram_bytes
            + sum(b for _, b in s.plugin_ops.values())
            + (s.lm_head[1] if s.lm_head else 0)
            for s in steps
        )
