"""A wrong lowering is reported at the first legato op whose value the core level does not
reproduce (the issue's "first op whose value diverges")."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)

from legato.interp import differential as diff
from legato.interp.first_divergence import first_divergent_op
from tests.corpus.kernels import _F, CORPUS, shaped

CHAIN = shaped(
    "mul_then_exp",
    [[4, 32], [4, 32]],
    [4, 32],
    f"%m = legato.mul %x0, %x1 : {_F([4, 32])}, {_F([4, 32])} -> {_F([4, 32])}\n"
    f"%r = legato.exp %m : {_F([4, 32])}",
    lambda x, y: (x * y).exp(),
)


def test_agreeing_levels_report_nothing():
    assert first_divergent_op(CHAIN) is None
    assert first_divergent_op(next(k for k in CORPUS if k.name == "seed_matmul")) is None


def test_a_miscompiled_mul_is_named_at_the_mul(monkeypatch):
    from legato.dialects import legato as lg
    from legato.transforms import lower_tensor_ops

    # inject a compiler bug: legato.mul lowers to the VPU's max
    monkeypatch.setitem(lower_tensor_ops.BINARY_KINDS, lg.MulOp, "max")
    msg = first_divergent_op(CHAIN)
    assert msg is not None
    assert msg.startswith("first diverging op: legato.mul at <mul_then_exp>:")
    assert "on core(0): element [" in msg


def test_check_reports_the_first_op(monkeypatch):
    base = diff.run_level(CHAIN, "legato", None)
    broken = [a.copy() for a in base]
    broken[2].reshape(-1)[0] = np.float32(123)
    compiled = diff.compile_corpus_kernel(CHAIN, record_passes=False)
    with pytest.raises(diff.DivergenceError) as e:
        diff.check(CHAIN, {"legato": base, "core": broken}, compiled)
    # the pipeline itself is right, so the op-level comparison finds nothing wrong
    assert "every intermediate IR agrees" in str(e.value)
