"""The sync proof's symmetry shortcut (`verify_sync._symmetric_proof`): a kernel whose cores
split into independent groups that are the same up to renaming cores is proven by running one
group of each kind; the result equals the full run's (`prove(..., symmetry=False)`), a bad
program is still refused with the full run's message, and groups that differ are not merged."""

from __future__ import annotations

import pytest

import legato
from legato.compiler import context
from legato.dialects import core
from legato.model import bertha
from legato.model.ir import attach_model
from legato.transforms import pipelines
from legato.transforms import verify_sync as vs

F32 = legato.types.float("float32")
G = 4  # cores per group
S = 5  # transfers per stream: more than a ring's three receive buffers
R = 8


def tt(shape, memory, dtype=F32):
    return legato.get_model().tensor_type(dtype, shape, memory)


def eight_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 8, False, 8, 1 << 30)


@legato.compile(backend=eight_cores)
def grouped_stream(a: tt([8 * R, 64 * S], "shared_dram"), out: tt([8 * R, 64], "shared_dram")):
    """Two groups of four cores; each core streams S blocks to the next core of its group (a
    ring of receive buffers with credits) and sums what it receives."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        i = c % G
        nxt = device.get_core(c - i + (i + 1) % G)
        acc = legato.tensor.full((R, 64), 0.0, F32)
        for t in legato.static_range(S):
            x = legato.tensor.load(a[c * R : (c + 1) * R, t * 64 : (t + 1) * 64], "sram")
            legato.tensor.request_load(x, nxt, "sram", 1)
            acc = acc + legato.tensor.receive_type(tt([R, 64], "sram"), 1, None, "sram")
        legato.tensor.memcpy(out[c * R : (c + 1) * R, :], acc)


@legato.compile(backend=eight_cores)
def grouped_cycle(a: tt([8 * R, 64], "shared_dram"), out: tt([8 * R, 64], "shared_dram")):
    """Each core receives from the previous core of its group before it sends to the next:
    every group waits in a cycle."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        i = c % G
        y = legato.tensor.receive_type(tt([R, 64], "sram"), 1, None, "sram")
        legato.tensor.request_load(y, device.get_core(c - i + (i + 1) % G), "sram", 1)
        legato.tensor.memcpy(out[c * R : (c + 1) * R, :], y)


@legato.compile(backend=eight_cores)
def groups_differ(a: tt([8 * R, 64], "shared_dram"), out: tt([8 * R, 64], "shared_dram")):
    """Groups of two; in the first half of the cores a core sends to its partner, in the
    second half to itself: the parts are not the same up to renaming."""
    device = legato.get_context().get_device()
    with device.get_all_cores():
        c = legato.core_id()
        x = legato.tensor.load(a[c * R : (c + 1) * R, :], "sram")
        to = c - c % 2 + (c + 1) % 2 * (1 - c // 4) + c % 2 * (c // 4)
        legato.tensor.request_load(x, device.get_core(to), "sram", 1)
        y = legato.tensor.receive_type(tt([R, 64], "sram"), 1, None, "sram")
        legato.tensor.memcpy(out[c * R : (c + 1) * R, :], y)


def _core_kernel(kernel) -> core.KernelOp:
    module = kernel.emit_module()
    attach_model(module, kernel.model)
    pipelines.legato_to_core(kernel.model).apply(context(), module)
    (k,) = [op for op in module.body.block.ops if isinstance(op, core.KernelOp)]
    return k


def _classes(kernel: core.KernelOp):
    classes = vs._symmetric_classes(vs._Proof(kernel, 8))
    return None if classes is None else sorted((len(m), n) for m, n in classes if m)


def test_isomorphic_groups_are_proven_by_one_group():
    kernel = _core_kernel(grouped_stream)
    assert _classes(kernel) == [(G, 2)]
    p = vs._Proof(kernel, 8)
    assert vs._symmetric_proof(p)
    assert [i.core for i in p.instances] == [0, 1, 2, 3]  # only the first group ran
    assert vs.prove(kernel, 8) == vs.prove(kernel, 8, symmetry=False) == []


def _message(kernel: core.KernelOp, symmetry: bool) -> str:
    with pytest.raises(legato.CompileError) as e:
        vs.verify(kernel, 8) if symmetry else _verify_full(kernel)
    return str(e.value)


def _verify_full(kernel: core.KernelOp):
    try:
        return vs.prove(kernel, 8, symmetry=False)
    except vs.SyncError as e:
        raise vs.error_at(e.op, str(e)) from None


def test_a_ring_without_credits_is_still_refused_with_the_full_runs_message():
    """The credit waits removed: a transfer can overwrite a buffer not yet received."""
    kernel = _core_kernel(grouped_stream)
    for op in list(kernel.walk()):
        if isinstance(op, core.WaitQueueOp) and op.queue.data != 1:  # a ring's credit
            op.detach()
            op.erase()
    assert _classes(kernel) == [(G, 2)]
    assert not vs._symmetric_proof(vs._Proof(kernel, 8))
    msg = _message(kernel, True)
    assert "into receive buffer" in msg and "can arrive before core" in msg
    assert msg == _message(kernel, False)


def test_a_cycle_of_waits_is_still_refused():
    kernel = _core_kernel(grouped_cycle)
    assert _classes(kernel) == [(G, 2)]
    msg = _message(kernel, True)
    assert "wait 1 of core 0 on sram queue 1 would block forever" in msg
    assert msg == _message(kernel, False)


def test_groups_that_differ_are_not_merged():
    kernel = _core_kernel(groups_differ)
    # cores 0-3: two parts of two partners; cores 4-7 send to themselves: four parts of one
    assert _classes(kernel) == [(1, 4), (2, 2)]
    assert vs.prove(kernel, 8) == vs.prove(kernel, 8, symmetry=False) == []
