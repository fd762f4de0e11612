"""The emulator's fast paths (issue 15) against its reference paths, on corpus kernels that use
every synchronisation kind (DMA queues, barriers, semaphores, on-chip forwarding), both chip
generations: the same output bits, cycles, busy times, DRAM bytes and trace events.

Reference: planning every instruction again when it is popped and on every wake (what the
scheduler did before it reused plans that cannot change, `Emulator._stable`, and re-checked only
a DMA's port slots, `Emulator._replan_slot`), scalar instructions through `_execute` (before
they ran as threaded code, `_scalar_code`), and searching the region map on every access
(before `Memory.find` remembered regions per page), and the MPU and VPU numerics in numpy
and the DRAM booking in Python (before the compiled helpers: `mpu_fast`, native/vpu.c,
native/dram.c)."""

import json

import numpy as np
import pytest

from legato.compiler import compile_kernel
from legato.interp.differential import parse_module
from legato.model import bertha
from legato.targets.bertha import emulator, mpu_fast, native, timing
from legato.targets.bertha.runtime import load_binary, run_binary
from tests.corpus.kernels import CORPUS

KERNELS = [
    "gemm_forwarded_slabs",
    "gemm_spmd_all_to_all",
    "decoder_layer_tiny",
    "rmsnorm_rows_multicore",
]


def _run(kernel, model):
    art = compile_kernel(parse_module(kernel.mlir, kernel.name), model)
    args = kernel.make_args(np.random.default_rng(kernel.seed))
    r = run_binary(art.binary, model, args, trace=True)
    outs = [np.ascontiguousarray(a).view(np.uint8).tobytes() for a in args if hasattr(a, "view")]
    report = (
        r.cycles,
        r.module_cycles,
        r.unit_busy,
        r.port_busy,
        r.dram_bytes_per_channel,
        r.instructions,
        json.dumps(r.trace_events, sort_keys=True),
    )
    return report, outs


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("gen", ["evt0", "evt1"])
def test_reused_plans_change_nothing(name, gen, monkeypatch):
    kernel = next(k for k in CORPUS if k.name == name)
    if kernel.model is not None and gen != "evt0":
        pytest.skip("the kernel is for one model")
    model = getattr(bertha, gen)() if kernel.model is None else kernel.get_model()
    fast = _run(kernel, model)
    monkeypatch.setattr(emulator.Emulator, "_stable", lambda self, m, plan: False)
    monkeypatch.setattr(emulator.Emulator, "_replan_slot", lambda self, m, plan: self._prepare(m))
    monkeypatch.setattr(emulator.Memory, "find", emulator.PhysicalMemory.find)
    monkeypatch.setattr(emulator.Emulator, "fast_scalars", False)
    monkeypatch.setattr(emulator.Emulator, "fast_wakes", False)
    monkeypatch.setattr(mpu_fast, "NATIVE", False)
    monkeypatch.setattr(emulator.Emulator, "native_vpu", False)
    monkeypatch.setattr(timing.DramTiming, "native", False)
    ref = _run(kernel, model)
    assert fast[0] == ref[0]
    assert fast[1] == ref[1]


def _versions_and_plans(kernel, model, monkeypatch) -> tuple[list[int], int, tuple]:
    """(every module's final version, how many plans were made, the run's report) of one run
    of corpus `kernel`."""
    seen = {"plans": 0}
    prepare, result = emulator.Emulator._prepare, emulator.Emulator._result

    def counted(self, m):
        seen["plans"] += 1
        return prepare(self, m)

    def final(self):
        seen["versions"] = [m.version for m in self.modules]
        return result(self)

    monkeypatch.setattr(emulator.Emulator, "_prepare", counted)
    monkeypatch.setattr(emulator.Emulator, "_result", final)
    report = _run(kernel, model)
    monkeypatch.undo()
    return seen["versions"], seen["plans"], report


@pytest.mark.parametrize("gen", ["evt0", "evt1"])
def test_waking_a_qwait_on_an_empty_queue_only_moves_its_version(gen, monkeypatch):
    """The heap breaks ties of equal ready cycles by each module's version, so the wake fast
    path must bump a waiting `qwait`'s version exactly as planning it again does: the final
    versions of every module match the reference's, with fewer plans made."""
    kernel = next(k for k in CORPUS if k.name == "rmsnorm_rows_multicore")
    model = getattr(bertha, gen)()
    # (the Python loop's plans: the compiled loop makes this kernel's itself since its ninth
    # round, and its versions are test_emulator_native_loop.py's; the hazard checker of
    # tests/unit's conftest runs the Python loop anyway, this holds it without it too)
    monkeypatch.setattr(emulator.Emulator, "native_loop", False)
    fast_versions, fast_plans, fast = _versions_and_plans(kernel, model, monkeypatch)
    monkeypatch.setattr(emulator.Emulator, "native_loop", False)
    monkeypatch.setattr(emulator.Emulator, "fast_wakes", False)
    ref_versions, ref_plans, ref = _versions_and_plans(kernel, model, monkeypatch)
    assert fast == ref
    assert fast_versions == ref_versions
    assert fast_plans < ref_plans  # the fast path was taken


def test_a_binary_run_again_is_parsed_once_and_still_checked(monkeypatch):
    """`run_binary` reuses the parsed binary of the same bytes (and key): a second run gives
    the same result without parsing; other bytes, a tampered copy and a wrong key are still
    parsed and refused."""
    from bertha_helpers import build, small_model

    from legato.targets.bertha import elf, runtime

    model = small_model()
    data = build(".program top on top\n    li r3, 7\n    halt\n", model=model)
    runtime._read_cached.cache_clear()
    first = run_binary(data, model, [], trace=False)
    parsed = []
    monkeypatch.setattr(runtime, "read_elf", lambda b: parsed.append(b) or elf.read_elf(b))
    again = run_binary(data, model, [], trace=False)
    assert (again.cycles, again.instructions) == (first.cycles, first.instructions)
    assert parsed == []
    assert load_binary(data, model, cached=True) is load_binary(data, model, cached=True)
    assert load_binary(data, model) is not load_binary(data, model)
    tampered = bytearray(data)
    tampered[-1] ^= 1
    for _ in range(2):
        with pytest.raises(elf.BinaryError):
            run_binary(bytes(tampered), model, [], trace=False)
    key = b"k" * 32
    signed = elf.sign_binary(data, key)
    run_binary(signed, model, [], trace=False, key=key)
    with pytest.raises(elf.SignatureError):
        run_binary(signed, model, [], trace=False, key=b"o" * 32)


RRR = "add sub mul div rem and or xor shl shr sra min max slt seq".split()
RRI = "addi muli andi shli shri divi remi".split()


def _scalar_program(rng) -> str:
    """Random scalar code: registers seeded with edge values (li/lih), ALU ops of every kind
    (r0 as a destination too), forward branches, lsa with a static and a register core."""
    lines = [".program top on top"]
    for r in range(3, 12):
        lines.append(f"    li r{r}, {int(rng.integers(-(2**31), 2**31))}")
        if rng.random() < 0.5:
            lines.append(f"    lih r{r}, {int(rng.integers(-(2**31), 2**31))}")
    lines.append("    li r12, 1")
    lines.append("    lsa r13, core(r12).sram, 64")
    lines.append("    lsa r14, core3.private_dram, 8")
    for i in range(60):
        d, s1, s2 = (int(x) for x in rng.integers(0, 15, 3))
        k = rng.random()
        if k < 0.55:
            lines.append(f"    {RRR[int(rng.integers(len(RRR)))]} r{d}, r{s1}, r{s2 or 3}")
        elif k < 0.85:
            imm = int(rng.choice([1, -1, 3, 63, 64, -(2**31), 2**31 - 1, 7]))
            lines.append(f"    {RRI[int(rng.integers(len(RRI)))]} r{d}, r{s1}, {imm}")
        else:
            br = ["beq", "bne", "blt", "bge"][int(rng.integers(4))]
            lines.append(f"    {br} r{s1}, r{s2}, L{i}")
            lines.append(f"    addi r{d}, r{d}, 1")
            lines.append(f"L{i}:")
    lines += ["    nop", "    jmp E", "    li r3, 99", "E:", "    halt"]
    return "\n".join(lines) + "\n"


MODES = {
    # (fast_scalars, native_scalars): `_execute` (the reference), threaded code, compiled code
    "reference": (False, False),
    "threaded": (True, False),
    "native": (True, True),
}


def _final_state(src, mode: str, monkeypatch, **limits):
    from bertha_helpers import build, small_model

    fast, compiled = MODES[mode]
    if compiled and native.lib is None:
        pytest.skip("the compiled helpers are not built (scripts/bootstrap.sh)")
    model = small_model()
    emu = emulator.Emulator(load_binary(build(src, model=model), model), model, **limits)
    monkeypatch.setattr(emulator.Emulator, "fast_scalars", fast)
    monkeypatch.setattr(emulator.Emulator, "native_scalars", compiled)
    monkeypatch.setattr(emulator.Emulator, "native_min_run", 1)  # every scalar run compiled
    try:
        r = emu.run()
    except emulator.EmulatorFault as e:
        return str(e), [m.regs for m in emu.modules]
    return (r.cycles, r.instructions), [(m.regs, m.time, m.pc) for m in emu.modules]


@pytest.mark.parametrize("mode", ["threaded", "native"])
@pytest.mark.parametrize("seed", range(12))
def test_threaded_and_compiled_scalar_code_match_execute(seed, mode, monkeypatch):
    src = _scalar_program(np.random.default_rng(seed))
    fast = _final_state(src, mode, monkeypatch)
    assert fast == _final_state(src, "reference", monkeypatch)


EDGES = """
.program top on top
    li r3, 0
    lih r3, -2147483648          ; INT64_MIN
    li r4, -1
    div r5, r3, r4               ; wraps to INT64_MIN
    rem r6, r3, r4               ; 0
    divi r7, r3, -1
    remi r8, r3, -7
    li r9, 64
    shl r10, r4, r9              ; shift counts use the low 6 bits
    shr r11, r3, r9
    sra r12, r3, r4
    shri r13, r4, 63
    mul r14, r3, r3
    sub r15, r3, r4
    min r16, r3, r4
    max r17, r3, r4
    slt r18, r3, r4
    seq r19, r3, r3
    li r0, 5                     ; r0 stays 0
    lsa r20, core3.sram, 16
    li r21, 2
    lsa r22, core(r21).private_dram, 8
    li r23, 3
L:
    addi r23, r23, -1
    bne r23, r0, L
    {tail}
    halt
"""


@pytest.mark.parametrize(
    "tail",
    [
        "nop",
        "div r24, r3, r0",  # a trap at the end of a compiled run: the same fault message
        "li r25, 99\n    lsa r26, core(r25).sram, 0",  # a core index out of range
    ],
)
def test_compiled_scalar_edge_cases_match_execute(tail, monkeypatch):
    src = EDGES.format(tail=tail)
    want = _final_state(src, "reference", monkeypatch)
    assert _final_state(src, "native", monkeypatch) == want
    assert _final_state(src, "threaded", monkeypatch) == want


LOOP = """
.program top on top
    li r3, 0
    li r4, 100000
L:
    addi r3, r3, 1
    xor r5, r5, r3
    blt r3, r4, L
    halt
"""


@pytest.mark.parametrize("limits", [{"instruction_limit": 1000}, {"cycle_limit": 777}])
def test_compiled_scalar_loops_stop_at_the_same_bound(limits, monkeypatch):
    """A bound crossed inside a compiled run stops the run where the reference stops it (the
    same pc, count and message)."""
    want = _final_state(LOOP, "reference", monkeypatch, **limits)
    assert "limit" in want[0]
    assert _final_state(LOOP, "native", monkeypatch, **limits) == want


DIRTY = """\
.program top on top
    li r4, 0x5a5a
    lsa r3, core{c}.sram, 4096
    st r4, 0(r3)
    st r4, 8(r3)
    lsa r5, core{c}.mpu_buffer, 8
    st r4, 0(r5)
    halt
"""

READ_BACK = """\
.program top on top
    ld r6, 8(r1)
    lsa r3, core{c}.sram, 4096
    ld r7, 0(r3)
    st r7, 0(r6)
    ld r7, 8(r3)
    st r7, 8(r6)
    lsa r5, core{c}.mpu_buffer, 8
    ld r7, 0(r5)
    st r7, 16(r6)
    ld r7, 0(r3)
    halt
"""


DIRTY_VPU = """\
.program top on top
    halt
.program p on core({c})
    lsa r3, sram, 4096
    li r4, 6
    li r5, 0x5a5a
    vpu.fill r3, r4, r5, f32
    lsa r3, mpu_buffer, 8
    li r4, 2
    vpu.fill r3, r4, r5, f32
    halt
"""


def test_recycled_shared_allocations_start_zeroed(monkeypatch):
    """A large shared-DRAM allocation of the memory's own (`Memory.recycle_shared`: a
    copied-in argument) takes an array an earlier memory released and reads as zeros wherever
    this one did not write; small and huge ones, and ones over a caller's array, are fresh."""
    from bertha_helpers import small_model

    monkeypatch.setattr(emulator, "_CORE_POOL", emulator._CorePool())
    model = small_model()
    lo, hi = emulator.Memory.recycle_shared
    size = max(lo, 128 << 10)
    first = emulator.Memory(model)
    a = first.allocate(size, "buf")
    region = first.find(a, 1)[0]
    assert type(region) is emulator._RecycledRegion
    array = region.data
    first.write(a + 1000, np.full(64, 7, np.uint8))
    first.write(a + size - 8, np.full(8, 9, np.uint8))
    first.release()
    second = emulator.Memory(model)
    b = second.allocate(size, "buf")
    again = second.find(b, 1)[0]
    assert again.data is array  # recycled, and zeroed where the first memory wrote
    assert not second.read(b, size).any()
    for n in (lo - 1, hi + 1):
        c = second.allocate(n, "other")
        assert type(second.find(c, 1)[0]) is not emulator._RecycledRegion
    mapped = second.map_writable(np.zeros(size, np.uint8), "arg")
    assert type(second.find(mapped, 1)[0]) is not emulator._RecycledRegion


@pytest.mark.parametrize("vector", [False, True], ids=["st", "vpu"])
@pytest.mark.parametrize("recycle", [True, False])
def test_recycled_core_memories_start_zeroed(recycle, vector, monkeypatch):
    """A run's core spaces (sram, mpu_buffer) read as zeros wherever the run did not write, as
    fresh memory does, even when their arrays are recycled from a run that wrote there."""
    from bertha_helpers import build, small_model, tensor

    from legato.types import i64

    monkeypatch.setattr(emulator.Memory, "recycle", recycle)
    # a pool of its own: one that earlier tests of this process filled to its bound with other
    # sizes would drop this model's arrays instead of recycling them
    monkeypatch.setattr(emulator, "_CORE_POOL", emulator._CorePool())
    model = small_model()
    for c in range(model.num_cores):
        dirty = (DIRTY_VPU if vector else DIRTY).format(c=c)  # a compiled VPU write too
        run_binary(build(dirty, model=model), model, [], trace=False)
        if recycle:
            assert emulator._CORE_POOL._free.get(model.memory_size("sram"))  # handed back
        out = np.full(3, -1, np.int64)
        src = READ_BACK.format(c=c)
        run_binary(build(src, [tensor("out", i64, [3], "write")], model), model, [out])
        assert out.tolist() == [0, 0, 0]
