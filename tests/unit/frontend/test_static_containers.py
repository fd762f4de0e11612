"""Tuples and lists of tensors built in static loops (issue 18 item 6): `append`, list
comprehensions, generator expressions and `parts[i] = t` are unrolled at compile time; the
same inside a runtime loop is refused with the idiom that works."""

from __future__ import annotations

import numpy as np
import pytest

import legato
import legato.model.bertha as bertha

F32 = legato.types.float("float32")
T = legato.get_model().tensor_type(F32, [4, 64], "shared_dram")
D = legato.get_model().tensor_type(F32, ((-1, 4), 64), "shared_dram")
X = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
# row i times (i + 1): the order of the list is the order of the loop
WANT = X * np.arange(1, 5, dtype=np.float32)[:, None]


@legato.function
def row(x, i):
    return legato.tensor.load(x[i : i + 1, :]) * float(i + 1)


@legato.compile(backend=bertha)
def appended(x: T, out: T):
    device = legato.get_context().get_device()
    with device.get_core(0):
        parts = []
        for i in legato.static_range(4):
            parts.append(row(x, i))
        assert len(parts) == 4
        legato.tensor.memcpy(out, legato.tensor.cat(parts, 0))


@legato.compile(backend=bertha)
def list_comp(x: T, out: T):
    device = legato.get_context().get_device()
    with device.get_core(0):
        parts = [row(x, i) for i in legato.static_range(4)]
        legato.tensor.memcpy(out, legato.tensor.cat(parts, 0))


@legato.compile(backend=bertha)
def generator(x: T, out: T):
    device = legato.get_context().get_device()
    with device.get_core(0):
        # two clauses and an `if`: rows 0..3, then keep the even ones first
        evens = tuple(row(x, i) for i in range(4) if i % 2 == 0)
        odds = tuple(row(x, i) for j in (1, 3) for i in range(j, j + 1))
        lo = legato.tensor.cat((evens[0], odds[0], evens[1], odds[1]), 0)
        legato.tensor.memcpy(out, lo)


@legato.compile(backend=bertha)
def indexed(x: T, out: T):
    device = legato.get_context().get_device()
    with device.get_core(0):
        parts = [None] * 4
        for i in reversed(range(4)):
            parts[i] = row(x, i)
        legato.tensor.memcpy(out, legato.tensor.cat(list(parts), 0))


@pytest.mark.parametrize("kernel", [appended, list_comp, generator, indexed], ids=lambda k: k.name)
def test_a_list_of_tensors_built_in_a_static_loop(kernel):
    out = np.zeros_like(X)
    kernel(X, out)
    np.testing.assert_array_equal(out, WANT)


def test_the_comprehension_variable_does_not_leak():
    @legato.compile(backend=bertha)
    def leak(x: T, out: T):
        device = legato.get_context().get_device()
        with device.get_core(0):
            i = 3
            parts = [row(x, i) for i in range(3)]
            legato.tensor.memcpy(out, legato.tensor.cat((*parts, row(x, i)), 0))

    out = np.zeros_like(X)
    leak(X, out)
    np.testing.assert_array_equal(out, WANT)


def test_appending_in_a_runtime_loop_names_what_works():
    @legato.compile(backend=bertha)
    def runtime(x: D, out: T):
        device = legato.get_context().get_device()
        with device.get_core(0):
            parts = []
            for i in range(x.size(0)):
                parts.append(legato.tensor.load(x[i : i + 1, :]))
            legato.tensor.memcpy(out, legato.tensor.cat(parts, 0))

    with pytest.raises(legato.CompileError) as e:
        runtime(X, np.zeros_like(X))
    msg = str(e.value)
    assert "list.append of a tensor is not supported inside a runtime loop" in msg
    assert "legato.static_range" in msg and "parts.append" in msg  # the caret line


def test_a_comprehension_over_a_runtime_range_names_what_works():
    @legato.compile(backend=bertha)
    def runtime(x: D, out: T):
        device = legato.get_context().get_device()
        with device.get_core(0):
            parts = [legato.tensor.load(x[i : i + 1, :]) for i in range(x.size(0))]
            legato.tensor.memcpy(out, legato.tensor.cat(parts, 0))

    with pytest.raises(legato.CompileError, match="a comprehension unrolls at compile time"):
        runtime(X, np.zeros_like(X))
