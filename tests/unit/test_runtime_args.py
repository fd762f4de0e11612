"""Kernel arguments at run time (legato/jit.py + the Bertha runtime): every mismatch is a clear
error naming the argument before anything compiles or runs; non-contiguous tensors are copied
in and written back; aliased arguments are handled (inputs are read as they were at the call)
or refused (two written arguments sharing memory)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import legato
from legato.errors import LegatoRuntimeError
from legato.model import bertha

f32 = legato.types.float("float32")
bf16 = legato.types.float("bfloat16")


def tt(shape, dtype=f32):
    return legato.get_model().tensor_type(dtype, shape, "shared_dram")


def two_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 2, False, 4, 1 << 30)


@legato.compile(backend=two_cores)
def scale(x: tt([(-1, 8), 16]), out: tt([8, 16])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * 2.0 + 1.0)


@legato.compile(backend=two_cores)
def add(x: tt([4, 8]), y: tt([4, 8]), out: tt([4, 8])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") + legato.tensor.load(y, "sram"))


@legato.compile(backend=two_cores)
def split(x: tt([4, 8]), o1: tt([4, 8]), o2: tt([4, 8])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        v = legato.tensor.load(x, "sram")
        legato.tensor.memcpy(o1, v + 1.0)
        legato.tensor.memcpy(o2, v * 3.0)


def _x(n=5):
    return torch.arange(n * 16, dtype=torch.float32).reshape(n, 16) / 7


# ---- clear errors before anything runs ----------------------------------------------------


@pytest.mark.parametrize(
    "args, fragment",
    [
        (
            lambda: (_x(), torch.zeros(8, 16, dtype=torch.bfloat16)),
            "argument 'out' of kernel scale",
        ),
        (lambda: (_x().double(), torch.zeros(8, 16)), "argument 'x' of kernel scale"),
        (lambda: (_x(), torch.zeros(8, 17)), "argument 'out' of kernel scale"),
        (lambda: (_x()[None], torch.zeros(8, 16)), "argument 'x' of kernel scale"),
        (lambda: (_x(9), torch.zeros(8, 16)), "argument 'x' of kernel scale"),
        (lambda: (_x(),), "kernel scale"),
        (lambda: (_x(), torch.zeros(8, 16), torch.zeros(1)), "kernel scale"),
        (lambda: (_x().tolist(), torch.zeros(8, 16)), "argument 'x' of kernel scale"),
        (lambda: (_x(), 3.0), "argument 'out' of kernel scale"),
    ],
)
def test_bad_arguments_are_refused_before_running(args, fragment, monkeypatch):
    from legato.targets.bertha import runtime

    monkeypatch.setattr(runtime, "Emulator", None)  # anything that got as far as running fails
    with pytest.raises(LegatoRuntimeError, match=fragment):
        scale(*args())


def test_messages_say_what_differs():
    cases = [
        (
            (_x(), torch.zeros(8, 16, dtype=torch.bfloat16)),
            "dtype mismatch: expected f32 (torch.float32), got bf16 (torch.bfloat16)",
        ),
        ((_x(), torch.zeros(8, 17)), "dim 1 must be 16"),
        ((_x()[None], torch.zeros(8, 16)), "expected a rank-2 tensor"),
        ((_x(9), torch.zeros(8, 16)), "dim 0 is 9, above its declared upper bound 8"),
        ((_x(),), "takes 2 argument(s) (x, out)"),
        ((_x(), 3.0), "expected a torch tensor or numpy array"),
    ]
    for args, fragment in cases:
        with pytest.raises(LegatoRuntimeError) as info:
            scale(*args)
        assert fragment in str(info.value), str(info.value)


# ---- non-contiguous tensors: copied in, written back ---------------------------------------


def test_non_contiguous_torch_and_numpy():
    x = _x(8).t().contiguous().t()[:5]  # column-major storage, 5 of 8 rows
    assert not x.is_contiguous()
    big = torch.full((8, 32), -1.0)
    out = big[:, ::2]  # every other column: not contiguous
    scale(x, out)
    assert torch.equal(out[:5], x * 2 + 1)
    assert (big[:, 1::2] == -1).all()  # the gaps are untouched
    xn = x.numpy()
    outn = np.full((16, 8), -1.0, np.float32).T  # a transposed view
    scale(xn, outn)
    np.testing.assert_array_equal(outn[:5], xn * 2 + 1)


def test_non_contiguous_bf16():
    @legato.compile(backend=two_cores)
    def cast(x: tt([4, 8], bf16), out: tt([4, 8], bf16)):
        device = legato.get_context().get_device()
        with device.get_core(0):
            legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * 2.0)

    x = torch.randn(8, 4).bfloat16().t()
    out = torch.zeros(8, 4, dtype=torch.bfloat16).t()
    cast(x, out)
    assert torch.equal(out, x * 2)


# ---- aliasing -----------------------------------------------------------------------------


def test_input_aliasing_an_output_reads_the_values_at_the_call():
    a = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    expected = a + a
    add(a, a, a)  # like torch.add(a, a, out=a)
    assert torch.equal(a, expected)
    b = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    y = b.clone()
    add(b, y, b)  # in place: b += y
    assert torch.equal(b, y * 2)


def test_overlapping_views_as_input_and_output():
    base = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    x, out = base[:4], base[1:]  # rows 1..3 shared
    expected = x + x
    add(x, x, out)
    assert torch.equal(base[1:], expected)


def test_two_written_arguments_sharing_memory_are_refused():
    x = torch.ones(4, 8)
    o = torch.zeros(4, 8)
    with pytest.raises(
        LegatoRuntimeError,
        match="arguments 'o1' and 'o2' overlap in memory and the kernel writes both",
    ):
        split(x, o, o)
    base = torch.zeros(5, 8)
    with pytest.raises(LegatoRuntimeError, match="'o1' and 'o2' overlap"):
        split(x, base[:4], base[1:])
    assert (o == 0).all() and (base == 0).all()  # nothing ran
    # disjoint views of one storage are fine
    base = torch.zeros(8, 8)
    split(x, base[:4], base[4:])
    assert (base[:4] == 2).all() and (base[4:] == 3).all()
    # numpy: interleaved columns do not overlap, the same columns do
    nb = np.zeros((4, 16), np.float32)
    split(x.numpy(), nb[:, ::2], nb[:, 1::2])
    assert (nb[:, ::2] == 2).all() and (nb[:, 1::2] == 3).all()
    with pytest.raises(LegatoRuntimeError, match="overlap"):
        split(x.numpy(), nb[:, ::2], nb[:, ::2])


def test_read_only_output_is_refused():
    out = np.zeros((4, 8), np.float32)
    out.flags.writeable = False
    x = np.ones((4, 8), np.float32)
    with pytest.raises(
        LegatoRuntimeError, match="argument 'out' is read-only but the kernel writes"
    ):
        add(x, x, out)
    add(x, x.copy(), np.zeros((4, 8), np.float32))  # read-only inputs are fine:
    ro = np.ones((4, 8), np.float32)
    ro.flags.writeable = False
    res = np.zeros((4, 8), np.float32)
    add(ro, ro, res)
    assert (res == 2).all()
