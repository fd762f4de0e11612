"""A small causal self-attention block written in plain NumPy, run on the emulated Bertha with
`legato.numpy.jit`.

Run: .venv/bin/python examples/numpy_attention.py

Prints the largest difference from NumPy's own result and the placement report: which NumPy
calls ran as Legato kernels (and which ATen ops they became), which ran on NumPy and why.
"""

import math

import numpy as np

import legato.numpy as lnp
from legato.model import bertha

S, H, D = 16, 2, 32  # tokens, heads, head size
CAUSAL = np.triu(np.full((S, S), -1e9, dtype=np.float32), 1)


def block(x, g, wq, wk, wv, wo):
    """LayerNorm -> causal multi-head attention -> output projection -> residual."""
    mu = x.mean(axis=-1, keepdims=True)
    h = (x - mu) / np.sqrt(np.var(x, axis=-1, keepdims=True) + 1e-5) * g

    def heads(t):  # [S, H*D] -> [H, S, D]
        return t.reshape(S, H, D).transpose(1, 0, 2)

    q, k, v = heads(h @ wq), heads(h @ wk), heads(h @ wv)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(D) + CAUSAL
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    o = (p @ v).transpose(1, 0, 2).reshape(S, H * D)
    out = x + o @ wo
    # no Legato translation (a running sum): this call runs on NumPy, between the kernels
    return out, np.cumsum(out, axis=0)


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((S, H * D), dtype=np.float32)
    g = np.ones(H * D, dtype=np.float32)
    ws = [rng.standard_normal((H * D, H * D), dtype=np.float32) * 0.1 for _ in range(4)]
    on_bertha = lnp.jit(block, device="bertha")
    out, running = on_bertha(x, g, *ws)
    ref, ref_running = block(x, g, *ws)
    print(
        f"max |legato - numpy| = {np.abs(out - ref).max():.3g} (block), "
        f"{np.abs(running - ref_running).max():.3g} (cumsum)"
    )
    report = lnp.last_report()
    cycles = report.last_cycles
    print(f"simulated: {cycles} cycles = {cycles / bertha.evt0().clock_ghz / 1000:.2f} us")
    print(report)


if __name__ == "__main__":
    main()
