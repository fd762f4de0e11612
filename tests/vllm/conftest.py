"""vLLM tests: run in .venv-vllm (`bash scripts/test_vllm.sh`); skipped where vllm is missing.

The `served` fixture (session scope, shared by every test file here) starts every vLLM process
the tests need side by side, since engine start-ups are slow: `python -m vllm_legato --batch8
--logprobs 2 --chat` on stock vLLM (one process, both tiny models) and per tiny model (Llama,
Qwen2) on Bertha (each model served in bf16 then f32, each engine the single request, the 8 and
the chat), one more on Bertha serving both models in bf16 at vLLM's default budget (the single
request and the 8: test_vllm_default_budget.py), the lowered-budget pair
(test_vllm_lowered.py), a `python -m vllm_legato serve` HTTP server of the tiny Llama on Bertha, f32, with
the offline f32 engine's settings (test_vllm_serve.py talks to it with the `openai` client),
and a small `python -m vllm_legato --bench` (the tiny Llama only, f32; test_vllm_bench.py). The
Bertha Llama's f32 engine, the server and the bench compile the same forward graph: the Legato
kernel cache (on disk, a lock per kernel) compiles each of its kernels once for the three.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

MODELS = ("llama", "qwen2")
DTYPES = ("bfloat16", "float32")
# token budget per step (max_num_batched_tokens), per dtype: bf16 at 40, fewer than the 8
# prompts' 86 tokens (chunked prefill), f32 at vLLM's default (0: not given)
BUDGETS = {"bfloat16": 40, "float32": 0}
# vLLM's default budget on the CPU platform, for the offline LLM class and the server alike
# (vllm/engine/arg_utils.py): the server gets it explicitly, and test_vllm_serve checks both
# engines' graphs are bounded by the same budget
DEFAULT_BUDGET = 1024
# the lowered-budget engines (test_vllm_lowered.py): 24 tokens per step, 5 KV blocks of 32
# tokens (160 tokens of KV cache for 8 requests of up to 20 + 24 tokens)
LOWERED_BUDGET = 24
LOWERED_KV_BLOCKS = 5
LOWERED_BLOCK_SIZE = 32
LOWERED_MAX_TOKENS = 24
TIMEOUT = int(os.environ.get("LEGATO_VLLM_TEST_TIMEOUT", "1500"))
KV_CACHE_MIB = 64  # python -m vllm_legato's default --kv-cache-mib
MAX_MODEL_LEN = 128  # python -m vllm_legato's default --max-model-len


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `python -m vllm_legato serve` process (its own session: its children share its
    process group)."""

    def __init__(self, model, root, port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self.report = root / "serve-report.json"
        self.log_path = root / "serve.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 -- closed by stop()
        cmd = [
            sys.executable,
            "-m",
            "vllm_legato",
            "serve",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--served-model-name",
            "tiny-llama",
            "--dtype",
            "float32",
            "--max-model-len",
            str(MAX_MODEL_LEN),
            "--max-num-batched-tokens",
            str(DEFAULT_BUDGET),
            "--max-num-seqs",
            "8",
            "--seed",
            "0",
            "--no-enable-prefix-caching",
            "--gpu-memory-utilization",
            "0.2",
            "--kv-cache-memory-bytes",
            str(KV_CACHE_MIB << 20),
        ]
        # the server's own multiprocessing (API server + engine core process), as users run it
        env = vllm_env(LEGATO_VLLM="1", LEGATO_VLLM_REPORT=str(self.report))
        env.pop("VLLM_ENABLE_V1_MULTIPROCESSING")
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.returncode = None

    def text(self) -> str:
        return self.log_path.read_text()

    def stop(self, timeout: float = 120) -> int | str:
        """SIGTERM (a user's Ctrl-C / a service manager's stop) and wait; its exit status, or
        "timeout" (then killed with its process group)."""
        if self.returncode is None:
            if self.proc.poll() is None:
                self.proc.terminate()
            try:
                self.returncode = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
                self.returncode = "timeout"
            self.log.close()
        return self.returncode

    def leftover(self) -> list[str]:
        """Processes still in the server's process group (its children), as `pid cmdline`."""
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if os.getpgid(int(pid)) != self.proc.pid:
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except (ProcessLookupError, FileNotFoundError, PermissionError):
                continue
            out.append(f"{pid} {cmd[:200]}")
        return out


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    from vllm_legato.tiny_llama import make_tiny_llama, make_tiny_qwen2

    root = tmp_path_factory.mktemp("vllm")
    models = {
        "llama": make_tiny_llama(root / "tiny-llama", dtype="bfloat16"),
        "qwen2": make_tiny_qwen2(root / "tiny-qwen2", dtype="bfloat16"),
    }
    server = Server(models["llama"], root, free_port())
    dtypes = [a for d in DTYPES for a in ("--dtype", d)]
    dtypes += [a for d in DTYPES for a in ("--max-num-batched-tokens", str(BUDGETS[d]))]
    procs = {}

    def start(name, cmd, out, **extra):
        log = open(root / f"{name}.log", "w")  # noqa: SIM115 -- closed after the wait
        proc = subprocess.Popen(cmd, env=vllm_env(**extra), stdout=log, stderr=subprocess.STDOUT)
        procs[name] = (proc, out, log)

    serve = [sys.executable, "-m", "vllm_legato", "--json"]
    flags = ["--batch8", "--chat", "--logprobs", "2", *dtypes]
    # stock vLLM: one process serves both models (4 engines one after the other; no
    # compilation, so they are quick, and one process start-up fewer)
    stock = [a for m in MODELS for a in ("--model", str(models[m]))]
    start(
        "stock",
        [*serve, str(root / "stock.json"), *stock, *flags, "--enforce-eager"],
        root / "stock.json",
    )
    for model in MODELS:
        name = f"bertha-{model}"
        start(
            name,
            [*serve, str(root / f"{name}.json"), "--model", str(models[model]), *flags],
            root / f"{name}.json",
            LEGATO_VLLM="1",
            LEGATO_VLLM_REPORT_DIR=str(root / f"reports-{name}"),
        )
    # a lowered token budget (the platform's $LEGATO_VLLM_TOKEN_CAP; stock: the same budget
    # asked for) and a KV cache of LOWERED_KV_BLOCKS blocks, too few for the 8 requests at
    # once, f32 (token-identical): test_vllm_lowered.py
    for name, extra, env in (
        ("stock-lowered", ["--max-num-batched-tokens", str(LOWERED_BUDGET), "--enforce-eager"], {}),
        (
            "bertha-lowered",
            [],
            dict(
                LEGATO_VLLM="1",
                LEGATO_VLLM_TOKEN_CAP=str(LOWERED_BUDGET),
                LEGATO_VLLM_REPORT_DIR=str(root / "reports-bertha-lowered"),
            ),
        ),
    ):
        out = root / f"{name}.json"
        cmd = [*serve, str(out), "--model", str(models["llama"]), "--batch8", "--dtype", "float32"]
        cmd += ["--max-tokens", str(LOWERED_MAX_TOKENS), "--kv-blocks", str(LOWERED_KV_BLOCKS)]
        cmd += ["--block-size", str(LOWERED_BLOCK_SIZE), *extra]
        start(name, cmd, out, **env)
    # bf16 at vLLM's default budget (DEFAULT_BUDGET), both models, the single request and
    # the 8 (prefilled in one step): test_vllm_default_budget.py, against the stock engines
    start(
        "bertha-default",
        [
            *serve,
            str(root / "bertha-default.json"),
            *stock,
            "--batch8",
            "--logprobs",
            "2",
            "--dtype",
            "bfloat16",
        ],
        root / "bertha-default.json",
        LEGATO_VLLM="1",
        LEGATO_VLLM_REPORT_DIR=str(root / "reports-bertha-default"),
    )
    # the bench in f32 at vLLM's default budget: the forward graph of the Bertha Llama's f32
    # engine and of the server, so that the three processes compile its kernels once (the
    # Legato cache's per-kernel lock: the others wait and load them)
    bench = root / "bench.json"
    cmd = [sys.executable, "-m", "vllm_legato", "--bench", "--bench-models", "tiny-llama"]
    cmd += ["--dtype", "float32", "--max-tokens", "4", "--json", str(bench)]
    start("bench", cmd, bench, LEGATO_VLLM="1")
    results = {"server": server, "models": models}
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
        stock = results.pop("stock")
        for model in MODELS:
            runs = [r for r in stock["runs"] if r["model"] == models[model].name]
            results[f"stock-{model}"] = dict(stock, runs=runs)
        yield results
    finally:
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
        server.stop(timeout=30)
