"""Glue applied in every vLLM process while the Bertha platform is selected (and only then):
loaded through the entry point group `vllm.general_plugins` (`vllm_legato:register_general`).

Linear layers: on the CPU platform vLLM replaces a linear layer's matmul by an opaque CPU kernel
(oneDNN `onednn_mm` or sgl `weight_packed_linear`, with the weight pre-packed and the original
removed), which Legato could only run extern. On Bertha a linear layer keeps its weight and
calls `torch.nn.functional.linear`, so the forward graph has `aten.mm` / `aten.t` nodes that the
Legato library resolves (chip_linear on every core, or single-core) or runs extern. The LM head
(`compute_logits`, outside the compiled forward) runs through Legato too
(`vllm_legato.lm_head`).

SiluAndMul and the rotary embedding: the plugin's layers (`vllm_legato.ops`), whose forward
runs a Legato kernel through a torch custom op. Once the model is built (vLLM's model loader,
wrapped here), a rotary embedding whose every user hands its q and k straight to a LEGATO_ATTN
attention layer (Llama, Qwen2: `q, k = self.rotary_emb(...)`, then `self.attn(q, k, v)`) is
folded into that layer's attention kernels (`ops.fold_rotary`): the rotary's own op no longer
runs. A token embedding whose lookup the graph's resolver cannot hold at the token bound
(Llama-7B at 1024 tokens) runs through the plugin's all-core `vllm_legato::embedding`
(`ops.route_embeddings`).
"""

from __future__ import annotations

import logging

log = logging.getLogger("vllm_legato")
_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    import torch
    from vllm.model_executor.layers import utils as layer_utils
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    from vllm_legato.lm_head import LegatoLMHead

    original = layer_utils.dispatch_cpu_unquantized_gemm

    def dispatch_cpu_unquantized_gemm(layer, remove_weight: bool) -> None:
        from vllm.model_executor.layers.linear import LinearBase

        if isinstance(layer, LinearBase) and layer.weight.ndim == 2:
            from vllm_legato.ops import use_legato_linear

            if use_legato_linear(layer):
                return
            layer.cpu_linear = torch.nn.functional.linear
            return
        if isinstance(layer, VocabParallelEmbedding) and layer.weight.ndim == 2:
            # the LM head's matmul (compute_logits; the embedding itself reads the weight)
            layer.cpu_linear = LegatoLMHead()
            return
        original(layer, remove_weight)

    dispatch_cpu_unquantized_gemm.__wrapped__ = original

    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    lookup = UnquantizedEmbeddingMethod.embedding

    def embedding(self, layer, input_):
        # vllm_legato.ops.route_embeddings decided per layer, once the model was built: a
        # lookup the graph's resolver cannot hold at the token bound runs on every core
        if getattr(layer, "legato_embedding", False):
            return torch.ops.vllm_legato.embedding(input_, layer.weight)
        return lookup(self, layer, input_)

    embedding.__wrapped__ = lookup
    UnquantizedEmbeddingMethod.embedding = embedding
    layer_utils.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm
    log.debug("vllm_legato: linear layers use torch.nn.functional.linear (Legato mm)")

    from vllm.model_executor.model_loader.base_loader import BaseModelLoader

    from vllm_legato.ops import ROUTED, fold_rotary, register_layers, route_embeddings

    register_layers()

    load_model = BaseModelLoader.load_model

    def load_model_folding_rotary(self, *args, **kwargs):
        model = load_model(self, *args, **kwargs)
        folded = fold_rotary(model)
        if folded:
            log.info("vllm_legato: rotary embedding folded into %d attention layer(s)", folded)
        if route_embeddings(model):
            log.info("vllm_legato: token embedding through vllm_legato::embedding (%s)", ROUTED)
        return model

    load_model_folding_rotary.__wrapped__ = load_model
    BaseModelLoader.load_model = load_model_folding_rotary
