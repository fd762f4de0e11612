"""Corpus kernels for issue 4's runtime constructs, written in the DSL: runtime loops over the
row tiles of a dynamic-M input (with a tensor carried around the loop), the MPU inside a loop,
SPMD with `legato.core_id()` and runtime slices, barriers, semaphores, a core-to-core
request_load, and a 32-core SPMD kernel. Each becomes legato IR through the frontend, so the
differential harness runs it at every level and on the emulator.
"""

from __future__ import annotations

import numpy as np
import torch

import legato
from legato.interp.differential import CorpusKernel
from legato.model import bertha

bf16 = legato.types.float("bfloat16")
f32 = legato.types.float("float32")
BF = bf16.numpy


def tt(shape, memory, dtype=f32):
    return legato.get_model().tensor_type(dtype, shape, memory)


NC = 4  # cores of the small SPMD model
R = 8  # rows per tile / per core


def four_cores(ctx):
    return bertha.Bertha(ctx, "bertha", NC, False, 8, 1 << 30)


@legato.compile(backend=four_cores)
def row_tiles(
    x: tt(((-1, 64), 32), "shared_dram"),
    out: tt([64, 32], "shared_dram"),
    total: tt([1, 32], "shared_dram"),
):
    """A runtime loop over the row tiles of a dynamic-M input (the last one partial): load a
    tile, compute, write it back; a column sum is carried around the loop."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        n = x.size(0)
        acc = legato.tensor.load(x[0:1, :]) * 0.0  # a [1, 32] zero in sram
        for t in range((n + R - 1) // R):
            tile = legato.tensor.load(x[t * R : (t + 1) * R, :], "sram")
            legato.tensor.memcpy(out[t * R : (t + 1) * R, :], tile * 2.0 + 1.0)
            acc = acc + legato.tensor.sum(tile, 0, keepdim=True)
        legato.tensor.memcpy(total, acc)


@legato.compile(backend=four_cores)
def loop_matmul(
    x: tt(((-1, 64), 256), "shared_dram", bf16),
    w: tt([256, 128], "mpu_dram", bf16),
    out: tt([64, 128], "shared_dram", bf16),
):
    """Row tiles of a dynamic-M input through the MPU; the weight is loaded once before the loop."""
    device = legato.get_context().get_device()
    with device.get_core(1):
        wb = legato.tensor.load(w, "mpu_buffer")
        for t in range((x.size(0) + 15) // 16):
            a = legato.tensor.load(x[t * 16 : t * 16 + 16, :], "sram")
            legato.tensor.memcpy(out[t * 16 : t * 16 + 16, :], a @ wb)


KT = 5  # K tiles of the streamed weight: [5 * 256, 128] bf16 is 320 KiB > mpu_buffer


@legato.compile(backend=four_cores)
def loop_streamed_weight(
    x: tt((KT, (-1, 64), 256), "shared_dram", bf16),
    w: tt([KT * 256, 128], "mpu_dram", bf16),
    out: tt([64, 128], "shared_dram", bf16),
):
    """A runtime loop over row tiles whose weight (320 KiB) does not fit mpu_buffer: each
    iteration streams its five 64 KiB K tiles (x given K-tile major, [KT, M, 256]). One tile is
    live at a time, so the loop fits: the planner shares mpu_buffer between a loop body's
    buffers by their liveness within an iteration."""
    device = legato.get_context().get_device()
    with device.get_core(1):
        for t in range((x.size(1) + 15) // 16):
            a0 = legato.tensor.load(x[0, t * 16 : t * 16 + 16, :])
            acc = legato.tensor.matmul(a0, legato.tensor.load(w[0:256, :], "mpu_buffer"), f32)
            for j in legato.static_range(1, KT):
                a = legato.tensor.load(x[j, t * 16 : t * 16 + 16, :])
                wj = legato.tensor.load(w[j * 256 : j * 256 + 256, :], "mpu_buffer")
                acc = acc + legato.tensor.matmul(a, wj, f32)
            legato.tensor.memcpy(out[t * 16 : t * 16 + 16, :], legato.tensor.cast(acc, bf16))


@legato.compile(backend=four_cores)
def whole_tiles_weight(
    x: tt(((-1, 4), 16, 128), "shared_dram", bf16),
    w: tt(((-1, 512), 64), "shared_dram", bf16),
    out: tt([16, 64], "shared_dram"),
):
    """MPU weights cut from a runtime-length tensor: a slice of 128 rows of w is provably
    inside w (a loop over its whole tiles, up to min(.., w.size(0)) // 128), so it keeps its
    static size and can be the MPU weight; sum_t x[t] @ w[t*128 : t*128 + 128] over the tiles
    both operands hold."""
    device = legato.get_context().get_device()
    with device.get_core(2):
        acc = legato.tensor.full((16, 64), 0.0, f32)
        for t in range(min(x.size(0) * 128, w.size(0)) // 128):
            a = legato.tensor.load(x[t])
            wt = legato.tensor.load(w[t * 128 : t * 128 + 128, :], "mpu_buffer")
            acc = acc + legato.tensor.matmul(a, wt, f32)
        legato.tensor.memcpy(out, acc)


@legato.compile(backend=four_cores)
def spmd_matmul(
    a: tt([NC * R, 256], "shared_dram", bf16),
    w: tt([256, 128], "mpu_dram", bf16),
    out: tt([NC * R, 128], "shared_dram", bf16),
):
    """SPMD: top sends the weight to every core; each core multiplies its own rows."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(w, device.get_all_cores(), "mpu_buffer")
    with device.get_all_cores():
        c = legato.core_id()
        wt = legato.tensor.receive_type(tt([256, 128], "mpu_weight", bf16), 0, None, "mpu_buffer")
        x = legato.tensor.load(a[c * R : (c + 1) * R, :], "sram")
        legato.tensor.memcpy(out[c * R : (c + 1) * R, :], x @ wt)


@legato.compile(backend=four_cores)
def spmd_exchange(
    a: tt([NC * R, 64], "shared_dram"),
    out: tt([NC * R, 64], "shared_dram"),
):
    """Barriers order the cores' writes and reads of shared memory: each core publishes exp of
    its rows, then reads its neighbour's; a semaphore tells top that every core is done."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        x = legato.tensor.load(a[c * R : (c + 1) * R, :], "sram")
        legato.tensor.memcpy(out[c * R : (c + 1) * R, :], legato.tensor.exp(x))
        legato.sync.barrier()
        nb = (c + 1) % device.num_cores
        y = legato.tensor.load(out[nb * R : nb * R + R, :], "sram")
        legato.sync.barrier()
        legato.tensor.memcpy(out[c * R : (c + 1) * R, :], y + 1.0)
        legato.sync.signal(device.get_top(), 3)
    with device.get_top():
        legato.sync.wait(3, device.num_cores)


@legato.compile(backend=four_cores)
def core_to_core(
    a: tt([R, 64], "shared_dram"),
    out: tt([R, 64], "shared_dram"),
):
    """core 0 computes and sends its result to core 1 (request_load from a core context); core 1
    finishes; top waits on a semaphore core 1 signals."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
        y = x * x
        legato.tensor.request_load(y, device.get_core(1), "sram", 2)
    with device.get_core(1):
        z = legato.tensor.receive(a, 2, "sram")
        legato.tensor.memcpy(out, z + 1.0)
        legato.sync.signal(device.get_top(), 0)
    with device.get_top():
        legato.sync.wait(0)


@legato.compile(backend=four_cores)
def sem_handoff(
    a: tt([R, 64], "shared_dram"),
    out: tt([R, 64], "shared_dram"),
):
    """A semaphore orders two cores' accesses of shared DRAM: core 0 writes a*a to `out` and
    signals core 1, which waits, reads `out` back and writes it plus one."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        x = legato.tensor.load(a, "sram")
        legato.tensor.memcpy(out, x * x)
        legato.sync.signal(device.get_core(1), 1)
    with device.get_core(1):
        legato.sync.wait(1)
        y = legato.tensor.load(out, "sram")
        legato.tensor.memcpy(out, y + 1.0)


@legato.compile(backend=four_cores)
def spmd_ring(
    a: tt([NC * R, 64], "shared_dram"),
    out: tt([NC * R, 64], "shared_dram"),
):
    """SPMD core-to-core: every core sends its rows to the next core (a runtime target) and
    forwards what it received one more step (two sends, one queue, the same ring); it writes
    its own rows plus the two received blocks."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        nxt = device.get_core((c + 1) % device.num_cores)
        x = legato.tensor.load(a[c * R : (c + 1) * R, :], "sram")
        legato.tensor.request_load(x * 2.0, nxt, "sram", 1)
        y = legato.tensor.receive_type(tt([R, 64], "sram"), 1, None, "sram")
        legato.tensor.request_load(y, nxt, "sram", 1)
        z = legato.tensor.receive_type(tt([R, 64], "sram"), 1, None, "sram")
        legato.tensor.memcpy(out[c * R : (c + 1) * R, :], x + y - z * 0.5)


S = 5  # steps of spmd_stream: more than the three receive buffers of a stream


@legato.compile(backend=four_cores)
def spmd_stream(
    a: tt([NC * R, 64 * S], "shared_dram"),
    out: tt([NC * R, 64], "shared_dram"),
):
    """SPMD core-to-core streams of S transfers: at each step every core sends a column block of
    its rows to the next core (queue 1) and twice it to the previous one (queue 2), and adds what
    it receives; each stream cycles through three receive buffers with credits (the credit goes
    to the sender, the inverse permutation: the other stream's target)."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        nxt = device.get_core((c + 1) % NC)
        prv = device.get_core((c + NC - 1) % NC)
        acc = legato.tensor.load(a[c * R : (c + 1) * R, 0:64], "sram") * 0.0
        for s in legato.static_range(S):
            x = legato.tensor.load(a[c * R : (c + 1) * R, s * 64 : (s + 1) * 64], "sram")
            legato.tensor.request_load(x, nxt, "sram", 1)
            legato.tensor.request_load(x * 2.0, prv, "sram", 2)
            y = legato.tensor.receive_type(tt([R, 64], "sram"), 1, None, "sram")
            z = legato.tensor.receive_type(tt([R, 64], "sram"), 2, None, "sram")
            acc = acc + y - z
        legato.tensor.memcpy(out[c * R : (c + 1) * R, :], acc)


def _spmd_stream_ref(a):
    acc = torch.zeros(NC * R, 64)
    for s in range(S):
        x = a[:, s * 64 : (s + 1) * 64]
        acc = acc + torch.roll(x, R, 0) - torch.roll(x * 2, -R, 0)
    return acc


@legato.compile(backend="bertha")
def spmd32_silu(
    a: tt([32 * 4, 64], "shared_dram", bf16),
    out: tt([32 * 4, 64], "shared_dram", bf16),
):
    """Every core of the 32-core EVT0 chip applies silu to its 4 rows."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        rows = a.shape[0] // device.num_cores
        c = legato.core_id()
        x = legato.tensor.load(a[c * rows : (c + 1) * rows, :])
        legato.tensor.memcpy(out[c * rows : (c + 1) * rows, :], legato.tensor.silu(x))


@legato.compile(backend=four_cores)
def spmd_column_slabs(
    x: tt(((-1, 16), NC * 32), "shared_dram"),
    y: tt(((-1, 16), 4, NC * 64), "shared_dram"),
    out: tt(((-1, 16), NC * 32), "shared_dram"),
    out3: tt(((-1, 16), 4, NC * 32), "shared_dram"),
):
    """Strided copies over a runtime row count: every core loads the [?M, 32] column slab c of
    x (row stride NC * 32, a runtime column offset) and stores its result into the same slab of
    out (one dma2d each way, M rows); then core 0 copies y[:, :, 16:48] ([?B, 4, 32]: the rows
    of the dma2d are B * 4)."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        a = legato.tensor.load(x[:, c * 32 : (c + 1) * 32])
        legato.tensor.memcpy(out[:, c * 32 : (c + 1) * 32], a * 2.0 + 1.0)
        b = legato.tensor.load(y[:, :, c * 64 + 16 : c * 64 + 48])
        legato.tensor.memcpy(out3[:, :, c * 32 : (c + 1) * 32], b - 1.0)


@legato.compile(backend=four_cores)
def broadcast_middle(
    x: tt(((-1, 16), 2, 32), "shared_dram"),
    c: tt(((-1, 16), 1, 32), "shared_dram"),
    out: tt(((-1, 16), 2, 32), "shared_dram"),
):
    """A broadcast along a static middle dim under a runtime row count (rotary's cos [T, 1, D]
    times q [T, H, D]): c is materialized over the 2 with one strided copy per slice, each a
    dma2d of T rows."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        a = legato.tensor.load(x)
        b = legato.tensor.load(c)
        legato.tensor.memcpy(out, a - b)


@legato.compile(backend=four_cores)
def row_partials(
    x: tt(((-1, 16), NC * 32), "shared_dram"),
    part: tt([NC, 16, 32], "shared_dram"),
    out: tt(((-1, 16), 32), "shared_dram"),
):
    """Split-K partials over a runtime row count, in a scratch sized at the bound: core c writes
    its column slab's partial into the runtime-row view part[c, 0:m] (of a static [16, 32]);
    after a barrier core c sums its columns of part[s, 0:m] for every s, starting from a
    runtime-row view of a static full (a [4, ?16, 8] load would have a runtime stride)."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        m = x.size(0)
        c = legato.core_id()
        a = legato.tensor.load(x[:, c * 32 : (c + 1) * 32])
        legato.tensor.memcpy(part[c, 0:m, :], a * 2.0)
        legato.sync.barrier()
        w = 32 // NC
        ones = legato.tensor.full((16, w), 1.0, f32)
        total = ones[0:m, :]
        for s in legato.static_range(NC):
            total = total + legato.tensor.load(part[s : s + 1, 0:m, c * w : (c + 1) * w])[0]
        legato.tensor.memcpy(out[:, c * w : (c + 1) * w], total)


def _row_partials_ref(ins):
    x = ins[0].reshape(-1, NC, 32) * 2
    total = torch.ones_like(x[:, 0])
    for c in range(NC):
        total = total + x[:, c]
    part = ins[1].clone()
    part[:, : x.shape[0]] = x.transpose(0, 1)
    return [part, total]


def _f32(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF)


def _pad(x, rows):
    return torch.cat([x, torch.zeros(rows - x.shape[0], *x.shape[1:], dtype=x.dtype)])


def _mm(a, w):
    return (a.float() @ w.float()).bfloat16()


RUNTIME_CORPUS = [
    CorpusKernel(
        name="runtime_loop_row_tiles",
        mlir=row_tiles.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _f32(rng, (21, 32)),
            np.zeros((64, 32), np.float32),
            np.zeros((1, 32), np.float32),
        ],
        reference=lambda ins: [_pad(ins[0] * 2 + 1, 64), ins[0].sum(0, keepdim=True)],
        outputs=(1, 2),
        model=row_tiles.model,
    ),
    CorpusKernel(
        name="runtime_loop_matmul",
        mlir=loop_matmul.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _bf16(rng, (37, 256)),
            _bf16(rng, (256, 128)),
            np.zeros((64, 128), BF),
        ],
        reference=lambda ins: [_pad(_mm(ins[0], ins[1]), 64)],
        outputs=(2,),
        model=loop_matmul.model,
    ),
    CorpusKernel(
        name="runtime_loop_streamed_weight",
        mlir=loop_streamed_weight.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _bf16(rng, (KT, 37, 256)),
            _bf16(rng, (KT * 256, 128)),
            np.zeros((64, 128), BF),
        ],
        reference=lambda ins: [_pad(_mm(ins[0].transpose(0, 1).reshape(37, KT * 256), ins[1]), 64)],
        outputs=(2,),
        model=loop_streamed_weight.model,
    ),
    CorpusKernel(
        name="runtime_whole_tiles_weight",
        mlir=whole_tiles_weight.to_mlir(debuginfo=False),
        # x holds 3 tiles, w 3 tiles and 40 rows more (not a whole tile: not used)
        make_args=lambda rng: [
            _bf16(rng, (3, 16, 128)),
            _bf16(rng, (3 * 128 + 40, 64)),
            np.zeros((16, 64), np.float32),
        ],
        reference=lambda ins: [
            ins[0].transpose(0, 1).reshape(16, 3 * 128).float() @ ins[1][: 3 * 128].float()
        ],
        outputs=(2,),
        model=whole_tiles_weight.model,
    ),
    CorpusKernel(
        name="runtime_column_slabs",
        mlir=spmd_column_slabs.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _f32(rng, (11, NC * 32)),
            _f32(rng, (3, 4, NC * 64)),
            np.zeros((11, NC * 32), np.float32),
            np.zeros((3, 4, NC * 32), np.float32),
        ],
        reference=lambda ins: [
            ins[0] * 2 + 1,
            ins[1].reshape(3, 4, NC, 64)[..., 16:48].reshape(3, 4, NC * 32) - 1,
        ],
        outputs=(2, 3),
        model=spmd_column_slabs.model,
    ),
    CorpusKernel(
        name="runtime_broadcast_middle",
        mlir=broadcast_middle.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _f32(rng, (7, 2, 32)),
            _f32(rng, (7, 1, 32)),
            np.zeros((7, 2, 32), np.float32),
        ],
        reference=lambda ins: [ins[0] - ins[1]],
        outputs=(2,),
        model=broadcast_middle.model,
    ),
    CorpusKernel(
        name="runtime_row_partials",
        mlir=row_partials.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _f32(rng, (11, NC * 32)),
            np.zeros((NC, 16, 32), np.float32),
            np.zeros((11, 32), np.float32),
        ],
        reference=_row_partials_ref,
        outputs=(1, 2),
        model=row_partials.model,
    ),
    CorpusKernel(
        name="spmd_core_id_matmul",
        mlir=spmd_matmul.to_mlir(debuginfo=False),
        make_args=lambda rng: [
            _bf16(rng, (NC * R, 256)),
            _bf16(rng, (256, 128)),
            np.zeros((NC * R, 128), BF),
        ],
        reference=lambda ins: [_mm(ins[0], ins[1])],
        outputs=(2,),
        model=spmd_matmul.model,
    ),
    CorpusKernel(
        name="spmd_barrier_exchange",
        mlir=spmd_exchange.to_mlir(debuginfo=False),
        make_args=lambda rng: [_f32(rng, (NC * R, 64)), np.zeros((NC * R, 64), np.float32)],
        reference=lambda ins: [torch.roll(torch.exp(ins[0]), -R, 0) + 1],
        outputs=(1,),
        model=spmd_exchange.model,
    ),
    CorpusKernel(
        name="core_to_core_semaphore",
        mlir=core_to_core.to_mlir(debuginfo=False),
        make_args=lambda rng: [_f32(rng, (R, 64)), np.zeros((R, 64), np.float32)],
        reference=lambda ins: [ins[0] * ins[0] + 1],
        outputs=(1,),
        model=core_to_core.model,
    ),
    CorpusKernel(
        name="core_to_core_shared_semaphore",
        mlir=sem_handoff.to_mlir(debuginfo=False),
        make_args=lambda rng: [_f32(rng, (R, 64)), np.zeros((R, 64), np.float32)],
        reference=lambda ins: [ins[0] * ins[0] + 1],
        outputs=(1,),
        model=sem_handoff.model,
    ),
    CorpusKernel(
        name="spmd_ring_request_load",
        mlir=spmd_ring.to_mlir(debuginfo=False),
        make_args=lambda rng: [_f32(rng, (NC * R, 64)), np.zeros((NC * R, 64), np.float32)],
        reference=lambda ins: [
            ins[0] + torch.roll(ins[0] * 2, R, 0) - torch.roll(ins[0] * 2, 2 * R, 0) * 0.5
        ],
        outputs=(1,),
        model=spmd_ring.model,
    ),
    CorpusKernel(
        name="spmd_stream_credits",
        mlir=spmd_stream.to_mlir(debuginfo=False),
        make_args=lambda rng: [_f32(rng, (NC * R, 64 * S)), np.zeros((NC * R, 64), np.float32)],
        reference=lambda ins: [_spmd_stream_ref(ins[0])],
        outputs=(1,),
        model=spmd_stream.model,
    ),
    CorpusKernel(
        name="spmd32_silu",
        mlir=spmd32_silu.to_mlir(debuginfo=False),
        make_args=lambda rng: [_bf16(rng, (128, 64)), np.zeros((128, 64), BF)],
        reference=lambda ins: [torch.nn.functional.silu(ins[0].float()).bfloat16()],
        outputs=(1,),
        model=spmd32_silu.model,
    ),
]
