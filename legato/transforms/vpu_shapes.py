"""Shape rules shared by the lowering passes: how an operand broadcasts to an output in the
forms the VPU executes (`vbin`'s `bc.scalar`, `bc.row(P)`, `bc.col(P)`).

`broadcast_form(operand_dims, out_dims)` classifies an operand (torch broadcasting, aligned on
the right) against the output over the *flattened* element index i of the output:

- `("full", None)`: same elements (j = i);
- `("scalar", None)`: one element (j = 0);
- `("row", P)`: one value per run of P output elements (j = i // P), e.g. `[M, 1]` to `[M, N]`;
- `("col", P)`: a vector of P elements repeated (j = i % P), e.g. `[N]` or `[1, N]` to `[M, N]`;
- `(None, None)`: anything else (or a period over a dynamic dim): materialize it first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from legato.types import Dim

FORMS = ("full", "scalar", "row", "col")


def broadcast_form(operand: Sequence[Dim], out: Sequence[Dim]) -> tuple[str | None, int | None]:
    if len(operand) > len(out):
        return None, None
    pad = [Dim(1, 1)] * (len(out) - len(operand)) + list(operand)
    kinds: list[str] = []
    sizes: list[Dim] = []
    for p, o in zip(pad, out):
        if o.size == 1:
            continue  # a static 1 in the output contributes nothing
        kinds.append("b" if p.size == 1 else "f")
        sizes.append(o)
    pattern = "".join(kinds)
    if "b" not in pattern:
        return "full", None
    if "f" not in pattern:
        return "scalar", None

    def period(ds: Sequence[Dim]) -> int | None:
        if any(d.is_dynamic for d in ds):
            return None
        return math.prod(d.size for d in ds)  # type: ignore[misc]

    m = re.fullmatch(r"(f+)(b+)", pattern)
    if m:
        p = period(sizes[len(m.group(1)) :])
        return ("row", p) if p is not None else (None, None)
    m = re.fullmatch(r"(b+)(f+)", pattern)
    if m:
        p = period(sizes[len(m.group(1)) :])
        return ("col", p) if p is not None else (None, None)
    return None, None
