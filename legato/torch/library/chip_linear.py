"""Chip-scale projections (issue 14): `mm(x, t(W))` and `addmm(b, x, t(W))` with W a parameter
(nn.Linear) on every core, W laid out once in the MPU's streaming layout.

Layout (`kernelgen.Layout`, made by the kernel module on the first call and again when W
changes; the `t(W)` is folded into it and never runs): W[N, K] is passed as
`wt[N / tn, K / 256, 256, tn]` with `wt[b, t] = W^T[256t:256t+256, tn*b:tn*b+tn]` (as
bench/kernels.py's make_gemv): each MPU weight tile is one contiguous block and the tiles of one
output column block follow each other. bf16 weights are in `mpu_dram` and stream into
`mpu_buffer`; f32 weights stay in shared DRAM and are loaded into sram (the compiler splits
them into bf16 halves).

Two implementations, both f32 accumulation rounded once to the output dtype (bias added in
f32 before the rounding, as torch's CPU addmm):
- decode (`linear_cols`, x small enough for one core's sram): output columns split over the
  cores; every core loads x, streams its blocks' tiles (unrolled `static_range`: the loads are
  issued ahead of the matmuls) and writes its columns. With fewer column blocks than cores
  (`split` > 1) a block's K-tiles are split over `split` cores, each writes an f32 partial into
  a scratch `[split, M, N]`, the cores meet at a barrier and each finalizes `tn / split` of its
  block's columns.
- decode with column blocks that do not fall evenly on the cores (Llama-7B's 11008 = 86 blocks
  of 128 on 32 or 64 cores; `linear_tiles`): the weight's tiles in (block, K-tile) order are
  shared out in equal contiguous ranges (bench/decoder.py's gemv_stage), each tile read once;
  f32 partials per (block, core) into a scratch, a barrier, then each block finalized by one
  core. (Whole rounds of one block per core would read 128 blocks for 86 on 64 cores.)
- many rows that fit one core's sram (`linear_gemm`, M >= GEMM_ROWS, or a runtime M with such a
  bound; a prefill's lm_head and projections at a few hundred tokens): every core loads x's
  K-slabs once and computes its column blocks over all rows, the tiles streamed ahead, each
  block's sum on the MPU in f32 (no partial through DRAM); `_gemm_tiles` picks a width at which
  the blocks fall evenly on the cores (32000 = 256 blocks of 125). Grouped and with a fused
  epilogue too; a runtime M above one core's sram runs it on chunks (`linear_chunks`).
- a runtime M with too few output columns for every core to get whole ones (a small model's
  projections: N = 64 or 128 on 32 cores, K one tile) and a bound that the single-core matmul
  (legato.torch.library.aten) does not fit in one core's sram (f32 at `legato.max_dynamic_dim`,
  a second prompt length's prefill): rows over the cores instead (`linear_row_chunks`, a
  separate form: core c computes the chunks c, c + p, ... of ceil(bound / p) rows in a runtime
  loop, every column block of each). Where the single-core matmul fits, it keeps the node
  (fused with its neighbours).
- prefill (`linear_rows_cols`, bf16, M a multiple of the group size): bench/gemm.py's SPMD GEMM
  (every core one column block and all rows; the cores of a group read A's k-slabs once and
  exchange them core to core), with the bias.

Several projections of one input to the same width (q/k/v, gate/up) are one kernel (`_merge`,
asked by the partitioner through `Impl.group_key`): their g weights are laid out once as one,
block b of it holding tn columns of each (`wt[N/tn, K/256, 256, g*tn]`), so a core computes
the same columns of every projection in one MPU pass per K-tile and writes each result (or
hands the g blocks to the fused epilogue: SiLU(gate) * up without writing gate or up); their
biases are laid out the same way. Decode forms (`linear_cols` without split-K,
`linear_tiles`, `_group_tiles`) and `linear_gemm` (`_gemm_tiles(p, n, g)`).

A runtime row count (a dynamic M bounded by the dim's bound: torch.compile's dynamic=True /
mark_dynamic, vLLM's token count) is taken by every decode form, alone or grouped: one kernel
serves every M, sized (sram, the decode test, the scratch) for the bound; x's column slabs and
the output's column blocks are single dma2d transfers over the runtime rows, a block's sum
starts from its first product (`_block`) or from a runtime-row view of a bound-sized zero, and
the f32 partials of split-K and tile ranges go to runtime-row views (`part[h, blk, 0:m]`) of
the scratch sized at the bound. Above the rows one core's sram holds (`max_decode_rows`: at
K = 4096 bf16, 64 on EVT0 and 128 on EVT1), a runtime M runs the decode form on each chunk of
that many rows, in a runtime loop (`_chunks`, or `_gemm_chunks` running `linear_gemm` when the
chunk has GEMM_ROWS rows or more; `linear_chunks` in the name; W read once per chunk, no fused
epilogue), instead of the prefill form, whose row pieces and core-to-core slabs have static
shapes. (So a runtime M of thousands of tokens at K = 4096 reads W once per 64 rows on EVT0:
DRAM-bound, not MPU-bound as `linear_rows_cols` is at a static M.)

K not a multiple of 256 (the decode forms and `linear_gemm`): the layout zero-pads W^T's rows to
whole K-tiles once, and the kernel zero-fills x's columns to match on the core (`_padded`; in
`linear_gemm` only the last slab): the extra products are exact zeros, so the result is the
unpadded matmul's. The prefill form `linear_rows_cols` takes whole tiles only (a static M past
the decode forms then runs them in chunks).

W is nn.Linear's `t(W)` of a parameter W[N, K] (folded into the layout) or a parameter used as
is as the [K, N] operand (GPT-2's Conv1D, `addmm(b, x, W)`; only where the single-core matmul
does not take it, so what ran there still does): the layout transposes only the former.

Refused (the node falls back to the single-core resolvers of legato.torch.library.aten, or runs
eagerly): a static M or one that the single-core matmul fits, with N with no tile width that
gives every core whole columns; other dtypes, W not a parameter or its `t(W)` used elsewhere.
"""

from __future__ import annotations

import torch

import legato
from legato.torch.kernelgen import PARAM_META, Layout
from legato.torch.library.aten import _alpha_beta, val
from legato.torch.registry import Impl, register

aten = torch.ops.aten
F32 = legato.types.float("float32")
BF16 = legato.types.float("bfloat16")
TK = 256  # the MPU weight tile's K
MIN_TN = 16  # narrower column blocks than this: split K instead (a decode step: 8, `_decode_tiles`)
# the narrowest block per core of a static decode step with no split-K tiling (`_decode_tiles`)
MIN_STEP_TN = 4
SINGLE_TILE_N = 128  # the MPU weight tile's N: a one-tile weight is one MPU load on one core
GEMM_ROWS = 32  # from this many rows (the bound of a runtime M) on: `linear_gemm`
# the weight tiles of a core's block `linear_cols` loads ahead (`first_tiles`), at most: they
# stay in mpu_buffer (a quarter of EVT0's) from the preload to the block's matmuls; all of
# them when they fit WHOLE_PRELOAD_BYTES (the phase then streams no tile of its own): with
# 64 KiB only, the tiny Llama's gate/up (two [256, 96] tiles a core on EVT0) had one tile
# preloaded and loaded the other after its RMSNorm prologue (decode EVT0 155.0k -> 152.5k
# cycles with both)
PRELOAD_BYTES = 64 * 1024
WHOLE_PRELOAD_BYTES = 96 * 1024


def preload_tiles(kt: int, tile_bytes: int) -> int:
    """How many of a block's kt weight tiles of tile_bytes each are loaded ahead."""
    if kt * tile_bytes <= WHOLE_PRELOAD_BYTES:
        return kt
    return max(1, min(kt, PRELOAD_BYTES // tile_bytes))


@legato.function
def _finish(acc, bias, j0, width, has_bias, dtype):
    """acc (+ bias[j0:j0+width] in f32), rounded once to `dtype`."""
    if has_bias:
        b = legato.tensor.cast(legato.tensor.load(bias[j0 : j0 + width]), F32)
        acc = acc + legato.tensor.reshape(b, (1, width))
    return legato.tensor.cast(acc, dtype)


@legato.function
def _store(out, acc, bias, j0, width, has_bias, epi, eargs, g=1):
    """out[:, j0:j0+width] = acc (+ bias) rounded to out's dtype; with an epilogue `epi` (an
    elementwise chain fused after the projection, generated by kernelgen) that block is handed
    to it instead: epi(y, r0, rows, j0, width, *eargs) computes the chain on it and writes the
    chain's outputs (slices of the tensors in eargs).

    g > 1 (several projections in one kernel, `_merge`): `out` is the tuple of the g results
    and [j0, j0+width) a block of their interleaved columns (`_group_layout`): g slices of
    width / g, slice i the columns [j0/g, (j0+width)/g) of result i; the epilogue gets the
    tuple of the g slices."""
    if g == 1:
        if epi is None:
            legato.tensor.memcpy(
                out[:, j0 : j0 + width], _finish(acc, bias, j0, width, has_bias, out.dtype)
            )
        else:
            epi(
                _finish(acc, bias, j0, width, has_bias, out.dtype),
                0,
                out.size(0),
                j0,
                width,
                *eargs,
            )
    else:
        y = _finish(acc, bias, j0, width, has_bias, out[0].dtype)
        w = width // g
        c0 = j0 // g
        ys = ()
        for i in legato.static_range(g):
            ys = ys + (y[:, i * w : (i + 1) * w],)
        if epi is None:
            for i in legato.static_range(g):
                legato.tensor.memcpy(out[i][:, c0 : c0 + w], ys[i])
        else:
            epi(ys, 0, out[0].size(0), c0, w, *eargs)


@legato.function
def _rows(out, g):
    """The row count of the result (of each result when g > 1): its bound when dynamic."""
    if g == 1:
        return out.bounds[0]
    return out[0].bounds[0]


@legato.function
def _onchip(x):
    """x itself when it is already on the core (computed by a fused prologue), else loaded."""
    if x.memory == "shared_dram":
        return legato.tensor.load(x)
    return x


@legato.function
def _onchip_cols(x, k0, width):
    """x[:, k0:k0+width] on the core (k0 a runtime offset when x is in shared DRAM)."""
    if x.memory == "shared_dram":
        return legato.tensor.load(x[:, k0 : k0 + width])
    return x[:, k0 : k0 + width]


@legato.function
def _padded(xs, kp):
    """xs [M, K] on the core, zero-filled to kp columns when K is not a multiple of 256 (the
    weight's K-tiles are zero-padded the same way, `_linear_impl`): the last K-tile's products
    with the zero columns are exact zeros."""
    k = xs.bounds[1]
    if k == kp:
        return xs
    if xs.spec.dims[0].is_dynamic:
        zero = legato.tensor.full((xs.bounds[0], kp - k), 0.0, xs.dtype)[0 : xs.size(0), :]
    else:
        zero = legato.tensor.full((xs.shape[0], kp - k), 0.0, xs.dtype)
    return legato.tensor.cat((xs, zero), 1)


@legato.function
def _slab(x, t):
    """x's K-slab t ([M, 256], zero-filled past K) on the core (t static)."""
    k = x.bounds[1]
    if (t + 1) * TK <= k:
        return _onchip_cols(x, t * TK, TK)
    return _padded(_onchip_cols(x, t * TK, k - t * TK), TK)


@legato.function
def _tile(wt, b, t, i, wmem, pre):
    """Weight tile t of column block b, the i-th (static) of the block's tiles the caller
    walks: `pre[i]` when it was loaded ahead (`first_tiles`)."""
    if i < len(pre):
        w = pre[i]
    else:
        w = legato.tensor.load(wt[b, t], wmem)
    return w


@legato.function
def _block(xs, wt, b, t0, nt, m, tn, wmem, pre=()):
    """f32 [m, tn]: xs[:, 256*t0 : 256*(t0+nt)] @ the K-tiles t0..t0+nt of column block b
    (`pre`: its first tiles, loaded ahead; t0 == 0). With a runtime row count (no zero tensor
    of a runtime size to start from) the first product starts the sum."""
    if xs.spec.dims[0].is_dynamic:
        acc = legato.tensor.matmul(xs[:, 0:TK], _tile(wt, b, t0, 0, wmem, pre), F32)
        for t in legato.static_range(1, nt):
            w = _tile(wt, b, t0 + t, t, wmem, pre)
            acc = acc + legato.tensor.matmul(xs[:, t * TK : (t + 1) * TK], w, F32)
    else:
        acc = legato.tensor.full((m, tn), 0.0, F32)
        for t in legato.static_range(nt):
            w = _tile(wt, b, t0 + t, t, wmem, pre)
            acc = acc + legato.tensor.matmul(xs[:, t * TK : (t + 1) * TK], w, F32)
    return acc


@legato.function
def first_tiles(wt, wmem, n):
    """The first n weight tiles of this core's column block (`linear_cols` with one block per
    core), loaded ahead (`Impl.preload`): before a fused prologue's steps (the RMSNorm the
    projection waits for), or, in a chain, before the previous phase (`kernelgen.
    generate_chain`), so the phase's first DRAM latency is not paid after its barrier."""
    c = legato.core_id()
    tiles = ()
    for t in legato.static_range(n):
        tiles = tiles + (legato.tensor.load(wt[c, t], wmem),)
    return tiles


@legato.function
def linear_cols(x, wt, bias, out, part, has_bias, split, wmem, epi=None, eargs=(), g=1, pre=()):
    """Decode: out[M, N] = x @ W^T (+ bias), output columns over the cores (module docstring);
    g > 1: the g projections of `_merge` (split must be 1); `pre`: the first tiles of the
    core's block, loaded ahead (`first_tiles`; one block per core, split 1)."""
    device = legato.get_context().get_device()
    p = device.num_cores
    nb, kt, tk, tn = wt.shape
    m = x.size(0)  # a runtime index when the row count is dynamic (M tokens)
    c = legato.core_id()
    if split == 1:
        xs = _padded(_onchip(x), kt * TK)
        if nb == p:
            acc = _block(xs, wt, c, 0, kt, m, tn, wmem, pre)
            _store(out, acc, bias, c * tn, tn, has_bias, epi, eargs, g)
        else:
            # rounds of p blocks, unrolled (a runtime loop over blocks runs out of mpu_buffer:
            # the compiler keeps more tile buffers live in it than mpu_buffer holds); in the
            # last round the cores past the last block redo it (same values, same columns)
            for j in legato.static_range((nb + p - 1) // p):
                b = min(c + j * p, nb - 1)
                acc = _block(xs, wt, b, 0, kt, m, tn, wmem)
                _store(out, acc, bias, b * tn, tn, has_bias, epi, eargs, g)
    else:
        per = kt // split
        blk = c // split
        h = c % split
        if x.bounds[1] == kt * TK:
            xs = _onchip_cols(x, h * per * TK, per * TK)
        else:  # K zero-filled to whole tiles on the core, then this core's share of it
            xs = _padded(_onchip(x), kt * TK)[:, h * per * TK : (h + 1) * per * TK]
        acc = _block(xs, wt, blk, h * per, per, m, tn, wmem)
        cols = tn // split
        j0 = blk * tn + h * cols
        if x.spec.dims[0].is_dynamic:
            # part[split, nb, M, tn] (`_linear_impl`): the partial is the contiguous
            # runtime-row view part[h, blk, 0:m] of the scratch sized at the bound; the split
            # partials are loaded one by one (a [split, ?M, cols] copy has a runtime stride)
            legato.tensor.memcpy(part[h, blk, 0:m, :], acc)
            legato.sync.barrier()
            k0 = h * cols
            total = legato.tensor.load(part[0:1, blk : blk + 1, 0:m, k0 : k0 + cols])[0, 0]
            for s in legato.static_range(1, split):
                piece = legato.tensor.load(part[s : s + 1, blk : blk + 1, 0:m, k0 : k0 + cols])
                total = total + piece[0, 0]
        else:
            legato.tensor.memcpy(
                part[h : h + 1, :, blk * tn : (blk + 1) * tn],
                legato.tensor.reshape(acc, (1, m, tn)),
            )
            legato.sync.barrier()
            parts = legato.tensor.load(part[0:split, :, j0 : j0 + cols])
            total = legato.tensor.sum(parts, 0)
        _store(out, total, bias, j0, cols, has_bias, epi, eargs)
    assert tk == TK and x.bounds[0] == _rows(out, g)


@legato.function
def linear_tiles(x, wt, bias, out, part, has_bias, slots, wmem, epi=None, eargs=(), g=1):
    """Decode with column blocks that do not fall evenly on the cores: out[M, N] = x @ W^T
    (+ bias), the T = blocks * K-tiles weight tiles shared out in (block, K-tile) order, core c
    the tiles [c*T/p, (c+1)*T/p) (equal shares up to one tile, every tile read once, as
    bench/decoder.py's gemv_stage). A core walks its range with runtime loops (one tile load and
    one MPU pass per step), writes an f32 partial per block it touched into slot `c - first core
    of the block` of `part[blocks, slots, M, tn]` (a block's first core zeroes the slots no core
    writes); after a barrier, core c finalizes blocks c, c + p, ... (sum of the slots, bias,
    one rounding). g > 1: the g projections of `_merge`."""
    device = legato.get_context().get_device()
    p = device.num_cores
    nb, kt, tk, tn = wt.shape
    mb = x.bounds[0]
    dynamic = x.spec.dims[0].is_dynamic
    m = x.size(0)  # a runtime index when the row count is dynamic (M tokens)
    tiles = nb * kt
    c = legato.core_id()
    xs = _padded(_onchip(x), kt * TK)
    start = c * tiles // p
    end = (c + 1) * tiles // p
    b_lo = start // kt
    for b in range(b_lo, min((end + kt - 1) // kt, b_lo + end - start)):
        if dynamic:  # runtime-row views of bound-sized zeros (and below, of the scratch)
            acc = legato.tensor.full((mb, tn), 0.0, F32)[0:m, :]
        else:
            acc = legato.tensor.full((m, tn), 0.0, F32)
        for t in range(max(start - b * kt, 0), min(end - b * kt, kt)):
            w = legato.tensor.load(wt[b, t], wmem)
            acc = acc + legato.tensor.matmul(xs[:, t * TK : (t + 1) * TK], w, F32)
        first = ((b * kt + 1) * p - 1) // tiles
        last = ((b * kt + kt) * p - 1) // tiles
        slot = c - first
        s0 = slots - (slots - (last - first + 1)) * (1 - min(slot, 1))  # the unwritten slots
        if dynamic:
            legato.tensor.memcpy(part[b, slot, 0:m, :], acc)
            zero = legato.tensor.full((mb, tn), 0.0, F32)[0:m, :]
            for s in range(s0, slots):
                legato.tensor.memcpy(part[b, s, 0:m, :], zero)
        else:
            legato.tensor.memcpy(
                part[b : b + 1, slot : slot + 1, :, :], legato.tensor.reshape(acc, (1, 1, m, tn))
            )
            zero = legato.tensor.full((1, 1, m, tn), 0.0, F32)
            for s in range(s0, slots):
                legato.tensor.memcpy(part[b : b + 1, s : s + 1, :, :], zero)
    legato.sync.barrier()
    for b in range(c, nb, p):
        if dynamic:  # the slots one by one ([slots, ?M, tn] in sram would have a runtime stride)
            total = legato.tensor.load(part[b, 0, 0:m, :])
            for q in legato.static_range(1, slots):
                total = total + legato.tensor.load(part[b, q, 0:m, :])
        else:
            parts = legato.tensor.load(part[b, 0:slots, :, :])
            total = legato.tensor.sum(parts, 0)
        _store(out, total, bias, b * tn, tn, has_bias, epi, eargs, g)
    assert tk == TK and mb == _rows(out, g)


@legato.function
def linear_blocks(x, wt, bias, out, has_bias, wmem, epi=None, eargs=(), g=1):
    """Decode with column blocks that do not fall evenly on the cores, when whole blocks give
    no core more tiles than `linear_tiles`' equal ranges would (`_blocks_even`: the lm_head's
    32000 columns, 250 blocks of 128 x 2 K-tiles, 16 tiles at most either way on 32 cores, 8
    on 64): core c computes blocks c, c + p, ... whole (runtime loops, one tile load and one
    MPU pass per step, as `linear_tiles`) and writes each once: no f32 partial, no barrier and
    no finalize pass (the tiny Llama decode's lm_head, EVT0: the pass after the barrier alone
    took 4.0k cycles). g > 1: the g projections of `_merge`. Static M only."""
    device = legato.get_context().get_device()
    p = device.num_cores
    nb, kt, tk, tn = wt.shape
    m = x.size(0)
    c = legato.core_id()
    xs = _padded(_onchip(x), kt * TK)
    for b in range(c, nb, p):
        acc = legato.tensor.full((m, tn), 0.0, F32)
        for t in range(kt):
            w = legato.tensor.load(wt[b, t], wmem)
            acc = acc + legato.tensor.matmul(xs[:, t * TK : (t + 1) * TK], w, F32)
        _store(out, acc, bias, b * tn, tn, has_bias, epi, eargs, g)
    assert tk == TK and m == _rows(out, g)


def _blocks_even(nb: int, kt: int, p: int) -> bool:
    """Whether whole column blocks (`linear_blocks`) give no core more weight tiles than the
    tile-range form (`linear_tiles`) would: its largest share is ceil(nb * kt / p) tiles."""
    return -(-nb // p) * kt <= -(-(nb * kt) // p)


@legato.function
def linear_gemm(x, wt, bias, out, has_bias, wmem, epi=None, eargs=(), g=1):
    """Many rows (prefill): out[M, N] = x @ W^T (+ bias) with the MPU's time in mind: x's kt
    column slabs [M, 256] are loaded once, each straight from DRAM into a buffer of its own,
    and reused by every column block (sliced from a loaded x, each block's matmuls would wait
    for a copy of its slab into one shared buffer); core c computes the blocks c, c + p, ... in
    unrolled rounds (the weight tiles loaded ahead of their matmuls, the sum in f32, one
    rounding, no partial through DRAM). `_gemm_tiles` picks tn so that the blocks fall evenly
    on the cores where a width divides N / p (32000 on 32 cores: tn = 125, 8 blocks each);
    else the last round's spare cores redo the last block (same values, same columns). A
    runtime row count (M tokens, at most the bound) is taken as by the decode forms: the
    slabs are dma2d transfers over the runtime rows and a block's sum starts from its first
    product. g > 1: the g projections of `_merge`."""
    device = legato.get_context().get_device()
    p = device.num_cores
    nb, kt, tk, tn = wt.shape
    m = x.size(0)  # a runtime index when the row count is dynamic (M tokens)
    c = legato.core_id()
    slabs = ()
    for t in legato.static_range(kt):
        slabs = slabs + (_slab(x, t),)
    rounds = (nb + p - 1) // p
    w = legato.tensor.load(wt[min(c, nb - 1), 0], wmem)
    for j in legato.static_range(rounds):
        b = min(c + j * p, nb - 1)
        for t in legato.static_range(kt):
            # the next tile (of this block, else of the next round's) is loaded before this
            # matmul: a block's finish (cast, store) waits for its last matmul and holds up
            # the instructions after it
            if t + 1 < kt:
                wn = legato.tensor.load(wt[b, t + 1], wmem)
            elif j + 1 < rounds:
                wn = legato.tensor.load(wt[min(c + (j + 1) * p, nb - 1), 0], wmem)
            if t == 0:
                if x.spec.dims[0].is_dynamic:
                    acc = legato.tensor.matmul(slabs[0], w, F32)
                else:
                    acc = legato.tensor.full((m, tn), 0.0, F32)
                    acc = acc + legato.tensor.matmul(slabs[0], w, F32)
            else:
                acc = acc + legato.tensor.matmul(slabs[t], w, F32)
            if t + 1 < kt or j + 1 < rounds:  # (K = 256 in one round: no next tile)
                w = wn
        _store(out, acc, bias, b * tn, tn, has_bias, epi, eargs, g)
    assert tk == TK and x.bounds[0] == _rows(out, g)


def _slots(tiles: int, kt: int, p: int) -> int:
    """The most cores whose tile range [c*T/p, (c+1)*T/p) meets one block of `kt` tiles."""
    ranges = [(c * tiles // p, (c + 1) * tiles // p) for c in range(p)]
    return max(
        sum(1 for lo, hi in ranges if max(lo, b * kt) < min(hi, (b + 1) * kt))
        for b in range(tiles // kt)
    )


@legato.function
def _spmd_acc(accs, d, x, w):
    """accs[d] += x @ w (one `mpu.mm` accumulating in place)."""
    return accs[:d] + (accs[d] + legato.tensor.matmul(x, w, F32),) + accs[d + 1 :]


@legato.function
def _wpart(wt, c, t, p, pw):
    """Columns [p*pw, (p+1)*pw) of core c's weight tile t, in the mpu_buffer."""
    if pw == wt.shape[3]:
        return legato.tensor.load(wt[c, t], "mpu_buffer")
    w = legato.tensor.load(wt[c : c + 1, t : t + 1, :, p * pw : (p + 1) * pw], "mpu_buffer")
    return legato.tensor.reshape(w, (TK, pw))


@legato.function
def _spmd_part(out, acc, bb, r0, rows, col, pw, p, has_bias, g=1, h=1, keep=False):
    """Rows [r0, r0+rows) of part p of h of the core's columns (+ bias), rounded and written
    (keep: rounded only, for a fused epilogue):
    g = 1: out's columns [col, col+pw); g > 1: the g projections' interleaved columns (as
    `_store`), part p holding projections [p*g/h, (p+1)*g/h), their columns [col, col+pw*h/g)."""
    if has_bias:
        acc = acc + bb
    y = legato.tensor.cast(acc, BF16)
    if keep:
        pass  # a fused epilogue's (`linear_rows_cols_parts`): not written
    elif g == 1:
        legato.tensor.memcpy(out[r0 : r0 + rows, col : col + pw], y)
    else:
        w = pw * h // g
        for j in legato.static_range(g // h):
            legato.tensor.memcpy(
                out[p * (g // h) + j][r0 : r0 + rows, col : col + w], y[:, j * w : (j + 1) * w]
            )
    return y


@legato.function
def _spmd_out(out, acc, bb, r0, rows, c0, tn, has_bias, g=1, epi=None, eargs=()):
    """Rows [r0, r0+rows) of the core's columns [c0, c0+tn) (+ bias), rounded and written;
    g > 1: the g projections' interleaved columns, as `_store` (with an epilogue `epi`, as
    `_store`: the tuple of their g slices handed to it instead). Returns (the rounded block,
    the blocks the epilogue wrote: the caller keeps them all to the end, as the casts)."""
    if has_bias:
        acc = acc + bb
    y = legato.tensor.cast(acc, BF16)
    kept = ()
    if epi is not None:
        w = tn // g
        ys = ()
        for i in legato.static_range(g):
            ys = ys + (y[:, i * w : (i + 1) * w],)
        kept = epi(ys, r0, rows, c0 // g, w, *eargs)
    elif g == 1:
        legato.tensor.memcpy(out[r0 : r0 + rows, c0 : c0 + tn], y)
    else:
        w = tn // g
        j0 = c0 // g
        for i in legato.static_range(g):
            legato.tensor.memcpy(out[i][r0 : r0 + rows, j0 : j0 + w], y[:, i * w : (i + 1) * w])
    return y, kept


@legato.function
def _spmd_epi(outs, epi, eargs, dd, grp, h, r0, rows, j0, pw):
    """The fused epilogue on piece dd's h rounded slices (outs[p * grp + dd], part p the
    projection p: `linear_rows_cols_parts`), rows [r0, r0+rows), columns [j0, j0+pw) of each."""
    ys = ()
    for p in legato.static_range(h):
        ys = ys + (outs[p * grp + dd],)
    return epi(ys, r0, rows, j0, pw, *eargs)


@legato.function
def _aslab(a, xa, i, r, t, fused):
    """Slab t ([r, 256]) of the core's row piece i of x: loaded from `a` in shared DRAM, or
    (`fused`) a slice of the piece `xa` a fused piece prologue computed on chip
    (`Impl.rows_prologue`)."""
    if not fused:
        return legato.tensor.load(a[i * r : (i + 1) * r, t * TK : (t + 1) * TK])
    return xa[:, t * TK : (t + 1) * TK]


@legato.function
def _piece(pro, pargs, i, r, grp):
    """The loads of the fused piece prologue of rows [i*r, (i+1)*r) (`Impl.rows_prologue`),
    issued first; None without one."""
    if pro is None:
        return None
    return pro[0](i * r, grp, *pargs)


@legato.function
def _piece_run(pro, pargs, ld, i, r, grp):
    """The fused piece prologue's value (x's rows [i*r, (i+1)*r), on chip), or None."""
    if pro is None:
        return None
    return pro[1](ld, i * r, grp, *pargs)


@legato.function
def linear_rows_cols(a, wt, bias, has_bias, grp, out, g=1, epi=None, eargs=(), pro=None, pargs=()):
    """Prefill: bench/gemm.py's make_gemm_spmd (see its docstring) with a bias: core c owns the
    output columns [c*tn, (c+1)*tn) and every row; the cores of a group of `grp` read each
    k-slab of `a` once between them (r = M / grp rows each, two slabs ahead) and send their
    piece to the others of the group (queue d: the core d places on), one send per matmul.
    g > 1: the g projections of `_merge` (their columns interleaved, as `linear_gemm`'s). No
    fused epilogue that loads: the grp pieces of a core's columns are finished one after the
    other at the last K-tile, and an epilogue there (its loads, the blocks it writes) held up
    the pieces after it (the tiny Llama prefill, EVT0: 363.2k cycles with the residual adds and
    SiLU(gate) * up fused here, 316.4k with them as row phases of the chain). An epilogue of
    the g results alone (`Impl.epilogue_own`: SiLU(gate) * up; g > 1) gets each piece's g
    slices on chip (`_spmd_out`), so gate and up are never written nor read back.

    The schedule is bench/gemm.py's, repeated here on purpose (the library cannot import the
    bench, and the bench kernel stays the independent hand-written reference the
    `torch_gemm_prefill` row is measured against), with the same arithmetic in the same order
    but its DMAs issued earlier: every load of the next slab and tile goes out before the sends
    that wait for a slab to arrive, and a slab goes to the others one send after each matmul
    (bench/gemm.py sends before the matmul, and loads slab s+2 after the first send of s+1).
    An instruction issues in order, so a send waiting for its slab held up the loads behind it
    (DRAM idle meanwhile) and the matmuls behind it: at 16-row pieces (the tiny Llama prefill,
    EVT0, alone) gate/up 14.2k -> 11.7k cycles, q/k/v 8.4k -> 7.2k, down 9.0k -> 8.5k; at 64
    rows (`torch_gemm_prefill`) 279.9k -> 275.4k.

    `pro` (`Impl.rows_prologue`; `a` is then None): the row-local work computing x (a
    prefill's residual add + RMSNorm) fused as a prologue: each core computes its piece of x
    on chip (its loads issued first, then the first weight tiles', then its steps) and sends
    slices of it; no core reads x from DRAM, and every group starts on slab 0 (the staggered
    first slab spreads x's reads over the DRAM channels)."""
    device = legato.get_context().get_device()
    num_cores, kt, tk, tn = wt.shape
    m = out.shape[0] if g == 1 else out[0].shape[0]
    r = m // grp
    spread = max(1, device.model.num_memory_channels // 2 // (num_cores // grp))
    slab = legato.get_model().tensor_type(BF16, [r, TK], "sram")
    c = legato.core_id()
    i = c % grp
    base = c - i
    off = (c // grp) * spread % kt if pro is None else 0
    bb = None
    if has_bias:
        bb = legato.tensor.reshape(
            legato.tensor.cast(legato.tensor.load(bias[c * tn : (c + 1) * tn]), F32), (1, tn)
        )
    to, piece, accs, outs, kept = (), (), (), (), ()
    for d in legato.static_range(grp):
        if d > 0:
            to = to + (device.get_core(base + (i + d) % grp),)
        piece = piece + ((i + grp - d) % grp,)
        accs = accs + (legato.tensor.full((r, tn), 0.0, F32),)
    # x's first slab first (the group's other cores wait for it), then the first weight tile,
    # the second slab and the second tile: all in flight before the sends of the first slab,
    # which wait for it to arrive (an instruction issues in order: a load after them would
    # leave DRAM idle meanwhile)
    ld = _piece(pro, pargs, i, r, grp)
    if pro is None:
        x0 = _aslab(a, (), i, r, off, pro is not None)
    w = legato.tensor.load(wt[c, off], "mpu_buffer")
    if kt > 1:
        t = (off + 1) % kt
        if pro is None:
            x1 = _aslab(a, (), i, r, t, pro is not None)
        wn = legato.tensor.load(wt[c, t], "mpu_buffer")
    xa = _piece_run(pro, pargs, ld, i, r, grp)
    if pro is not None:
        x0 = _aslab(a, xa, i, r, 0, pro is not None)
        if kt > 1:
            x1 = _aslab(a, xa, i, r, 1, pro is not None)
    for d in legato.static_range(1, grp):
        legato.tensor.request_load(x0, to[d - 1], "sram", d)
    for s in legato.static_range(kt):
        last = s + 1 == kt
        if not last and s > 0:
            wn = legato.tensor.load(wt[c, (off + s + 1) % kt], "mpu_buffer")
        if s + 2 < kt:  # a whole slab's matmuls ahead of its sends
            x2 = _aslab(a, xa, i, r, (off + s + 2) % kt, pro is not None)
        accs = _spmd_acc(accs, 0, x0, w)
        for d in legato.static_range(1, grp):
            y = legato.tensor.receive_type(slab, d, None, "sram")
            accs = _spmd_acc(accs, d, y, w)
            if not last:  # the next slab to one core per matmul, after it (not holding it up)
                legato.tensor.request_load(x1, to[d - 1], "sram", d)
            if last and d >= 2:
                o = _spmd_out(
                    out, accs[d - 2], bb, piece[d - 2] * r, r, c * tn, tn, has_bias, g, epi, eargs
                )
                outs = outs + (o[0],)
                kept = kept + o[1]
        if last:
            for d in legato.static_range(max(grp - 2, 0), grp):
                o = _spmd_out(
                    out, accs[d], bb, piece[d] * r, r, c * tn, tn, has_bias, g, epi, eargs
                )
                outs = outs + (o[0],)
                kept = kept + o[1]
            # every cast keeps its own buffer to the end (a cast into a buffer whose write is
            # in flight would wait), and every epilogue's written blocks theirs
            for d in legato.static_range(grp):
                legato.tensor.reshape(outs[d], (r * tn,))
            for v in kept:
                legato.tensor.reshape(v, (r * (tn // g),))
        else:
            x0 = x1
            if s + 2 < kt:
                x1 = x2
            w = wn
    assert tk == TK and (pro is not None or m == a.shape[0])


@legato.function
def linear_rows_cols_parts(
    a, wt, bias, has_bias, grp, g, parts, out, epi=None, eargs=(), pro=None, pargs=()
):
    """`linear_rows_cols` (its schedule, its arithmetic in the same order) for the g
    projections of a group with each weight tile read and multiplied in `parts` column parts
    (`_rows_cols_parts`; whole projections each): every piece's matmul on part 0, then on part
    1, ..., the next slab's sends after the last part's matmuls. A core's DMAs are served in
    about the order they were issued and chip-wide the kernel is DRAM-bound, so the matmuls of
    part 0 run while the later parts are still read (with the whole tile they waited for all
    of it); a column's sums are the same, so the results are bit-equal. Alone, EVT0 (16-row
    pieces): gate/up 11.7k -> 10.1k cycles, q/k/v 7.2k -> 6.3k. A separate function, not
    `linear_rows_cols` at parts = 1: at parts = 1 this one ran the EVT1 tiny Llama prefill
    1.5k cycles slower than `linear_rows_cols` (cause not found). With an epilogue of the g
    results (`Impl.epilogue_own`; parts == g: part p is projection p) each piece's g slices
    are rounded, kept on chip and handed to `epi` when its last part is done. `pro`: a fused
    piece prologue computing x on chip, as `linear_rows_cols`'."""
    device = legato.get_context().get_device()
    num_cores, kt, tk, tn = wt.shape
    m = out.shape[0] if g == 1 else out[0].shape[0]
    r = m // grp
    h = parts  # `_rows_cols_parts`: each weight tile in h parts of whole projections
    pw = tn // h
    assert tn % h == 0 and (g == 1 or g % h == 0) and (epi is None or h == g)
    spread = max(1, device.model.num_memory_channels // 2 // (num_cores // grp))
    slab = legato.get_model().tensor_type(BF16, [r, TK], "sram")
    c = legato.core_id()
    i = c % grp
    base = c - i
    off = (c // grp) * spread % kt if pro is None else 0
    bbs = ()
    for p in legato.static_range(h):
        if has_bias:
            c0 = c * tn + p * pw
            bbs = bbs + (
                legato.tensor.reshape(
                    legato.tensor.cast(legato.tensor.load(bias[c0 : c0 + pw]), F32), (1, pw)
                ),
            )
        else:
            bbs = bbs + (None,)
    to, piece, accs, outs, kept = (), (), (), (), ()
    for d in legato.static_range(grp):
        if d > 0:
            to = to + (device.get_core(base + (i + d) % grp),)
        piece = piece + ((i + grp - d) % grp,)
        accs = accs + (legato.tensor.full((r, pw), 0.0, F32),)
    for _q in legato.static_range(grp, h * grp):
        accs = accs + (legato.tensor.full((r, pw), 0.0, F32),)
    # x's first slab first (the group's other cores wait for it), then the first weight tile's
    # parts, the second slab and the second tile's: all in flight before the sends of the first
    # slab, which wait for it to arrive (an instruction issues in order: a load after them
    # would leave DRAM idle meanwhile)
    ld = _piece(pro, pargs, i, r, grp)
    if pro is None:
        x0 = _aslab(a, (), i, r, off, pro is not None)
    w = ()
    for p in legato.static_range(h):
        w = w + (_wpart(wt, c, off, p, pw),)
    if kt > 1:
        t = (off + 1) % kt
        if pro is None:
            x1 = _aslab(a, (), i, r, t, pro is not None)
        wn = ()
        for p in legato.static_range(h):
            wn = wn + (_wpart(wt, c, t, p, pw),)
    xa = _piece_run(pro, pargs, ld, i, r, grp)
    if pro is not None:
        x0 = _aslab(a, xa, i, r, 0, pro is not None)
        if kt > 1:
            x1 = _aslab(a, xa, i, r, 1, pro is not None)
    for d in legato.static_range(1, grp):
        legato.tensor.request_load(x0, to[d - 1], "sram", d)
    for s in legato.static_range(kt):
        last = s + 1 == kt
        if not last and s > 0:
            t = (off + s + 1) % kt
            wn = ()
            for p in legato.static_range(h):
                wn = wn + (_wpart(wt, c, t, p, pw),)
        if s + 2 < kt:  # a whole slab's matmuls ahead of its sends
            x2 = _aslab(a, xa, i, r, (off + s + 2) % kt, pro is not None)
        ys = ()  # (parts > 1: the received slabs, for the parts after the first)
        for p in legato.static_range(h):
            for d in legato.static_range(grp):
                if d == 0:
                    y = x0
                elif p == 0:
                    y = legato.tensor.receive_type(slab, d, None, "sram")
                    if h > 1:
                        ys = ys + (y,)
                else:
                    y = ys[d - 1]
                accs = _spmd_acc(accs, p * grp + d, y, w[p])
                if p + 1 == h and d > 0 and not last:  # the next slab to a core per matmul
                    legato.tensor.request_load(x1, to[d - 1], "sram", d)
                if last and p * grp + d >= 2:  # two matmuls behind: the MPU keeps busy
                    pp = (p * grp + d - 2) // grp
                    dd = (p * grp + d - 2) % grp
                    outs = outs + (
                        _spmd_part(
                            out,
                            accs[p * grp + d - 2],
                            bbs[pp],
                            piece[dd] * r,
                            r,
                            (c * tn + pp * pw) if g == 1 else c * (tn // g),
                            pw,
                            pp,
                            has_bias,
                            g,
                            h,
                            epi is not None,
                        ),
                    )
                    if epi is not None and pp + 1 == h:
                        kept = kept + _spmd_epi(
                            outs, epi, eargs, dd, grp, h, piece[dd] * r, r, c * pw, pw
                        )
        if last:
            for q in legato.static_range(max(h * grp - 2, 0), h * grp):
                outs = outs + (
                    _spmd_part(
                        out,
                        accs[q],
                        bbs[q // grp],
                        piece[q % grp] * r,
                        r,
                        (c * tn + q // grp * pw) if g == 1 else c * (tn // g),
                        pw,
                        q // grp,
                        has_bias,
                        g,
                        h,
                        epi is not None,
                    ),
                )
                if epi is not None and q // grp + 1 == h:
                    dd = q % grp
                    kept = kept + _spmd_epi(
                        outs, epi, eargs, dd, grp, h, piece[dd] * r, r, c * pw, pw
                    )
            # every cast keeps its own buffer to the end (a cast into a buffer whose write is
            # in flight would wait)
            for q in legato.static_range(h * grp):
                legato.tensor.reshape(outs[q], (r * pw,))
            # and every epilogue's written blocks theirs (`kernelgen._epilogue_fn`)
            for v in kept:
                legato.tensor.reshape(v, (r * pw,))
        else:
            x0 = x1
            if s + 2 < kt:
                x1 = x2
            w = wn
    assert tk == TK and (pro is not None or m == a.shape[0])


@legato.function
def _rows_cols_group(a, wt, bias, has_bias, grp, g, outs, epi=None, eargs=(), pro=None, pargs=()):
    linear_rows_cols(a, wt, bias, has_bias, grp, outs, g, epi, eargs, pro, pargs)


def _narrow_step(p: int, n: int, kt: int, wbytes: int) -> bool:
    """A static decode step's weight of one K-tile and more columns than one MPU tile, whose
    n / p columns per core are at least `MIN_STEP_TN`: no split K (one K-tile) nor tile range
    (fewer blocks than cores) tiles it, and on one core the matmul tiles it (a transposed copy,
    a column block at a time). Only from `wbytes` of one whole MPU tile (64 KiB) on: a smaller
    weight (a one-tile weight, the tiny test Llama's [64, 256] LM head) stays single-core, one
    load of about the DRAM latency there."""
    return (
        kt == 1
        and n > SINGLE_TILE_N
        and wbytes >= TK * SINGLE_TILE_N * 2
        and n % p == 0
        and n // p >= MIN_STEP_TN
    )


def _decode_tiles(p: int, n: int, kt: int, step: bool = False, wbytes: int = 0) -> tuple[int, int]:
    """(tile width tn, split) for the decode form on p cores, or AssertionError. split 0: the
    tile-range form (`linear_tiles`), for column blocks that do not fall evenly on the cores.
    `step` (a static decode step): rather than split K, whose f32 partials go through DRAM and
    a barrier, one block per core down to 8 columns (EVT1, N = 512 on 64 cores: the tiny
    Llama's o and down; decode EVT1 107,052 -> 96,596 cycles, their tiles preloaded in the
    phase before, `first_tiles`). Where neither split K nor tile ranges tile N (one K-tile,
    fewer blocks than cores: a 256-wide layer's [256, 256] projections), a static step still
    takes one block of n / p columns per core, down to `MIN_STEP_TN` (EVT0 8, EVT1 4), when
    the weight is wider than one MPU tile (`_narrow_step`): the
    single-core matmul it replaced streamed each 128 KiB weight through one core's DMA port and
    transposed it twice on the VPU (session 19: that layer's decode EVT0 / EVT1 32,683 /
    18,830 -> 8,473 / 12,076 cycles; 10,236 on EVT1 with its q/k/v and gate/up grouped so
    too, `_group_tiles`)."""
    if n % p == 0 and MIN_TN <= n // p <= 128:
        return n // p, 1  # one block per core
    if n % 128 == 0 and n // 128 >= p:
        # several blocks per core: in unrolled rounds when they fall evenly, else tile ranges
        return 128, (1 if (n // 128) % p == 0 else 0)
    for tn in (128, 64, 32, MIN_TN):
        nb = n // tn
        if nb * tn != n or nb >= p or p % nb:
            continue
        split = p // nb
        if kt % split == 0 and tn % split == 0:
            if step and n % p == 0 and n // p >= 8:
                return n // p, 1  # (only where split K would run: no new spmd node)
            return tn, split
    for tn in (128, 64, 32, MIN_TN):
        if n % tn == 0 and (n // tn) * kt >= p:
            return tn, 0
    if step and _narrow_step(p, n, kt, wbytes):
        return n // p, 1  # (no split K either: still one narrow block per core)
    raise AssertionError(f"no tiling of {n} output columns over {p} cores (whole columns each)")


def _gemm_tiles(p: int, n: int, g: int = 1) -> int:
    """The tile width of `linear_gemm` for n columns (per projection, g of them) on p cores:
    the width (dividing n, g * tn <= 128, at least 8) with the fewest columns per core over
    its rounds (ceil(n / tn / p) * tn), the widest of those; 0 when none, or when the cores
    would compute more than 5/4 of n between them (too few columns: the redone blocks would
    cost more than the decode forms' split K)."""
    best = None
    for tn in range(128 // g, 7, -1):
        if n % tn == 0:
            cost = -(-(n // tn) // p) * tn
            if best is None or cost < best[0]:
                best = (cost, tn)
    if best is None or 4 * best[0] * p > 5 * n:
        return 0
    return best[1]


def _gemm_beats_split(p: int, m: int, k: int, n: int, tn: int, esize: int) -> bool:
    """Whether `linear_gemm` (every core loads all of x) moves no more DRAM bytes than the
    decode form would with K split (each core loads 1/split of x, f32 partials written and read
    back): with few columns per core on many cores x's p copies dominate (EVT1, N = 512 at
    M = 128: 8.9 MB against 5.9 MB, 10.1k cycles against 8.0k). The other decode forms load all
    of x on every core as well: `linear_gemm` is the better one there."""
    try:
        _, split = _decode_tiles(p, n, k // TK)
    except AssertionError:
        return True
    if split <= 1:
        return True
    cols = -(-(n // tn) // p) * tn * p  # the columns computed, the redone ones included
    gemm = (p * m * k + cols * k) * esize
    return gemm <= (p * m * k // split + n * k) * esize + 2 * split * m * n * 4


def _rows_cols_parts(g: int, pw: int) -> int:
    """In how many column parts the prefill form loads and multiplies each weight tile of a
    group of g projections of pw columns per core each (`linear_rows_cols_parts`; 1:
    `linear_rows_cols`, the whole tile): one per projection when a part's rows are 32 bytes
    or more (pw >= 16 bf16 columns). The tiny Llama prefill (one chain): EVT0, q/k/v pw = 16
    and gate/up 48 in parts, 295.9k -> 285.1k cycles; EVT1, gate/up (pw = 24) in parts with
    its SiLU(gate) * up epilogue 187.2k -> 185.0k (gate/up 6.1k -> 5.6k), with q/k/v (pw = 8,
    rows of 16 bytes) in parts too 186.2k, so q/k/v keeps the whole tile there. A single
    projection keeps it too (halves of tn <= 16 columns, rows of 16 bytes, were slower: EVT0,
    alone, down 8.5k -> 9.0k, o 3.8k -> 4.3k)."""
    return g if g > 1 and pw >= 16 else 1


def _group(p: int) -> int:
    return min(p, 8 if p <= 32 else 16)


def _rows_cols_fits(p: int, m: int, n: int, dt, g: int, k: int) -> bool:
    """Whether the prefill form (`linear_rows_cols`) takes an [m, k] x [k, n] projection (k
    whole K-tiles: its slabs go core to core as they are)."""
    return (
        dt == torch.bfloat16
        and n % p == 0
        and g * (n // p) <= 128
        and m % _group(p) == 0
        and k % TK == 0
    )


def _rows_cols_beats_gemm(p: int, m: int, k: int, n: int, g: int, tn: int, esize: int) -> bool:
    """Whether the prefill form (`linear_rows_cols`: a group's cores read each slab of x once
    between them and exchange it core to core, every weight tile read once) moves fewer DRAM
    bytes than `linear_gemm` (every core loads all of x; tn = 0: it does not take the shape).
    Alone on 32 cores at 128 rows (EVT0): [128, 1024] x [1024, 512] 20.5k -> 6.7k cycles
    (9.6 MB -> 2.2 MB of DRAM), [128, 512] x [512, 512] 11.2k -> 4.6k, [128, 512] x
    [512, 1024] 13.1k -> 6.2k."""
    rc = (p // _group(p) * m * k + g * n * k) * esize
    if not tn:
        return True
    cols = -(-(n // tn) // p) * tn * p
    return rc < (p * m * k + g * cols * k) * esize


def _weight(node, w_arg):
    """The parameter W of `t(W)` (`w_arg`, nn.Linear's W[N, K]) or `w_arg` itself when it is a
    parameter already [K, N] (GPT-2's Conv1D: `addmm(b, x, W)`), or AssertionError."""
    if _is_param(w_arg):
        return w_arg
    assert isinstance(w_arg, torch.fx.Node) and w_arg.target in (
        aten.t.default,
        aten.permute.default,
    ), "the weight is not t(W) nor a [K, N] parameter"
    if w_arg.target is aten.permute.default:
        assert tuple(w_arg.args[1]) in ((1, 0), (-1, -2), (1, -2), (-1, 0)), "not a transpose"
    w = w_arg.args[0]
    assert w.op == "placeholder" and w.meta.get(PARAM_META), "W is not a parameter of the module"
    assert list(w_arg.users) == [node], f"{w_arg.name} is used elsewhere too"
    return w


def _group_tiles(
    p: int, n: int, g: int, step: bool = False, kt: int = 0, wbytes: int = 0
) -> tuple[int, int]:
    """(per-projection tile width tn, split) for g projections of n columns each in one
    kernel (`_merge`): a weight tile holds tn columns of each (g * tn <= 128), so every block a
    core finalizes holds whole slices of every result. split 1: one block per core or rounds
    of p blocks; 0: the tile-range form. AssertionError when no width fits. `step` (a static
    decode step, `kt` its K-tiles, `wbytes` one projection's weight): one block per core down to `MIN_STEP_TN` columns of each
    projection where `_decode_tiles` takes such blocks alone (`_narrow_step`; EVT1's 256-wide
    q/k/v: 4 of each on all 64 cores, not 32 of each on 8)."""
    if n % p == 0 and MIN_TN <= g * (n // p) <= 128:
        return n // p, 1
    if step and _narrow_step(p, n, kt, wbytes) and g * (n // p) <= 128:
        return n // p, 1
    for tn in (128, 64, 32, MIN_TN, MIN_TN // 2):
        if g * tn > 128 or n % tn:
            continue
        return tn, (1 if (n // tn) % p == 0 else 0)
    raise AssertionError(f"no tiling of {g} x {n} output columns over {p} cores")


def _parse(node):
    """(bias, x, t(W)) of an mm / addmm node."""
    if node.target is aten.addmm.default:
        return node.args[0], node.args[1], node.args[2]
    return None, node.args[0], node.args[1]


def _linear(node, ctx, bias, x, w_arg):
    impl = _linear_impl([(node, bias, w_arg)], ctx, x)
    if (bias is None or _is_param(bias)) and impl.fn is not _row_chunks:
        # q/k/v, gate/up: projections of one input to the same width share one kernel (of
        # W[N, K]s or of [K, N]s: one layout for all)
        n = val(node).shape[1]
        impl.group_key = ("chip_linear", x, n, val(x).dtype, bias is not None, _is_param(w_arg))
        impl.merge = _merge
    return impl


def _layout(ws, projs, kn, kw, kt, nb, tn, dt) -> Layout:
    """The weights `ws` (g of them, W[N, K] each, or [K, N] when `kn`) laid out as
    wt[N/tn, K/256, 256, g*tn], block b holding g slices of tn columns (K zero-padded to whole
    tiles), in mpu_dram (bf16) or shared DRAM (f32); the t(W)s are folded into it."""
    g = len(ws)

    def lay(*weights):
        ts = [torch.nn.functional.pad(w if kn else w.t(), (0, 0, 0, kt * TK - kw)) for w in weights]
        wt = torch.stack([t.reshape(kt, TK, nb, tn) for t in ts], 3)
        return wt.permute(2, 0, 1, 3, 4).reshape(nb, kt, TK, g * tn)

    return Layout(
        ws[0],
        lay,
        (nb, kt, TK, g * tn),
        dt,
        "mpu_dram" if dt == torch.bfloat16 else "shared_dram",
        fold=() if kn else tuple(w_arg for _, _, w_arg in projs),
        also=tuple(ws[1:]),
    )


def _single_core_fits(node, ctx, x, w_arg) -> bool:
    """Whether the single-core matmul (legato.torch.library.aten) takes the node: then it runs
    there, fused with its neighbours, and the row-split form is not needed."""
    from legato.torch.library.aten import _mpu_checks

    try:
        _mpu_checks(ctx, node, x, w_arg)
    except AssertionError:
        return False
    return True


def _row_tile(n: int) -> int:
    """The column block width of `linear_row_chunks`: all of N up to 128 columns (one MPU
    tile), else the widest of 128, 64, 32, 16, 8 dividing N; AssertionError when none."""
    if n <= 128:
        return n
    for tn in (128, 64, 32, 16, 8):
        if n % tn == 0:
            return tn
    raise AssertionError(f"no column block width for {n} output columns")


def _row_chunks_impl(ctx, w, kn, proj, x, n, kw, kt):
    """The Impl of `linear_row_chunks` for one projection `proj` = (node, bias, w_arg)."""
    node, bias, _ = proj
    m = ctx.bound(val(x).shape[0])
    p = ctx.model.num_cores
    esize = val(x).element_size()
    most = max_decode_rows(kt * TK, esize, ctx.model.sram_size)
    assert most > 0, f"K = {kt * TK}: not one row of x fits a core's sram"
    rows = min(most, -(-m // p))
    tn = _row_tile(n)
    dt = val(x).dtype
    layout = _layout([w], [proj], kn, kw, kt, n // tn, tn, dt)
    bf16 = dt == torch.bfloat16
    k = kt * TK
    onchip = (rows * k + 2 * rows * 128) * esize + 4 * rows * 128 * 2
    onchip += 0 if bf16 else 4 * TK * 128 * 4
    return Impl(
        _row_chunks,
        (x, layout, bias, bias is not None, "mpu_buffer" if bf16 else "sram", rows),
        spmd=True,
        onchip=onchip,
        name=f"chip_linear.linear_row_chunks(tn={tn}, rows={rows})",
        values=frozenset({0}),
    )


def _is_param(node) -> bool:
    return (
        isinstance(node, torch.fx.Node)
        and node.op == "placeholder"
        and bool(node.meta.get(PARAM_META))
    )


def _merge(nodes, ctx):
    """One implementation of the projections `nodes` (same input, dtype, width, bias or not:
    equal `group_key`s): their weights laid out once as one interleaved weight
    (`_group_layout`), every core computing the same columns of each."""
    x = _parse(nodes[0])[1]
    impl = _linear_impl([(nd, *_parse(nd)[::2]) for nd in nodes], ctx, x)
    alone = _linear_impl([(nodes[0], *_parse(nodes[0])[::2])], ctx, x)
    rc = (linear_rows_cols, _rows_cols_group, linear_rows_cols_parts)
    # (the prefill form alone, not grouped: Llama-7B's q/k/v at 4096 columns, 3 x 128 per
    # core, would run the decode form on chunks of rows instead)
    assert impl.fn in rc or alone.fn not in rc, "the prefill form takes them one at a time only"
    impl.members = tuple(nodes[1:])
    return impl


def _linear_impl(projs, ctx, x):
    """The Impl of the projections `projs` ((node, bias, t(W)) each, all of `x`; one, or several
    computed by one kernel)."""
    g = len(projs)
    ws = [_weight(node, w_arg) for node, _, w_arg in projs]
    kn = _is_param(projs[0][2])  # W already [K, N] (no t(W) to fold)
    # a [K, N] parameter (GPT-2's Conv1D) only where the single-core matmul does not take it:
    # where it did, it still does (its kernels unchanged)
    assert not kn or not _single_core_fits(projs[0][0], ctx, x, projs[0][2]), (
        "a [K, N] weight that the single-core matmul takes"
    )
    tx, tw = val(x), val(ws[0])
    dt = tx.dtype
    assert dt in (torch.bfloat16, torch.float32) and tw.dtype == dt, f"dtype {dt} x {tw.dtype}"
    assert tx.dim() == 2 and tw.dim() == 2, "mm needs [M, K] @ [K, N]"
    assert all(isinstance(d, int) for d in (*tx.shape[1:], *tw.shape)), (
        "a dynamic K or N: the chip-scale linear takes a runtime row count only"
    )
    for (node, bias, _), w in zip(projs, ws):
        assert val(node).dtype == dt and val(w).dtype == dt
        assert tuple(val(w).shape) == tuple(tw.shape), "grouped projections differ in shape"
        if bias is not None:
            tb = val(bias)
            assert tb.dtype == dt and tb.dim() == 1, (
                "bias must be a 1-d tensor of the operands' dtype"
            )
    has_bias = projs[0][1] is not None
    m, k = tx.shape
    n = tw.shape[1] if kn else tw.shape[0]
    assert tw.shape[0 if kn else 1] == k, f"x has {k} columns, W is {tuple(tw.shape)}"
    dynamic = not isinstance(m, int)
    if dynamic:  # a runtime row count (M tokens): sized for its bound
        m = ctx.bound(m)
        assert m is not None, "a dynamic M without an upper bound"
    # K not a multiple of 256: the weight's last K-tile is zero-padded at layout time and x is
    # zero-filled to whole tiles on the core (`_padded`); every size below is the padded one
    kt = -(-k // TK)
    kw, k = k, kt * TK
    p = ctx.model.num_cores
    esize = tx.element_size()
    decode = _decode_fits(m, k, esize, ctx.model.sram_size)
    rows = 0  # > 0: M in chunks of `rows` (`linear_chunks`)
    if dynamic and not decode:
        rows = max_decode_rows(k, esize, ctx.model.sram_size)
        assert rows > 0, f"K = {k}: not one row of x fits a core's sram"
        m, decode = rows, True  # the decode form on each chunk, its scratch sized for one
    elif not decode and not _rows_cols_fits(ctx.model.num_cores, m, n, dt, len(projs), kw):
        # a static M whose x does not fit one core's sram and that the prefill form does not
        # take (f32, N past 128 columns per core, M not in whole row pieces): the decode form
        # on equal chunks of rows (a divisor of M), W read once per chunk; never refused
        most = max_decode_rows(k, esize, ctx.model.sram_size)
        assert most > 0, f"K = {k}: not one row of x fits a core's sram"
        rows = max(d for d in range(1, most + 1) if m % d == 0)
        m, decode = rows, True
    slots = 0
    tn = _gemm_tiles(p, n, g) if decode and m >= GEMM_ROWS else 0
    if tn and g == 1 and not _gemm_beats_split(p, m, k, n, tn, esize):
        tn = 0
    if (
        decode
        and not rows
        and not dynamic
        and m >= GEMM_ROWS
        and _rows_cols_fits(p, m, n, dt, g, kw)
        and _rows_cols_beats_gemm(p, m, k, n, g, tn, esize)
    ):
        decode, tn = False, 0  # the prefill form (below)
    gemm = tn > 0
    if gemm:
        split, impl, scratch = 1, linear_gemm, None
    elif decode and g > 1:
        step = not (dynamic or rows or m >= GEMM_ROWS)
        tn, split = _group_tiles(p, n, g, step, kt, kw * n * esize)
        impl = linear_cols if split else linear_tiles
        scratch = None
        if not split and not dynamic and not rows and _blocks_even(n // tn, kt, p):
            impl = linear_blocks
        elif not split:
            slots = _slots(n // tn * kt, kt, p)
            scratch = ((n // tn, slots, m, g * tn), torch.float32)
    elif decode:
        try:
            # (blocks of 8 in place of split K only at a static M below GEMM_ROWS: a decode
            # step's; from GEMM_ROWS on, `_gemm_beats_split` weighs split K against the GEMM)
            step = not (dynamic or rows or m >= GEMM_ROWS)
            tn, split = _decode_tiles(p, n, kt, step, kw * n * esize)
        except AssertionError:
            if not dynamic or g > 1 or _single_core_fits(projs[0][0], ctx, x, projs[0][2]):
                raise
            return _row_chunks_impl(ctx, ws[0], kn, projs[0], x, n, kw, kt)
        impl = linear_cols if split else linear_tiles
        scratch = None
        if split > 1:  # a runtime M: one contiguous [M, tn] partial per (split, block)
            scratch = ((split, n // tn, m, tn) if dynamic else (split, m, n), torch.float32)
        if not split and not dynamic and not rows and _blocks_even(n // tn, kt, p):
            impl = linear_blocks
        elif not split:
            slots = _slots(n // tn * kt, kt, p)
            scratch = ((n // tn, slots, m, tn), torch.float32)
    else:
        assert _rows_cols_fits(p, m, n, dt, g, kw)  # else in chunks (above)
        tn, split, impl, scratch = n // p, 1, linear_rows_cols, None
    nb = n // tn

    bf16 = dt == torch.bfloat16
    layout = _layout(ws, projs, kn, kw, kt, nb, tn, dt)
    bias = projs[0][1]
    if g > 1 and has_bias:

        def lay_bias(*biases):  # the columns in the weight's interleaved order
            return torch.stack([b.reshape(nb, tn) for b in biases], 1).reshape(g * n)

        bias = Layout(
            projs[0][1],
            lay_bias,
            (g * n,),
            dt,
            "shared_dram",
            also=tuple(b for _, b, _ in projs[1:]),
        )
    wmem = "mpu_buffer" if bf16 else "sram"
    # one core's sram at most (`Impl.onchip`): x (or its rows of a chunk), its slabs and the
    # f32 blocks (bf16 weight tiles stream through mpu_buffer, f32 ones through sram)
    onchip = (m * k + 2 * m * 128) * esize + 4 * m * 128 * 2 + (0 if bf16 else 4 * TK * 128 * 4)
    labels = f"{g} projections, " if g > 1 else ""
    if rows and gemm:
        return Impl(
            _gemm_chunks,
            (x, layout, bias, has_bias, wmem, rows, g),
            spmd=True,
            onchip=onchip,
            name=f"chip_linear.linear_chunks(linear_gemm({labels}tn={tn}), rows={rows})",
            values=frozenset({0}),
        )
    if gemm:
        return Impl(
            _gemm if g == 1 else _gemm_group,
            (x, layout, bias, has_bias, wmem) + ((g,) if g > 1 else ()),
            spmd=True,
            onchip=onchip,
            name=f"chip_linear.linear_gemm({labels}tn={tn})",
            values=frozenset({0}),
            epilogue=True,
        )
    if rows:
        form = (
            f"linear_tiles({labels}tn={tn}, slots={slots})"
            if impl is linear_tiles
            else (f"linear_cols({labels}tn={tn}, split={split})")
        )
        return Impl(
            _chunks,
            (x, layout, bias, has_bias, split, slots, wmem, rows, g),
            spmd=True,
            onchip=onchip,
            scratch=(scratch,) if scratch else (),
            name=f"chip_linear.linear_chunks({form}, rows={rows})",
            values=frozenset({0}),
        )
    if impl is linear_blocks:
        return Impl(
            _blocks if g == 1 else _blocks_group,
            (x, layout, bias, has_bias, wmem) + ((g,) if g > 1 else ()),
            spmd=True,
            onchip=onchip,
            name=f"chip_linear.linear_blocks({labels}tn={tn})",
            values=frozenset({0}),
            epilogue=True,
        )
    if impl is linear_tiles:
        return Impl(
            _tiles if g == 1 else _tiles_group,
            (x, layout, bias, has_bias, slots, wmem) + ((g,) if g > 1 else ()),
            spmd=True,
            onchip=onchip,
            scratch=(scratch,),
            name=f"chip_linear.linear_tiles({labels}tn={tn}, slots={slots})",
            values=frozenset({0}),
            epilogue=True,
        )
    if impl is linear_cols:
        # without split-K the scratch argument is not read: pass the output in its place
        args = (x, layout, bias, has_bias, split, wmem) + ((g,) if g > 1 else ())
        if split == 1 and nb == p and bf16:
            # one block per core: its first tiles (up to PRELOAD_BYTES) are loaded ahead
            n_pre = preload_tiles(kt, TK * g * tn * esize)
            return Impl(
                _cols_pre if g == 1 else _cols_group_pre,
                args,
                spmd=True,
                onchip=onchip,
                name=f"chip_linear.linear_cols({labels}tn={tn}, split=1), {n_pre} tiles preloaded",
                values=frozenset({0}),
                epilogue=True,
                preload=(first_tiles, (layout, wmem, n_pre)),
                preload_bytes=n_pre * TK * g * tn * esize,
                preload_ahead_only=True,
            )
        return Impl(
            _with_part(split) if g == 1 else _cols_group,
            args,
            spmd=True,
            onchip=onchip,
            scratch=(scratch,) if scratch else (),
            name=f"chip_linear.linear_cols({labels}tn={tn}, split={split})",
            values=frozenset({0}),
            epilogue=True,
        )
    parts = _rows_cols_parts(g, tn)
    return Impl(
        linear_rows_cols_parts if parts > 1 else (linear_rows_cols if g == 1 else _rows_cols_group),
        (x, layout, bias, has_bias, _group(p))
        + ((g,) if g > 1 else ())
        + ((parts,) if parts > 1 else ()),
        spmd=True,
        name=f"chip_linear.linear_rows_cols({labels}tn={tn})",
        onchip=onchip,
        # grouped: an epilogue of the g results alone (SiLU(gate) * up) on each piece on chip
        epilogue=g > 1,
        epilogue_own=True,
        # x's row pieces computed on chip by the row-local work before it (in a chain)
        rows_prologue=(0, m // _group(p)),
    )


@legato.function
def _cols_split(x, wt, bias, has_bias, split, wmem, out, part, epi=None, eargs=()):
    linear_cols(x, wt, bias, out, part, has_bias, split, wmem, epi, eargs)


@legato.function
def _cols(x, wt, bias, has_bias, split, wmem, out, epi=None, eargs=()):
    linear_cols(x, wt, bias, out, None, has_bias, split, wmem, epi, eargs)


@legato.function
def _cols_pre(x, wt, bias, has_bias, split, wmem, out, pre, epi=None, eargs=()):
    linear_cols(x, wt, bias, out, None, has_bias, split, wmem, epi, eargs, 1, pre)


@legato.function
def _cols_group_pre(x, wt, bias, has_bias, split, wmem, g, outs, pre, epi=None, eargs=()):
    linear_cols(x, wt, bias, outs, None, has_bias, split, wmem, epi, eargs, g, pre)


@legato.function
def _tiles(x, wt, bias, has_bias, slots, wmem, out, part, epi=None, eargs=()):
    linear_tiles(x, wt, bias, out, part, has_bias, slots, wmem, epi, eargs)


@legato.function
def _blocks(x, wt, bias, has_bias, wmem, out, epi=None, eargs=()):
    linear_blocks(x, wt, bias, out, has_bias, wmem, epi, eargs)


@legato.function
def _blocks_group(x, wt, bias, has_bias, wmem, g, outs, epi=None, eargs=()):
    linear_blocks(x, wt, bias, outs, has_bias, wmem, epi, eargs, g)


@legato.function
def _cols_group(x, wt, bias, has_bias, split, wmem, g, outs, epi=None, eargs=()):
    linear_cols(x, wt, bias, outs, None, has_bias, split, wmem, epi, eargs, g)


@legato.function
def _tiles_group(x, wt, bias, has_bias, slots, wmem, g, outs, part, epi=None, eargs=()):
    linear_tiles(x, wt, bias, outs, part, has_bias, slots, wmem, epi, eargs, g)


@legato.function
def _chunks(x, wt, bias, has_bias, split, slots, wmem, rows, g, out, part=None):
    """A runtime M above what one core's sram holds: the decode form (`linear_cols`, or
    `linear_tiles` when slots > 0) on every chunk of `rows` rows of x (the last one partial), a
    runtime loop; W is read once per chunk. With a scratch, a barrier ends each chunk (the next
    one's partials overwrite it)."""
    m = x.size(0)
    for r in range((m + rows - 1) // rows):
        xc = x[r * rows : (r + 1) * rows, :]
        if g == 1:
            oc = out[r * rows : (r + 1) * rows, :]
        else:
            oc = ()
            for i in legato.static_range(g):
                oc = oc + (out[i][r * rows : (r + 1) * rows, :],)
        if slots:
            linear_tiles(xc, wt, bias, oc, part, has_bias, slots, wmem, None, (), g)
        else:
            linear_cols(xc, wt, bias, oc, part, has_bias, split, wmem, None, (), g)
        if slots > 0 or split > 1:  # a scratch
            legato.sync.barrier()


@legato.function
def linear_row_chunks(x, wt, bias, out, has_bias, wmem, rows):
    """A runtime M whose N is too narrow to split over the cores (`_decode_tiles` finds no
    whole columns for every core: a small model's projections, N = 64 on 32 cores, K one
    tile) and whose bound does not fit one core's sram (the single-core matmul of
    legato.torch.library.aten): rows over the cores instead of columns. Core c computes the
    chunks c, c + p, ... of `rows` rows of x (the last one partial, a runtime loop over the
    runtime M), every column block of each (`_block`: the sum in f32 from the first product),
    bias added and rounded once as the other forms (`_store`); W (small) is read once per chunk.
    Nothing is shared between cores, so no scratch and no barrier."""
    device = legato.get_context().get_device()
    p = device.num_cores
    nb, kt, tk, tn = wt.shape
    m = x.size(0)  # a runtime index (M tokens)
    c = legato.core_id()
    for r in range(c, (m + rows - 1) // rows, p):
        xs = _padded(_onchip(x[r * rows : (r + 1) * rows, :]), kt * TK)
        oc = out[r * rows : (r + 1) * rows, :]
        for b in legato.static_range(nb):
            acc = _block(xs, wt, b, 0, kt, rows, tn, wmem)
            _store(oc, acc, bias, b * tn, tn, has_bias, None, ())
    assert tk == TK and x.bounds[0] == out.bounds[0]


@legato.function
def _row_chunks(x, wt, bias, has_bias, wmem, rows, out):
    linear_row_chunks(x, wt, bias, out, has_bias, wmem, rows)


@legato.function
def _gemm(x, wt, bias, has_bias, wmem, out, epi=None, eargs=()):
    linear_gemm(x, wt, bias, out, has_bias, wmem, epi, eargs)


@legato.function
def _gemm_group(x, wt, bias, has_bias, wmem, g, outs, epi=None, eargs=()):
    linear_gemm(x, wt, bias, outs, has_bias, wmem, epi, eargs, g)


@legato.function
def _gemm_chunks(x, wt, bias, has_bias, wmem, rows, g, out):
    """`linear_gemm` on every chunk of `rows` rows of a runtime M above what one core's sram
    holds (the last one partial), a runtime loop as `_chunks`; no scratch, so no barrier."""
    m = x.size(0)
    for r in range((m + rows - 1) // rows):
        xc = x[r * rows : (r + 1) * rows, :]
        if g == 1:
            oc = out[r * rows : (r + 1) * rows, :]
        else:
            oc = ()
            for i in legato.static_range(g):
                oc = oc + (out[i][r * rows : (r + 1) * rows, :],)
        linear_gemm(xc, wt, bias, oc, has_bias, wmem, None, (), g)


def _decode_fits(m: int, k: int, esize: int, sram: int) -> bool:
    """Whether the decode forms fit m rows of x (K columns of esize bytes) in one core's sram:
    x itself in a quarter, with its column slabs, f32 blocks and weight tiles in half."""
    fits = (m * k + 2 * m * 128) * esize + 4 * m * 128 * 2 + 4 * TK * 128 * esize
    return m * k * esize <= sram // 4 and fits <= sram // 2


def max_decode_rows(k: int, esize: int, sram: int) -> int:
    """The most rows of x that the decode forms take at K = k (0: not one): the bound up to
    which a runtime M is one pass over W, and the chunk of `linear_chunks` above it."""
    lo, hi = 0, sram
    while lo < hi:  # the largest m with _decode_fits (monotone in m)
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _decode_fits(mid, k, esize, sram) else (lo, mid - 1)
    return lo


def _with_part(split):
    return _cols_split if split > 1 else _cols


@register(aten.mm.default)
def resolve_mm(node, ctx):
    x, w_arg = node.args[:2]
    return _linear(node, ctx, None, x, w_arg)


@register(aten.addmm.default)
def resolve_addmm(node, ctx):
    bias, x, w_arg = node.args[:3]
    alpha, beta = _alpha_beta(node)
    assert alpha == 1 and beta == 1, "addmm with alpha/beta: single-core form"
    return _linear(node, ctx, bias, x, w_arg)
