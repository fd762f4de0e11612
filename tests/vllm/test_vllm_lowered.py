"""A lowered token budget and a small KV cache, with concurrent requests, against stock vLLM.

The Bertha engine's budget is lowered by the platform itself ($LEGATO_VLLM_TOKEN_CAP, the
path `budget.apply` takes when it lowers the budget for the projections) to LOWERED_BUDGET
tokens per step; stock vLLM is asked for the same budget. Both have a KV cache of
LOWERED_KV_BLOCKS blocks, fewer than the 8 concurrent requests need at once, so vLLM's
scheduler makes requests wait for KV space (and chunks their prefills) while others decode.
f32: the tokens must be stock's, request by request (conftest's `served` starts both)."""

import pytest
from conftest import LOWERED_BLOCK_SIZE, LOWERED_BUDGET, LOWERED_KV_BLOCKS, LOWERED_MAX_TOKENS

pytestmark = pytest.mark.vllm


def _runs(served, name):
    return {r["batch"]: r for r in served[name]["runs"]}


def test_lowered_budget_and_kv_cache_are_stocks_tokens(served):
    stock, bertha = _runs(served, "stock-lowered"), _runs(served, "bertha-lowered")
    assert served["bertha-lowered"]["platform"] == "BerthaPlatform"
    assert set(stock) == set(bertha) == {1, 8}
    for batch in (1, 8):
        s, b = stock[batch], bertha[batch]
        assert s["prompts"] == b["prompts"]
        assert all(len(o) == LOWERED_MAX_TOKENS for o in b["outputs"])
        diff = [i for i, (x, y) in enumerate(zip(s["outputs"], b["outputs"])) if x != y]
        assert not diff, f"batch {batch}: requests {diff} differ from stock vLLM"


def test_the_budget_was_lowered_and_the_kv_cache_bounded_the_batch(served):
    rep = _runs(served, "bertha-lowered")[8]["report"]
    budget = rep["budget"]
    assert budget["capped"] and budget["budget"] == LOWERED_BUDGET, budget
    assert budget["requested"] == 1024 and "LEGATO_VLLM_TOKEN_CAP" in budget["reason"]
    steps = [s for s in rep["steps"] if s["requests"]]
    assert rep["attention_backend"] == "LEGATO_ATTN"
    assert max(s["tokens"] for s in steps) == LOWERED_BUDGET  # chunked prefill at the budget
    # the KV cache (LOWERED_KV_BLOCKS x LOWERED_BLOCK_SIZE tokens) holds fewer requests than 8
    prompts = _runs(served, "bertha-lowered")[8]["prompts"]
    assert LOWERED_KV_BLOCKS * LOWERED_BLOCK_SIZE < len(prompts) * LOWERED_MAX_TOKENS
    most = max(s["requests"] for s in steps)
    assert 1 < most < len(prompts), f"at most {most} requests per step"
    # every step's attention and KV-cache write ran on Legato
    assert all(s["attn_cycles"] > 0 for s in steps)
