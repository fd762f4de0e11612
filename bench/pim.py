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

import legato
from legato.targets.bertha.abi import Arg, ArgLayout
from legato.targets.bertha.arch import pim
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import write_elf
from legato.targets.bertha.runtime import run_binary
from legato.types import TensorSpec, bf16, f32

BF16 = legato.types.float("bfloat16")


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


# ---- the language's form (docs/pim.md): `x @ w` with w in pim_dram -------------------------
def make_pim_gemv(k: int, n: int, name: str = "pim_gemv"):
    """The Legato kernel `out[1, n] = x[1, k] @ w[k, n]` (bf16 out, fp32 accumulation) with the
    weight in `pim_dram`: the compiler runs it on the PIM units of core 0's chip (one core
    issues every unit's operation)."""

    def fn(
        x: legato.get_model().tensor_type(BF16, [1, k], "shared_dram"),
        w: legato.get_model().tensor_type(BF16, [k, n], "pim_dram"),
        out: legato.get_model().tensor_type(BF16, [1, n], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        # (k and n appear here so that they are closure variables: the annotations are strings
        # under `from __future__ import annotations`, evaluated in the closure's scope)
        assert x.shape[1] == k and out.shape[1] == n
        with device.get_core(0):
            legato.tensor.memcpy(out, legato.tensor.load(x, "sram") @ w)

    fn.__name__ = fn.__qualname__ = name
    return fn


def bench_rows(k: int = 4096, n: int = 4096) -> list[dict]:
    """One row per PIM chip (`bertha-pim`, `bertha-evt1-pim`): the language's PIM GEMV (and
    the assembly one) against the PIM-aware roofline, and the speed-up over `bench/kernels.py`'s
    GEMV (the MPU streaming the weight over the external channels, its tuned tile choice of the
    chip without PIM) run on the same chip; `ext_bound` is that GEMV's DRAM roofline (its bytes
    at the external bandwidth), so `max_without_pim` = its cycles / ext_bound is the most any
    kernel moving the weight over the channels could gain."""
    import torch

    from bench.kernels import GEMV_SPACE
    from legato.model import bertha

    rows = []
    for plain, factory in ((bertha.evt0, bertha.evt0_pim), (bertha.evt1, bertha.evt1_pim)):
        model = factory()
        bk = GEMV_SPACE.build(model, **GEMV_SPACE.choice(plain()))
        gen = torch.Generator().manual_seed(0)
        np_args = [
            a.view(torch.int16).numpy().view(pim._BF16) if a.dtype == torch.bfloat16 else a.numpy()
            for a in bk.make_args(torch, gen)
        ]
        mpu = legato.compile(backend=factory)(bk.fn)
        mpu(*np_args)
        base = mpu.last_run
        gen = torch.Generator().manual_seed(0)  # the same x and W as make_args
        x = torch.randn(1, k, generator=gen).bfloat16().view(torch.int16).numpy().view(pim._BF16)
        w = (torch.randn(k, n, generator=gen) / 64).bfloat16()
        w = w.view(torch.int16).numpy().view(pim._BF16)
        kernel = legato.compile(backend=factory)(make_pim_gemv(k, n))
        out = np.zeros((1, n), pim._BF16)
        kernel(x, w, out)
        lang = kernel.last_run
        same = out.view(np.uint16).tolist() == np_args[2].view(np.uint16).tolist()
        _, asm = run_gemv(model, x[0], w, trace=False)
        ext_bound = base.roofline_cycles
        rows.append(
            dict(
                chip=model.name + "-pim",
                cycles=lang.cycles,
                roofline=lang.roofline_cycles,
                efficiency=lang.efficiency,
                asm_cycles=asm.cycles,
                asm_efficiency=asm.efficiency,
                mpu_cycles=base.cycles,
                speedup=base.cycles / lang.cycles,
                max_without_pim=base.cycles / ext_bound,
                bits_equal=same,
                pim_bytes=lang.pim_bytes,
                dram_bytes=lang.dram_bytes,
            )
        )
    return rows


def _numpy(t):
    import torch

    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(pim._BF16).copy()
    return t.numpy().copy()


def decoder_rows() -> list[dict]:
    """One row per PIM chip: the Llama-7B decoder layer in decode (`bench/decoder.py`, ctx
    1024) with its four projections on the PIM units (`pim=True`) against the PIM-aware
    roofline, its largest error against torch, and the speed-up over the same layer streaming
    its weights through the MPU (`pim=False`, the tuned attention split of the chip without
    PIM) on the same chip."""
    import torch

    from bench.decoder import make_decoder_layer
    from bench.kernels import DECODER_SPACE
    from legato.model import bertha

    rows = []
    for plain, factory in ((bertha.evt0, bertha.evt0_pim), (bertha.evt1, bertha.evt1_pim)):
        model = factory()
        split = DECODER_SPACE.choice(plain())["attn_split"]
        runs = {}
        for use in (False, True):
            bk = make_decoder_layer(
                4096,
                32,
                11008,
                1024,
                "decoder_layer_7b_ctx1024" + ("_pim" if use else ""),
                attn_split=split,
                pim=use,
            ).specialize(model)
            targs = bk.make_args(torch, torch.Generator().manual_seed(0))
            args = [_numpy(t) for t in targs]
            kernel = legato.compile(backend=factory)(bk.fn)
            kernel(*args)
            want = bk.reference(torch, targs)[0].float().numpy()
            err = float(np.abs(args[11].astype(np.float32) - want).max())
            runs[use] = (kernel.last_run, err)
        (base, base_err), (res, err) = runs[False], runs[True]
        rows.append(
            dict(
                chip=model.name + "-pim",
                cycles=res.cycles,
                roofline=res.roofline_cycles,
                efficiency=res.efficiency,
                mpu_cycles=base.cycles,
                speedup=base.cycles / res.cycles,
                max_without_pim=base.cycles / base.roofline_cycles,
                max_err=err,
                base_max_err=base_err,
                pim_bytes=res.pim_bytes,
                dram_bytes=res.dram_bytes,
            )
        )
    return rows


if __name__ == "__main__":
    import sys

    for row in decoder_rows() if "--decoder" in sys.argv else bench_rows():
        print(row)
