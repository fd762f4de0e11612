"""`vllm serve` on Bertha: the tiny Llama served over HTTP (`python -m vllm_legato serve`, vLLM's
own OpenAI-compatible server with the plugin; conftest.py's `served` fixture starts it on a free
port of 127.0.0.1, f32, with the offline f32 engine's settings), asked with the `openai`
client for completions (the 8 prompts of different lengths, concurrently) and chat completions
(the tiny tokenizer's chat template), greedy; the answers must be the offline
`LLM.generate` / `LLM.chat` ones on Bertha, token for token. Then the server is stopped
(SIGTERM): it must exit with status 0 and leave no process behind.

The tests run in file order: the last one stops the server.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request

import pytest
from conftest import DEFAULT_BUDGET

pytestmark = pytest.mark.vllm

MAX_TOKENS = 8  # python -m vllm_legato's default --max-tokens
READY_TIMEOUT = 900  # seconds for the server's engine start-up (compiles the forward)


def _offline(served, batch):
    runs = served["bertha-llama"]["runs"]
    return {(r["dtype"], r["batch"]): r for r in runs}[("float32", batch)]


@pytest.fixture(scope="module")
def server(served):
    """The running server, once it answers /health (fails with its log if it died)."""
    srv = served["server"]
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        if srv.proc.poll() is not None:
            pytest.fail(f"the server exited ({srv.proc.returncode}):\n{srv.text()[-6000:]}")
        try:
            with urllib.request.urlopen(srv.url.removesuffix("/v1") + "/health", timeout=5) as r:
                if r.status == 200:
                    return srv
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"the server did not start in {READY_TIMEOUT} s:\n{srv.text()[-6000:]}")
        time.sleep(1)


def _client(srv, cls=None):
    import openai

    return (cls or openai.OpenAI)(base_url=srv.url, api_key="unused", timeout=600, max_retries=0)


def _token_ids(choice) -> list[int]:
    """The generated token ids of a choice: vLLM returns them as logprob tokens 'token_id:N'
    with return_tokens_as_token_ids, or (as here) in the choice's `token_ids` extension."""
    ids = getattr(choice, "token_ids", None)
    if ids is None:
        ids = (choice.model_extra or {}).get("token_ids")
    return list(ids) if ids is not None else None


GREEDY = {"temperature": 0.0, "max_tokens": MAX_TOKENS, "seed": 0}
# vLLM's extensions of the OpenAI request (`extra_body`): as python -m vllm_legato's
# SamplingParams (ignore_eos), and the generated token ids in the answer
EXTRA = {"ignore_eos": True, "return_token_ids": True}


def test_models_endpoint(server):
    models = _client(server).models.list()
    assert [m.id for m in models.data] == ["tiny-llama"]


def test_completions_match_offline_generate(served, server):
    """The 8 prompts of different lengths as 8 concurrent requests (AsyncOpenAI): each answer's
    tokens and text are those of the offline `LLM.generate` of the same prompt on Bertha."""
    import openai

    offline = _offline(served, 8)

    async def ask_all():
        client = _client(server, openai.AsyncOpenAI)
        async with client:
            return await asyncio.gather(
                *(
                    client.completions.create(
                        model="tiny-llama", prompt=p, **GREEDY, extra_body=EXTRA
                    )
                    for p in offline["prompts"]
                )
            )

    answers = asyncio.run(ask_all())
    for prompt, ids, text, ans in zip(
        offline["prompts"], offline["outputs"], offline["text"], answers
    ):
        (choice,) = ans.choices
        assert _token_ids(choice) == ids, (prompt, choice)
        assert choice.text == text, prompt
        assert choice.finish_reason == "length"
        assert ans.usage.completion_tokens == MAX_TOKENS


def test_chat_matches_offline_chat(served, server):
    """Chat completions (the tiny tokenizer's chat template, vllm_legato.tiny_llama) of the two
    conversations, one after the other: the offline `LLM.chat` answers on Bertha."""
    offline = _offline(served, "chat")
    client = _client(server)
    for messages, ids, text in zip(offline["prompts"], offline["outputs"], offline["text"]):
        ans = client.chat.completions.create(
            model="tiny-llama", messages=messages, **GREEDY, extra_body=EXTRA
        )
        (choice,) = ans.choices
        assert choice.message.role == "assistant"
        assert _token_ids(choice) == ids, (messages, choice)
        assert choice.message.content == text, messages


def test_server_ran_on_bertha(served, server):
    """The server's engine is the Bertha platform's: the plugin's report (written by the
    engine-core process) has the LEGATO_ATTN backend, the same token budget as the offline f32
    engine, and Legato kernels in every served step."""
    import vllm_legato

    rep = vllm_legato.load_report(server.report)
    assert rep.device == "bertha" and rep.attention_backend == "LEGATO_ATTN", str(rep)
    offline = vllm_legato.report.Report.from_json(_offline(served, "chat")["report"])
    assert {g.bound for g in rep.graphs} == {g.bound for g in offline.graphs} == {DEFAULT_BUDGET}
    steps = [s for s in rep.steps if s.requests]
    assert steps and all(s.attn_cycles > 0 and s.cycles > 0 for s in steps)


def test_server_shuts_down_cleanly(server):
    """SIGTERM: the server (API process, engine core and its helpers) exits with status 0 and
    no process of its group is left."""
    rc = server.stop()
    assert rc == 0, f"exit status {rc}:\n{server.text()[-6000:]}"
    deadline = time.monotonic() + 30
    while server.leftover() and time.monotonic() < deadline:
        time.sleep(0.5)  # children reaped after the parent's exit
    assert not server.leftover(), server.leftover()
    assert "Traceback" not in server.text(), server.text()[-6000:]
