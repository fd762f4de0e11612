"""`python -m vllm_legato`: serve a model with `vllm.LLM(...).generate(...)` and print the tokens
and (on Bertha) the Legato report.

    LEGATO_VLLM=1 python -m vllm_legato --tiny /tmp/tiny-llama           # Bertha EVT0
    LEGATO_VLLM=evt1 python -m vllm_legato --model PATH --dtype float32   # Bertha EVT1
    python -m vllm_legato --tiny /tmp/tiny-llama --enforce-eager          # stock vLLM (CPU)
    LEGATO_VLLM=1 python -m vllm_legato serve MODEL --port 8000 ...       # `vllm serve` (HTTP)

`--tiny DIR` first writes the tiny random Llama (vllm_legato.tiny_llama) to DIR, `--tiny-qwen2
DIR` the tiny Qwen2. `--json FILE` writes {"platform", "runs": [{"model", "dtype", "batch",
"outputs": [token ids per prompt], "text", "top", "report"}]}. Every model (`--model`,
`--tiny`, `--tiny-qwen2`, repeatable) is served in every `--dtype`, one engine after the other
in this process. `--chat` also sends CHAT_CONVERSATIONS through `LLM.chat` (run "batch":
"chat"), with the tokenizer's chat template.
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
# --chat: conversations for LLM.chat / the server's chat completions (the tiny tokenizer's
# template: vllm_legato.tiny_llama.CHAT_TEMPLATE)
CHAT_CONVERSATIONS = [
    [{"role": "user", "content": "the cat sat on the mat"}],
    [
        {"role": "system", "content": "fast chip"},
        {"role": "user", "content": "bertha runs a kernel"},
        {"role": "assistant", "content": "legato kernel"},
        {"role": "user", "content": "w7 w9 w11 core"},
    ],
]


def _top(lp_steps) -> list:
    """[[(token, value), ...] per step] of vLLM's logprobs (raw logits with
    logprobs_mode='raw_logits'), best first."""
    out = []
    for d in lp_steps or []:
        items = sorted(((int(t), float(v.logprob)) for t, v in d.items()), key=lambda x: -x[1])
        out.append(items)
    return out


def _init_amx() -> None:
    """vLLM's CPU attention kernels use AMX tiles without asking Linux for them (torch asks
    only when it runs a bf16 matmul itself): stock vLLM died of SIGILL when its first bf16 step
    was a one-token prompt's. Ask up front, on every platform (vllm_legato.compile does the same
    for Bertha's workers)."""
    import torch

    if hasattr(torch._C, "_cpu") and hasattr(torch._C._cpu, "_init_amx"):
        torch._C._cpu._init_amx()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serve"]:
        from vllm_legato.serve import main as serve

        return serve(argv[1:])
    p = argparse.ArgumentParser(
        prog="python -m vllm_legato",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", action="append", help="HF-format model directory; repeatable")
    p.add_argument("--tiny", metavar="DIR", help="write the tiny random Llama to DIR and serve it")
    p.add_argument(
        "--tiny-qwen2", metavar="DIR", help="write the tiny random Qwen2 to DIR and serve it"
    )
    p.add_argument("--chat", action="store_true", help="also serve CHAT_CONVERSATIONS (LLM.chat)")
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
        "--kv-blocks",
        type=int,
        default=0,
        help="the KV cache's size in blocks (vLLM's num_gpu_blocks_override; 0: from "
        "--kv-cache-mib): few blocks make requests wait for KV space and be preempted",
    )
    p.add_argument("--block-size", type=int, default=0, help="KV-cache block size (0: vLLM's)")
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
    p.add_argument(
        "--bench",
        action="store_true",
        help="print the simulated decode speed at batch 1 and 8 (vllm_legato.bench; Bertha)",
    )
    p.add_argument(
        "--bench-models",
        action="append",
        choices=["tiny-llama", "tiny-qwen2", "llama7b"],
        help="--bench: the models (repeatable; default all three)",
    )
    p.add_argument(
        "--bench-7b-layers",
        type=int,
        action="append",
        help="--bench: the layer counts of the Llama-7B-shaped models simulated (default 1 and "
        "2; both are needed for the 32-layer extrapolation)",
    )
    a = p.parse_args(argv)
    if a.bench:
        from vllm_legato import bench

        a.bench_7b_layers = a.bench_7b_layers or [1, 2]
        _init_amx()
        return bench.main(a)
    if not (a.model or a.tiny or a.tiny_qwen2):
        p.error("--model, --tiny or --tiny-qwen2 is required")

    from vllm_legato.tiny_llama import make_tiny_llama, make_tiny_qwen2

    models = list(a.model or [])
    if a.tiny:
        models.append(str(make_tiny_llama(a.tiny)))
    if a.tiny_qwen2:
        models.append(str(make_tiny_qwen2(a.tiny_qwen2)))
    report_dir = os.environ.get("LEGATO_VLLM_REPORT_DIR") or tempfile.mkdtemp(prefix="vllm-legato-")

    _init_amx()
    import vllm
    from vllm import LLM, SamplingParams
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
    engines = [(m, i, d) for m in models for i, d in enumerate(a.dtype or ["bfloat16"])]
    for model, i, dtype in engines:
        budgets = a.max_num_batched_tokens or [0]
        budget = budgets[min(i, len(budgets) - 1)]
        name = os.path.basename(os.path.normpath(model))
        # one report per engine: the worker (this or a child process) writes it there
        report_path = os.path.join(report_dir, f"report-{name}-{dtype}.json")
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
            **({"num_gpu_blocks_override": a.kv_blocks} if a.kv_blocks else {}),
            **({"block_size": a.block_size} if a.block_size else {}),
            **({"logprobs_mode": "raw_logits", "max_logprobs": a.logprobs} if a.logprobs else {}),
        )
        jobs = [(len(b), b, llm.generate) for b in batches]
        if a.chat:
            jobs.append(("chat", CHAT_CONVERSATIONS, llm.chat))
        for batch_name, batch, serve in jobs:
            outs = serve(batch, params, use_tqdm=False)
            run = {
                "model": name,
                "dtype": dtype,
                "batch": batch_name,
                "prompts": batch,
                "outputs": [list(o.outputs[0].token_ids) for o in outs],
                "text": [o.outputs[0].text for o in outs],
                "top": [_top(o.outputs[0].logprobs) for o in outs],
            }
            result["runs"].append(run)
            print(f"[{result['platform']} {name} {dtype}, {len(batch)} request(s)]")
            for prompt, ids, text in zip(batch, run["outputs"], run["text"]):
                print(f"  {prompt!r} -> {ids} {text!r}")
        del llm, outs, jobs, serve
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
