"""Hugging Face models through `torch.compile(backend="legato")` (issue 13): tiny configs (hidden
64, 2 layers, vocab 128), random seeded weights, no downloads, torch.compile's default dynamic
settings. `model(ids)` with its default arguments (KV cache on) matches eager; greedy
`generate()` gives eager's tokens (in bf16 up to a near-tie of eager's own logits) without a
recompile per token; the share of nodes and of
matmul FLOPs that ran on Legato is asserted per model (floors: what runs today, see
docs/torch.md for the gaps).

Every forward case runs by default; generation runs for a few models by default and for the
whole zoo with LEGATO_SLOW_TESTS=1 (each generation compiles three graphs)."""

import pytest
import torch
import transformers as T

import legato.torch as lt

BF16, F32 = torch.bfloat16, torch.float32
TINY = dict(vocab_size=128, max_position_embeddings=128)
LLAMA_LIKE = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention: 2 query heads per kv head
    **TINY,
)
# name -> (config class, model class, config arguments)
ZOO = {
    "llama": (T.LlamaConfig, T.LlamaForCausalLM, LLAMA_LIKE),
    "mistral": (T.MistralConfig, T.MistralForCausalLM, dict(LLAMA_LIKE, sliding_window=None)),
    "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, LLAMA_LIKE),
    "qwen3": (T.Qwen3Config, T.Qwen3ForCausalLM, dict(LLAMA_LIKE, head_dim=16)),
    "gemma": (T.GemmaConfig, T.GemmaForCausalLM, dict(LLAMA_LIKE, head_dim=16)),
    "gemma2": (
        T.Gemma2Config,
        T.Gemma2ForCausalLM,
        dict(LLAMA_LIKE, head_dim=16, sliding_window=64),
    ),
    "phi": (T.PhiConfig, T.PhiForCausalLM, LLAMA_LIKE),
    "phi3": (T.Phi3Config, T.Phi3ForCausalLM, dict(LLAMA_LIKE, pad_token_id=0)),
    "gpt2": (
        T.GPT2Config,
        T.GPT2LMHeadModel,
        dict(n_embd=64, n_layer=2, n_head=4, n_positions=128, vocab_size=128),
    ),
    "gpt_neox": (
        T.GPTNeoXConfig,
        T.GPTNeoXForCausalLM,
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
        | TINY,
    ),
    "opt": (
        T.OPTConfig,
        T.OPTForCausalLM,
        dict(hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4)
        | dict(word_embed_proj_dim=64, **TINY),
    ),
    "olmo2": (T.Olmo2Config, T.Olmo2ForCausalLM, LLAMA_LIKE),
    "stablelm": (T.StableLmConfig, T.StableLmForCausalLM, LLAMA_LIKE),
    "granite": (T.GraniteConfig, T.GraniteForCausalLM, LLAMA_LIKE),
    "bert": (
        T.BertConfig,
        T.BertModel,
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
        | TINY,
    ),
}
CAUSAL = [n for n in ZOO if n != "bert"]

# the share of model(ids)'s compute nodes that run on Legato, every model, bf16 and f32:
# measured 100% at 508f258 (docs/torch.md has the history: since the DynamicCache's empty
# tensors are dropped from their cats, composite.drop_empty_cat_operands, and a tied LM head's
# t(W) is prepared on the host once per parameter version, wrapper.PreparedOnce; before, bf16
# llama 97.7%, gpt2 / opt 94.5%, phi3 95.5%)
NODE_FLOOR = 1.0
# issue 13: at least 95% of the matmul and attention FLOPs on Legato (every model is at 100%)
MATMUL_FLOP_FLOOR = 0.95
# the node share of the dynamic decode graph (the third: a symbolic KV length), every model,
# bf16 and f32: measured 100% at 508f258 (DynamicCache). Before (1a611b9): gemma 99.4%, gpt2
# and opt 98.9% in bf16 (their tied LM head's t(W), now prepared once: wrapper.PreparedOnce),
# gemma2 98.7% (its sliding window's slices of the dynamic cache, now the cache itself:
# aten._whole_dim), phi3 97.7% (its empty `q[..., rotary_dim:]` slices, now dropped from their
# cat: composite.drop_empty_cat_operands).
DECODE_NODE_FLOOR = 1.0
# kernels of the dynamic decode graph, every model, bf16 and f32: one (session 18: the
# single-core work between the all-core KV-append attentions runs as core-0 phases of their
# chain, `wrapper._serial_phase`; before, 5 each). Gemma2: 3, its sliding-window layer slices
# the appended cache (a runtime length) after the attention, and a value of a dynamic shape does
# not cross a chain's phases.
DECODE_KERNELS = {"gemma2": 3}


def build(name, dtype):
    config_cls, model_cls, kwargs = ZOO[name]
    torch.manual_seed(0)
    model = model_cls(config_cls(**kwargs)).to(dtype).eval()
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1))
    return model, ids


def _output(out):
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def assert_matches_eager(actual, expected, dtype):
    """bf16: within two bf16 ulps of the largest logit; f32: 1e-4 relative to it."""
    a, e = actual.float(), expected.float()
    assert a.shape == e.shape
    scale = e.abs().max().item()
    rel = 2 * torch.finfo(BF16).eps if dtype == BF16 else 1e-4
    diff = (a - e).abs().max().item()
    assert diff <= rel * scale, f"max |diff| {diff:.3g} > {rel:.3g} * max |eager| {scale:.3g}"


# f32 forward cases that run by default (every bf16 one does); the rest with LEGATO_SLOW_TESTS=1
# ("mistral", "phi3", "qwen3": the slow sweep's capped sample that CI runs)
FAST_F32 = {"llama", "gemma", "gpt2", "opt", "bert", "mistral", "phi3", "qwen3"}
FORWARD_CASES = [
    pytest.param(
        n,
        dt,
        marks=() if dt == BF16 or n in FAST_F32 else pytest.mark.slow,
        id=f"{n}-{'bf16' if dt == BF16 else 'f32'}",
    )
    for n in ZOO
    for dt in (BF16, F32)
]


@pytest.mark.parametrize(("name", "dtype"), FORWARD_CASES)
def test_forward_matches_eager(name, dtype):
    model, ids = build(name, dtype)
    before = len(lt.summaries())
    with torch.no_grad():
        ref = model(ids)
        out = torch.compile(model, backend="legato")(ids)
    assert_matches_eager(_output(out), _output(ref), dtype)
    graphs = lt.summaries()[before:]
    assert len(graphs) == 1, [str(s) for s in graphs]
    s = graphs[0]
    assert all(k.calls == 1 and k.eager_calls == 0 for k in s.kernels), str(s)
    print(
        f"{name} {dtype}: nodes on Legato {s.node_share:.1%}, matmul FLOPs "
        f"{s.matmul_flop_share:.1%}, {s.num_kernels} kernel(s)"
    )
    assert s.node_share >= NODE_FLOOR, str(s)
    assert s.matmul_flop_share >= MATMUL_FLOP_FLOOR, str(s)
    # the int64/bool index and mask work (positions, masks: host index arithmetic) never
    # splits the partition: the whole prefill is one kernel (measured for every model and
    # dtype at aa10e09)
    assert s.num_kernels == 1, str(s)


# a second prompt length: the default dynamic settings make the length dynamic, a second
# graph whose slices, cats and transposes over that length the compiler does not lay out yet
# (docs/torch.md, known limits); they run eagerly, refused before compiling. Its matmuls and
# attention run on Legato (>= 95% of the matmul FLOPs, MATMUL_FLOP_FLOOR): the runtime-M
# projections too narrow for the column-split forms and too big for one core at the bound on
# rows over the cores (chip_linear.linear_row_chunks), the causal prefill over a runtime
# length in chip_attention.prefill_attention_dynamic. Measured (the min of bf16 and f32):
# every causal model 100% of the matmul FLOPs, BERT 95.5% (unchanged: its masked attention over the
# runtime length runs eagerly); before, f32 Llama 29%, GPT-2 7.5% (f32) / 45% (bf16), bf16
# Llama 96%. The node share floors are one point below the measured min of bf16 and f32 (the
# eager nodes: the rotary half-slices and their cat, the heads' transposes, the KV cats along
# the runtime length).
SECOND_LENGTH_NODE_FLOOR = {
    "llama": 0.87,  # 88.3% (f32) / 89.2% (bf16)
    "mistral": 0.87,
    "qwen2": 0.87,
    "qwen3": 0.88,  # 89.9% / 91.0%
    "gemma": 0.87,  # 88.8% / 89.8%
    "gemma2": 0.89,  # 90.6% / 91.9%
    "phi": 0.79,  # 80.0% / 80.4%
    "phi3": 0.87,  # 88.6% / 89.5%
    "gpt2": 0.92,  # 93.1% / 93.0%
    "gpt_neox": 0.72,  # 73.8% / 74.4%
    "opt": 0.89,  # 90.3% / 90.2%
    "olmo2": 0.88,  # 89.9% / 91.0%
    "stablelm": 0.78,  # 79.3% / 79.7%
    "granite": 0.87,  # 88.8% / 89.6%
    "bert": 0.93,  # 94.3% both
}
FAST_SECOND_LENGTH = {("llama", BF16), ("gpt2", F32), ("bert", BF16)}
SECOND_LENGTH_CASES = [
    pytest.param(
        n,
        dt,
        marks=() if (n, dt) in FAST_SECOND_LENGTH else pytest.mark.slow,
        id=f"{n}-{'bf16' if dt == BF16 else 'f32'}",
    )
    for n in ZOO
    for dt in (BF16, F32)
]


@pytest.mark.parametrize(("name", "dtype"), SECOND_LENGTH_CASES)
def test_a_second_prompt_length_matches_eager_and_no_kernel_fails(name, dtype):
    """Issue 13 item 1 on real models: under torch.compile's default dynamic shapes, a
    prompt of another length (a dynamic-length graph) matches eager, and no resolver accepted
    what the compiler then refused (no node ran eagerly because its kernel failed; strict mode
    compiles it)."""
    model, _ = build(name, dtype)
    g = torch.compile(model, backend="legato", options={"legato.strict": True})
    with torch.no_grad():
        for n in (8, 12, 5):
            ids = torch.randint(0, 128, (1, n), generator=torch.Generator().manual_seed(n))
            assert_matches_eager(_output(g(ids)), _output(model(ids)), dtype)
    s = lt.last_summary()
    assert len(lt.summaries()) >= 2 and s.num_kernels > 0, str(s)
    assert not any("kernel failed" in e.reason for e in s.extern), str(s)
    assert all(k.eager_calls == 0 for k in s.kernels), str(s)
    print(
        f"{name} {dtype} second length: nodes on Legato {s.node_share:.1%}, matmul FLOPs "
        f"{s.matmul_flop_share:.1%}, {s.num_kernels} kernel(s)"
    )
    assert s.matmul_flop_share >= MATMUL_FLOP_FLOOR, str(s)
    assert s.node_share >= SECOND_LENGTH_NODE_FLOOR[name], str(s)


def _generate(name, dtype, cache):
    model, ids = build(name, dtype)
    kwargs = dict(max_new_tokens=8, do_sample=False)
    if cache == "static":
        kwargs["cache_implementation"] = "static"
    eager_forward = model.forward
    with torch.no_grad():
        ref = model.generate(ids, **kwargs)
        model.forward = torch.compile(model.forward, backend="legato")
        before = len(lt.summaries())
        out = model.generate(ids, **kwargs)
        if not torch.equal(out, ref):
            _assert_diverged_at_a_tie(eager_forward, out, ref, dtype)
    graphs = lt.summaries()[before:]
    # prefill, the first decode step and one graph for every later length (dynamo makes the
    # length dynamic after the first change): never a graph per token
    assert 1 <= len(graphs) <= 3, [str(s) for s in graphs]
    # every graph, the dynamic decode step's too (its runtime-length KV cats and attention are
    # all-core kernels since issue 13's last step), keeps its matmul and attention FLOPs on
    # Legato and calls no kernel eagerly
    for s in graphs:
        assert s.matmul_flop_share >= MATMUL_FLOP_FLOOR, str(s)
        assert all(k.eager_calls == 0 for k in s.kernels), str(s)
    if cache == "dynamic" and len(graphs) == 3:
        assert graphs[2].node_share >= DECODE_NODE_FLOOR, str(graphs[2])
        assert graphs[2].num_kernels == DECODE_KERNELS.get(name, 1), str(graphs[2])
    return graphs


def _assert_diverged_at_a_tie(eager_forward, out, ref, dtype):
    """Greedy bf16 decoding of a random tiny model meets near-ties: where Legato's token first
    differs from eager's, eager's own logits (on the same prefix) must rate both within two bf16
    ulps of the largest logit, i.e. both are greedy choices up to bf16 rounding. f32: no ties."""
    assert out.shape == ref.shape and dtype == BF16, (out.tolist(), ref.tolist())
    i = int((out[0] != ref[0]).nonzero()[0])
    logits = eager_forward(input_ids=out[:, :i]).logits[0, -1].float()
    gap = (logits[ref[0, i]] - logits[out[0, i]]).abs().item()
    tol = 2 * torch.finfo(BF16).eps * logits.abs().max().item()
    assert gap <= tol, (
        f"token {i}: Legato chose {int(out[0, i])}, eager {int(ref[0, i])}, eager's logits "
        f"differ by {gap:.3g} > {tol:.3g}: {out.tolist()} vs {ref.tolist()}"
    )


# generation cases that run by default (~40 s each); the rest with LEGATO_SLOW_TESTS=1
# (llama, dynamic, bf16) runs by default as the README's example: test_the_readme_example)
# The rest of the set is the slow sweep's capped sample that CI runs (scripts/test.sh): one
# generation each of four more architectures, both caches and both dtypes among them.
FAST_GENERATE = {("llama", "static", F32), ("gpt2", "dynamic", BF16)}
FAST_GENERATE |= {
    ("qwen2", "dynamic", F32),
    ("gemma2", "static", BF16),
    ("opt", "dynamic", BF16),
    ("phi3", "static", F32),
    ("mistral", "static", BF16),
    ("qwen3", "dynamic", BF16),
    ("gpt_neox", "static", F32),
    ("granite", "dynamic", F32),
}
GENERATE_CASES = [
    pytest.param(
        n,
        c,
        dt,
        marks=() if (n, c, dt) in FAST_GENERATE else pytest.mark.slow,
        id=f"{n}-{c}-{'bf16' if dt == BF16 else 'f32'}",
    )
    for n in CAUSAL
    for c in ("dynamic", "static")
    for dt in (BF16, F32)
]


@pytest.mark.parametrize(("name", "cache", "dtype"), GENERATE_CASES)
def test_generate_matches_eager(name, cache, dtype):
    graphs = _generate(name, dtype, cache)
    assert sum(k.calls for s in graphs for k in s.kernels) > 0, [str(s) for s in graphs]


def _readme_python_blocks(readme: str, section: str) -> list[str]:
    """The ```python blocks of the README's `## <section>` (up to the next `## `)."""
    body = readme.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [b.split("\n```", 1)[0] for b in body.split("```python\n")[1:]]


def test_the_readme_example_generates_eagers_tokens(tmp_path):
    """The README's PyTorch section shows examples/hf_generate.py's code verbatim (a complete
    program, from its imports to the print of the generated text), and the file runs as
    written: eager's text, in at most 3 graphs."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    example = (root / "examples" / "hf_generate.py").read_text()
    blocks = _readme_python_blocks((root / "README.md").read_text(), "PyTorch")
    shown = [b for b in blocks if "generate(" in b]
    assert len(shown) == 1, blocks
    assert shown[0].startswith("import torch\n") and shown[0] + "\n" in example, shown[0]
    r = subprocess.run(
        [sys.executable, str(root / "examples" / "hf_generate.py")],
        cwd=tmp_path,
        env={**os.environ, "LEGATO_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "same as eager: True" in r.stdout, r.stdout
    assert "generated: 'Legato: " in r.stdout, r.stdout  # the prompt, then 8 characters
    graphs = [line for line in r.stdout.splitlines() if line.startswith("graph")]
    assert len(graphs) == 3, r.stdout  # prefill, first decode, every later decode step
    # the dynamic decode step's too: its runtime-length KV cats and attention are all-core
    assert all("100% of the matmul FLOPs" in g for g in graphs), r.stdout
