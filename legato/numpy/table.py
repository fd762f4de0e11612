"""NumPy functions as torch functions with NumPy's semantics: the translations `legato.numpy`
traces to ATen (through `make_fx`) so the torch backend's op library and partitioner take them.

A translation takes the NumPy call's arguments with every traced array replaced by a
`torch.Tensor` and returns what NumPy would (same shape, dtype and values up to rounding). It
raises `NoTranslation` for an argument it does not cover (`out=`, `dtype=`, `where=`); the call
then runs on NumPy. A NumPy function without an entry here runs on NumPy too.
"""

from __future__ import annotations

import operator

import numpy as np
import torch


class NoTranslation(Exception):  # noqa: N818 - a signal, not an error the user sees
    """This call (these arguments) has no torch translation: it runs on NumPy."""


_NO = object()  # "argument not given"

UFUNCS: dict = {}  # np.ufunc -> translation of its __call__
FUNCTIONS: dict = {}  # NumPy function -> translation


def _registers(table: dict):
    """A decorator factory: `@deco(k1, k2)` makes the function the translation of k1 and k2."""

    def keys(*ks):
        def register(fn):
            table.update(dict.fromkeys(ks, fn))
            return fn

        return register

    return keys


_ufunc = _registers(UFUNCS)
_function = _registers(FUNCTIONS)


# np ufunc -> its translation. The binary ones are Python's operators: on tensors they take a
# number on either side (rsub, pow.Scalar, ...), as NumPy's ufuncs do; torch.add(2.0, t) would
# not.
UFUNCS.update(
    {
        np.add: operator.add,
        np.subtract: operator.sub,
        np.multiply: operator.mul,
        np.true_divide: operator.truediv,
        np.power: operator.pow,
        np.matmul: operator.matmul,
        np.greater: operator.gt,
        np.greater_equal: operator.ge,
        np.less: operator.lt,
        np.less_equal: operator.le,
        np.equal: operator.eq,
        np.not_equal: operator.ne,
        np.exp: torch.exp,
        np.log: torch.log,
        np.sqrt: torch.sqrt,
        np.tanh: torch.tanh,
        np.sin: torch.sin,
        np.cos: torch.cos,
        np.absolute: torch.abs,
        np.negative: torch.neg,
        np.reciprocal: torch.reciprocal,
    }
)


@_ufunc(np.square)
def _square(a):
    return a * a


@_ufunc(np.positive)
def _positive(a):
    return a.clone()


def _extremum(both, with_number):
    """np.maximum / np.minimum: `both(a, b)` of two tensors, `with_number(tensor, number)` when
    one side is a number (either side: the ufunc is commutative)."""

    def translate(a, b):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            return both(a, b)
        t, s = (a, b) if isinstance(a, torch.Tensor) else (b, a)
        return with_number(t, s)

    return translate


UFUNCS[np.maximum] = _extremum(torch.maximum, torch.clamp_min)
UFUNCS[np.minimum] = _extremum(torch.minimum, torch.clamp_max)


def _plain(**given):
    """NoTranslation unless every NumPy-only argument (`out`, `dtype`, `where`, `initial`) was
    left at its default."""
    for name, v in given.items():
        if v is not _NO and v is not None:
            raise NoTranslation(f"{name}= is not translated")


def _dims(a, axis) -> list[int]:
    if axis is None:
        return list(range(a.dim()))
    return [int(x) for x in axis] if isinstance(axis, (tuple, list)) else [int(axis)]


@_function(np.sum)
def _sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO, where=_NO):
    _plain(dtype=dtype, out=out, initial=initial, where=where)
    return torch.sum(a, dim=_dims(a, axis), keepdim=bool(keepdims))


@_function(np.mean)
def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=_NO):
    _plain(dtype=dtype, out=out, where=where)
    return torch.mean(a, dim=_dims(a, axis), keepdim=bool(keepdims))


@_function(np.max, np.amax)
def _max(a, axis=None, out=None, keepdims=False, initial=_NO, where=_NO):
    _plain(out=out, initial=initial, where=where)
    return torch.amax(a, dim=_dims(a, axis), keepdim=bool(keepdims))


@_function(np.min, np.amin)
def _min(a, axis=None, out=None, keepdims=False, initial=_NO, where=_NO):
    _plain(out=out, initial=initial, where=where)
    # min(x) = -max(-x): the op library reduces with amax (exactly: negation is exact)
    return -torch.amax(-a, dim=_dims(a, axis), keepdim=bool(keepdims))


@_function(np.var)
def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=_NO, mean=_NO):
    _plain(dtype=dtype, out=out, where=where, mean=mean)
    dims = _dims(a, axis)
    d = a - torch.mean(a, dim=dims, keepdim=True)
    v = torch.mean(d * d, dim=dims, keepdim=bool(keepdims))
    if ddof:
        n = 1
        for i in dims:
            n *= a.shape[i]
        v = v * (n / (n - ddof))
    return v


@_function(np.std)
def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=_NO, mean=_NO):
    return torch.sqrt(_var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean))


@_function(np.transpose)
def _transpose(a, axes=None):
    dims = list(reversed(range(a.dim()))) if axes is None else [int(x) for x in axes]
    return a.permute(dims)


@_function(np.swapaxes)
def _swapaxes(a, axis1, axis2):
    return a.transpose(axis1, axis2)


@_function(np.reshape)
def _reshape(a, shape=_NO, order="C", *, newshape=_NO, copy=None):
    if order != "C" or copy:
        raise NoTranslation("order/copy")
    shape = newshape if shape is _NO else shape
    return a.reshape((shape,) if isinstance(shape, int) else tuple(shape))


@_function(np.expand_dims)
def _expand_dims(a, axis):
    for ax in sorted(_dims(a, axis) if not isinstance(axis, int) else [axis]):
        a = a.unsqueeze(ax if ax >= 0 else ax + a.dim() + 1)
    return a


@_function(np.squeeze)
def _squeeze(a, axis=None):
    if axis is None:
        return a.squeeze()
    return a.squeeze(tuple(_dims(a, axis)))


@_function(np.concatenate)
def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _plain(out=out, dtype=dtype)
    if axis is None:
        raise NoTranslation("axis=None")
    return torch.cat(list(arrays), dim=axis)


@_function(np.stack)
def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    _plain(out=out, dtype=dtype)
    return torch.stack(list(arrays), dim=axis)


@_function(np.clip)
def _clip(a, a_min=_NO, a_max=_NO, out=None, *, min=_NO, max=_NO, **kw):  # noqa: A002
    _plain(out=out, **{k: v for k, v in kw.items()})
    lo = a_min if a_min is not _NO else min
    hi = a_max if a_max is not _NO else max
    if any(isinstance(x, torch.Tensor) for x in (lo, hi)):
        raise NoTranslation("array bounds")
    lo = None if lo is _NO else lo
    hi = None if hi is _NO else hi
    return torch.clamp(a, lo, hi)


@_function(np.einsum)
def _einsum(subscripts, *operands, out=None, optimize=False, **kw):
    _plain(out=out, **kw)
    if not isinstance(subscripts, str):
        raise NoTranslation("einsum in the sublist form")
    return torch.einsum(subscripts, *operands)


@_function(np.dot)
def _dot(a, b, out=None):
    _plain(out=out)
    if a.dim() > 2 or b.dim() > 2:
        raise NoTranslation("np.dot of a >2-d operand (not matmul's broadcasting)")
    return torch.matmul(a, b) if a.dim() and b.dim() else a * b


@_function(np.where)
def _where(condition, x=_NO, y=_NO):
    if x is _NO or y is _NO:
        raise NoTranslation("np.where(condition) (indices: a shape that depends on the values)")
    if not (isinstance(condition, torch.Tensor) and condition.dtype == torch.bool):
        raise NoTranslation("a condition that is not a bool array")
    return torch.where(condition, x, y)


# translations whose operands may be bool besides the one floating dtype (the condition)
BOOL_OPERANDS = {_where}


@_function(np.broadcast_to)
def _broadcast_to(a, shape, subok=False):
    return a.expand(tuple(shape) if not isinstance(shape, int) else (shape,))


@_function(np.copy)
def _copy(a, order="K", subok=False):
    return a.clone()


def astype(a, dtype):
    """`ndarray.astype` between floating dtypes (bf16<->f32 is the op library's `_to_copy`)."""
    t = torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype
    if not (a.dtype.is_floating_point and t.is_floating_point):
        raise NoTranslation("astype to or from a non-floating dtype")
    return a.to(t)


def getitem(a, key):
    """Basic indexing (ints, slices, None, Ellipsis): views, as NumPy."""
    parts = key if isinstance(key, tuple) else (key,)
    for k in parts:
        if not (k is None or k is Ellipsis or isinstance(k, (int, slice))):
            raise NoTranslation("advanced indexing")
        if isinstance(k, slice) and k.step is not None and k.step < 0:
            raise NoTranslation("a negative step")
    return a[key]
