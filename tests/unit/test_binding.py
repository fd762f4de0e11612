"""One argument binder (legato.binding): the JIT, the interpreters and the runtime refuse the same
bad argument with the same message, as one error family (`ArgumentError`, a
`LegatoRuntimeError`), and bind arguments the same way."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "frontend"))

from frontend_helpers import SEED_KERNEL, load_source, use_cache_dir

import legato
from legato.binding import bind, check_writes
from legato.errors import ArgumentError, LegatoRuntimeError
from legato.interp import run as interpret
from legato.interp.errors import InterpArgumentError
from legato.numerics import matmul_acc
from legato.targets.bertha.abi import ABIError
from legato.targets.bertha.runtime import run_binary

BF16 = ml_dtypes.bfloat16


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    kernel = load_source(tmp_path_factory.mktemp("k"), SEED_KERNEL).simple_matmul
    return kernel, kernel.compile()


def _args(n=4, seed=0):
    g = np.random.default_rng(seed)
    a = g.standard_normal((n, 256)).astype(BF16)
    b = g.standard_normal((256, 128)).astype(BF16)
    return a, b, np.zeros((10, 128), BF16)


BAD = {
    "over-bound": lambda a, b, out: (np.zeros((11, 256), BF16), b, out),
    "static-dim": lambda a, b, out: (a, b, np.zeros((10, 64), BF16)),
    "rank": lambda a, b, out: (a[None], b, out),
    "dtype": lambda a, b, out: (a, b.astype(np.float32), out),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_jit_interpreters_and_runtime_refuse_alike(compiled, case, tmp_path, monkeypatch):
    use_cache_dir(tmp_path, monkeypatch)
    kernel, artifacts = compiled
    args = BAD[case](*_args())
    errors = []
    for call, family in (
        (lambda: kernel(*args), ArgumentError),
        (
            lambda: interpret(artifacts.mlir, "legato", list(args), kernel.model),
            InterpArgumentError,
        ),
        (
            lambda: interpret(artifacts.core_ir, "core", list(args), kernel.model),
            InterpArgumentError,
        ),
        (lambda: run_binary(artifacts.binary, kernel.model, list(args)), ABIError),
    ):
        with pytest.raises(family) as info:
            call()
        assert isinstance(info.value, ArgumentError) and isinstance(info.value, LegatoRuntimeError)
        errors.append(str(info.value))
    # each names the argument its own way ("argument 'a' of kernel ...", "kernel '...' argument
    # 0", "argument 'a'"); what follows is the binder's, word for word
    tails = {e.split(": ", 1)[1] if "]: " not in e else e.split("]: ", 1)[1] for e in errors}
    assert len(tails) == 1, errors


def test_interpreters_take_a_read_only_input(compiled):
    """A read-only numpy input is copied and never written back (it used to fail at the end of
    the run, writing the copy back into the read-only array)."""
    kernel, artifacts = compiled
    a, b, out = _args()
    b.setflags(write=False)
    interpret(artifacts.mlir, "legato", [a, b, out], kernel.model)
    want = np.asarray(matmul_acc(a, b), np.float32).astype(BF16)
    np.testing.assert_array_equal(out[:4].view(np.uint16), want.view(np.uint16))


def test_bind_shares_memory_when_it_can_and_writes_copies_back():
    x = np.zeros((4, 8), np.float32)
    assert bind(x).value is x and not bind(x).writeback
    view = x[:, ::2]
    b = bind(view)
    assert b.value.flags.c_contiguous and b.writeback
    b.value[...] = 1
    b.finish()
    assert (x[:, ::2] == 1).all() and (x[:, 1::2] == 0).all()
    ro = np.zeros(3, np.float32)
    ro.setflags(write=False)
    assert not bind(ro).writeback


def test_check_writes_refuses_read_only_and_overlapping_outputs():
    x = np.zeros(8, np.float32)
    with pytest.raises(ArgumentError, match="'o1' and 'o2' overlap in memory"):
        check_writes([("o1", x[:5]), ("o2", x[4:])])
    check_writes([("o1", x[:4]), ("o2", x[4:])])
    ro = np.zeros(3, np.float32)
    ro.setflags(write=False)
    with pytest.raises(ArgumentError, match="'o' is read-only but the kernel writes it"):
        check_writes([("o", ro)])


def test_the_public_error_family():
    assert issubclass(ArgumentError, legato.LegatoRuntimeError)
    assert issubclass(ABIError, ArgumentError) and issubclass(InterpArgumentError, ArgumentError)
