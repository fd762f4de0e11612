"""`python -m vllm_legato`: serve a model with `vllm.LLM(...).generate(...)` and print the tokens
and (on Bertha) the Legato report.

    LEGATO_VLLM=1 python -m vllm_legato --tiny /tmp/tiny-llama           # Bertha EVT0
    LEGATO_VLLM=evt1 python -m vllm_legato --model PATH --dtype float32   # Bertha EVT1
    python -m vllm_legato --tiny /tmp/tiny-llama --enforce-eager          # stock vLLM (CPU)

`--tiny DIR` first writes the tiny random Llama (vllm_legato.tiny_llama) to DIR. `--json FILE`
writes {"platform", "runs": [{"dtype", "outputs": [token ids per prompt], "text"}], "report"}.
Several `--dtype`s are served one after the other in this process.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile

DEFAULT_PROMPTS = [
    "the cat sat on the mat",
    "bertha runs a legato kernel",
    "w7 w9 w11 w13 w15 w17 w19 w21 w23 w25 w27",
]
# --batch8: 8 concurrent requests of different prompt lengths (1 to 23 words)
BATCH8_PROMPTS = [
    "kernel",
    "the dog runs",
    "the cat sat on the mat",
    "bertha runs a legato kernel on every core",
    "w7 w9 w11 w13 w15 w17 w19 w21 w23 w25 w27",
    "a tensor on a chip " * 3,
    "w30 w31 w32 w33 w34 w35 w36 w37 w38 w39 w40 w41 w42 w43 w44 w45 w46 w47 w48",
    "slow fast " * 11 + "core",
]


def _top(lp_steps) -> list:
    """[[(token, value), ...] per step] of vLLM's logprobs (raw logits with
    logprobs_mode='raw_logits'), best first."""
    out = []
    for d in lp_steps or []:
        items = sorted(((int(t), float(v.logprob)) for t, v in d.items()), key=lambda x: -x[1])
        out.append(items)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m vllm_legato",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", help="HF-format model directory")
    p.add_argument("--tiny", metavar="DIR", help="write the tiny random Llama to DIR and serve it")
    p.add_argument("--dtype", action="append", help="bfloat16 (default) / float32; repeatable")
    p.add_argument("--prompt", action="append", help="prompt (repeatable)")
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument(
        "--max-num-batched-tokens",
        type=int,
        action="append",
        help="vLLM's token budget per step = the bound of Legato's dynamic dims (default, or "
        "0: vLLM's own); repeatable: the i-th applies to the i-th --dtype, the last to the rest",
    )
    p.add_argument("--max-model-len", type=int, default=128)
    p.add_argument("--kv-cache-mib", type=int, default=64)
    p.add_argument(
        "--memory-utilization",
        type=float,
        default=0.2,
        help="vLLM's gpu_memory_utilization (host memory on CPU)",
    )
    p.add_argument("--enforce-eager", action="store_true", help="no torch.compile (stock only)")
    p.add_argument(
        "--batch8",
        action="store_true",
        help="serve the first prompt alone, then 8 concurrent prompts of different lengths",
    )
    p.add_argument(
        "--logprobs",
        type=int,
        default=0,
        help="record the top-N raw logits of every step (logprobs_mode=raw_logits)",
    )
    p.add_argument("--json", help="write the results here")
    a = p.parse_args(argv)
    if not (a.model or a.tiny):
        p.error("--model or --tiny is required")

    if a.tiny:
        from vllm_legato.tiny_llama import make_tiny_llama

        make_tiny_llama(a.tiny)
    model = a.model or a.tiny
    report_dir = os.environ.get("LEGATO_VLLM_REPORT_DIR") or tempfile.mkdtemp(prefix="vllm-legato-")

    import torch
    import vllm
    from vllm import LLM, SamplingParams

    # vLLM's CPU attention kernels use AMX tiles without asking Linux for them (torch asks
    # only when it runs a bf16 matmul itself): stock vLLM died of SIGILL when its first bf16
    # step was a one-token prompt's. Ask up front, on every platform (vllm_legato.compile does
    # the same for Bertha's workers).
    if hasattr(torch._C, "_cpu") and hasattr(torch._C._cpu, "_init_amx"):
        torch._C._cpu._init_amx()
    from vllm.platforms import current_platform

    import vllm_legato

    prompts = a.prompt or (BATCH8_PROMPTS if a.batch8 else DEFAULT_PROMPTS)
    batches = [prompts[:1], prompts] if a.batch8 else [prompts]
    params = SamplingParams(
        temperature=0.0,
        max_tokens=a.max_tokens,
        ignore_eos=True,
        logprobs=a.logprobs or None,
    )
    result = {"platform": type(current_platform).__name__, "vllm": vllm.__version__, "runs": []}
    for i, dtype in enumerate(a.dtype or ["bfloat16"]):
        budgets = a.max_num_batched_tokens or [0]
        budget = budgets[min(i, len(budgets) - 1)]
        # one report per engine: the worker (this or a child process) writes it there
        report_path = os.path.join(report_dir, f"report-{dtype}.json")
        os.environ["LEGATO_VLLM_REPORT"] = report_path
        llm = LLM(
            model=model,
            dtype=dtype,
            max_model_len=a.max_model_len,
            **({"max_num_batched_tokens": budget} if budget else {}),
            max_num_seqs=len(prompts),
            enforce_eager=a.enforce_eager,
            seed=0,
            enable_prefix_caching=False,
            # a tiny model on a shared machine: reserve little host memory
            gpu_memory_utilization=a.memory_utilization,
            kv_cache_memory_bytes=a.kv_cache_mib << 20,
            **({"logprobs_mode": "raw_logits", "max_logprobs": a.logprobs} if a.logprobs else {}),
        )
        for batch in batches:
            outs = llm.generate(batch, params, use_tqdm=False)
            run = {
                "dtype": dtype,
                "batch": len(batch),
                "prompts": batch,
                "outputs": [list(o.outputs[0].token_ids) for o in outs],
                "text": [o.outputs[0].text for o in outs],
                "top": [_top(o.outputs[0].logprobs) for o in outs],
            }
            result["runs"].append(run)
            print(f"[{result['platform']} {dtype}, {len(batch)} request(s)]")
            for prompt, ids, text in zip(batch, run["outputs"], run["text"]):
                print(f"  {prompt!r} -> {ids} {text!r}")
        del llm, outs
        gc.collect()
        if vllm_legato.selected_device():
            rep = vllm_legato.load_report(report_path)
            run["report"] = rep.to_json()
            run["report_text"] = str(rep)
            print(rep)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
