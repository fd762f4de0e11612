"""GEMM prefill bench kernel: A[m, k] @ W[k, n] bf16 -> out[m, n] bf16, f32 accumulation on the
MPU (issue 5: [512, 4096] @ [4096, 4096]).

Partition (per target, `for_model`): core c owns the output columns [c * tn, (c + 1) * tn) with
tn = n / num_cores (128 on EVT0's 32 cores, 64 on EVT1's 64) and every row. It walks K in
k-slabs of 256: A[:, 256t:256t+256] times its weight tile W[256t:256t+256, c*tn:(c+1)*tn] (one
`mpu.ldw`), in four row blocks of m / 4 rows, each accumulated in place by the MPU into its own
f32 accumulator (`acc = acc + a @ w` is one `mpu.mm ..., acc`). W is passed pre-tiled
(`mpu_dram`, `wt[c, t]` one contiguous tile) and each core loads its own tiles from DRAM into
`mpu_buffer`, one k-slab ahead of its use.

A is needed by every core, but reading it from DRAM on each of them would move num_cores * 4 MiB
over the channels (more than the MPU time on both generations). So the cores form groups of
`group` cores (8 on EVT0, 16 on EVT1): the group's first core (its loader) reads each A k-slab
from DRAM once (four strided `dma2d`, one per row block), two slabs ahead, and forwards each
row block core-to-core (`request_load` to each neighbour's sram, queues 1..4: on-chip, the
receiver's port only, no DRAM latency or channel bytes) one slab ahead; the neighbours
`receive` each block right before its matmul. The compiler cycles each such stream through
three receive buffers with credits (the `core-transfer-rings` pass). Group g starts at K tile g,
so at every step the loaders read column slabs on different channels. Row blocks keep the
first transfer small (the MPU starts sooner) and let a block's output (`dma2d` into the column
block of `out`) go out while the MPU does the next block in the last step.
"""

from typing import TYPE_CHECKING

import legato

if TYPE_CHECKING:
    from bench.kernels import BenchKernel

BF16 = legato.types.float("bfloat16")
F32 = legato.types.float("float32")
TK = 256  # the MPU weight tile's K (DESIGN section 5)


def _layout(num_cores: int, n: int, group: int | None = None) -> tuple[int, int]:
    """(tile width tn, group size) for `num_cores` cores."""
    tn = n // num_cores
    assert tn * num_cores == n and 1 <= tn <= 128, "n must split in <= 128 columns per core"
    if group is None:
        group = min(num_cores, 8 if num_cores <= 32 else 16)
    assert num_cores % group == 0
    return tn, group


@legato.function
def _forward(x, y, z, u, device, loader, grp):
    """The loader sends the four row blocks of a k-slab to each neighbour (queues 1..4)."""
    for j in legato.static_range(loader + 1, loader + grp):
        legato.tensor.request_load(x, device.get_core(j), "sram", 1)
    for j in legato.static_range(loader + 1, loader + grp):
        legato.tensor.request_load(y, device.get_core(j), "sram", 2)
    for j in legato.static_range(loader + 1, loader + grp):
        legato.tensor.request_load(z, device.get_core(j), "sram", 3)
    for j in legato.static_range(loader + 1, loader + grp):
        legato.tensor.request_load(u, device.get_core(j), "sram", 4)


@legato.function
def _store(out, acc, r0, r1, c0, tn):
    legato.tensor.memcpy(out[r0:r1, c0 : c0 + tn], legato.tensor.cast(acc, BF16))


def _slab(rows: int):
    return legato.get_model().tensor_type(BF16, [rows, TK], "sram")


def make_gemm(
    m: int = 512,
    k: int = 4096,
    n: int = 4096,
    name: str | None = None,
    num_cores: int = 32,
    group: int | None = None,
) -> "BenchKernel":
    """A GEMM BenchKernel for A[m, k] @ W[k, n] laid out for `num_cores` cores (k a multiple of
    256; `for_model` re-lays it out for the target's core count).

    Arguments: `a[m, k]` row-major in shared DRAM; `wt[num_cores, k // 256, 256, tn]` in
    `mpu_dram` with `wt[c, t] = W[256t:256t+256, c*tn:(c+1)*tn]`; `out[m, n]`.
    """
    from bench.kernels import BenchKernel  # here: bench.kernels imports this module

    kt = k // TK
    assert kt * TK == k and m % 4 == 0, "k must be a multiple of 256, m of 4"
    tn, grp = _layout(num_cores, n, group)

    def gemm(
        a: legato.get_model().tensor_type(BF16, [m, k], "shared_dram"),
        wt: legato.get_model().tensor_type(BF16, [num_cores, kt, TK, tn], "mpu_dram"),
        out: legato.get_model().tensor_type(BF16, [m, n], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        assert device.num_cores == num_cores, "wt is laid out for another core count"
        r = m // 4  # A slabs travel, and the MPU works, in four row blocks of r rows
        for c in legato.static_range(num_cores):
            with device.get_core(c):
                loader = c - c % grp  # the group's first core
                # group g walks K from tile g: at every step the loaders read neighbouring
                # column slabs, which lie on different channels (all the rows of one slab start
                # on the same channel: row bytes are a multiple of the interleave period)
                off = (c // grp) % kt
                acc0 = legato.tensor.full((r, tn), 0.0, F32)
                acc1 = legato.tensor.full((r, tn), 0.0, F32)
                acc2 = legato.tensor.full((r, tn), 0.0, F32)
                acc3 = legato.tensor.full((r, tn), 0.0, F32)
                if c == loader:
                    # the loader reads k-slab s + 2 and forwards s + 1 while the MPU does s
                    x0 = legato.tensor.load(a[0:r, off * TK : (off + 1) * TK])
                    y0 = legato.tensor.load(a[r : 2 * r, off * TK : (off + 1) * TK])
                    z0 = legato.tensor.load(a[2 * r : 3 * r, off * TK : (off + 1) * TK])
                    u0 = legato.tensor.load(a[3 * r : m, off * TK : (off + 1) * TK])
                    w = legato.tensor.load(wt[c, off], "mpu_buffer")
                    _forward(x0, y0, z0, u0, device, loader, grp)
                    if kt > 1:
                        t = (off + 1) % kt
                        x1 = legato.tensor.load(a[0:r, t * TK : (t + 1) * TK])
                        y1 = legato.tensor.load(a[r : 2 * r, t * TK : (t + 1) * TK])
                        z1 = legato.tensor.load(a[2 * r : 3 * r, t * TK : (t + 1) * TK])
                        u1 = legato.tensor.load(a[3 * r : m, t * TK : (t + 1) * TK])
                else:
                    w = legato.tensor.load(wt[c, off], "mpu_buffer")
                    x0 = legato.tensor.receive_type(_slab(r), 1, None, "sram")
                for s in legato.static_range(kt):
                    last = s + 1 == kt
                    if not last:
                        wn = legato.tensor.load(wt[c, (off + s + 1) % kt], "mpu_buffer")
                    # each block is waited for right before its matmul; in the last step each
                    # block's output goes out while the MPU does the next block
                    acc0 = acc0 + legato.tensor.matmul(x0, w, F32)
                    if c != loader:
                        y0 = legato.tensor.receive_type(_slab(r), 2, None, "sram")
                    acc1 = acc1 + legato.tensor.matmul(y0, w, F32)
                    if last:
                        _store(out, acc0, 0, r, c * tn, tn)
                    if c != loader:
                        z0 = legato.tensor.receive_type(_slab(r), 3, None, "sram")
                    acc2 = acc2 + legato.tensor.matmul(z0, w, F32)
                    if last:
                        _store(out, acc1, r, 2 * r, c * tn, tn)
                    if c != loader:
                        u0 = legato.tensor.receive_type(_slab(r), 4, None, "sram")
                    acc3 = acc3 + legato.tensor.matmul(u0, w, F32)
                    if last:
                        _store(out, acc2, 2 * r, 3 * r, c * tn, tn)
                        _store(out, acc3, 3 * r, m, c * tn, tn)
                    if not last and c == loader:
                        _forward(x1, y1, z1, u1, device, loader, grp)
                        if s + 2 < kt:
                            t = (off + s + 2) % kt
                            x2 = legato.tensor.load(a[0:r, t * TK : (t + 1) * TK])
                            y2 = legato.tensor.load(a[r : 2 * r, t * TK : (t + 1) * TK])
                            z2 = legato.tensor.load(a[2 * r : 3 * r, t * TK : (t + 1) * TK])
                            u2 = legato.tensor.load(a[3 * r : m, t * TK : (t + 1) * TK])
                    if not last:
                        if c == loader:
                            x0, y0, z0, u0 = x1, y1, z1, u1
                            if s + 2 < kt:
                                x1, y1, z1, u1 = x2, y2, z2, u2
                        else:
                            x0 = legato.tensor.receive_type(_slab(r), 1, None, "sram")
                        w = wn

    def make_args(torch, gen):
        a = torch.randn(m, k, generator=gen).bfloat16()
        w = (torch.randn(k, n, generator=gen) / 64).bfloat16()
        wt = w.reshape(kt, TK, num_cores, tn).permute(2, 0, 1, 3).contiguous()
        return [a, wt, torch.zeros(m, n, dtype=torch.bfloat16)]

    def torch_fn(torch, args):
        """torch eager in bf16 (f32 accumulation inside), on the tiled weight read in place:
        wt[c] viewed as [k, tn] is W's column block c, so one batched matmul is A @ W."""
        a, wt = args[0], args[1]
        y = torch.bmm(a.unsqueeze(0).expand(num_cores, m, k), wt.view(num_cores, k, tn))
        return y.permute(1, 0, 2).reshape(m, n)

    def torch_best(torch, args):
        """nn.Linear's own form: W^T [n, k] rebuilt from the tiles once, then one linear."""
        a, wt = args[0], args[1]
        w_nk = wt.permute(0, 3, 1, 2).reshape(n, k).contiguous()
        return lambda: torch.nn.functional.linear(a, w_nk)

    kname = name or f"gemm_{m}x{k}x{n}"
    gemm.__name__ = gemm.__qualname__ = kname

    def for_model(model) -> "BenchKernel":
        if model.num_cores == num_cores:
            return BenchKernel(kname, gemm, make_args, torch_fn, 2, torch_best=torch_best)
        return make_gemm(m, k, n, name, model.num_cores, group)

    return BenchKernel(
        kname, gemm, make_args, torch_fn, 2, for_model=for_model, torch_best=torch_best
    )


# -- SPMD form (one program for every core) -----------------------------------------------------


def default_spread(model, num_cores: int, group: int) -> int:
    """The k-slabs between the start slabs of neighbouring groups that `make_gemm_spmd` uses
    without a `spread`: the channel pairs divided between the groups (a k-slab's rows lie on
    two neighbouring channels), at least 1."""
    return max(1, model.num_memory_channels // 2 // (num_cores // group))


@legato.function
def _spmd_send(x, to, grp):
    """Send the core's piece of a k-slab to the rest of its group (queue d: d places on)."""
    for d in legato.static_range(1, grp):
        legato.tensor.request_load(x, to[d - 1], "sram", d)


@legato.function
def _spmd_acc(accs, d, x, w):
    """accs[d] += x @ w (one `mpu.mm` accumulating in place)."""
    return accs[:d] + (accs[d] + legato.tensor.matmul(x, w, F32),) + accs[d + 1 :]


@legato.function
def _spmd_store(out, y, r0, rows, c0, tn):
    legato.tensor.memcpy(out[r0 : r0 + rows, c0 : c0 + tn], y)


def make_gemm_spmd(
    m: int = 512,
    k: int = 4096,
    n: int = 4096,
    name: str | None = None,
    num_cores: int = 32,
    group: int | None = None,
    spread: int | None = None,
) -> "BenchKernel":
    """`make_gemm`'s GEMM (same arguments and layout) as one SPMD program
    (`with device.get_all_cores():`), which compiles in ~3 s instead of 25-40 s.

    The cores of a group exchange A all-to-all instead of through a loader (there is no runtime
    `if`): core i of a group reads rows [i*r, (i+1)*r) (r = m / group) of each k-slab from
    DRAM, two slabs ahead, and sends them to the core d places on in its group on queue d
    (`request_load` to `device.get_core(<runtime index>)`), one send per matmul of the step
    before the slab's; it receives piece (i - d) % group on queue d right before that piece's
    matmul, accumulated in place by the MPU into its own f32 accumulator. Each queue is a
    stream of k / 256 transfers through three receive buffers with credits. The groups start
    `spread` k-slabs apart so that they read on different channels (default
    `default_spread(model, num_cores, group)`; a search-space point of the tuner,
    `bench.kernels.GEMM_SPACE`). In the last step each
    accumulator is cast two matmuls later (the core issues in order) and written out at once;
    every cast keeps its own buffer to the end. Not the bench's GEMM yet: 94.0% of the MPU
    roofline on EVT0 (per-core form 94.7%) but 86.7% on EVT1 (88.0%): the fill (~6k cycles: a
    group's first slab and every core's first weight tile at once on the same channels) is
    longer than the per-core form's.

    legato/torch/library/chip_linear.py's `linear_rows_cols` (the torch path's prefill
    nn.Linear) repeats this schedule with a bias, on purpose: this kernel stays the
    independent hand-written reference that `bench/torch_path.py`'s `torch_gemm_prefill` row is
    compared with (its `hand_ratio`), so a change to either shows as a difference between them.
    """
    from bench.kernels import BenchKernel  # here: bench.kernels imports this module

    kt = k // TK
    assert kt * TK == k and m % 4 == 0, "k must be a multiple of 256, m of 4"
    tn, grp = _layout(num_cores, n, group)
    assert m % grp == 0, "m must split in one row block per core of a group"
    assert spread is None or spread >= 1, f"spread must be >= 1, not {spread}"
    fixed_spread = spread or 0  # 0: the default for the target's channel count
    base = make_gemm(m, k, n, name, num_cores, group)

    def gemm_spmd(
        a: legato.get_model().tensor_type(BF16, [m, k], "shared_dram"),
        wt: legato.get_model().tensor_type(BF16, [num_cores, kt, TK, tn], "mpu_dram"),
        out: legato.get_model().tensor_type(BF16, [m, n], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        assert device.num_cores == num_cores, "wt is laid out for another core count"
        r = m // grp  # each core of a group reads, and sends its group, r rows of each k-slab
        # a k-slab's rows (512 B of each) lie on two neighbouring channels: the groups start
        # `spread` slabs apart so that at every step they read on different pairs of channels
        spread_ = fixed_spread or default_spread(device.model, num_cores, grp)
        with device.get_all_cores():
            c = legato.core_id()
            i = c % grp  # the core's place in its group
            base = c - i  # the group's first core
            # group g walks K from tile g: at every step the groups read neighbouring column
            # slabs, which lie on different channels (all the rows of one slab start on the same
            # channel: row bytes are a multiple of the interleave period)
            off = (c // grp) * spread_ % kt
            # send d goes to the core d places further in the group (queue d); receive d comes
            # from the core d places before, whose rows are piece p_d
            to, piece, accs, outs = (), (), (), ()
            for d in legato.static_range(grp):
                if d > 0:
                    to = to + (device.get_core(base + (i + d) % grp),)
                piece = piece + ((i + grp - d) % grp,)
                accs = accs + (legato.tensor.full((r, tn), 0.0, F32),)
            t = off
            w = legato.tensor.load(wt[c, t], "mpu_buffer")
            x0 = legato.tensor.load(a[i * r : (i + 1) * r, t * TK : (t + 1) * TK])
            _spmd_send(x0, to, grp)
            if kt > 1:
                t = (off + 1) % kt
                x1 = legato.tensor.load(a[i * r : (i + 1) * r, t * TK : (t + 1) * TK])
            for s in legato.static_range(kt):
                last = s + 1 == kt
                if not last:
                    wn = legato.tensor.load(wt[c, (off + s + 1) % kt], "mpu_buffer")
                # the own piece first, then each received one right before its matmul; in the
                # last step each accumulator goes out while the MPU does the next piece
                accs = _spmd_acc(accs, 0, x0, w)
                for d in legato.static_range(1, grp):
                    if not last:
                        # slab s + 1 to the core d places on, a step ahead of its use: one send
                        # per matmul, so that a core's port gets its pieces spread over the step
                        legato.tensor.request_load(x1, to[d - 1], "sram", d)
                        if d == 1 and s + 2 < kt:
                            t = (off + s + 2) % kt
                            x2 = legato.tensor.load(a[i * r : (i + 1) * r, t * TK : (t + 1) * TK])
                    y = legato.tensor.receive_type(_slab(r), d, None, "sram")
                    accs = _spmd_acc(accs, d, y, w)
                    if last and d >= 2:
                        # a block is cast two matmuls after its own (the core issues in order:
                        # the cast waits for its block while the MPU has the next one queued)
                        # and written out at once, so the output writes spread over the step
                        outs = outs + (legato.tensor.cast(accs[d - 2], BF16),)
                        _spmd_store(out, outs[d - 2], piece[d - 2] * r, r, c * tn, tn)
                if last:
                    for d in legato.static_range(max(grp - 2, 0), grp):
                        outs = outs + (legato.tensor.cast(accs[d], BF16),)
                        _spmd_store(out, outs[d], piece[d] * r, r, c * tn, tn)
                    # every cast keeps its own buffer to the end (a view of each, here, is its
                    # last touch): a cast into a buffer whose write is in flight would wait
                    for d in legato.static_range(grp):
                        legato.tensor.reshape(outs[d], (r * tn,))
                else:
                    x0 = x1
                    if s + 2 < kt:
                        x1 = x2
                    w = wn

    kname = name or f"gemm_spmd_{m}x{k}x{n}"
    gemm_spmd.__name__ = gemm_spmd.__qualname__ = kname

    def for_model(model) -> "BenchKernel":
        if model.num_cores == num_cores:
            return BenchKernel(
                kname, gemm_spmd, base.make_args, base.torch_fn, 2, torch_best=base.torch_best
            )
        return make_gemm_spmd(m, k, n, name, model.num_cores, group, spread)

    return BenchKernel(
        kname,
        gemm_spmd,
        base.make_args,
        base.torch_fn,
        2,
        for_model=for_model,
        torch_best=base.torch_best,
    )
