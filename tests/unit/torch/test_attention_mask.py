"""SDPA with an explicit `attn_mask` (as Hugging Face passes one) runs on Legato and matches
torch's `F.scaled_dot_product_attention`: a boolean mask (torch turns it into an additive 0 / -inf
mask before the CPU flash op) and an additive float mask, broadcast over batch and/or heads
and/or the query or key length,
with grouped-query attention, in bf16 and f32."""

import pytest
import torch
import torch.nn.functional as F
from torch_backend_helpers import assert_close_bf16

import legato.torch as lt

B, H, KVH, S, D = 2, 4, 2, 8, 16


def _causal_bool():
    return torch.ones(S, S, dtype=torch.bool).tril()[None, None]  # [1, 1, S, S]


def _padded_bool():
    # batch 1 pads its first two keys (as HF's left padding): causal and per-batch
    m = torch.ones(B, 1, S, S, dtype=torch.bool).tril()
    m[1, :, :, :2] = False
    m[1, :, :2, :2] = True  # no fully masked row (torch's flash op would give NaN there)
    return m


def _additive(dtype):
    return lambda: torch.randn(B, H, S, S, dtype=dtype)  # per batch and head


def _additive_2d(dtype):
    return lambda: torch.randn(S, S, dtype=dtype)  # broadcast over batch and heads


def _key_padding_bool():
    # [B, 1, 1, L]: broadcast over the queries (batch 0 pads its last key)
    m = torch.ones(B, 1, 1, S, dtype=torch.bool)
    m[0, ..., -1] = False
    return m


def _per_query(dtype):
    return lambda: torch.randn(1, H, S, 1, dtype=dtype)  # broadcast over the keys


MASKS = {
    "causal_bool": lambda dt: _causal_bool,
    "key_padding_bool": lambda dt: _key_padding_bool,
    "additive_per_query": _per_query,
    "padded_bool": lambda dt: _padded_bool,
    "additive_per_head": _additive,
    "additive_2d": _additive_2d,
}


def _attn(q, k, v, m):
    return F.scaled_dot_product_attention(q * 1, k, v, attn_mask=m, enable_gqa=True) + 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_masked_sdpa_runs_on_legato_and_matches_torch(mask, dtype):
    torch.manual_seed(0)
    q = torch.randn(B, H, S, D, dtype=dtype)
    k, v = (torch.randn(B, KVH, S, D, dtype=dtype) for _ in range(2))
    m = MASKS[mask](dtype)()
    with torch.no_grad():
        y = torch.compile(_attn, backend="legato", options={"legato.strict": True})(q, k, v, m)
        ref = _attn(q, k, v, m)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.matmul_flop_share == 1.0, str(s)
    assert "attention (additive mask)" in str(s), str(s)
    assert y.dtype == ref.dtype
    if dtype == torch.bfloat16:
        assert_close_bf16(y, ref)
    else:
        assert (y - ref).abs().max() <= 1e-5 * ref.abs().max()


def test_mask_of_another_dtype_runs_eagerly():
    # an f32 additive mask with bf16 operands: refused, so the node runs extern
    torch.manual_seed(0)
    q = torch.randn(1, 2, S, D, dtype=torch.bfloat16)
    m = torch.randn(S, S)
    with torch.no_grad():
        y = torch.compile(_attn, backend="legato")(q, q, q, m)
        ref = _attn(q, q, q, m)
    s = lt.last_summary()
    assert any("attention mask of torch.float32" in e.reason for e in s.extern), str(s)
    assert torch.equal(y, ref)
