"""The token budget at which the model's projections run on Legato (issue 16, the cheap route).

vLLM's forward has a dynamic token dimension bounded by its budget per step,
`max_num_batched_tokens` (default 1024). `legato.torch.library.chip_linear` takes a runtime row
count in its decode form only, whose kernel is sized for the bound: x's rows (bound x K) must fit
a quarter of one core's SRAM. For Llama-7B on EVT0 that holds a K = 4096 projection up to 64
tokens and the down projection (K = 11008) up to 23, far below 1024: at vLLM's default budget
every projection runs on the host. With chunked prefill, a smaller budget only cuts a long
prompt's prefill into more steps, so the platform lowers the budget to the largest one at
which chip_linear accepts every projection of the model (`fit`), when there is one.

Since chip_linear runs a bound above one pass's in chunks of rows (`linear_chunks`), it takes
Llama-7B's projections at vLLM's default budget, so nothing is lowered for it: the budget is
lowered only where chip_linear refuses vLLM's budget and accepts a smaller one.

The answer is chip_linear's own: `accepts` asks its `mm` resolver about a graph of one
projection (`mm(x[T, K], t(W[N, K]))`, T a runtime dim bounded by the candidate budget, W a
parameter), without compiling anything; `fit` searches the budgets (acceptance only falls as
the bound grows).

$LEGATO_VLLM_TOKEN_CAP=0 keeps vLLM's budget (nothing is lowered); $LEGATO_VLLM_TOKEN_CAP=N lowers
it to N (with chunked prefill), whatever the projections take.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

CAP_ENV = "LEGATO_VLLM_TOKEN_CAP"
DECISION_ENV = "LEGATO_VLLM_BUDGET_DECISION"  # the decision, as JSON, for the worker's report


@dataclass
class Decision:
    """What the platform did with the token budget: `budget` the one the engine runs with,
    `requested` vLLM's (default or asked), `capped` whether it was lowered, `reason` why (or
    why not), `projections` {name: [K, N]} of the model."""

    budget: int
    requested: int
    capped: bool
    reason: str
    projections: dict

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_env() -> Decision | None:
        raw = os.environ.get(DECISION_ENV)
        return Decision(**json.loads(raw)) if raw else None


def projections(hf_config) -> dict[str, tuple[int, int]]:
    """{vLLM layer: (K, N)} of a Llama-like decoder layer (Llama, Qwen2, Mistral: vLLM's
    QKVParallelLinear, o_proj, MergedColumnParallelLinear gate_up_proj, down_proj, one weight
    each); {} when the config lacks the sizes."""
    names = ("hidden_size", "num_attention_heads", "intermediate_size")
    if not all(isinstance(getattr(hf_config, n, None), int) for n in names):
        return {}
    h, heads, inter = (getattr(hf_config, n) for n in names)
    kv = getattr(hf_config, "num_key_value_heads", None) or heads
    d = getattr(hf_config, "head_dim", None) or h // heads
    return {
        "qkv_proj": (h, (heads + 2 * kv) * d),
        "o_proj": (heads * d, h),
        "gate_up_proj": (h, 2 * inter),
        "down_proj": (inter, h),
    }


def accepts(device: str, k: int, n: int, dtype, bound: int, resolver=None) -> str | None:
    """None when chip_linear takes `x[T, K] @ W[N, K]^T` (dtype, T a runtime row count bounded
    by `bound`) on `device`, else its reason not. `resolver`: another `mm` resolver to ask
    (legato.torch.library.aten's single-core one: `vllm_legato.ops.linear_route`)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from legato.model.targets import target_model
    from legato.torch.kernelgen import PARAM_META
    from legato.torch.library import chip_linear
    from legato.torch.options import Options
    from legato.torch.registry import ResolveContext

    aten = torch.ops.aten
    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        t = mode.shape_env.create_unbacked_symint()
        x = torch.empty((t, k), dtype=dtype)
        w = torch.empty((n, k), dtype=dtype)
        wt = w.t()
        y = x @ wt
    g = torch.fx.Graph()
    xn, wn = g.placeholder("x"), g.placeholder("w")
    wn.meta[PARAM_META] = True
    tn = g.call_function(aten.t.default, (wn,))
    mm = g.call_function(aten.mm.default, (xn, tn))
    g.output(mm)
    for node, v in ((xn, x), (wn, w), (tn, wt), (mm, y)):
        node.meta["val"] = v
    ctx = ResolveContext(
        target_model(device), Options(device=device), lambda d: d if isinstance(d, int) else bound
    )
    try:
        with mode:  # a resolver may build tensors of the node's (symbolic) shape
            (resolver or chip_linear.resolve_mm)(mm, ctx)
    except AssertionError as e:
        return str(e)
    return None


def fit(device: str, projs: dict, dtype, budget: int) -> tuple[int, str]:
    """(the largest bound <= `budget` at which chip_linear takes every projection in `projs`,
    or 0, and the reason: the refusal at the next larger bound, or at bound 1 when none fits)."""

    def refusal(b):
        for name, (k, n) in projs.items():
            why = accepts(device, k, n, dtype, b)
            if why is not None:
                return f"{name} (K={k}, N={n}) at {b} tokens: {why}"
        return None

    if refusal(budget) is None:
        return budget, "chip_linear takes every projection at vLLM's budget"
    first = refusal(1)
    if first is not None:
        return 0, first
    lo, hi = 1, budget  # refusal(lo) is None, refusal(hi) is not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if refusal(mid) is None:
            lo = mid
        else:
            hi = mid
    return lo, refusal(hi)


def _avoid_model_dims(bound: int, hf_config) -> int:
    """`bound`, lowered past the model's static sizes: dynamo specializes the token dim to a
    static dim of equal size (README, known limits)."""
    sizes = {
        getattr(hf_config, a, None)
        for a in (
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "vocab_size",
        )
    }
    while bound > 1 and bound in sizes:
        bound -= 1
    return bound


def apply(vllm_config, device: str) -> Decision:
    """Lower vLLM's token budget to the projections' bound (module docstring) when chunked
    prefill allows it; the decision (also in $LEGATO_VLLM_BUDGET_DECISION for the worker)."""
    sc, mc = vllm_config.scheduler_config, vllm_config.model_config
    requested = int(sc.max_num_batched_tokens)
    hf = mc.hf_text_config if mc is not None else None
    projs = projections(hf) if hf is not None else {}

    def decide(budget, capped, reason):
        d = Decision(budget, requested, capped, reason, {k: list(v) for k, v in projs.items()})
        os.environ[DECISION_ENV] = d.to_json()
        return d

    cap = os.environ.get(CAP_ENV, "").strip()
    if cap == "0":
        return decide(requested, False, f"${CAP_ENV}=0: vLLM's budget kept")
    if cap:
        if not cap.isdigit():
            raise ValueError(f"${CAP_ENV}={cap!r}: expected 0 (keep vLLM's budget) or a budget")
        if int(cap) < requested:
            if not sc.enable_chunked_prefill:
                return decide(requested, False, f"${CAP_ENV}={cap} needs chunked prefill")
            bound = _lower(sc, mc, int(cap))
            return decide(bound, True, f"${CAP_ENV}={cap}")
    if not projs:
        return decide(requested, False, "the model config has no Llama-like projection sizes")
    if not sc.enable_chunked_prefill:
        return decide(
            requested, False, "chunked prefill is off: the budget must hold a whole prompt"
        )
    bound, why = fit(device, projs, mc.dtype, requested)
    if bound == requested:
        return decide(requested, False, why)
    if bound == 0:
        return decide(
            requested,
            False,
            "no budget puts every projection on chip_linear (the others run on the single-core "
            f"mm or vllm_legato::linear): {why}",
        )
    bound = _lower(sc, mc, _avoid_model_dims(bound, hf))
    return decide(bound, True, f"the projections' bound; above it {why}")


def _lower(sc, mc, bound: int) -> int:
    """Set vLLM's token budget (and what its SchedulerConfig derives from it) to `bound`."""
    sc.max_num_batched_tokens = bound
    # the fields vLLM's SchedulerConfig derives from the budget
    sc.max_num_encoder_input_tokens = sc.encoder_cache_size = bound
    if getattr(sc, "max_num_scheduled_tokens", None):
        sc.max_num_scheduled_tokens = min(sc.max_num_scheduled_tokens, bound)
    if sc.max_num_seqs > bound:
        sc.max_num_seqs = bound
    if getattr(sc, "long_prefill_token_threshold", 0) > bound:
        sc.long_prefill_token_threshold = bound
    sc.verify_max_model_len(mc.max_model_len)
    return bound
