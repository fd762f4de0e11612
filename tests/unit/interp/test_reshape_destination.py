"""A memcpy into the reshape of an argument's slice writes the argument at every level (the
legato interpreter used to copy every reshape, so the write was lost there only)."""

import pytest
import torch

import legato
from legato.model import bertha

f32 = legato.types.float("float32")


def tt(shape):
    return legato.get_model().tensor_type(f32, shape, "shared_dram")


@legato.compile(backend=bertha)
def into_reshaped_slice(a: tt([1, 64]), out: tt([4, 2, 64])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        x = legato.tensor.load(a)
        for i in range(out.size(0)):  # a runtime loop: the slice's offset is a runtime index
            legato.tensor.memcpy(legato.tensor.reshape(out[i : i + 1, 1:2, :], (1, 64)), x * 2.0)


@pytest.mark.parametrize("level", ["legato", "core", "backend", "binary"])
def test_memcpy_into_reshape_of_slice_reaches_the_argument(level):
    a = torch.randn(1, 64)
    out = torch.zeros(4, 2, 64)
    if level == "binary":
        into_reshaped_slice(a, out)
    else:
        into_reshaped_slice.interpret(a, out, level=level)
    assert torch.equal(out[:, 1], (a * 2.0).expand(4, 64))
    assert torch.equal(out[:, 0], torch.zeros(4, 64))


def test_memcpy_into_a_reshape_copy_is_refused_not_lost():
    """Where numpy must copy (a strided slice), the legato interpreter refuses the write."""
    import numpy as np

    from legato.interp.legato import LegatoFunctions

    fns = LegatoFunctions()
    base = np.zeros((4, 2, 16), np.float32)

    def reshape_to(n):
        rtype = type("T", (), {"get_shape": lambda self: (n,)})()
        return type(
            "Reshape", (), {"name": "legato.reshape", "result": type("R", (), {"type": rtype})()}
        )()

    class Memcpy:
        name = "legato.memcpy"

    (view,) = fns.run_reshape(None, reshape_to(32), (base[1:2, :, :],)).values  # a view
    fns.run_memcpy(None, Memcpy(), (view, np.ones(32, np.float32) * 3))
    assert (base[1] == 3).all()
    (copy,) = fns.run_reshape(None, reshape_to(64), (base[:, 1, :],)).values  # strided: a copy
    assert not np.shares_memory(copy, base)
    with pytest.raises(Exception, match="reshape of a strided slice"):
        fns.run_memcpy(None, Memcpy(), (copy, np.ones(64, np.float32)))
