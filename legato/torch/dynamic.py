"""Dynamic dims: `legato.torch.mark_dynamic(t, dim, max=N)`.

On torch 2.13, `torch._dynamo.mark_dynamic(t, dim, max=N)` without `min=` crashes inside dynamo
when the tensor is traced (`ValueRanges(lower=None)`: "not simple sympy type NoneType"); upstream
fixed it later (pytorch#194091) by defaulting the missing bound to 2, the lower bound every
backed size has. This function is `torch._dynamo.mark_dynamic` with that default, so the seed's
line works by writing `legato.torch.mark_dynamic(x, 0, max=128)`, or by adding `min=2`.
Nothing global is patched.

Size 1: a backed dynamic size is >= 2; a call with size 1 (decode, batch 1) is specialized by
dynamo and compiled as its own static graph (one more Legato kernel, correct results). Pass
`min=1` (or 0) to let the dynamic kernel itself accept 1: the dim is then marked *unbacked*
(`torch._dynamo.mark_unbacked`, bounds kept) instead.
"""

from __future__ import annotations


def mark_dynamic(t, index, *, min=None, max=None):  # noqa: A002 - torch's argument names
    import torch

    indices = [index] if isinstance(index, int) else list(index)
    if max is None:
        # No bound: dynamo's own behaviour; the legato backend reports the unbounded dim.
        for i in indices:
            torch._dynamo.mark_dynamic(t, i, min=min)
        return t
    if min is not None and min < 2:
        for i in indices:
            torch._dynamo.decorators.mark_unbacked(t, i, min=min, max=max)
        return t
    for i in indices:
        torch._dynamo.mark_dynamic(t, i, min=2 if min is None else min, max=max)
    return t
