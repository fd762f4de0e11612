"""The language's use of PIM (docs/pim.md): `x @ w` with `w` in `pim_dram` lowers to the PIM
units on a chip with use_pim, and is refused, naming the problem, elsewhere. (Agreement of
every level with numpy is the corpus's: tests/corpus/pim_kernels.py.)"""

import numpy as np
import pytest

import legato
from legato.errors import CompileError, LegatoValueError
from legato.model import bertha
from legato.targets.bertha.arch import pim

BF16 = legato.types.float("bfloat16")
BF = BF16.numpy


def with_pim(ctx):
    return bertha.Bertha(ctx, "bertha", 1, True, 8, 1 << 30)


def without_pim(ctx):
    return bertha.Bertha(ctx, "bertha", 1, False, 8, 1 << 30)


def matvec(
    x: legato.get_model().tensor_type(BF16, [1, 64], "shared_dram"),
    w: legato.get_model().tensor_type(BF16, [64, 16], "pim_dram"),
    out: legato.get_model().tensor_type(BF16, [1, 16], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") @ w)


def two_rows(
    x: legato.get_model().tensor_type(BF16, [2, 64], "shared_dram"),
    w: legato.get_model().tensor_type(BF16, [64, 16], "pim_dram"),
    out: legato.get_model().tensor_type(BF16, [2, 16], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") @ w)


def _args(rows=1):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 64)).astype(BF)
    w = rng.standard_normal((64, 16)).astype(BF)
    return x, w, np.zeros((rows, 16), BF)


def test_matvec_runs_on_the_pim_units():
    kernel = legato.compile(backend=with_pim)(matvec)
    x, w, out = _args()
    kernel(x, w, out)
    want = (x.astype(np.float32) @ w.astype(np.float32)).astype(BF)
    np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32), rtol=2**-7)
    run = kernel.last_run
    # 8 units of 2 columns each read their 64 x 2 bf16 weights inside their channels
    assert run.pim_bytes == 64 * 16 * 2
    assert run.unit_busy["core0"]["pim"] == 8 * pim.op_cycles(kernel.model, 64, 2)


def test_a_pim_dram_weight_needs_a_chip_with_pim():
    kernel = legato.compile(backend=without_pim)(matvec)
    with pytest.raises(CompileError, match="pim_dram, but bertha has no PIM units"):
        kernel(*_args())


def test_pim_computes_matrix_vector_products_only():
    kernel = legato.compile(backend=with_pim)(two_rows)
    with pytest.raises(CompileError, match="the left operand must have one row"):
        kernel(*_args(rows=2))


def test_a_pim_dram_argument_is_laid_out_only_for_a_chip_with_pim():
    w = np.zeros((64, 16), BF)
    assert pim.pack_argument(with_pim(None), w, "w").size == pim.PimLayout(64, 16, 8).nbytes
    with pytest.raises(LegatoValueError, match="w is in pim_dram, but bertha has no PIM units"):
        pim.pack_argument(without_pim(None), w, "w")
    with pytest.raises(LegatoValueError, match="a 2-D bf16 weight, got float32"):
        pim.pack_argument(with_pim(None), w.astype(np.float32), "w")
