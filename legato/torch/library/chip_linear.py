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
- prefill (`linear_rows_cols`, bf16, M a multiple of the group size): bench/gemm.py's SPMD GEMM
  (every core one column block and all rows; the cores of a group read A's k-slabs once and
  exchange them core to core), with the bias.

Refused (the node falls back to the single-core resolvers of legato.torch.library.aten, or runs
eagerly): a dynamic M (the row count is baked into the kernel), K not a multiple of 256, N with
no tile width that gives every core whole columns, other dtypes, W not a parameter or its `t(W)`
used elsewhere.
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
MIN_TN = 16  # narrower column blocks than this: split K instead


@legato.function
def _finish(acc, bias, j0, width, has_bias, dtype):
    """acc (+ bias[j0:j0+width] in f32), rounded once to `dtype`."""
    if has_bias:
        b = legato.tensor.cast(legato.tensor.load(bias[j0 : j0 + width]), F32)
        acc = acc + legato.tensor.reshape(b, (1, width))
    return legato.tensor.cast(acc, dtype)


@legato.function
def _block(xs, wt, b, t0, nt, m, tn, wmem):
    """f32 [m, tn]: xs[:, 256*t0 : 256*(t0+nt)] @ the K-tiles t0..t0+nt of column block b."""
    acc = legato.tensor.full((m, tn), 0.0, F32)
    for t in legato.static_range(nt):
        w = legato.tensor.load(wt[b, t0 + t], wmem)
        acc = acc + legato.tensor.matmul(xs[:, t * TK : (t + 1) * TK], w, F32)
    return acc


@legato.function
def linear_cols(x, wt, bias, out, part, has_bias, split, wmem):
    """Decode: out[M, N] = x @ W^T (+ bias), output columns over the cores (module docstring)."""
    device = legato.get_context().get_device()
    p = device.num_cores
    nb, kt, tk, tn = wt.shape
    m = x.shape[0]
    dtype = out.dtype
    c = legato.core_id()
    if split == 1:
        xs = legato.tensor.load(x)
        if nb == p:
            acc = _block(xs, wt, c, 0, kt, m, tn, wmem)
            legato.tensor.memcpy(
                out[:, c * tn : (c + 1) * tn], _finish(acc, bias, c * tn, tn, has_bias, dtype)
            )
        else:
            # rounds of p blocks, unrolled (a runtime loop over blocks runs out of mpu_buffer:
            # the compiler keeps more tile buffers live in it than mpu_buffer holds); in the
            # last round the cores past the last block redo it (same values, same columns)
            for j in legato.static_range((nb + p - 1) // p):
                b = min(c + j * p, nb - 1)
                acc = _block(xs, wt, b, 0, kt, m, tn, wmem)
                legato.tensor.memcpy(
                    out[:, b * tn : (b + 1) * tn], _finish(acc, bias, b * tn, tn, has_bias, dtype)
                )
    else:
        per = kt // split
        blk = c // split
        h = c % split
        xs = legato.tensor.load(x[:, h * per * TK : (h + 1) * per * TK])
        acc = _block(xs, wt, blk, h * per, per, m, tn, wmem)
        legato.tensor.memcpy(
            part[h : h + 1, :, blk * tn : (blk + 1) * tn], legato.tensor.reshape(acc, (1, m, tn))
        )
        legato.sync.barrier()
        cols = tn // split
        j0 = blk * tn + h * cols
        parts = legato.tensor.load(part[0:split, :, j0 : j0 + cols])
        total = legato.tensor.sum(parts, 0)
        legato.tensor.memcpy(
            out[:, j0 : j0 + cols], _finish(total, bias, j0, cols, has_bias, dtype)
        )
    assert tk == TK and m * 1 == out.shape[0]


@legato.function
def linear_tiles(x, wt, bias, out, part, has_bias, slots, wmem):
    """Decode with column blocks that do not fall evenly on the cores: out[M, N] = x @ W^T
    (+ bias), the T = blocks * K-tiles weight tiles shared out in (block, K-tile) order, core c
    the tiles [c*T/p, (c+1)*T/p) (equal shares up to one tile, every tile read once, as
    bench/decoder.py's gemv_stage). A core walks its range with runtime loops (one tile load and
    one MPU pass per step), writes an f32 partial per block it touched into slot `c - first core
    of the block` of `part[blocks, slots, M, tn]` (a block's first core zeroes the slots no core
    writes); after a barrier, core c finalizes blocks c, c + p, ... (sum of the slots, bias,
    one rounding)."""
    device = legato.get_context().get_device()
    p = device.num_cores
    nb, kt, tk, tn = wt.shape
    m = x.shape[0]
    dtype = out.dtype
    tiles = nb * kt
    c = legato.core_id()
    xs = legato.tensor.load(x)
    start = c * tiles // p
    end = (c + 1) * tiles // p
    b_lo = start // kt
    for b in range(b_lo, min((end + kt - 1) // kt, b_lo + end - start)):
        acc = legato.tensor.full((m, tn), 0.0, F32)
        for t in range(max(start - b * kt, 0), min(end - b * kt, kt)):
            w = legato.tensor.load(wt[b, t], wmem)
            acc = acc + legato.tensor.matmul(xs[:, t * TK : (t + 1) * TK], w, F32)
        first = ((b * kt + 1) * p - 1) // tiles
        last = ((b * kt + kt) * p - 1) // tiles
        slot = c - first
        legato.tensor.memcpy(
            part[b : b + 1, slot : slot + 1, :, :], legato.tensor.reshape(acc, (1, 1, m, tn))
        )
        zero = legato.tensor.full((1, 1, m, tn), 0.0, F32)
        for s in range(slots - (slots - (last - first + 1)) * (1 - min(slot, 1)), slots):
            legato.tensor.memcpy(part[b : b + 1, s : s + 1, :, :], zero)
    legato.sync.barrier()
    for b in range(c, nb, p):
        parts = legato.tensor.load(part[b, 0:slots, :, :])
        total = legato.tensor.sum(parts, 0)
        legato.tensor.memcpy(
            out[:, b * tn : (b + 1) * tn], _finish(total, bias, b * tn, tn, has_bias, dtype)
        )
    assert tk == TK and m * 1 == out.shape[0]


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
def _spmd_out(out, acc, bb, r0, rows, c0, tn, has_bias):
    if has_bias:
        acc = acc + bb
    y = legato.tensor.cast(acc, BF16)
    legato.tensor.memcpy(out[r0 : r0 + rows, c0 : c0 + tn], y)
    return y


@legato.function
def linear_rows_cols(a, wt, bias, has_bias, grp, out):
    """Prefill: bench/gemm.py's make_gemm_spmd (see its docstring) with a bias: core c owns the
    output columns [c*tn, (c+1)*tn) and every row; the cores of a group of `grp` read each
    k-slab of `a` once between them (r = M / grp rows each, two slabs ahead) and send their
    piece to the others of the group (queue d: the core d places on), one send per matmul."""
    device = legato.get_context().get_device()
    num_cores, kt, tk, tn = wt.shape
    m = a.shape[0]
    r = m // grp
    spread = max(1, device.model.num_memory_channels // 2 // (num_cores // grp))
    slab = legato.get_model().tensor_type(BF16, [r, TK], "sram")
    c = legato.core_id()
    i = c % grp
    base = c - i
    off = (c // grp) * spread % kt
    bb = None
    if has_bias:
        bb = legato.tensor.reshape(
            legato.tensor.cast(legato.tensor.load(bias[c * tn : (c + 1) * tn]), F32), (1, tn)
        )
    to, piece, accs, outs = (), (), (), ()
    for d in legato.static_range(grp):
        if d > 0:
            to = to + (device.get_core(base + (i + d) % grp),)
        piece = piece + ((i + grp - d) % grp,)
        accs = accs + (legato.tensor.full((r, tn), 0.0, F32),)
    t = off
    w = legato.tensor.load(wt[c, t], "mpu_buffer")
    x0 = legato.tensor.load(a[i * r : (i + 1) * r, t * TK : (t + 1) * TK])
    for d in legato.static_range(1, grp):
        legato.tensor.request_load(x0, to[d - 1], "sram", d)
    if kt > 1:
        t = (off + 1) % kt
        x1 = legato.tensor.load(a[i * r : (i + 1) * r, t * TK : (t + 1) * TK])
    for s in legato.static_range(kt):
        last = s + 1 == kt
        if not last:
            wn = legato.tensor.load(wt[c, (off + s + 1) % kt], "mpu_buffer")
        accs = _spmd_acc(accs, 0, x0, w)
        for d in legato.static_range(1, grp):
            if not last:
                legato.tensor.request_load(x1, to[d - 1], "sram", d)
                if d == 1 and s + 2 < kt:
                    t = (off + s + 2) % kt
                    x2 = legato.tensor.load(a[i * r : (i + 1) * r, t * TK : (t + 1) * TK])
            y = legato.tensor.receive_type(slab, d, None, "sram")
            accs = _spmd_acc(accs, d, y, w)
            if last and d >= 2:
                outs = outs + (
                    _spmd_out(out, accs[d - 2], bb, piece[d - 2] * r, r, c * tn, tn, has_bias),
                )
        if last:
            for d in legato.static_range(max(grp - 2, 0), grp):
                outs = outs + (_spmd_out(out, accs[d], bb, piece[d] * r, r, c * tn, tn, has_bias),)
            # every cast keeps its own buffer to the end (a cast into a buffer whose write is
            # in flight would wait)
            for d in legato.static_range(grp):
                legato.tensor.reshape(outs[d], (r * tn,))
        else:
            x0 = x1
            if s + 2 < kt:
                x1 = x2
            w = wn
    assert tk == TK and m == out.shape[0]


def _decode_tiles(p: int, n: int, kt: int) -> tuple[int, int]:
    """(tile width tn, split) for the decode form on p cores, or AssertionError. split 0: the
    tile-range form (`linear_tiles`), for column blocks that do not fall evenly on the cores."""
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
            return tn, split
    for tn in (128, 64, 32, MIN_TN):
        if n % tn == 0 and (n // tn) * kt >= p:
            return tn, 0
    raise AssertionError(f"no tiling of {n} output columns over {p} cores (whole columns each)")


def _group(p: int) -> int:
    return min(p, 8 if p <= 32 else 16)


def _weight(node, w_arg):
    """The parameter W of `t(W)` (`w_arg`), or AssertionError."""
    assert isinstance(w_arg, torch.fx.Node) and w_arg.target in (
        aten.t.default,
        aten.permute.default,
    ), "the weight is not t(W)"
    if w_arg.target is aten.permute.default:
        assert tuple(w_arg.args[1]) in ((1, 0), (-1, -2), (1, -2), (-1, 0)), "not a transpose"
    w = w_arg.args[0]
    assert w.op == "placeholder" and w.meta.get(PARAM_META), "W is not a parameter of the module"
    assert list(w_arg.users) == [node], f"{w_arg.name} is used elsewhere too"
    return w


def _linear(node, ctx, bias, x, w_arg):
    w = _weight(node, w_arg)
    tx, tw = val(x), val(w)
    dt = tx.dtype
    assert dt in (torch.bfloat16, torch.float32) and tw.dtype == dt, f"dtype {dt} x {tw.dtype}"
    assert val(node).dtype == dt
    assert tx.dim() == 2 and tw.dim() == 2, "mm needs [M, K] @ [K, N]"
    assert all(isinstance(d, int) for d in (*tx.shape, *tw.shape)), (
        "dynamic M: the chip-scale linear bakes the row count into the kernel (runs single-core)"
    )
    if bias is not None:
        tb = val(bias)
        assert tb.dtype == dt and tb.dim() == 1, "bias must be a 1-d tensor of the operands' dtype"
    m, k = tx.shape
    n = tw.shape[0]
    assert k % TK == 0, f"K = {k} is not a multiple of {TK}"
    kt = k // TK
    p = ctx.model.num_cores
    has_bias = bias is not None
    esize = tx.element_size()
    fits = (m * k + 2 * m * 128) * esize + 4 * m * 128 * 2 + 4 * TK * 128 * esize
    if m * k * esize <= ctx.model.sram_size // 4 and fits <= ctx.model.sram_size // 2:
        tn, split = _decode_tiles(p, n, kt)
        impl = linear_cols if split else linear_tiles
        scratch = ((split, m, n), torch.float32) if split > 1 else None
        if not split:
            slots = _slots(n // tn * kt, kt, p)
            scratch = ((n // tn, slots, m, tn), torch.float32)
    else:
        grp = _group(p)
        assert dt == torch.bfloat16, "the chip-scale prefill form is bf16 only"
        assert n % p == 0 and n // p <= 128, f"N = {n} does not split in <= 128 columns per core"
        assert m % grp == 0, f"M = {m} does not split in {grp} row pieces"
        tn, split, impl, scratch = n // p, 1, linear_rows_cols, None
    nb = n // tn

    def lay(weight):  # W[N, K] -> wt[N/tn, K/256, 256, tn]
        return weight.t().reshape(kt, TK, nb, tn).permute(2, 0, 1, 3)

    bf16 = dt == torch.bfloat16
    layout = Layout(
        w, lay, (nb, kt, TK, tn), dt, "mpu_dram" if bf16 else "shared_dram", fold=(w_arg,)
    )
    if impl is linear_tiles:
        return Impl(
            _tiles,
            (x, layout, bias, has_bias, slots, "mpu_buffer" if bf16 else "sram"),
            spmd=True,
            scratch=(scratch,),
            name=f"chip_linear.linear_tiles(tn={tn}, slots={slots})",
        )
    if impl is linear_cols:
        # without split-K the scratch argument is not read: pass the output in its place
        args = (x, layout, bias, has_bias, split, "mpu_buffer" if bf16 else "sram")
        return Impl(
            _with_part(split),
            args,
            spmd=True,
            scratch=(scratch,) if scratch else (),
            name=f"chip_linear.linear_cols(tn={tn}, split={split})",
        )
    return Impl(
        linear_rows_cols,
        (x, layout, bias, has_bias, _group(p)),
        spmd=True,
        name=f"chip_linear.linear_rows_cols(tn={tn})",
    )


@legato.function
def _cols_split(x, wt, bias, has_bias, split, wmem, out, part):
    linear_cols(x, wt, bias, out, part, has_bias, split, wmem)


@legato.function
def _cols(x, wt, bias, has_bias, split, wmem, out):
    linear_cols(x, wt, bias, out, None, has_bias, split, wmem)


@legato.function
def _tiles(x, wt, bias, has_bias, slots, wmem, out, part):
    linear_tiles(x, wt, bias, out, part, has_bias, slots, wmem)


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
