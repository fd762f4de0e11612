"""ATen ops in Legato: `@legato.function` implementations and their resolvers.

Each resolver checks what its implementation and the target can do (dtypes, shapes, MPU tile,
SRAM, whether the compiler lowers the legato ops it uses: `ctx.probe`) with `assert`; a failed
assertion makes the node extern with the assertion's message as the reason.

Types are never promoted silently: an implementation only runs when every tensor operand has the
node's output dtype (torch's promotion would otherwise differ from Legato's).
"""

from __future__ import annotations

import math
import operator

import torch

import legato
from legato.torch import capabilities
from legato.torch.registry import Impl, register

aten = torch.ops.aten
_FLOATS = (torch.bfloat16, torch.float32)

# --------------------------------------------------------------------------------------------
# Implementations (Legato DSL; inlined into the generated kernel)


@legato.function
def matmul(a, w):
    return a @ w


@legato.function
def addmm(bias, a, w):
    return a @ w + bias


@legato.function
def scaled_sum(r, bias, alpha, beta, dtype):
    """beta * bias + alpha * r in f32 (`r` the f32 product), rounded once to `dtype` (as
    torch's CPU addmm / baddbmm); beta 0 ignores the bias (as torch: a NaN there is not
    propagated)."""
    f32 = legato.types.float("float32")
    if alpha != 1.0:
        r = r * alpha
    if beta != 0.0:
        b = legato.tensor.cast(bias, f32)
        if beta != 1.0:
            b = b * beta
        r = r + b
    return legato.tensor.cast(r, dtype)


@legato.function
def addmm_scaled(bias, a, w, alpha, beta):
    """beta * bias + alpha * (a @ w), computed in f32."""
    return scaled_sum(
        legato.tensor.matmul(a, w, legato.types.float("float32")), bias, alpha, beta, a.dtype
    )


@legato.function
def bmm(a, b):
    """[B, M, K] @ [B, K, N]: one 2-D matmul per batch (b[i] is staged into mpu_buffer as the
    MPU weight), stacked."""
    outs = ()
    for i in legato.static_range(a.shape[0]):
        r = a[i] @ b[i]
        outs = outs + (legato.tensor.reshape(r, (1,) + r.shape),)
    return outs[0] if a.shape[0] == 1 else legato.tensor.concat(outs, 0)


def _causal_starts(s, lk):
    """Compile-time helper: row i of the causal mask [s, lk] (0 where col <= i, -inf after) is
    z[start_i : start_i + lk] of z = [0] * lk + [-inf] * (lk - 1)."""
    return tuple(max(lk - 1 - i, 0) for i in range(s))


@legato.function
def causal_mask(s, lk, dtype):
    f = legato.types.float("float32")
    z = legato.tensor.concat(
        (legato.tensor.full((1, lk), 0.0, f), legato.tensor.full((1, lk - 1), float("-inf"), f)),
        1,
    )
    starts = _causal_starts(s, lk)
    m = z[:, starts[0] : starts[0] + lk]
    for st in starts[1:]:  # row by row: few values live at once (no register spilling yet)
        m = legato.tensor.concat((m, z[:, st : st + lk]), 0)
    return m


@legato.function
def mask_rows(m, b, h, per_b, per_h):
    """The [S, L] slice of an explicit attention mask for (batch b, head h): `m` is 2-, 3- or
    4-d, broadcast over batch (`per_b` False) and heads (`per_h` False)."""
    if m.ndim == 4:
        if per_b:
            if per_h:
                return m[b, h]
            return m[b, 0]
        if per_h:
            return m[0, h]
        return m[0, 0]
    if m.ndim == 3:
        if per_h:
            return m[h]
        return m[0]
    return m


@legato.function
def attention(q, k, v, scale, causal, wide, mask, mask_b, mask_h, has_mask):
    """softmax(q @ k^T * scale [+ causal mask] [+ explicit mask]) @ v per (batch, head), as the
    CPU flash kernel computes it: scores and softmax in f32, the unnormalized probabilities
    rounded to the input dtype for the second matmul (fp32 accumulation), divided by the f32 row
    sums at the end. Grouped-query attention: query head h reads key/value head h // (heads /
    kv heads). `wide`: the operands are f32 (no rounding of the probabilities).
    `has_mask`: `mask` is an additive float mask (torch turns a boolean one into 0 / -inf
    before this op), added to the scaled scores in f32; `mask_b`/`mask_h`: it differs per
    batch / head (else broadcast)."""
    f32 = legato.types.float("float32")
    nb, nh, s, d = q.shape
    lk = k.shape[2]
    rep = nh // k.shape[1]
    if causal and lk > 1:
        cmask = causal_mask(s, lk, f32)
    per_b = ()
    for b in legato.static_range(nb):
        per_h = ()
        for h in legato.static_range(nh):
            kt = legato.tensor.transpose(k[b, h // rep], (1, 0))
            sc = legato.tensor.matmul(q[b, h], kt, f32) * scale
            if causal and lk > 1:
                sc = sc + cmask
            if has_mask:
                sc = sc + legato.tensor.cast(mask_rows(mask, b, h, mask_b, mask_h), f32)
            e = legato.tensor.exp(sc - legato.tensor.max(sc, axis=1, keepdim=True))
            if wide:
                o = legato.tensor.matmul(e, v[b, h // rep], f32) / legato.tensor.sum(e, 1, True)
            else:
                o = legato.tensor.matmul(legato.tensor.cast(e, q.dtype), v[b, h // rep], f32)
                o = legato.tensor.cast(o / legato.tensor.sum(e, 1, True), q.dtype)
            per_h = per_h + (legato.tensor.reshape(o, (1, 1, s, d)),)
        per_b = per_b + ((per_h[0] if nh == 1 else legato.tensor.concat(per_h, 1)),)
    return ((per_b[0] if nb == 1 else legato.tensor.concat(per_b, 0)),)


@legato.function
def baddbmm(bias, a, b, alpha, beta):
    """beta * bias + alpha * (a @ b) per batch (as `bmm`), computed in f32."""
    f32 = legato.types.float("float32")
    outs = ()
    for i in legato.static_range(a.shape[0]):
        r = legato.tensor.matmul(a[i], b[i], f32)
        outs = outs + (legato.tensor.reshape(r, (1,) + r.shape),)
    r = outs[0] if a.shape[0] == 1 else legato.tensor.concat(outs, 0)
    return scaled_sum(r, bias, alpha, beta, a.dtype)


@legato.function
def stack(xs, dim, single):
    """torch.stack: each operand with a new size-1 dim at `dim`, concatenated along it."""
    outs = ()
    for x in xs:
        outs = outs + (legato.tensor.reshape(x, x.shape[:dim] + (1,) + x.shape[dim:]),)
    return outs[0] if single else legato.tensor.concat(outs, dim)


@legato.function
def add(a, b):
    return a + b


@legato.function
def sub(a, b):
    return a - b


@legato.function
def mul(a, b):
    return a * b


@legato.function
def div(a, b):
    return a / b


@legato.function
def rsub(a, b):
    return b - a


@legato.function
def maximum(a, b):
    return legato.tensor.maximum(a, b)


@legato.function
def minimum(a, b):
    return legato.tensor.minimum(a, b)


@legato.function
def clamp(x, lo, hi):
    return legato.tensor.clamp(x, lo, hi)


@legato.function
def relu(x):
    return legato.tensor.maximum(x, 0.0)


@legato.function
def unary(x, op):
    if op == "neg":
        return -x
    if op == "exp":
        return legato.tensor.exp(x)
    if op == "log":
        return legato.tensor.log(x)
    if op == "sqrt":
        return legato.tensor.sqrt(x)
    if op == "rsqrt":
        return legato.tensor.rsqrt(x)
    if op == "tanh":
        return legato.tensor.tanh(x)
    if op == "sigmoid":
        return legato.tensor.sigmoid(x)
    if op == "silu":
        return legato.tensor.silu(x)
    if op == "gelu":
        return legato.tensor.gelu(x)
    if op == "cos":
        return legato.tensor.cos(x)
    if op == "sin":
        return legato.tensor.sin(x)
    if op == "erf":
        return legato.tensor.erf(x)
    if op == "log1p":
        return legato.tensor.log1p(x)
    if op == "gelu_tanh":
        return legato.tensor.gelu_tanh(x)
    if op == "softplus":
        return legato.tensor.softplus(x)
    if op == "abs":
        return legato.tensor.abs(x)
    assert False, op  # noqa: B011 - Legato code: the frontend reports it at compile time


@legato.function
def reduce(x, op, axis, keepdim):
    if op == "sum":
        return legato.tensor.sum(x, axis, keepdim)
    if op == "mean":
        return legato.tensor.mean(x, axis, keepdim)
    if op == "amax":
        return legato.tensor.max(x, axis=axis, keepdim=keepdim)
    if op == "amin":
        return legato.tensor.amin(x, axis=axis, keepdim=keepdim)
    assert False, op  # noqa: B011 - Legato code: the frontend reports it at compile time


@legato.function
def reduce_all(x, op, flat, shape):
    """`op` over every element of `x` (flattened to `flat`), shaped `shape` (0-d, or all ones
    with keepdim)."""
    return legato.tensor.reshape(reduce(legato.tensor.reshape(x, flat), op, 0, True), shape)


@legato.function
def reduce_dims(x, op, perm, flat, axis, shape):
    """`op` over several (not all) dims of `x`, reduced once as torch does: the reduced dims
    moved after the kept ones (`perm`; None when they are already adjacent), merged into one
    dim (`flat`, the reduced one at `axis`), reduced, then shaped `shape` (the result's, with
    or without keepdim's 1s)."""
    if perm is not None:
        x = transpose(x, perm)
    r = reduce(legato.tensor.reshape(x, flat), op, axis, False)
    return legato.tensor.reshape(r, shape)


@legato.function
def reduce_seq(x, op, dims, wide, count, shape):
    """`op` over the dims of a tensor with dynamic dims, one dim at a time (a reduction over a
    dynamic dim takes no merge with another): `dims` the index of each in the tensor left by
    the reductions before it (`_reduction_order`); sums and means of a bf16 x (`wide`) in
    f32, rounded once; a mean divides the f32 sum once by the element count, `count` = (static count, dynamic dim or None, its bound);
    `shape`: the result's when it is not the reductions' (keepdim's 1s, or 0-d)."""
    y = legato.tensor.cast(x, legato.types.float("float32")) if wide else x
    for i in legato.static_range(len(dims)):
        # the last reduction of all dims keeps its dim: a 0-d result is a reshape
        last = i == len(dims) - 1 and len(dims) == x.ndim
        y = reduce(y, "sum" if op == "mean" else op, dims[i], last)
    if op == "mean":
        if count[1] is None:
            y = y / float(count[0])
        else:
            y = y / (_runtime_count(x, count[1], count[2]) * float(count[0]))
    if wide:
        y = legato.tensor.cast(y, x.dtype)
    if shape is not None:
        y = legato.tensor.reshape(y, shape)
    return y


def _reduction_order(shape, dims, op):
    """Compile-time helper: an order of the dims `dims` of `shape` that the compiler reduces
    one at a time (each reduction drops its dim): a reduced dim is moved last past the dims
    after it, which takes a static product of the dims before it (`transpose3`); trailing
    dims first. Asserts that there is one."""
    cur, left, order = list(range(len(shape))), sorted(set(dims), reverse=True), []
    while left:
        for d in left:
            j = cur.index(d)
            if j == len(cur) - 1 or all(isinstance(shape[k], int) for k in cur[:j]):
                break
        else:
            raise AssertionError(
                f"{op} over dim {left[0]} past a dynamic dim (the compiler moves a reduced dim "
                "last only past static leading dims)"
            )
        order.append(cur.index(d))
        cur.remove(d)
        left.remove(d)
    return tuple(order)


@legato.function
def _runtime_count(x, d, bound):
    """x.size(d) as an f32 [1] tensor: the sum of that many ones (exact below 2**24)."""
    ones = legato.tensor.full((bound,), 1.0, legato.types.float("float32"))
    return legato.tensor.sum(ones[0 : x.size(d)], 0, True)


def _reduce_seq_impl(node, ctx, x, op, dims, dt):
    """The Impl of `op` over the dims `dims` (normalized) of x with a dynamic shape, reducing
    the dynamic dim too or dims around a kept one: `reduce_seq`."""
    shape = tuple(val(x).shape)
    order = _reduction_order(shape, dims, op)
    dims = sorted(set(dims))
    dyn = [d for d in dims if not isinstance(shape[d], int)]
    wide = dt == torch.bfloat16 and op in ("sum", "mean")
    if wide:
        ctx.probe("cast_f32", dt)
        ctx.probe("cast_bf16", torch.float32)
    sdt = torch.float32 if wide else dt
    ctx.probe("sum" if op == "mean" else "max", sdt)
    if op == "amin":
        ctx.probe("neg", sdt)
    count = (math.prod(shape[d] for d in dims if d not in dyn), None, None)
    if op == "mean":
        ctx.probe("div", sdt)
        if dyn:
            assert len(dyn) == 1, f"mean over several dynamic dims {dyn}"
            ctx.probe("constant", torch.float32)
            ctx.probe("slice", torch.float32)
            count = (count[0], dyn[0], _dims(ctx, [shape[dyn[0]]])[0][1])
    out = tuple(val(node).shape)
    reshaped = len(out) == len(shape) or not out  # keepdim's 1s, or a 0-d result
    if reshaped:
        ctx.probe("reshape", dt)
    return Impl(
        reduce_seq,
        (x, op, order, wide, count, _dims(ctx, out) if reshaped else None),
        name=f"{op} over dims {dims} of a dynamic shape (one dim at a time)",
    )


def _reduce_dims_impl(node, ctx, x, op, dims, dt):
    """The Impl of `op` over the dims `dims` (normalized, several, not all) of x: static, or
    with one dynamic dim that is kept while the reduced dims are static and adjacent (merged
    in place, the reshape keeps the runtime size: a decode step's [B, ?L, H, D] summed over
    H and D)."""
    shape = tuple(val(x).shape)
    red = sorted(set(dims))
    kept = [d for d in range(len(shape)) if d not in red]
    adjacent = red == list(range(red[0], red[-1] + 1))
    dynamic = [d for d, n in enumerate(shape) if not isinstance(n, int)]
    if dynamic and not (len(dynamic) == 1 and dynamic[0] in kept and adjacent):
        return _reduce_seq_impl(node, ctx, x, op, red, dt)
    ctx.probe("reshape", dt)
    n = math.prod(shape[d] for d in red)
    if adjacent:  # merged in place
        perm, axis = None, red[0]
        flat = _dims(ctx, (*shape[: red[0]], n, *shape[red[-1] + 1 :]))
    else:
        ctx.probe("transpose", dt)
        perm, axis = (*kept, *red), len(kept)
        flat = (*(shape[d] for d in kept), n)
    out = _dims(ctx, val(node).shape)
    return Impl(reduce_dims, (x, op, perm, flat, axis, out), name=f"{op} over dims {red}")


@legato.function
def softmax(x, axis):
    m = legato.tensor.max(x, axis=axis, keepdim=True)
    e = legato.tensor.exp(x - m)
    return e / legato.tensor.sum(e, axis, True)


@legato.function
def log_softmax(x, axis, wide):
    """x - max - log(sum(exp(x - max))) over `axis`; a bf16 x (`wide`) in f32, rounded once (as
    torch's CPU kernel)."""
    y = legato.tensor.cast(x, legato.types.float("float32")) if wide else x
    d = y - legato.tensor.max(y, axis=axis, keepdim=True)
    r = d - legato.tensor.log(legato.tensor.sum(legato.tensor.exp(d), axis, True))
    return legato.tensor.cast(r, x.dtype) if wide else r


@legato.function
def reshape(x, shape):
    return legato.tensor.reshape(x, shape)


def _rotations(perm):
    """Compile-time helper: `perm` as a sequence of the permutations the VPU transposes (keep
    dims [0, k), then swap the groups [k, m) and [m, rank)), applied in order."""
    cur, steps, r = list(range(len(perm))), [], len(perm)
    for k in range(r):
        j = cur.index(perm[k])
        if j != k:
            step = list(range(k)) + list(range(j, r)) + list(range(k, j))
            steps.append(tuple(step))
            cur = [cur[i] for i in step]
    return tuple(steps)


@legato.function
def transpose(x, perm):
    for step in _rotations(perm):
        x = legato.tensor.transpose(x, step)
    return x


@legato.function
def broadcast(x, shape):
    return legato.tensor.broadcast(x, shape)


@legato.function
def identity(x):
    return x


@legato.function
def cast(x, dtype):
    return legato.tensor.cast(x, dtype)


@legato.function
def concat(xs, axis):
    return legato.tensor.concat(xs, axis)


def _index(ndim, dim, start, end, step):
    """Compile-time helper: the index tuple selecting start:end:step of `dim`."""
    return tuple(slice(start, end, step) if i == dim else slice(None) for i in range(ndim))


@legato.function
def slice_dim(x, dim, start, end, step):
    return x[_index(x.ndim, dim, start, end, step)]


# --------------------------------------------------------------------------------------------
# Resolver helpers


def val(n):
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    assert isinstance(v, torch.Tensor), f"{getattr(n, 'name', n)} is not a tensor"
    return v


def out_dtype(node):
    return val(node).dtype


def _float_out(node):
    dt = out_dtype(node)
    assert dt in _FLOATS, f"dtype {dt} is not supported (bf16 and f32 are)"
    return dt


def _same_dtype(node, *operands):
    dt = _float_out(node)
    for o in operands:
        if isinstance(o, torch.fx.Node):
            assert val(o).dtype == dt, (
                f"operand {o.name} is {val(o).dtype} but the result is {dt} "
                "(no implicit type promotion)"
            )
    return dt


def _dims(ctx, shape):
    """A DSL shape for a torch shape: ints, `(-1, bound)` for dynamic sizes."""
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
        else:
            b = ctx.bound(d)
            assert b is not None, f"dynamic size {d} has no upper bound"
            out.append((-1, b))
    return tuple(out)


def _legato_float(dt):
    return legato.types.float("float32" if dt == torch.float32 else "bfloat16")


def _static_shape(t, what):
    assert all(isinstance(d, int) for d in t.shape), f"{what} of a dynamic shape"


def _norm_dim(d, rank):
    return d + rank if d < 0 else d


def _sram_bytes(ctx, tensors) -> int:
    total = 0
    for t in tensors:
        n = 1
        for d in _dims(ctx, t.shape):
            n *= d[1] if isinstance(d, tuple) else d
        total += n * t.element_size()
    return total


def _fits_sram(ctx, *tensors, what="operands"):
    total = _sram_bytes(ctx, tensors)
    assert total <= ctx.model.sram_size, (
        f"{what} need {total} bytes of SRAM, more than the {ctx.model.sram_size} of one core "
        "(no tiling across cores yet)"
    )


def _fits_sram_rows(ctx, *tensors, what="operands") -> str | None:
    """For a row-local op (each row of its result from the same row of its operands): None when
    the whole `tensors` fit one core's SRAM; else the reason it runs only split over rows
    (`Impl.rows_only`: `chip_rows` gives each core blocks of rows), asserting that one row of
    each (its last dim) fits."""
    total = _sram_bytes(ctx, tensors)
    if total <= ctx.model.sram_size:
        return None
    row = 0
    for t in tensors:
        last = _dims(ctx, t.shape[-1:])[0] if t.dim() else 1
        row += (last[1] if isinstance(last, tuple) else last) * t.element_size()
    assert row <= ctx.model.sram_size, (
        f"{what} need {row} bytes of SRAM for one row, more than the {ctx.model.sram_size} of "
        "one core"
    )
    return (
        f"{what} need {total} bytes of SRAM, more than the {ctx.model.sram_size} of one core: "
        "they run only split over rows across the cores (a row-split kernel)"
    )


# --------------------------------------------------------------------------------------------
# Matmul on the MPU


def _mpu_checks(ctx, node, a, w) -> str:
    """Checks of a matmul on the MPU; returns where the weight goes: bf16 weights are loaded
    straight into the MPU (`mpu_weight`), f32 weights stay in sram (the compiler splits them into
    bf16 halves and stages one tile at a time: legato.numerics.matmul_f32_split)."""
    ta, tw = val(a), val(w)
    assert ta.dtype == tw.dtype and ta.dtype in (torch.bfloat16, torch.float32), (
        f"the MPU multiplies bf16 (or f32, split into bf16 halves) operands of one dtype, got "
        f"{ta.dtype} @ {tw.dtype}"
    )
    assert ta.dim() == 2 and tw.dim() == 2, "mm needs [M, K] @ [K, N]"
    assert all(isinstance(d, int) for d in tw.shape), "the MPU weight must have a static shape"
    k, n = tw.shape
    f32 = ta.dtype == torch.float32
    tiled = f32 or k > ctx.model.mpu_tile_k or n > ctx.model.mpu_tile_n
    # the compiler tiles larger weights (K tiles accumulate in f32; N tiles work on transposed
    # copies of the weight: one in sram, one block at a time in mpu_buffer)
    wbytes = k * n * 2
    if not f32:
        assert wbytes * (2 if tiled else 1) <= ctx.model.mpu_buffer_size, (
            f"weight {k}x{n} ({wbytes} bytes) does not fit one core's mpu_buffer "
            f"({ctx.model.mpu_buffer_size} bytes) (no tiling across cores yet)"
        )
    # f32: the weight, its two bf16 halves and their transposed copies live in sram
    extra = [torch.empty(k, n, dtype=torch.bfloat16)] * ((4 if f32 else 1) if tiled else 0)
    if f32:
        extra += [tw, *[torch.empty_like(ta, dtype=torch.bfloat16)] * 2]
    acc = [torch.empty(*val(node).shape[:-1], n, dtype=torch.float32)] if tiled else []
    _fits_sram(
        ctx, ta, ta, val(node), *extra, *acc, *acc, what="mm input, output and tiling buffers"
    )
    return "sram" if f32 else "mpu_weight"


@register(aten.mm.default)
def resolve_mm(node, ctx):
    a, w = node.args
    where = _mpu_checks(ctx, node, a, w)
    ctx.probe("matmul", val(a).dtype)
    return Impl(matmul, (a, w), memory={1: where})


@register(aten.addmm.default)
def resolve_addmm(node, ctx):
    bias, a, w = node.args[:3]
    alpha, beta = _alpha_beta(node)
    where = _mpu_checks(ctx, node, a, w)
    dt = val(a).dtype
    assert val(bias).dtype == dt, f"addmm bias is {val(bias).dtype}, the operands {dt}"
    ctx.probe("matmul", dt)
    ctx.probe("add", dt)
    ctx.probe("broadcast_binary", dt)
    if alpha == 1 and beta == 1 and dt != torch.bfloat16:
        return Impl(addmm, (bias, a, w), memory={2: where})
    # bf16: the product and the bias are summed in f32 and rounded once, as torch's CPU addmm
    # (`a @ w + bias` in bf16 rounds twice: 1-2 ulps off eager on a third of the elements)
    _probe_scaled_sum(ctx, dt)
    return Impl(addmm_scaled, (bias, a, w, alpha, beta), memory={2: where})


def _probe_scaled_sum(ctx, dt):
    for op in ("mul", "add", "constant", "broadcast_binary"):
        ctx.probe(op, torch.float32)
    if dt == torch.bfloat16:
        ctx.probe("cast_f32", dt)
        ctx.probe("cast_bf16", torch.float32)


def _alpha_beta(node):
    """(alpha, beta) of an addmm / baddbmm node as floats (numbers only)."""
    alpha, beta = node.kwargs.get("alpha", 1), node.kwargs.get("beta", 1)
    for name, x in (("alpha", alpha), ("beta", beta)):
        assert isinstance(x, (int, float)) and not isinstance(x, bool), (
            f"{node.target} with {name}={x!r} (a number is implemented)"
        )
    return float(alpha), float(beta)


# --------------------------------------------------------------------------------------------
# Elementwise


def _known_same_shape(x, y) -> bool:
    """Shapes equal without asking the ShapeEnv: comparing a symbolic size with `==` records a
    guard (e.g. Eq(s72, 64)) that pins a dynamic dim to one size (vLLM's token dim did)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return len(x) == len(y) and all(statically_known_true(p == q) for p, q in zip(x, y))


@legato.function
def widened(fn, a, b, wide_a, wide_b):
    """`fn(a, b)` with the bf16 operand(s) flagged `wide_*` cast to f32 first: torch's type
    promotion of bf16 with f32 (exact: every bf16 is an f32)."""
    f32 = legato.types.float("float32")
    if wide_a:
        a = legato.tensor.cast(a, f32)
    if wide_b:
        b = legato.tensor.cast(b, f32)
    return fn(a, b)


def _widen(node, ctx, *operands):
    """Which operands are bf16 tensors of an f32 result (promoted exactly by a cast); asserts
    that the others have the result's dtype."""
    dt = _float_out(node)
    wide = []
    for o in operands:
        is_wide = (
            isinstance(o, torch.fx.Node)
            and dt == torch.float32
            and val(o).dtype == torch.bfloat16
            and val(o).dim() > 0
        )
        wide.append(is_wide)
    if any(wide):
        ctx.probe("cast_f32", torch.bfloat16)
    _same_dtype(node, *(o for o, w in zip(operands, wide) if not w))
    return dt, wide


def _bool_tensor(x) -> bool:
    return isinstance(x, torch.fx.Node) and val(x).dtype == torch.bool


@legato.function
def mul_by_mask(m, x, cshape, padded, ty):
    """x * m for a bool m (i1, or a comparison's 1.0 / 0.0 float mask on Legato), as torch's
    promotion of m to 1.0 / 0.0: where(m, x, x * 0.0), the same bits (x * 0.0 keeps -0.0 and
    NaN for inf / NaN); a broadcasting m (`cshape` not None) as `where_broadcast`."""
    if cshape is None:
        return legato.tensor.where(m, x, x * 0.0)
    return where_broadcast(m, x, x * 0.0, cshape, padded, ty)


def _mul_by_mask(node, ctx, a, b):
    """The Impl of a mul with one bool tensor operand (either side)."""
    m, x = (a, b) if _bool_tensor(a) else (b, a)
    assert isinstance(x, torch.fx.Node) and not _bool_tensor(x), "mul of two bools"
    dt = _same_dtype(node, x)
    for op in ("mul", "constant", "where"):
        ctx.probe(op, dt)
    if tuple(val(x).shape) != tuple(val(node).shape):
        ctx.probe("broadcast_binary", dt)
    impl = _select_impl(node, ctx, m, x, x, dt, "mul by a mask")
    cshape, padded, ty = impl.args[3:] if impl.fn is where_broadcast else (None, None, None)
    return Impl(mul_by_mask, (m, x, cshape, padded, ty), name=impl.name or "mul by a mask")


def _binary(fn, probe_op):
    def resolver(node, ctx):
        a, b = node.args[:2]
        assert node.kwargs.get("alpha", 1) == 1 and (len(node.args) < 3 or node.args[2] == 1), (
            "alpha != 1"
        )
        if fn is mul and (_bool_tensor(a) or _bool_tensor(b)):
            # x * (p < q): torch promotes the bool to x's dtype, 1.0 / 0.0
            return _mul_by_mask(node, ctx, a, b)
        dt, wide = _widen(node, ctx, a, b)
        for x in (a, b):
            assert isinstance(x, (torch.fx.Node, int, float)) and not isinstance(x, bool), (
                f"operand {x!r} is neither a tensor nor a number"
            )
        ctx.probe(probe_op, dt)
        if not (isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node)):
            ctx.probe("constant", dt)
            a, b = (
                float(a) if not isinstance(a, torch.fx.Node) else a,
                float(b) if not isinstance(b, torch.fx.Node) else b,
            )
        elif not _known_same_shape(val(a).shape, val(b).shape):
            ctx.probe("broadcast_binary", dt)
        if any(wide):
            return Impl(widened, (fn, a, b, *wide), name=f"{fn.__name__} (bf16 -> f32)")
        return Impl(fn, (a, b))

    return resolver


register([aten.add.Tensor, aten.add.Scalar], _binary(add, "add"))
register([aten.sub.Tensor, aten.sub.Scalar], _binary(sub, "sub"))
register([aten.mul.Tensor, aten.mul.Scalar], _binary(mul, "mul"))
register([aten.div.Tensor, aten.div.Scalar], _binary(div, "div"))
register(aten.maximum.default, _binary(maximum, "maximum"))
register(aten.minimum.default, _binary(minimum, "minimum"))
register(aten.rsub.Tensor, _binary(rsub, "sub"))  # other - self


@register([aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default])
def resolve_clamp(node, ctx):
    x = node.args[0]
    if node.target == aten.clamp_min.default:
        lo, hi = node.args[1], None
    elif node.target == aten.clamp_max.default:
        lo, hi = None, node.args[1]
    else:
        lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
        hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    for b in (lo, hi):
        assert b is None or (isinstance(b, (int, float)) and not isinstance(b, bool)), (
            f"clamp bound {b!r} is not a number (tensor bounds are not implemented)"
        )
    assert lo is not None or hi is not None, "clamp without bounds"
    dt = _same_dtype(node, x)
    ctx.probe("clamp", dt)
    return Impl(clamp, (x, None if lo is None else float(lo), None if hi is None else float(hi)))


@register(aten.softplus.default)
def resolve_softplus(node, ctx):
    x = node.args[0]
    beta = node.args[1] if len(node.args) > 1 else node.kwargs.get("beta", 1)
    threshold = node.args[2] if len(node.args) > 2 else node.kwargs.get("threshold", 20)
    assert beta == 1 and threshold == 20, (
        f"softplus with beta={beta}, threshold={threshold} (the VPU's is beta 1, threshold 20)"
    )
    dt = _same_dtype(node, x)
    ctx.probe("softplus", dt)
    return Impl(unary, (x, "softplus"))


@register(aten.rsub.Scalar)
def resolve_rsub(node, ctx):
    x, s = node.args[:2]
    dt = _same_dtype(node, x)
    ctx.probe("sub", dt)
    ctx.probe("constant", dt)
    return Impl(rsub, (x, float(s)))


def _unary(op):
    def resolver(node, ctx):
        x = node.args[0]
        dt = _same_dtype(node, x)
        kind = op
        if op == "gelu":
            approximate = node.kwargs.get("approximate", "none")
            assert approximate in ("none", "tanh"), f"gelu with approximate={approximate!r}"
            kind = "gelu_tanh" if approximate == "tanh" else "gelu"
        ctx.probe(kind, dt)
        return Impl(unary, (x, kind))

    return resolver


for _op in (
    *("neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "cos", "sin"),
    *("erf", "log1p", "abs"),
):
    register(getattr(aten, _op).default, _unary(_op))


@register(aten.relu.default)
def resolve_relu(node, ctx):
    dt = _same_dtype(node, node.args[0])
    ctx.probe("maximum", dt)
    ctx.probe("constant", dt)
    return Impl(relu, (node.args[0],))


# --------------------------------------------------------------------------------------------
# Reductions and softmax


def _reduction(op):
    def resolver(node, ctx):
        x = node.args[0]
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        assert node.kwargs.get("dtype") is None, "reduction with a dtype= conversion"
        dt = _same_dtype(node, x)
        rank = val(x).dim()
        if rank == 0:  # torch reduces a 0-d tensor over dim 0 / -1 / () to itself
            return Impl(identity, (x,))
        if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
            dims = list(range(rank))
        if isinstance(dims, int):
            dims = [dims]
        ctx.probe("max" if op == "amax" else op, dt)
        if rank > 1 and sorted(_norm_dim(d, rank) for d in dims) == list(range(rank)):
            # a full reduction: of the flattened tensor (one reduction, rounded once)
            shape = val(x).shape
            if not all(isinstance(d, int) for d in shape):
                return _reduce_seq_impl(node, ctx, x, op, list(range(rank)), dt)
            ctx.probe("reshape", dt)
            out = _dims(ctx, val(node).shape)
            return Impl(reduce_all, (x, op, (math.prod(shape),), out), name=f"{op} (all dims)")
        if len(dims) > 1:
            return _reduce_dims_impl(node, ctx, x, op, [_norm_dim(d, rank) for d in dims], dt)
        d = _norm_dim(dims[0], rank)
        if op == "mean" and not isinstance(val(x).shape[d], int):
            # the compiler's mean divides by a static size
            return _reduce_seq_impl(node, ctx, x, op, [d], dt)
        return Impl(reduce, (x, op, d, bool(keepdim)))

    return resolver


register([aten.sum.dim_IntList, aten.sum.default], _reduction("sum"))
register([aten.mean.dim, aten.mean.default], _reduction("mean"))
register(aten.amax.default, _reduction("amax"))


def _static_softmax_dim(x, dim, what):
    """The compiler broadcasts the row max and sum back along a static dim only (a dynamic
    one is refused by its broadcast)."""
    n = val(x).shape[_norm_dim(dim, val(x).dim())]
    assert isinstance(n, int), f"{what} over a dynamic dim (its max and sum broadcast along it)"


@register(aten._softmax.default)
def resolve_softmax(node, ctx):
    x, dim, half_to_float = node.args[:3]
    assert not half_to_float, "softmax with half_to_float"
    dt = _same_dtype(node, x)
    assert val(x).dim() > 0, "softmax of a 0-d tensor (it is 1.0)"
    _static_softmax_dim(x, dim, "softmax")
    for op in ("max", "sub", "exp", "sum", "div", "broadcast_binary"):
        ctx.probe(op, dt)
    return Impl(softmax, (x, _norm_dim(dim, val(x).dim())))


@register(aten._log_softmax.default)
def resolve_log_softmax(node, ctx):
    x, dim, half_to_float = node.args[:3]
    assert not half_to_float, "log_softmax with half_to_float"
    dt = _same_dtype(node, x)
    assert val(x).dim() > 0, "log_softmax of a 0-d tensor (it is 0.0)"
    _static_softmax_dim(x, dim, "log_softmax")
    wide = dt == torch.bfloat16
    for op in ("max", "sub", "exp", "sum", "log", "broadcast_binary"):
        ctx.probe(op, torch.float32 if wide else dt)
    if wide:
        ctx.probe("cast_f32", dt)
        ctx.probe("cast_bf16", torch.float32)
    return Impl(log_softmax, (x, _norm_dim(dim, val(x).dim()), wide))


@legato.function
def layer_norm(x, w, b, eps, has_w, has_b, wide, stat_ty):
    """torch's native_layer_norm over the last dim: (y, mean, rstd); a bf16 x is normalized in
    f32 (as torch's CPU kernel) and y rounded once."""
    f32 = legato.types.float("float32")
    y = legato.tensor.cast(x, f32) if wide else x
    axis = x.ndim - 1
    mean = legato.tensor.mean(y, axis, True)
    d = y - mean
    rstd = legato.tensor.rsqrt(legato.tensor.mean(d * d, axis, True) + eps)
    y = d * rstd
    if has_w:
        y = y * (legato.tensor.cast(w, f32) if wide else w)
    if has_b:
        y = y + (legato.tensor.cast(b, f32) if wide else b)
    if wide:
        y = legato.tensor.cast(y, x.dtype)
        mean = legato.tensor.cast(mean, stat_ty)
        rstd = legato.tensor.cast(rstd, stat_ty)
    return (y, mean, rstd)


@register(aten.native_layer_norm.default)
def resolve_layer_norm(node, ctx):
    x, shape, w, b, eps = node.args[:5]
    tx = val(x)
    dt = _float_out(node.args[0])
    assert len(shape) == 1 and tx.dim() >= 1, "layer norm over several dims"
    for t in (w, b):
        assert t is None or val(t).dtype == dt, "layer norm with a weight of another dtype"
    stats = node.meta["val"][1].dtype
    assert stats in _FLOATS, f"layer norm statistics in {stats}"
    wide = dt == torch.bfloat16
    for op in ("mean", "sub", "mul", "add", "rsqrt", "broadcast_binary", "constant"):
        ctx.probe(op, torch.float32 if wide else dt)
    if wide:
        ctx.probe("cast_f32", dt)
        ctx.probe("cast_bf16", torch.float32)
    # (row-local: a prefill's larger norms run on every core, a block of rows each)
    rows_only = _fits_sram_rows(
        ctx, tx, tx, tx, tx, what="layer norm operand, result and f32 copies"
    )
    ty = legato.types.float("float32" if stats == torch.float32 else "bfloat16")
    return Impl(
        layer_norm,
        (x, w if w is not None else 0.0, b if b is not None else 0.0, float(eps))
        + (w is not None, b is not None, wide, ty),
        rows_only=rows_only,
    )


# --------------------------------------------------------------------------------------------
# Layout


def _layout_dtype(node, x):
    dt = val(node).dtype
    assert dt in _FLOATS, f"dtype {dt} is not supported (bf16 and f32 are)"
    return dt


def _reshape_resolver(node, ctx):
    x = node.args[0]
    dt = _layout_dtype(node, x)
    ctx.probe("reshape", dt)
    return Impl(reshape, (x, _dims(ctx, val(node).shape)))


register(
    [
        aten.view.default,
        aten._unsafe_view.default,
        aten.reshape.default,
        aten.unsqueeze.default,
        aten.squeeze.dim,
        aten.squeeze.default,
    ],
    _reshape_resolver,
)


@register([aten.t.default, aten.transpose.int, aten.permute.default])
def resolve_transpose(node, ctx):
    x = node.args[0]
    dt = _layout_dtype(node, x)
    rank = val(x).dim()
    if node.target == aten.t.default:
        perm = tuple(reversed(range(rank)))
    elif node.target == aten.transpose.int:
        d0, d1 = (_norm_dim(d, rank) for d in node.args[1:3])
        p = list(range(rank))
        p[d0], p[d1] = p[d1], p[d0]
        perm = tuple(p)
    else:
        perm = tuple(_norm_dim(d, rank) for d in node.args[1])
    if perm == tuple(range(rank)):
        return Impl(identity, (x,))
    shape = val(x).shape
    moved = [p for p in perm if not (isinstance(shape[p], int) and shape[p] == 1)]
    if moved == sorted(moved):
        # only size-1 dims move (a decode step's [1, 1, heads, d] -> [1, heads, 1, d]): the
        # elements keep their order, a reshape, not a VPU transpose per call
        ctx.probe("reshape", dt)
        return Impl(reshape, (x, _dims(ctx, val(node).shape)))
    ctx.probe("transpose", dt)
    reason = capabilities.transpose_steps(tuple(shape), _rotations(perm))
    assert reason is None, reason
    return Impl(transpose, (x, perm))


@register(aten.expand.default)
def resolve_expand(node, ctx):
    x = node.args[0]
    dt = _layout_dtype(node, x)
    ctx.probe("broadcast", dt)
    return Impl(broadcast, (x, _dims(ctx, val(node).shape)))


@register([aten.clone.default, aten.alias.default, aten.detach.default])
def resolve_clone(node, ctx):
    _layout_dtype(node, node.args[0])
    return Impl(identity, (node.args[0],))


@register(aten._to_copy.default)
def resolve_to_copy(node, ctx):
    x = node.args[0]
    src, dst = val(x).dtype, val(node).dtype
    assert src in _FLOATS and dst in _FLOATS, f"_to_copy {src} -> {dst}"
    if src == dst:
        return Impl(identity, (x,))
    ctx.probe("cast_f32" if dst == torch.float32 else "cast_bf16", src)
    ty = legato.types.float("float32" if dst == torch.float32 else "bfloat16")
    return Impl(cast, (x, ty))


def _statically_empty(t, dim) -> bool:
    """torch's cat skips a legacy empty [0] tensor (DynamicCache starts its KV cache as one)
    and adds nothing for an operand of size 0 along `dim`."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    if t.dim() == 1 and statically_known_true(t.shape[0] == 0):
        return True
    return t.dim() > dim and statically_known_true(t.shape[dim] == 0)


def _tensor_list(node, what):
    """(operands, dim normalized to the result's rank, dtype) of a cat / stack node; asserts
    that the operands are tensors of one dtype."""
    xs = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    dt = _layout_dtype(node, xs[0])
    for x in xs:
        assert isinstance(x, torch.fx.Node) and val(x).dtype == dt, f"{what} of mixed dtypes"
    return xs, _norm_dim(dim, val(node).dim()), dt


@register(aten.cat.default)
def resolve_cat(node, ctx):
    xs, dim, dt = _tensor_list(node, "cat")
    xs = [x for x in xs if not _statically_empty(val(x), dim)]
    assert xs, "cat of empty tensors only"
    assert all(isinstance(val(x).shape[dim], int) for x in xs), (
        f"cat along dim {dim}, which is dynamic (the compiler concatenates along static dims)"
    )
    if len(xs) == 1:
        return Impl(identity, (xs[0],))
    ctx.probe("concat", dt)
    for x in xs:  # each operand is copied into its part of the result
        reason = capabilities.part_copy(tuple(val(node).shape), tuple(val(x).shape), into=True)
        assert reason is None, reason
    return Impl(concat, (tuple(xs), dim))


@legato.function
def split_dim(x, dim, bounds):
    outs = ()
    for se in bounds:
        outs = outs + (x[_index(x.ndim, dim, se[0], se[1], None)],)
    return outs


@register([aten.split.Tensor, aten.split_with_sizes.default])
def resolve_split(node, ctx):
    x, sizes = node.args[:2]
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    dt = val(x).dtype
    assert dt in _FLOATS, f"dtype {dt} is not supported (bf16 and f32 are)"
    dim = _norm_dim(dim, val(x).dim())
    n = val(x).shape[dim]
    assert isinstance(n, int), "split of a dynamic dim"
    if isinstance(sizes, int):
        assert sizes > 0, "split into empty chunks"
        sizes = [min(sizes, n - s) for s in range(0, n, sizes)]
    assert all(isinstance(z, int) for z in sizes), "split sizes must be static"
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    ctx.probe("slice", dt)
    whole = tuple(val(x).shape)
    for z in sizes:
        reason = capabilities.part_copy(whole, whole[:dim] + (z,) + whole[dim + 1 :])
        assert reason is None, reason
    return Impl(split_dim, (x, dim, tuple((s, s + z) for s, z in zip(starts, sizes))))


@legato.function
def select_dim(x, dim, index):
    return x[_index(x.ndim, dim, index, None, None)[:dim] + (index,)]


@register(aten.select.int)
def resolve_select(node, ctx):
    x, dim, index = node.args[:3]
    dt = _layout_dtype(node, x)
    rank = val(x).dim()
    dim = _norm_dim(dim, rank)
    size = val(x).shape[dim]
    assert isinstance(size, int) and isinstance(index, int), "select on a dynamic dim"
    ctx.probe("slice", dt)
    ctx.probe("reshape", dt)
    whole = tuple(val(x).shape)
    reason = capabilities.part_copy(whole, whole[:dim] + (1,) + whole[dim + 1 :])
    assert reason is None, reason
    return Impl(select_dim, (x, dim, index + size if index < 0 else index))


def _whole_dim(node, x, dim) -> bool:
    """The slice `node` of `x` along `dim` keeps all of it (step 1, sizes provably equal)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    step = node.args[4] if len(node.args) > 4 else 1
    return step == 1 and statically_known_true(val(node).shape[dim] == val(x).shape[dim])


@register(aten.slice.Tensor)
def resolve_slice(node, ctx):
    x = node.args[0]
    dt = _layout_dtype(node, x)
    rank = val(x).dim()
    dim = _norm_dim(node.args[1] if len(node.args) > 1 else 0, rank)
    start = node.args[2] if len(node.args) > 2 else None
    end = node.args[3] if len(node.args) > 3 else None
    step = node.args[4] if len(node.args) > 4 else 1
    for v in (start, end, step):
        assert v is None or isinstance(v, int), "slice bounds must be static"
    assert isinstance(step, int) and step >= 1, f"slice with step {step}"
    if not isinstance(val(x).shape[dim], int) and _whole_dim(node, x, dim):
        # Gemma2's sliding window keeps `k[:, :, -63:]` of a cache that dynamo guards to be
        # at most that long: the slice is the whole dim
        return Impl(identity, (x,), name="slice of a whole dynamic dim (the same tensor)")
    assert isinstance(val(x).shape[dim], int), "slicing a dynamic dim (not all of it)"
    ctx.probe("slice", dt)
    reason = capabilities.part_copy(tuple(val(x).shape), tuple(val(node).shape), step > 1)
    assert reason is None, reason
    size = val(x).shape[dim]
    if step == 1:
        end = None if end is None else min(end, size)
        return Impl(slice_dim, (x, dim, start, end, step))
    # a step: one strided `legato.slice` (lower_tensor_ops.slice_: a copy made by strided DMAs)
    idx = range(size)[slice(start, end, step)]
    assert len(idx) > 0, "an empty strided slice"
    last = idx.start + (len(idx) - 1) * step
    return Impl(
        slice_dim,
        (x, dim, idx.start, last + 1, step),
        name=f"strided slice (step {step}: strided DMAs)",
    )


@register(aten.bmm.default)
def resolve_bmm(node, ctx):
    a, b = node.args[:2]
    _bmm_checks(node, ctx, a, b)
    return Impl(bmm, (a, b))


def _bmm_checks(node, ctx, a, b):
    """Asserts that `a @ b` ([B, M, K] @ [B, K, N]) runs on the MPU one batch at a time."""
    ta, tb = val(a), val(b)
    assert ta.dtype == tb.dtype and ta.dtype in (torch.bfloat16, torch.float32), (
        f"the MPU multiplies bf16 (or f32, split into bf16 halves) operands of one dtype, got "
        f"{ta.dtype} @ {tb.dtype}"
    )
    for t in (ta, tb):
        assert all(isinstance(d, int) for d in t.shape), "bmm with dynamic sizes"
    ctx.probe("matmul", ta.dtype)
    ctx.probe("transpose", ta.dtype)
    ctx.probe("concat", ta.dtype)
    _fits_sram(ctx, ta, tb, val(node), val(node), what="bmm operands and result")


@register(aten.baddbmm.default)
def resolve_baddbmm(node, ctx):
    bias, a, b = node.args[:3]
    alpha, beta = _alpha_beta(node)
    tb = val(bias)
    assert tb.dtype == val(node).dtype, f"baddbmm bias is {tb.dtype}, the result {val(node).dtype}"
    assert all(isinstance(d, int) for d in tb.shape), "baddbmm with a dynamic bias"
    _bmm_checks(node, ctx, a, b)
    _probe_scaled_sum(ctx, tb.dtype)
    _fits_sram(ctx, tb, val(node), what="baddbmm bias and result")
    return Impl(baddbmm, (bias, a, b, alpha, beta))


@register(aten.stack.default)
def resolve_stack(node, ctx):
    xs, dim, dt = _tensor_list(node, "stack")
    for x in xs:
        assert all(isinstance(d, int) for d in val(x).shape), "stack of dynamic shapes"
    ctx.probe("reshape", dt)
    if len(xs) > 1:
        ctx.probe("concat", dt)
    return Impl(stack, (tuple(xs), dim, len(xs) == 1))


@register(aten._scaled_dot_product_flash_attention_for_cpu.default)
def resolve_sdpa_flash_cpu(node, ctx):
    q, k, v = node.args[:3]
    dropout = node.args[3] if len(node.args) > 3 else node.kwargs.get("dropout_p", 0.0)
    causal = node.args[4] if len(node.args) > 4 else node.kwargs.get("is_causal", False)
    assert dropout == 0.0, "attention with dropout"
    for u in node.users:
        assert u.target is operator.getitem and u.args[1] == 0, (
            "the attention's logsumexp output is used (only the output is computed)"
        )
    tq, tk, tv = val(q), val(k), val(v)
    assert tq.dtype == tk.dtype == tv.dtype and tq.dtype in _FLOATS, (
        f"attention on {tq.dtype}, {tk.dtype}, {tv.dtype} (bf16 or f32, one dtype)"
    )
    for t in (tq, tk, tv):
        assert t.dim() == 4 and all(isinstance(d, int) for d in t.shape), (
            "attention needs static [B, H, S, D] operands"
        )
    assert tk.shape == tv.shape and tk.shape[0] == tq.shape[0], "attention operand shapes"
    assert tq.shape[1] % tk.shape[1] == 0, (
        f"{tq.shape[1]} query heads are not a multiple of {tk.shape[1]} key/value heads"
    )
    scale = node.kwargs.get("scale")
    scale = 1.0 / math.sqrt(tq.shape[-1]) if scale is None else float(scale)
    for op in (
        "transpose",
        "concat",
        "max",
        "sub",
        "exp",
        "sum",
        "div",
        "mul",
        "add",
        "broadcast_binary",
        "cast_bf16",
        "matmul",
    ):
        ctx.probe(op, torch.float32)
    wide = tq.dtype == torch.float32
    if not wide:
        ctx.probe("cast_f32", torch.bfloat16)
    mask, mask_b, mask_h = _attention_mask(node, ctx, tq, tk)
    has_mask = isinstance(mask, torch.fx.Node)
    extra = [val(mask)] if has_mask else []
    _fits_sram(ctx, tq, tk, tv, tq, tq, *extra, what="attention operands, mask and result")
    return Impl(
        attention,
        (q, k, v, scale, bool(causal), wide, mask, mask_b, mask_h, has_mask),
        name="attention (additive mask)" if has_mask else "attention",
    )


def _attention_mask(node, ctx, tq, tk):
    """(mask, per batch, per head) of the node's explicit `attn_mask` (mask 0.0, a placeholder,
    when there is none). The op takes an additive mask of the query's dtype only; its last two
    dims broadcast to [S, L] (each 1 or the length: the add broadcasts them), its batch and head
    dims are 1 or the operand's size."""
    m = node.kwargs.get("attn_mask")
    if m is None:
        return 0.0, False, False
    assert not (node.args[4] if len(node.args) > 4 else node.kwargs.get("is_causal", False)), (
        "attention with both is_causal and an explicit attn_mask"
    )
    tm = val(m)
    nb, nh, s = tq.shape[:3]
    lk = tk.shape[2]
    assert 2 <= tm.dim() <= 4 and all(isinstance(d, int) for d in tm.shape), (
        f"attention mask of shape {list(tm.shape)} (a static 2- to 4-d mask)"
    )
    assert tm.shape[-2] in (1, s) and tm.shape[-1] in (1, lk), (
        f"attention mask {list(tm.shape)} does not broadcast to [{s}, {lk}] (query and key "
        "lengths) in its last two dims"
    )
    lead = (1,) * (4 - tm.dim()) + tuple(tm.shape[:-2])
    assert lead[0] in (1, nb) and lead[1] in (1, nh), (
        f"attention mask {list(tm.shape)} does not broadcast over batch {nb} and heads {nh}"
    )
    assert tm.dtype == tq.dtype, f"attention mask of {tm.dtype} with {tq.dtype} operands"
    if tm.dtype == torch.bfloat16:
        ctx.probe("cast_f32", torch.bfloat16)
    return m, lead[0] > 1, lead[1] > 1


# --------------------------------------------------------------------------------------------
# Selection, masked softmax, embedding


@legato.function
def where(cond, a, b):
    return legato.tensor.where(cond, a, b)


@legato.function
def where_broadcast(cond, a, b, cshape, padded, ty):
    """where(cond, a, b) with a condition that broadcasts (HF's causal mask [B, 1, S, T]
    against the scores [B, H, S, T]): the VPU moves only float elements, so the condition (a
    bool, or a comparison's float mask) is first made a 1.0 / 0.0 mask of the result's dtype
    at its own shape (`cshape`, reshaped to `padded`, the result's rank), which the select
    broadcasts."""
    zeros = _zeros_like_cond(cond, cshape, ty)
    m = legato.tensor.where(cond, 1.0, zeros)
    if len(padded) > len(cshape):
        m = legato.tensor.reshape(m, padded)
    return legato.tensor.where(m, a, b)


@legato.function
def _zeros_like_cond(cond, cshape, ty):
    """Zeros of the condition's shape `cshape` (a DSL shape, at most one dynamic dim): a
    dynamic one is filled flat at the bound, viewed at the runtime element count (a prefix of
    the outermost dim, contiguous) and reshaped (`legato.tensor.full` takes static shapes)."""
    if _dynamic_dim(cshape) is None:
        return legato.tensor.full(cshape, 0.0, ty)
    d, rest = _dynamic_dim(cshape), _static_count(cshape)
    flat = legato.tensor.full((rest * cshape[d][1],), 0.0, ty)
    return legato.tensor.reshape(flat[0 : cond.size(d) * rest], cshape)


def _dynamic_dim(shape):
    """Compile-time helper: the index of the dynamic `(-1, bound)` dim of a DSL shape, or None."""
    dyn = [i for i, n in enumerate(shape) if not isinstance(n, int)]
    return dyn[0] if dyn else None


def _static_count(shape):
    """Compile-time helper: the product of the static dims of a DSL shape."""
    return math.prod(n for n in shape if isinstance(n, int))


def _dynamic_condition_checks(tc, out, what):
    """Asserts that a broadcast condition with a dynamic dim broadcasts as the compiler does it
    then: one dynamic dim, broadcast along static result dims only, each before or after all
    of the condition's other dims (HF's [1, 1, S, ?T] against [B, H, S, ?T]; [1, ?T, 1]
    against [B, ?T, D]); a broadcast between them would be a strided copy along the dynamic
    dim."""
    assert sum(not isinstance(n, int) for n in tc.shape) <= 1, (
        f"{what} with a broadcast condition of several dynamic dims"
    )
    cs = (1,) * (len(out) - tc.dim()) + tuple(tc.shape)
    # (sizes compared as ints only: a SymInt comparison would add a guard)
    one = [type(c) is int and c == 1 for c in cs]
    bcast = [i for i, o in enumerate(out) if one[i] and not (type(o) is int and o == 1)]
    assert all(isinstance(out[i], int) for i in bcast), (
        f"{what} with a dynamic condition {list(tc.shape)} broadcast along a dynamic dim of "
        f"{list(out)}"
    )
    held = [i for i in range(len(cs)) if not one[i]]
    assert all(i < min(held) or i > max(held) for i in bcast), (
        f"{what} with a dynamic condition {list(tc.shape)} broadcast between its dims to "
        f"{list(out)} (a strided copy along the dynamic dim)"
    )


def _select_impl(node, ctx, c, a, b, dt, what):
    """The where / masked_fill implementation selecting a where `c` else b: the plain select
    when the bool `c` has the result's shape, else `where_broadcast` (a condition with at most
    one dynamic dim)."""
    tc, out = val(c), tuple(val(node).shape)
    assert tc.dtype == torch.bool, f"{what} with a {tc.dtype} condition"
    ctx.probe("where", dt)
    if tuple(tc.shape) == out:
        return Impl(where, (c, a, b))
    ctx.probe("constant", dt)
    ctx.probe("reshape", dt)
    cshape = _dims(ctx, tc.shape)
    padded = (1,) * (len(out) - tc.dim()) + cshape
    if any(not isinstance(n, int) for n in tc.shape):
        _dynamic_condition_checks(tc, out, what)
    return Impl(
        where_broadcast,
        (c, a, b, cshape, padded, _legato_float(dt)),
        name=f"{what} (a condition {list(tc.shape)} broadcast to {list(out)})",
    )


@register([aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar])
def resolve_where(node, ctx):
    c, a, b = node.args[:3]
    dt = _float_out(node)
    for x in (a, b):
        if isinstance(x, torch.fx.Node):
            assert val(x).dtype == dt, (
                f"operand {x.name} is {val(x).dtype} but the result is {dt} (no implicit type "
                "promotion)"
            )
        else:
            assert isinstance(x, (int, float)) and not isinstance(x, bool), (
                f"where value {x!r} is neither a tensor nor a number"
            )
    assert isinstance(a, torch.fx.Node) or isinstance(b, torch.fx.Node), (
        "where of two numbers (the result dtype comes from a tensor)"
    )
    a, b = (x if isinstance(x, torch.fx.Node) else float(x) for x in (a, b))
    return _select_impl(node, ctx, c, a, b, dt, "where")


@legato.function
def compare(a, b, op):
    """The comparison `op` as the VPU computes it: 1.0 where true, 0.0 where false, in the
    operands' dtype (a mask `legato.tensor.where` takes as is; never a kernel output: torch
    expects bool)."""
    if op == "eq":
        return legato.tensor.eq(a, b)
    if op == "ne":
        return legato.tensor.ne(a, b)
    if op == "lt":
        return legato.tensor.lt(a, b)
    if op == "le":
        return legato.tensor.le(a, b)
    if op == "gt":
        return legato.tensor.gt(a, b)
    if op == "ge":
        return legato.tensor.ge(a, b)
    assert False, op  # noqa: B011 - Legato code: the frontend reports it at compile time


_MASK_USERS = {
    aten.where.self: 0,
    aten.where.ScalarSelf: 0,
    aten.where.ScalarOther: 0,
    aten.where.Scalar: 0,
    aten.masked_fill.Scalar: 1,
    aten.masked_fill.Tensor: 1,
    aten.mul.Tensor: None,  # x * mask or mask * x (the mul resolver's `_mul_by_mask`)
}
_COMPARISON_PACKETS = tuple(getattr(aten, c) for c in ("eq", "ne", "lt", "le", "gt", "ge"))


def _mask_consumers(node, ctx):
    """Asserts that every user of the bool `node` takes it as the condition of a where, the
    mask of a masked_fill or the second factor of a mul, and runs on Legato too: the VPU's
    comparisons give a float 1.0 / 0.0 mask, which those take as is (torch's mul promotes the
    bool to exactly that), but which must never reach torch where it expects bool."""
    from legato.torch.registry import resolve

    assert node.users, "a comparison nothing uses"
    for u in node.users:
        pos = _MASK_USERS.get(u.target, -1)
        if pos is None:  # mul: either factor, not both
            pos = 0 if u.args[0] is node else 1
        assert pos >= 0 and u.args[pos] is node and node not in u.args[pos + 1 :], (
            f"its bool result leaves Legato (used by {u.name}, {u.target}): the VPU's "
            "comparisons give a float mask, which only a where / masked_fill / mul on Legato "
            "takes"
        )
        assert resolve(u, ctx).impl is not None, (
            f"comparison used by {u.name}, which runs eagerly (its bool mask would leave Legato)"
        )


@legato.function
def compare_bool(a, b, op):
    """The comparison `op` as a bool tensor: the VPU's float mask converted to i1 (`vpu.cvt`,
    true where nonzero), for a result that leaves the kernel or that eager nodes read."""
    return legato.tensor.cast(compare(a, b, op), legato.types.i1)


def _comparison(op):
    def resolver(node, ctx):
        a, b = node.args[:2]
        assert val(node).dtype == torch.bool, f"{op} giving {val(node).dtype}"
        tensors = [x for x in (a, b) if isinstance(x, torch.fx.Node)]
        for x in (a, b):
            assert isinstance(x, (torch.fx.Node, int, float)) and not isinstance(x, bool), (
                f"{op} operand {x!r} is neither a tensor nor a number"
            )
        dts = {val(x).dtype for x in tensors}
        assert len(dts) == 1 and dts <= set(_FLOATS), (
            f"{op} of {sorted(map(str, dts))} (bf16 or f32 operands of one dtype)"
        )
        (dt,) = dts
        try:  # a float mask when only Legato's where / masked_fill / mul read it
            _mask_consumers(node, ctx)
            as_mask = True
        except AssertionError:  # else a bool (which those take too)
            as_mask = False
        ctx.probe(op, dt)
        if len(tensors) < 2:
            ctx.probe("constant", dt)
        elif not _known_same_shape(val(a).shape, val(b).shape):
            ctx.probe("broadcast_binary", dt)
        a, b = (x if isinstance(x, torch.fx.Node) else float(x) for x in (a, b))
        if as_mask:
            return Impl(compare, (a, b, op), name=f"{op} (a float mask for its where)")
        ctx.probe("cast_i1", dt)
        return Impl(compare_bool, (a, b, op), name=f"{op} (bool)")

    return resolver


for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    register([getattr(aten, _op).Tensor, getattr(aten, _op).Scalar], _comparison(_op))


@register([aten.masked_fill.Scalar, aten.masked_fill.Tensor])
def resolve_masked_fill(node, ctx):
    """where(mask, value, x): the value a number or a 0-d tensor of x's dtype; mask and x
    broadcast against each other (the result has their broadcast shape)."""
    x, mask, value = node.args[:3]
    dt = _same_dtype(node, x)
    if isinstance(value, torch.fx.Node):
        assert val(value).dim() == 0 and val(value).dtype == dt, (
            f"masked_fill with a {val(value).dtype}{list(val(value).shape)} value (a 0-d "
            f"tensor of {dt} is implemented)"
        )
        ctx.probe("broadcast_binary", dt)
    else:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (
            f"masked_fill with {value!r}"
        )
        ctx.probe("constant", dt)
        value = float(value)
    if tuple(val(x).shape) != tuple(val(node).shape):
        ctx.probe("broadcast_binary", dt)
    return _select_impl(node, ctx, mask, value, x, dt, "masked_fill")


@legato.function
def bool_logic(a, b, op, cshape, ty):
    """`a & b`, `a | b`, `a ^ b` or `~a` of bool (i1) tensors of one shape: the VPU moves only
    float elements, so each operand becomes a 1.0 / 0.0 mask of `ty` (a select of its bool),
    combined exactly in float (and: a product; or: a sum, 0 only when both are; xor: `ne`;
    not: `eq` 0) and converted back to i1 (true where nonzero)."""
    zeros = _zeros_like_cond(a, cshape, ty)
    ma = legato.tensor.where(a, 1.0, zeros)
    if op == "not":
        r = legato.tensor.eq(ma, 0.0)
    else:
        mb = legato.tensor.where(b, 1.0, zeros)
        if op == "and":
            r = ma * mb
        elif op == "or":
            r = ma + mb
        else:
            r = legato.tensor.ne(ma, mb)
    return legato.tensor.cast(r, legato.types.i1)


def _from_float_work(node) -> bool:
    """Whether a float tensor is upstream of `node` (else its bool is host index arithmetic:
    `wrapper._host_index_work` runs it on the host, where it never splits a partition)."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor) and v.dtype in _FLOATS:
            return True
        stack.extend(n.all_input_nodes)
    return False


def _bool_logic(op):
    def resolver(node, ctx):
        operands = node.args[:1] if op == "not" else node.args[:2]
        out = tuple(val(node).shape)
        for x in operands:
            assert _bool_tensor(x), f"bitwise {op} of {x!r} (bool tensors are implemented)"
            assert tuple(val(x).shape) == out, (
                f"bitwise {op} of bools of shapes {[list(val(o).shape) for o in operands]} "
                "(a broadcast is not implemented)"
            )
        assert any(_from_float_work(x) for x in operands), (
            f"bitwise {op} of bools from graph inputs only: host index arithmetic"
        )
        assert sum(not isinstance(n, int) for n in out) <= 1, (
            f"bitwise {op} of a shape with several dynamic dims"
        )
        dt = torch.bfloat16  # 0.0, 1.0 and 2.0 are exact
        for probe in ("where", "constant", "cast_i1", {"and": "mul", "or": "add"}.get(op, "eq")):
            ctx.probe(probe, dt)
        cshape = _dims(ctx, val(node).shape)
        if any(not isinstance(n, int) for n in cshape):
            ctx.probe("reshape", dt)
        a = operands[0]
        b = operands[1] if len(operands) > 1 else a
        return Impl(bool_logic, (a, b, op, cshape, _legato_float(dt)), name=f"bool {op}")

    return resolver


register([aten.bitwise_and.Tensor, aten.logical_and.default], _bool_logic("and"))
register([aten.bitwise_or.Tensor, aten.logical_or.default], _bool_logic("or"))
register([aten.bitwise_xor.Tensor, aten.logical_xor.default], _bool_logic("xor"))
register([aten.bitwise_not.default, aten.logical_not.default], _bool_logic("not"))


@legato.function
def full(shape, value, dtype):
    return legato.tensor.full(shape, value, dtype)


@register(aten.scalar_tensor.default)
def resolve_scalar_tensor(node, ctx):
    dt = _float_out(node)
    value = node.args[0]
    assert isinstance(value, (int, float)) and not isinstance(value, bool), (
        f"scalar_tensor of {value!r}"
    )
    ctx.probe("constant", dt)
    ty = legato.types.float("float32" if dt == torch.float32 else "bfloat16")
    return Impl(full, ((), float(value), ty))


@legato.function
def safe_softmax(x, axis, fmax):
    """softmax, but 0 for a row that is all -inf (torch's `_safe_softmax`, the masked SDPA's):
    such a row has max m = -inf; `exp(m - max(m, -fmax))` is 1 for a finite m (or NaN, which
    keeps the NaN softmax, as torch) and 0 only for m = -inf, and selects the softmax."""
    m = legato.tensor.max(x, axis=axis, keepdim=True)
    e = legato.tensor.exp(x - m)
    s = e / legato.tensor.sum(e, axis, True)
    keep = legato.tensor.exp(m - legato.tensor.maximum(m, -fmax))
    return legato.tensor.where(keep, s, 0.0)


@register(aten._safe_softmax.default)
def resolve_safe_softmax(node, ctx):
    x, dim = node.args[:2]
    dtype = node.args[2] if len(node.args) > 2 else node.kwargs.get("dtype")
    assert dtype is None, "_safe_softmax with a dtype= conversion"
    dt = _same_dtype(node, x)
    assert val(x).dim() > 0, "softmax of a 0-d tensor (it is 1.0)"
    _static_softmax_dim(x, dim, "softmax")
    for op in ("max", "sub", "exp", "sum", "div", "maximum", "where", "broadcast_binary"):
        ctx.probe(op, dt)
    return Impl(safe_softmax, (x, _norm_dim(dim, val(x).dim()), float(torch.finfo(dt).max)))


@legato.function
def embedding(weight, ids):
    return legato.tensor.gather(weight, ids)


@legato.function
def embedding_rows(weight, ids, rows, out):
    """The embedding on every core (spmd): ids [B, S] in blocks of `rows` (a divisor of S),
    block i on core i % ncores; each core gathers its block's rows from the table in shared
    DRAM and writes them to out [B, S, H]."""
    per = ids.shape[1] // rows
    ncores = legato.get_context().get_device().num_cores
    for blk in range(legato.core_id(), ids.shape[0] * per, ncores):
        b = blk // per
        s0 = (blk - b * per) * rows
        i = legato.tensor.load(ids[b : b + 1, s0 : s0 + rows])
        legato.tensor.memcpy(out[b : b + 1, s0 : s0 + rows, :], legato.tensor.gather(weight, i))


# the gathered rows of an embedding on every core at least this many bytes (fewer: one core,
# and a decode step's row is gathered in the prologue of the kernel that reads it)
EMBEDDING_SPLIT_BYTES = 128 * 1024
# rows of one core's block at most this many bytes (the gathered rows, in SRAM)
EMBEDDING_BLOCK_BYTES = 16 * 1024


def _embedding_spmd(ctx, w, ids, node):
    """The all-core embedding (`embedding_rows`) of static ids [B, S] when its rows are many
    (`EMBEDDING_SPLIT_BYTES`); None otherwise."""
    ti, to = val(ids), val(node)
    if ti.dim() != 2 or not all(isinstance(d, int) for d in (*ti.shape, *to.shape)):
        return None
    b, n = ti.shape
    row = to.shape[-1] * to.element_size()
    if b * n * row < EMBEDDING_SPLIT_BYTES:
        return None
    ncores = ctx.model.num_cores
    cap = max(1, min(-(-n * b // ncores), n, EMBEDDING_BLOCK_BYTES // row))
    rows = next(r for r in range(cap, 0, -1) if n % r == 0)
    return Impl(
        embedding_rows,
        (w, ids, rows),
        spmd=True,
        name=f"embedding on every core ({rows}-row blocks)",
        # a block's ids and gathered rows (the table stays in shared DRAM)
        onchip=rows * (row + 8),
    )


@register(aten.embedding.default)
def resolve_embedding(node, ctx):
    w, ids = node.args[:2]
    dt = _float_out(node)
    tw, ti = val(w), val(ids)
    assert tw.dtype == dt and tw.dim() == 2, f"embedding table {tw.dtype} {list(tw.shape)}"
    assert ti.dtype == torch.int64, f"embedding indices of {ti.dtype} (int64 are read)"
    ctx.probe("gather", dt)
    spmd = _embedding_spmd(ctx, w, ids, node)
    if spmd is not None:
        return spmd
    _fits_sram(ctx, ti, val(node), what="embedding indices and rows")
    # the table stays in shared DRAM: only the selected rows are copied (one DMA per index)
    return Impl(embedding, (w, ids), memory={0: "shared_dram"})
