"""Paged attention on every Bertha core: the KV-cache write (vLLM's `reshape_and_cache`) and
causal attention over a paged KV cache, for decode, prefill and chunked prefill (issue 16).

The KV cache is vLLM's, in shared DRAM, never copied: one layer's cache is `[num_blocks,
block_size, Hkv, 2 * D]` (vLLM's `LBNHC` layout; for every token and KV head its key, then its
value). A sequence's blocks are read through its row of vLLM's block table, a token's slot
through vLLM's slot mapping (both cast to int64, the index type the cores read), with
`legato.tensor.gather` / `legato.tensor.scatter`: one DMA per block or per token.

- `kv_cache_write`: token t's key and value rows go to row `slot_mapping[t]` of the cache viewed
  as `[num_blocks * block_size, Hkv, 2 * D]`; the tokens are dealt round robin over the cores.
- `paged_attention`: a work item is one request r (its query tokens `tokens[r]`, padded by
  repeating its last token, whose row is then computed and written twice with the same value):
  core c takes the requests c, c + cores, ... (a runtime loop: the number of requests is a
  runtime size). For request r the core gathers its `B` blocks (`block_table[r]`: `B *
  block_size` keys, K and V of every KV head) and its query rows, and for every KV head computes
  the scores of its `rep` query heads as `K @ q^T` on the MPU (f32), the causal mask `key
  position <= query position` (the query positions `positions[r]` come with the metadata; keys
  past the sequence are past every query's position, so they are masked too), the f32 softmax,
  `p @ V` with p rounded to the cache's dtype (as CPU attention kernels round it), and scatters
  the rows back into `out` at the query tokens.

Rotary embedding, folded in (`PagedShape.rot` > 0; the plugin folds vLLM's neox-style
RotaryEmbedding of a layer into its attention): the kernels take the token positions (int64)
and vLLM's `cos_sin_cache` [positions, rot] (cos then sin halves). `kv_cache_write` rotates each
token's key before it writes the row, `paged_attention` each query row it gathered, by the
position's cos/sin row (gathered on the core): per head `x1, x2 = x[:rot/2], x[rot/2:rot]`,
`(x1 cos - x2 sin, x2 cos + x1 sin, x[rot:])`, rounded in the cache's dtype op by op as vLLM's
native implementation (`forward_static`) rounds them: the bits of that rotary, then attention.

A binary is compiled per shape bucket (`PagedShape`): the token count and the request count are
runtime sizes (bounded), the padded query length per request and the blocks per request are
compile-time (the caller picks buckets), so one binary serves every step of its bucket.
"""

# no `from __future__ import annotations`: the kernels' annotations are evaluated at def time,
# in `_build`'s scope (shapes of the bucket), which a string annotation could not see

import functools
import math
from dataclasses import dataclass

import legato

NEG_INF = -math.inf


@dataclass(frozen=True)
class PagedShape:
    """Compile-time shape of a paged-attention binary. `max_tokens`, `max_requests`: bounds of
    the runtime token and request counts; `q_len`: query rows per request (padded); `blocks`:
    KV blocks read per request (the block table's columns the kernel reads)."""

    dtype: str  # "bfloat16" or "float32"
    num_blocks: int
    block_size: int
    num_heads: int
    num_kv_heads: int
    head_size: int
    max_tokens: int
    max_requests: int
    q_len: int
    blocks: int
    scale: float
    device: str = "bertha"
    rot: int = 0  # rotary dims per head folded in (0: none; even, <= head_size)
    rope_positions: int = 0  # rows of the cos/sin cache (with rot)


@legato.function
def _t(x):
    """x^T of a 2-d tensor; a reshape when one dim is 1 (the same data order)."""
    if x.shape[0] == 1 or x.shape[1] == 1:
        return legato.tensor.reshape(x, (x.shape[1], x.shape[0]))
    return legato.tensor.transpose(x, (1, 0))


@legato.function
def _write_row(t, kt, vt, slots, cache):
    """Token t's key and value rows ([Hkv, D] each) into its cache slot: one row [Hkv, 2D]
    (key then value per KV head)."""
    rows = legato.tensor.reshape(legato.tensor.cat((kt, vt), 1), (1, kt.shape[0], 2 * kt.shape[1]))
    legato.tensor.scatter(cache, legato.tensor.load(slots[t : t + 1]), rows)


@legato.function
def _write_token(t, key, value, slots, cache):
    """Token t's key and value into its cache slot. Indexed, not sliced, so that the row is
    static (a slice of the runtime-length key would be a dynamic dim, and the cat a strided
    copy over it)."""
    _write_row(t, legato.tensor.load(key[t]), legato.tensor.load(value[t]), slots, cache)


@legato.function
def _rope(x, cos, sin, rot):
    """Neox rotary of the rows of x [n, D] by cos, sin [n, rot / 2] (module docstring)."""
    h = rot // 2
    x1 = x[:, 0:h]
    x2 = x[:, h:rot]
    y = legato.tensor.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), 1)
    if rot < x.shape[1]:
        y = legato.tensor.cat((y, x[:, rot : x.shape[1]]), 1)
    return y


@functools.cache
def _build(shape: PagedShape):
    """The two kernels of `shape`: (kv_cache_write, paged_attention); with `shape.rot`, each
    takes two arguments more: the positions (of the tokens [T, 1]; of each request's query rows
    [R, q_len]) and the cos/sin cache [rope_positions, rot]."""
    M = legato.get_model()
    dt = legato.types.float(shape.dtype)
    i64 = legato.types.i64
    f32 = legato.types.float("float32")
    nb, bs = shape.num_blocks, shape.block_size
    hq, hkv, d = shape.num_heads, shape.num_kv_heads, shape.head_size
    rep = hq // hkv
    tb, rb, ql, nblk = shape.max_tokens, shape.max_requests, shape.q_len, shape.blocks
    nkeys = nblk * bs
    row = bs * hkv * 2 * d  # one block of the cache, every KV head's keys and values
    scale = shape.scale
    rot, npos = shape.rot, max(1, shape.rope_positions)
    half = rot // 2
    if rot and (rot % 2 or rot > d or not shape.rope_positions):
        raise ValueError(f"paged attention: rotary dims {rot} of head size {d} ({shape})")

    @legato.function
    def _heads(q, tok):
        """The request's query rows, as a tuple of the Hq heads [ql, D]."""
        qr = legato.tensor.gather(q, tok)  # [ql, Hq * D]
        heads = ()
        for h in legato.static_range(hq):
            heads = heads + (qr[:, h * d : h * d + d],)
        return heads

    @legato.function
    def _heads_rope(q, tok, qpos, cos_sin):
        """`_heads`, each rotated by its row's position (qpos [ql])."""
        qr = legato.tensor.gather(q, tok)  # [ql, Hq * D]
        cs = legato.tensor.gather(cos_sin, qpos)  # [ql, rot]
        heads = ()
        for h in legato.static_range(hq):
            x = qr[:, h * d : h * d + d]
            heads = heads + (_rope(x, cs[:, 0:half], cs[:, half:rot], rot),)
        return heads

    @legato.function
    def _attend(cache, block_table, positions, kp, out, r, tok, heads):
        """Request r's attention of its query heads over its blocks, scattered into out."""
        kv = legato.tensor.gather(cache, legato.tensor.load(block_table[r, :]))
        kv = legato.tensor.reshape(kv, (nkeys, hkv * 2 * d))  # [L, Hkv * 2D]
        qp = legato.tensor.reshape(legato.tensor.load(positions[r, :]), (1, ql))
        qps = qp
        for _ in legato.static_range(rep - 1):
            qps = legato.tensor.cat((qps, qp), 1)  # [1, rep * ql]
        visible = legato.tensor.le(kp, qps)  # [L, rep * ql]: 1.0 where key <= query
        outs = ()
        for g in legato.static_range(hkv):
            k = kv[:, g * 2 * d : g * 2 * d + d]  # [L, D]
            v = kv[:, g * 2 * d + d : g * 2 * d + 2 * d]
            qt = _t(heads[g * rep])  # [D, ql]
            for j in legato.static_range(1, rep):
                h = g * rep + j
                qt = legato.tensor.cat((qt, _t(heads[h])), 1)
            s = legato.tensor.matmul(k, qt, f32) * scale  # [L, rep * ql]
            s = legato.tensor.where(visible, s, NEG_INF)
            m = legato.tensor.amax(s, 0, keepdim=True)  # [1, rep * ql]
            e = legato.tensor.exp(s - m)
            lsum = legato.tensor.sum(e, 0, keepdim=True)
            p = _t(e)  # [rep * ql, L]
            if dt != f32:
                p = legato.tensor.cast(p, dt)
            o = legato.tensor.matmul(p, v, f32) / _t(lsum)  # [rep * ql, D]
            if dt != f32:
                o = legato.tensor.cast(o, dt)
            for j in legato.static_range(rep):
                outs = outs + (o[j * ql : j * ql + ql, :],)
        rows = outs[0]
        if hq > 1:
            rows = legato.tensor.cat(outs, 1)  # [ql, Hq * D]
        legato.tensor.scatter(out, tok, rows)

    if not rot:

        @legato.compile(backend=shape.device)
        def kv_cache_write(
            key: M.tensor_type(dt, [(-1, tb), hkv, d], "shared_dram"),
            value: M.tensor_type(dt, [(-1, tb), hkv, d], "shared_dram"),
            slots: M.tensor_type(i64, [(-1, tb)], "shared_dram"),
            cache: M.tensor_type(dt, [nb * bs, hkv, 2 * d], "shared_dram"),
        ):
            device = legato.get_context().get_device()
            with device.get_all_cores():
                c = legato.core_id()
                for t in range(c, slots.size(0), device.num_cores):
                    _write_token(t, key, value, slots, cache)

        @legato.compile(backend=shape.device)
        def paged_attention(
            q: M.tensor_type(dt, [(-1, tb), hq * d], "shared_dram"),
            cache: M.tensor_type(dt, [nb, row], "shared_dram"),
            block_table: M.tensor_type(i64, [(-1, rb), nblk], "shared_dram"),
            tokens: M.tensor_type(i64, [(-1, rb), ql], "shared_dram"),
            positions: M.tensor_type(f32, [(-1, rb), ql], "shared_dram"),
            kpos: M.tensor_type(f32, [nkeys, 1], "shared_dram"),
            out: M.tensor_type(dt, [(-1, tb), hq * d], "shared_dram"),
        ):
            device = legato.get_context().get_device()
            with device.get_all_cores():
                c = legato.core_id()
                kp = legato.tensor.load(kpos)  # [L, 1]: key positions 0 .. L - 1
                for r in range(c, tokens.size(0), device.num_cores):
                    tok = legato.tensor.load(tokens[r, :])  # [ql]
                    _attend(cache, block_table, positions, kp, out, r, tok, _heads(q, tok))

    else:

        @legato.compile(backend=shape.device)
        def kv_cache_write(
            key: M.tensor_type(dt, [(-1, tb), hkv, d], "shared_dram"),
            value: M.tensor_type(dt, [(-1, tb), hkv, d], "shared_dram"),
            slots: M.tensor_type(i64, [(-1, tb)], "shared_dram"),
            cache: M.tensor_type(dt, [nb * bs, hkv, 2 * d], "shared_dram"),
            pos: M.tensor_type(i64, [(-1, tb), 1], "shared_dram"),
            cos_sin: M.tensor_type(dt, [npos, rot], "shared_dram"),
        ):
            device = legato.get_context().get_device()
            with device.get_all_cores():
                c = legato.core_id()
                for t in range(c, slots.size(0), device.num_cores):
                    cs = legato.tensor.gather(cos_sin, legato.tensor.load(pos[t]))  # [1, rot]
                    cos = legato.tensor.broadcast_to(cs[:, 0:half], (hkv, half))
                    sin = legato.tensor.broadcast_to(cs[:, half:rot], (hkv, half))
                    kt = _rope(legato.tensor.load(key[t]), cos, sin, rot)  # [Hkv, D]
                    _write_row(t, kt, legato.tensor.load(value[t]), slots, cache)

        @legato.compile(backend=shape.device)
        def paged_attention(
            q: M.tensor_type(dt, [(-1, tb), hq * d], "shared_dram"),
            cache: M.tensor_type(dt, [nb, row], "shared_dram"),
            block_table: M.tensor_type(i64, [(-1, rb), nblk], "shared_dram"),
            tokens: M.tensor_type(i64, [(-1, rb), ql], "shared_dram"),
            positions: M.tensor_type(f32, [(-1, rb), ql], "shared_dram"),
            kpos: M.tensor_type(f32, [nkeys, 1], "shared_dram"),
            out: M.tensor_type(dt, [(-1, tb), hq * d], "shared_dram"),
            qpos: M.tensor_type(i64, [(-1, rb), ql], "shared_dram"),
            cos_sin: M.tensor_type(dt, [npos, rot], "shared_dram"),
        ):
            device = legato.get_context().get_device()
            with device.get_all_cores():
                c = legato.core_id()
                kp = legato.tensor.load(kpos)  # [L, 1]: key positions 0 .. L - 1
                for r in range(c, tokens.size(0), device.num_cores):
                    tok = legato.tensor.load(tokens[r, :])  # [ql]
                    heads = _heads_rope(q, tok, legato.tensor.load(qpos[r, :]), cos_sin)
                    _attend(cache, block_table, positions, kp, out, r, tok, heads)

    # the cache is written in a few rows per step: mapped into the emulator, never copied
    kv_cache_write.map_written = True
    return kv_cache_write, paged_attention
