"""Paged attention on Bertha (`legato.torch.library.paged_attention`, vLLM's LEGATO_ATTN backend)
against a torch reference of paged attention: the KV-cache write through the slot mapping, and
causal attention through the block table for a batch mixing decode, prefill and chunked prefill
requests, GQA, f32 and bf16; the DRAM traffic depends on the blocks read, not the cache's size."""

import math

import numpy as np
import pytest
import torch

import legato
from legato.torch.library import paged_attention as pa
from tests.corpus import rotary

HQ, HKV, D, BS = 4, 2, 32, 16
# (tokens already in the cache, query tokens this step) per request: a prefill, two decodes
# (one at a block boundary), a chunked prefill's second chunk
REQUESTS = ((0, 5), (20, 1), (15, 1), (9, 3))


def reference(q, cache, block_table, seq_lens, q_lens, scale):
    """Causal attention of each request's query tokens (the last q_len of its seq_len) over its
    keys, read from the paged cache [num_blocks, BS, Hkv, 2D] through its block table, in f32."""
    out = torch.zeros(q.shape, dtype=torch.float32)
    rep = q.shape[1] // HKV
    s0 = 0
    for r, (seq, nq) in enumerate(zip(seq_lens, q_lens)):
        blocks = block_table[r, : -(-seq // BS)].long()
        kv = cache[blocks].reshape(-1, HKV, 2 * D)[:seq].float()
        k, v = kv[..., :D], kv[..., D:]
        qpos = torch.arange(seq - nq, seq)
        visible = torch.arange(seq)[None, :] <= qpos[:, None]
        for h in range(q.shape[1]):
            s = (q[s0 : s0 + nq, h].float() @ k[:, h // rep].T) * scale
            s = s.masked_fill(~visible, -math.inf)
            out[s0 : s0 + nq, h] = torch.softmax(s, -1) @ v[:, h // rep]
        s0 += nq
    return out


def make_step(dtype, num_blocks, seed=0):
    g = torch.Generator().manual_seed(seed)
    seq_lens = [c + n for c, n in REQUESTS]
    q_lens = [n for _, n in REQUESTS]
    nblk = max(-(-s // BS) for s in seq_lens)
    perm = torch.randperm(num_blocks, generator=g)
    block_table = torch.zeros(len(REQUESTS), 4, dtype=torch.int32)  # vLLM's: int32, 0-padded
    k = 0
    for r, s in enumerate(seq_lens):
        for j in range(-(-s // BS)):
            block_table[r, j] = perm[k]
            k += 1
    cache = torch.randn(num_blocks, BS, HKV, 2 * D, generator=g).to(dtype)
    t = sum(q_lens)
    key = torch.randn(t, HKV, D, generator=g).to(dtype)
    value = torch.randn(t, HKV, D, generator=g).to(dtype)
    q = torch.randn(t, HQ, D, generator=g).to(dtype)
    slots = [
        int(block_table[r, p // BS]) * BS + p % BS
        for r, (c, n) in enumerate(REQUESTS)
        for p in range(c, c + n)
    ]
    return q, key, value, cache, block_table, torch.tensor(slots), seq_lens, q_lens, nblk


def metadata(seq_lens, q_lens, q_len):
    """The per-request query tokens (padded with the last one) and their positions, as the
    backend's metadata builder makes them."""
    tokens, positions, s0 = [], [], 0
    for seq, nq in zip(seq_lens, q_lens):
        idx = [min(i, nq - 1) for i in range(q_len)]
        tokens.append([s0 + i for i in idx])
        positions.append([seq - nq + i for i in idx])
        s0 += nq
    return torch.tensor(tokens), torch.tensor(positions, dtype=torch.float32)


def run_step(dtype, num_blocks):
    q, key, value, cache, bt, slots, seq_lens, q_lens, nblk = make_step(dtype, num_blocks)
    t = q.shape[0]
    q_len = 8
    shape = pa.PagedShape(
        "bfloat16" if dtype == torch.bfloat16 else "float32",
        num_blocks,
        BS,
        HQ,
        HKV,
        D,
        max_tokens=48,
        max_requests=8,
        q_len=q_len,
        blocks=nblk,
        scale=1 / math.sqrt(D),
    )
    write, attend = pa._build(shape)
    expected_cache = cache.clone()
    expected_cache.view(-1, HKV, 2 * D).index_copy_(0, slots, torch.cat((key, value), 2))
    write(key, value, slots, cache.view(-1, HKV, 2 * D))
    assert torch.equal(cache, expected_cache)
    tokens, positions = metadata(seq_lens, q_lens, q_len)
    kpos = torch.arange(nblk * BS, dtype=torch.float32)[:, None]
    out = torch.full((t, HQ * D), float("nan"), dtype=dtype)
    attend(
        q.view(t, HQ * D),
        cache.view(num_blocks, -1),
        bt[:, :nblk].long().contiguous(),
        tokens,
        positions,
        kpos,
        out,
    )
    ref = reference(q, cache, bt, seq_lens, q_lens, shape.scale)
    return out.view(t, HQ, D), ref, write.last_run, attend.last_run, nblk


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_paged_attention_matches_torch(dtype):
    out, ref, _, run, _ = run_step(dtype, num_blocks=12)
    # f32: the MPU's split-bf16 f32 matmul (~2^-16 relative); bf16: p and the output rounded
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.float(), ref, atol=tol, rtol=tol)
    assert run.cycles > 0 and run.mac_count > 0


def test_kv_write_updates_the_cache_in_place(monkeypatch):
    """The write kernel maps the cache into the emulator (`Kernel.map_written`): no emulator
    allocation the size of the cache is made to copy it in and back (and run_step checks the
    whole cache after the write, untouched rows included)."""
    from legato.targets.bertha import emulator

    copied = []
    real = emulator.Memory.allocate

    def allocate(self, size, name):
        copied.append((name, size))
        return real(self, size, name)

    monkeypatch.setattr(emulator.Memory, "allocate", allocate)
    out, ref, run, _, _ = run_step(torch.float32, num_blocks=96)
    cache_bytes = 96 * BS * HKV * 2 * D * 4
    assert all(size < cache_bytes for _, size in copied), copied


def test_dram_traffic_is_the_blocks_read_not_the_cache():
    """No copy of the cache: a cache 8x larger moves the same DRAM bytes, and the attention
    reads about the blocks of its requests (K and V of every block, once per request)."""
    _, _, w_small, a_small, nblk = run_step(torch.float32, num_blocks=12)
    _, _, w_big, a_big, _ = run_step(torch.float32, num_blocks=96)
    small = sum(a_small.dram_bytes_per_channel)
    assert small == sum(a_big.dram_bytes_per_channel)
    assert sum(w_small.dram_bytes_per_channel) == sum(w_big.dram_bytes_per_channel)
    blocks_read = len(REQUESTS) * nblk * BS * HKV * 2 * D * 4
    assert blocks_read <= small <= 2 * blocks_read, (small, blocks_read)
    cache_bytes = 96 * BS * HKV * 2 * D * 4
    assert sum(w_big.dram_bytes_per_channel) < cache_bytes // 20


M = legato.get_model()
F32 = legato.types.float("float32")


@legato.compile(backend="bertha")
def scatter_rows(
    table: M.tensor_type(F32, [16, 8], "shared_dram"),
    idx: M.tensor_type(legato.types.i64, [(-1, 6)], "shared_dram"),
    rows: M.tensor_type(F32, [(-1, 6), 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        for j in range(c, idx.size(0), device.num_cores):
            legato.tensor.scatter(
                table, legato.tensor.load(idx[j : j + 1]), legato.tensor.load(rows[j : j + 1])
            )


@pytest.mark.parametrize("level", ["legato", "core", "backend", "binary"])
def test_scatter_at_every_level(level):
    table = np.zeros((16, 8), np.float32)
    idx = np.array([3, 7, 0, 15, 9], np.int64)
    rows = np.arange(40, dtype=np.float32).reshape(5, 8) + 1
    expected = table.copy()
    expected[idx] = rows
    if level == "binary":
        scatter_rows(table, idx, rows)
    else:
        scatter_rows.interpret(table, idx, rows, level=level)
    np.testing.assert_array_equal(table, expected)


def test_scatter_out_of_range_index_is_an_error():
    table = np.zeros((16, 8), np.float32)
    with pytest.raises(Exception, match="outside the table's 16 rows"):
        scatter_rows.interpret(table, np.array([16], np.int64), np.ones((1, 8), np.float32))


def test_scatter_with_float_indices_is_a_compile_error():
    @legato.compile(backend="bertha")
    def bad(
        table: M.tensor_type(F32, [16, 8], "shared_dram"),
        idx: M.tensor_type(F32, [4], "shared_dram"),
        rows: M.tensor_type(F32, [4, 8], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        with device.get_core(0):
            legato.tensor.scatter(table, legato.tensor.load(idx), legato.tensor.load(rows))

    with pytest.raises(legato.CompileError, match="legato.scatter: indices must be i64"):
        bad.lower("MLIR")


# -- the rotary embedding folded in (`PagedShape.rot`): the KV-cache write rotates each key by
# its token's position and the attention each query row, with vLLM's neox rotary rounded op by
# op in the dtype. The oracle: torch's rotary of q and k, then the kernels without the rotary
# (checked against torch attention above): the same cache bits and the same output bits.

POSITIONS = 64  # rows of the cos/sin cache


def cos_sin_cache(rot, dtype):
    return rotary.cos_sin_cache(POSITIONS, rot).to(dtype)


def shape_of(dtype, num_blocks, nblk, rot):
    return pa.PagedShape(
        "bfloat16" if dtype == torch.bfloat16 else "float32",
        num_blocks,
        BS,
        HQ,
        HKV,
        D,
        max_tokens=48,
        max_requests=8,
        q_len=8,
        blocks=nblk,
        scale=1 / math.sqrt(D),
        rot=rot,
        rope_positions=POSITIONS if rot else 0,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rot", [D, D // 2])
def test_folded_rotary_is_rotary_then_attention(dtype, rot):
    num_blocks = 12
    q, key, value, cache, bt, slots, seq_lens, q_lens, nblk = make_step(dtype, num_blocks)
    t = q.shape[0]
    tok_pos = torch.tensor(
        [p for seq, n in zip(seq_lens, q_lens) for p in range(seq - n, seq)], dtype=torch.int64
    )
    cs = cos_sin_cache(rot, dtype)
    tokens, positions = metadata(seq_lens, q_lens, 8)
    kpos = torch.arange(nblk * BS, dtype=torch.float32)[:, None]
    block_table = bt[:, :nblk].long().contiguous()

    # the oracle: torch's rotary, then the kernels without it
    write, attend = pa._build(shape_of(dtype, num_blocks, nblk, 0))
    want_cache = cache.clone()
    write(rotary.rotate(key, tok_pos, cs, rot), value, slots, want_cache.view(-1, HKV, 2 * D))
    want = torch.full((t, HQ * D), float("nan"), dtype=dtype)
    qr = rotary.rotate(q, tok_pos, cs, rot).reshape(t, HQ * D)
    attend(qr, want_cache.view(num_blocks, -1), block_table, tokens, positions, kpos, want)

    write_r, attend_r = pa._build(shape_of(dtype, num_blocks, nblk, rot))
    got_cache = cache.clone()
    write_r(key, value, slots, got_cache.view(-1, HKV, 2 * D), tok_pos[:, None].contiguous(), cs)
    assert torch.equal(got_cache, want_cache)
    got = torch.full((t, HQ * D), float("nan"), dtype=dtype)
    attend_r(
        q.reshape(t, HQ * D),
        got_cache.view(num_blocks, -1),
        block_table,
        tokens,
        positions,
        kpos,
        got,
        positions.to(torch.int64),
        cs,
    )
    assert torch.equal(got, want)


def test_rotary_dims_are_checked():
    with pytest.raises(ValueError, match="rotary dims 7 of head size 32"):
        pa._build(shape_of(torch.float32, 12, 2, 7))
