"""GEMV decode on the PIM units (docs/pim.md): `y[N] = x[K] @ W[K, N]`, W in shared DRAM in the
PIM layout (`legato.targets.bertha.arch.pim.PimLayout`), as a program of Bertha assembly.

Each of `cores` cores drives the PIM units of its channels (core j: channels j, j + cores, ...):
it brings x into its sram, runs one `pim.gemv` per tile of each of its channels (K tiles after
the first accumulate), then copies the fp32 columns its channels own to y. The program is
written for the chip, as `bench/kernels.py`'s kernels are, but in assembly: it is the ISA
extension's own benchmark and the reference the language's lowering is measured against.
"""

from __future__ import annotations

import numpy as np

from legato.targets.bertha.abi import Arg, ArgLayout
from legato.targets.bertha.arch import pim
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import write_elf
from legato.targets.bertha.runtime import run_binary
from legato.types import TensorSpec, bf16, f32


def _align(n: int, a: int = 4096) -> int:
    return -(-n // a) * a


def gemv_asm(model, k: int, n: int, cores: int | None = None) -> str:
    """The assembly of `y[n] = x[k] @ W[k, n]` (arguments x bf16 [k], W's PIM-layout bytes as
    bf16 [nbytes / 2], y f32 [n], in that order) on `cores` cores of `model` (default: one per
    channel, at most the chip's cores)."""
    layout = pim.PimLayout(k, n, model.num_memory_channels)
    ch = layout.channels
    cores = min(ch, model.num_cores) if cores is None else cores
    y_off = _align(k * 2)
    out = [".kernel pim_gemv"]
    for j in range(cores):
        mine = list(range(j, ch, cores))
        if not mine:
            continue
        out += [
            f".program c{j} on core({j})",
            "    ld r3, 8(r1)",
            "    ld r4, 16(r1)",
            "    ld r5, 24(r1)",
            "    lsa r6, sram, 0",
            f"    li r7, {k * 2}",
            "    dma r6, r3, r7",
            "    dmawait",
        ]
        for off, k0, k1, j0, j1 in layout.tiles():
            for i, c in enumerate(mine):
                out += [
                    f"    li r9, {off + c * pim.BLOCK}",
                    "    add r9, r4, r9",
                    f"    lsa r11, sram, {y_off + (i * layout.n_unit + j0) * 4}",
                    f"    lsa r12, sram, {k0 * 2}",
                    f"    li r8, {j1 - j0}",
                    f"    lih r8, {k1 - k0}",
                    "    pim.gemv r11, r12, r9, r8" + (", acc" if k0 else ""),
                ]
        out.append("    dmawait")
        for i, c in enumerate(mine):
            n0, n1 = c * layout.n_unit, min(n, (c + 1) * layout.n_unit)
            if n1 <= n0:
                continue
            out += [
                f"    lsa r11, sram, {y_off + i * layout.n_unit * 4}",
                f"    li r9, {n0 * 4}",
                "    add r9, r5, r9",
                f"    li r7, {(n1 - n0) * 4}",
                "    dma r9, r11, r7",
            ]
        out += ["    dmawait", "    halt"]
    return "\n".join(out) + "\n"


def gemv_binary(model, k: int, n: int, cores: int | None = None) -> bytes:
    """The binary of `gemv_asm` for `model`."""
    layout = pim.PimLayout(k, n, model.num_memory_channels)
    args = ArgLayout(
        [
            Arg("x", TensorSpec.make(bf16, [k], "shared_dram"), "read"),
            Arg("w", TensorSpec.make(bf16, [layout.nbytes // 2], "shared_dram"), "read"),
            Arg("y", TensorSpec.make(f32, [n], "shared_dram"), "write"),
        ]
    )
    return write_elf(assemble(gemv_asm(model, k, n, cores)), model, args)


def run_gemv(model, x: np.ndarray, w: np.ndarray, cores: int | None = None, **kw):
    """(y, RunResult) of x[k] @ w[k, n] (bf16) on `model`'s PIM units; `kw` go to
    `run_binary`."""
    k, n = w.shape
    layout = pim.PimLayout(k, n, model.num_memory_channels)
    packed = layout.pack(w).view(pim._BF16)
    y = np.zeros(n, np.float32)
    res = run_binary(gemv_binary(model, k, n, cores), model, [x, packed, y], **kw)
    return y, res
