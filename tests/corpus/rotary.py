"""vLLM's neox rotary embedding written in torch: the reference the rotary kernels are checked against.

Used by the paged-attention and plugin corpus entries and by tests/unit/torch/test_paged_attention.py.
"""

from __future__ import annotations

import torch


def cos_sin_cache(positions: int, rot: int) -> torch.Tensor:
    """vLLM's `RotaryEmbedding` cache [positions, rot] in f32: the cos half, then the sin half (base 10000)."""
    inv = 1.0 / (10000 ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot))
    f = torch.outer(torch.arange(positions, dtype=torch.float32), inv)
    return torch.cat((f.cos(), f.sin()), 1)


def rotate(x: torch.Tensor, pos, cache: torch.Tensor, rot: int) -> torch.Tensor:
    """vLLM's neox rotary (`RotaryEmbedding.forward_static`) of x [T, H, D] at positions pos [T], in x's dtype.

    Only the first `rot` dims of each head turn; the rest are kept.
    """
    cos, sin = cache[torch.as_tensor(pos)].chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    x1, x2 = x[..., : rot // 2], x[..., rot // 2 : rot]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., rot:]), -1)
