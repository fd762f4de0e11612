"""The op table (`legato.opset`) is what every level derives from, and its float64 definitions
are torch's (computed in float64 by torch itself, independently)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import legato.dialects.legato as L
import legato.tensor
from legato import opset
from legato.dialects import backend as be
from legato.dialects import core
from legato.targets.bertha import isa

TORCH_F64 = {
    "abs": torch.abs,
    "erf": torch.erf,
    "log1p": torch.log1p,
    "softplus": torch.nn.functional.softplus,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "silu": torch.nn.functional.silu,
    "rsqrt": torch.rsqrt,
}


@pytest.mark.parametrize("kind", sorted(TORCH_F64))
def test_float64_definition_is_torchs(kind):
    x = np.concatenate([np.linspace(-30, 30, 2001), [-1e-8, 0.0, 1e-8, 19.999, 20.0, 20.001]])
    if kind in ("log1p", "rsqrt"):
        x = np.abs(x) + 1e-3
    ours = opset.BY_KIND[opset.UNARY, kind].f64(x)
    ref = TORCH_F64[kind](torch.from_numpy(x)).numpy()
    # gelu_tanh's 1 + tanh(..) cancels for x << 0: one ulp of tanh (numpy's vs torch's) is
    # |0.5 x| * 2^-53 absolute there, so its tail is compared absolutely
    atol = 1e-14 if kind == "gelu_tanh" else 1e-300
    np.testing.assert_allclose(ours, ref, rtol=1e-13, atol=atol)


def test_comparisons_are_masks_with_torchs_nan_rule():
    a = np.array([1.0, np.nan, 2.0, -0.0])
    b = np.array([1.0, 1.0, np.nan, 0.0])
    for kind in ("eq", "ne", "lt", "le", "gt", "ge"):
        ours = opset.BY_KIND[opset.BINARY, kind].f64(a, b)
        ref = getattr(torch, kind)(torch.from_numpy(a), torch.from_numpy(b)).double().numpy()
        np.testing.assert_array_equal(ours, ref)


def test_every_level_is_derived_from_the_rows():
    for row in opset.OPS:
        if row.family not in (opset.UNARY, opset.BINARY):
            continue
        kinds = core.VPU_UNARY_KINDS if row.family == opset.UNARY else core.VPU_BINARY_KINDS
        assert row.kind in kinds
        cls = be.BY_MNEMONIC[row.mnemonic]
        assert cls.ROW is row and cls.name == row.backend_op_name
        info = isa.BY_MNEMONIC[row.mnemonic]
        assert (info.opcode, info.format) == (row.opcode, row.format)
        assert (row.mnemonic in isa.VPU_TRANSCENDENTAL) == (row.cost == opset.TRANSCENDENTAL)
        if row.name is not None:
            assert L.ELEMENTWISE_OPS[row.name].ROW is row
            assert L.ELEMENTWISE_OPS[row.name].name == f"legato.{row.name}"
            assert str(legato.tensor.SIGNATURES[row.name]) == (
                "(a, b)" if row.arity == 2 else "(x)"
            )


def test_opcodes_are_unique_across_the_isa():
    assert len({o.opcode for o in isa.OPS}) == len(isa.OPS)
