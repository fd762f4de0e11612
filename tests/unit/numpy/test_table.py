"""Every ufunc translation of `legato.numpy.table.UFUNCS` computes what NumPy computes, on
tensors and, for the binary ones, with a Python number on either side (as NumPy's ufuncs take
one): the table is data, so one check covers each row."""

import numpy as np
import pytest
import torch

from legato.numpy.table import UFUNCS


def _operands(ufunc, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 4)).astype(np.float32)
    if ufunc in (np.log, np.sqrt, np.power, np.reciprocal):
        x = np.abs(x) + np.float32(0.5)  # inside the domain
    if ufunc is np.matmul:
        y = y.T.copy()
    return x, y


@pytest.mark.parametrize(
    "ufunc", sorted(UFUNCS, key=lambda u: u.__name__), ids=lambda u: u.__name__
)
def test_each_ufunc_translation_agrees_with_numpy(ufunc):
    rng = np.random.default_rng(0)
    x, y = _operands(ufunc, rng)
    translate = UFUNCS[ufunc]
    cases = [((x,), (torch.from_numpy(x),))]
    if ufunc.nin == 2:
        cases = [((x, y), (torch.from_numpy(x), torch.from_numpy(y)))]
        if ufunc is not np.matmul:
            cases += [
                ((x, 1.5), (torch.from_numpy(x), 1.5)),
                ((1.5, y), (1.5, torch.from_numpy(y))),
            ]
    for np_args, torch_args in cases:
        want = ufunc(*np_args)
        got = translate(*torch_args)
        assert got.shape == want.shape, (ufunc.__name__, np_args)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6, err_msg=ufunc.__name__)
