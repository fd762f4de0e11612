"""Tiny Llama- and Qwen2-style models with random weights, written locally in HF format (no
downloads).

`make_tiny_llama(path, dtype="bfloat16")` (and `make_tiny_qwen2`, the same sizes with Qwen2's
q/k/v biases and its config) writes config.json, model.safetensors, a word-level tokenizer
(tokenizer.json + tokenizer_config.json, with a chat template: `CHAT_TEMPLATE`) and
generation_config.json: enough for `vllm.LLM(model=path)`, `vllm serve` (completions and chat)
and transformers. Used by tests/vllm and the plugin's README.

Sizes fit one Bertha core: hidden 64, 2 heads of 32 (1 KV head: grouped-query attention, the
CPU attention kernels want head_size >= 32), MLP 128, 2 layers, vocabulary 256.
"""

from __future__ import annotations

import json
from pathlib import Path

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "bertha",
    "runs",
    "fast",
    "slow",
    "legato",
    "kernel",
    "tensor",
    "core",
    "chip",
]


# The chat template of the tiny tokenizer (Jinja, as HF's `chat_template`): every message as
# "<role word> <content>", then "bertha" as the assistant's turn. The roles map onto words of the
# vocabulary (the word-level tokenizer maps anything else to <unk>).
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}core {% elif m['role'] == 'user' %}the "
    "{% else %}bertha {% endif %}{{ m['content'] }} "
    "{% endfor %}"
    "{% if add_generation_prompt %}bertha{% endif %}"
)
ARCHS = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}


QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN2_VOCAB = 320  # 256 byte-level symbols, then the specials and fillers


def make_tiny_qwen2(path, dtype: str = "bfloat16", seed: int = 0, **sizes) -> Path:
    """A tiny Qwen2 (`Qwen2ForCausalLM`: biases on q/k/v, RMSNorm eps 1e-6, rope theta 1e6)
    of make_tiny_llama's sizes, its weights drawn from `seed` + 1 (not the Llama's), with a
    byte-level BPE tokenizer (transformers loads a qwen2 model's tokenizer as Qwen2Tokenizer,
    whatever tokenizer_config.json names: it would drop every word of the word-level one). No
    merges: every byte is a token (vocabulary QWEN2_VOCAB: the 256 bytes, then the specials)."""
    sizes.setdefault("vocab", QWEN2_VOCAB)
    return make_tiny_llama(path, dtype, seed + 1, arch="qwen2", **sizes)


def make_tiny_llama(
    path,
    dtype: str = "bfloat16",
    seed: int = 0,
    *,
    arch: str = "llama",
    hidden: int = 64,
    heads: int = 2,
    kv_heads: int = 1,
    intermediate: int = 128,
    layers: int = 2,
    vocab: int = 256,
    max_pos: int = 256,
    init_scale: float = 0.5,
) -> Path:
    import torch
    from safetensors.torch import save_file

    if arch not in ARCHS:
        raise ValueError(f"make_tiny_llama: arch {arch!r}: expected one of {sorted(ARCHS)}")
    qwen2 = arch == "qwen2"
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    head_dim = hidden // heads
    config = {
        "architectures": [ARCHS[arch]],
        "model_type": arch,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": max_pos,
        "rms_norm_eps": 1e-6 if qwen2 else 1e-5,
        "rope_theta": 1000000.0 if qwen2 else 10000.0,
        "rope_scaling": None,
        **(
            {"use_sliding_window": False, "sliding_window": None, "max_window_layers": layers}
            if qwen2
            else {"attention_bias": False, "mlp_bias": False}
        ),
        "tie_word_embeddings": False,
        "vocab_size": vocab,
        **(
            {"bos_token_id": None, "eos_token_id": 256, "pad_token_id": 256}
            if qwen2
            else {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
        ),
        "torch_dtype": dtype,
        "dtype": dtype,
    }
    (path / "config.json").write_text(json.dumps(config, indent=2))
    gen = {k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    (path / "generation_config.json").write_text(json.dumps(gen))

    g = torch.Generator().manual_seed(seed)
    tdt = getattr(torch, dtype)

    def rnd(*shape, scale=None):
        fan_in = shape[-1]
        s = init_scale / fan_in**0.5 if scale is None else scale
        return (torch.randn(*shape, generator=g) * s).to(tdt).contiguous()

    w = {
        "model.embed_tokens.weight": rnd(vocab, hidden, scale=1.0),
        "model.norm.weight": (1 + 0.1 * torch.randn(hidden, generator=g)).to(tdt),
        "lm_head.weight": rnd(vocab, hidden, scale=1.0),
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = rnd(heads * head_dim, hidden)
        w[p + "self_attn.k_proj.weight"] = rnd(kv_heads * head_dim, hidden)
        w[p + "self_attn.v_proj.weight"] = rnd(kv_heads * head_dim, hidden)
        if qwen2:  # Qwen2's q/k/v projections have biases
            for n, rows in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
                w[p + f"self_attn.{n}_proj.bias"] = rnd(rows * head_dim, scale=0.1)
        w[p + "self_attn.o_proj.weight"] = rnd(hidden, heads * head_dim)
        w[p + "mlp.gate_proj.weight"] = rnd(intermediate, hidden)
        w[p + "mlp.up_proj.weight"] = rnd(intermediate, hidden)
        w[p + "mlp.down_proj.weight"] = rnd(hidden, intermediate)
        for n in ("input_layernorm", "post_attention_layernorm"):
            w[p + n + ".weight"] = (1 + 0.1 * torch.randn(hidden, generator=g)).to(tdt)
    save_file(w, str(path / "model.safetensors"), metadata={"format": "pt"})
    (_write_byte_tokenizer if qwen2 else _write_tokenizer)(path, vocab)
    return path


def _write_byte_tokenizer(path: Path, vocab: int) -> None:
    """Qwen2's kind of tokenizer (byte-level BPE, GPT-2's byte-to-symbol map) with no merges:
    ids 0..255 the bytes, then QWEN2_SPECIALS and fillers up to `vocab`."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    symbols = pre_tokenizers.ByteLevel.alphabet()
    # GPT-2's order: the printable bytes map to themselves, the rest to 256 + n
    byte_map = {}
    n = 0
    for b in range(256):
        c = chr(b)
        if c in symbols and (33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255):
            byte_map[c] = b
        else:
            byte_map[chr(256 + n)] = b
            n += 1
    assert set(byte_map) == set(symbols), "byte-level alphabet"
    tok = Tokenizer(models.BPE(vocab=byte_map, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    specials = QWEN2_SPECIALS + [f"<|extra_{i}|>" for i in range(vocab - 256 - len(QWEN2_SPECIALS))]
    tok.add_special_tokens([AddedToken(t, special=True) for t in specials])
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "Qwen2Tokenizer",
                "bos_token": None,
                "eos_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
                "unk_token": None,
                "model_max_length": 256,
                "clean_up_tokenization_spaces": False,
                "chat_template": CHAT_TEMPLATE,
            }
        )
    )


def _write_tokenizer(path: Path, vocab: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    words = list(WORDS) + [f"w{i}" for i in range(vocab - len(specials) - len(WORDS))]
    vocab_map = {t: i for i, t in enumerate(specials + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab_map, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
                "model_max_length": 256,
                "add_bos_token": False,
                "clean_up_tokenization_spaces": False,
                "chat_template": CHAT_TEMPLATE,
            }
        )
    )
    (path / "special_tokens_map.json").write_text(
        json.dumps(
            {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
        )
    )
