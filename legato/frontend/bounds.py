"""What the frontend knows about the range of runtime indices, to give a slice of a dynamic dim
a static size when it provably lies inside the dim at run time (issue 14).

A slice `x[a:a+R]` of a dynamic dim is normally clamped to what the tensor holds (Python
slicing), so its size is a runtime value. When the frontend can prove `0 <= a` and
`a + R <= x.size(d)` on every run, the slice keeps the static size R (an MPU weight tile, a
static-shape load): the same `legato.dynamic_slice` with static sizes that a runtime offset
into a static dim gives. The proof uses facts recorded when the atoms of an `IRScalar` are
made (`Facts`):

- `x.size(d)`: the runtime size of dim d of that tensor (>= 0);
- `i` of `for i in range(lb, ub, step)`: lb <= i < ub;
- `a // k`, `a % k` for a compile-time k > 0 (of a nonnegative a: nonnegative);
- `min(a, b, ...)`: at most each of them (`min(k.size(2), v.size(2))` bounds both tensors);
- `legato.core_id()`: >= 0.

The forms proven are those of a loop over the whole tiles of the dim:
`for t in range(lb, (n + n0) // R + e0, step): x[c*t + c0 : c*t + c0 + S]`, n being
`x.size(d)` or a `min` of it and other sizes, with
lb >= 0, n0 >= 0, c0 >= 0, 0 < c <= R and n0 + c*(e0 - 1) + c0 + S <= 0 (e.g.
`range(x.size(d) // R)` and `x[t*R : t*R + R]`), and `for t in range(lb, n + e0)`
with `x[t + c0 : t + c0 + S]` and e0 - 1 + c0 + S <= 0. Anything else is not proven (the
slice stays clamped and dynamic, as before).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

import legato.dialects.legato as L
from legato.frontend.values import IRScalar


@dataclass(frozen=True)
class DimFact:
    """The atom is the runtime size of dim `dim` of tensor `tensor`."""

    tensor: SSAValue
    dim: int


@dataclass(frozen=True)
class LoopFact:
    """The atom is a runtime loop's index: lb <= i < ub."""

    lb: IRScalar | int
    ub: IRScalar | int


@dataclass(frozen=True)
class MinFact:
    """The atom is `min(*args)`."""

    args: tuple


@dataclass(frozen=True)
class DivFact:
    """The atom is `num // k` (`rem`: `num % k`) for a compile-time k > 0."""

    num: IRScalar | int
    k: int
    rem: bool = False


class Facts:
    """The facts of one kernel's atoms, keyed by the atom's SSA value."""

    def __init__(self):
        self._facts: dict[SSAValue, object] = {}

    def record(self, atom: IRScalar | int, fact) -> None:
        if isinstance(atom, IRScalar) and len(atom.terms) == 1 and atom.const == 0:
            ssa, c = atom.terms[0]
            if c == 1:
                self._facts[ssa] = fact

    def of(self, ssa: SSAValue):
        return self._facts.get(ssa)

    def nonneg(self, x: IRScalar | int, depth: int = 0) -> bool:
        """x >= 0 on every run (a sum of nonnegative terms with positive coefficients)."""
        if isinstance(x, int):
            return x >= 0
        if x.const < 0 or depth > 16:
            return False
        return all(c > 0 and self._atom_nonneg(ssa, depth + 1) for ssa, c in x.terms)

    def _atom_nonneg(self, ssa: SSAValue, depth: int) -> bool:
        f = self.of(ssa)
        if isinstance(f, DimFact):
            return True
        if isinstance(f, LoopFact):
            return self.nonneg(f.lb, depth)
        if isinstance(f, DivFact):
            return self.nonneg(f.num, depth)
        if isinstance(f, MinFact):
            return all(self.nonneg(a, depth) for a in f.args)
        owner = getattr(ssa, "op", None)
        return isinstance(owner, L.CoreIdOp)

    def _single(self, x: IRScalar | int):
        """(atom, coefficient, const) of a one-term form; None otherwise."""
        if isinstance(x, IRScalar) and len(x.terms) == 1:
            ssa, c = x.terms[0]
            return ssa, c, x.const
        return None

    def _le_dim(self, ssa: SSAValue, tensor: SSAValue, dim: int) -> bool:
        """The atom is at most the runtime size of dim `dim` of `tensor` (that size, or a
        `min` of it), and nonnegative."""
        f = self.of(ssa)
        if isinstance(f, DimFact):
            return f.tensor is tensor and f.dim == dim
        if isinstance(f, MinFact) and self.nonneg(IRScalar(((ssa, 1),))):
            return any(
                (one := self._single(a)) is not None
                and one[1] == 1
                and one[2] == 0
                and self._le_dim(one[0], tensor, dim)
                for a in f.args
            )
        return False

    def slice_in_bounds(self, tensor: SSAValue, dim: int, start, size: int) -> bool:
        """Whether `start <= ... < start + size` lies within dim `dim` of `tensor` (a dynamic
        dim) on every run: the forms of the module docstring."""
        one = self._single(start)
        if one is None:
            return False
        t, c, c0 = one
        loop = self.of(t)
        if not (isinstance(loop, LoopFact) and c > 0 and c0 >= 0 and self.nonneg(loop.lb)):
            return False
        ub = self._single(loop.ub)
        if ub is None:
            return False
        u, cu, e0 = ub
        if cu != 1:
            return False
        if self._le_dim(u, tensor, dim):
            # t <= size(d) + e0 - 1
            return c == 1 and e0 - 1 + c0 + size <= 0
        div = self.of(u)
        if not isinstance(div, DivFact) or div.rem:
            return False
        num = self._single(div.num)
        if num is None:
            return False
        a, ca, n0 = num
        if ca != 1 or not self._le_dim(a, tensor, dim) or n0 < 0:
            return False
        # u = (size(d) + n0) // k with size(d) + n0 >= 0, so k * u <= size(d) + n0; c <= k:
        # start + size <= c * (u + e0 - 1) + c0 + size <= size(d) + n0 + c*(e0 - 1) + c0 + size
        return c <= div.k and n0 + c * (e0 - 1) + c0 + size <= 0
