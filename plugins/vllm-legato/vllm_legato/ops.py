"""vLLM layers whose ATen form the graph compiler cannot put on Legato yet, as Legato kernels.

In the forward graph, SiluAndMul (`silu(x[..., :d]) * x[..., d:]`: two strided slices over the
dynamic token dim) and the rotary embedding (`cos_sin_cache.index_select(positions)`, slices,
broadcasts of [T, 1, r] over the heads, a cat) run on the host: the graph compiler refuses
strided copies and broadcasts over a dynamic dim. Their shapes are static per token, so the
plugin runs them the way its attention backend runs attention: each layer's forward calls a
torch custom op (`vllm_legato::silu_and_mul`, `vllm_legato::rotary_neox`: opaque to dynamo,
like vLLM's own attention ops) whose implementation runs an all-core Legato kernel with a
runtime token count, bounded by vLLM's token budget; inside it every core takes tokens c, c +
cores, ... and works on one token's row, whose shape is static (`[1, 2d]`, `[H, D]`).

The layers are swapped in with vLLM's out-of-tree custom-op registry
(`CustomOp.register_oot`), only while the Bertha platform is selected (`patches.install`):
`SiluAndMul` and `RotaryEmbedding` (neox style, bf16 / f32; anything else keeps vLLM's
native implementation, which then runs on the host as before). Where the rotary's users all
hand q and k straight to the plugin's attention, it is folded into the attention kernels
instead (`fold_rotary`). The projections the graph's resolvers do not take run through
`vllm_legato::linear` (bf16, and f32 in six bf16 passes: `F32_PASSES`). `STATS` counts the
kernels' simulated work for the report (`vllm_legato.report`), per op.
"""

# no `from __future__ import annotations`: the kernels' annotations are evaluated at def time,
# in their builder's scope (the shapes), which a string annotation could not see

import functools
import os
import threading
from dataclasses import dataclass, field

import torch

import legato

_DTYPES = {torch.bfloat16: "bfloat16", torch.float32: "float32"}


@dataclass
class OpStats:
    """Simulated work of the plugin's op kernels since the process started, per op name."""

    calls: dict = field(default_factory=dict)
    cycles: dict = field(default_factory=dict)
    dram_bytes: dict = field(default_factory=dict)
    macs: dict = field(default_factory=dict)

    def add(self, op: str, run, macs: int | None = None) -> None:
        """`macs`: the model's MACs of the call, counted instead of the MPU's (an f32
        projection runs six MPU MACs per MAC of the product: F32_PASSES)."""
        with _lock:
            self.calls[op] = self.calls.get(op, 0) + 1
            self.cycles[op] = self.cycles.get(op, 0) + int(run.cycles)
            self.dram_bytes[op] = self.dram_bytes.get(op, 0) + int(sum(run.dram_bytes_per_channel))
            self.macs[op] = self.macs.get(op, 0) + int(run.mac_count if macs is None else macs)

    def totals(self) -> tuple[int, int]:
        """(cycles, DRAM bytes) over every op."""
        with _lock:
            return sum(self.cycles.values()), sum(self.dram_bytes.values())

    def total_macs(self) -> int:
        with _lock:
            return sum(self.macs.values())

    def snapshot(self) -> dict:
        with _lock:
            return {op: (self.cycles[op], self.dram_bytes[op]) for op in self.calls}


_lock = threading.Lock()
STATS = OpStats()
# {vLLM linear layer class: why its matmul runs through vllm_legato::linear} (use_legato_linear)
ROUTED: dict = {}


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def token_bound(tokens: int) -> int:
    """The bound of a kernel's runtime token count: vLLM's token budget (the platform puts it in
    $LEGATO_VLLM_TOKEN_BOUND), or the next power of two of `tokens` when larger or unset."""
    from vllm_legato.platform import TOKEN_BOUND_ENV

    bound = int(os.environ.get(TOKEN_BOUND_ENV) or 0)
    return bound if bound >= tokens else _pow2(tokens)


def _device() -> str:
    import vllm_legato

    return vllm_legato.selected_device() or "bertha"


# -- kernels -------------------------------------------------------------------------------


@functools.cache
def silu_and_mul_kernel(dtype: str, max_tokens: int, d: int, device: str):
    """out[t] = silu(x[t, :d]) * x[t, d:] for the runtime T rows of x ([T, 2d] -> [T, d])."""
    M = legato.get_model()
    dt = legato.types.float(dtype)

    @legato.compile(backend=device)
    def silu_and_mul(
        x: M.tensor_type(dt, [(-1, max_tokens), 2 * d], "shared_dram"),
        out: M.tensor_type(dt, [(-1, max_tokens), d], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            for t in range(legato.core_id(), x.size(0), device.num_cores):
                row = legato.tensor.load(x[t])  # [2d]: static (indexed, not sliced)
                legato.tensor.memcpy(out[t], legato.tensor.silu(row[0:d]) * row[d : 2 * d])

    return silu_and_mul


@functools.cache
def rotary_neox_kernel(
    dtype: str, max_tokens: int, positions: int, hq: int, hk: int, d: int, rot: int, device: str
):
    """Neox-style rotary embedding of the runtime T tokens' queries [T, hq * d] and keys
    [T, hk * d] at their positions, with vLLM's cos_sin_cache [positions, rot] (cos then sin
    halves): per head, x1, x2 = x[:rot / 2], x[rot / 2 : rot]; out = (x1 cos - x2 sin,
    x2 cos + x1 sin, x[rot:]), the products and sums rounded in the tensors' dtype as vLLM's
    native implementation rounds them."""
    M = legato.get_model()
    dt = legato.types.float(dtype)
    i64 = legato.types.i64
    h = rot // 2

    @legato.function
    def _rotate(x, out, t, cos, sin, heads):
        xr = legato.tensor.reshape(legato.tensor.load(x[t]), (heads, d))  # static: indexed
        x1 = xr[:, 0:h]
        x2 = xr[:, h:rot]
        c = legato.tensor.broadcast_to(cos, (heads, h))
        s = legato.tensor.broadcast_to(sin, (heads, h))
        o1 = x1 * c - x2 * s
        o2 = x2 * c + x1 * s
        y = legato.tensor.cat((o1, o2), 1)
        if rot < d:
            y = legato.tensor.cat((y, xr[:, rot:d]), 1)
        legato.tensor.memcpy(out[t], legato.tensor.reshape(y, (heads * d,)))

    @legato.compile(backend=device)
    def rotary_neox(
        pos: M.tensor_type(i64, [(-1, max_tokens), 1], "shared_dram"),
        q: M.tensor_type(dt, [(-1, max_tokens), hq * d], "shared_dram"),
        k: M.tensor_type(dt, [(-1, max_tokens), hk * d], "shared_dram"),
        cache: M.tensor_type(dt, [positions, rot], "shared_dram"),
        q_out: M.tensor_type(dt, [(-1, max_tokens), hq * d], "shared_dram"),
        k_out: M.tensor_type(dt, [(-1, max_tokens), hk * d], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            for t in range(legato.core_id(), pos.size(0), device.num_cores):
                cs = legato.tensor.gather(cache, legato.tensor.load(pos[t]))  # [1, rot]
                cos = cs[:, 0:h]
                sin = cs[:, h:rot]
                _rotate(q, q_out, t, cos, sin, hq)
                _rotate(k, k_out, t, cos, sin, hk)

    return rotary_neox


# An f32 projection on the bf16 MPU (`linear_kernel`): x and W split in three bf16 parts each
# (`split3`: hi + mid + lo, exact up to 2^-24 relative), and the six products of parts whose
# orders add up to at most 2 (part i is ~2^-8i of the value) multiplied on the MPU, each an
# exact dot product rounded once to f32 and added in f32, in this order (x part, W part):
# the smallest first. Dropped: mid@lo, lo@mid, lo@lo, each below 2^-24 of the product.
F32_PASSES = ((0, 2), (1, 1), (2, 0), (0, 1), (1, 0), (0, 0))


def split3(v):
    """f32 array v as bf16 (hi, mid, lo) (numpy): each the bf16 rounding of what the previous
    parts left, the subtractions exact in f32 (as `linear_kernel` splits on the VPU)."""
    import numpy as np
    from ml_dtypes import bfloat16

    v = np.asarray(v, np.float32)
    hi = v.astype(bfloat16)
    r1 = v - hi.astype(np.float32)
    mid = r1.astype(bfloat16)
    return hi, mid, (r1 - mid.astype(np.float32)).astype(bfloat16)


def f32_linear_reference(x, w, bias=None):
    """The bits `vllm_legato::linear` gives for f32 x[T, K] @ W[N, K]^T (+ bias), in numpy from
    legato.numerics' MPU definition: F32_PASSES over `split3`'s parts, bias added in f32."""
    import numpy as np

    from legato import numerics

    xp, wp = split3(x), split3(np.asarray(w, np.float32).T)
    acc = None
    for i, j in F32_PASSES:
        acc = numerics.matmul_acc(xp[i], wp[j], acc)
    if bias is not None:
        acc = (acc + np.asarray(bias, np.float32)[None, :]).astype(np.float32)
    return acc


@functools.cache
def embedding_kernel(dtype: str, max_tokens: int, vocab: int, hidden: int, device: str):
    """out[t] = table[ids[t]] for the runtime T tokens (all cores: core c takes the tokens c,
    c + cores, ...; one row gathered from the table in shared DRAM per token)."""
    M = legato.get_model()
    dt = legato.types.float(dtype)
    i64 = legato.types.i64

    @legato.compile(backend=device)
    def embedding(
        ids: M.tensor_type(i64, [(-1, max_tokens), 1], "shared_dram"),
        table: M.tensor_type(dt, [vocab, hidden], "shared_dram"),
        out: M.tensor_type(dt, [(-1, max_tokens), hidden], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            for t in range(legato.core_id(), ids.size(0), device.num_cores):
                row = legato.tensor.gather(table, legato.tensor.load(ids[t]))  # [1, hidden]
                legato.tensor.memcpy(out[t], legato.tensor.reshape(row, (hidden,)))

    return embedding


def embedding_route(weight: torch.Tensor, bound: int, device: str) -> str | None:
    """Why the token embedding (table W[V, H]) runs through `vllm_legato::embedding`: when the
    graph's own resolver (legato.torch.library.aten's `embedding`, one core holding the
    indices and rows at the token bound) refuses it, its reason; else None (it stays in the
    graph). Llama-7B at vLLM's 1024: 1024 rows of 4096 bf16 are 8 MiB, one core has 2."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from legato.model.targets import target_model
    from legato.torch.library import aten as aten_lib
    from legato.torch.options import Options
    from legato.torch.registry import ResolveContext

    if weight.ndim != 2 or weight.dtype not in _DTYPES:
        return None
    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        t = mode.shape_env.create_unbacked_symint()
        ids = torch.empty((t,), dtype=torch.int64)
        w = torch.empty(tuple(weight.shape), dtype=weight.dtype)
        y = torch.nn.functional.embedding(ids, w)
    g = torch.fx.Graph()
    wn, idn = g.placeholder("w"), g.placeholder("ids")
    node = g.call_function(torch.ops.aten.embedding.default, (wn, idn))
    g.output(node)
    for n, v in ((wn, w), (idn, ids), (node, y)):
        n.meta["val"] = v
    ctx = ResolveContext(
        target_model(device), Options(device=device), lambda d: d if isinstance(d, int) else bound
    )
    try:
        with mode:
            aten_lib.resolve_embedding(node, ctx)
    except AssertionError as e:
        return str(e)
    return None


@torch.library.custom_op("vllm_legato::embedding", mutates_args=())
def embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """weight[ids] (F.embedding) on every core (`embedding_kernel`)."""
    flat = ids.reshape(-1, 1).to(torch.int64).contiguous()
    out = weight.new_empty((flat.shape[0], weight.shape[1]))
    if flat.shape[0]:
        kern = embedding_kernel(
            _DTYPES[weight.dtype],
            token_bound(flat.shape[0]),
            weight.shape[0],
            weight.shape[1],
            _device(),
        )
        kern(flat, weight, out)
        STATS.add("embedding", kern.last_run)
    return out.reshape(*ids.shape, weight.shape[1])


@embedding.register_fake
def _(ids, weight):
    return weight.new_empty((*ids.shape, weight.shape[1]))


MIN_COLS = 16  # narrower column blocks than this: fewer cores (as chip_linear's MIN_TN)


def column_blocks(n: int, cores: int) -> int:
    """The number of column blocks of an N-wide projection (`linear_kernel`): as many as there
    are cores, each at least MIN_COLS wide, dividing N (1: N itself, one core)."""
    for nb in range(min(cores, max(1, n // MIN_COLS)), 0, -1):
        if n % nb == 0:
            return nb
    return 1


def lay_weight(weight: torch.Tensor, nb: int) -> torch.Tensor:
    """W[N, K] -> wt[nb, K, N / nb]: block b is W^T's columns [b N/nb, (b+1) N/nb), contiguous
    (one DMA into the MPU's weight buffer)."""
    n, k = weight.shape
    return weight.t().reshape(k, nb, n // nb).permute(1, 0, 2).contiguous()


@functools.cache
def linear_kernel(
    dtype: str, max_tokens: int, k: int, n: int, nb: int, bias: bool, device: str, gated=False
):
    """out[T, N] = x[T, K] @ W^T (+ bias) for the runtime T rows of x, W laid out by
    `lay_weight` in nb column blocks: core b < nb loads x (all T rows, sized at the bound) and
    its block of W once, multiplies on the MPU (f32 accumulation, rounded once to the dtype
    after the bias, as torch's CPU addmm) and writes its N / nb columns of every row. Each
    weight byte is read once per call. For the projections chip_linear refuses (K not a
    multiple of the MPU's 256-row weight tile: the tiny models' K = 64, 128).

    `gated`: out[T, N / 2] = silu(g) * u with [g, u] that product (vLLM's merged gate/up
    projection and its SiluAndMul in one kernel; nb even, the first nb / 2 blocks gate's):
    core b < nb / 2 multiplies x by blocks b and b + nb / 2, rounds both to the dtype (the
    gate/up output vLLM's SiluAndMul reads) and writes silu(g) * u as `silu_and_mul_kernel`
    does: the bits of the plain kernel then `silu_and_mul_kernel`, gate/up never written.

    f32: x (on every core) and the core's block of W (f32 in shared DRAM, loaded into sram)
    are split on the VPU into three bf16 parts each and multiplied in the six passes of
    F32_PASSES (`f32_linear_reference` gives the same bits in numpy): within ~2^-24 of the
    exact product, where the compiler's own f32 matmul (hi/lo halves, three passes) is
    ~2^-17 off."""
    M = legato.get_model()
    dt = legato.types.float(dtype)
    f32 = legato.types.float("float32")
    bf16 = legato.types.float("bfloat16")
    tn = n // nb
    blocks = nb // 2 if gated else nb
    exact = dtype == "float32"  # the f32 product as six bf16 passes (F32_PASSES)
    wmem, wload = ("shared_dram", "sram") if exact else ("mpu_dram", "mpu_buffer")

    @legato.function
    def _split3(v):
        # v (f32) = hi + mid + lo exactly up to 2^-24 |v|: each part the bf16 rounding of
        # what the previous ones left, the subtractions exact in f32 (numerics.split_bf16)
        hi = legato.tensor.cast(v, bf16)
        r1 = v - legato.tensor.cast(hi, f32)
        mid = legato.tensor.cast(r1, bf16)
        lo = legato.tensor.cast(r1 - legato.tensor.cast(mid, f32), bf16)
        return hi, mid, lo

    @legato.function
    def _product(xs, wt, blk):
        if exact:
            xh, xm, xl = xs
            wh, wm, wl = _split3(legato.tensor.load(wt[blk], wload))
            # the smallest terms first (each pass an exact dot rounded once to f32, then one
            # f32 add: the MPU's accumulate chain); xm@wl, xl@wm, xl@wl (<= 2^-24) dropped
            acc = legato.tensor.matmul(xh, wl, f32)
            acc = acc + legato.tensor.matmul(xm, wm, f32)
            acc = acc + legato.tensor.matmul(xl, wh, f32)
            acc = acc + legato.tensor.matmul(xh, wm, f32)
            acc = acc + legato.tensor.matmul(xm, wh, f32)
            return acc + legato.tensor.matmul(xh, wh, f32)
        return legato.tensor.matmul(xs, legato.tensor.load(wt[blk], wload), f32)

    @legato.function
    def _block(xs, wt, blk, bvec):
        acc = _product(xs, wt, blk)
        if bias:
            bb = legato.tensor.cast(legato.tensor.load(bvec[blk * tn : (blk + 1) * tn]), f32)
            acc = acc + legato.tensor.reshape(bb, (1, tn))
        return legato.tensor.cast(acc, dt)

    @legato.function
    def _cols(x, wt, b, out, bvec):
        xs = legato.tensor.load(x)  # [T, K]: runtime rows
        if exact:
            xs = _split3(xs)
        y = _block(xs, wt, b, bvec)
        if gated:
            y = legato.tensor.silu(y) * _block(xs, wt, b + blocks, bvec)
        legato.tensor.memcpy(out[:, b * tn : (b + 1) * tn], y)

    @legato.compile(backend=device)
    def linear(
        x: M.tensor_type(dt, [(-1, max_tokens), k], "shared_dram"),
        wt: M.tensor_type(dt, [nb, k, tn], wmem),
        bvec: M.tensor_type(dt, [n], "shared_dram"),
        out: M.tensor_type(dt, [(-1, max_tokens), blocks * tn], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            for b in range(legato.core_id(), blocks, device.num_cores):
                _cols(x, wt, b, out, bvec)

    return linear


# -- torch custom ops (opaque to dynamo; their implementations run the kernels) -------------


@torch.library.custom_op("vllm_legato::silu_and_mul", mutates_args=())
def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    rows = x.reshape(-1, 2 * d)
    out = x.new_empty((rows.shape[0], d))
    if rows.shape[0]:
        k = silu_and_mul_kernel(_DTYPES[x.dtype], token_bound(rows.shape[0]), d, _device())
        k(rows, out)
        STATS.add("silu_and_mul", k.last_run)
    return out.reshape(*x.shape[:-1], d)


@silu_and_mul.register_fake
def _(x):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@torch.library.custom_op("vllm_legato::rotary_neox", mutates_args=())
def rotary_neox(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    head_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    t = positions.numel()
    q = query.reshape(t, -1)
    k = key.reshape(t, -1)
    q_out, k_out = q.new_empty(q.shape), k.new_empty(k.shape)
    if t:
        kern = rotary_neox_kernel(
            _DTYPES[query.dtype],
            token_bound(t),
            cos_sin_cache.shape[0],
            q.shape[1] // head_size,
            k.shape[1] // head_size,
            head_size,
            cos_sin_cache.shape[1],
            _device(),
        )
        kern(positions.reshape(t, 1).to(torch.int64), q, k, cos_sin_cache, q_out, k_out)
        STATS.add("rotary_neox", kern.last_run)
    return q_out.reshape(query.shape), k_out.reshape(key.shape)


@rotary_neox.register_fake
def _(positions, query, key, cos_sin_cache, head_size):
    return query.new_empty(query.shape), key.new_empty(key.shape)


def _linear(x: torch.Tensor, wt: torch.Tensor, bias, gated: bool) -> torch.Tensor:
    nb, k, tn = wt.shape
    width = nb * tn // 2 if gated else nb * tn
    rows = x.reshape(-1, k)
    out = x.new_empty((rows.shape[0], width))
    if rows.shape[0]:
        kern = linear_kernel(
            _DTYPES[x.dtype],
            token_bound(rows.shape[0]),
            k,
            nb * tn,
            nb,
            bias is not None,
            _device(),
            gated,
        )
        kern(rows.contiguous(), wt, bias if bias is not None else wt.new_zeros(nb * tn), out)
        # the product's MACs (x rows x K x N), as the host estimate counts a matmul's
        STATS.add(
            "linear_silu_and_mul" if gated else "linear",
            kern.last_run,
            macs=rows.shape[0] * k * nb * tn,
        )
    return out.reshape(*x.shape[:-1], width)


@torch.library.custom_op("vllm_legato::linear", mutates_args=())
def linear(x: torch.Tensor, wt: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x[..., K] @ W^T (+ bias), W laid out as wt = lay_weight(W, nb) ([nb, K, N / nb])."""
    return _linear(x, wt, bias, gated=False)


@linear.register_fake
def _(x, wt, bias):
    return x.new_empty((*x.shape[:-1], wt.shape[0] * wt.shape[2]))


@torch.library.custom_op("vllm_legato::linear_silu_and_mul", mutates_args=())
def linear_silu_and_mul(
    x: torch.Tensor, wt: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """silu_and_mul(linear(x, wt, bias)) in one kernel (`linear_kernel(..., gated=True)`; wt's
    block count even: `fuse_silu_and_mul` checks)."""
    return _linear(x, wt, bias, gated=True)


@linear_silu_and_mul.register_fake
def _(x, wt, bias):
    return x.new_empty((*x.shape[:-1], wt.shape[0] * wt.shape[2] // 2))


def _is_op(node, op) -> bool:
    return node.op == "call_function" and node.target in (op, op.default)


def fuse_silu_and_mul(gm: torch.fx.GraphModule) -> int:
    """Rewrite `silu_and_mul(linear(x, wt, b))` in vLLM's dynamo graph, the linear's only user
    the SiluAndMul and wt's block count even, into `linear_silu_and_mul(x, wt, b)`; the number
    rewritten. The gate/up output is then never written: one kernel fewer per layer."""
    fused = 0
    lin, act = torch.ops.vllm_legato.linear, torch.ops.vllm_legato.silu_and_mul
    for node in list(gm.graph.nodes):
        if not _is_op(node, act) or not isinstance(node.args[0], torch.fx.Node):
            continue
        src = node.args[0]
        if not _is_op(src, lin) or len(src.users) != 1:
            continue
        wt = (
            src.args[1].meta.get("example_value")
            if isinstance(src.args[1], torch.fx.Node)
            else None
        )
        if wt is None:
            wt = src.args[1].meta.get("val") if isinstance(src.args[1], torch.fx.Node) else None
        if wt is None or wt.shape[0] % 2:
            continue
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(
                torch.ops.vllm_legato.linear_silu_and_mul.default, tuple(src.args), dict(src.kwargs)
            )
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        gm.graph.erase_node(src)
        fused += 1
    if fused:
        gm.graph.lint()
        gm.recompile()
    return fused


def device_cores() -> int:
    from legato.model import bertha

    return (bertha.evt1() if _device() == "bertha-evt1" else bertha.evt0()).num_cores


def linear_route(weight: torch.Tensor, bound: int, device: str) -> str | None:
    """Why a linear layer's weight W[N, K] runs through `vllm_legato::linear` (the reason), or
    None when its `mm` stays in the forward graph, for legato.torch to place: bf16 where
    neither chip_linear (all cores) nor the single-core MPU resolver takes it at the token
    bound (no projection of today's models: chip_linear runs a runtime M that one core cannot
    hold as rows over the cores, `linear_row_chunks`, whatever its width);
    f32 wherever chip_linear does not take it: the plugin's kernel multiplies f32 in six bf16
    passes (`linear_kernel`, F32_PASSES: within ~2^-24 of the exact product, as close as
    torch's own f32 mm), the single-core resolver in three (hi/lo halves, ~2^-17), and the f32
    engines' tokens must equal stock vLLM's."""
    from legato.torch.library import aten as aten_lib
    from vllm_legato.budget import accepts

    if weight.ndim != 2 or weight.dtype not in _DTYPES:
        return None
    n, k = weight.shape
    chip = accepts(device, k, n, weight.dtype, bound)
    if chip is None:
        return None
    if weight.dtype == torch.float32:
        return f"chip_linear: {chip}; f32: six bf16 passes (the single-core mm's three are ~2^-17)"
    single = accepts(device, k, n, weight.dtype, bound, resolver=aten_lib.resolve_mm)
    if single is None:
        return None
    return f"chip_linear: {chip}; single-core mm: {single}"


def use_legato_linear(layer) -> bool:
    """Point a vLLM linear layer's `cpu_linear` at `vllm_legato::linear` when `linear_route`
    says so at the token bound: its weight laid out once (`lay_weight`, a buffer of the layer:
    the parameter keeps vLLM's layout for its weight loader). The reason goes to the log and
    the report (`ROUTED`)."""
    from vllm_legato.platform import TOKEN_BOUND_ENV

    bound = int(os.environ.get(TOKEN_BOUND_ENV) or 0)
    why = linear_route(layer.weight, bound, _device()) if bound else None
    if why is None:
        return False
    ROUTED[type(layer).__name__] = why
    w = layer.weight.data
    layer.register_buffer(
        "legato_wt", lay_weight(w, column_blocks(w.shape[0], device_cores())), persistent=False
    )
    layer.cpu_linear = lambda x, weight, bias: torch.ops.vllm_legato.linear(
        x, layer.legato_wt, bias
    )
    return True


FOLD_ROTARY_ENV = "LEGATO_VLLM_FOLD_ROTARY"  # "0": keep the rotary embedding's own kernel


def fold_rotary(model) -> int:
    """Fold the plugin's rotary embeddings into the attention kernels (patches.install calls
    this once the model is built): where every module holding a rotary embedding as
    `rotary_emb` holds a LEGATO_ATTN attention layer as `attn` (vLLM's Llama and Qwen2
    attention: `q, k = self.rotary_emb(positions, q, k)`, then `self.attn(q, k, v)`), with
    the same head size, neox style and an even rotary dim, the attention's kernels rotate the
    keys they write and the queries they read (`paged_attention`, `PagedShape.rot`: the bits
    of `rotary_neox`), and the rotary's forward returns q and k as they are. Returns the
    number of attention layers folded ($LEGATO_VLLM_FOLD_ROTARY=0: none)."""
    from vllm_legato.attention import LegatoAttentionImpl

    if os.environ.get(FOLD_ROTARY_ENV, "1") == "0":
        return 0
    users: dict[int, list] = {}  # id(rotary) -> [rotary, its attention impls, all foldable]
    for m in model.modules():
        rope = getattr(m, "rotary_emb", None)
        if not isinstance(rope, torch.nn.Module):
            continue
        impl = getattr(getattr(m, "attn", None), "impl", None)
        entry = users.setdefault(id(rope), [rope, [], True])
        entry[1].append(impl)
        entry[2] = entry[2] and (
            getattr(rope, "legato_foldable", False)
            and isinstance(impl, LegatoAttentionImpl)
            and rope.is_neox_style
            and rope.head_size == impl.head_size
            and rope.rotary_dim % 2 == 0
            and rope.rotary_dim <= rope.head_size
            and rope.cos_sin_cache.dim() == 2
        )
    folded = 0
    for rope, impls, ok in users.values():
        if not ok:
            continue
        rope.legato_folded = True
        for impl in impls:
            impl.rope = rope
        folded += len(impls)
    return folded


def route_embeddings(model) -> int:
    """Point every unquantized VocabParallelEmbedding of `model` whose lookup the graph's
    resolver refuses at the token bound (`embedding_route`) at `vllm_legato::embedding`
    (patches.install's `UnquantizedEmbeddingMethod.embedding` reads `legato_embedding`); the
    reason goes to the log and the report (`ROUTED`). Returns the number routed."""
    from vllm.model_executor.layers.vocab_parallel_embedding import (
        ParallelLMHead,
        UnquantizedEmbeddingMethod,
        VocabParallelEmbedding,
    )

    from vllm_legato.platform import TOKEN_BOUND_ENV

    bound = int(os.environ.get(TOKEN_BOUND_ENV) or 0)
    routed = 0
    for m in model.modules():
        # the LM head's matmul is vllm_legato.lm_head's (it never looks rows up)
        if not isinstance(m, VocabParallelEmbedding) or isinstance(m, ParallelLMHead):
            continue
        if not bound:
            continue
        if not isinstance(getattr(m, "quant_method", None), UnquantizedEmbeddingMethod):
            continue
        why = embedding_route(m.weight, bound, _device())
        m.legato_embedding = why is not None
        if why is not None:
            ROUTED[type(m).__name__] = why
            routed += 1
    return routed


# -- the layers (vLLM's out-of-tree custom-op registry) -------------------------------------


def register_layers() -> None:
    """Swap vLLM's SiluAndMul and RotaryEmbedding for the classes below (once per process)."""
    from vllm.model_executor.custom_op import CustomOp, op_registry_oot
    from vllm.model_executor.layers.activation import SiluAndMul
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

    if "SiluAndMul" in op_registry_oot:
        return

    @CustomOp.register_oot(name="SiluAndMul")
    class LegatoSiluAndMul(SiluAndMul):
        """SiluAndMul through `vllm_legato::silu_and_mul` (bf16 / f32)."""

        def forward_native(self, x: torch.Tensor) -> torch.Tensor:
            if x.dtype not in _DTYPES:
                return SiluAndMul.forward_native(x)
            return torch.ops.vllm_legato.silu_and_mul(x)

        forward_cpu = forward_oot = forward_native

    @CustomOp.register_oot(name="RotaryEmbedding")
    class LegatoRotaryEmbedding(RotaryEmbedding):
        """Neox-style rotary embedding through `vllm_legato::rotary_neox` (bf16 / f32, with a
        key); otherwise vLLM's native implementation. Folded into the attention kernels
        (`fold_rotary`): q and k as they are (the attention rotates them)."""

        legato_foldable = True

        def forward_native(self, positions, query, key=None):
            if getattr(self, "legato_folded", False):
                if key is None or query.dtype not in _DTYPES:
                    raise RuntimeError(
                        "vllm_legato: a rotary embedding folded into LEGATO_ATTN was called "
                        f"{'without a key' if key is None else f'in {query.dtype}'}: set "
                        f"{FOLD_ROTARY_ENV}=0"
                    )
                return query, key
            if not self.is_neox_style or key is None or query.dtype not in _DTYPES:
                return super().forward_native(positions, query, key)
            cache = self._match_cos_sin_cache_dtype(query)
            return torch.ops.vllm_legato.rotary_neox(positions, query, key, cache, self.head_size)

        forward_cpu = forward_oot = forward_native
