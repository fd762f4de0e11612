"""The vllm-legato platform plugin: a tiny random Llama served with `vllm.LLM(...).generate`
on Bertha gives the same greedy tokens as stock vLLM on the CPU (bf16 and f32).

Engine start-ups are slow on 2 cores, so there are four in all (2 platforms x 2 dtypes), in two
processes run side by side (the platform is chosen once per process): `python -m vllm_legato`
with and without LEGATO_VLLM. Stock vLLM runs with `enforce_eager=True` (its CPU kernels, no
compilation); Bertha compiles the forward through Legato.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.vllm

DTYPES = ("bfloat16", "float32")
TIMEOUT = int(os.environ.get("LEGATO_VLLM_TEST_TIMEOUT", "900"))


def _env(**extra):
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


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from vllm_legato.tiny_llama import make_tiny_llama

    root = tmp_path_factory.mktemp("vllm")
    model = make_tiny_llama(root / "tiny-llama", dtype="bfloat16")
    dtypes = [a for d in DTYPES for a in ("--dtype", d)]
    procs = {}
    for name, extra, flags in (
        ("stock", {}, ["--enforce-eager"]),
        ("bertha", {"LEGATO_VLLM": "1", "LEGATO_VLLM_REPORT_DIR": str(root / "reports")}, []),
    ):
        out = root / f"{name}.json"
        log = open(root / f"{name}.log", "w")  # noqa: SIM115 -- closed after the wait
        cmd = [
            sys.executable,
            "-m",
            "vllm_legato",
            "--model",
            str(model),
            "--json",
            str(out),
            *dtypes,
            *flags,
        ]
        procs[name] = (
            subprocess.Popen(cmd, env=_env(**extra), stdout=log, stderr=subprocess.STDOUT),
            out,
            log,
        )
    results = {}
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
    return results


def test_platforms_selected(served):
    assert served["stock"]["platform"] == "CpuPlatform"
    assert served["bertha"]["platform"] == "BerthaPlatform"


@pytest.mark.parametrize("dtype", DTYPES)
def test_same_greedy_tokens_as_stock_vllm(served, dtype):
    stock = {r["dtype"]: r for r in served["stock"]["runs"]}[dtype]
    bertha = {r["dtype"]: r for r in served["bertha"]["runs"]}[dtype]
    assert all(len(o) == 8 for o in stock["outputs"])
    assert bertha["outputs"] == stock["outputs"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_report_what_ran_where(served, dtype):
    from vllm_legato.report import Report

    run = {r["dtype"]: r for r in served["bertha"]["runs"]}[dtype]
    rep = Report.from_json(run["report"])
    print(run["report_text"])
    assert rep.device == "bertha" and rep.clock_ghz == 1.0
    assert rep.graphs and rep.legato_kernels > 0, run["report_text"]
    # attention and the KV-cache update are vLLM ops (the cache lives in vLLM): extern
    assert rep.vllm_ops().get("vllm.unified_attention_with_output") == 2, rep.vllm_ops()
    assert "auto_functionalized_v2" in rep.extern_ops()
    decode = [s for s in rep.steps if s.decode]
    assert decode and all(s.cycles > 0 for s in decode)
    assert rep.cycles_per_token() > 0 and rep.us_per_token() > 0
    assert "simulated Legato time per generated token" in run["report_text"]
