"""A plain torch MLP block compiled with `torch.compile(backend="legato")`.

Run: .venv/bin/python examples/torch_mlp.py

Prints the placement summary (which ATen nodes run as Legato kernels on the emulated Bertha,
which run eagerly and why) and the simulated time per token for a batch of decode tokens.
"""

import logging

import torch
import torch.nn.functional as F

import legato.torch as lt
from legato.model import bertha

BF16 = torch.bfloat16


class MLPBlock(torch.nn.Module):
    """RMSNorm -> Linear(256->128) -> SiLU -> Linear(128->128) -> residual-free softmax head."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.Parameter(torch.ones(256, dtype=BF16))
        self.up = torch.nn.Linear(256, 128, dtype=BF16)
        self.down = torch.nn.Linear(128, 128, bias=False, dtype=BF16)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm
        h = F.silu(self.up(h))
        return torch.softmax(self.down(h), dim=-1)


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    torch.manual_seed(0)
    model = MLPBlock().eval()
    compiled = torch.compile(model, backend="legato", options={"legato.device": "bertha"})
    for tokens in (16, 5):
        x = torch.randn(tokens, 256, dtype=BF16)
        lt.mark_dynamic(x, 0, max=64)  # the seed's mark_dynamic(x, 0, max=...) that works
        with torch.no_grad():
            y = compiled(x)
            ref = model(x)
        s = lt.last_summary()
        cycles = s.last_cycles
        model_ghz = bertha.evt0().clock_ghz
        print(
            f"--- {tokens} tokens: max |legato - eager| = "
            f"{(y.float() - ref.float()).abs().max().item():.3g}"
        )
        print(
            f"simulated: {cycles} cycles for the graph = {cycles / model_ghz / 1000:.2f} us, "
            f"{cycles / tokens:.0f} cycles/token ({cycles / tokens / model_ghz / 1000:.3f} "
            "us/token)"
        )
    print(s)


if __name__ == "__main__":
    main()
