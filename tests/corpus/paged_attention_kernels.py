"""Corpus kernels of legato.torch.library.paged_attention (the vLLM plugin's attention) on a
small SPMD model, so the differential harness runs them at every level and on the emulator:
the KV-cache write (`reshape_and_cache`: each token's K/V row scattered to its slot) and paged
causal attention (each request's blocks gathered through its block-table row: a prefill, a
decode at a block boundary, a chunked prefill's second chunk), both without and with the folded
neox rotary, in bf16 and f32."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import torch

from legato.interp.differential import CorpusKernel
from legato.torch.library import paged_attention as pa
from tests.corpus import rotary
from tests.corpus.chip_linear_kernels import four_cores

HQ, HKV, D, BS = 4, 2, 32, 16
NUM_BLOCKS, NBLK, Q_LEN = 8, 2, 4
REQUESTS = ((0, 4), (16, 1), (9, 3))  # (tokens already cached, query tokens) per request
POSITIONS = 32  # rows of the cos/sin cache
T = sum(n for _, n in REQUESTS)


def _np_dtype(dtype: str):
    return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32


def _torch_dtype(dtype: str):
    return torch.bfloat16 if dtype == "bfloat16" else torch.float32


def _shape(dtype: str, rot: int) -> pa.PagedShape:
    return pa.PagedShape(
        dtype,
        NUM_BLOCKS,
        BS,
        HQ,
        HKV,
        D,
        max_tokens=16,
        max_requests=4,
        q_len=Q_LEN,
        blocks=NBLK,
        scale=1 / math.sqrt(D),
        device=four_cores,
        rot=rot,
        rope_positions=POSITIONS if rot else 0,
    )


# the step's metadata, as vLLM's scheduler and the plugin's metadata builder make them
_SEQ = [c + n for c, n in REQUESTS]
_BLOCK_TABLE = np.array([[1, 5], [2, 7], [4, 0]], np.int64)  # request r's blocks
_SLOTS = np.array(
    [
        _BLOCK_TABLE[r, p // BS] * BS + p % BS
        for r, (c, n) in enumerate(REQUESTS)
        for p in range(c, c + n)
    ],
    np.int64,
)
_TOK_POS = np.array([p for c, n in REQUESTS for p in range(c, c + n)], np.int64)
_tokens, _positions, _s0 = [], [], 0
for _seq, (_c, _n) in zip(_SEQ, REQUESTS):
    _idx = [min(i, _n - 1) for i in range(Q_LEN)]  # padded with the last query token
    _tokens.append([_s0 + i for i in _idx])
    _positions.append([_seq - _n + i for i in _idx])
    _s0 += _n
TOKENS = np.array(_tokens, np.int64)
QPOS = np.array(_positions, np.float32)
KPOS = np.arange(NBLK * BS, dtype=np.float32)[:, None]


def _cos_sin(rot: int, dtype: str) -> np.ndarray:
    return rotary.cos_sin_cache(POSITIONS, rot).numpy().astype(_np_dtype(dtype))


def _attention(q: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
    """Causal attention of each request's query tokens over its cached keys, in f32."""
    out = torch.zeros(T, HQ, D)
    kv_all = cache.reshape(NUM_BLOCKS, BS, HKV, 2 * D)
    rep, s0 = HQ // HKV, 0
    for r, (seq, (_, nq)) in enumerate(zip(_SEQ, REQUESTS)):
        blocks = torch.as_tensor(_BLOCK_TABLE[r, : -(-seq // BS)])
        kv = kv_all[blocks].reshape(-1, HKV, 2 * D)[:seq].float()
        k, v = kv[..., :D], kv[..., D:]
        visible = torch.arange(seq)[None, :] <= torch.arange(seq - nq, seq)[:, None]
        for h in range(HQ):
            s = (q[s0 : s0 + nq, h].float() @ k[:, h // rep].T) / math.sqrt(D)
            out[s0 : s0 + nq, h] = (
                torch.softmax(s.masked_fill(~visible, -math.inf), -1) @ v[:, h // rep]
            )
        s0 += nq
    return out.reshape(T, HQ * D)


def _write_entry(dtype: str, rot: int) -> CorpusKernel:
    write, _ = pa._build(_shape(dtype, rot))
    ndt, tdt = _np_dtype(dtype), _torch_dtype(dtype)

    def make_args(rng):
        key = rng.standard_normal((T, HKV, D)).astype(np.float32).astype(ndt)
        value = rng.standard_normal((T, HKV, D)).astype(np.float32).astype(ndt)
        cache = rng.standard_normal((NUM_BLOCKS * BS, HKV, 2 * D)).astype(np.float32).astype(ndt)
        extra = [_TOK_POS[:, None].copy(), _cos_sin(rot, dtype)] if rot else []
        return [key, value, _SLOTS.copy(), cache, *extra]

    def reference(ins):
        key, value, slots, cache = ins[:4]
        if rot:
            key = rotary.rotate(key.to(tdt), _TOK_POS, ins[5].to(tdt), rot)
        want = cache.clone().to(tdt)
        want.index_copy_(0, slots.long(), torch.cat((key.to(tdt), value.to(tdt)), 2))
        return [want]

    return CorpusKernel(
        name=f"paged_kv_write{'_rope' if rot else ''}_{'bf16' if dtype == 'bfloat16' else 'f32'}",
        mlir=write.to_mlir(debuginfo=False),
        make_args=make_args,
        reference=reference,
        outputs=(3,),
        model=write.model,
        rtol=0.0,
        atol=0.0,
    )


def _attention_entry(dtype: str, rot: int) -> CorpusKernel:
    _, attend = pa._build(_shape(dtype, rot))
    ndt, tdt = _np_dtype(dtype), _torch_dtype(dtype)

    def make_args(rng):
        q = rng.standard_normal((T, HQ * D)).astype(np.float32).astype(ndt)
        cache = rng.standard_normal((NUM_BLOCKS, BS * HKV * 2 * D)).astype(np.float32).astype(ndt)
        out = np.zeros((T, HQ * D), ndt)
        extra = [QPOS.astype(np.int64), _cos_sin(rot, dtype)] if rot else []
        return [q, cache, _BLOCK_TABLE.copy(), TOKENS.copy(), QPOS.copy(), KPOS.copy(), out, *extra]

    def reference(ins):
        q = ins[0].to(tdt).reshape(T, HQ, D)
        if rot:
            q = rotary.rotate(q, _TOK_POS, ins[8].to(tdt), rot)
        return [_attention(q, ins[1].to(tdt)).to(tdt)]

    return CorpusKernel(
        name=f"paged_attention{'_rope' if rot else ''}_{'bf16' if dtype == 'bfloat16' else 'f32'}",
        mlir=attend.to_mlir(debuginfo=False),
        make_args=make_args,
        reference=reference,
        outputs=(6,),
        model=attend.model,
        rtol=2e-2 if dtype == "bfloat16" else 1e-4,
        atol=2e-2 if dtype == "bfloat16" else 1e-4,
    )


PAGED_ATTENTION_CORPUS = [
    _write_entry("bfloat16", 0),
    _write_entry("float32", D),
    _attention_entry("bfloat16", 0),
    _attention_entry("float32", 0),
    _attention_entry("bfloat16", D // 2),
]
