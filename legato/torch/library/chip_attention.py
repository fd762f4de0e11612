"""Chip-scale (all-core, SPMD) attention and KV-cache append for the torch path (issue 14).

The implementations here are `Impl(fn, args, spmd=True, scratch=...)`: the generated kernel
calls `fn(*args, *outs, *scratch)` inside `with device.get_all_cores():` with every tensor being
the kernel's shared-DRAM argument (see `legato.torch.registry.Impl`). Each core loads its share,
writes its part of the outputs with `memcpy` and meets the others at barriers.

- Decode attention (one query row, `decode_attention`): the work is the B * Hkv key/value
  groups (a KV head and the Hq / Hkv query heads that read it, GQA); when there are fewer
  groups than cores each group's KV length is split into `split` equal chunks (flash-decoding).
  A core computes, for its (group, chunk), the scores as `K_chunk @ q_group^T` (the K chunk is
  the MPU activation, the tiny q^T the weight: no on-chip transpose of K), the f32 softmax
  partial (max m, sum l of exp(s - m)) and o = exp(s - m) @ V_chunk (p rounded to the input
  dtype as torch's CPU flash kernel rounds it, f32 accumulation). With `split > 1` the partials
  go to a shared-DRAM scratch `[G, split, rep, 2 + D]` and, after a barrier, one core per group
  combines them (o = sum_j e^(m_j - M) o_j / sum_j e^(m_j - M) l_j); with the KV append fused
  and one item a core they go core to core instead, and each group combines them on chip
  (`_finish_shared`).
- Prefill attention (`rows_attention`): the work is B * Hq * (S / rows) blocks of query rows,
  each computed as the single-core `aten.attention` computes a head (causal mask rows built
  with runtime offsets). When the items are exactly the cores (`rows_attention_shared`), the
  cores of one key/value head each load a piece of its K and V and send it to the others, so
  K and V cross DRAM once, not once per core.
- Prefill attention over a runtime query length (`prefill_attention_dynamic`: causal, no
  mask, a runtime KV length; torch.compile's second prompt length): a work item per (query
  row, KV group), each a decode step over keys 0 .. i with the runtime-length fold
  (`_dyn_fold`), its last tile masked past the diagonal.
- `aten.cat` along dim 2 of 4-d tensors (the KV cache's append, `[B, H, L, D] + [B, H, 1, D]`):
  an all-core copy, each core a share of the (b, h, row-chunk) pieces.

Every resolver refuses (`assert`) what it does not implement; the single-core resolvers of
`legato.torch.library.aten` (registered before this module, so asked after it) then take the node.
Small work stays single-core (fused with its neighbours): see `CHIP_MIN_BYTES`.

Rounding is that of the single-core `aten.attention` (and of torch's CPU flash kernel): scores
and softmax in f32, the unnormalized probabilities rounded to the input dtype for `p @ V`, the
division by the f32 row sum last. The split-KV partials use their own max (as torch's kernel
uses a running max per KV block), equal within the same bf16 tolerance.
"""

from __future__ import annotations

import math

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import statically_known_true

import legato

# the module, not its names: importing aten first registers its resolvers, whose first
# `register` loads the built-in libraries (this one among them) while aten is half-initialized
from legato.torch.library import aten as _aten
from legato.torch.registry import Impl, register, register_graph_pass

aten = torch.ops.aten

# Attention operands (q, k, v) of fewer bytes than this stay on the single-core implementation
# (fused into their neighbours' kernel): an spmd implementation is a partition of its own, whose
# launch, barriers and shared-DRAM round trips cost more than one core needs for so little.
# Static sizes only: a runtime KV length has no single-core attention or cat, so it is all-core.
CHIP_MIN_BYTES = 128 * 1024
# rows of one KV-cache copy piece at most this many bytes (a core's SRAM holds one at a time)
CAT_PIECE_BYTES = 64 * 1024
# f32 scores [rows, L] of one prefill block at most this many bytes
ROWS_SCORE_BYTES = 128 * 1024
# torch's CPU flash kernel folds the keys in blocks of this many (kvSplitSize; fewer keys: one
# block): the softmax's running max, and so the rounding of p, changes at block boundaries
TORCH_KV_SPLIT = 512
NEG_BIG = -3.0e38
# a prefill work item computes at most this many row blocks of a head (unrolled), K loaded once
# the core-to-core queues of `rows_attention_shared` (SHARE_QUEUE + j from the j-th previous
# core of a group) and of the decode partials (COMBINE_QUEUE + j): apart from chip_linear's
# 1 .. 63 and from each other (a stream of one static type keeps its ring buffers), below the
# credit and barrier queues (taken from 255 down)
SHARE_QUEUE = 64
COMBINE_QUEUE = 128
MAX_QUEUE_SHARE = 64  # cores sharing one K/V or one decode group's partials
# pieces of fewer keys than this are concatenated before the softmax: one op over all keys
# instead of one per piece (measured: EVT1's 16 pieces of 8 keys 2.6k -> 2.3k cycles a layer;
# EVT0's 8 of 16 keys 3.1k -> 3.3k, the cat's copies and their DMA wait cost more there)
SHARE_CAT_KEYS = 16
ROW_UNROLL = 8  # a finite floor for a fully masked chunk's max (its weight becomes 0)

# --------------------------------------------------------------------------------------------
# Implementations


@legato.function
def _t(x):
    """x^T of a 2-d tensor; a reshape when one dim is 1 (the same data order)."""
    if x.shape[0] == 1 or x.shape[1] == 1:
        return legato.tensor.reshape(x, (x.shape[1], x.shape[0]))
    return legato.tensor.transpose(x, (1, 0))


@legato.function
def _decode_mask(mask, b, h0, rep, t0, chunk, mask_b, mask_h):
    """The additive mask of query heads h0 .. h0 + rep over keys t0 .. t0 + chunk, as
    [chunk, rep] (or [chunk, 1], broadcast, when it does not differ per head), in f32."""
    f32 = legato.types.float("float32")
    if mask.ndim == 4:
        bb = 0
        if mask_b:
            bb = b
        if mask_h:
            m = mask[bb, h0 : h0 + rep, 0, t0 : t0 + chunk]
        else:
            m = mask[bb, 0, 0:1, t0 : t0 + chunk]
    elif mask.ndim == 3:
        if mask_h:
            m = mask[h0 : h0 + rep, 0, t0 : t0 + chunk]
        else:
            m = mask[0, 0:1, t0 : t0 + chunk]
    else:
        m = mask[0:1, t0 : t0 + chunk]
    return _t(legato.tensor.cast(legato.tensor.load(m), f32))


def _blocks(n, size):
    """Compile-time helper: (start, length) of the blocks of `size` covering [0, n)."""
    return tuple((t, min(size, n - t)) for t in range(0, n, size))


@legato.function
def _p_at_v(p, v, b, hk, t0, n):
    """p @ v[b, hk, t0 : t0 + n] in f32 (p [rep, n] of v's dtype), one MPU weight tile of V
    (256 tokens) at a time: bf16 V blocks go straight from DRAM into mpu_buffer. An on-chip
    v is the [rows, D] block of (b, hk) itself: p @ v[t0 : t0 + n]."""
    f32 = legato.types.float("float32")
    blocks = _blocks(n, 256)
    o = legato.tensor.full((p.shape[0], v.bounds[-1]), 0.0, f32)
    for j in legato.static_range(len(blocks)):
        st, w = blocks[j]
        if v.memory != "shared_dram":
            # an on-chip V [n, D] (loaded once for a KV-cache append too): its rows t0 + st ..
            vb = v[t0 + st : t0 + st + w, :]
        elif v.dtype == f32:
            vb = legato.tensor.load(v[b, hk, t0 + st : t0 + st + w, :])
        else:
            vb = legato.tensor.load(v[b, hk, t0 + st : t0 + st + w, :], "mpu_buffer")
        o = o + legato.tensor.matmul(p[:, st : st + w], vb, f32)
    return o


@legato.function
def _fold_block(s, v, b, hk, t0, block, m_old):
    """(m, l, o) of one KV block `block` = (start, length) of the scores s: m = max(m_old,
    the block's max), p = exp(s - m), l = sum(p), o = p @ V."""
    f32 = legato.types.float("float32")
    st, n = block
    sb = s[st : st + n, :]
    mb = legato.tensor.maximum(legato.tensor.amax(sb, 0, keepdim=True), m_old)
    e = legato.tensor.exp(sb - mb)
    pt = _t(e)
    if v.dtype != f32:
        pt = legato.tensor.cast(pt, v.dtype)
    return mb, legato.tensor.sum(e, 0, keepdim=True), _p_at_v(pt, v, b, hk, t0 + st, n)


@legato.function
def _softmax_v(s, v, b, hk, t0, n_keys, kb):
    """(m [1, rep], l [1, rep], o [rep, D]) of the scores s [n_keys, rep] (keys t0 .., f32)
    as torch's CPU flash kernel folds them, KV block by KV block of `kb` keys: the running max
    m, p = exp(s - m) rounded to v's dtype for the MPU, l and o rescaled by exp(m_old - m).
    The running max starts at NEG_BIG: a fully masked block (max -inf) gives p = 0 (torch's
    kernel skips it), not NaN."""
    blocks = _blocks(n_keys, kb)
    m, lsum, o = _fold_block(s, v, b, hk, t0, blocks[0], NEG_BIG)
    for j in legato.static_range(1, len(blocks)):
        mb, lb, ob = _fold_block(s, v, b, hk, t0, blocks[j], m)
        w = legato.tensor.exp(m - mb)  # the old running max's weight under the new one
        o = o * _t(w) + ob
        lsum = lsum * w + lb
        m = mb
    return m, lsum, o


@legato.function
def _dyn_fold(kc, vc, qt, scale, m, lsum, o, bias=0.0, has_bias=False):
    """Fold one KV tile of a runtime length (kc, vc [?T, D]) into the running (m, l, o) of
    q_group (qt = q^T [D, rep]): the scores on the MPU (K as the activation may have a runtime
    row count), p @ V on the VPU (an MPU weight must have static dims), in f32 of p rounded to
    the input dtype as the MPU would take it. `has_bias`: `bias` ([?T, 1] f32, every head) is
    added to the scaled scores (a causal row's 0 / NEG_BIG)."""
    f32 = legato.types.float("float32")
    vf = vc
    if vc.dtype != f32:
        vf = legato.tensor.cast(vc, f32)
    # one query head at a time: a column slice of a runtime-length tensor is a strided copy
    # over a dynamic dim, which the compiler does not do
    ms, ls, os = (), (), ()
    for h in legato.static_range(qt.shape[1]):
        s = legato.tensor.matmul(kc, qt[:, h : h + 1], f32) * scale  # [?T, 1]
        if has_bias:
            s = s + bias
        mo = m[:, h : h + 1]
        mb = legato.tensor.maximum(legato.tensor.amax(s, 0, keepdim=True), mo)
        e = legato.tensor.exp(s - mb)
        w = legato.tensor.exp(mo - mb)
        p = e
        if vc.dtype != f32:
            p = legato.tensor.cast(legato.tensor.cast(e, vc.dtype), f32)
        ob = legato.tensor.sum(p * vf, 0, keepdim=True)  # [1, D]
        ms = ms + (mb,)
        ls = ls + (lsum[:, h : h + 1] * w + legato.tensor.sum(e, 0, keepdim=True),)
        os = os + (o[h : h + 1, :] * w + ob,)
    if qt.shape[1] == 1:
        return ms[0], ls[0], os[0]
    return legato.tensor.cat(ms, 1), legato.tensor.cat(ls, 1), legato.tensor.cat(os, 0)


def _decode_tail(lk, split, kb):
    """Compile-time helper: the keys after the last whole KV block when the decode chunks are
    split over cores (they form one more partial), else 0."""
    return lk % kb if split > 1 else 0


@legato.function
def _decode_chunk(q, k, v, mask, scale, has_mask, mask_b, mask_h, kb, b, h0, t0, n, qt):
    """(m, l, o) of the keys t0 .. t0 + n of (batch b, the key/value head of query heads h0 ..):
    scores K_chunk @ q^T on the MPU, folded KV block by KV block (`_softmax_v`)."""
    f32 = legato.types.float("float32")
    rep = qt.shape[1]
    hk = h0 // rep
    kc = legato.tensor.load(k[b, hk, t0 : t0 + n, :])  # [n, D]: the activation
    s = legato.tensor.matmul(kc, qt, f32) * scale  # [n, rep]
    if has_mask:
        s = s + _decode_mask(mask, b, h0, rep, t0, n, mask_b, mask_h)
    return _softmax_v(s, v, b, hk, t0, n, kb)  # [1, rep], [1, rep], [rep, D]


@legato.function
def _fold_stream(m, lsum, o, j, s, v, b, hk, t0, w):
    """Fold the scores s [w, rep] of KV block j (keys t0 .. t0 + w) into the running (m, l, o)
    (`_softmax_v`'s fold, one block at a time; block 0 starts them)."""
    if j == 0:
        return _fold_block(s, v, b, hk, t0, (0, w), NEG_BIG)
    mb, lb, ob = _fold_block(s, v, b, hk, t0, (0, w), m)
    wt = legato.tensor.exp(m - mb)  # the old running max's weight under the new one
    return mb, lsum * wt + lb, o * _t(wt) + ob


@legato.function
def _decode_chunk_stream(q, k, v, mask, scale, has_mask, mask_b, mask_h, kb, b, h0, t0, n, qt):
    """`_decode_chunk` for a chunk too large for one core's SRAM (a long context): its K rows
    streamed KV block by KV block (`kb` keys, torch's kvSplitSize; block j + 1 loaded before
    block j's scores), each block's scores folded into the running softmax at once, so one
    core holds two K blocks and one block's scores, not the chunk's."""
    f32 = legato.types.float("float32")
    rep = qt.shape[1]
    hk = h0 // rep
    blocks = _blocks(n, kb)
    st, w = blocks[0]
    kc = legato.tensor.load(k[b, hk, t0 + st : t0 + st + w, :])
    m, lsum, o = 0.0, 0.0, 0.0
    for j in legato.static_range(len(blocks)):
        st, w = blocks[j]
        if j + 1 < len(blocks):
            sn, wn = blocks[j + 1]
            kn = legato.tensor.load(k[b, hk, t0 + sn : t0 + sn + wn, :])
        s = legato.tensor.matmul(kc, qt, f32) * scale  # [w, rep]
        if has_mask:
            s = s + _decode_mask(mask, b, h0, rep, t0 + st, w, mask_b, mask_h)
        m, lsum, o = _fold_stream(m, lsum, o, j, s, v, b, hk, t0 + st, w)
        if j + 1 < len(blocks):
            kc = kn
    return m, lsum, o


@legato.function
def _decode_item(i, q, k, v, mask, scale, has_mask, mask_b, mask_h, split, kb, dyn, out, lse, part):
    """Work item i = (group g, chunk r) of `decode_attention`. `dyn` 1 (True): L is a runtime
    size; core r of a group then takes the KV tiles r, r + split, ... of `kb` keys (the last
    one partial). `dyn` 2: a static L whose chunks are streamed (`_decode_chunk_stream`)."""
    f32 = legato.types.float("float32")
    nb, nh, _, d = q.shape
    nkv = k.bounds[1]
    rep = nh // nkv
    g, r, b, hk, h0 = _group_of(i, split, nkv, rep)
    qt = _t(legato.tensor.load(q[b, h0 : h0 + rep, 0, :]))  # [D, rep]: the MPU weight
    if dyn == 1:
        m = legato.tensor.full((1, rep), NEG_BIG, f32)
        lsum = legato.tensor.full((1, rep), 0.0, f32)
        o = legato.tensor.full((rep, d), 0.0, f32)
        # the whole KV tiles: a slice of kb keys of one is provably inside the runtime length
        # of k and of v (a loop up to min(L_k, L_v) // kb; torch requires them equal), so it
        # has a static size, and p @ V runs on the MPU
        for t in range(r, min(k.size(2), v.size(2)) // kb, split):
            kc = legato.tensor.load(k[b, hk, t * kb : t * kb + kb, :])  # [kb, D]
            s = legato.tensor.matmul(kc, qt, f32) * scale  # [kb, rep]
            mb, lb, ob = _fold_block(s, v, b, hk, t * kb, (0, kb), m)
            w = legato.tensor.exp(m - mb)  # the old running max's weight under the new one
            o = o * _t(w) + ob
            lsum = lsum * w + lb
            m = mb
        # the last, partial tile (L % kb keys, none when kb divides L): a runtime row count,
        # on the VPU, by the core whose turn it is (r == nfull % split: a loop of one trip
        # there, none elsewhere)
        nfull = min(k.size(2), v.size(2)) // kb
        for t in range(
            nfull + (r + split - nfull % split) % split, (k.size(2) + kb - 1) // kb, split
        ):
            kt = legato.tensor.load(k[b, hk, t * kb : t * kb + kb, :])
            vt = legato.tensor.load(v[b, hk, t * kb : t * kb + kb, :])
            m, lsum, o = _dyn_fold(kt, vt, qt, scale, m, lsum, o)
    else:
        tail = _decode_tail(k.shape[2], split, kb)
        chunk = (k.shape[2] - tail) // split
        t0 = r * chunk
        if dyn == 2:
            m, lsum, o = _decode_chunk_stream(
                q, k, v, mask, scale, has_mask, mask_b, mask_h, kb, b, h0, t0, chunk, qt
            )
        else:
            m, lsum, o = _decode_chunk(
                q, k, v, mask, scale, has_mask, mask_b, mask_h, kb, b, h0, t0, chunk, qt
            )
        if tail > 0:
            # the last, partial KV block (e.g. the new token's key): its own partial, in slot
            # `split`, computed by the group's last core (a loop of one trip there, none
            # elsewhere: the program has no runtime if)
            for _ in range(split - 1, r + 1):
                tm, tl, to = _decode_chunk(
                    q,
                    k,
                    v,
                    mask,
                    scale,
                    has_mask,
                    mask_b,
                    mask_h,
                    kb,
                    b,
                    h0,
                    split * chunk,
                    tail,
                    qt,
                )
                tml = legato.tensor.cat((_t(tm), _t(tl), to), 1)
                legato.tensor.memcpy(
                    part[g : g + 1, split : split + 1, :, :],
                    legato.tensor.reshape(tml, (1, 1, rep, 2 + d)),
                )
    _finish_item(m, lsum, o, split, (g, r, b, h0), q.dtype, out, lse, part)


@legato.function
def _group_of(i, split, nkv, rep):
    """(g, r, b, hk, h0) of decode work item i: key/value group g = (batch b, KV head hk,
    query heads h0 .. h0 + rep) and its chunk r of `split`."""
    g = i // split
    hk = g % nkv
    return g, i % split, g // nkv, hk, hk * rep


@legato.function
def _finish_item(m, lsum, o, split, where, dtype, out, lse, part):
    """Write a decode item's (m, l, o) (`where` = (g, r, b, h0)): the result and its
    logsumexp when its group has one chunk (split == 1), else its partial to part[g, r]."""
    g, r, b, h0 = where
    rep, d = o.shape
    if split == 1:
        res = o / _t(lsum)
        legato.tensor.memcpy(
            out[b : b + 1, h0 : h0 + rep, 0:1, :],
            legato.tensor.reshape(legato.tensor.cast(res, dtype), (1, rep, 1, d)),
        )
        legato.tensor.memcpy(
            lse[b : b + 1, h0 : h0 + rep, 0:1],
            legato.tensor.reshape(m + legato.tensor.log(lsum), (1, rep, 1)),
        )
    else:
        mlo = legato.tensor.cat((_t(m), _t(lsum), o), 1)  # [rep, 2 + D]
        legato.tensor.memcpy(
            part[g : g + 1, r : r + 1, :, :], legato.tensor.reshape(mlo, (1, 1, rep, 2 + d))
        )


@legato.function
def _finish_shared(m, lsum, o, split, where, dtype, out, lse):
    """`_finish_item` of a decode item when every core has one item and its group's `split`
    cores are consecutive (core = g * split + r): the partial (m, l, o) goes core to core to
    the group's other cores (queue COMBINE_QUEUE + j to the j-th next: m, l and o in that
    order, three transfers; a `cat` of them would wait for every DMA of the core, the KV
    append's copies too), not through a DRAM scratch and a barrier. Each core combines the
    group's partials (its own first, then the j-th previous core's: o = sum_j e^(m_j - M) o_j
    / sum_j e^(m_j - M) l_j) and the group's first core writes the result and its logsumexp
    (a loop of one trip there, none elsewhere)."""
    f32 = legato.types.float("float32")
    device = legato.get_context().get_device()
    g, r, b, h0 = where
    rep, d = o.shape
    base = legato.core_id() - r
    for j in legato.static_range(1, split):
        to = device.get_core(base + (r + j) % split)
        legato.tensor.request_load(m, to, "sram", COMBINE_QUEUE + j)
        legato.tensor.request_load(lsum, to, "sram", COMBINE_QUEUE + j)
        legato.tensor.request_load(o, to, "sram", COMBINE_QUEUE + j)
    row = legato.get_model().tensor_type(f32, [1, rep], "sram")
    ms, ls, os = (m,), (lsum,), (o,)
    for j in legato.static_range(1, split):
        ms = ms + (legato.tensor.receive_type(row, COMBINE_QUEUE + j, None, "sram"),)
        ls = ls + (legato.tensor.receive_type(row, COMBINE_QUEUE + j, None, "sram"),)
        os = os + (
            legato.tensor.receive_type(
                legato.get_model().tensor_type(f32, [rep, d], "sram"),
                COMBINE_QUEUE + j,
                None,
                "sram",
            ),
        )
    mx = ms[0]
    for j in legato.static_range(1, split):
        mx = legato.tensor.maximum(mx, ms[j])  # [1, rep]
    tot = legato.tensor.full((1, rep), 0.0, f32)
    acc = legato.tensor.full((rep, d), 0.0, f32)
    for j in legato.static_range(split):
        w = legato.tensor.exp(ms[j] - mx)
        tot = tot + ls[j] * w
        acc = acc + os[j] * _t(w)
    for _ in range(r, 1):
        legato.tensor.memcpy(
            out[b : b + 1, h0 : h0 + rep, 0:1, :],
            legato.tensor.reshape(legato.tensor.cast(acc / _t(tot), dtype), (1, rep, 1, d)),
        )
        legato.tensor.memcpy(
            lse[b : b + 1, h0 : h0 + rep, 0:1],
            legato.tensor.reshape(mx + legato.tensor.log(tot), (1, rep, 1)),
        )


def _item_loop(items, ncores):
    """Compile-time helper: whether the static-length decode items run in a runtime loop (0
    or more items a core; cores past the items idle): unless every core has exactly one. (A
    loop body's V tiles share mpu_buffer by their liveness within an iteration, as they do
    without a loop.)"""
    return items != ncores


@legato.function
def decode_attention(q, k, v, mask, scale, has_mask, mask_b, mask_h, split, kb, out, lse, part):
    """Attention of one query row per head, q [B, Hq, 1, D], k/v [B, Hkv, L, D], on every core
    (see the module docstring). `split` cores per key/value group share its L keys in chunks
    of L / split (whole KV blocks of `kb` keys, torch's kvSplitSize); `part` is the partials'
    scratch `[G, split, rep, 2 + D]` (f32) when split > 1.
    Writes out [B, Hq, 1, D] and lse [B, Hq, 1] (f32: max + log(sum) of the scaled scores)."""
    _decode(q, k, v, mask, scale, has_mask, mask_b, mask_h, split, kb, False, out, lse, part)


@legato.function
def decode_attention_stream(
    q, k, v, mask, scale, has_mask, mask_b, mask_h, split, kb, out, lse, part
):
    """`decode_attention` with each core's chunk streamed KV block by KV block (a chunk of a
    long context that one core's SRAM does not hold: `_decode_chunk_stream`)."""
    _decode(q, k, v, mask, scale, has_mask, mask_b, mask_h, split, kb, 2, out, lse, part)


@legato.function
def decode_attention_stream_unsplit(q, k, v, mask, scale, has_mask, mask_b, mask_h, kb, out, lse):
    """`decode_attention_stream` with one core per key/value group (no scratch)."""
    _decode(q, k, v, mask, scale, has_mask, mask_b, mask_h, 1, kb, 2, out, lse, None)


@legato.function
def _dynamic_append_item(i, q, k_old, k_new, v_old, v_new, scale, split, kb, outs, part):
    """Work item i = (group g, chunk r) of `decode_attention_dynamic_append`: the cached keys
    as `_decode_item` takes a runtime length (KV tiles r, r + split, ... of `kb` keys, then
    the partial one), and on the group's last core (a loop of one trip there, none
    elsewhere) the appended keys, written after the cached rows of k_all / v_all (at the
    runtime offset L0) and folded into its running softmax."""
    f32 = legato.types.float("float32")
    out, lse, k_all, v_all = outs
    nkv = k_old.bounds[1]
    rep = q.shape[1] // nkv
    d = q.shape[3]
    g, r, b, hk, h0 = _group_of(i, split, nkv, rep)
    qt = _t(_part_rows(q, b, h0, rep))  # [D, rep]: the MPU weight
    m = legato.tensor.full((1, rep), NEG_BIG, f32)
    lsum = legato.tensor.full((1, rep), 0.0, f32)
    o = legato.tensor.full((rep, d), 0.0, f32)
    for t in range(r, min(k_old.size(2), v_old.size(2)) // kb, split):
        kc = legato.tensor.load(k_old[b, hk, t * kb : t * kb + kb, :])  # [kb, D]
        s = legato.tensor.matmul(kc, qt, f32) * scale  # [kb, rep]
        mb, lb, ob = _fold_block(s, v_old, b, hk, t * kb, (0, kb), m)
        w = legato.tensor.exp(m - mb)
        o = o * _t(w) + ob
        lsum = lsum * w + lb
        m = mb
    nfull = min(k_old.size(2), v_old.size(2)) // kb
    for t in range(
        nfull + (r + split - nfull % split) % split, (k_old.size(2) + kb - 1) // kb, split
    ):
        kt = legato.tensor.load(k_old[b, hk, t * kb : t * kb + kb, :])
        vt = legato.tensor.load(v_old[b, hk, t * kb : t * kb + kb, :])
        m, lsum, o = _dyn_fold(kt, vt, qt, scale, m, lsum, o)
    for _ in range(split - 1, r + 1):
        m, lsum, o = _append_new_at(
            k_new, v_new, k_all, v_all, qt, scale, (b, hk), k_old.size(2), m, lsum, o
        )
    _finish_item(m, lsum, o, split, (g, r, b, h0), q.dtype, out, lse, part)


@legato.function
def _append_new_at(k_new, v_new, k_all, v_all, qt, scale, bh, t0, m, lsum, o):
    """Fold the appended keys (k_new / v_new [B, Hkv, R, D], on chip or in shared DRAM) of
    (b, hk) = bh into the running (m, l, o) and write them to rows t0 .. (a runtime offset: the
    cached length) of k_all / v_all."""
    f32 = legato.types.float("float32")
    b, hk = bh
    kn = _part_rows(k_new, b, hk, 1)  # [R, D]
    vn = _part_rows(v_new, b, hk, 1)
    _write_rows(kn, vn, k_all, v_all, b, hk, t0)
    s = legato.tensor.matmul(kn, qt, f32) * scale  # [R, rep]
    mb, lb, ob = _fold_block(s, vn, b, hk, 0, (0, k_new.shape[2]), m)
    w = legato.tensor.exp(m - mb)
    return mb, lsum * w + lb, o * _t(w) + ob


@legato.function
def decode_attention_dynamic_append(
    q, k_old, k_new, v_old, v_new, scale, pieces, split, kb, out, lse, k_all, v_all, part
):
    """`decode_attention_dynamic` over cat(k_old, k_new) / cat(v_old, v_new) along the length
    (a DynamicCache's append; k_old [B, Hkv, ?L0, D], k_new [B, Hkv, R, D]) with the append
    fused: the cached rows are copied to k_all / v_all as `cat_rows_dynamic` copies them
    (pieces of `pieces` rows), the attention reads them from k_old / v_old, and the appended
    rows, which may be on-chip values of a fused prologue (the rotary of the new key) as q
    may, are written and folded in by each group's last core. Writes out, lse and the
    appended caches."""
    nkv = k_old.bounds[1]
    rep = q.shape[1] // nkv
    groups = q.shape[0] * nkv
    items = groups * split
    ncores = legato.get_context().get_device().num_cores
    c = legato.core_id()
    cat_rows_dynamic((k_old,), (pieces,), k_all)
    cat_rows_dynamic((v_old,), (pieces,), v_all)
    outs = (out, lse, k_all, v_all)
    for i in range(c, items, ncores):
        _dynamic_append_item(i, q, k_old, k_new, v_old, v_new, scale, split, kb, outs, part)
    if split > 1:
        legato.sync.barrier()
        _combine(part, groups, nkv, rep, q.shape[3], q.dtype, out, lse)


@legato.function
def decode_attention_dynamic_append_unsplit(
    q, k_old, k_new, v_old, v_new, scale, pieces, kb, out, lse, k_all, v_all
):
    """`decode_attention_dynamic_append` with one core per key/value group (no scratch)."""
    decode_attention_dynamic_append(
        q, k_old, k_new, v_old, v_new, scale, pieces, 1, kb, out, lse, k_all, v_all, None
    )


@legato.function
def decode_attention_dynamic(q, k, v, scale, split, kb, out, lse, part):
    """`decode_attention` (no mask) of a KV length L known at run time (k/v [B, Hkv, ?L, D]):
    one binary for every L up to the bound; the whole KV tiles of kb keys on the MPU, the
    last partial tile's p @ V on the VPU (see `_dyn_fold`)."""
    _decode(q, k, v, 0.0, scale, False, False, False, split, kb, True, out, lse, part)


@legato.function
def decode_attention_dynamic_unsplit(q, k, v, scale, kb, out, lse):
    """`decode_attention_dynamic` with one core per key/value group (no scratch)."""
    _decode(q, k, v, 0.0, scale, False, False, False, 1, kb, True, out, lse, None)


@legato.function
def prefill_attention_dynamic(q, k, v, scale, kb, out, lse):
    """Causal attention (top-left: row i sees keys 0 .. i) of a runtime query length S over a
    runtime KV length L (q [B, Hq, ?S, D], k/v [B, Hkv, ?L, D]; a prefill whose prompt length
    is dynamic, torch.compile's second prompt length: L = S): one binary for every S, L up to
    their bounds. A work item is (query row i, key/value
    group): row i is a decode step over keys 0 .. i (`decode_attention_dynamic`'s fold:
    tiles of kb keys, the running max as torch's CPU flash kernel folds them, whose causal
    blocks past the diagonal add nothing), each tile clamped to the runtime length and its
    keys past i masked with NEG_BIG (a slice of one [0] * kb + [NEG_BIG] * (kb - 1) column,
    `z` below, at a runtime offset); the items go round robin over the cores,
    rows interleaved over the groups (a row's cost grows with i). q, out and lse are read and
    written one head row at a time (a runtime-indexed row is contiguous; rows of several heads
    would be a copy with a runtime stride)."""
    f32 = legato.types.float("float32")
    ncores = legato.get_context().get_device().num_cores
    nb, nh, _, d = q.bounds
    nkv = k.bounds[1]
    rep = nh // nkv
    groups = nb * nkv
    z = legato.tensor.concat(
        (legato.tensor.full((kb, 1), 0.0, f32), legato.tensor.full((kb - 1, 1), NEG_BIG, f32)), 0
    )
    c = legato.core_id()
    for it in range(c, groups * q.size(2), ncores):
        i = it // groups
        g = it % groups
        b = g // nkv
        hk = g % nkv
        h0 = hk * rep
        cols = ()
        for h in legato.static_range(rep):
            cols = cols + (legato.tensor.reshape(legato.tensor.load(q[b, h0 + h, i, :]), (d, 1)),)
        qt = cols[0] if rep == 1 else legato.tensor.concat(cols, 1)  # [D, rep]
        m = legato.tensor.full((1, rep), NEG_BIG, f32)
        lsum = legato.tensor.full((1, rep), 0.0, f32)
        o = legato.tensor.full((rep, d), 0.0, f32)
        # the tiles up to row i's diagonal, none past the keys (L < S: rows past L see all)
        for t in range(min(i, min(k.size(2), v.size(2)) - 1) // kb + 1):
            kc = legato.tensor.load(k[b, hk, t * kb : t * kb + kb, :])  # [?T, D]
            vc = legato.tensor.load(v[b, hk, t * kb : t * kb + kb, :])
            # keys t*kb + j, j < T: 0 where t*kb + j <= i, else NEG_BIG: z[st : st + T] with
            # z = [0] * kb + [NEG_BIG] * (kb - 1), st = kb - 1 - (i - t*kb) (0 before the
            # diagonal's tile: every key seen)
            st = max(kb - 1 - (i - t * kb), 0)
            zt = z[st : st + kb, :]
            m, lsum, o = _dyn_fold(kc, vc, qt, scale, m, lsum, o, zt[0 : kc.size(0), :], True)
        res = legato.tensor.cast(o / _t(lsum), q.dtype)  # [rep, D]
        lg = m + legato.tensor.log(lsum)  # [1, rep]
        for h in legato.static_range(rep):
            legato.tensor.memcpy(
                out[b, h0 + h, i, :], legato.tensor.reshape(res[h : h + 1, :], (d,))
            )
            legato.tensor.memcpy(lse[b : b + 1, h0 + h : h0 + h + 1, i], lg[:, h : h + 1])


@legato.function
def _decode(q, k, v, mask, scale, has_mask, mask_b, mask_h, split, kb, dyn, out, lse, part):
    """The body of the decode attentions (see `decode_attention`)."""
    nh = q.shape[1]
    nkv = k.bounds[1]
    rep = nh // nkv
    d = q.shape[3]
    groups = q.shape[0] * nkv
    items = groups * split
    ncores = legato.get_context().get_device().num_cores
    c = legato.core_id()
    loop = True  # a runtime KV length: a loop over its KV tiles
    if dyn != 1:
        loop = _item_loop(items, ncores)
    if not loop:
        i = c  # one item per core
        _decode_item(
            i, q, k, v, mask, scale, has_mask, mask_b, mask_h, split, kb, dyn, out, lse, part
        )
    else:
        for i in range(c, items, ncores):
            _decode_item(
                i, q, k, v, mask, scale, has_mask, mask_b, mask_h, split, kb, dyn, out, lse, part
            )
    if split > 1:
        legato.sync.barrier()
        _combine(part, groups, nkv, rep, d, q.dtype, out, lse)


@legato.function
def _combine(part, groups, nkv, rep, d, dtype, out, lse):
    """After the barrier: one core per key/value group combines its split-KV partials
    part[g] [split, rep, 2 + D] (m, l, o) into out (of `dtype`) and lse:
    o = sum_j e^(m_j - M) o_j / sum_j e^(m_j - M) l_j."""
    ncores = legato.get_context().get_device().num_cores
    c = legato.core_id()
    for gg in range(c, groups, ncores):
        gb = gg // nkv
        gh0 = (gg % nkv) * rep
        ap = legato.tensor.load(part[gg])  # [split, rep, 2 + D]
        mr = ap[:, :, 0:1]
        mx = legato.tensor.amax(mr, 0, keepdim=True)  # [1, rep, 1]
        w = legato.tensor.exp(mr - mx)
        tot = legato.tensor.sum(ap[:, :, 1:2] * w, 0)  # [rep, 1]
        acc = legato.tensor.sum(ap[:, :, 2 : 2 + d] * w, 0)  # [rep, D]
        legato.tensor.memcpy(
            out[gb : gb + 1, gh0 : gh0 + rep, 0:1, :],
            legato.tensor.reshape(legato.tensor.cast(acc / tot, dtype), (1, rep, 1, d)),
        )
        lg = legato.tensor.reshape(mx, (rep, 1)) + legato.tensor.log(tot)
        legato.tensor.memcpy(
            lse[gb : gb + 1, gh0 : gh0 + rep, 0:1], legato.tensor.reshape(lg, (1, rep, 1))
        )


@legato.function
def decode_attention_unsplit(q, k, v, mask, scale, has_mask, mask_b, mask_h, kb, out, lse):
    """`decode_attention` with one core per key/value group (no scratch)."""
    decode_attention(q, k, v, mask, scale, has_mask, mask_b, mask_h, 1, kb, out, lse, None)


@legato.function
def _part_rows(x, b, h0, n):
    """Rows of heads h0 .. h0 + n of batch b of an appended part x [B, H, R, D] as [n * R, D]
    (n == 1: the R rows of one head): loaded when x is in shared DRAM, else sliced from the
    on-chip value a fused prologue computed (the rotary of the new key, every core has it)."""
    r, d = x.shape[2], x.shape[3]
    if x.memory == "shared_dram":
        rows = legato.tensor.load(x[b : b + 1, h0 : h0 + n, :, :])
    else:
        rows = x[b : b + 1, h0 : h0 + n, :, :]
    return legato.tensor.reshape(rows, (n * r, d))


@legato.function
def _write_rows(kc, vc, k_all, v_all, b, hk, t0):
    """Write the on-chip K and V rows kc / vc [n, D] of (batch b, KV head hk) to rows t0 ..
    of the appended k_all / v_all."""
    n, d = kc.shape
    legato.tensor.memcpy(
        k_all[b : b + 1, hk : hk + 1, t0 : t0 + n, :], legato.tensor.reshape(kc, (1, 1, n, d))
    )
    legato.tensor.memcpy(
        v_all[b : b + 1, hk : hk + 1, t0 : t0 + n, :], legato.tensor.reshape(vc, (1, 1, n, d))
    )


@legato.function
def _scores(kc, qt, scale, mask, mask_flags, b, h0, t0):
    """The scores [n, rep] of the on-chip K rows kc [n, D] (keys t0 ..) against q^T (qt
    [D, rep]; K as the MPU activation), scaled and masked (query heads h0 ..)."""
    f32 = legato.types.float("float32")
    has_mask, mask_b, mask_h = mask_flags
    s = legato.tensor.matmul(kc, qt, f32) * scale
    if has_mask:
        s = s + _decode_mask(mask, b, h0, qt.shape[1], t0, kc.shape[0], mask_b, mask_h)
    return s


@legato.function
def _copy_and_score(kc, vc, k_all, v_all, qt, scale, mask, mask_flags, b, hk, h0, t0):
    """Write kc / vc to rows t0 .. of k_all / v_all (`_write_rows`) and return their scores
    (`_scores`)."""
    _write_rows(kc, vc, k_all, v_all, b, hk, t0)
    return _scores(kc, qt, scale, mask, mask_flags, b, h0, t0)


@legato.function
def decode_append_preload(k_old, v_old, split):
    """The cached K and V rows [L0 / split, D] of this core's work item of
    `decode_attention_append` (one item per core: item = core id), loaded first (`Impl.preload`):
    their DRAM latency and transfer then overlap the fused prologue's steps (the rotary of q
    and of the new key), which they do not wait for."""
    nkv = k_old.shape[1]
    c = legato.core_id()
    g = c // split
    b, hk = g // nkv, g % nkv
    chunk = k_old.shape[2] // split
    t0 = (c % split) * chunk
    return (
        legato.tensor.load(k_old[b, hk, t0 : t0 + chunk, :]),
        legato.tensor.load(v_old[b, hk, t0 : t0 + chunk, :]),
    )


@legato.function
def decode_append_no_preload(k_old, v_old, split):
    """`decode_append_preload` when a core has not exactly one work item: nothing (None)."""
    return None


@legato.function
def _append_new(k_new, v_new, k_all, v_all, qt, scale, mask, mask_flags, b, hk, h0, m, lsum, o):
    """Fold the appended keys (k_new / v_new [B, Hkv, R, D]) into the running (m, l, o) of
    (b, hk) and write them after the cached rows of k_all / v_all."""
    r = k_new.shape[2]
    kn = _part_rows(k_new, b, hk, 1)  # [R, D]
    vn = _part_rows(v_new, b, hk, 1)
    t0 = k_all.shape[2] - r
    s = _copy_and_score(kn, vn, k_all, v_all, qt, scale, mask, mask_flags, b, hk, h0, t0)
    mb, lb, ob = _fold_block(s, vn, b, hk, 0, (0, r), m)
    w = legato.tensor.exp(m - mb)  # the old running max's weight under the new one
    return mb, lsum * w + lb, o * _t(w) + ob


@legato.function
def _append_chunk_stream(k_old, v_old, k_all, v_all, qt, scale, mask, mask_flags, kb, ids, t0, n):
    """(m, l, o) of the cached keys t0 .. t0 + n of `decode_attention_append`'s item `ids` =
    (b, hk, h0) for a chunk one core's SRAM does not hold (a long context): KV block by KV
    block (`kb` keys; block j + 1 loaded before block j is used), each block copied to the
    appended caches and its scores folded into the running softmax at once."""
    b, hk, h0 = ids
    blocks = _blocks(n, kb)
    st, w = blocks[0]
    kc = legato.tensor.load(k_old[b, hk, t0 + st : t0 + st + w, :])
    vc = legato.tensor.load(v_old[b, hk, t0 + st : t0 + st + w, :])
    m, lsum, o = 0.0, 0.0, 0.0
    for j in legato.static_range(len(blocks)):
        st, w = blocks[j]
        if j + 1 < len(blocks):
            sn, wn = blocks[j + 1]
            kn = legato.tensor.load(k_old[b, hk, t0 + sn : t0 + sn + wn, :])
            vn = legato.tensor.load(v_old[b, hk, t0 + sn : t0 + sn + wn, :])
        s = _copy_and_score(kc, vc, k_all, v_all, qt, scale, mask, mask_flags, b, hk, h0, t0 + st)
        m, lsum, o = _fold_stream(m, lsum, o, j, s, vc, b, hk, 0, w)
        if j + 1 < len(blocks):
            kc, vc = kn, vn
    return m, lsum, o


@legato.function
def _append_item(
    i, q, k_old, k_new, v_old, v_new, mask, scale, mask_flags, split, kb, outs, part, pre, one
):
    """Work item i = (group g, chunk r) of `decode_attention_append`: the chunk r of the
    cached keys, and on the group's last core (a loop of one trip there, none elsewhere: the
    program has no runtime if) the appended keys folded into its running softmax. `one`
    (compile-time) True: one item per core, `pre` holds the chunk's K and V rows, loaded
    already (`decode_append_preload`); False: they are loaded here; 2: the chunk is streamed
    KV block by KV block (`_append_chunk_stream`, a long context)."""
    out, lse, k_all, v_all = outs
    nkv = k_old.shape[1]
    rep = q.shape[1] // nkv
    g, r, b, hk, h0 = _group_of(i, split, nkv, rep)
    qt = _t(_part_rows(q, b, h0, rep))  # [D, rep]: the MPU weight
    chunk = k_old.shape[2] // split
    t0 = r * chunk
    if one == 2:  # streamed (a long context)
        m, lsum, o = _append_chunk_stream(
            k_old, v_old, k_all, v_all, qt, scale, mask, mask_flags, kb, (b, hk, h0), t0, chunk
        )
    else:
        if one:
            kc, vc = pre
        else:
            kc = legato.tensor.load(k_old[b, hk, t0 : t0 + chunk, :])  # [n, D]
            vc = legato.tensor.load(v_old[b, hk, t0 : t0 + chunk, :])
        # copied to the appended caches at once: a barrier waits for every DMA its core
        # issued, so these writes end before the partials' barrier wherever they are issued,
        # and issued after it they would queue before the combine's loads (measured: 5.0k
        # cycles this way, 5.1k after the combine, 5.7k between the barrier and the combine;
        # tiny Llama, EVT0)
        _write_rows(kc, vc, k_all, v_all, b, hk, t0)
        s = _scores(kc, qt, scale, mask, mask_flags, b, h0, t0)
        m, lsum, o = _softmax_v(s, vc, b, hk, 0, chunk, kb)
    flags = (k_all, v_all, qt, scale, mask, mask_flags)
    for _ in range(split - 1, r + 1):
        m, lsum, o = _append_new(k_new, v_new, *flags, b, hk, h0, m, lsum, o)
    if _partials_shared(one, split):
        _finish_shared(m, lsum, o, split, (g, r, b, h0), q.dtype, out, lse)
        # the cached rows' buffers kept to the end: reused by the new token's fold while their
        # copies to the appended caches were in flight, its ops waited for those (~260 cycles
        # on the group's last core, which every other core of the group waits for)
        legato.tensor.reshape(kc, (chunk * kc.shape[1],))
        legato.tensor.reshape(vc, (chunk * vc.shape[1],))
    else:
        _finish_item(m, lsum, o, split, (g, r, b, h0), q.dtype, out, lse, part)


def _partials_shared(one, split):
    """Compile-time helper: whether `_append_item`'s partials go core to core
    (`_finish_shared`: one item a core, its K and V rows preloaded, a split group) rather than
    through the DRAM scratch, a barrier and `_combine`."""
    return one is True and 1 < split <= MAX_QUEUE_SHARE


@legato.function
def decode_attention_append(
    q,
    k_old,
    k_new,
    v_old,
    v_new,
    mask,
    scale,
    mask_flags,
    split,
    kb,
    out,
    lse,
    k_all,
    v_all,
    part,
    pre,
    stream=False,
):
    """Decode attention (one query row per head, q [B, Hq, 1, D]) over the KV cache with its
    append fused: K = cat(k_old, k_new, dim 2) (k_old [B, Hkv, L0, D] in shared DRAM, k_new
    [B, Hkv, R, D] the few appended rows), V likewise. Writes out [B, Hq, 1, D], lse
    [B, Hq, 1] and the appended caches k_all / v_all [B, Hkv, L0 + R, D], reading each cached
    row once for both the copy and the attention. q, k_new and v_new may be on-chip values (a
    fused prologue: the rotary embedding) or shared-DRAM tensors. `split` cores per key/value
    group share its L0 cached keys in equal chunks; the group's last core also folds in the
    appended keys; with split > 1 the partials meet in `part` [G, split, rep, 2 + D] (f32).
    `mask_flags` = (has_mask, mask_b, mask_h) of an additive mask over the L0 + R keys.
    `pre` (when every core has exactly one work item, else None): this core's cached K and V
    rows, loaded before the prologue's steps (`decode_append_preload`, `Impl.preload`), so
    their DRAM latency and transfer overlap the rotary (it was issued after it). `stream`: each
    core's chunk is streamed KV block by KV block (a long context, `_append_chunk_stream`)."""
    nkv = k_old.shape[1]
    rep = q.shape[1] // nkv
    groups = q.shape[0] * nkv
    items = groups * split
    ncores = legato.get_context().get_device().num_cores
    c = legato.core_id()
    outs = (out, lse, k_all, v_all)
    args = (q, k_old, k_new, v_old, v_new, mask, scale, mask_flags, split, kb, outs, part)
    if stream:
        if items == ncores:
            _append_item(c, *args, None, 2)
        else:
            for i in range(c, items, ncores):
                _append_item(i, *args, None, 2)
    elif items == ncores:
        _append_item(c, *args, pre, True)
    else:
        for i in range(c, items, ncores):
            _append_item(i, *args, None, False)
    if split > 1 and not (items == ncores and not stream and _partials_shared(True, split)):
        legato.sync.barrier()
        _combine(part, groups, nkv, rep, q.shape[3], q.dtype, out, lse)


@legato.function
def decode_attention_append_unsplit(
    q, k_old, k_new, v_old, v_new, mask, scale, mask_flags, kb, out, lse, k_all, v_all, pre
):
    """`decode_attention_append` with one core per key/value group (no scratch)."""
    decode_attention_append(
        q,
        k_old,
        k_new,
        v_old,
        v_new,
        mask,
        scale,
        mask_flags,
        1,
        kb,
        out,
        lse,
        k_all,
        v_all,
        None,
        pre,
    )


@legato.function
def decode_attention_append_stream(
    q, k_old, k_new, v_old, v_new, mask, scale, mask_flags, split, kb, out, lse, k_all, v_all, part
):
    """`decode_attention_append` with each core's chunk streamed (a long context)."""
    decode_attention_append(
        q,
        k_old,
        k_new,
        v_old,
        v_new,
        mask,
        scale,
        mask_flags,
        split,
        kb,
        out,
        lse,
        k_all,
        v_all,
        part,
        None,
        True,
    )


@legato.function
def decode_attention_append_stream_unsplit(
    q, k_old, k_new, v_old, v_new, mask, scale, mask_flags, kb, out, lse, k_all, v_all
):
    """`decode_attention_append_stream` with one core per key/value group (no scratch)."""
    decode_attention_append(
        q,
        k_old,
        k_new,
        v_old,
        v_new,
        mask,
        scale,
        mask_flags,
        1,
        kb,
        out,
        lse,
        k_all,
        v_all,
        None,
        None,
        True,
    )


@legato.function
def _rows_mask_rows(mask, b, h, r0, rows, mask_b, mask_h):
    """The additive mask rows r0 .. r0 + rows of (batch b, head h), [rows, L], in DRAM."""
    bb = 0
    if mask_b:
        bb = b
    hh = 0
    if mask_h:
        hh = h
    if mask.ndim == 4:
        return mask[bb, hh, r0 : r0 + rows, :]
    if mask.ndim == 3:
        return mask[hh, r0 : r0 + rows, :]
    return mask[r0 : r0 + rows, :]


@legato.function
def _mask_block(mask, b, h, r0, rows, t0, n, mask_b, mask_h):
    """The additive mask's rows r0 .. r0 + rows, keys t0 .. t0 + n, of (batch b, head h),
    loaded: [rows, n] (a block of the mask's leading dims kept, then reshaped on chip)."""
    bb = 0
    if mask_b:
        bb = b
    hh = 0
    if mask_h:
        hh = h
    if mask.ndim == 4:
        m = legato.tensor.load(mask[bb : bb + 1, hh : hh + 1, r0 : r0 + rows, t0 : t0 + n])
    elif mask.ndim == 3:
        m = legato.tensor.load(mask[hh : hh + 1, r0 : r0 + rows, t0 : t0 + n])
    else:
        m = legato.tensor.load(mask[r0 : r0 + rows, t0 : t0 + n])
    if mask.ndim > 2:
        m = legato.tensor.reshape(m, (rows, n))
    return m


@legato.function
def _rows_mask(mask, b, h, r0, rows, mask_b, mask_h):
    """The additive mask rows r0 .. r0 + rows of (batch b, head h), [rows, L] in f32."""
    f32 = legato.types.float("float32")
    m = _rows_mask_rows(mask, b, h, r0, rows, mask_b, mask_h)
    return legato.tensor.cast(legato.tensor.load(m), f32)


@legato.function
def _causal_pattern_t(lk, rows):
    """The static [2L - 1, rows] f32 pattern PT with PT[x, j] = 0 where x <= L - 1 + j, -inf
    elsewhere: rows L - 1 - r0 .. of it are the transposed causal mask of query rows r0 ..
    r0 + rows over L keys (key <= r0 + j). Built once per core, in one cat."""
    f32 = legato.types.float("float32")
    parts = (legato.tensor.full((lk, rows), 0.0, f32),)
    for i in legato.static_range(1, min(rows, lk)):  # x = L - 1 + i: -inf for j < i
        parts = parts + (
            legato.tensor.cat(
                (
                    legato.tensor.full((1, i), -math.inf, f32),
                    legato.tensor.full((1, rows - i), 0.0, f32),
                ),
                1,
            ),
        )
    if lk > rows:
        parts = parts + (legato.tensor.full((lk - rows, rows), -math.inf, f32),)
    return legato.tensor.cat(parts, 0)


def _row_groups(nrb, heads, ncores, most):
    """Compile-time helper: into how many groups a head's `nrb` row blocks split (each group
    one work item, its K loaded once): the fewest that divide nrb, give every core an item
    (heads * groups >= ncores where possible) and leave at most `most` blocks per group."""
    want = max(-(-ncores // heads), -(-nrb // most), 1)
    for g in range(min(want, nrb), nrb + 1):
        if nrb % g == 0:
            return g
    return nrb


@legato.function
def _rows_item(i, q, k, v, mask, scale, causal, has_mask, mask_b, mask_h, rows, kb, cpat, out, lse):
    """Item i = (batch b, head h, group of row blocks) of `rows_attention`: K[b, h] is loaded
    once, then each block of `rows` query rows is computed with keys along dim 0 as the decode
    items are: s^T = K @ q_rows^T [L, rows]."""
    f32 = legato.types.float("float32")
    nb, nh, s, d = q.shape
    lk = k.shape[2]
    rep = nh // k.shape[1]
    nrb = s // rows
    groups = _row_groups(nrb, nb * nh, legato.get_context().get_device().num_cores, ROW_UNROLL)
    per = nrb // groups
    bh = i // groups
    g0 = (i % groups) * per
    b = bh // nh
    h = bh % nh
    hk = h // rep
    kk = legato.tensor.load(k[b, hk])  # [L, D]: the activation of every block's scores
    for j in legato.static_range(per):
        r0 = (g0 + j) * rows
        qt = _t(legato.tensor.load(q[b, h, r0 : r0 + rows, :]))  # [D, rows]: the MPU weight
        sc = legato.tensor.matmul(kk, qt, f32) * scale  # [L, rows]
        if causal and lk > 1:
            # rows r0 .. r0 + rows of torch's causal mask, transposed: rows st .. st + L of
            # the static pattern (st = L - 1 - r0, clamped at 0 when every key is visible)
            st = max(lk - 1 - r0, 0)
            sc = sc + cpat[st : st + lk, :]
        if has_mask:
            sc = sc + _t(_rows_mask(mask, b, h, r0, rows, mask_b, mask_h))
        m, lsum, o = _softmax_v(sc, v, b, hk, 0, lk, kb)  # [1, rows], [1, rows], [rows, D]
        legato.tensor.memcpy(
            out[b : b + 1, h : h + 1, r0 : r0 + rows, :],
            legato.tensor.reshape(legato.tensor.cast(o / _t(lsum), q.dtype), (1, 1, rows, d)),
        )
        legato.tensor.memcpy(
            lse[b : b + 1, h : h + 1, r0 : r0 + rows],
            legato.tensor.reshape(m + legato.tensor.log(lsum), (1, 1, rows)),
        )


@legato.function
def rows_attention(q, k, v, mask, scale, causal, has_mask, mask_b, mask_h, rows, kb, out, lse):
    """Attention of q [B, Hq, S, D] over k/v [B, Hkv, L, D] on every core in blocks of `rows`
    query rows of one head; a work item is a group of a head's blocks (`_row_groups`), the
    items dealt round robin. The causal mask is torch's (top-left aligned: row i sees keys
    0 .. i). Writes out and lse [B, Hq, S]."""
    ncores = legato.get_context().get_device().num_cores
    nrb = q.shape[2] // rows
    heads = q.shape[0] * q.shape[1]
    items = heads * _row_groups(nrb, heads, ncores, ROW_UNROLL)
    c = legato.core_id()
    lk = k.shape[2]
    cpat = 0.0
    if causal and lk > 1:
        cpat = _causal_pattern_t(lk, rows)
    flags = (mask, scale, causal, has_mask, mask_b, mask_h, rows, kb, cpat)
    if items <= ncores:
        i = min(c, items - 1)  # cores beyond the items redo the last one (same values)
        _rows_item(i, q, k, v, *flags, out, lse)
    else:
        for i in range(c, items, ncores):
            _rows_item(i, q, k, v, *flags, out, lse)


def _shared_plan(nb, nh, nkv, s, rows, ncores):
    """Compile-time helper: (groups, per, share) of `rows_attention_shared`: each head's row
    blocks in `groups` items of `per` blocks (`_row_groups`), and the `share` = rep * groups
    cores of one key/value head (its query heads' items, consecutive cores)."""
    nrb = s // rows
    groups = _row_groups(nrb, nb * nh, ncores, ROW_UNROLL)
    return groups, nrb // groups, (nh // nkv) * groups


@legato.function
def _shared_scores(ks, src, qt, scale, causal, cpat, st, mt, has_mask, diag):
    """The f32 scores [pk, rows] of each K piece (keys src[j] * pk ..; `ks[j]` the piece as
    the MPU activation, qt = q_rows^T the weight), scaled, plus the causal pattern's rows
    st + t0 .. (`cpat`) and the transposed mask's rows t0 .. (`mt` [L, rows]): a runtime row
    offset into an on-chip tensor, a view. `diag` (the diagonal form of a causal mask,
    `rows_attention_shared`): piece 0 is the diagonal block, `cpat` its mask [pk, rows];
    piece j > 0 is wholly visible or wholly masked: `mt` is then the bias of every key in the
    pieces' order, [L, 1] (added to each of the piece's rows, broadcast)."""
    f32 = legato.types.float("float32")
    pk = ks[0].shape[0]
    scs = ()
    for j in legato.static_range(len(ks)):
        sc = legato.tensor.matmul(ks[j], qt, f32) * scale  # [pk, rows]
        if diag:
            if j == 0:
                sc = sc + cpat
            else:
                sc = sc + mt[j * pk : (j + 1) * pk, :]
        else:
            t0 = src[j] * pk
            if causal:
                sc = sc + cpat[st + t0 : st + t0 + pk, :]
            if has_mask:
                sc = sc + mt[t0 : t0 + pk, :]
        scs = scs + (sc,)
    return scs


@legato.function
def _shared_softmax_v(scs, vts, rows):
    """(m [1, rows], l [1, rows], o^T [D, rows]) of the keys' scores in pieces (`scs[j]`
    [pk, rows], f32) and their transposed V pieces (`vts[j]` [D, pk]): the keys are one KV
    block of torch's (at most TORCH_KV_SPLIT), so m is the max over every piece (floored at
    NEG_BIG, as `_fold_block` does: a fully masked row gets p = 0), p = exp(s - m) rounded to
    V's dtype, o^T = sum_j V_j^T @ p_j^T in f32: p_j^T [pk, rows] is the MPU weight (a small
    staging copy into mpu_buffer), the V piece the activation (in sram, where it arrived).
    Pieces of fewer than SHARE_CAT_KEYS keys are concatenated first (one softmax over all)."""
    f32 = legato.types.float("float32")
    pk = scs[0].shape[0]
    if pk < SHARE_CAT_KEYS:
        sc = legato.tensor.cat(scs, 0)  # [L, rows], the keys in the pieces' order
        m = legato.tensor.maximum(legato.tensor.amax(sc, 0, keepdim=True), NEG_BIG)
        e = legato.tensor.exp(sc - m)
        lsum = legato.tensor.sum(e, 0, keepdim=True)
        pt = e
        if vts[0].dtype != f32:
            pt = legato.tensor.cast(e, vts[0].dtype)
        ot = legato.tensor.full((vts[0].shape[0], rows), 0.0, f32)
        for j in legato.static_range(len(scs)):
            ot = ot + legato.tensor.matmul(vts[j], pt[j * pk : (j + 1) * pk, :], f32)
        return m, lsum, ot
    m = legato.tensor.full((1, rows), NEG_BIG, f32)
    for j in legato.static_range(len(scs)):
        m = legato.tensor.maximum(legato.tensor.amax(scs[j], 0, keepdim=True), m)
    lsum = legato.tensor.full((1, rows), 0.0, f32)
    ot = legato.tensor.full((vts[0].shape[0], rows), 0.0, f32)
    for j in legato.static_range(len(scs)):
        e = legato.tensor.exp(scs[j] - m)
        lsum = lsum + legato.tensor.sum(e, 0, keepdim=True)
        pt = e
        if vts[j].dtype != f32:
            pt = legato.tensor.cast(e, vts[j].dtype)
        ot = ot + legato.tensor.matmul(vts[j], pt, f32)
    return m, lsum, ot


@legato.function
def _head_rows(x, b, h, r0, n, heads):
    """Rows r0 .. r0 + n of head h of batch b, [n, D], in DRAM: of x [B, H, S, D], or (`heads`
    = (Hq, Hkv, D), the rotary form) of the projection's result x [S, H * D] whose head views
    the attention takes over (`_rotary_sources`: batch 1)."""
    if heads:
        d = heads[2]
        return x[r0 : r0 + n, h * d : (h + 1) * d]
    return x[b, h, r0 : r0 + n, :]


@legato.function
def _tables(cos, sin, t0, n):
    """The cos / sin rows [n, D] of positions t0 .. t0 + n (tables [1, 1, S, D]), loaded."""
    return (
        legato.tensor.load(cos[0, 0, t0 : t0 + n, :]),
        legato.tensor.load(sin[0, 0, t0 : t0 + n, :]),
    )


@legato.function
def _rotary(x, cs):
    """HF's rotary embedding of the rows x [n, D] at the positions of `cs` (their cos / sin
    rows, `_tables`): x * cos + cat(-x2, x1) * sin (x1, x2 the halves of D), with the
    single-core implementations the row phase runs (`aten.mul`, `unary`, `concat`, `add`):
    the same bits."""
    d = x.shape[1]
    rot = _aten.concat((_aten.unary(x[:, d // 2 : d], "neg"), x[:, 0 : d // 2]), 1)
    return _aten.add(_aten.mul(x, cs[0]), _aten.mul(rot, cs[1]))


@legato.function
def rows_attention_shared(
    q, k, v, mask, scale, causal, has_mask, mask_b, mask_h, rows, diag, out, lse
):
    """`_shared_attention` on [B, H, S, D] operands (no rotary)."""
    _shared_attention(
        q, k, v, 0.0, 0.0, mask, scale, causal, has_mask, mask_b, mask_h, rows, (), diag, out, lse
    )


@legato.function
def rows_attention_rotary(
    q, k, v, cos, sin, mask, scale, causal, has_mask, mask_b, mask_h, rows, heads, diag, out, lse
):
    """`_shared_attention` in its rotary form (`_rotary_sources`): q, k and v are the
    projections' [S, H * D] results (`heads` = (Hq, Hkv, D)), each core loads its rows of its
    head straight from them, and q's rows and each K piece are rotated on chip as loaded
    (`_rotary`, cos / sin [1, 1, S, D]): no row phase computes the head views and the rotary
    through shared DRAM before the attention."""
    _shared_attention(
        q,
        k,
        v,
        cos,
        sin,
        mask,
        scale,
        causal,
        has_mask,
        mask_b,
        mask_h,
        rows,
        heads,
        diag,
        out,
        lse,
    )


@legato.function
def _shared_attention(
    q, k, v, cos, sin, mask, scale, causal, has_mask, mask_b, mask_h, rows, heads, diag, out, lse
):
    """`rows_attention` with every key/value head's K and V read from DRAM once: its `share`
    cores (the items of its query heads, one item a core: `_shared_plan`) each load a piece
    of pk = L / share keys and send it to the others (core-to-core, queue SHARE_QUEUE + j to
    the j-th next core of the group, K then V^T), so each core holds all L keys in `share`
    pieces, its own first, then the piece of the j-th previous core. Scores, softmax and p @ V run piece by
    piece (`_shared_scores`, `_shared_softmax_v`; the causal and additive masks' rows taken
    at each piece's keys); the keys must be one KV block of torch's (L <= 512). The resolver
    picks this when the items are exactly the cores and L splits into the pieces. `diag`:
    the mask is torch's causal one (`causal_attention_masks`) and each core's rows are its own
    piece's keys, so only the mask's diagonal block and one row are read (`_shared_scores`)."""
    device = legato.get_context().get_device()
    if heads:
        nb, nh, nkv, d = 1, heads[0], heads[1], heads[2]
        s, lk = q.shape[0], k.shape[0]
    else:
        nb, nh, s, d = q.shape
        nkv, lk = k.shape[1], k.shape[2]
    rep = nh // nkv
    groups, per, share = _shared_plan(nb, nh, nkv, s, rows, device.num_cores)
    pk = lk // share
    c = legato.core_id()
    mem = c % share
    base = c - mem
    bh = c // groups
    g0 = (c % groups) * per
    b = bh // nh
    h = bh % nh
    hk = h // rep
    # the rotary form: the K piece's cos / sin rows first (its rotary is on the path of the
    # sends); a core's query rows among its own piece's keys (one query head a KV head, S ==
    # L) take theirs from the same rows
    same = rep == 1 and per * rows == pk
    ck, cq = (), ()
    if heads:
        ck = _tables(cos, sin, mem * pk, pk)
    kp = legato.tensor.load(_head_rows(k, b, hk, mem * pk, pk, heads))
    if heads:
        # rotated once, by the core that loads it, before any other load is issued: the
        # rotary's cat waits for every DMA in flight on this core (`lower_tensor_ops.cat`)
        kp = _rotary(kp, ck)
    vp = legato.tensor.load(_head_rows(v, b, hk, mem * pk, pk, heads))
    # the first block's q and mask rows in flight before the sends, which wait for kp (and
    # vtp) to arrive; nothing waits for them before the sends (an instruction issues in order)
    r0 = g0 * rows
    qn = legato.tensor.load(_head_rows(q, b, h, r0, rows, heads))
    if heads and not same:
        cq = _tables(cos, sin, r0, rows)
    mn, md = 0.0, 0.0
    if diag:
        # the mask is torch's causal one and this core's rows are its own piece's keys (the
        # diagonal form): the diagonal block [rows, pk], and the block's last row over every
        # key, whose key y is 0 iff y < (mem + 1) * pk: the bias of position y in the pieces'
        # order (the j-th previous core's piece, keys (mem - j) * pk .., is visible iff
        # j <= mem: every key of it before the block's rows, or every key after them)
        md = _mask_block(mask, b, h, r0, rows, r0, pk, mask_b, mask_h)
        mn = _mask_block(mask, b, h, r0 + rows - 1, 1, 0, lk, mask_b, mask_h)
    elif has_mask:
        mn = legato.tensor.load(_rows_mask_rows(mask, b, h, r0, rows, mask_b, mask_h))
    to, src = (), (mem,)
    for j in legato.static_range(1, share):
        to = to + (device.get_core(base + (mem + j) % share),)
        src = src + ((mem + share - j) % share,)
    for j in legato.static_range(1, share):
        legato.tensor.request_load(kp, to[j - 1], "sram", SHARE_QUEUE + j)
    vtp = _t(vp)  # [D, pk]: the MPU activation of o^T (each core transposes its own piece)
    for j in legato.static_range(1, share):
        legato.tensor.request_load(vtp, to[j - 1], "sram", SHARE_QUEUE + j)
    cpat = 0.0
    if causal:
        cpat = _causal_pattern_t(lk, rows)
    kpiece = legato.get_model().tensor_type(k.dtype, [pk, d], "sram")
    vpiece = legato.get_model().tensor_type(v.dtype, [d, pk], "sram")
    ks, vts = (kp,), (vtp,)
    for j in legato.static_range(1, share):
        ks = ks + (legato.tensor.receive_type(kpiece, SHARE_QUEUE + j, None, "sram"),)
    for jb in legato.static_range(per):
        r0 = (g0 + jb) * rows
        if jb > 0:
            qn = legato.tensor.load(_head_rows(q, b, h, r0, rows, heads))
            if heads and not same:
                cq = _tables(cos, sin, r0, rows)
            if has_mask:
                mn = legato.tensor.load(_rows_mask_rows(mask, b, h, r0, rows, mask_b, mask_h))
        if heads:
            if same:
                cq = (ck[0][jb * rows : (jb + 1) * rows, :], ck[1][jb * rows : (jb + 1) * rows, :])
            qn = _rotary(qn, cq)
        qt = _t(qn)  # [D, rows]: the MPU weight
        mt = 0.0
        if diag:
            f32 = legato.types.float("float32")
            cpat = _t(legato.tensor.cast(md, f32))  # [pk, rows]
            mt = _t(legato.tensor.cast(mn, f32))  # [L, 1]
        elif has_mask:
            mt = _t(legato.tensor.cast(mn, legato.types.float("float32")))  # [L, rows]
        st = 0
        if causal:
            st = max(lk - 1 - r0, 0)
        scs = _shared_scores(ks, src, qt, scale, causal, cpat, st, mt, has_mask, diag)
        if jb == 0:
            # the V pieces once the first block's scores are issued (each receive waits)
            for j in legato.static_range(1, share):
                vts = vts + (legato.tensor.receive_type(vpiece, SHARE_QUEUE + j, None, "sram"),)
        m, lsum, ot = _shared_softmax_v(scs, vts, rows)
        legato.tensor.memcpy(
            out[b : b + 1, h : h + 1, r0 : r0 + rows, :],
            legato.tensor.reshape(legato.tensor.cast(_t(ot / lsum), q.dtype), (1, 1, rows, d)),
        )
        legato.tensor.memcpy(
            lse[b : b + 1, h : h + 1, r0 : r0 + rows],
            legato.tensor.reshape(m + legato.tensor.log(lsum), (1, 1, rows)),
        )


@legato.function
def _copy_pieces(x, out, off, piece, n):
    """Copy rows [0, n) of every (b, h) of x [B, H, L, D] (n a multiple of `piece`) to rows
    off .. off + n of out, one piece of `piece` rows per step, the pieces dealt round robin."""
    nb, nh = x.shape[0], x.shape[1]
    per = n // piece
    ncores = legato.get_context().get_device().num_cores
    c = legato.core_id()
    for i in range(c, nb * nh * per, ncores):
        bh = i // per
        t0 = (i % per) * piece
        b = bh // nh
        h = bh % nh
        legato.tensor.memcpy(
            out[b : b + 1, h : h + 1, off + t0 : off + t0 + piece, :],
            legato.tensor.load(x[b : b + 1, h : h + 1, t0 : t0 + piece, :]),
        )


@legato.function
def _copy_tail(x, out, off, t0, n, first):
    """Copy rows [t0, t0 + n) of every (b, h) of x to rows off + t0 .. of out, one (b, h) per
    step, dealt round robin from core `first` on (so tails do not pile on core 0)."""
    nb, nh = x.shape[0], x.shape[1]
    ncores = legato.get_context().get_device().num_cores
    c = (legato.core_id() + ncores - first % ncores) % ncores
    for i in range(c, nb * nh, ncores):
        b = i // nh
        h = i % nh
        legato.tensor.memcpy(
            out[b : b + 1, h : h + 1, off + t0 : off + t0 + n, :],
            legato.tensor.load(x[b : b + 1, h : h + 1, t0 : t0 + n, :]),
        )


@legato.function
def cat_rows(xs, pieces, out):
    """torch.cat(xs, dim=2) of 4-d tensors [B, H, L_i, D] into out on every core: each operand
    is copied in pieces of `pieces[i]` rows per (b, h), then its remaining rows."""
    off = 0
    first = 0
    for j in legato.static_range(len(pieces)):
        x = xs[j]
        n = x.shape[2]
        full = n - n % pieces[j]
        if full > 0:
            _copy_pieces(x, out, off, pieces[j], full)
            first = first + x.shape[0] * x.shape[1] * (full // pieces[j])
        if n > full:
            _copy_tail(x, out, off, full, n - full, first)
            first = first + x.shape[0] * x.shape[1]
        off = off + n


def _tail_bits(p):
    """Compile-time helper: the sizes 2^k (high to low) whose sums make every tail of fewer
    than `p` rows."""
    return tuple(1 << k for k in range((p - 1).bit_length() - 1, -1, -1))


@legato.function
def _copy_rows(x, out, b, h, src, dst, n):
    """Copy rows src .. src + n of x[b, h] to rows dst .. dst + n of out[b, h] (n static; both
    slices hold all n rows at run time)."""
    legato.tensor.memcpy(
        out[b : b + 1, h : h + 1, dst : dst + n, :],
        legato.tensor.load(x[b : b + 1, h : h + 1, src : src + n, :]),
    )


@legato.function
def _copy_piece(x, out, i, per, p, off):
    """Copy whole piece i (of `per` pieces of p rows per (b, h), (b, h) major) of x to out,
    rows off + ... ."""
    nh = out.bounds[1]
    bh = i // per
    t = i - bh * per
    _copy_rows(x, out, bh // nh, bh % nh, t * p, off + t * p, p)


@legato.function
def cat_rows_dynamic(xs, pieces, out):
    """`cat_rows` where the lengths L_i (dim 2) may be runtime sizes. Operand i's whole pieces
    of `pieces[i]` rows, of every (b, h), go round robin over the cores; its tail
    (L_i % pieces[i] rows) is one more whole piece per (b, h), the one that ends at L_i (it
    rewrites rows of the piece before it with the same values), or, when L_i is shorter than a
    piece, pieces of 2^k rows, one per set bit k of L_i. The round robin runs on over the
    operands and the kinds of piece (`first`: the core that takes the next piece). So every
    copy moves the same runtime rows out of its source slice and into its destination slice:
    a destination never extends past the rows its source holds."""
    nh = out.bounds[1]
    nbh = out.bounds[0] * nh
    ncores = legato.get_context().get_device().num_cores
    c = legato.core_id()
    off = 0
    first = 0
    for j in legato.static_range(len(pieces)):
        x = xs[j]
        p = pieces[j]
        n = x.size(2)
        nfull = n // p
        for i in range((c + ncores - first) % ncores, nbh * nfull, ncores):
            _copy_piece(x, out, i, nfull, p, off)
        first = (first + nbh * nfull) % ncores
        tail = n - nfull * p
        long = min(nfull, 1)  # 1: at least one whole piece, so the tail's piece fits before L_i
        for i in range((c + ncores - first) % ncores, nbh * long * min(tail, 1), ncores):
            _copy_rows(x, out, i // nh, i % nh, n - p, off + n - p, p)
        first = (first + nbh * long * min(tail, 1)) % ncores
        bits = _tail_bits(p)
        for k in legato.static_range(len(bits)):
            w = bits[k]
            st = tail // (2 * w) * (2 * w)  # after the higher bits' pieces
            # bit k of a short L_i: every (b, h) copies its piece of w rows, or none does
            count = nbh * (1 - long) * (tail // w % 2)
            for i in range((c + ncores - first) % ncores, count, ncores):
                _copy_rows(x, out, i // nh, i % nh, st, off + st, w)
            first = (first + count) % ncores
        off = off + n


# --------------------------------------------------------------------------------------------
# Resolvers


def _nbytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _decode_need(keys: int, d: int, esz: int, rep: int, has_mask: bool) -> int:
    """SRAM bytes one decode work item holds for `keys` keys: K and V rows, f32 scores and
    probabilities (and the mask's f32 rows)."""
    return 2 * keys * d * esz + 3 * keys * rep * 4 + (keys * rep * 4 if has_mask else 0)


def _largest_divisor_at_most(n: int, cap: int) -> int:
    for r in range(max(1, min(n, cap)), 0, -1):
        if n % r == 0:
            return r
    return 1


def _decode_impl(fns, args, plan, name, **kw) -> Impl:
    """The Impl of a decode attention: `fns` = (its split-KV form, its one-core-per-group
    form), called with `args` then (split, kb) or (kb); `plan` = (split, kb, the partial slots
    per group, (groups, rep, D)): with split > 1 the partials' f32 scratch
    [groups, slots, rep, 2 + D]."""
    split, kb, slots, (groups, rep, d) = plan
    if split == 1:
        return Impl(fns[1], (*args, kb), name=name, spmd=True, **kw)
    scratch = (((groups, slots, rep, 2 + d), torch.float32),)
    return Impl(fns[0], (*args, split, kb), name=name, spmd=True, scratch=scratch, **kw)


def _dynamic_prefill(node, ctx, qkv, causal) -> Impl:
    """The Impl of a prefill attention over a runtime query length (`prefill_attention_dynamic`):
    causal, no explicit mask, a runtime KV length (a prompt's own keys: a DynamicCache that
    was empty), GQA's query heads in one MPU weight tile."""
    q, k, v = qkv
    tq, tk, tv = (_aten.val(x) for x in qkv)
    s, lk, lv = tq.shape[2], tk.shape[2], tv.shape[2]
    # k's and v's lengths may be symbols of their own (marked dynamic one by one, as a
    # DynamicCache's are): torch requires them equal at run time, the kernel reads the keys
    # up to the smaller; top-left causal (row i sees keys 0 .. i) for any L
    assert causal and not isinstance(lk, int) and not isinstance(lv, int), (
        "chip attention over a runtime query length is a causal prefill over a runtime KV "
        f"length (q {list(tq.shape)}, k {list(tk.shape)}, v {list(tv.shape)}, causal {causal})"
    )
    mask = _aten._attention_mask(node, ctx, tq, tk)[0]
    assert not isinstance(mask, torch.fx.Node), (
        "chip attention over a runtime query length takes no explicit mask"
    )
    nb, nh, _, d = tq.shape
    nkv = tk.shape[1]
    assert tk.shape[0] == nb and nh % nkv == 0, f"{nh} query heads over {nkv} key/value heads"
    assert d <= ctx.model.mpu_tile_k and nh // nkv <= ctx.model.mpu_tile_n, (
        f"chip prefill attention takes q^T [{d}, {nh // nkv}] as one MPU weight tile"
    )
    bounds = [ctx.bound(x) for x in (s, lk, lv)]
    assert None not in bounds, f"a dynamic length without an upper bound ({s}, {lk}, {lv})"
    kb = min(TORCH_KV_SPLIT, *bounds)
    scale = node.kwargs.get("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    return Impl(
        prefill_attention_dynamic,
        (q, k, v, scale, kb),
        name="chip prefill attention (runtime query length, causal)",
        spmd=True,
    )


@register(aten._scaled_dot_product_flash_attention_for_cpu.default)
def resolve_chip_sdpa(node, ctx):
    """All-core attention for HF's SDPA (q [B, Hq, S, D], k/v [B, Hkv, L, D]): decode (S == 1,
    no causal mask) split over KV groups and KV length, else over heads and query rows. L may
    be dynamic (bounded) in decode without a mask; S and L both dynamic in a causal prefill
    without a mask (`_dynamic_prefill`). Returns both outputs (the attention and its
    f32 logsumexp)."""
    q, k, v = node.args[:3]
    dropout = node.args[3] if len(node.args) > 3 else node.kwargs.get("dropout_p", 0.0)
    causal = bool(node.args[4] if len(node.args) > 4 else node.kwargs.get("is_causal", False))
    assert dropout == 0.0, "attention with dropout"
    tq, tk, tv = _aten.val(q), _aten.val(k), _aten.val(v)
    assert tq.dtype == tk.dtype == tv.dtype and tq.dtype in _aten._FLOATS, (
        f"attention on {tq.dtype}, {tk.dtype}, {tv.dtype} (bf16 or f32, one dtype)"
    )
    for t in (tq, tk, tv):
        assert t.dim() == 4, "attention needs [B, H, S, D] operands"
    for t in (tq, tk, tv):
        assert all(isinstance(d, int) for i, d in enumerate(t.shape) if i != 2), (
            "chip attention needs static batch, heads and head dim"
        )
    if not isinstance(tq.shape[2], int):
        return _dynamic_prefill(node, ctx, (q, k, v), causal)
    lk = tk.shape[2]
    dynamic = not isinstance(lk, int)
    # a dynamic KV length may be two symbols (k and v marked dynamic one by one, as a
    # DynamicCache's tensors are): torch's op requires them equal at run time (it raises
    # otherwise), and the kernel reads both with k's length
    assert tk.shape[0] == tq.shape[0] and all(
        statically_known_true(a == b)
        or (i == 2 and not isinstance(a, int) and not isinstance(b, int))
        for i, (a, b) in enumerate(zip(tk.shape, tv.shape))
    ), f"attention operand shapes (k {list(tk.shape)}, v {list(tv.shape)})"
    nb, nh, s, d = tq.shape
    nkv = tk.shape[1]
    assert nh % nkv == 0, f"{nh} query heads are not a multiple of {nkv} key/value heads"
    lk_max = ctx.bound(lk) if dynamic else lk
    assert lk_max is not None, f"the KV length {lk} is dynamic without an upper bound"
    # a runtime KV length has no single-core implementation (its K^T would be a runtime-length
    # MPU weight): all-core however small, else it would run eagerly. A small static one stays
    # on one core, fused with its neighbours.
    if not dynamic:
        total = (nb * nh * s * d + 2 * nb * nkv * lk * d) * tq.element_size()
        assert total >= CHIP_MIN_BYTES, (
            f"attention on {total} bytes stays on one core (fused; chip attention from "
            f"{CHIP_MIN_BYTES} bytes)"
        )
    rep = nh // nkv
    assert d <= ctx.model.mpu_tile_k and rep <= ctx.model.mpu_tile_n, (
        f"chip decode attention takes q^T [{d}, {rep}] as one MPU weight tile "
        f"(at most [{ctx.model.mpu_tile_k}, {ctx.model.mpu_tile_n}])"
    )
    scale = node.kwargs.get("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    mask, mask_b, mask_h = _aten._attention_mask(node, ctx, tq, tk)
    has_mask = isinstance(mask, torch.fx.Node)
    cores = ctx.model.num_cores
    esz = tq.element_size()
    if dynamic:
        assert s == 1 and not causal and not has_mask, (
            "chip attention over a dynamic KV length is the decode step's (one query row, "
            "no mask, not causal); prefill or a mask with a runtime KV length would need "
            "runtime-length MPU weights or masks, which the compiler does not take"
        )
        groups = nb * nkv
        split = max(1, cores // groups)
        # every KV tile is torch's 512-key block (fewer keys: one partial tile, as torch's);
        # a bound below 512 (a sliding window's slice of the cache) caps the tile: its keys are
        # one block of torch's either way, and a tile never exceeds the bound
        kb = min(TORCH_KV_SPLIT, lk_max)
        kp, vp = _append_parts(k, node, True), _append_parts(v, node, True)
        if kp is not None and vp is not None:
            fused = _dynamic_append_impl(ctx, q, kp, vp, (k, v), scale, (split, kb, rep, d))
            if fused is not None:
                return fused
        return _decode_impl(
            (decode_attention_dynamic, decode_attention_dynamic_unsplit),
            (q, k, v, scale),
            (split, kb, split, (groups, rep, d)),
            f"chip decode attention (runtime KV length, split-KV x{split})",
        )
    kb = min(lk, TORCH_KV_SPLIT)
    if s == 1 and not (causal and lk > 1):
        fused = _append_impl(node, ctx, (q, k, v), (scale, mask, mask_b, mask_h, kb))
        if fused is not None:
            return fused
        groups = nb * nkv
        # chunks of whole KV blocks (each core folds its blocks as torch does; a block cut
        # between cores would round p against another max than torch's); the last, partial
        # block (L % 512 keys: a decode step's cache plus its new token) is a partial of its own
        nfull = lk // kb
        split = max(1, min(cores // groups, nfull))
        while split > 1 and nfull % split:
            split -= 1
        tail = lk % kb if split > 1 else 0
        chunk = (lk - tail) // split
        # K and V chunks, scores and probabilities of one (group, chunk) in one core's SRAM;
        # past half of it (a long context), the chunk streams KV block by KV block
        need = _decode_need(chunk, d, esz, rep, has_mask)
        stream = need > ctx.model.sram_size // 2
        if stream:
            need = _decode_need(2 * kb, d, esz, rep, has_mask)
            assert need <= ctx.model.sram_size // 2, (
                f"two decode blocks of {kb} keys need {need} bytes of SRAM "
                f"(more than half of the {ctx.model.sram_size} of a core)"
            )
        fns = (
            (decode_attention_stream, decode_attention_stream_unsplit)
            if stream
            else (decode_attention, decode_attention_unsplit)
        )
        return _decode_impl(
            fns,
            (q, k, v, mask, scale, has_mask, mask_b, mask_h),
            (split, kb, split + (tail > 0), (groups, rep, d)),
            f"chip decode attention (split-KV x{split}{', streamed' if stream else ''})",
        )
    # prefill: blocks of query rows, enough of them for every core, scores within a budget
    blocks = nb * nh
    want = max(1, -(-s // max(1, cores // blocks)))  # rows per block for ~ one block per core
    rows = _largest_divisor_at_most(s, min(want, max(1, ROWS_SCORE_BYTES // (4 * lk)), 64))
    need = 2 * lk * d * esz + 4 * rows * lk * 4 + 2 * rows * d * 4
    assert need <= ctx.model.sram_size // 2, (
        f"prefill attention over {lk} keys needs {need} bytes of SRAM per block of {rows} rows "
        f"(more than half of the {ctx.model.sram_size} of a core; KV tiling not implemented)"
    )
    groups, _, share = _shared_plan(nb, nh, nkv, s, rows, cores)
    if (
        nb * nh * groups == cores
        and 1 < share <= MAX_QUEUE_SHARE
        and lk % share == 0
        and lk <= TORCH_KV_SPLIT
    ):
        # one item a core, L in whole pieces of one KV block: K and V read from DRAM once per
        # key/value head, not once per core (the tiny Llama prefill, EVT0: 8 copies of each)
        # the diagonal form: a recognized causal mask (`causal_attention_masks`), one query
        # head a KV head, S == L and one row block a core (each core's rows are its own K
        # piece's keys): the mask's diagonal block and one row are read, not its rows. Not
        # for pieces of fewer than SHARE_CAT_KEYS keys: measured, EVT1's 16 pieces of 8 keys
        # (their scores concatenated) 166280 -> 167104 cycles on the tiny Llama prefill
        diag = (
            has_mask
            and node.meta.get(CAUSAL_META, False)
            and rep == 1
            and s == lk
            and s // rows == groups
            and lk // share >= SHARE_CAT_KEYS
        )
        flags = (mask, scale, causal and lk > 1, has_mask, mask_b, mask_h, rows)
        rot = _rotary_sources(node) if nb == 1 else None
        if rot is not None:
            (q2, k2, v2, cos, sin), taken = rot
            return Impl(
                rows_attention_rotary,
                (q2, k2, v2, cos, sin, *flags, (nh, nkv, d), diag),
                name=f"chip attention ({rows}-row blocks, K/V shared by {share} cores, "
                "rotary and head views on chip"
                + (", causal mask's diagonal blocks)" if diag else ")"),
                spmd=True,
                takes=taken,
            )
        return Impl(
            rows_attention_shared,
            (q, k, v, *flags, diag),
            name=f"chip attention ({rows}-row blocks, K/V shared by {share} cores"
            + (", causal mask's diagonal blocks)" if diag else ")"),
            spmd=True,
        )
    return Impl(
        rows_attention,
        (q, k, v, mask, scale, causal, has_mask, mask_b, mask_h, rows, kb),
        name=f"chip attention ({rows}-row blocks)",
        spmd=True,
    )


_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}


def _flat_heads(t, taken: list):
    """The projection result Y [S, H * D] when `t` is its head view transpose(view(Y, [1, S,
    H, D]), 1, 2) (through views that keep Y's layout: HF's q/k/v views); the view nodes are
    appended to `taken`. None otherwise."""
    tv = t.meta.get("val") if isinstance(t, torch.fx.Node) else None
    if not (
        isinstance(tv, torch.Tensor)
        and t.op == "call_function"
        and t.target is aten.transpose.int
        and sorted(d % 4 for d in t.args[1:3]) == [1, 2]
    ):
        return None
    _, nh, s, d = tv.shape
    chain, y = [t], t.args[0]
    while isinstance(y, torch.fx.Node) and y.op == "call_function" and y.target in _VIEWS:
        chain.append(y)
        y = y.args[0]
    yv = y.meta.get("val") if isinstance(y, torch.fx.Node) else None
    if not (
        isinstance(yv, torch.Tensor)
        and tuple(yv.shape) == (s, nh * d)
        and yv.is_contiguous()
        and tuple(chain[1].meta["val"].shape) == (1, s, nh, d)
    ):
        return None
    taken += chain
    return y


def _rotate_half_of(r, x) -> list | None:
    """The nodes of rotate_half(x) = cat([-x[..., D/2:], x[..., :D/2]], -1) when `r` is that
    (HF's), None otherwise."""
    d = x.meta["val"].shape[-1]

    def half(n, lo):
        return (
            isinstance(n, torch.fx.Node)
            and n.target is aten.slice.Tensor
            and n.args[0] is x
            and n.args[1] % 4 == 3
            and n.args[2] == lo
            and n.args[3] >= lo + d // 2
            and (len(n.args) < 5 or n.args[4] == 1)
            and n.meta["val"].shape[-1] == d // 2
        )

    if not (r.target is aten.cat.default and len(r.args[0]) == 2 and r.args[1] % 4 == 3):
        return None
    neg, lo = r.args[0]
    if not (isinstance(neg, torch.fx.Node) and neg.target is aten.neg.default):
        return None
    if not (half(neg.args[0], d // 2) and half(lo, 0)):
        return None
    return [r, neg, neg.args[0], lo]


def _rotary_of(t, taken: list):
    """(Y, cos, sin) when the attention operand `t` is HF's rotary embedding of a head view of
    a projection's result Y (`_flat_heads`): t = x * cos + rotate_half(x) * sin, cos and sin
    [1, 1, S, D] of t's dtype; its nodes are appended to `taken`. None otherwise."""
    if not (
        isinstance(t, torch.fx.Node)
        and t.target is aten.add.Tensor
        and len(t.args) == 2
        and t.kwargs.get("alpha", 1) == 1
    ):
        return None
    tv = t.meta["val"]
    mc, ms = t.args
    muls = [m for m in (mc, ms) if isinstance(m, torch.fx.Node) and m.target is aten.mul.Tensor]
    if len(muls) != 2 or mc is ms:
        return None

    def table(n):
        v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
        return (
            isinstance(v, torch.Tensor)
            and v.dtype == tv.dtype
            and tuple(v.shape) == (1, 1, tv.shape[2], tv.shape[3])
        )

    # x * cos: x the head view (each mul's operands in either order: a product commutes)
    for x, cos in (mc.args, mc.args[::-1]):
        for r, sin in (ms.args, ms.args[::-1]):
            if not (table(cos) and table(sin) and isinstance(r, torch.fx.Node)):
                continue
            rot = _rotate_half_of(r, x) if isinstance(x, torch.fx.Node) else None
            if rot is None:
                continue
            mine: list = [t, mc, ms, *rot]
            y = _flat_heads(x, mine)
            if y is not None:
                taken += mine
                return y, cos, sin
    return None


def _rotary_sources(sdpa):
    """((Yq, Yk, Yv, cos, sin), nodes) when the prefill attention `sdpa` reads q and k as HF's
    rotary embedding (one cos / sin for both) of head views of projection results Yq, Yk and v
    as a head view of Yv, [S, H * D] each, and nothing else reads those rotary and view nodes:
    `rows_attention_rotary` then takes them over (`Impl.takes`), each core loading its head's
    rows of Y and rotating them on chip, instead of a row phase writing the rotated heads to
    shared DRAM for the attention to read back. None otherwise."""
    q, k, v = sdpa.args[:3]
    taken: list = []
    rq, rk = _rotary_of(q, taken), _rotary_of(k, taken)
    yv = _flat_heads(v, taken)
    if rq is None or rk is None or yv is None:
        return None
    for a, b in zip(rq[1:], rk[1:], strict=True):
        if a is b:
            continue
        # one table viewed twice (q's and k's own unsqueeze of it): k's view is taken too
        if not (
            a.op == b.op == "call_function"
            and a.target is b.target
            and a.target in (aten.unsqueeze.default, *_VIEWS)
            and a.args == b.args
            and a.kwargs == b.kwargs
        ):
            return None
        taken.append(b)
    inside = {*taken, sdpa}
    if len(set(taken)) != len(taken) or any(u not in inside for n in taken for u in n.users):
        return None
    return (rq[0], rk[0], yv, *rq[1:]), tuple(taken)


# appended rows (a decode step's new keys) folded in by one core per group: at most this many
APPEND_MAX_ROWS = 16


def _append_parts(x, sdpa, dynamic=False):
    """(cached, appended) when the attention operand `x` is `cat([cached, appended], dim=2)`
    of two 4-d tensors of static shapes (a KV cache's append: the cached rows first, a few
    new rows after), read by no other attention; else None. `dynamic`: the cached part's
    length (dim 2) is a runtime size, the appended part's static."""
    if not (isinstance(x, torch.fx.Node) and x.target is aten.cat.default):
        return None
    parts = x.args[0]
    dim = x.args[1] if len(x.args) > 1 else x.kwargs.get("dim", 0)
    tx = _aten.val(x)
    if tx.dim() != 4 or dim not in (2, -2) or not isinstance(parts, (list, tuple)):
        return None
    if len(parts) != 2 or not all(isinstance(p, torch.fx.Node) for p in parts):
        return None
    vals = [_aten.val(p) for p in parts]
    if not all(
        isinstance(t, torch.Tensor)
        and t.dim() == 4
        and t.dtype == tx.dtype
        and all(isinstance(d, int) for i, d in enumerate(t.shape) if i != 2 or j == 1)
        and (dynamic or isinstance(t.shape[2], int))
        and (not isinstance(t.shape[2], int) or t.shape[2] > 0)
        for j, t in enumerate(vals)
    ):
        return None
    if isinstance(vals[0].shape[2], int) == dynamic:
        return None
    if vals[1].shape[2] > APPEND_MAX_ROWS or (not dynamic and vals[0].shape[2] < vals[1].shape[2]):
        return None
    if any(u is not sdpa and u.target is sdpa.target for u in x.users):
        return None  # two attentions would both write it
    return tuple(parts)


def _append_impl(node, ctx, qkv, flags):
    """The decode attention with its operands' KV-cache appends fused (`Impl.writes`: the
    kernel writes both `cat` results; `decode_attention_append`), or None when k or v is not
    such an append (`_append_parts`), the mask does not span the keys, or a chunk does not fit
    a core's SRAM. q and the appended rows may come from a fused prologue (`Impl.values`)."""
    q, k, v = qkv
    scale, mask, mask_b, mask_h, kb = flags
    kp, vp = _append_parts(k, node), _append_parts(v, node)
    if kp is None or vp is None:
        return None
    tq, (tko, tkn), (tvo, tvn) = (
        _aten.val(q),
        (_aten.val(x) for x in kp),
        (_aten.val(x) for x in vp),
    )
    if tuple(tko.shape) != tuple(tvo.shape) or tuple(tkn.shape) != tuple(tvn.shape):
        return None
    has_mask = isinstance(mask, torch.fx.Node)
    if has_mask and _aten.val(mask).shape[-1] != _aten.val(k).shape[2]:
        return None
    nb, nh, _, d = tq.shape
    nkv, l0 = tko.shape[1], tko.shape[2]
    rep = nh // nkv
    groups = nb * nkv
    esz = tq.element_size()
    split = max(1, min(ctx.model.num_cores // groups, l0))
    while split > 1 and l0 % split:
        split -= 1
    chunk = l0 // split
    need = _decode_need(chunk, d, esz, rep, has_mask)
    if need > ctx.model.sram_size // 2:
        # a long context: each chunk streamed KV block by KV block (two blocks in SRAM)
        need = _decode_need(2 * kb, d, esz, rep, has_mask)
        if need > ctx.model.sram_size // 2:
            return None
        return _decode_impl(
            (decode_attention_append_stream, decode_attention_append_stream_unsplit),
            (q, kp[0], kp[1], vp[0], vp[1], mask, scale, (has_mask, mask_b, mask_h)),
            (split, kb, split, (groups, rep, d)),
            f"chip decode attention + KV append (split-KV x{split}, streamed)",
            values=frozenset({0, 2, 4}),
            writes=(k, v),
            onchip=need,
        )
    # one item per core: its cached rows are loaded before the prologue (`Impl.preload`)
    one = groups * split == ctx.model.num_cores
    pre = decode_append_preload if one else decode_append_no_preload
    return _decode_impl(
        (decode_attention_append, decode_attention_append_unsplit),
        (q, kp[0], kp[1], vp[0], vp[1], mask, scale, (has_mask, mask_b, mask_h)),
        (split, kb, split, (groups, rep, d)),
        f"chip decode attention + KV append (split-KV x{split}{', preloaded' if one else ''})",
        values=frozenset({0, 2, 4}),
        writes=(k, v),
        preload=(pre, (kp[0], vp[0], split)),
        onchip=need,
        preload_bytes=2 * chunk * d * esz if one else 0,
    )


def _dynamic_append_impl(ctx, q, kp, vp, kv, scale, plan):
    """The runtime-length decode attention with its operands' KV-cache appends fused
    (`decode_attention_dynamic_append`; `kp` / `vp` = (cached, appended) of k and v, `kv` the
    two `cat` nodes it writes), or None when their shapes differ or the cached length has no
    bound. q and the appended rows may come from a fused prologue (`Impl.values`): the
    decode step's rotary and scaling then run in the attention's kernel."""
    split, kb, rep, d = plan
    tko, tkn = (_aten.val(x) for x in kp)
    tvo, tvn = (_aten.val(x) for x in vp)
    if tuple(tkn.shape) != tuple(tvn.shape) or tuple(tko.shape[:2]) != tuple(tvo.shape[:2]):
        return None
    if tko.shape[3] != d or tvo.shape[3] != d:
        return None
    bound = ctx.bound(tko.shape[2])
    if bound is None or ctx.bound(tvo.shape[2]) is None:
        return None
    row = d * tko.element_size()
    piece = max(1, min(bound, CAT_PIECE_BYTES // row))
    groups = tko.shape[0] * tko.shape[1]
    kb = min(kb, bound)  # the cached part's KV tiles (the appended rows fold in after them)
    return _decode_impl(
        (decode_attention_dynamic_append, decode_attention_dynamic_append_unsplit),
        (q, kp[0], kp[1], vp[0], vp[1], scale, piece),
        (split, kb, split, (groups, rep, d)),
        f"chip decode attention + KV append (runtime KV length, split-KV x{split})",
        values=frozenset({0, 2, 4}),
        writes=kv,
    )


@register(aten.cat.default)
def resolve_chip_cat(node, ctx):
    """All-core `cat` along dim 2 of 4-d tensors (the KV cache's append); the lengths may be
    dynamic (bounded)."""
    xs, dim, dt = _aten._tensor_list(node, "cat")
    xs = [x for x in xs if not _aten._statically_empty(_aten.val(x), dim)]
    out = _aten.val(node)
    assert out.dim() == 4 and dim == 2 and len(xs) > 1, (
        "chip cat is for dim 2 of 4-d tensors (a KV cache's sequence dim)"
    )
    for x in xs:
        assert all(isinstance(d, int) for i, d in enumerate(_aten.val(x).shape) if i != 2), (
            "chip cat needs static batch, heads and head dim (only the length may be dynamic)"
        )
    lengths = [_aten.val(x).shape[2] for x in xs]
    dynamic = not all(isinstance(n, int) for n in lengths)
    bounds = [n if isinstance(n, int) else ctx.bound(n) for n in lengths]
    assert None not in bounds, f"cat of lengths {lengths}: a dynamic one has no upper bound"
    row = out.shape[3] * out.element_size()
    # the single-core cat takes static lengths only: a runtime one is all-core however small
    if not dynamic:
        total = sum(lengths) * out.shape[0] * out.shape[1] * row
        assert total >= CHIP_MIN_BYTES, (
            f"cat of {total} bytes stays on one core (chip copy from {CHIP_MIN_BYTES} bytes)"
        )
    pieces = tuple(max(1, min(n, CAT_PIECE_BYTES // row)) for n in bounds)
    if dynamic:
        return Impl(
            cat_rows_dynamic,
            (tuple(xs), pieces),
            name="chip cat (KV append, runtime length)",
            spmd=True,
        )
    return Impl(cat_rows, (tuple(xs), pieces), name="chip cat (KV append)", spmd=True)


# --------------------------------------------------------------------------------------------
# Causal masks recognized

SDPA_CPU = aten._scaled_dot_product_flash_attention_for_cpu.default
# node.meta key: the attention's explicit mask is a compile-time constant equal to torch's
# top-left causal mask (`causal_attention_masks`)
CAUSAL_META = "legato_causal_mask"
# a mask built from constants is evaluated at compile time up to this many elements (each of
# its intermediates too): transformers' [B, 1, S, L] causal mask of a static prompt
CONST_MASK_ELEMENTS = 1 << 22
_CONST_ARG = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout)
_CONST_ARG = _CONST_ARG + (torch.memory_format,)


def _constant_value(node, index):
    """The value of `node` when it depends on no graph input (an FX subgraph of deterministic
    ATen ops over compile-time arguments: transformers' masking_utils builds its causal mask
    from `arange`s and comparisons), computed here with torch; else None. Every intermediate
    is a static tensor of at most CONST_MASK_ELEMENTS elements; `index`: the graph's nodes ->
    their position (topological)."""
    order, seen, todo = [], set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            return None
        if n.is_impure() or torch.Tag.nondeterministic_seeded in n.target.tags:
            return None
        t = n.meta.get("val")
        if not isinstance(t, torch.Tensor) or not all(isinstance(d, int) for d in t.shape):
            return None
        if t.numel() > CONST_MASK_ELEMENTS:
            return None
        leaves = []
        torch.fx.node.map_aggregate((n.args, n.kwargs), leaves.append)
        if not all(isinstance(x, (torch.fx.Node, *_CONST_ARG)) for x in leaves):
            return None  # a SymInt (a runtime length), a tensor constant, ...
        order.append(n)
        todo.extend(n.all_input_nodes)
    env = {}
    for n in sorted(order, key=index.__getitem__):
        args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), lambda a: env[a])
        env[n] = n.target(*args, **kwargs)
    return env[node]


def is_causal_mask(m, s, lk) -> bool:
    """Whether the additive float mask `m` (2- to 4-d, broadcasting to [.., s, lk]) is exactly
    torch's top-left causal mask: 0 where key <= query row, -inf elsewhere, in every batch and
    head. Anything else (a padding mask, a sliding window, another fill value, a bottom-right
    mask of s != lk) is not."""
    if not m.is_floating_point() or m.dim() < 2 or tuple(m.shape[-2:]) != (s, lk) or s < 2:
        return False
    keep = torch.ones(s, lk, dtype=torch.bool).tril()
    want = torch.zeros(s, lk, dtype=m.dtype).masked_fill(~keep, float("-inf"))
    return bool(torch.equal(m, want.expand(m.shape)))


@register_graph_pass
def causal_attention_masks(gm) -> bool:
    """Mark `sdpa(q, k, v, attn_mask=M)` (node.meta[CAUSAL_META] = True) when M depends on no
    graph input and its value (computed at compile time, `_constant_value`) is exactly torch's
    top-left causal mask (`is_causal_mask`): transformers passes its causal mask explicitly
    (sdpa attention), so the causal structure is otherwise not visible. `resolve_chip_sdpa`
    then reads only the parts of M that it needs (`rows_attention_shared`'s diagonal form);
    M itself is unchanged, and every other reader takes it whole. The graph does not change
    (returns False)."""
    known = {}
    index = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not SDPA_CPU:
            continue
        m = node.kwargs.get("attn_mask")
        causal = node.args[4] if len(node.args) > 4 else node.kwargs.get("is_causal", False)
        if not isinstance(m, torch.fx.Node) or causal:
            continue
        tq, tk = (a.meta.get("val") for a in node.args[:2])
        if not isinstance(tq, torch.Tensor) or not isinstance(tk, torch.Tensor):
            continue
        s, lk = tq.shape[2], tk.shape[2]
        tm = m.meta.get("val")
        if not isinstance(s, int) or not isinstance(lk, int) or s < 2:
            continue  # one query row (a decode step): nothing to skip
        if not isinstance(tm, torch.Tensor) or tuple(tm.shape[-2:]) != (s, lk):
            continue
        if (m, s, lk) not in known:
            # real tensors: the backend runs under aot_autograd's fake tensor mode
            with unset_fake_temporarily():
                value = _constant_value(m, index)
                known[(m, s, lk)] = value is not None and is_causal_mask(value, s, lk)
        if known[(m, s, lk)]:
            node.meta[CAUSAL_META] = True
    return False
