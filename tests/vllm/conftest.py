"""vLLM tests: run in .venv-vllm (`bash scripts/test_vllm.sh`); skipped where vllm is missing.

The `served` fixture (session scope)
starts every vLLM process the tests need side by side, since engine start-ups are slow: per
tiny model (Llama, Qwen2) `python -m vllm_legato --batch8 --logprobs 2 --chat` on stock vLLM and
on Bertha (each serves bf16 then f32, each engine the single request, the 8 and the chat).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

MODELS = ("llama", "qwen2")
DTYPES = ("bfloat16", "float32")
# token budget per step (max_num_batched_tokens), per dtype: bf16 at 40, fewer than the 8
# prompts' 86 tokens (chunked prefill), f32 at vLLM's default (0: not given)
BUDGETS = {"bfloat16": 40, "float32": 0}
TIMEOUT = int(os.environ.get("LEGATO_VLLM_TEST_TIMEOUT", "1500"))
KV_CACHE_MIB = 64  # python -m vllm_legato's default --kv-cache-mib


def pytest_configure(config):
    config.addinivalue_line("markers", "vllm: starts vLLM engines (slow; .venv-vllm only)")


def pytest_collection_modifyitems(config, items):
    try:
        import vllm  # noqa: F401
        import vllm_legato  # noqa: F401
    except ImportError:
        skip = pytest.mark.skip(
            reason="vllm / vllm-legato not installed "
            "(bash scripts/bootstrap_vllm.sh; tests run in .venv-vllm)"
        )
        for item in items:
            if "vllm" in item.keywords:
                item.add_marker(skip)


def vllm_env(**extra):
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


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    from vllm_legato.tiny_llama import make_tiny_llama, make_tiny_qwen2

    root = tmp_path_factory.mktemp("vllm")
    models = {
        "llama": make_tiny_llama(root / "tiny-llama", dtype="bfloat16"),
        "qwen2": make_tiny_qwen2(root / "tiny-qwen2", dtype="bfloat16"),
    }
    dtypes = [a for d in DTYPES for a in ("--dtype", d)]
    dtypes += [a for d in DTYPES for a in ("--max-num-batched-tokens", str(BUDGETS[d]))]
    procs = {}
    for model in MODELS:
        for platform, extra, flags in (
            ("stock", {}, ["--enforce-eager"]),
            ("bertha", {"LEGATO_VLLM": "1"}, []),
        ):
            name = f"{platform}-{model}"
            extra = dict(extra, LEGATO_VLLM_REPORT_DIR=str(root / f"reports-{name}"))
            out = root / f"{name}.json"
            log = open(root / f"{name}.log", "w")  # noqa: SIM115 -- closed after the wait
            cmd = [
                sys.executable,
                "-m",
                "vllm_legato",
                "--model",
                str(models[model]),
                "--json",
                str(out),
                "--batch8",
                "--chat",
                "--logprobs",
                "2",
                *dtypes,
                *flags,
            ]
            env = vllm_env(**extra)
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
            procs[name] = (proc, out, log)
    results = {"models": models}
    try:
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
        yield results
    finally:
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
