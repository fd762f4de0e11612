"""Slices with a step (`x[:, 1::2]`, `x[1:8:3]`): a copy in the core's memory made by strided
DMAs (from core memory or straight out of DRAM), compared with torch; writing into one, or
slicing with a step on top, is refused at the user's line (issue 13, item 3)."""

from __future__ import annotations

import inspect

import pytest
import torch

import legato
import legato.model.bertha as bertha
from legato.errors import CompileError

f32 = legato.types.float("float32")
bf16 = legato.types.float("bfloat16")
HERE = inspect.getsourcefile(inspect.currentframe())  # type: ignore[arg-type]


def tt(shape, dtype=f32, memory="shared_dram"):
    return legato.get_model().tensor_type(dtype, shape, memory)


@legato.compile(backend=bertha)
def rotary_halves(x: tt([8, 64], bf16), even: tt([8, 32], bf16), odd: tt([8, 32], bf16)):
    device = legato.get_context().get_device()
    with device.get_core(0):
        xs = legato.tensor.load(x)
        legato.tensor.memcpy(even, xs[:, 0::2])  # from core memory
        legato.tensor.memcpy(odd, legato.tensor.load(x[:, 1::2]))  # gathered out of DRAM


@legato.compile(backend=bertha)
def every_third_row_scaled(x: tt([10, 30]), out: tt([3, 7])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        xs = legato.tensor.load(x)
        legato.tensor.memcpy(out, xs[1:10:3, 3:30:4] * 2.0)


def test_strided_slices_match_torch():
    x = torch.randn(8, 64).to(torch.bfloat16)
    even, odd = torch.zeros(8, 32, dtype=torch.bfloat16), torch.zeros(8, 32, dtype=torch.bfloat16)
    rotary_halves(x, even, odd)
    assert torch.equal(even, x[:, 0::2]) and torch.equal(odd, x[:, 1::2])
    x = torch.randn(10, 30)
    out = torch.zeros(3, 7)
    every_third_row_scaled(x, out)
    assert torch.equal(out, x[1:10:3, 3:30:4] * 2.0)


def test_strided_slices_agree_on_every_level():
    x = torch.randn(10, 30)
    want = x[1:10:3, 3:30:4] * 2.0
    for level in ("legato", "core", "backend"):
        out = torch.zeros(3, 7)
        every_third_row_scaled.interpret(x, out, level=level)
        assert torch.equal(out, want), level


@legato.compile(backend=bertha)
def odd_lanes_of_runtime_rows(x: tt(((-1, 16), 64)), out: tt(((-1, 16), 32))):
    device = legato.get_context().get_device()
    with device.get_core(0):
        xs = legato.tensor.load(x)
        legato.tensor.memcpy(out, xs[:, 1::2] + 1.0)


@pytest.mark.parametrize("rows", [3, 16])
def test_a_strided_slice_of_a_dynamic_dim_tensor_is_one_binary(rows):
    x = torch.randn(rows, 64)
    out = torch.zeros(rows, 32)
    odd_lanes_of_runtime_rows(x, out)
    assert torch.equal(out, x[:, 1::2] + 1.0)
    for level in ("legato", "core", "backend"):
        again = torch.zeros(rows, 32)
        odd_lanes_of_runtime_rows.interpret(x, again, level=level)
        assert torch.equal(again, out), level
    assert odd_lanes_of_runtime_rows.compile_count <= 1


def _line(tag: str) -> int:
    (n,) = [i for i, s in enumerate(open(HERE).read().splitlines(), 1) if s.endswith(tag)]
    return n


@legato.compile(backend=bertha)
def write_through_a_step(x: tt([8, 64]), out: tt([8, 64])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        xs = legato.tensor.load(x)
        buf = legato.tensor.load(out)
        legato.tensor.memcpy(buf[:, ::2], xs[:, 0:32])  # ss:write
        legato.tensor.memcpy(out, buf)


@legato.compile(backend=bertha)
def step_on_top(x: tt([8, 64]), out: tt([8, 32])):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x[:, ::2], device.get_core(0), "sram")  # ss:top
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.receive(x[:, ::2], 0, "sram"))


@pytest.mark.parametrize(
    ("kernel", "tag", "fragment"),
    [
        (write_through_a_step, "# ss:write", "writing into a slice with a step is not supported"),
        (step_on_top, "# ss:top", "a slice with a step (strides [1, 2]) on top"),
    ],
)
def test_what_a_copy_cannot_do_is_refused_at_the_line(kernel, tag, fragment):
    with pytest.raises(CompileError) as ei:
        kernel.compile()
    text = str(ei.value)
    assert fragment in text, text
    assert f"{HERE}:{_line(tag)}:" in text, text
