"""A transpose that moves only size-1 dims (a decode step's [1, 1, heads, d] -> [1, heads, 1, d])
keeps every element's place: it is generated as a reshape, not a VPU transpose. Checked
against eager, exactly (data movement and one exact product)."""

import torch

from legato.torch import wrapper

BF16 = torch.bfloat16


def _compile(fn, *args):
    torch._dynamo.reset()
    with torch.no_grad():
        return torch.compile(fn, backend="legato", options={"legato.strict": True})(*args)


def _heads(x):
    return x.view(1, x.shape[1], 4, 128).transpose(1, 2) * 2


def test_transpose_of_size_one_dims_is_a_reshape():
    x = torch.randn(1, 1, 512, dtype=BF16)
    y = _compile(_heads, x)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert "impl_transpose" not in k.gen.source and "impl_reshape" in k.gen.source, k.gen.source
    torch.testing.assert_close(y, _heads(x), rtol=0, atol=0)


def test_transpose_moving_larger_dims_still_transposes():
    x = torch.randn(1, 2, 512, dtype=BF16)  # two tokens: the token and head dims trade places
    y = _compile(_heads, x)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert "impl_transpose" in k.gen.source, k.gen.source
    torch.testing.assert_close(y, _heads(x), rtol=0, atol=0)
