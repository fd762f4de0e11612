"""Compile-time proofs of a kernel's synchronisation on the core IR (issue 18 item 4,
`legato/transforms/verify_sync.py`), from kernels written in the DSL: each property violated
once (a receive whose send never runs, a semaphore short of posts or posted in an order that
cannot happen, barrier participants that disagree, a receive buffer refilled while in use),
each refused at compile time with both source lines; what only the run can settle is logged
with its line; and the whole differential corpus is proven, nothing left to the run."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import legato
from legato.compiler import context, prove_sync
from legato.dialects import core
from legato.model import bertha
from legato.model.ir import attach_model
from legato.transforms import pipelines
from legato.transforms import verify_sync as vs

F32 = legato.types.float("float32")
BF = legato.types.float("bfloat16")


def tt(shape, memory, dtype=F32):
    return legato.get_model().tensor_type(dtype, shape, memory)


def four_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 4, False, 8, 1 << 30)


def two_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 2, False, 8, 1 << 30)


@legato.compile(backend=bertha)
def short_of_posts(x: tt([1, 8], "shared_dram")):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.sync.signal(device.get_core(0), 0, 1)
    with device.get_core(0):
        legato.sync.wait(0, 2)


@legato.compile(backend=bertha)
def enough_posts(x: tt([1, 8], "shared_dram")):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.sync.signal(device.get_core(0), 0, 1)
        legato.sync.signal(device.get_core(0), 0, 1)
    with device.get_core(0):
        legato.sync.wait(0, 2)


@legato.compile(backend=bertha)
def crossed_semaphores(x: tt([1, 8], "shared_dram")):
    """Each side waits for what the other signals after its own wait: counts match, order
    cannot happen."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.sync.wait(1, 1)
        legato.sync.signal(device.get_core(0), 0, 1)
    with device.get_core(0):
        legato.sync.wait(0, 1)
        legato.sync.signal(device.get_top(), 1, 1)


@legato.compile(backend=bertha)
def send_behind_a_wait(x: tt([1, 8], "shared_dram"), out: tt([1, 8], "shared_dram")):
    """top sends only after core 0 signals, and core 0 signals only after it received."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.sync.wait(1, 1)
        legato.tensor.request_load(x, device.get_core(0), "sram", 0)
    with device.get_core(0):
        y = legato.tensor.receive(x, 0, "sram")
        legato.sync.signal(device.get_top(), 1, 1)
        legato.tensor.memcpy(out, y)


@legato.compile(backend=four_cores)
def barrier_per_core_count(x: tt([1, 8], "shared_dram")):
    """Core c runs the barrier c times: core 0 never arrives."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        for _s in range(c):
            legato.sync.barrier()


@legato.compile(backend=two_cores)
def streamed(a: tt([5, 8, 64], "shared_dram"), out: tt([8, 64], "shared_dram")):
    """Five transfers core 0 -> core 1 through a ring of three receive buffers."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        for t in legato.static_range(5):
            legato.tensor.request_load(legato.tensor.load(a[t]), device.get_core(1), "sram", 1)
    with device.get_core(1):
        acc = legato.tensor.full((8, 64), 0.0, F32)
        for _t in legato.static_range(5):
            x = legato.tensor.receive_type(tt([8, 64], "sram"), 1, None, "sram")
            acc = acc + x
        legato.tensor.memcpy(out, acc)


@legato.compile(backend=bertha)
def posts_in_a_runtime_loop(x: tt([(-1, 8), 8], "shared_dram")):
    device = legato.get_context().get_device()
    with device.get_top():
        for _i in range(x.size(0)):
            legato.sync.signal(device.get_core(0), 2, 1)
    with device.get_core(0):
        legato.sync.wait(2, 3)


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, t in enumerate(lines) if text in t)


def _core_module(kernel):
    module = kernel.emit_module()
    attach_model(module, kernel.model)
    pipelines.legato_to_core(kernel.model).apply(context(), module)
    return module


def _compile_error(kernel) -> str:
    with pytest.raises(legato.CompileError) as e:
        kernel.compile()
    return str(e.value)


def test_a_wait_without_enough_posts_names_both_lines():
    msg = _compile_error(short_of_posts)
    post, wait = _line(short_of_posts, "sync.signal("), _line(short_of_posts, "sync.wait(")
    assert msg.startswith(f"{__file__}:{wait}:")  # the error is at the wait
    assert (
        f"core.sem_wait: the kernel posts semaphore 0 of core(0) only 1 time(s), the last post at "
        f"{__file__}:{post}, but waits for it 2 time(s): a wait would block forever" in msg
    )


def test_enough_posts_compile_and_run():
    enough_posts(np.zeros((1, 8), np.float32))
    assert enough_posts.last_run.cycles > 0


def test_semaphores_posted_in_an_order_that_cannot_happen():
    """Counting alone passes this kernel; the order does not."""
    msg = _compile_error(crossed_semaphores)
    top_wait = _line(crossed_semaphores, "legato.sync.wait(1, 1)")
    core_wait = _line(crossed_semaphores, "legato.sync.wait(0, 1)")
    core_post = _line(crossed_semaphores, "legato.sync.signal(device.get_top(), 1, 1)")
    assert msg.startswith(f"{__file__}:{top_wait}:")
    assert (
        f"core.sem_wait: this wait of top for semaphore 1 of top would block forever: the post "
        f"that would release it, at {__file__}:{core_post} (core 0), comes after core 0 waits "
        f"at {__file__}:{core_wait} for semaphore 0 of core(0), which never returns" in msg
    )


def test_a_receive_whose_send_comes_after_a_wait_that_never_returns():
    msg = _compile_error(send_behind_a_wait)
    top_wait = _line(send_behind_a_wait, "legato.sync.wait(1, 1)")
    recv = _line(send_behind_a_wait, "legato.tensor.receive(")
    post = _line(send_behind_a_wait, "legato.sync.signal(")
    assert msg.startswith(f"{__file__}:{top_wait}:")
    assert (
        f"the post that would release it, at {__file__}:{post} (core 0), comes after core 0 "
        f"waits at {__file__}:{recv} on sram queue 0, which never returns" in msg
    )


def test_barrier_participants_that_disagree():
    msg = _compile_error(barrier_per_core_count)
    at = _line(barrier_per_core_count, "legato.sync.barrier()")
    assert msg.startswith(f"{__file__}:{at}:")
    assert (
        f"core.barrier 0 waits for 4 modules but only 3 arrive (core 1, core 2, core 3 at "
        f"{__file__}:{at}): it would block forever" in msg
    )


def test_the_ring_of_receive_buffers_is_proven_and_refused_without_its_credits():
    """Queue capacity: the compiler's ring (three buffers, credits) is proven; the same core IR
    without the sender's credit waits would refill a buffer before it was received, and is
    refused at the send with the earlier send's line."""
    module = _core_module(streamed)
    (kernel,) = [op for op in module.body.block.ops if isinstance(op, core.KernelOp)]
    assert vs.prove(kernel, 2) == []
    sender = kernel.programs[0]
    credits = [
        op
        for op in sender.walk()
        if isinstance(op, core.WaitQueueOp) and op.queue.data != 1  # the credit queue
    ]
    assert len(credits) == 2  # before transfers 3 and 4
    for op in credits:
        op.detach()
        op.erase()
    with pytest.raises(legato.CompileError) as e:
        vs.verify(kernel, 2)
    send = _line(streamed, "legato.tensor.request_load(")
    msg = str(e.value)
    assert msg.startswith(f"{__file__}:{send}:")
    assert (
        f"core.dma: transfer 2 into receive buffer xfer0_slot0 on core 1 can arrive before "
        f"core 1 received transfer 1 (sent at {__file__}:{send})" in msg
    )


def test_straight_line_waits_are_all_settled(caplog):
    """Nothing is left to the emulator, nothing logged."""
    with caplog.at_level("INFO", logger="legato.sync"):
        assert prove_sync(_core_module(enough_posts), enough_posts.model) == []
    assert not caplog.records


def test_runtime_addressed_sends_are_proven_per_core(caplog):
    """A send to a core computed from core_id (the SPMD ring) is evaluated on every core: the
    backend level could not settle its receives, the core level proves them."""
    from tests.corpus.runtime_kernels import spmd_ring

    with caplog.at_level("INFO", logger="legato.sync"):
        assert prove_sync(_core_module(spmd_ring), spmd_ring.model) == []
    assert not caplog.records


def test_waits_a_runtime_loop_decides_are_logged_with_their_lines(caplog, tmp_path, monkeypatch):
    """A loop whose trip count is a runtime value makes its semaphore's count dynamic: the
    wait compiles, and the user is told which wait is left to the run and why."""
    # a compile, not a hit of an earlier run's cache entry (the proof logs when it runs)
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    legato.jit.clear_memory_cache()
    with caplog.at_level("INFO", logger="legato.sync"):
        posts_in_a_runtime_loop.compile()
    loop = _line(posts_in_a_runtime_loop, "for _i in range(")
    wait = _line(posts_in_a_runtime_loop, "legato.sync.wait(")
    (record,) = [r for r in caplog.records if r.name == "legato.sync"]
    assert record.getMessage() == (
        "kernel posts_in_a_runtime_loop: 1 wait(s) not proven released at compile time, left "
        f"to the emulator's deadlock report: core.sem_wait at {__file__}:{wait} (semaphore 2 of core(0): "
        f"the loop at {__file__}:{loop} runs a runtime number of times)"
    )


def test_the_whole_corpus_is_proven():
    """Every differential corpus kernel passes the proofs with nothing left to the run."""
    from legato.interp.differential import parse_module
    from tests.corpus.kernels import CORPUS

    proven = 0
    for k in CORPUS:
        module = parse_module(k.mlir, k.name)
        model = k.get_model()
        attach_model(module, model)
        try:
            pipelines.legato_to_core(model).apply(context(), module)
        except legato.CompileError:
            continue  # an entry the compiler refuses on purpose (its own test says so)
        (kernel,) = [op for op in module.body.block.ops if isinstance(op, core.KernelOp)]
        assert vs.prove(kernel, model.num_cores) == [], k.name
        proven += 1
    assert proven >= len(CORPUS) - 1
