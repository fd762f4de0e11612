"""Hazards (issue 17, item 3): a DMA's bytes land when it completes, and the checker reports an
access that no wait orders after (or before) a conflicting one, with both source lines.

The compiled code of real corpus kernels is run with one wait replaced by a `nop` (so every PC,
line-table entry and branch stays where it was): each kind of wait the compiler emits (`qwait`,
`dmawait`, `barrier`, `sem.wait`) guards data, and removing it is reported at the two accesses it
ordered. Every corpus kernel, unchanged, runs hazard-free with the same bits and cycles."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest
import torch
from bertha_helpers import build, small_model, tensor

import legato
from legato.compiler import compile_kernel
from legato.errors import LegatoError, LegatoRuntimeError
from legato.interp.differential import parse_module
from legato.targets.bertha.arch.hazards import (
    HazardError,
    ReadBeforeTransferError,
    SharedMemoryRaceError,
    WriteDuringTransferError,
)
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import read_elf, write_elf
from legato.targets.bertha.runtime import resolve_hazards, run_binary
from legato.types import DType
from tests.corpus import runtime_kernels as rk
from tests.corpus.kernels import CORPUS

SOURCE = inspect.getsourcefile(rk)
F32, I32 = DType("f32"), DType("i32")


def _line(text: str) -> int:
    """The line of `tests/corpus/runtime_kernels.py` holding `text` (once)."""
    lines = [i for i, s in enumerate(open(SOURCE).read().splitlines(), 1) if text in s]
    assert len(lines) == 1, (text, lines)
    return lines[0]


@functools.cache
def _compiled(kernel):
    return compile_kernel(parse_module(kernel.to_mlir(), kernel.name), kernel.model)


def _without(kernel, mnemonic: str, nth: int, operand: str = "") -> bytes:
    """`kernel`'s binary with the `nth` `mnemonic` (whose operands are `operand`, when given:
    exactly, so that `sram.q2` is not `sram.q254`) of its assembly replaced by a nop."""
    art = _compiled(kernel)
    b = read_elf(art.binary)
    out, seen = [], 0
    for line in art.asm.splitlines():
        words = line.split(None, 1)
        if (
            line.startswith("    ")
            and words[0] == mnemonic
            and (not operand or words[1:] == [operand])
        ):
            if seen == nth:
                line = "    nop"
            seen += 1
        out.append(line)
    assert seen > nth, f"{kernel.name} has only {seen} {mnemonic}"
    return write_elf(
        assemble("\n".join(out)), kernel.model, b.layout, lines=b.lines, bounds=b.bounds
    )


def _args(rows: int):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((rows, 64)).astype(np.float32), np.zeros((rows, 64), np.float32)]


def _hazard(kernel, mnemonic, nth, rows, cls, operand: str = "") -> HazardError:
    with pytest.raises(cls) as ei:
        run_binary(
            _without(kernel, mnemonic, nth, operand), kernel.model, _args(rows), hazards=True
        )
    e = ei.value
    assert isinstance(e, LegatoRuntimeError) and isinstance(e, LegatoError)
    return e


def _at(access, text):
    assert access.source is not None, access
    assert access.source[0] == SOURCE and access.source[1] == _line(text), access.source


def test_removed_qwait_is_a_read_before_the_transfer():
    e = _hazard(rk.core_to_core, "qwait", 0, rk.R, ReadBeforeTransferError)
    # core 0 computes on its sram before top's request_load even wrote it
    assert (e.first.module, e.first.access, e.first.transfer) == ("core0", "reads", False)
    assert (e.second.module, e.second.access, e.second.transfer) == ("top", "writes", True)
    _at(e.first, "y = x * x")
    _at(e.second, 'legato.tensor.request_load(a, device.get_core(0), "sram")')
    msg = str(e)
    assert "sram of core 0 bytes [0x0, 0x800)" in msg and "no qwait, dmawait" in msg
    assert f"{SOURCE}:{_line('y = x * x')}:" in msg


def test_removed_barrier_qwait_races_on_shared_dram():
    # a barrier waits for its core's store with a qwait on the core's own queue
    # (`core-barrier-waits`); without it, the store may still be in flight when the
    # neighbour reads the rows
    e = _hazard(
        rk.spmd_exchange, "qwait", 0, rk.NC * rk.R, SharedMemoryRaceError, operand="sram.q255"
    )
    assert e.first.access == "writes" and e.second.access == "reads"
    assert e.first.transfer and e.second.transfer and e.first.module != e.second.module
    _at(e.first, "legato.tensor.memcpy(out[c * R : (c + 1) * R, :], legato.tensor.exp(x))")
    _at(e.second, 'y = legato.tensor.load(out[nb * R : nb * R + R, :], "sram")')
    assert "shared_dram" in e.what and "(out)" in e.what


@pytest.mark.parametrize(
    "nth, first, second",
    [
        (
            0,
            "legato.tensor.memcpy(out[c * R : (c + 1) * R, :], legato.tensor.exp(x))",
            'y = legato.tensor.load(out[nb * R : nb * R + R, :], "sram")',
        ),
        (
            1,
            'y = legato.tensor.load(out[nb * R : nb * R + R, :], "sram")',
            "legato.tensor.memcpy(out[c * R : (c + 1) * R, :], y + 1.0)",
        ),
    ],
)
def test_removed_barrier_races_on_shared_dram(nth, first, second):
    e = _hazard(rk.spmd_exchange, "barrier", nth, rk.NC * rk.R, SharedMemoryRaceError)
    _at(e.first, first)
    _at(e.second, second)


def test_removed_semaphore_wait_races_on_shared_dram():
    e = _hazard(rk.sem_handoff, "sem.wait", 0, rk.R, SharedMemoryRaceError)
    # core 1 reads `out` before core 0's write of it (which it no longer waits for) landed
    assert (e.first.module, e.first.access) == ("core1", "reads")
    assert (e.second.module, e.second.access) == ("core0", "writes")
    _at(e.first, 'y = legato.tensor.load(out, "sram")')
    _at(e.second, "legato.tensor.memcpy(out, x * x)")


@pytest.mark.parametrize("queue", ["sram.q1", "sram.q2"])
def test_every_data_qwait_of_a_stream_guards_data(queue):
    # spmd_stream receives every step's blocks on queues 1 and 2 (its credits come back on
    # 254 and 255): without any one of the S receives, the core reads a buffer before it
    # landed. (The operand is matched exactly: `sram.q2` once matched the credit waits on
    # `sram.q254` / `sram.q255` too, so "the 4th data wait" removed was a credit wait.)
    for i in range(rk.S):
        binary = _without(rk.spmd_stream, "qwait", i, queue)
        with pytest.raises(ReadBeforeTransferError) as ei:
            run_binary(binary, rk.spmd_stream.model, _stream_args(), hazards=True)
        _at(ei.value.second, "acc = acc + y - z")


@pytest.mark.parametrize("queue", ["sram.q254", "sram.q255"])
def test_spmd_stream_s_credit_waits_are_ordered_by_the_other_stream(queue):
    # No hazard exists without a credit wait of spmd_stream, on any timing: core c waits at
    # step s >= 3 for the credit of the buffer its step-(s-3) block filled on the receiver
    # (nxt for queue 1, prv for queue 2). But that receiver read the buffer at step s-3 before
    # it issued its step-(s-2) block of the *other* stream to c, which c received before step
    # s (the q2 blocks come from nxt, the q1 blocks from prv): that receive already orders c
    # after the read. The checker is right to stay silent; the results stay right.
    for i in range(rk.S - 3):
        args = _stream_args()
        binary = _without(rk.spmd_stream, "qwait", i, queue)
        run_binary(binary, rk.spmd_stream.model, args, hazards=True)
        np.testing.assert_allclose(
            args[1], rk._spmd_stream_ref(torch.from_numpy(args[0])).numpy(), rtol=1e-6
        )


@legato.compile(backend=rk.four_cores)
def one_way_stream(
    a: rk.tt([rk.NC * rk.R, 64 * rk.S], "shared_dram"),
    out: rk.tt([rk.NC * rk.R, 64], "shared_dram"),
):
    """spmd_stream with the queue-1 stream alone: only the credits order a sender's reuse of
    a receive buffer after the receiver's read."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        nxt = device.get_core((c + 1) % rk.NC)
        acc = legato.tensor.load(a[c * rk.R : (c + 1) * rk.R, 0:64], "sram") * 0.0
        for s in legato.static_range(rk.S):
            x = legato.tensor.load(a[c * rk.R : (c + 1) * rk.R, s * 64 : (s + 1) * 64], "sram")
            legato.tensor.request_load(x, nxt, "sram", 1)  # hz:send
            y = legato.tensor.receive_type(rk.tt([rk.R, 64], "sram"), 1, None, "sram")
            acc = acc + y  # hz:read
        legato.tensor.memcpy(out[c * rk.R : (c + 1) * rk.R, :], acc)


def test_a_one_way_stream_s_first_credit_wait_guards_the_buffer_and_its_second_is_ordered():
    lines = open(__file__).read().splitlines()
    send, read = (
        [i for i, t in enumerate(lines, 1) if t.endswith(tag)] for tag in ("# hz:send", "# hz:read")
    )
    # without the wait for the credit of buffer 0, step 3's block overwrites it on the
    # receiver, which may not have read step 0's block yet
    with pytest.raises(ReadBeforeTransferError) as ei:
        run_binary(
            _without(one_way_stream, "qwait", 0, "sram.q255"),
            one_way_stream.model,
            _stream_args(),
            hazards=True,
        )
    e = ei.value
    assert (e.first.access, e.first.transfer) == ("reads", False)
    assert (e.second.access, e.second.transfer) == ("writes", True)
    assert [e.first.source[1]] == read and [e.second.source[1]] == send
    # the compiler sends buffer 0's credit after the receiver read buffer 1 too (one step
    # late), so taking it orders step 4's reuse of buffer 1 as well: its own wait is redundant
    args = _stream_args()
    binary = _without(one_way_stream, "qwait", 1, "sram.q255")
    run_binary(binary, one_way_stream.model, args, hazards=True)
    x = torch.from_numpy(args[0])
    ref = sum(torch.roll(x[:, s * 64 : (s + 1) * 64], rk.R, 0) for s in range(rk.S))
    np.testing.assert_allclose(args[1], ref.numpy(), rtol=1e-6)


def _stream_args():
    rng = np.random.default_rng(0)
    return [
        rng.standard_normal((rk.NC * rk.R, 64 * rk.S)).astype(np.float32),
        np.zeros((rk.NC * rk.R, 64), np.float32),
    ]


# top copies core 0's sram out once core 0 filled it, then lets core 0 fill it again
DRAIN = """
.program top on top
    ld r3, 8(r1)
    lsa r4, core0.sram, 0
    li r5, 64
    {wait}
    dma r3, r4, r5
    {release}
    halt
.program c0 on core(0)
.mem sram 64
    lsa r3, sram, 0
    li r4, 16
    li r5, 1065353216
    vpu.fill r3, r4, r5, f32
    sem.post 0, 1
    sem.wait 1, 1
    li r5, 0
    vpu.fill r3, r4, r5, f32
    halt
"""
DONE_THEN_POST = "dmawait\n    sem.post 1, 1"


def _drain(wait: str, release: str, **kw):
    model = small_model(cores=2)
    src = DRAIN.format(wait=wait, release=release)
    out = np.zeros(16, np.float32)
    run_binary(build(src, [tensor("out", F32, [16], "write")], model), model, [out], **kw)
    return out


def test_a_write_to_a_buffer_a_transfer_reads():
    assert (_drain("sem.wait 0, 1", DONE_THEN_POST, hazards=True) == 1).all()
    # top's copy does not wait for core 0's first fill: a DMA read and a write, unordered
    with pytest.raises(WriteDuringTransferError) as ei:
        _drain("nop", DONE_THEN_POST, hazards=True)
    assert (ei.value.first.module, ei.value.first.pc) == ("core0", 3)
    assert (ei.value.second.module, ei.value.second.pc) == ("top", 4)
    # top lets core 0 go on before its copy completed (the post before the dmawait): core 0's
    # second fill may land while the DMA still reads the buffer
    with pytest.raises(WriteDuringTransferError) as ei:
        _drain("sem.wait 0, 1", "sem.post 1, 1\n    dmawait", hazards=True)
    e = ei.value
    assert (e.first.module, e.first.access, e.first.transfer) == ("top", "reads", True)
    assert (e.second.module, e.second.access, e.second.pc) == ("core0", "writes", 7)
    assert "the DMA issued by top (program 'top') pc 4 `dma r3, r4, r5`" in str(e)
    # without the checker the run gives what its timing gives: the copy reads its source when
    # it completes, after core 0's second fill (zeros) landed
    assert (_drain("sem.wait 0, 1", "sem.post 1, 1\n    dmawait", hazards=False) == 0).all()


# core 0 reads a word top sends it; the qwait orders the read after the transfer
LAND = """
.program top on top
    ld r3, 8(r1)
    lsa r4, core0.sram, 0
    li r5, 8
    dma r4, r3, r5, core0.sram.q0
    halt
.program c0 on core(0)
.mem sram 8
    ld r6, 16(r1)
    lsa r3, sram, 0
    {wait}
    ld r4, 0(r3)
    st r4, 0(r6)
    halt
"""


def _land(wait: str, **kw):
    model = small_model(cores=2)
    args = [tensor("a", I32, [2]), tensor("out", I32, [2], "write")]
    out = np.zeros(2, np.int32)
    r = run_binary(
        build(LAND.format(wait=wait), args, model),
        model,
        [np.array([7, 9], np.int32), out],
        **kw,
    )
    return out, r


def test_data_lands_when_the_transfer_completes():
    out, _ = _land("qwait sram.q0", hazards=True)
    assert out.tolist() == [7, 9]
    # without the wait core 0 reads its sram long before the transfer lands: stale zeros
    out, r = _land("nop", hazards=False)
    assert out.tolist() == [0, 0]
    assert r.cycles > 0
    with pytest.raises(ReadBeforeTransferError) as ei:
        _land("nop", hazards=True)
    assert ei.value.second.module == "top" and ei.value.first.pc == 3


@pytest.mark.parametrize("kernel", CORPUS, ids=lambda k: k.name)
def test_corpus_kernels_are_hazard_free_and_unchanged_by_the_checker(kernel):
    from legato.errors import CompileError
    from legato.model import bertha

    model = kernel.get_model() if kernel.model is not None else bertha.evt0()
    try:
        art = compile_kernel(parse_module(kernel.mlir, kernel.name), model)
    except CompileError:
        pytest.skip("the pipeline cannot compile it yet")
    runs = []
    for hz in (False, True):
        args = kernel.make_args(np.random.default_rng(kernel.seed))
        r = run_binary(art.binary, model, args, trace=False, hazards=hz)
        runs.append((r.cycles, r.unit_busy, [np.asarray(a).tobytes() for a in args]))
    assert runs[0] == runs[1]


def test_resolve_hazards(monkeypatch):
    monkeypatch.delenv("LEGATO_HAZARDS", raising=False)
    assert resolve_hazards() is False and resolve_hazards(True) is True
    for text, want in (("1", True), ("on", True), ("0", False), ("off", False)):
        monkeypatch.setenv("LEGATO_HAZARDS", text)
        assert resolve_hazards() is want
        assert resolve_hazards(not want) is (not want)  # the session option wins
    monkeypatch.setenv("LEGATO_HAZARDS", "maybe")
    with pytest.raises(LegatoRuntimeError, match="LEGATO_HAZARDS='maybe'"):
        resolve_hazards()


def test_session_option_reaches_the_run(monkeypatch):
    import legato
    from legato.targets.bertha import runtime
    from tests.corpus.one_core import double

    seen = []
    real = runtime.run_binary

    def spy(*a, **kw):
        seen.append(kw.get("hazards"))
        return real(*a, **kw)

    monkeypatch.setattr(runtime, "run_binary", spy)
    x = np.ones((4, 8), np.float32)
    for option in (True, False):
        with legato.session(hazards=option):
            double(x, np.zeros_like(x))
    double(x, np.zeros_like(x))
    assert seen == [True, False, None]
