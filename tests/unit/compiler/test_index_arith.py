"""`index_arith.per_core_values`: an index value on every core, as MLIR's signed arith ops compute
it (truncating divisions), checked against numpy's C-style `fmod` on every sign combination."""

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr

from legato.dialects import legato as lg
from legato.transforms.index_arith import per_core_values

N = 8


def _const(v: int):
    return arith.ConstantOp(IntegerAttr(v, IndexType()))


@pytest.mark.parametrize("offset", [0, 3, -5, -20])
@pytest.mark.parametrize("divisor", [3, -3, 1, 7])
def test_signed_divisions_truncate_on_every_core(offset, divisor):
    cid = lg.CoreIdOp()
    shifted = arith.AddiOp(cid.results[0], _const(offset).results[0])
    d = _const(divisor)
    rem = arith.RemSIOp(shifted.results[0], d.results[0])
    div = arith.DivSIOp(shifted.results[0], d.results[0])
    a = np.arange(N, dtype=np.int64) + offset
    want_rem = np.fmod(a, divisor)
    want_div = (a - want_rem) // divisor
    assert per_core_values(rem.results[0], N, lg.CoreIdOp) == tuple(want_rem.tolist())
    assert per_core_values(div.results[0], N, lg.CoreIdOp) == tuple(want_div.tolist())


def test_a_zero_divisor_on_a_core_is_no_value():
    cid = lg.CoreIdOp()
    rem = arith.RemSIOp(_const(5).results[0], cid.results[0])  # core 0 divides by zero
    assert per_core_values(rem.results[0], N, lg.CoreIdOp) is None
