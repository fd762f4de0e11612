"""torch in eager mode on the `lpu` device: tensors and a module moved there with `.to("lpu")`,
every op a Legato kernel on the emulated Bertha (compiled once per op and shape, cached).

Run: .venv/bin/python examples/lpu_eager.py

Prints the largest difference from the same module on the CPU, what ran where (the ops that
ran as Legato kernels, the one that fell back to the CPU with its one-time warning, the
simulated cycles) and the bytes copied between host and device memory: the tensors stay in the
device's emulated DRAM between ops, so only `.to("lpu")`, `.cpu()` and the fallback copy.
"""

import warnings

import torch

import legato.lpu

BF16 = torch.bfloat16


class Block(torch.nn.Module):
    """LayerNorm -> Linear -> GELU -> Linear -> softmax, and a causal mask made with tril."""

    def __init__(self, d=64, ff=128):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d, dtype=BF16)
        self.up = torch.nn.Linear(d, ff, dtype=BF16)
        self.down = torch.nn.Linear(ff, d, dtype=BF16)

    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        scores = h @ h.transpose(-1, -2)
        # tril has no Legato implementation: it runs on the CPU (a warning, once)
        mask = torch.tril(torch.ones_like(scores))
        return torch.softmax(scores.masked_fill(mask == 0, float("-inf")), dim=-1)


def main() -> None:
    warnings.simplefilter("always")  # show the fallback warning even when run twice
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(16, 64, dtype=BF16)
    with torch.no_grad():
        ref = model(x)
        lpu_model = model.to("lpu")  # parameters now live on the lpu device
        for step in range(2):  # the second pass reuses every compiled kernel
            y = lpu_model(x.to("lpu"))
            print(
                f"pass {step}: output on {y.device}, max |lpu - cpu| = "
                f"{(y.cpu().float() - ref.float()).abs().max().item():.3g}"
            )
    print(legato.lpu.stats())
    print(legato.lpu.transfers())


if __name__ == "__main__":
    main()
