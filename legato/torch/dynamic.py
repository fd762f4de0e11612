"""Dynamic dims: `legato.torch.mark_dynamic(t, dim, max=N)`.

On torch 2.13, `torch._dynamo.mark_dynamic(t, dim, max=N)` without `min=` crashes inside dynamo
when the tensor is traced (`ValueRanges(lower=None)`: "not simple sympy type NoneType"); upstream
fixed it later (pytorch#194091) by defaulting the missing bound to 2, the lower bound every
backed size has. This function is `torch._dynamo.mark_dynamic` with that default, so the seed's
line works by writing `legato.torch.mark_dynamic(x, 0, max=128)`, or by adding `min=2`.

The seed's own line, `torch._dynamo.mark_dynamic(x, 0, max=128)`, works too once Legato is
loaded (`import legato` after `import torch`, or `torch.compile(..., backend="legato")`):
`install_backport()` backports exactly that upstream fix to torch 2.13 — `mark_dynamic` with
`max=` and no `min=` behaves like `legato.torch.mark_dynamic`; every other call is passed
through unchanged, and other torch versions are left alone.

Size 1: a backed dynamic size is >= 2, and dynamo refuses a tensor marked dynamic whose size is
1 ("marked as dynamic but your code specialized it to be a constant (1)"). So without `min=`,
a tensor whose size is 0 or 1 is left unmarked: dynamo specializes it and the legato backend
compiles that call as its own static graph (one more kernel, correct results). Pass `min=1` (or
0) to make one kernel serve 1..max: the dim is then marked *unbacked*
(`torch._dynamo.mark_unbacked(t, dim, min=, max=)`); dynamo adds runtime size asserts (host
nodes in the summary), and ops that branch on the size may graph-break.
"""

from __future__ import annotations


def mark_dynamic(t, index, *, min=None, max=None):
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
        if min is None and t.shape[i] < 2:
            continue  # size 0/1 now: dynamo specializes it (its own static graph), see above
        torch._dynamo.mark_dynamic(t, i, min=2 if min is None else min, max=max)
    return t


def install_backport() -> bool:
    """Backport pytorch#194091 (a missing `min=` defaults to 2) to torch 2.13's
    `torch._dynamo.mark_dynamic`. Idempotent; returns whether the backport is in place."""
    import torch

    if not torch.__version__.startswith("2.13."):
        return False
    decorators = torch._dynamo.decorators
    current = decorators.mark_dynamic
    if getattr(current, "_legato_backport", False):
        return True
    original = current

    def mark_dynamic(t, index, *, hint_override=None, min=None, max=None, specialize_on=None):
        if max is not None and min is None and hint_override is None and specialize_on is None:
            indices = [index] if isinstance(index, int) else list(index)
            for i in indices:
                if t.shape[i] >= 2:  # a size of 0/1 is specialized by dynamo (module docstring)
                    original(t, i, min=2, max=max)
            return None
        return original(
            t, index, hint_override=hint_override, min=min, max=max, specialize_on=specialize_on
        )

    mark_dynamic.__doc__ = original.__doc__
    mark_dynamic.__wrapped__ = original  # type: ignore[attr-defined]
    mark_dynamic._legato_backport = True  # type: ignore[attr-defined]
    mark_dynamic = decorators.forbid_in_graph(mark_dynamic)
    mark_dynamic._legato_backport = True  # type: ignore[attr-defined]
    decorators.mark_dynamic = mark_dynamic
    torch._dynamo.mark_dynamic = mark_dynamic
    return True
