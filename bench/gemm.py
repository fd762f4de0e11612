"""GEMM prefill bench kernel: A[m, k] @ W[k, n] bf16 -> out[m, n] bf16, f32 accumulation on the
MPU (issue 5: [512, 4096] @ [4096, 4096]).

Partition (per target, `for_model`): core c owns the output columns [c * tn, (c + 1) * tn) with
tn = n / num_cores (128 on EVT0's 32 cores, 64 on EVT1's 64) and every row. It walks K in
k-slabs of 256: A[:, 256t:256t+256] (one strided `dma2d` of m rows) times its weight tile
W[256t:256t+256, c*tn:(c+1)*tn], accumulated in place by the MPU (`acc = acc + a @ w` is one
`mpu.mm ..., acc`). W is passed pre-tiled (`mpu_dram`, `wt[c, t]` one contiguous tile) and each
core loads its own tiles from DRAM into `mpu_buffer`, one k-slab ahead of its use.

A is needed by every core, but reading it from DRAM on each of them would move num_cores * 4 MiB
over the channels (more than the MPU time on both generations). So the cores form groups of
`group` cores: the group's first core (its loader) reads each A k-slab from DRAM once, one slab
ahead, and forwards it core-to-core (`request_load` to each neighbour's sram: on-chip, the
receiver's port only, no DRAM latency or channel bytes); the neighbours `receive` it. The
compiler cycles each such stream through two receive buffers with credits (legato_to_core
`_ring_streams`), so a neighbour holds at most two A slabs.
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


def _slab(rows: int):
    return legato.get_model().tensor_type(BF16, [rows, TK], "sram")


def make_gemm(m: int = 512, k: int = 4096, n: int = 4096, name: str | None = None,
              num_cores: int = 32, group: int | None = None) -> "BenchKernel":
    """A GEMM BenchKernel for A[m, k] @ W[k, n] laid out for `num_cores` cores (k a multiple of
    256; `for_model` re-lays it out for the target's core count).

    Arguments: `a[m, k]` row-major in shared DRAM; `wt[num_cores, k // 256, 256, tn]` in
    `mpu_dram` with `wt[c, t] = W[256t:256t+256, c*tn:(c+1)*tn]`; `out[m, n]`.
    """
    from bench.kernels import BenchKernel  # here: bench.kernels imports this module

    kt = k // TK
    assert kt * TK == k, "k must be a multiple of 256"
    tn, grp = _layout(num_cores, n, group)

    def gemm(
        a: legato.get_model().tensor_type(BF16, [m, k], "shared_dram"),
        wt: legato.get_model().tensor_type(BF16, [num_cores, kt, TK, tn], "mpu_dram"),
        out: legato.get_model().tensor_type(BF16, [m, n], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        assert device.num_cores == num_cores, "wt is laid out for another core count"
        h = m // 2  # A slabs travel, and the MPU works, in two row halves
        for c in legato.static_range(num_cores):
            with device.get_core(c):
                loader = c - c % grp  # the group's first core
                # group g walks K from tile g: at every step the loaders read neighbouring
                # column slabs, which lie on different channels (all the rows of one slab start
                # on the same channel: row bytes are a multiple of the interleave period)
                off = (c // grp) % kt
                acc0 = legato.tensor.full((h, tn), 0.0, F32)
                acc1 = legato.tensor.full((m - h, tn), 0.0, F32)
                w = legato.tensor.load(wt[c, off], "mpu_buffer")
                if c == loader:
                    # the loader reads k-slab s + 2 and forwards s + 1 while the MPU does s
                    x0 = legato.tensor.load(a[0:h, off * TK:(off + 1) * TK])
                    y0 = legato.tensor.load(a[h:m, off * TK:(off + 1) * TK])
                    for j in legato.static_range(loader + 1, loader + grp):
                        legato.tensor.request_load(x0, device.get_core(j), "sram", 1)
                    for j in legato.static_range(loader + 1, loader + grp):
                        legato.tensor.request_load(y0, device.get_core(j), "sram", 2)
                    if kt > 1:
                        t = (off + 1) % kt
                        x1 = legato.tensor.load(a[0:h, t * TK:(t + 1) * TK])
                        y1 = legato.tensor.load(a[h:m, t * TK:(t + 1) * TK])
                else:
                    x0 = legato.tensor.receive_type(_slab(h), 1, None, "sram")
                for s in legato.static_range(kt):
                    if s + 1 < kt:
                        wn = legato.tensor.load(wt[c, (off + s + 1) % kt], "mpu_buffer")
                    acc0 = acc0 + legato.tensor.matmul(x0, w, F32)
                    if c != loader:  # each half is waited for right before its matmul
                        y0 = legato.tensor.receive_type(_slab(m - h), 2, None, "sram")
                    acc1 = acc1 + legato.tensor.matmul(y0, w, F32)
                    if s + 1 < kt and c == loader:
                        for j in legato.static_range(loader + 1, loader + grp):
                            legato.tensor.request_load(x1, device.get_core(j), "sram", 1)
                        for j in legato.static_range(loader + 1, loader + grp):
                            legato.tensor.request_load(y1, device.get_core(j), "sram", 2)
                        if s + 2 < kt:
                            t = (off + s + 2) % kt
                            x2 = legato.tensor.load(a[0:h, t * TK:(t + 1) * TK])
                            y2 = legato.tensor.load(a[h:m, t * TK:(t + 1) * TK])
                    if s + 1 < kt:
                        if c == loader:
                            x0 = x1
                            y0 = y1
                            if s + 2 < kt:
                                x1 = x2
                                y1 = y2
                        else:
                            x0 = legato.tensor.receive_type(_slab(h), 1, None, "sram")
                        w = wn
                legato.tensor.memcpy(out[0:h, c * tn:(c + 1) * tn], legato.tensor.cast(acc0, BF16))
                legato.tensor.memcpy(out[h:m, c * tn:(c + 1) * tn], legato.tensor.cast(acc1, BF16))

    def make_args(torch, gen):
        a = torch.randn(m, k, generator=gen).bfloat16()
        w = (torch.randn(k, n, generator=gen) / 64).bfloat16()
        wt = w.reshape(kt, TK, num_cores, tn).permute(2, 0, 1, 3).contiguous()
        return [a, wt, torch.zeros(m, n, dtype=torch.bfloat16)]

    def torch_fn(torch, args):
        a, wt = args[0], args[1]
        w = wt.permute(1, 2, 0, 3).reshape(k, n)  # the original W[k, n]
        return (a.float() @ w.float()).bfloat16()

    kname = name or f"gemm_{m}x{k}x{n}"
    gemm.__name__ = gemm.__qualname__ = kname

    def for_model(model) -> "BenchKernel":
        if model.num_cores == num_cores:
            return BenchKernel(kname, gemm, make_args, torch_fn, out_index=2)
        return make_gemm(m, k, n, name, model.num_cores, group)

    return BenchKernel(kname, gemm, make_args, torch_fn, out_index=2, for_model=for_model)
