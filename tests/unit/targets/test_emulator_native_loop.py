"""The compiled scheduler loop (native/loop.c, `Emulator.native_loop`, issue 15) against the
Python loop it replaces (`Emulator._run`, `native_loop = False`): on every corpus kernel, both
chip generations, and the chip-scale bench kernels, the same output bits, cycles, module
cycles, per-unit and per-port busy time, DRAM bytes per channel, instruction counts and trace
events (tracing on), the same error when a run fails, and the same final state of every module
(version, registers, pc, issue time), on which the heap's tie order depends. Scalar programs
with traps and bounds check that the loop hands them back at the same instruction."""

import json
import os
import re

import numpy as np
import pytest

from legato.compiler import compile_kernel
from legato.interp.differential import parse_module
from legato.model import bertha
from legato.targets.bertha import emulator, native
from legato.targets.bertha.elf import read_elf
from legato.targets.bertha.runtime import load_binary, run_binary
from tests.corpus.kernels import CORPUS

pytestmark = pytest.mark.skipif(
    not native.ENABLED, reason="the compiled helpers are not built (scripts/bootstrap.sh)"
)


def _tile(w) -> tuple | None:
    """A module's last weight tile: its bits and the proof's column statistics."""
    if w is None:
        return None
    stats = (np.asarray(w.cm).tobytes(), np.asarray(w.v).tobytes(), np.float64(w.vmax).tobytes())
    stats += (w.finite,)
    return (w.shape, np.ascontiguousarray(w.values).tobytes()) + stats


def _outcome(binary, model, args, native_loop: bool, monkeypatch, trace: bool) -> tuple:
    """(the run's report or its error, every argument's bytes after it, every module's final
    (version, registers, pc, time, count, halt, weight tile)) of one run on copies of `args`."""
    monkeypatch.setattr(emulator.Emulator, "native_loop", native_loop)
    seen = {}
    result = emulator.Emulator._result

    def final(self):
        seen["modules"] = [
            (m.version, list(m.regs), m.pc, m.time, m.count, m.halted, _tile(m.weight))
            for m in self.modules
        ]
        return result(self)

    monkeypatch.setattr(emulator.Emulator, "_result", final)
    args = [a.copy() if hasattr(a, "copy") else a for a in args]
    try:
        # (hazards off: tests/unit's conftest turns the checker on, which runs the Python loop)
        r = run_binary(binary, model, args, trace=trace, hazards=False)
        report = (
            r.cycles,
            r.module_cycles,
            r.unit_busy,
            r.port_busy,
            r.dram_bytes_per_channel,
            r.instructions,
            r.mac_count,
            r.vpu_element_ops,
            json.dumps(r.trace_events, sort_keys=True),
        )
    except Exception as e:  # the same error, raised at the same place
        report = (type(e).__name__, str(e))
    outs = [np.ascontiguousarray(a).view(np.uint8).tobytes() for a in args if hasattr(a, "view")]
    return report, outs, seen.get("modules")


def _compare(binary, model, args, monkeypatch, trace: bool) -> tuple:
    ref = _outcome(binary, model, args, False, monkeypatch, trace)
    fast = _outcome(binary, model, args, True, monkeypatch, trace)
    assert fast[0] == ref[0]
    assert fast[1] == ref[1]
    assert fast[2] == ref[2]
    return ref


CASES = [
    (k.name, gen) for k in CORPUS for gen in ("evt0", "evt1") if k.model is None or gen == "evt0"
]


# traced, the VPU instructions are the Python's (their events): the sync-heavy kernels run
# both ways, the rest untraced (the loop runs the VPU too)
TRACED = {
    "gemm_forwarded_slabs",
    "gemm_spmd_all_to_all",
    "decoder_layer_tiny",
    "rmsnorm_rows_multicore",
}


@pytest.mark.parametrize(
    "name,gen,trace",
    [(n, g, False) for n, g in CASES] + [(n, g, True) for n, g in CASES if n in TRACED],
)
def test_native_loop_matches_the_python_loop_on_the_corpus(name, gen, trace, monkeypatch):
    kernel = next(k for k in CORPUS if k.name == name)
    model = getattr(bertha, gen)() if kernel.model is None else kernel.get_model()
    try:
        art = compile_kernel(parse_module(kernel.mlir, kernel.name), model)
    except Exception:
        pytest.skip("does not compile for this model (the corpus's own tests say why)")
    args = kernel.make_args(np.random.default_rng(kernel.seed))
    _compare(art.binary, model, args, monkeypatch, trace)


SLOW = os.environ.get("LEGATO_SLOW_TESTS") == "1"
BENCH = [
    ("rmsnorm_32x4096", True),
    ("softmax_32x4096", True),
    ("gemv_1x4096x4096", True),
    ("decoder_layer_7b_ctx1024", SLOW),
    ("gemm_512x4096x4096", SLOW),
]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=() if run else pytest.mark.skip("LEGATO_SLOW_TESTS=1 runs it"))
        for n, run in BENCH
    ],
)
@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
@pytest.mark.parametrize("trace", [False, True])
def test_native_loop_matches_the_python_loop_on_the_bench_kernels(name, target, trace, monkeypatch):
    from bench.emu_speed import bench_binary

    model, binary, args = bench_binary(name, target)
    report = _compare(binary, model, args, monkeypatch, trace)[0]
    assert isinstance(report[0], int)  # the run completed


SCALARS = """
.program top on top
    li r3, 0
    li r4, {n}
L:
    addi r3, r3, 1
    xor r5, r5, r3
    blt r3, r4, L
    {tail}
    halt
"""


@pytest.mark.parametrize(
    "tail,limits",
    [
        ("nop", {}),
        ("div r6, r3, r0", {}),  # a trap in scalar code: the Python raises it
        ("li r7, 99\n    lsa r8, core(r7).sram, 0", {}),  # a core index out of range
        ("nop", {"instruction_limit": 1000}),  # a bound inside the loop's scalar code
        ("nop", {"cycle_limit": 777}),
    ],
)
def test_native_loop_hands_scalar_code_back_at_the_same_instruction(tail, limits, monkeypatch):
    from bertha_helpers import build, small_model

    model = small_model()
    try:
        binary = build(SCALARS.format(n=2000, tail=tail), model=model)
    except Exception as e:  # (an assembler that refuses the form: nothing to compare)
        pytest.skip(f"does not assemble: {e}")

    def state(native_loop):
        monkeypatch.setattr(emulator.Emulator, "native_loop", native_loop)
        emu = emulator.Emulator(load_binary(binary, model), model, **limits)
        try:
            r = emu.run()
            out = (r.cycles, r.instructions)
        except emulator.EmulatorError as e:
            out = (type(e).__name__, str(e))
        return out, [(list(m.regs), m.time, m.pc, m.count, m.version) for m in emu.modules]

    assert state(True) == state(False)


STORES = """
.program top on top
    halt
.program p on core(0)
    lsa r4, sram, 0
    li r3, 0
    li r5, 100000
L:
    addi r3, r3, 1
    st r3, 0(r4)
    blt r3, r5, L
    halt
"""


@pytest.mark.parametrize("limit", [1000, 1001, 1002])
def test_a_bound_crossed_in_a_python_step_leaves_the_same_state(limit, monkeypatch):
    """The instruction bound stops the run in the loop's scalar code or right after an `st`
    (the loop's since the ninth round, the Python's before), whichever the count reaches it
    in: the same message, and every module's registers, time, pc and count as the Python
    loop leaves them."""
    from bertha_helpers import build, small_model

    model = small_model()
    binary = build(STORES, model=model)

    def state(native_loop):
        monkeypatch.setattr(emulator.Emulator, "native_loop", native_loop)
        emu = emulator.Emulator(load_binary(binary, model), model, instruction_limit=limit)
        with pytest.raises(emulator.InstructionLimitError) as e:
            emu.run()
        return str(e.value), [(list(m.regs), m.time, m.pc, m.count) for m in emu.modules]

    assert state(True) == state(False)


# DMAs the loop plans and lands itself (native/loop.c's `dma_plan`, `dma_issue`, `land_do`):
# more transfers than a port has slots, a dma2d whose rows overlap its own source, copies back
# out, a notify to another core's queue while a third core waits on a semaphore (a waiter
# whose plan is the Python's: `LP_WAKE`), an empty transfer and a dma2d from shared DRAM.
DMAS = """
.program top on top
    halt
.program c0 on core(0)
    ld r3, 8(r1)
    ld r10, 16(r1)
    lsa r4, sram, 0
    li r5, 4096
    li r7, 0
    li r11, 256
L:
    add r8, r4, r7
    add r9, r3, r7
    dma r8, r9, r11
    addi r7, r7, 256
    blt r7, r5, L
    dmawait
    li r12, {rows}
    shli r12, r12, 32
    addi r12, r12, {row}
    li r13, {dstride}
    shli r13, r13, 32
    addi r13, r13, {sstride}
    addi r14, r4, {dst_off}
    dma2d r14, r4, r12, r13
    dmawait
    dma r10, r4, r5, core1.sram.q0
    li r15, 0
    dma r10, r4, r15
    addi r16, r10, 4096
    dma2d r16, r3, r12, r13, core1.sram.q1
    dmawait
    sem.post 2, 1
    halt
.program c1 on core(1)
    qwait sram.q0
    qwait sram.q1
    halt
.program c2 on core(2)
    sem.wait 2, 1
    halt
"""


@pytest.mark.parametrize(
    "rows,row,dstride,sstride,dst_off",
    [
        (8, 128, 256, 256, 64),  # rows overlapping the source, shifted by less than a row
        (16, 64, 64, 128, 32),  # contiguous destination from a strided source
        (4, 256, 256, 256, 128),  # contiguous both ends (one block)
        (3, 100, 300, 500, 0),  # onto its own first row
        (8, 64, 128, 64, 64),  # each row lands on the source's next row before it is read
    ],
)
def test_native_loop_dmas_match_the_python_loop(rows, row, dstride, sstride, dst_off, monkeypatch):
    from bertha_helpers import build, small_model, tensor

    from legato.types import i64

    model = small_model()
    src = DMAS.format(rows=rows, row=row, dstride=dstride, sstride=sstride, dst_off=dst_off)
    args = [tensor("x", i64, [1024]), tensor("out", i64, [2048], "write")]
    binary = build(src, args, model)
    x = np.random.default_rng(1).integers(-(2**62), 2**62, 1024, dtype=np.int64)
    report = _compare(binary, model, [x, np.zeros(2048, np.int64)], monkeypatch, False)[0]
    assert isinstance(report[0], int)  # the run completed


def test_native_loop_dma_faults_match_the_python_loop(monkeypatch):
    """A DMA into a read-only argument, and one past its end, fault as in the Python loop."""
    from bertha_helpers import build, small_model, tensor

    from legato.types import i64

    model = small_model()
    args = [tensor("x", i64, [64]), tensor("out", i64, [64], "write")]
    for body in ("dma r3, r4, r5", "dma r10, r4, r6"):
        src = f"""
.program top on top
    halt
.program c0 on core(0)
    ld r3, 8(r1)
    ld r10, 16(r1)
    lsa r4, sram, 0
    li r5, 512
    li r6, 1024
    {body}
    dmawait
    halt
"""
        binary = build(src, args, model)
        x = np.arange(64, dtype=np.int64)
        report = _compare(binary, model, [x, np.zeros(64, np.int64)], monkeypatch, False)[0]
        assert report[0] == "EmulatorFault"


# mpu.ldw and mpu.mm, which the loop plans and issues itself (native/loop.c's `ldw_plan`,
# `mm_plan`, `ldw_issue`, `mm_issue`): a K tail (k not a multiple of anything), one- and
# two-row passes (`mpu_small`) and three-row ones (numpy's BLAS) to bf16 and to f32, an
# accumulate chain over two weight tiles, an empty pass (the Python's), a second tile shape,
# a pass that reads what the previous one still writes (the scoreboard), a tile the Python
# loads between two of the loop's (it issues as a DMA of the Python's lands; the passes on it
# are the Python's too), a load in flight across them, and the results copied out.
MPU = """
.program top on top
    halt
.program c0 on core(0)
    ld r3, 8(r1)            ; a [3, {k}] bf16
    ld r4, 16(r1)           ; w [{k}, {n}] bf16, then w2 [{k2}, {n2}]
    ld r5, 24(r1)           ; out
    lsa r6, sram, 0
    li r7, {a_bytes}
    dma r6, r3, r7
    lsa r8, mpu_buffer, 0
    li r9, {w_bytes}
    dma r8, r4, r9
    dmawait
    li r10, {k}
    li r11, {n}
    mpu.ldw r8, r10, r11
    lsa r12, sram, 65536    ; bf16 [1, n]
    li r13, 1
    mpu.mm r12, r6, r13, bf16
    lsa r14, sram, 131072   ; f32 [2, n] (then the chain's accumulator)
    li r15, 2
    mpu.mm r14, r6, r15, f32
    mpu.mm r14, r6, r15, f32, acc
    li r16, {w_tail}
    add r17, r8, r16
    mpu.ldw r17, r10, r11   ; the tile's second half of the buffer (another tile)
    mpu.mm r14, r6, r15, f32, acc
    lsa r18, sram, 196608   ; f32 [3, n]: three rows, the Python's BLAS
    li r19, 3
    mpu.mm r18, r6, r19, f32
    mpu.mm r14, r18, r15, f32, acc
    mpu.mm r18, r6, r0, f32
    li r20, {k2}
    li r21, {n2}
    ld r26, 8(r1)           ; (a load in flight: the loop stalls on it, `rr_stall`)
    lsa r28, private_dram, 0
    li r29, 64
    dma r28, r8, r29        ; (private_dram is lazy: the Python's DMAs and landings)
    dmawait
    dma r8, r28, r29        ; (back: the next ldw waits for it and issues as it lands, so
    mpu.ldw r8, r20, r21    ; the Python lands it and runs the ldw)
    addi r26, r26, 0        ; (waits for the load)
    lsa r22, sram, 262144
    mpu.mm r22, r6, r13, bf16
    lsa r23, sram, 270336
    mpu.mm r23, r22, r13, f32
    mpu.ldw r8, r10, r11    ; the first tile again, the loop's
    lsa r27, sram, 278528
    mpu.mm r27, r6, r19, f32
    li r24, {o1}
    dma r5, r12, r24
    dmawait
    addi r25, r5, {o1}
    li r24, {o2}
    dma r25, r14, r24
    addi r25, r25, {o2}
    li r24, {o3}
    dma r25, r18, r24
    addi r25, r25, {o3}
    li r24, {o4}
    dma r25, r22, r24
    addi r25, r25, {o4}
    li r24, {o5}
    dma r25, r23, r24
    addi r25, r25, {o5}
    li r24, {o6}
    dma r25, r27, r24
    dmawait
    halt
"""


def _mpu_data(kind: str, rng, shape) -> np.ndarray:
    """bf16 values of `kind`: normal ones; ones over a wide exponent range (rows the proof
    checks element by element, and ties it cannot settle: the exact path); with infinities,
    NaNs and signed zeros."""
    import ml_dtypes

    x = rng.standard_normal(shape)
    if kind == "wide":
        x = x * np.exp2(rng.integers(-60, 60, shape))
    elif kind == "special":
        flat = x.reshape(-1)
        idx = rng.choice(flat.size, 12, replace=False)
        flat[idx[:3]], flat[idx[3:6]], flat[idx[6:9]] = np.inf, -np.inf, np.nan
        flat[idx[9:]] = -0.0
    elif kind == "cancel":  # exact sums of opposite terms, round-to-nearest ties
        x = np.round(x * 4) / 4
        x[..., 1::2] = -x[..., ::2][..., : x[..., 1::2].shape[-1]]
    return x.astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("gen", ["bertha", "bertha-evt1"])
@pytest.mark.parametrize("kind", ["normal", "wide", "special", "cancel"])
@pytest.mark.parametrize("k,n,k2,n2", [(200, 72, 256, 128), (256, 128, 13, 5)])
def test_native_loop_mpu_passes_match_the_python_loop(gen, kind, k, n, k2, n2, monkeypatch):
    from bertha_helpers import build, small_model, tensor

    from legato.types import bf16

    model = small_model(gen)
    rng = np.random.default_rng(hash((kind, k, n)) % 2**32)
    a = _mpu_data(kind, rng, (3, max(k, k2)))[:, :k].copy()
    w = _mpu_data(kind, rng, (2 * k * n,))
    w2 = w[: k2 * n2]
    sizes = [n * 2, 2 * n * 4, 3 * n * 4, n2 * 2, n2 * 4, 3 * n * 4]
    o = dict(zip(("o1", "o2", "o3", "o4", "o5", "o6"), sizes))
    src = MPU.format(
        k=k, n=n, k2=k2, n2=n2, a_bytes=a.nbytes, w_bytes=w.nbytes, w_tail=k * n * 2, **o
    )
    # (the second tile's K exceeds a's columns when k2 > k: it reads a's next row's bytes)
    args = [
        tensor("a", bf16, [a.size]),
        tensor("w", bf16, [w.size]),
        tensor("out", bf16, [sum(sizes) // 2], "write"),
    ]
    assert w2.size <= w.size
    binary = build(src, args, model)
    values = [a.reshape(-1), w, np.zeros(sum(sizes) // 2, a.dtype)]
    report = _compare(binary, model, values, monkeypatch, False)[0]
    assert isinstance(report[0], int), report  # the run completed
    assert report[6] > 0  # (the MACs: the passes ran)


@pytest.mark.parametrize("blas,exact", [(True, True), (True, False), (False, True)])
def test_native_loop_runs_the_mpu_passes(blas, exact, monkeypatch):
    """The loop, not the Python, issues the passes above (the MACs it counts itself), but the
    empty one and those on the tile the Python loaded; a pass whose proof leaves elements to
    the exact path is the loop's too, those elements included (native/mpu.c's `mpu_settle`,
    counted in `mm_settled`), or with `Emulator.loop_settle` off but for those elements
    (`Emulator._loop_settle`). Without numpy's `cblas_dgemm` (`blas` False) the passes of
    more than two rows are the Python's."""
    from bertha_helpers import build, small_model, tensor

    from legato.types import bf16

    model = small_model()
    k, n = 200, 72
    sizes = [n * 2, 2 * n * 4, 3 * n * 4, 128 * 2, 128 * 4, 3 * n * 4]
    o = dict(zip(("o1", "o2", "o3", "o4", "o5", "o6"), sizes))
    src = MPU.format(
        k=k, n=n, k2=256, n2=128, a_bytes=3 * k * 2, w_bytes=2 * k * n * 2, w_tail=k * n * 2, **o
    )
    args = [
        tensor("a", bf16, [3 * k]),
        tensor("w", bf16, [2 * k * n]),
        tensor("out", bf16, [sum(sizes) // 2], "write"),
    ]
    binary = build(src, args, model)
    seen = {}
    restore = emulator.Emulator._loop_restore

    def spy(self, s, queues, held=-1):
        seen["macs"], seen["settled"] = s.macs, s.mm_settled
        return restore(self, s, queues, held)

    monkeypatch.setattr(emulator.Emulator, "_loop_restore", spy)
    settle = emulator.Emulator._loop_settle
    settled = []

    def spy_settle(self, m, t):
        settled.append(self._loop.mm_nt)
        return settle(self, m, t)

    monkeypatch.setattr(emulator.Emulator, "_loop_settle", spy_settle)
    monkeypatch.setattr(emulator.Emulator, "native_loop", True)
    monkeypatch.setattr(emulator.Emulator, "loop_settle", exact)
    if not blas:
        monkeypatch.setattr(emulator, "_numpy_dgemm", lambda: (native.ffi.NULL, native.ffi.NULL))
    rng = np.random.default_rng(3)
    values_dtype = _mpu_data("normal", rng, (1,)).dtype
    values = [
        _mpu_data("normal", rng, (3 * k,)),
        _mpu_data("normal", rng, (2 * k * n,)),
        np.zeros(sum(sizes) // 2, values_dtype),
    ]
    r = run_binary(binary, model, values, trace=False, hazards=False)
    # the loop's: 1 + 2 + 2 + 2 + 3 + 2 rows on the first two tiles, 3 on the last; the
    # Python's: the two one-row passes on the [256, 128] tile it loaded
    big = 3 + 3  # the two three-row passes
    assert seen["macs"] == (1 + 2 + 2 + 2 + 2 + (big if blas else 0)) * k * n
    assert r.mac_count == (1 + 2 + 2 + 2 + 2 + big) * k * n + 2 * 256 * 128
    # the chain's last pass reads the three-row pass's f32 sums as bf16: bit patterns with
    # infinities and NaNs, which the proof leaves to the exact path
    if exact:
        assert settled == [] and seen["settled"] > 0
    else:
        assert len(settled) == 1 and settled[0] > 0 and seen["settled"] == 0


# Writes onto a weight tile's bytes after its mpu.ldw, before the passes that use it: a DMA
# landing, a VPU instruction, a store, a pass into its own tile's bytes and another core's DMA
# (ordered by queue notifies). Every pass must still use the tile as its ldw read it, and the
# next ldw the new bytes; one- and three-row passes (`mpu_small` and BLAS). (The loop copies
# the tile at its ldw, `ldw_issue`. A version that read it in place and copied it out before
# any such write failed this test without the copy-out; it was dropped, as it gained nothing
# measurable on GEMV: an ldw's copy reads a tile its DMA has just landed, in the cache.)
MPU_OVERWRITE = """
.program top on top
    halt
.program c0 on core(0)
    ld r3, 8(r1)            ; a [3, 16] bf16
    ld r4, 16(r1)           ; w: three [16, 8] bf16 tiles
    ld r5, 24(r1)           ; out
    lsa r6, sram, 0
    li r7, 96
    dma r6, r3, r7
    lsa r8, mpu_buffer, 0
    li r9, 256
    dma r8, r4, r9
    dmawait
    li r10, 16
    li r11, 8
    li r13, 1
    li r19, 3
    lsa r12, sram, 4096     ; the passes' f32 outputs, one after another
    mpu.ldw r8, r10, r11
    addi r20, r4, 256
    dma r8, r20, r9         ; a DMA lands on the tile
    dmawait
    mpu.mm r12, r6, r19, f32
    mpu.ldw r8, r10, r11
    li r21, 16256
    li r22, 32
    vpu.fill r8, r22, r21, bf16
    addi r14, r12, 96
    mpu.mm r14, r6, r13, f32
    mpu.ldw r8, r10, r11
    li r23, 1073758208
    st r23, 64(r8)          ; a store into the tile
    addi r15, r12, 128
    mpu.mm r15, r6, r13, f32
    mpu.ldw r8, r10, r11
    addi r24, r8, 128
    mpu.mm r24, r6, r13, f32 ; a pass into its own tile's bytes
    addi r16, r12, 160
    mpu.mm r16, r6, r19, f32
    mpu.ldw r8, r10, r11
    addi r25, r5, 640
    li r26, 8
    dma r25, r6, r26, core1.sram.q0
    qwait sram.q1           ; core 1's DMA has landed on the tile
    addi r17, r12, 256
    mpu.mm r17, r6, r19, f32
    mpu.ldw r8, r10, r11
    addi r18, r12, 352
    mpu.mm r18, r6, r13, f32
    li r27, 384
    dma r5, r12, r27
    addi r28, r5, 384
    dma r28, r8, r9
    dmawait
    halt
.program c1 on core(1)
    qwait sram.q0
    ld r3, 16(r1)
    addi r3, r3, 512
    li r7, 0
    lsa r8, core(r7).mpu_buffer, 0
    li r9, 256
    dma r8, r3, r9, core0.sram.q1
    dmawait
    halt
"""


@pytest.mark.parametrize("gen", ["bertha", "bertha-evt1"])
def test_native_loop_tile_overwritten_after_its_ldw_matches(gen, monkeypatch):
    from bertha_helpers import build, small_model, tensor

    from legato.types import bf16

    model = small_model(gen)
    rng = np.random.default_rng(5)
    a = _mpu_data("normal", rng, (3 * 16,))
    w = _mpu_data("wide", rng, (3 * 16 * 8,))
    args = [
        tensor("a", bf16, [a.size]),
        tensor("w", bf16, [w.size]),
        tensor("out", bf16, [324], "write"),
    ]
    binary = build(MPU_OVERWRITE, args, model)
    seen = {}
    restore = emulator.Emulator._loop_restore

    def spy(self, s, queues, held=-1):
        seen["macs"] = s.macs
        return restore(self, s, queues, held)

    monkeypatch.setattr(emulator.Emulator, "_loop_restore", spy)
    report = _compare(binary, model, [a, w, np.zeros(324, a.dtype)], monkeypatch, False)[0]
    assert isinstance(report[0], int), report  # the run completed
    assert seen["macs"] == (3 + 1 + 1 + 1 + 3 + 3 + 1) * 16 * 8  # every pass the loop's


# An MPU operand that crosses its extent (`arch.bounds`): the tile of an `mpu.ldw` past its
# mpu_buffer extent, the source rows and the destination of an `mpu.mm` past theirs. The
# loop checks these extents itself (`bounds_ok`); the fault is raised as the Python's.
MPU_BOUNDED = """
.program top on top
    halt
.program c0 on core(0)
    ld r3, 8(r1)
    ld r4, 16(r1)
    lsa r6, sram, 0
    li r7, 1024
    dma r6, r3, r7
    lsa r8, mpu_buffer, 0
    li r9, 16384
    dma r8, r4, r9
    dmawait
    li r10, 128
    li r11, 64
    mpu.ldw r8, r10, r11
    lsa r12, sram, 65536
    li r13, {rows}
    mpu.mm r12, r6, r13, f32
    halt
"""


@pytest.mark.parametrize(
    "mn,field,space,offset,size,rows",
    [
        ("mpu.ldw", "a", "mpu_buffer", 0, 16384 - 2, 2),  # the tile, one element past its buffer
        ("mpu.mm", "b", "sram", 0, 2 * 128 * 2, 4),  # four source rows of a two-row buffer
        ("mpu.mm", "a", "sram", 65536, 2 * 64 * 4, 3),  # three f32 rows into a two-row one
    ],
)
def test_native_loop_mpu_bound_faults_match_the_python_loop(
    mn, field, space, offset, size, rows, monkeypatch
):
    from bertha_helpers import small_model, tensor

    from legato.targets.bertha.arch.bounds import Extent
    from legato.targets.bertha.asm import assemble
    from legato.targets.bertha.elf import ArgLayout, write_elf
    from legato.types import bf16

    model = small_model()
    module = assemble(MPU_BOUNDED.format(rows=rows))
    code = module.programs[1].instructions
    pc = next(i for i, ins in enumerate(code) if ins.op.mnemonic == mn)
    bounds = {"c0": {pc: {field: Extent(space=space, offset=offset, size=size)}}}
    lines = {"top": [None], "c0": [("mpu_bounds.py", 100 + i, 1) for i in range(len(code))]}
    args = [tensor("a", bf16, [2048]), tensor("w", bf16, [8192])]
    binary = write_elf(module, model, ArgLayout(list(args)), bounds=bounds, lines=lines)
    rng = np.random.default_rng(5)
    values = [_mpu_data("normal", rng, (2048,)), _mpu_data("normal", rng, (8192,))]
    report = _compare(binary, model, values, monkeypatch, False)[0]
    assert report[0] == "OutOfBoundsError", report
    assert f"pc {pc}" in report[1] and f"mpu_bounds.py:{100 + pc}" in report[1], report[1]


@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_softmax_exp_and_rmax_in_the_loop_match_numpy(target, monkeypatch):
    """softmax_32x4096's `vpu.exp` and `vpu.rmax` run in native/vpu.c from the compiled loop
    (none reaches the numpy reference): the same report, output bits and module states as
    the Python loop with the VPU in numpy (`native_vpu` False)."""
    from bench.emu_speed import bench_binary

    model, binary, args = bench_binary("softmax_32x4096", target)
    reference = emulator.Emulator._vpu_reference
    seen = []

    def spy(self, m, ins, vs, elems):
        seen.append(vs.mn)
        return reference(self, m, ins, vs, elems)

    monkeypatch.setattr(emulator.Emulator, "_vpu_reference", spy)
    fast = _outcome(binary, model, args, True, monkeypatch, False)
    assert not {"vpu.exp", "vpu.rmax"} & set(seen), seen
    monkeypatch.setattr(emulator.Emulator, "native_vpu", False)
    seen.clear()
    ref = _outcome(binary, model, args, False, monkeypatch, False)
    assert {"vpu.exp", "vpu.rmax"} <= set(seen)
    assert isinstance(ref[0][0], int)
    assert fast == ref


# ld and st, which the loop plans and issues itself (native/loop.c's `ldst_plan`,
# `ldst_issue`), the register scoreboard of loads in flight (`rr_stall`: scalar code, a DMA,
# a qwait and a VPU instruction behind one, and the core register of a DMA's notify), and the
# first touch of a core's sram mapped for the loop (`LP_MAP`): DRAM and sram loads and stores,
# a DRAM store's latency, a load that overwrites a register still loading, and loads and
# stores in lazy private DRAM (the Python's).
LDST = """
.program top on top
    ld r3, 8(r1)
    ld r4, 16(r1)
    ld r5, 0(r3)
    addi r6, r5, 1
    st r6, 64(r4)
    halt
.program c0 on core(0)
    ld r3, 8(r1)
    ld r4, 16(r1)
    lsa r7, sram, 0
    ld r5, 8(r3)
    ld r6, 16(r3)
    li r8, 3
    st r8, 0(r7)
    ld r9, 0(r7)
    add r10, r5, r9
    st r10, 8(r7)
    ld r11, 24(r3)
    ld r11, 32(r3)
    li r12, 16
    dma r4, r7, r12, core(r11).sram.q0
    lsa r13, private_dram, 0
    st r6, 0(r13)
    ld r14, 0(r13)
    st r14, 16(r7)
    ld r15, 40(r3)
    li r12, 24
    dma r4, r7, r12
    dmawait
    ld r16, 48(r3)
    vpu.fill r7, r12, r16, i32
    ld r17, 0(r7)
    st r17, 32(r4)
    halt
.program c1 on core(1)
    ld r3, 8(r1)
    ld r5, 56(r3)
    qwait sram.q0
    st r5, 0(r3)
    halt
"""


def _ldst_binary(model, src, args, bounds=None):
    """`src` assembled with a line table (`ldst.py`, line 100 + pc) and extents `bounds`."""
    from legato.targets.bertha.asm import assemble
    from legato.targets.bertha.elf import ArgLayout, write_elf

    module = assemble(src)
    lines = {
        p.name: [("ldst.py", 100 + i, 1) for i in range(len(p.instructions))]
        for p in module.programs
    }
    return write_elf(module, model, ArgLayout(list(args)), bounds=bounds, lines=lines)


def _ldst_args():
    from bertha_helpers import tensor

    from legato.types import i64

    x = np.array([5, 11, 13, 1, 1, 7, 9, 17], np.int64)
    return [tensor("x", i64, [8], "readwrite"), tensor("out", i64, [16], "write")], [
        x,
        np.zeros(16, np.int64),
    ]


@pytest.mark.parametrize("gen", ["bertha", "bertha-evt1"])
def test_native_loop_loads_and_stores_match_the_python_loop(gen, monkeypatch):
    """The LDST program on both loops: the same bits, cycles, busy times and module states;
    and the loop issues every ld and st itself but the four in private DRAM (lazy: the
    Python's), and plans nothing in the Python (`_schedule_native`)."""
    from bertha_helpers import small_model

    model = small_model(gen)
    args, values = _ldst_args()
    binary = _ldst_binary(model, LDST, args)
    report = _compare(binary, model, values, monkeypatch, False)[0]
    assert isinstance(report[0], int), report
    execute, schedule = emulator.Emulator._execute, emulator.Emulator._schedule_native
    seen, planned = [], []

    def spy(self, m, plan, t):
        seen.append(m.code[m.pc].op.mnemonic if m.barrier_token is None else "barrier")
        return execute(self, m, plan, t)

    def spy_plan(self, m):
        planned.append(m.code[m.pc].op.mnemonic)
        return schedule(self, m)

    monkeypatch.setattr(emulator.Emulator, "_execute", spy)
    monkeypatch.setattr(emulator.Emulator, "_schedule_native", spy_plan)
    _outcome(binary, model, values, True, monkeypatch, False)
    assert sorted(seen) == ["ld", "st"], seen  # (the private DRAM ones the Python plans and
    assert sorted(planned) == ["ld", "st"], planned  # issues; its st lands before the ld)


@pytest.mark.parametrize(
    "line,bound,fault",
    [
        ("ld r20, 0(r0)", None, "EmulatorFault"),  # address 0: no allocation
        ("ld r20, 64(r3)", None, "EmulatorFault"),  # past x (the next allocation: 4 KiB on)
        ("st r8, 0(r18)", None, "EmulatorFault"),  # into the read-only argument
        ("li r21, -1\n    shri r21, r21, 1\n    ld r20, 8(r21)", None, "EmulatorFault"),
        ("ld r20, 8(r7)", ("sram", 0, 8), "OutOfBoundsError"),  # outside its sram extent
        ("st r8, 4(r7)", ("sram", 0, 8), "OutOfBoundsError"),
        ("ld r20, 0(r7)", ("sram", 0, 8), None),  # inside it: no fault
    ],
)
def test_native_loop_load_store_faults_match_the_python_loop(line, bound, fault, monkeypatch):
    """A load or store outside any allocation, into a read-only argument, with an address past
    64 bits or outside its extent faults as in the Python loop: the same error type, message,
    pc and kernel source line, and module states."""
    from bertha_helpers import small_model, tensor

    from legato.targets.bertha.arch.bounds import Extent
    from legato.targets.bertha.asm import assemble
    from legato.types import i64

    model = small_model()
    src = f"""
.program top on top
    halt
.program c0 on core(0)
    ld r3, 8(r1)
    ld r18, 24(r1)
    lsa r7, sram, 0
    li r8, 3
    st r8, 0(r7)
    {line}
    halt
"""
    code = assemble(src).programs[1].instructions
    pc = len(code) - 2
    bounds = None
    if bound is not None:
        space, offset, size = bound
        bounds = {"c0": {pc: {"b": Extent(space=space, offset=offset, size=size)}}}
    args, values = _ldst_args()
    args.append(tensor("ro", i64, [8]))
    values.append(np.arange(8, dtype=np.int64))
    binary = _ldst_binary(model, src, args, bounds)
    report = _compare(binary, model, values, monkeypatch, False)[0]
    if fault is None:
        assert isinstance(report[0], int), report
        return
    assert report[0] == fault, report
    assert f"pc {pc}" in report[1] and f"ldst.py:{100 + pc}" in report[1], report[1]


@pytest.mark.parametrize("declared", [False, True])
@pytest.mark.parametrize("srams", [1.5, 0.5])
def test_native_loop_memory_limit_on_a_mapped_core_space_matches(srams, declared, monkeypatch):
    """The loop's first touch of a core's sram (`LP_MAP`) past the host-memory bound: the same
    MemoryLimitError, at the same instruction, as the Python loop's planning raises. With core
    0's sram `declared` (`.mem`), both loops map it at the start (`Emulator.premap`) when it
    fits the bound, and else leave it to its first touch, which faults there."""
    from bertha_helpers import small_model

    model = small_model()
    sram = model.memory_size("sram")
    monkeypatch.setenv("LEGATO_MEMORY_LIMIT", str(int(sram * srams)))
    args, values = _ldst_args()
    touch = "lsa r6, sram, 0\n    st r5, 0(r6)\n    qwait sram.q0"  # (core 1's sram)
    src = LDST.replace("qwait sram.q0", touch)
    if declared:
        src = src.replace(".program c0 on core(0)\n", ".program c0 on core(0)\n.mem sram 64\n")
    binary = _ldst_binary(model, src, args)
    assert read_elf(binary).programs[1].memory == ({"sram": 64} if declared else {})
    mapped = []
    premap = emulator.Memory.premap
    monkeypatch.setattr(
        emulator.Memory, "premap", lambda self, sp: mapped.append(list(sp)) or premap(self, sp)
    )
    report = _compare(binary, model, values, monkeypatch, False)[0]
    assert mapped == [[(0, "sram")] if declared else []] * 2  # (each loop's run)
    assert report[0] == "MemoryLimitError", report
    pc = int(re.search(r"pc (\d+) `(st|dma) ", report[1]).group(1))  # (the first touch)
    assert f"ldst.py:{100 + pc}:" in report[1], report[1]


@pytest.mark.parametrize("name", ["rmsnorm_32x4096", "softmax_32x4096", "gemv_1x4096x4096"])
@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_native_loop_runs_the_bench_prologues(name, target, monkeypatch):
    """The cores' prologue (the Instruction Table's `ld`, the instructions behind a load in
    flight, the first DMA into a core's sram) is the loop's: untraced, the Python plans and
    issues nothing of these kernels, and maps no core space on a first touch (`LP_MAP`): the
    spaces their programs declare are mapped at the start (`Emulator.premap`)."""
    from bench.emu_speed import bench_binary

    model, binary, args = bench_binary(name, target)
    calls = []
    for meth in ("_execute", "_schedule_native", "_run_scalars", "_map_for_loop"):
        orig = getattr(emulator.Emulator, meth)

        def spy(self, *a, _orig=orig, _name=meth):
            calls.append(_name)
            return _orig(self, *a)

        monkeypatch.setattr(emulator.Emulator, meth, spy)
    report = _outcome(binary, model, args, True, monkeypatch, False)[0]
    assert isinstance(report[0], int), report
    assert calls == [], calls


def _report(binary, model, args, native_loop: bool, monkeypatch) -> tuple:
    """Every field of one untraced run's report (on copies of `args`) and the arguments'
    bytes after it, with nothing reading the emulator's modules in between."""
    monkeypatch.setattr(emulator.Emulator, "native_loop", native_loop)
    args = [a.copy() if hasattr(a, "copy") else a for a in args]
    r = run_binary(binary, model, args, trace=False, hazards=False)
    fields = (
        r.cycles,
        list(r.module_cycles.items()),
        [(k, list(v.items())) for k, v in r.unit_busy.items()],
        list(r.port_busy.items()),
        r.dram_bytes_per_channel,
        list(r.instructions.items()),
        r.mac_count,
        r.vpu_element_ops,
        r.vpu_transcendental_ops,
        r.roofline,
    )
    outs = [np.ascontiguousarray(a).view(np.uint8).tobytes() for a in args if hasattr(a, "view")]
    return fields, outs


@pytest.mark.parametrize("name", ["rmsnorm_32x4096", "softmax_32x4096", "gemv_1x4096x4096"])
@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_native_loop_report_without_the_modules_matches(name, target, monkeypatch):
    """A run the compiled loop takes to its end never makes the Python `Module`s (once the
    binary's loop set-up is kept: `Emulator.__getattr__`, `_loop_modules`): its report is read from the loop's final state
    (`Emulator._result`'s `_final`), in the same order, and equals the Python loop's."""
    from bench.emu_speed import bench_binary

    model, binary, args = bench_binary(name, target)
    ref = _report(binary, model, args, False, monkeypatch)
    assert _report(binary, model, args, True, monkeypatch) == ref  # (its set-up made, kept)
    made = []
    orig = emulator.Emulator._make_modules

    def spy(self):
        made.append(1)
        return orig(self)

    monkeypatch.setattr(emulator.Emulator, "_make_modules", spy)
    fast = _report(binary, model, args, True, monkeypatch)
    assert made == []
    assert fast == ref


def test_native_loop_modules_made_after_the_run_and_run_again(monkeypatch):
    """The modules of a run that did not make them are made on first use with the state the
    loop left (the Python loop's), and the same emulator runs again from that state (kept
    mapped: its memory is not released)."""
    from bench.emu_speed import bench_binary

    model, binary, args = bench_binary("rmsnorm_32x4096", "bertha")
    _report(binary, model, args, True, monkeypatch)  # (the loop's set-up, kept)
    monkeypatch.setattr(emulator.Memory, "release", lambda self: None)
    runs = []
    run = emulator.Emulator.run

    def spy(self, table_address=0):
        runs.append((self, table_address, "modules" in vars(self)))
        return run(self, table_address)

    monkeypatch.setattr(emulator.Emulator, "run", spy)

    def state(emu):
        return [
            (m.name, m.version, list(m.regs), m.pc, m.time, m.count, m.halted, m.halt_time)
            + (m.unit_end, m.dma_end, m.vpu_free, dict(m.busy), dict(m.reg_ready))
            for m in emu.modules  # (not `inflight`: the loop drops its scoreboard at the end)
        ]

    outs = []
    for native_loop in (False, True):
        monkeypatch.setattr(emulator.Emulator, "native_loop", native_loop)
        for touch in (True, False):
            runs.clear()
            first = _report(binary, model, args, native_loop, monkeypatch)
            emu, table, _ = runs[0]
            made = "modules" in vars(emu)
            after_first = state(emu) if touch else None  # (else made by the second run)
            second = emu.run(table)
            outs.append((first, after_first, second, state(emu)))
            assert made == (not native_loop)
    assert outs[2:] == outs[:2]
