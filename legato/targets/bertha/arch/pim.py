"""PIM (processing in memory): the fixed parameters of ../shared/DESIGN.md section 5, the PIM
weight layout the compiler chooses, the operand rules of `pim.gemv` and its numerics, shared
by the emulator and every interpreter (docs/pim.md).

A chip built with `use_pim=True` has one PIM unit per memory channel, next to the banks. The
unit of channel c reads channel c's own bytes at `PIM_BYTES_PER_CYCLE` (4x the channel's
external 64 B/cycle), multiplies bf16 with fp32 accumulation at `PIM_MACS_PER_CYCLE`, and
computes `y += x @ W` over the columns of W stored in its channel. x (at most
`PIM_X_BYTES`) goes into the unit's input buffer and the fp32 result (at most `PIM_Y_BYTES`)
comes back, each by a DMA over the issuing core's port and that channel. An operation costs
the DRAM latency plus its weight bytes at `PIM_BYTES_PER_CYCLE` (`op_cycles`); while it runs,
ordinary accesses to that channel wait.

**The PIM layout** (`PimLayout`). Shared DRAM is interleaved over the channels every 256 bytes
(`timing.DRAM_INTERLEAVE_BYTES`): block b of an allocation whose base is aligned to one
interleave period (256 * channels) is in channel b % channels. A unit reads a *region*: a
logical byte stream whose i-th 256-byte block is at `start + i * 256 * channels` (so every
block is in the channel of `start`). A region of a `[K, N]` tile holds the tile's transpose
`[N, K]` bf16 row-major (column n of W is K contiguous elements of the stream), zero-padded to
whole blocks. A weight `W[K, N]` in PIM layout is split into column *slabs* (channel c owns
columns `[c * n_unit, (c + 1) * n_unit)`, `n_unit = ceil(N / channels)`; the padding columns
past N are zero) and tiles of at most `K_TILE` rows (x fits the input buffer) by at most
`N_TILE` columns per unit (y fits the output buffer). Tile (kt, nt) of every channel is one
group of `blocks * channels` blocks, the channels' streams interleaved block by block; the
groups follow each other, nt-major then kt. So the unit of channel c runs, for each nt, one
`pim.gemv` per kt (the first without `acc`), and its results are the contiguous columns it
owns: the fp32 y of the whole GEMV is the concatenation of the units' results.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from legato import numerics
from legato.errors import LegatoValueError
from legato.targets.bertha import timing
from legato.targets.bertha.arch.address_map import classify
from legato.targets.bertha.arch.errors import Trap

PIM_BYTES_PER_CYCLE = timing.PIM_BYTES_PER_CYCLE
"""A unit reads its channel's banks at 256 B/cycle (DESIGN section 5, fixed)."""
PIM_MACS_PER_CYCLE = 128
"""bf16 multiply, fp32 accumulate (DESIGN section 5, fixed): 128 MAC = 256 B of bf16 weight."""
PIM_X_BYTES = 8 * 1024
"""The unit's input buffer: x of at most 8 KiB (4096 bf16)."""
PIM_Y_BYTES = 8 * 1024
"""The unit's result buffer: at most 8 KiB of fp32 (2048 columns)."""
BLOCK = 256
"""Shared DRAM's interleave granule (`timing.DRAM_INTERLEAVE_BYTES`)."""
K_TILE = PIM_X_BYTES // 2
N_TILE = PIM_Y_BYTES // 4
ACC = 1
"""`pim.gemv`'s imm32 bit 0: add the result into the f32 destination."""

_BF16 = np.dtype(ml_dtypes.bfloat16)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def op_cycles(model, k: int, n: int) -> int:
    """The cycles the unit computes a `[k] @ [k, n]` GEMV (DESIGN: the DRAM latency plus the
    weight's bytes at 256 B/cycle; the channel is busy for all of them)."""
    return model.dram_latency_cycles + ceil_div(k * n * 2, PIM_BYTES_PER_CYCLE)


def channel_of(model, address: int) -> int:
    """The memory channel holding the shared-DRAM byte at `address`."""
    return (address // BLOCK) % model.num_memory_channels


def region_blocks(k: int, n: int) -> int:
    """256-byte blocks of one unit's region of a `[k, n]` tile (its `[n, k]` bf16 stream)."""
    return ceil_div(k * n * 2, BLOCK)


def region_span(model, k: int, n: int) -> int:
    """Bytes from a region's first block to one past its last (what the unit may touch)."""
    blocks = region_blocks(k, n)
    return (blocks - 1) * BLOCK * model.num_memory_channels + BLOCK if blocks else 0


def check_gemv(model, w: int, k: int, n: int) -> None:
    """The operands of `pim.gemv` on `model`: a chip with PIM, 1 <= k <= K_TILE (x fits the
    input buffer), 1 <= n <= N_TILE (y fits the result buffer), a region starting on a
    256-byte block of shared DRAM. `Trap` otherwise."""
    if not model.use_pim:
        raise Trap(
            f"pim.gemv on {model.name} built without PIM (use_pim=False): the chip has no PIM units"
        )
    if not 1 <= k <= K_TILE:
        raise Trap(f"pim.gemv: K = {k} outside 1..{K_TILE} (x is at most {PIM_X_BYTES} bytes)")
    if not 1 <= n <= N_TILE:
        raise Trap(
            f"pim.gemv: N = {n} outside 1..{N_TILE} (the fp32 result is at most "
            f"{PIM_Y_BYTES} bytes)"
        )
    if classify(w)[0] != "shared":
        raise Trap("pim.gemv: the weight region must be in shared DRAM", w)
    if w % BLOCK:
        raise Trap(f"pim.gemv: the weight region must start on a {BLOCK}-byte block", w)


def region_rows(model, w: int, k: int, n: int) -> list[tuple[int, int]]:
    """(address, bytes) of each block of the region at `w` of a `[k, n]` tile, in stream order."""
    step = BLOCK * model.num_memory_channels
    return [(w + i * step, BLOCK) for i in range(region_blocks(k, n))]


def read_region(model, read, w: int, k: int, n: int) -> np.ndarray:
    """The `[n, k]` bf16 tile (W's columns as rows) of the region at `w`; `read(addr, nbytes)`
    returns a uint8 array of memory."""
    blocks = region_blocks(k, n)
    step = BLOCK * model.num_memory_channels
    span = read(w, region_span(model, k, n))
    stream = np.lib.stride_tricks.as_strided(span, (blocks, BLOCK), (step, 1))
    flat = np.ascontiguousarray(stream).reshape(-1)[: k * n * 2]
    return flat.view(_BF16).reshape(n, k)


def gemv(x: np.ndarray, wt: np.ndarray, acc: np.ndarray | None) -> np.ndarray:
    """fp32 `[n]` = (acc +) x @ wt.T with the MPU's numerics (exact dot products rounded once to
    fp32 per K chunk of `numerics.MPU_TILE_K`, chunks added in fp32 in order: DESIGN section 5),
    `x` bf16 `[k]`, `wt` bf16 `[n, k]` (a region's tile)."""
    a = np.asarray(x, dtype=_BF16).reshape(1, -1)
    init = None if acc is None else np.asarray(acc, np.float32).reshape(1, -1)
    return numerics.matmul_acc(a, np.asarray(wt, dtype=_BF16).T, init).reshape(-1)


@dataclass(frozen=True)
class PimLayout:
    """Where every tile of `W[k, n]` lies in its PIM-layout buffer on a chip of `channels`
    memory channels (module docstring). Offsets are bytes from the buffer's base, which must be
    aligned to `BLOCK * channels` (channel c's region of a tile starts at `offset + c *
    BLOCK`)."""

    k: int
    n: int
    channels: int

    @property
    def n_unit(self) -> int:
        """Columns each channel's unit owns (the last ones past `n` are zero padding)."""
        return ceil_div(self.n, self.channels)

    def k_tiles(self) -> list[tuple[int, int]]:
        """(k0, k1) of each K tile, in order."""
        return [(k0, min(self.k, k0 + K_TILE)) for k0 in range(0, self.k, K_TILE)]

    def n_tiles(self) -> list[tuple[int, int]]:
        """(j0, j1) of each tile of a unit's own columns (j indexes its `n_unit` columns)."""
        return [(j0, min(self.n_unit, j0 + N_TILE)) for j0 in range(0, self.n_unit, N_TILE)]

    def tiles(self) -> list[tuple[int, int, int, int, int]]:
        """(offset, k0, k1, j0, j1) of every tile group, nt-major then kt, in buffer order."""
        out, off = [], 0
        for j0, j1 in self.n_tiles():
            for k0, k1 in self.k_tiles():
                out.append((off, k0, k1, j0, j1))
                off += region_blocks(k1 - k0, j1 - j0) * BLOCK * self.channels
        return out

    @property
    def nbytes(self) -> int:
        """The buffer's size."""
        return sum(
            region_blocks(k1 - k0, j1 - j0) * BLOCK * self.channels
            for _, k0, k1, j0, j1 in self.tiles()
        )

    def pack(self, w: np.ndarray) -> np.ndarray:
        """The PIM-layout bytes (uint8 `[nbytes]`) of bf16 `w[k, n]`."""
        w = np.asarray(w, dtype=_BF16)
        if w.shape != (self.k, self.n):
            raise ValueError(f"PIM layout of [{self.k}, {self.n}] given a {list(w.shape)} weight")
        ch, nu = self.channels, self.n_unit
        padded = np.zeros((self.k, ch * nu), _BF16)
        padded[:, : self.n] = w
        out = np.zeros(self.nbytes, np.uint8)
        for off, k0, k1, j0, j1 in self.tiles():
            blocks = region_blocks(k1 - k0, j1 - j0)
            group = np.zeros((blocks, ch, BLOCK), np.uint8)
            for c in range(ch):
                cols = padded[k0:k1, c * nu + j0 : c * nu + j1]
                stream = np.zeros(blocks * BLOCK, np.uint8)
                raw = np.ascontiguousarray(cols.T).view(np.uint8).reshape(-1)
                stream[: raw.size] = raw
                group[:, c, :] = stream.reshape(blocks, BLOCK)
            out[off : off + group.size] = group.reshape(-1)
        return out

    def operations(self) -> list[tuple[int, int, int, int, int, int]]:
        """(region offset, channel, k0, k1, j0, j1) of every `pim.gemv` of the whole product,
        in the order a program issues them (tile by tile, the channels of a tile together;
        K tiles after the first accumulate). A channel whose columns are all padding (past
        n) has none."""
        out = []
        for off, k0, k1, j0, j1 in self.tiles():
            for c in range(self.channels):
                if c * self.n_unit + j0 < self.n:
                    out.append((off + c * BLOCK, c, k0, k1, j0, j1))
        return out


def matvec(model, read, x: np.ndarray, w: int, k: int, n: int, out: np.ndarray) -> None:
    """`out[: channels * n_unit]` (fp32) = x[k] @ W[k, n], W's PIM-layout buffer at address `w`,
    as the `pim.gemv`s of `PimLayout.operations` compute it (what `core.pim_gemv` lowers to):
    the columns of a channel whose columns are all padding are left as they were."""
    layout = PimLayout(k, n, model.num_memory_channels)
    for off, c, k0, k1, j0, j1 in layout.operations():
        cols = slice(c * layout.n_unit + j0, c * layout.n_unit + j1)
        wt = read_region(model, read, w + off, k1 - k0, j1 - j0)
        out[cols] = gemv(x[k0:k1], wt, out[cols] if k0 else None)


def pack_argument(model, arr: np.ndarray, name: str) -> np.ndarray:
    """The bytes (uint8) a kernel argument in `pim_dram` is mapped as: the bf16 `[K, N]` value
    `arr` in the PIM layout of `model`'s channels (the runtime and the interpreters lay it out
    when they map the argument, so a caller passes the weight as it is)."""
    if not model.use_pim:
        raise LegatoValueError(
            f"{name} is in pim_dram, but {model.name} has no PIM units (use_pim=False)"
        )
    arr = np.asarray(arr)
    if arr.ndim != 2 or arr.dtype != _BF16:
        raise LegatoValueError(
            f"{name} is in pim_dram: a 2-D bf16 weight, got {arr.dtype} {list(arr.shape)}"
        )
    return PimLayout(arr.shape[0], arr.shape[1], model.num_memory_channels).pack(arr)
