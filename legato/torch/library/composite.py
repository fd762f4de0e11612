"""ATen ops that Legato computes by composing several legato ops (issue 13): clamp with tensor
bounds, max / min (full and along a dim, with their indices), argmax / argmin, amin, cumsum, index_select and `index.Tensor`
with int64 index tensors (a row gather; `x[idx]` wraps negative indices as torch does;
`x[i0, i1]` combines the indices into the row on the scalar unit; index tensors that broadcast,
`x[i[:, None], j]`, are repeated to one shape first),
pow(Tensor, Tensor), pow(Tensor, Scalar) with any exponent, pow(Scalar, Tensor).

Every resolver asserts what its implementation computes as torch does (dtypes, shapes, which
outputs are used) and asks the compiler's capability table (`ctx.probe`) for every legato op the
implementation uses, so a node it accepts compiles. argmax / argmin and max.dim / min.dim with their
indices find the first index of the extremum in f32 and convert it to int64 on the VPU
(`vpu.cvt`'s i64 result, `legato.opset.CAST_INT_RESULTS`).
"""

from __future__ import annotations

import math
import operator

import torch

import legato
from legato.torch.library.aten import (
    _FLOATS,
    _dims,
    _fits_sram,
    _float_out,
    _norm_dim,
    _reduce_dims_impl,
    _same_dtype,
    _statically_empty,
    full,
    identity,
    reduce,
    reduce_all,
    transpose,
    unary,
    val,
)
from legato.torch.registry import Impl, register, register_graph_pass

aten = torch.ops.aten


def _static(t, what):
    assert all(isinstance(d, int) for d in t.shape), f"{what} of a dynamic shape"


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# --------------------------------------------------------------------------------------------
# clamp with tensor bounds


@legato.function
def clamp_tensors(x, lo, hi, has_lo, has_hi):
    """min(max(x, lo), hi) with tensor bounds (broadcasting): NaN in x or a bound gives NaN, as
    torch's clamp (the VPU's maximum / minimum propagate NaN)."""
    if has_lo:
        x = legato.tensor.maximum(x, lo)
    if has_hi:
        x = legato.tensor.minimum(x, hi)
    return x


@register([aten.clamp.Tensor, aten.clamp_min.Tensor, aten.clamp_max.Tensor])
def resolve_clamp_tensor(node, ctx):
    x = node.args[0]
    if node.target == aten.clamp_min.Tensor:
        lo, hi = node.args[1], None
    elif node.target == aten.clamp_max.Tensor:
        lo, hi = None, node.args[1]
    else:
        lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
        hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    assert lo is not None or hi is not None, "clamp without bounds"
    for b in (lo, hi):
        assert b is None or isinstance(b, torch.fx.Node), f"clamp bound {b!r}"
    dt = _same_dtype(node, x, *(b for b in (lo, hi) if b is not None))
    out = val(node).shape
    for o in (x, lo, hi):
        if o is not None and tuple(val(o).shape) != tuple(out):
            ctx.probe("broadcast_binary", dt)
    if lo is not None:
        ctx.probe("maximum", dt)
    if hi is not None:
        ctx.probe("minimum", dt)
    return Impl(
        clamp_tensors,
        (x, 0.0 if lo is None else lo, 0.0 if hi is None else hi, lo is not None, hi is not None),
        name="clamp (tensor bounds)",
    )


# --------------------------------------------------------------------------------------------
# Filled tensors

_FILLS = {
    aten.ones.default: 1.0,
    aten.zeros.default: 0.0,
    aten.new_ones.default: 1.0,
    aten.new_zeros.default: 0.0,
}


@register([*_FILLS, aten.full.default, aten.new_full.default])
def resolve_full(node, ctx):
    """A float tensor of one value (the int / bool ones are host index work, docs/torch.md)."""
    dt = _float_out(node)
    value = _FILLS.get(node.target)
    if value is None:  # full(size, value) / new_full(self, size, value)
        value = node.args[1] if node.target == aten.full.default else node.args[2]
    assert _number(value), f"{node.target} of {value!r}"
    _static(val(node), str(node.target))
    ctx.probe("constant", dt)
    _fits_sram(ctx, val(node), what="the filled tensor")
    ty = legato.types.float("float32" if dt == torch.float32 else "bfloat16")
    return Impl(full, (tuple(val(node).shape), float(value), ty))


# --------------------------------------------------------------------------------------------
# max / min values, and their indices (argmax, argmin, max.dim, min.dim)


def _indices_unused(node):
    """Whether nothing reads the int64 indices (output 1) of a max.dim / min.dim node."""
    return all(u.target is operator.getitem and u.args[1] == 0 for u in node.users)


@legato.function
def values_only(x, op, axis, keepdim):
    return (reduce(x, op, axis, keepdim),)


def _along(ndim, dim, n):
    """Compile-time helper: the shape with `n` at `dim` and 1 elsewhere."""
    return tuple(n if i == dim else 1 for i in range(ndim))


@legato.function
def iota(n, shape):
    """0.0, 1.0, ..., n - 1 in f32 (exact for n <= 2^24), reshaped to `shape`: [0] doubled by
    concat((i, i + k)) for k = 1, 2, 4, ..., then cut to n."""
    i = legato.tensor.full((1,), 0.0, legato.types.float("float32"))
    for k in _shifts(n):  # 1, 2, 4, ... < n
        i = legato.tensor.concat((i, i + float(k)), 0)
    if i.shape[0] > n:
        i = i[0:n]
    return legato.tensor.reshape(i, shape)


@legato.function
def arange_float(n, start, step, wide):
    """torch's float arange: start + i * step for i < n, from the f32 iota. Exact in f32 (the
    resolver takes integer start / step with every value within 2^24), so the one rounding to
    bf16 (`wide`: a bf16 result) is torch's."""
    i = iota(n, (n,))
    if step != 1.0:
        i = i * step
    if start != 0.0:
        i = i + start
    if wide:
        i = legato.tensor.cast(i, legato.types.float("bfloat16"))
    return i


@register([aten.arange.default, aten.arange.start, aten.arange.start_step])
def resolve_arange(node, ctx):
    """A float arange (an int64 one is host index work, docs/torch.md): integer start and step
    whose every value is exact in f32."""
    dt = _float_out(node)
    _static(val(node), "arange")
    args = list(node.args) + [0] * 3
    if node.target == aten.arange.default:
        start, step = 0, 1
    else:
        start = args[0]
        step = args[2] if node.target == aten.arange.start_step else 1
    assert _number(start) and _number(step), "arange with a non-constant start / step"
    assert float(start).is_integer() and float(step).is_integer(), (
        f"arange({start}, step={step}): a fractional start / step (f32 rounds it otherwise)"
    )
    n = val(node).shape[0]
    assert n > 0, "arange of no elements (an empty tensor)"
    last = float(start) + float(step) * (n - 1)
    assert max(abs(float(start)), abs(last)) <= 1 << 24, "arange past 2^24 (f32 is exact below)"
    for op in ("constant", "concat", "add", "mul", "slice", "reshape"):
        ctx.probe(op, torch.float32)
    if dt == torch.bfloat16:
        ctx.probe("cast_bf16", torch.float32)
    return Impl(arange_float, (n, float(start), float(step), dt == torch.bfloat16))


@legato.function
def arg_reduce(x, dim, is_min, flat, out_shape, values, wide):
    """torch's argmax / argmin along `dim` (`flat`: of x flattened), and with `values` also the
    max / min itself (max.dim / min.dim): the first index of the maximum of y = x (-x for a min),
    a NaN counting as the maximum (torch's CPU kernels). In f32 (a bf16 x converted exactly):
    m = max(y); the candidates are y == m, or y is NaN (then m is NaN and no y == m); the index
    is the least iota where a candidate, converted to int64 by vpu.cvt (exact: n <= 2^24). The
    value is max(where(iota == index, y, -inf)): the element at the index, bit for bit (-0.0 and
    NaN included). Results shaped `out_shape` (keepdim or not)."""
    f32 = legato.types.float("float32")
    y = legato.tensor.cast(x, f32) if wide else x
    if flat:
        y = legato.tensor.reshape(y, flat)
    if is_min:
        y = -y
    n = y.shape[dim]
    m = legato.tensor.max(y, axis=dim, keepdim=True)
    cand = legato.tensor.maximum(legato.tensor.eq(y, m), legato.tensor.ne(y, y))
    ids = iota(n, _along(y.ndim, dim, n))
    first = legato.tensor.amin(legato.tensor.where(cand, ids, float(n)), axis=dim, keepdim=True)
    index = legato.tensor.reshape(legato.tensor.cast(first, legato.types.i64), out_shape)
    if not values:
        return index
    at = legato.tensor.where(legato.tensor.eq(ids, first), y, float("-inf"))
    v = legato.tensor.max(at, axis=dim, keepdim=True)
    if is_min:
        v = -v
    if wide:
        v = legato.tensor.cast(v, x.dtype)
    return (legato.tensor.reshape(v, out_shape), index)


_ARG_OPS = ("max", "neg", "eq", "ne", "maximum", "where", "constant", "concat", "add", "slice")
_ARG_OPS += ("reshape", "broadcast_binary", "cast_i64")


def _arg_impl(node, ctx, x, dim, what, values):
    """The Impl of argmax / argmin (`values`: max.dim / min.dim, both outputs) of `x` along
    `dim` (None: over every element)."""
    tx = val(x)
    dt = tx.dtype
    assert dt in _FLOATS, f"{what} of {dt} (bf16 and f32 are supported)"
    _static(tx, what)
    wide = dt == torch.bfloat16
    flat = ()
    if dim is None or tx.dim() == 0:  # over every element (a 0-d x: its one element)
        flat, dim = (tx.numel(),), 0
    dim = _norm_dim(dim, max(tx.dim(), 1))
    n = flat[0] if flat else tx.shape[dim]
    assert n > 0, f"{what} over an empty dim (torch raises)"
    assert n <= 1 << 24, f"{what} over {n} elements (f32 indices are exact up to 2^24)"
    for op in _ARG_OPS:
        ctx.probe(op, torch.float32)
    if wide:
        ctx.probe("cast_f32", dt)
        ctx.probe("cast_bf16", torch.float32)
    f = torch.empty(tx.shape, dtype=torch.float32)
    _fits_sram(ctx, tx, f, f, f, f, what=f"{what} operand and its f32 temporaries")
    out = node.meta["val"][0] if values else val(node)  # keepdim or not: the result's shape
    return Impl(
        arg_reduce,
        (x, dim, what.startswith(("argmin", "min")), flat, tuple(out.shape), values, wide),
        name=f"{what} (first index of the extremum, f32 iota, vpu.cvt to int64)",
    )


@register([aten.max.dim, aten.min.dim])
def resolve_max_dim(node, ctx):
    x, dim = node.args[:2]
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    what = "max" if node.target == aten.max.dim else "min"
    dt = val(x).dtype
    assert dt in _FLOATS, f"{what}.dim of {dt} (bf16 and f32 are supported)"
    rank = val(x).dim()
    if not _indices_unused(node) or rank == 0:  # both outputs (a 0-d x: itself and index 0)
        return _arg_impl(node, ctx, x, dim, f"{what}.dim", True)
    _probe_max(ctx, dt, what)
    op = "amax" if what == "max" else "amin"
    return Impl(
        values_only, (x, op, _norm_dim(dim, rank), bool(keepdim)), name=f"{what}.dim values"
    )


def _probe_max(ctx, dt, what):
    ctx.probe("max", dt)
    if what == "min":  # amin is -max(-x)
        ctx.probe("neg", dt)


@register([aten.max.default, aten.min.default, aten.amin.default])
def resolve_max_all(node, ctx):
    x = node.args[0]
    what = "max" if node.target == aten.max.default else "min"
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", [])
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    dt = _same_dtype(node, x)
    rank = val(x).dim()
    if rank == 0:
        return Impl(identity, (x,))
    dims = [dims] if isinstance(dims, int) else list(dims)
    _probe_max(ctx, dt, what)
    if len(dims) == 1 and rank > 1:  # amin over one dim
        return Impl(reduce, (x, "amin", _norm_dim(dims[0], rank), bool(keepdim)))
    if dims and sorted(_norm_dim(d, rank) for d in dims) != list(range(rank)):
        assert node.target == aten.amin.default, f"{what} over several dims {dims}"
        return _reduce_dims_impl(node, ctx, x, "amin", [_norm_dim(d, rank) for d in dims], dt)
    _static(val(x), f"full {what}")
    ctx.probe("reshape", dt)
    op = "amax" if what == "max" else "amin"
    flat = (val(x).numel(),)
    return Impl(reduce_all, (x, op, flat, _dims(ctx, val(node).shape)), name=f"{op} (all dims)")


@register([aten.argmax.default, aten.argmin.default])
def resolve_argmax(node, ctx):
    x = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    what = "argmax" if node.target == aten.argmax.default else "argmin"
    return _arg_impl(node, ctx, x, dim, what, False)


# --------------------------------------------------------------------------------------------
# cumsum


def _shifts(n):
    """Compile-time helper: the strides 1, 2, 4, ... < n of a Hillis-Steele prefix sum."""
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return tuple(out)


def _zeros_shape(shape, dim, k):
    return tuple(k if i == dim else d for i, d in enumerate(shape))


def _take(ndim, dim, start, end):
    return tuple(slice(start, end) if i == dim else slice(None) for i in range(ndim))


@legato.function
def cumsum(x, dim, wide):
    """Inclusive prefix sum along `dim` in log2(n) steps: y += y shifted by 1, 2, 4, ...
    (zeros shifted in). bf16 is summed in f32 and rounded once per element (as torch's CPU
    kernel, which accumulates bf16 in f32); f32 in f32 (torch accumulates in double: the
    results agree to a few f32 ulps of the partial sums)."""
    f32 = legato.types.float("float32")
    y = legato.tensor.cast(x, f32) if wide else x
    n = y.shape[dim]
    for k in _shifts(n):
        z = legato.tensor.full(_zeros_shape(y.shape, dim, k), 0.0, y.dtype)
        y = y + legato.tensor.concat((z, y[_take(y.ndim, dim, 0, n - k)]), dim)
    return legato.tensor.cast(y, x.dtype) if wide else y


@register(aten.cumsum.default)
def resolve_cumsum(node, ctx):
    x, dim = node.args[:2]
    assert node.kwargs.get("dtype") in (None, val(node).dtype), "cumsum with a dtype= conversion"
    dt = _same_dtype(node, x)
    tx = val(x)
    if tx.dim() == 0:
        return Impl(identity, (x,))
    _static(tx, "cumsum")
    dim = _norm_dim(dim, tx.dim())
    wide = dt == torch.bfloat16
    work = torch.float32 if wide else dt
    if tx.shape[dim] > 1:
        for op in ("add", "slice", "concat"):
            ctx.probe(op, work)
        ctx.probe("constant", work)
    if wide:
        ctx.probe("cast_f32", dt)
        ctx.probe("cast_bf16", torch.float32)
    f = torch.empty(tx.shape, dtype=work)
    _fits_sram(ctx, tx, f, f, f, what="cumsum operand and its f32 partial sums")
    return Impl(cumsum, (x, dim, wide), name="cumsum (log-step prefix sum)")


# --------------------------------------------------------------------------------------------
# Gathers: index_select and index.Tensor with one or several index tensors


@legato.function
def repeat_to(x, shape):
    """The int64 tensor `x` (of len(shape) dims, each 1 or shape's) broadcast to `shape` by
    concatenating copies of itself (doubling, then a slice): data movement, which takes every
    dtype (the VPU's broadcast takes no int64)."""
    for d in legato.static_range(len(shape)):
        if x.shape[d] != shape[d]:
            for _k in _shifts(shape[d]):  # 1, 2, 4, ... < n: enough doublings to reach n
                x = legato.tensor.concat((x, x), d)
            if x.shape[d] > shape[d]:
                x = x[_take(len(shape), d, 0, shape[d])]
    return x


@legato.function
def broadcast_indices(idx, pads, shape):
    """The index tensors `idx` broadcast against each other to `shape` (torch's advanced
    indexing): each with a `pads[k]` (its shape with leading 1s) reshaped to it and repeated."""
    out = ()
    for k in legato.static_range(len(idx)):
        i = idx[k]
        if pads[k] is not None:
            i = repeat_to(legato.tensor.reshape(i, pads[k]), shape)
        out = (*out, i)
    return out


@legato.function
def gather_dims(x, idx, perm_in, table_shape, perm_out, out_shape, wrap, pads, shape):
    """x indexed by the int64 tensor `idx`, or by a tuple of them, one per indexed dim (torch's
    index_select / `x[..., i0, i1, ...]`; `pads` not None: they broadcast to `shape` first):
    the indexed dims moved first (`perm_in`) and the others flattened into one
    (`table_shape`), a row DMA per index (`legato.tensor.gather`, which combines several
    indices into the row on the scalar unit; `wrap`: a negative index counts from the end),
    then reshaped to `out_shape` and the index dims moved where torch puts them
    (`perm_out`)."""
    if pads is not None:
        idx = broadcast_indices(idx, pads, shape)
    t = legato.tensor.reshape(transpose(x, perm_in), table_shape)
    g = legato.tensor.gather(t, idx, wrap=wrap)
    return transpose(legato.tensor.reshape(g, out_shape), perm_out)


def _gather_impl(node, ctx, x, idxs, dims, what, wrap):
    """`x` indexed along `dims` (increasing) by the index nodes `idxs` (int64, shapes that
    broadcast), as torch's advanced indexing: the index dims replace the indexed dims where
    those are adjacent, else they come first."""
    dt = _same_dtype(node, x)
    tx, tis = val(x), [val(i) for i in idxs]
    for ti in tis:
        assert ti.dtype == torch.int64, f"{what} with {ti.dtype} indices (int64 are gathered)"
        _static(ti, f"{what} index")
    _static(tx, what)
    assert tx.dim() >= 1, f"{what} of a 0-d tensor"
    try:
        shape = tuple(torch.broadcast_shapes(*(ti.shape for ti in tis)))
    except RuntimeError as e:
        raise AssertionError(f"{what}: index tensors that do not broadcast ({e})") from None
    pads = None
    if any(tuple(ti.shape) != shape for ti in tis):  # x[i[:, None], j]: broadcast them first
        pads = tuple(
            None if tuple(ti.shape) == shape else (1,) * (len(shape) - ti.dim()) + tuple(ti.shape)
            for ti in tis
        )
        for op in ("reshape", "concat", "slice"):
            ctx.probe(op, torch.int64)
        tis = [*tis, *(torch.empty(shape, dtype=torch.int64) for p in pads if p is not None)]
    dims = [_norm_dim(d, tx.dim()) for d in dims]
    others = [i for i in range(tx.dim()) if i not in dims]
    rest = tuple(tx.shape[i] for i in others)
    rows = 1
    for d in rest:
        rows *= d
    perm_in = (*dims, *others)
    k = len(shape)
    gathered = shape + rest
    # torch: the index dims go to the first indexed dim when the indexed dims are adjacent
    at = dims[0] if dims == list(range(dims[0], dims[0] + len(dims))) else 0
    perm_out = (*range(k, k + at), *range(k), *range(k + at, len(gathered)))
    ctx.probe("gather", dt)
    ctx.probe("reshape", dt)
    if perm_in != tuple(range(tx.dim())) or at:
        ctx.probe("transpose", dt)
    _fits_sram(ctx, tx, tx, *tis, val(node), val(node), what=f"{what} operand, indices and result")
    table = (*(tx.shape[d] for d in dims), rows)
    idx = idxs[0] if len(idxs) == 1 else tuple(idxs)
    return Impl(
        gather_dims,
        (x, idx, perm_in, table, perm_out, gathered, wrap, pads, shape),
        name=f"{what} (row gather{f' by {len(idxs)} indices' if len(idxs) > 1 else ''}"
        f"{', broadcast' if pads else ''})",
    )


@register(aten.index_select.default)
def resolve_index_select(node, ctx):
    x, dim, idx = node.args[:3]
    assert val(idx).dim() <= 1, "index_select with a multi-dim index"
    # torch refuses a negative index here (an error, not a wrap)
    return _gather_impl(node, ctx, x, [idx], [dim], "index_select", False)


@register(aten.index.Tensor)
def resolve_index(node, ctx):
    x, indices = node.args[:2]
    given = [(i, t) for i, t in enumerate(indices) if t is not None]
    assert given, "indexing with no index tensor"
    for _, t in given:
        assert val(t).dtype not in (torch.bool, torch.uint8), (
            "indexing with a boolean mask (its result's size depends on the values)"
        )
    dims, idxs = [d for d, _ in given], [t for _, t in given]
    return _gather_impl(node, ctx, x, idxs, dims, "index", True)  # negative indices wrap


# --------------------------------------------------------------------------------------------
# Index offsets: embedding(W, p + c) as a gather of row p + c, the add on the scalar unit
#
# OPT's learned positions are `embedding(W, positions + 2)`. The VPU has no int64 add, and an
# f32 add is wrong from 2^24 on; the scalar unit adds in 64 bits and wraps as torch's int64
# add. So the constant offset is folded into the gather (`legato.tensor.gather(..., offset=c)`,
# the row's address computed on the scalar unit, then range-checked against the whole table):
# the same row as torch, or the same IndexError, for every int64 value (p = -1, OPT's padding,
# reads row 1; a p past the end, or one whose p + c wraps, faults and reruns eagerly). A view
# `W[c:]` would refuse p in [-c, 0), which torch reads.


@torch.library.custom_op("legato_aten::embedding_offset", mutates_args=())
def embedding_offset(weight: torch.Tensor, indices: torch.Tensor, offset: int) -> torch.Tensor:
    """torch's `embedding(weight, indices + offset)` (int64 add, wrapping), as one node."""
    return torch.nn.functional.embedding(indices + offset, weight)


@embedding_offset.register_fake
def _embedding_offset_fake(weight, indices, offset):
    return weight.new_empty((*indices.shape, weight.shape[1]))


EMBEDDING_OFFSET = torch.ops.legato_aten.embedding_offset.default
_OFFSET_SIGN = {aten.add.Tensor: 1, aten.add.Scalar: 1, aten.sub.Tensor: -1, aten.sub.Scalar: -1}


def _int64(c: int) -> int:
    """`c` wrapped to a signed 64-bit int, as torch's int64 arithmetic."""
    return (c + (1 << 63)) % (1 << 64) - (1 << 63)


def _offset_of(node):
    """(p, c) when `node` is the int64 tensor `p + c` (or `p - c`, with alpha) of an int `c`,
    else None."""
    if node.op != "call_function" or node.target not in _OFFSET_SIGN or len(node.args) != 2:
        return None
    p, c = node.args
    alpha = node.kwargs.get("alpha", 1)
    if not isinstance(p, torch.fx.Node) or type(c) is not int or type(alpha) is not int:
        return None
    tp, tn = p.meta.get("val"), node.meta.get("val")
    if not isinstance(tp, torch.Tensor) or not isinstance(tn, torch.Tensor):
        return None
    if tp.dtype != torch.int64 or tn.dtype != torch.int64:
        return None
    return p, _int64(_OFFSET_SIGN[node.target] * alpha * c)


@register_graph_pass
def fold_index_offsets(gm) -> bool:
    """`embedding(W, p + c1 + c2 ...)` -> `legato_aten::embedding_offset(W, p, c1 + c2 ...)`
    (the same values: int64 adds wrap, so their sum is one wrapped add); the adds that no node
    reads any more are removed. Returns whether the graph changed."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target != aten.embedding.default:
            continue
        w, ids = node.args[:2]
        base, c, folded = ids, 0, []
        while isinstance(base, torch.fx.Node) and (pc := _offset_of(base)) is not None:
            folded.append(base)
            base, c = pc[0], _int64(c + pc[1])
        if not folded:
            continue
        with gm.graph.inserting_before(node):
            new = (
                gm.graph.call_function(EMBEDDING_OFFSET, (w, base, c))
                if c
                else gm.graph.call_function(aten.embedding.default, (w, base, *node.args[2:]))
            )
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        for f in folded:  # outermost first: an add's input is read by the add folded after it
            if not f.users:
                gm.graph.erase_node(f)
        changed = True
    return changed


@register_graph_pass
def drop_empty_cat_operands(gm) -> bool:
    """`cat(xs, dim)` without its operands that add nothing (size 0 along `dim`, or torch's
    legacy empty [0]), when every operand has the result's dtype (torch's type promotion
    counts the empty ones too), keeping at least one; their producers that no node reads any more
    are removed (Phi-3's `q[..., rotary_dim:]` of a full-width rotary, the empty tensors a
    DynamicCache starts with): an empty tensor computed on the host would split the partition
    around it, and it holds nothing to compute. Returns whether the graph changed."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not aten.cat.default:
            continue
        xs = node.args[0]
        out = node.meta.get("val")
        if not isinstance(out, torch.Tensor) or not all(
            isinstance(x, torch.fx.Node) and isinstance(x.meta.get("val"), torch.Tensor) for x in xs
        ):
            continue
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        dim = _norm_dim(dim, out.dim())
        drop = [x for x in xs if _statically_empty(val(x), dim)]
        keep = [x for x in xs if x not in drop]
        if not drop or not keep or any(val(x).dtype != out.dtype for x in xs):
            continue
        node.args = (keep, *node.args[1:])
        for x in dict.fromkeys(drop):
            _erase_unread(gm, x)
        changed = True
    return changed


def _erase_unread(gm, node) -> None:
    """Erase `node` and then its inputs while no node reads them and they are pure."""
    todo = [node]
    while todo:
        n = todo.pop()
        if n.op != "call_function" or n.users or n.is_impure():
            continue
        ins = n.all_input_nodes
        gm.graph.erase_node(n)
        todo.extend(ins)


@legato.function
def embedding_at(weight, ids, offset):
    return legato.tensor.gather(weight, ids, offset=offset)


@register(EMBEDDING_OFFSET)
def resolve_embedding_offset(node, ctx):
    w, ids, c = node.args
    dt = _float_out(node)
    tw, ti = val(w), val(ids)
    assert tw.dtype == dt and tw.dim() == 2, f"embedding table {tw.dtype} {list(tw.shape)}"
    assert ti.dtype == torch.int64, f"embedding indices of {ti.dtype} (int64 are read)"
    _static(tw, "an embedding table with an index offset")
    ctx.probe("gather", dt)
    _fits_sram(ctx, ti, val(node), what="embedding indices and rows")
    # the table stays in shared DRAM: one DMA per index, of row index + c
    return Impl(
        embedding_at,
        (w, ids, c),
        memory={0: "shared_dram"},
        name=f"embedding of row index {'+' if c >= 0 else '-'} {abs(c)} (scalar-unit add)",
    )


# --------------------------------------------------------------------------------------------
# int64 data: float -> int64 casts (`.long()`), and its aliases

_TWO63 = 9223372036854775808.0  # 2^63, exact in f32


@legato.function
def to_int64(x, wide):
    """torch's CPU `.to(torch.int64)` of a float: truncated toward zero (vpu.cvt); NaN and
    values at or above 2^63 give INT64_MIN as x86's cvttss2si does in torch's kernel (the VPU
    saturates them and takes NaN to 0), values below -2^63 and -inf saturate to INT64_MIN on
    both. bf16 is converted to f32 first (exact)."""
    y = legato.tensor.cast(x, legato.types.float("float32")) if wide else x
    bad = legato.tensor.maximum(legato.tensor.ge(y, _TWO63), legato.tensor.ne(y, y))
    y = legato.tensor.where(bad, -_TWO63, y)
    return legato.tensor.cast(y, legato.types.i64)


@register(aten._to_copy.default)
def resolve_to_int64(node, ctx):
    x = node.args[0]
    src, dst = val(x).dtype, val(node).dtype
    assert src in _FLOATS and dst == torch.int64, f"_to_copy {src} -> {dst}"
    for op in ("ge", "ne", "maximum", "where", "constant", "cast_i64", "broadcast_binary"):
        ctx.probe(op, torch.float32)
    wide = src == torch.bfloat16
    if wide:
        ctx.probe("cast_f32", src)
    f = torch.empty(val(x).shape, dtype=torch.float32)
    _fits_sram(ctx, val(x), f, f, val(node), what="the cast's operand, f32 temporaries and result")
    return Impl(to_int64, (x, wide), name="float -> int64 (truncated, x86's out-of-range value)")


@register([aten.alias.default, aten.detach.default, aten.clone.default])
def resolve_int64_identity(node, ctx):
    """An int64 tensor's alias / detach / clone: the same value (index data the kernel holds)."""
    assert val(node).dtype == torch.int64 == val(node.args[0]).dtype, "not an int64 identity"
    return Impl(identity, (node.args[0],), name="int64 identity")


# --------------------------------------------------------------------------------------------
# pow(Tensor, Tensor)

_TWO23 = 8388608.0  # 2^23: f32 values of at least this magnitude are integers
_TWO24 = 16777216.0  # 2^24: ... and even


@legato.function
def _is_integer(a):
    """1.0 where the non-negative f32 `a` is an integer (inf counts), else 0.0: (a + 2^23) -
    2^23 rounds `a` < 2^23 to an integer; every f32 from 2^23 up is one."""
    r = (a + _TWO23) - _TWO23
    return legato.tensor.maximum(legato.tensor.ge(a, _TWO23), legato.tensor.eq(r, a))


@legato.function
def pow_tensors(x, y, wide):
    """x ** y elementwise as C's pow (torch's CPU kernel; bf16 computed in f32, rounded once):
    |x| ** y = exp(y * log|x|), negated for a negative x (or -0) and an odd integer y; NaN for a
    finite negative x and a non-integer y; 1 for y = 0, x = 1 and x = -1 with y = +-inf (even NaN
    operands). The f32 roundings of log, the product and exp make the result off by up to
    ~1.2e-7 * |y log x| relative (e.g. 1e-5 near overflow)."""
    f32 = legato.types.float("float32")
    if wide:
        x = legato.tensor.cast(x, f32)
        y = legato.tensor.cast(y, f32)
    ay = legato.tensor.abs(y)
    is_int = _is_integer(ay)
    h = ay * 0.5
    odd = is_int * legato.tensor.lt(ay, _TWO24) * (1.0 - _is_integer(h))
    m = legato.tensor.exp(y * legato.tensor.log(legato.tensor.abs(x)))
    neg = legato.tensor.maximum(legato.tensor.lt(x, 0.0), legato.tensor.lt(1.0 / x, 0.0))
    r = legato.tensor.where(neg * odd, -m, m)
    finite_neg = legato.tensor.lt(x, 0.0) * legato.tensor.gt(x, float("-inf"))
    r = legato.tensor.where(finite_neg * (1.0 - is_int), float("nan"), r)
    one = legato.tensor.maximum(legato.tensor.eq(y, 0.0), legato.tensor.eq(x, 1.0))
    one = legato.tensor.maximum(one, legato.tensor.eq(x, -1.0) * legato.tensor.eq(ay, float("inf")))
    r = legato.tensor.where(one, 1.0, r)
    return legato.tensor.cast(r, legato.types.float("bfloat16")) if wide else r


_POW_OPS = (
    *("abs", "add", "sub", "mul", "div", "exp", "log", "maximum", "neg"),
    *("eq", "lt", "gt", "ge", "where", "constant", "broadcast_binary"),
)


@register(aten.pow.Tensor_Tensor)
def resolve_pow_tensors(node, ctx):
    x, y = node.args[:2]
    dt = _same_dtype(node, x, y)
    wide = dt == torch.bfloat16
    for op in _POW_OPS:
        ctx.probe(op, torch.float32)
    if wide:
        ctx.probe("cast_f32", dt)
        ctx.probe("cast_bf16", torch.float32)
    o = val(node)
    temps = [o] * (12 if wide else 6)  # f32 temporaries: twice a bf16 result's bytes
    _fits_sram(ctx, val(x), val(y), o, *temps, what="pow operands, result and f32 temporaries")
    return Impl(pow_tensors, (x, y, wide), name="pow (exp(y log|x|), C's special cases)")


# --------------------------------------------------------------------------------------------
# pow(Tensor, Scalar) and pow(Scalar, Tensor)

POW_SQUARING = 64
"""Integer exponents up to this magnitude run by repeated squaring (at most 2 log2|n|
roundings, ~|n| f32 ulps relative); larger ones as exp(n log|x|) with the sign of an odd n,
whose error (~|n log x| ulps, at most ~90 where the result is finite) is then the smaller."""


def _bits(n: int) -> tuple[int, ...]:
    """The binary digits of n > 0, most significant first."""
    return tuple(int(b) for b in bin(n)[2:])


@legato.function
def pow_int(x, n):
    """x ** n for an integer n > 0: left-to-right repeated squaring over its binary digits, so
    n = 2 is x * x and n = 3 is (x * x) * x, as torch's CPU kernel; the sign of a negative x
    (and -0) comes out of the products."""
    bits = _bits(n)
    r = x
    for k in legato.static_range(1, len(bits)):
        r = r * r
        if bits[k] == 1:
            r = r * x
    return r


@legato.function
def pow_scalar(x, kind, e, n, negative, odd, wide, shape):
    """x ** e for a number e known at compile time, as torch's CPU kernel (C's pow, or its fast
    paths): `kind` "ones" (e = 0: 1 even for NaN), "int" (|e| <= POW_SQUARING: repeated
    squaring, then 1 / r for a negative e), "big_int" (exp(e log|x|), negated for a negative x
    or -0 and an odd e), "real" (exp(e log|x|); NaN for a finite negative x), "inf" (e = +-inf:
    exp(e log|x|), 1 for x = +-1) or "nan" (e = NaN: NaN, 1 for x = 1). A bf16 x (`wide`) is
    computed in f32 and rounded once."""
    if kind == "ones":
        return legato.tensor.full(shape, 1.0, x.dtype)
    f32 = legato.types.float("float32")
    y = legato.tensor.cast(x, f32) if wide else x
    if kind == "int":
        r = pow_int(y, n)
        if negative:
            r = 1.0 / r
    elif kind == "nan":
        r = legato.tensor.where(legato.tensor.eq(y, 1.0), 1.0, y * float("nan"))
    else:
        m = legato.tensor.exp(e * legato.tensor.log(legato.tensor.abs(y)))
        if kind == "big_int":
            if odd:
                neg = legato.tensor.maximum(
                    legato.tensor.lt(y, 0.0), legato.tensor.lt(1.0 / y, 0.0)
                )
                r = legato.tensor.where(neg, -m, m)
            else:
                r = m
        elif kind == "real":
            finite_neg = legato.tensor.lt(y, 0.0) * legato.tensor.gt(y, float("-inf"))
            r = legato.tensor.where(finite_neg, float("nan"), m)
        else:
            r = legato.tensor.where(legato.tensor.eq(legato.tensor.abs(y), 1.0), 1.0, m)
    return legato.tensor.cast(r, x.dtype) if wide else r


def _torch_exponent(e, dt) -> float:
    """The exponent torch's CPU kernel computes with: a bf16 tensor's is rounded to bf16 first
    (`exp_scalar.to<BFloat16>()`), an f32 tensor's is kept as a double."""
    e = float(e)
    return float(torch.tensor(e, dtype=torch.bfloat16)) if dt == torch.bfloat16 else e


_POW_SCALAR_OPS = {
    "int": ("mul", "div", "constant"),
    "big_int": ("abs", "log", "mul", "exp", "lt", "div", "maximum", "neg", "where", "constant"),
    "real": ("abs", "log", "mul", "exp", "lt", "gt", "where", "constant"),
    "inf": ("abs", "log", "mul", "exp", "eq", "where", "constant"),
    "nan": ("eq", "mul", "where", "constant"),
}


@register(aten.pow.Tensor_Scalar)
def resolve_pow_scalar(node, ctx):
    """x ** e, e a number: torch's fast paths (e = 2, 3, -2: products of x in x's dtype; -1: 1
    / x; 0.5 / -0.5: sqrt / rsqrt) as torch computes them, any other e as C's pow
    (`pow_scalar`), with the exponent a bf16 tensor's kernel rounds it to."""
    x, e0 = node.args[:2]
    dt = _same_dtype(node, x)
    assert _number(e0), f"pow with the exponent {e0!r} (a real number is implemented)"
    if e0 == 0.5 or e0 == -0.5:
        op = "sqrt" if e0 == 0.5 else "rsqrt"
        ctx.probe(op, dt)
        return Impl(unary, (x, op), name=f"pow ({op})")
    e = _torch_exponent(e0, dt)
    shape = val(node).shape
    wide = dt == torch.bfloat16 and e not in (2.0, 3.0, -2.0, -1.0)
    n, odd = 0, False
    if e == 0:
        kind = "ones"
        _static(val(node), "pow with the exponent 0")
        ctx.probe("constant", dt)
        wide = False
    elif math.isnan(e):
        kind = "nan"
    elif math.isinf(e):
        kind = "inf"
    elif e.is_integer() and abs(e) <= POW_SQUARING:
        kind, n = "int", int(abs(e))
    elif e.is_integer():
        kind, odd = "big_int", int(e) % 2 == 1
    else:
        kind = "real"
    cdt = torch.float32 if wide else dt
    for op in _POW_SCALAR_OPS.get(kind, ()):
        ctx.probe(op, cdt)
    if wide:
        ctx.probe("cast_f32", dt)
        ctx.probe("cast_bf16", torch.float32)
    # no tuple among the arguments but the shape of "ones": a row-split kernel (chip_rows)
    # takes an elementwise step only when no argument is a sequence
    args = (x, kind, e, n, e < 0, odd, wide, tuple(shape) if kind == "ones" else None)
    return Impl(pow_scalar, args, name=f"pow (x ** {e0!r}: {kind})")


@legato.function
def pow_of_number(b, y, wide, shape):
    """b ** y for a number b: pow_tensors of the tensor b (y's dtype and shape: a bf16 y
    rounds b to bf16, as torch's wrapped number)."""
    return pow_tensors(legato.tensor.full(shape, b, y.dtype), y, wide)


@register(aten.pow.Scalar)
def resolve_pow_of_number(node, ctx):
    """b ** y, b a number: 1 where b = 1 (torch fills ones), else pow(Tensor, Tensor) of b
    filled to y's shape."""
    b, y = node.args[:2]
    assert _number(b), f"pow with the base {b!r} (a real number is implemented)"
    dt = _same_dtype(node, y)
    _static(val(node), "pow of a number")
    ctx.probe("constant", dt)
    shape = tuple(val(node).shape)
    ty = legato.types.float("float32" if dt == torch.float32 else "bfloat16")
    if b == 1:
        return Impl(full, (shape, 1.0, ty), name="pow (1 ** y: ones)")
    wide = dt == torch.bfloat16
    for op in _POW_OPS:
        ctx.probe(op, torch.float32)
    if wide:
        ctx.probe("cast_f32", dt)
        ctx.probe("cast_bf16", torch.float32)
    o = val(node)
    temps = [o] * (14 if wide else 7)
    _fits_sram(ctx, val(y), o, *temps, what="pow operand, result and f32 temporaries")
    return Impl(pow_of_number, (float(b), y, wide, shape), name="pow (number ** tensor)")
