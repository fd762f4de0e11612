"""`python -m vllm_legato --bench`: simulated decode speed of models served by vLLM on Bertha.

For every model (the tiny Llama, the tiny Qwen2, and a Llama-7B-shaped model of 1 and 2 layers:
hidden 4096, 32 heads of 128, MLP 11008, vocabulary 32000, random bf16 weights written locally)
one vLLM engine on Bertha (bf16 unless `--dtype` says otherwise, vLLM's default scheduler
settings) serves one request (of 6
tokens), then 8 concurrent requests of different prompt lengths (`__main__.BATCH8_PROMPTS`),
greedy, and the
plugin's report gives, per decode step (every request in it samples one token), the emulator's
counts: cycles of the step's Legato kernels (the graph's and the attention backend's), their
DRAM bytes, and the host's estimated bytes (`vllm_legato.work`: extern nodes and the LM head).
Per batch size B (the decode steps with B requests):

* `cycles`: the mean over those steps of the step's simulated cycles; `us/token` = cycles / clock
  (a step gives each request one token: the time between a request's tokens); `tok/s` =
  B * clock / cycles (the chip's throughput over all requests).
* `roofline`: the DRAM roofline of the Legato kernels' bytes, ceil(bytes / (channels * bytes per
  cycle per channel)) of the chip's ComputeModel; `eff` = roofline / cycles (<= 1).
* `on Legato`: the share of the step's DRAM bytes the Legato kernels moved; the rest is host
  work (extern nodes, the LM head) and has no simulated time. `us/token (host at roofline)`
  charges that host work its DRAM roofline on the chip: the step's time if it ran at the
  roofline (a lower bound for when it runs on Bertha).

Llama-7B extrapolation (`--bench-7b-layers 1,2`, the default): with C1, C2 the per-step cycles of
the 1- and 2-layer models at batch B, a layer costs C2 - C1 and the rest of the step (embedding,
final norm, the LM head: `vllm_legato.lm_head` runs it on Legato) C1 - (C2 - C1), so 32 layers
cost C1 + 31 * (C2 - C1). Were the LM head (4096 x 32000 bf16) on the host (no LM-head kernel in
the rows), it is charged its DRAM roofline, ceil(4096 * 32000 * 2 / bytes per cycle), the same at
every B (its weight is read once per step). The host's bytes extrapolate the same way (H1 + 31 *
(H2 - H1)).
"""

from __future__ import annotations

import gc
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass

LLAMA7B = dict(hidden=4096, heads=32, kv_heads=32, intermediate=11008, vocab=32000)
LAYERS_7B = 32
MODELS = ("tiny-llama", "tiny-qwen2", "llama7b")


@dataclass
class Row:
    """The decode steps of `batch` requests of one model."""

    model: str
    batch: int
    steps: int  # decode steps measured
    cycles: float  # mean simulated cycles per step (Legato kernels)
    legato_dram_bytes: float  # mean per step
    host_dram_bytes: float  # mean per step (estimated; no simulated time)
    roofline_cycles: int  # DRAM roofline of legato_dram_bytes
    clock_ghz: float
    host_roofline_cycles: int = 0  # DRAM roofline of host_dram_bytes
    note: str = ""
    lm_head_cycles: float = 0.0  # mean per step: the LM head's Legato kernels (in `cycles`)

    @property
    def us_per_token(self) -> float:
        return self.cycles / (self.clock_ghz * 1e3)

    @property
    def tokens_per_s(self) -> float:
        return self.batch * self.clock_ghz * 1e9 / self.cycles

    @property
    def efficiency(self) -> float:
        return self.roofline_cycles / self.cycles

    @property
    def share(self) -> float:
        return self.legato_dram_bytes / (self.legato_dram_bytes + self.host_dram_bytes)

    @property
    def us_per_token_host_at_roofline(self) -> float:
        return (self.cycles + self.host_roofline_cycles) / (self.clock_ghz * 1e3)

    def to_json(self) -> dict:
        d = asdict(self)
        for k in ("us_per_token", "tokens_per_s", "efficiency", "share"):
            d[k] = getattr(self, k)
        d["us_per_token_host_at_roofline"] = self.us_per_token_host_at_roofline
        return d


def dram_roofline(device: str, nbytes: float) -> int:
    """ceil(nbytes / the chip's DRAM bytes per cycle, all channels) on Legato device `device`."""
    from legato.model.targets import target_model

    return math.ceil(nbytes / target_model(device).dram_bytes_per_cycle)


def rows_of(report, model: str, batches=(1, 8)) -> list[Row]:
    """One Row per batch size: the report's decode steps with that many requests."""
    out = []
    for b in batches:
        steps = [s for s in report.steps if s.decode and s.requests == b]
        if not steps:
            raise ValueError(f"{model}: the report has no decode step of {b} request(s)")
        n = len(steps)
        lb = sum(s.legato_dram_bytes for s in steps) / n
        hb = sum(s.host_dram_bytes for s in steps) / n
        out.append(
            Row(
                model,
                b,
                n,
                sum(s.cycles for s in steps) / n,
                lb,
                hb,
                dram_roofline(report.device, lb),
                report.clock_ghz,
                dram_roofline(report.device, hb),
                lm_head_cycles=sum(s.lm_head[0] if s.lm_head else 0 for s in steps) / n,
            )
        )
    return out


def extrapolate_7b(one: Row, two: Row, device: str) -> Row:
    """32 layers + LM head from the 1- and 2-layer rows of one batch size (module docstring).
    When the rows' LM head ran on Legato (`lm_head_cycles`), it is in C1 already (part of the
    step outside the layers), so it is not charged again."""
    layer = two.cycles - one.cycles
    lm_head_bytes = LLAMA7B["hidden"] * LLAMA7B["vocab"] * 2 if not one.lm_head_cycles else 0
    lb = one.legato_dram_bytes + (LAYERS_7B - 1) * (two.legato_dram_bytes - one.legato_dram_bytes)
    hb = one.host_dram_bytes + (LAYERS_7B - 1) * (two.host_dram_bytes - one.host_dram_bytes)
    return Row(
        "llama7b (32 layers, extrapolated)",
        one.batch,
        min(one.steps, two.steps),
        one.cycles + (LAYERS_7B - 1) * layer + dram_roofline(device, lm_head_bytes),
        lb,
        hb,
        dram_roofline(device, lb) + dram_roofline(device, lm_head_bytes),
        one.clock_ghz,
        dram_roofline(device, hb),
        note="C1 + 31 * (C2 - C1)"
        + (
            " (LM head on Legato, in C1)"
            if one.lm_head_cycles
            else " + LM head at its DRAM roofline"
        ),
        lm_head_cycles=one.lm_head_cycles,
    )


def _write_model(name: str, root: str, layers: int = 1) -> str:
    from vllm_legato.tiny_llama import make_tiny_llama, make_tiny_qwen2

    path = os.path.join(root, name)
    if name == "tiny-llama":
        make_tiny_llama(path)
    elif name == "tiny-qwen2":
        make_tiny_qwen2(path)
    else:
        make_tiny_llama(path, layers=layers, max_pos=512, **LLAMA7B)
    return path


def _serve(path: str, max_tokens: int, report_path: str, dtype: str = "bfloat16"):
    """Serve 1 then 8 requests on a fresh engine; the report of its steps."""
    from vllm import LLM, SamplingParams

    import vllm_legato
    from vllm_legato.__main__ import BATCH8_PROMPTS

    os.environ["LEGATO_VLLM_REPORT"] = report_path
    llm = LLM(
        model=path,
        dtype=dtype,
        max_model_len=128,
        max_num_seqs=8,
        seed=0,
        enable_prefix_caching=False,
        gpu_memory_utilization=0.2,
        kv_cache_memory_bytes=64 << 20,
    )
    # batch 1: a prompt of several tokens (a one-token prompt's prefill step looks like a
    # decode step in the report: one token per request)
    for batch in (BATCH8_PROMPTS[2:3], BATCH8_PROMPTS):
        params = SamplingParams(
            temperature=0.0, max_tokens=max_tokens + _prefill_steps(llm, batch), ignore_eos=True
        )
        llm.generate(batch, params, use_tqdm=False)
    del llm
    gc.collect()
    return vllm_legato.load_report(report_path)


def _prefill_steps(llm, prompts) -> int:
    """An upper bound of the steps before every one of `prompts` has been prefilled, at the
    engine's token budget (which the platform may have lowered, `vllm_legato.budget`): the
    requests prefilled first decode meanwhile (a token each per step, from the budget) and
    must not finish before the last one starts decoding, or no step decodes all of them."""
    budget = llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens
    tok = llm.get_tokenizer()
    total = sum(len(tok(p)["input_ids"]) for p in prompts)
    n = len(prompts)
    if total <= budget:
        return 0
    return -(-total // max(1, budget - n)) + 1


def run(models=MODELS, max_tokens: int = 4, layers_7b=(1, 2), dtype: str = "bfloat16") -> dict:
    """Serve every model; {"rows": [Row.to_json()], "reports": {name: report json}}."""
    import vllm_legato

    if not vllm_legato.selected_device():
        raise SystemExit("python -m vllm_legato --bench: set LEGATO_VLLM=1 (or evt1)")
    rows, reports, by_layers = [], {}, {}
    # the models' weights (a 7B-shaped layer is ~0.4 GB each) are removed when the run ends
    with tempfile.TemporaryDirectory(prefix="vllm-legato-bench-") as root:
        for name in models:
            variants = (
                [(f"llama7b-{n}l", n) for n in layers_7b] if name == "llama7b" else [(name, 0)]
            )
            for label, n in variants:
                path = _write_model("llama7b" if n else name, os.path.join(root, label), n or 1)
                rep = _serve(path, max_tokens, os.path.join(root, f"report-{label}.json"), dtype)
                reports[label] = rep.to_json()
                got = rows_of(rep, label)
                rows += got
                by_layers[n] = got
                device = rep.device
    if "llama7b" in models and {1, 2} <= set(by_layers):
        for one, two in zip(by_layers[1], by_layers[2]):
            rows.append(extrapolate_7b(one, two, device))
    return {"rows": [r.to_json() for r in rows], "reports": reports}


def table(result: dict) -> str:
    head = (
        "| model | batch | decode steps | cycles/step | us/token | tok/s | DRAM roofline | eff "
        "| bytes on Legato | us/token (host at roofline) |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in result["rows"]:
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['steps']} | {r['cycles']:.0f} | "
            f"{r['us_per_token']:.2f} | {r['tokens_per_s']:.0f} | {r['roofline_cycles']} | "
            f"{r['efficiency']:.1%} | {r['share']:.1%} | "
            f"{r['us_per_token_host_at_roofline']:.2f} |"
        )
    return "\n".join(lines)


def main(a) -> int:
    dtypes = a.dtype or ["bfloat16"]
    if len(dtypes) != 1:
        raise SystemExit("python -m vllm_legato --bench: one --dtype at most")
    result = run(a.bench_models or MODELS, a.max_tokens, tuple(a.bench_7b_layers), dtypes[0])
    print(table(result))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0
