"""bf16 at vLLM's default scheduler settings (issue 16, item 3): the tiny Llama and Qwen2 on
Bertha with no token budget given (vLLM's 1024 on the CPU platform, kept by the platform: the
tiny models' projections are never chip_linear's, so no budget would help), the single request
and 8 concurrent requests of different lengths, all 8 prefilled in one step; every dynamic dim
bounded by 1024; >= 95% of every step's DRAM bytes and MACs on Legato; the answers stock's by
test_bf16_same_answers' rule (conftest's `served` starts the `bertha-default` process)."""

import pytest
from conftest import DEFAULT_BUDGET, MODELS
from test_vllm_legato import PROMPT_TOKENS, bf16_differences

pytestmark = pytest.mark.vllm


def _runs(served, model):
    name = "tiny-llama" if model == "llama" else "tiny-qwen2"
    return {r["batch"]: r for r in served["bertha-default"]["runs"] if r["model"] == name}


@pytest.mark.parametrize("model", MODELS)
def test_default_budget_bf16(served, model):
    from vllm_legato.report import Report

    assert served["bertha-default"]["platform"] == "BerthaPlatform"
    runs = _runs(served, model)
    assert set(runs) == {1, 8}
    rep = Report.from_json(runs[8]["report"])
    assert rep.budget["budget"] == rep.budget["requested"] == DEFAULT_BUDGET, rep.budget
    assert not rep.budget["capped"]
    assert {g.bound for g in rep.graphs} == {DEFAULT_BUDGET}
    # the 8 prompts in one step (no chunking), then decodes of 8 requests at once
    assert any(s.tokens == PROMPT_TOKENS[model] and s.requests == 8 for s in rep.steps)
    assert any(s.decode and s.requests == 8 for s in rep.steps)
    for decode in (True, False):
        for what in ("dram_bytes", "macs"):
            assert rep.share(what, decode) >= 0.95, (what, decode, rep.share(what, decode))
    print(
        f"{model} bf16 at {DEFAULT_BUDGET}: on Legato per decode step: DRAM bytes "
        f"{rep.share('dram_bytes', True):.1%}, MACs {rep.share('macs', True):.1%}; per prefill "
        f"step: {rep.share('dram_bytes', False):.1%}, {rep.share('macs', False):.1%}"
    )
    for batch in (1, 8):
        stock = {(r["dtype"], r["batch"]): r for r in served[f"stock-{model}"]["runs"]}
        bad = bf16_differences(model, stock[("bfloat16", batch)], runs[batch])
        assert not bad, "\n".join(bad)
