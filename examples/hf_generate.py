"""A Hugging Face model generating text through Legato: a tiny Llama (random weights, built from
its config: no download; a byte-level vocabulary of the 128 ASCII characters) runs greedy
`generate()` with its DynamicCache under `torch.compile(backend="legato")`, and gives the
tokens eager gives. The README's PyTorch section shows this file's code from `import torch` to
the first `print` verbatim (tests/unit/torch/test_hf_zoo.py checks that and runs the file)."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import legato.torch

torch.manual_seed(0)
config = LlamaConfig(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=128,  # token i is the ASCII character chr(i)
    max_position_embeddings=128,
)
model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
ids = torch.tensor([list(b"Legato: ")])

with torch.no_grad():
    eager = model.generate(ids, max_new_tokens=8, do_sample=False)
    model.forward = torch.compile(model.forward, backend="legato")
    tokens = model.generate(ids, max_new_tokens=8, do_sample=False)

text = bytes(tokens[0].tolist()).decode("ascii")
print("generated:", repr(text), "| same as eager:", torch.equal(tokens, eager))

for s in legato.torch.summaries():
    print(
        f"{s.graph}: {s.num_kernels} Legato kernel(s), {s.node_share:.0%} of the nodes and "
        f"{s.matmul_flop_share:.0%} of the matmul FLOPs on Legato, "
        f"{sum(k.calls for k in s.kernels)} kernel call(s)"
    )
