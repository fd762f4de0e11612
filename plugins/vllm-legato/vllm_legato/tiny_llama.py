"""A tiny Llama-style model with random weights, written locally in HF format (no downloads).

`make_tiny_llama(path, dtype="bfloat16")` writes config.json, model.safetensors, a word-level
tokenizer (tokenizer.json + tokenizer_config.json) and generation_config.json: enough for
`vllm.LLM(model=path)` and for transformers. Used by tests/vllm and the plugin's README.

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


def make_tiny_llama(
    path,
    dtype: str = "bfloat16",
    seed: int = 0,
    *,
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

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    head_dim = hidden // heads
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": max_pos,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "vocab_size": vocab,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "torch_dtype": dtype,
        "dtype": dtype,
    }
    (path / "config.json").write_text(json.dumps(config, indent=2))
    (path / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0})
    )

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
        w[p + "self_attn.o_proj.weight"] = rnd(hidden, heads * head_dim)
        w[p + "mlp.gate_proj.weight"] = rnd(intermediate, hidden)
        w[p + "mlp.up_proj.weight"] = rnd(intermediate, hidden)
        w[p + "mlp.down_proj.weight"] = rnd(hidden, intermediate)
        for n in ("input_layernorm", "post_attention_layernorm"):
            w[p + n + ".weight"] = (1 + 0.1 * torch.randn(hidden, generator=g)).to(tdt)
    save_file(w, str(path / "model.safetensors"), metadata={"format": "pt"})
    _write_tokenizer(path, vocab)
    return path


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
            }
        )
    )
    (path / "special_tokens_map.json").write_text(
        json.dumps(
            {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
        )
    )
