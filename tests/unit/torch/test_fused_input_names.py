"""Kernel inputs produced by another partition: `fuse_partitions` names a submodule's
placeholders after the nodes feeding it when it is fused, which for an input produced by an
earlier-fused partition is that partition's `getitem`, not the node the kernel was generated
for. A tiny HF Llama whose SDPA is an all-core kernel while its KV `cat`s stay in the single-core
kernels around it (partitions that interleave in graph order) used to fail to build with
`ValueError: 'mul_6' is not in list`; the wrapper now traces each placeholder back to the
original node (`wrapper._original_names`)."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import legato.torch as lt
import legato.torch.library.chip_attention as ca
from legato.torch import registry


def test_tiny_llama_with_chip_sdpa_and_single_core_cats_matches_eager(monkeypatch):
    registry.load_libraries()
    monkeypatch.setattr(ca, "CHIP_MIN_BYTES", 0)  # every SDPA all-core, however small
    registry.unregister(torch.ops.aten.cat.default, ca.resolve_chip_cat)
    try:
        torch.manual_seed(0)
        config = LlamaConfig(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=128,
            max_position_embeddings=128,
        )
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
        ids = torch.randint(0, 128, (1, 8))
        with torch.no_grad():
            eager = model.generate(ids, max_new_tokens=3, do_sample=False)
            torch._dynamo.reset()
            before = len(lt.summaries())
            model.forward = torch.compile(model.forward, backend="legato")
            tokens = model.generate(ids, max_new_tokens=3, do_sample=False)
        assert torch.equal(tokens, eager)
        summary = "\n".join(str(s) for s in lt.summaries()[before:])
        assert "-> chip attention" in summary, summary
    finally:
        registry.register(torch.ops.aten.cat.default, ca.resolve_chip_cat)
        torch._dynamo.reset()
