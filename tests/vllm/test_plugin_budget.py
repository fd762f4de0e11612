"""The platform's token budget (`vllm_legato.budget`): lowered to the bound at which chip_linear
takes every projection of the model (no engine start-up)."""

from types import SimpleNamespace

import pytest

pytest.importorskip("vllm_legato")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.vllm

LLAMA7B = SimpleNamespace(
    hidden_size=4096, num_attention_heads=32, num_key_value_heads=32, intermediate_size=11008
)
TINY = SimpleNamespace(
    hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128
)


def _quarter_sram_rows(device, k, esize):
    """chip_linear's decode form (the one that takes a runtime row count) holds x's bound x K
    rows in a quarter of one core's SRAM (chip_linear.py, `decode`): the largest such bound."""
    from legato.model.targets import target_model

    return target_model(device).sram_size // 4 // (k * esize)


def test_projections_of_a_llama_layer():
    from vllm_legato.budget import projections

    assert projections(LLAMA7B) == {
        "qkv_proj": (4096, 3 * 4096),
        "o_proj": (4096, 4096),
        "gate_up_proj": (4096, 2 * 11008),
        "down_proj": (11008, 4096),
    }
    gqa = SimpleNamespace(**{**vars(TINY), "head_dim": 32})
    assert projections(gqa)["qkv_proj"] == (64, (4 + 2 * 2) * 32)
    assert projections(SimpleNamespace(hidden_size=8)) == {}


@pytest.mark.parametrize(
    ("device", "dtype", "esize"),
    [
        ("bertha", torch.bfloat16, 2),
        ("bertha-evt1", torch.bfloat16, 2),
        ("bertha", torch.float32, 4),
    ],
)
def test_7b_projections_fit_vllms_budget(device, dtype, esize):
    """Past the decode form's one-pass bound (the down projection's x rows in a quarter of SRAM),
    chip_linear runs the rows in chunks (`linear_chunks`), so it takes every 7B projection at
    vLLM's default budget and nothing is lowered."""
    from vllm_legato.budget import accepts, fit, projections

    one_pass = _quarter_sram_rows(device, 11008, esize)
    assert accepts(device, 11008, 4096, dtype, one_pass + 1) is None
    assert fit(device, projections(LLAMA7B), dtype, 1024) == (
        1024,
        "chip_linear takes every projection at vLLM's budget",
    )


def _refuse_down_past(monkeypatch, limit):
    """chip_linear as it was before `linear_chunks`: the down projection (K = 11008) refused past
    `limit` tokens; the search and the lowering are the plugin's, whatever chip_linear accepts."""
    from vllm_legato import budget

    real = budget.accepts

    def accepts(device, k, n, dtype, bound):
        if k == 11008 and bound > limit:
            return f"x's {bound} rows do not fit"
        return real(device, k, n, dtype, bound)

    monkeypatch.setattr(budget, "accepts", accepts)


def test_the_bound_is_the_first_refusal(monkeypatch):
    from vllm_legato import budget

    _refuse_down_past(monkeypatch, 23)
    bound, why = budget.fit("bertha", budget.projections(LLAMA7B), torch.bfloat16, 1024)
    assert bound == 23, (bound, why)
    assert why.startswith("down_proj (K=11008, N=4096) at 24 tokens"), why


def test_no_bound_when_a_projection_never_fits():
    """The tiny models' qkv projection (N = 128) gives none of 32 cores whole columns at any
    token count: no budget makes chip_linear take it (K = 64 alone no longer refuses: it is
    zero-padded to a whole weight tile)."""
    from vllm_legato.budget import fit, projections

    bound, why = fit("bertha", projections(TINY), torch.bfloat16, 1024)
    assert bound == 0
    assert "qkv_proj (K=64, N=128) at 1 tokens: no tiling of 128 output columns" in why, why


def test_budget_kept_when_chip_linear_takes_it():
    from vllm_legato.budget import fit, projections

    small = SimpleNamespace(
        hidden_size=512, num_attention_heads=4, num_key_value_heads=4, intermediate_size=1024
    )
    bound, why = fit("bertha", projections(small), torch.bfloat16, 16)
    assert (bound, why) == (16, "chip_linear takes every projection at vLLM's budget")


def _config(hf, budget, seqs, chunked=True, max_model_len=128):
    from vllm.config import SchedulerConfig

    sc = SchedulerConfig(
        max_model_len=max_model_len,
        is_encoder_decoder=False,
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        enable_chunked_prefill=chunked,
    )
    mc = SimpleNamespace(hf_text_config=hf, dtype=torch.bfloat16, max_model_len=max_model_len)
    return SimpleNamespace(scheduler_config=sc, model_config=mc)


def test_apply_lowers_vllms_budget(monkeypatch):
    from vllm_legato import budget

    monkeypatch.delenv(budget.CAP_ENV, raising=False)
    monkeypatch.delenv(budget.DECISION_ENV, raising=False)
    want = 23
    _refuse_down_past(monkeypatch, want)
    cfg = _config(LLAMA7B, 1024, 256)
    d = budget.apply(cfg, "bertha")
    assert (d.budget, d.requested, d.capped) == (want, 1024, True)
    sc = cfg.scheduler_config
    assert sc.max_num_batched_tokens == want and sc.max_num_seqs == want
    assert sc.encoder_cache_size == want and sc.max_num_encoder_input_tokens == want
    assert "down_proj" in d.reason
    assert budget.Decision.from_env() == d  # for the worker's report


@pytest.mark.parametrize(
    ("hf", "chunked", "env", "reason"),
    [
        (TINY, True, None, "no tiling of 128 output columns"),
        (LLAMA7B, False, None, "chunked prefill is off"),
        (LLAMA7B, True, "0", "LEGATO_VLLM_TOKEN_CAP=0"),
    ],
)
def test_apply_keeps_the_budget_and_says_why(monkeypatch, hf, chunked, env, reason):
    from vllm_legato import budget

    if env is None:
        monkeypatch.delenv(budget.CAP_ENV, raising=False)
    else:
        monkeypatch.setenv(budget.CAP_ENV, env)
    monkeypatch.delenv(budget.DECISION_ENV, raising=False)
    cfg = _config(hf, 1024, 8, chunked, max_model_len=1024)
    d = budget.apply(cfg, "bertha")
    assert (d.budget, d.capped) == (1024, False)
    assert cfg.scheduler_config.max_num_batched_tokens == 1024
    assert reason in d.reason, d.reason
    assert budget.Decision.from_env() == d


def test_budget_avoids_a_model_dimension():
    """A budget equal to a static size of the model would make dynamo specialize the token dim."""
    from vllm_legato.budget import _avoid_model_dims

    assert _avoid_model_dims(32, LLAMA7B) == 31
    assert _avoid_model_dims(23, LLAMA7B) == 23


def test_apply_lowers_to_an_asked_cap(monkeypatch):
    """$LEGATO_VLLM_TOKEN_CAP=N lowers the budget to N whatever the projections take (the tiny
    models, whose projections no bound puts on chip_linear); not without chunked prefill, never
    raised, and a cap that is not a number is an error naming the variable."""
    from vllm_legato import budget

    monkeypatch.delenv(budget.DECISION_ENV, raising=False)
    monkeypatch.setenv(budget.CAP_ENV, "24")
    cfg = _config(TINY, 1024, 256)
    d = budget.apply(cfg, "bertha")
    assert (d.budget, d.requested, d.capped, d.reason) == (
        24,
        1024,
        True,
        "$LEGATO_VLLM_TOKEN_CAP=24",
    )
    sc = cfg.scheduler_config
    assert sc.max_num_batched_tokens == 24 and sc.max_num_seqs == 24
    assert budget.Decision.from_env() == d
    off = _config(TINY, 1024, 8, chunked=False, max_model_len=1024)
    d = budget.apply(off, "bertha")
    assert (d.budget, d.capped) == (1024, False) and "needs chunked prefill" in d.reason
    assert off.scheduler_config.max_num_batched_tokens == 1024
    small = _config(TINY, 16, 8)
    assert budget.apply(small, "bertha").budget == 16  # not raised to the cap
    monkeypatch.setenv(budget.CAP_ENV, "lots")
    with pytest.raises(ValueError, match="LEGATO_VLLM_TOKEN_CAP='lots'"):
        budget.apply(_config(TINY, 1024, 8), "bertha")
