"""Tracing NumPy code into an ATen graph (`Tracer`) with a duck array (`Array`).

Every NumPy call on an `Array` (a ufunc through `__array_ufunc__`, a function through
`__array_function__`, an operator or a method) is one *call* of the trace:
- a call that `table` translates, on operands of one floating dtype, is traced to ATen nodes
  (`make_fx` of its translation, inlined into the graph): Legato candidates. Once the graph is
  whole, the torch backend's op library is asked about every node (`refusals`); a call with a
  node it refuses is traced again as a NumPy call (`forced`), until none is refused;
- any other call is ONE graph node that runs the NumPy function itself on the host (its
  target is a `NumpyCall`): the torch backend has no resolver for it, so it stays extern.
The trace runs on the real arguments (values flow through it as they will at run time), so
every node's `meta["val"]` is known; a conversion of a traced value to a Python value
(`bool(x)`, `float(x)`, `np.asarray(x)`) is refused: the graph replays without Python.
"""

from __future__ import annotations

import operator
import os
import sys

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from legato.errors import LegatoError
from legato.numpy import table
from legato.torch import registry

_HERE = os.path.dirname(os.path.abspath(__file__))
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))


def call_site() -> str:
    """`file:line` of the innermost frame outside legato.numpy and numpy (the user's call)."""
    f = sys._getframe(1)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if not (path.startswith(_HERE) or path.startswith(_NUMPY)):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return "?"


CALL_META = "legato_numpy_call"  # node.meta: the index of the NumPy call that made the node


class Call:
    """One NumPy call of a trace: its name, where the user made it, how it was traced."""

    def __init__(self, index: int, name: str, where: str):
        self.index = index
        self.name = name
        self.where = where
        self.nodes: list[str] = []  # graph nodes made for it
        self.numpy_reason: str | None = None  # set when it runs on NumPy: why


class NumpyCall:
    """The target of a node that runs a NumPy function on the host. The node's arguments are
    the call's traced arrays only (tensors in, tensors out); its other arguments are kept here,
    since FX's generated code cannot spell every Python value (np.float64(4.0), a dtype). The
    result's shapes are checked against those the trace recorded (a shape that depends on the
    values cannot be replayed)."""

    def __init__(self, fn, call: Call, leaves: list, spec):
        self.fn = fn
        self.call = call
        self.__name__ = f"numpy.{call.name}"
        self.__qualname__ = self.__name__
        self._leaves = [None if isinstance(x, Array) else x for x in leaves]
        self._slots = [i for i, x in enumerate(leaves) if isinstance(x, Array)]
        self._spec = spec
        self.shapes = None

    def __call__(self, *tensors):
        vals = list(self._leaves)
        for i, t in zip(self._slots, tensors, strict=True):
            vals[i] = t.detach().numpy()
        args, kwargs = tree_unflatten(vals, self._spec)
        out = _to_torch(self.fn(*args, **kwargs))
        shapes = tree_map(lambda t: tuple(t.shape) if isinstance(t, torch.Tensor) else None, out)
        if self.shapes is None:
            self.shapes = shapes
        elif shapes != self.shapes:
            raise LegatoError(
                f"{self.call.where}: np.{self.call.name} returned shape {shapes}, the trace "
                f"recorded {self.shapes}: its result shape depends on the values, which a "
                "legato.numpy.jit graph cannot replay; compute it outside the function"
            )
        return out


def _to_torch(x):
    if isinstance(x, np.generic):
        x = np.asarray(x)
    if isinstance(x, np.ndarray):
        if not x.flags.writeable:
            x = x.copy()
        return torch.from_numpy(x)
    if isinstance(x, (tuple, list)):
        return type(x)(_to_torch(v) for v in x)
    return x


class Array(np.lib.mixins.NDArrayOperatorsMixin):
    """A traced NumPy array: a graph node and the real value it has in this trace."""

    __array_priority__ = 1000

    def __init__(self, tracer: Tracer, node: torch.fx.Node, value: torch.Tensor):
        self._tracer = tracer
        self._node = node
        self._value = value

    # -- attributes NumPy code reads ---------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return tuple(self._value.shape)

    @property
    def ndim(self) -> int:
        return self._value.dim()

    @property
    def size(self) -> int:
        return self._value.numel()

    @property
    def dtype(self) -> np.dtype:
        return self._value.numpy().dtype

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"legato.numpy traced array(shape={self.shape}, dtype={self.dtype})"

    # -- the protocol ------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if kwargs.get("out") is not None:
            raise LegatoError(
                f"{call_site()}: np.{ufunc.__name__}(..., out=...) inside a legato.numpy.jit "
                "function: the trace has no arrays to write to; use the result instead"
            )
        kwargs.pop("out", None)
        if method == "__call__":
            name = ufunc.__name__
            fn = ufunc
            translation = None if kwargs else table.UFUNCS.get(ufunc)
        else:
            name = f"{ufunc.__name__}.{method}"
            fn = getattr(ufunc, method)
            translation = None
        return self._tracer.call(name, fn, translation, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return self._tracer.call(
            func.__name__, func, table.FUNCTIONS.get(func), tuple(args), dict(kwargs)
        )

    def _refuse(self, what: str):
        raise LegatoError(
            f"{call_site()}: {what} of a traced array inside a legato.numpy.jit function: "
            "its value is not known while the function is traced (the graph replays without "
            "Python); return it from the function, or compute it outside"
        )

    def __bool__(self):
        self._refuse("bool()")

    def __float__(self):
        self._refuse("float()")

    def __int__(self):
        self._refuse("int()")

    def __index__(self):
        self._refuse("use as an index")

    def __array__(self, dtype=None, copy=None):
        self._refuse("conversion to a numpy.ndarray")

    def tolist(self):
        self._refuse("tolist()")

    def item(self, *a):
        self._refuse("item()")

    # -- methods (each the NumPy function of the same name) ----------------------------------
    def sum(self, *a, **k):
        return np.sum(self, *a, **k)

    def mean(self, *a, **k):
        return np.mean(self, *a, **k)

    def max(self, *a, **k):
        return np.max(self, *a, **k)

    def min(self, *a, **k):
        return np.min(self, *a, **k)

    def var(self, *a, **k):
        return np.var(self, *a, **k)

    def std(self, *a, **k):
        return np.std(self, *a, **k)

    def reshape(self, *shape, order="C"):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return np.reshape(self, shape, order=order)

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return np.transpose(self, axes or None)

    @property
    def T(self):  # noqa: N802 - NumPy's name
        return np.transpose(self)

    def swapaxes(self, a, b):
        return np.swapaxes(self, a, b)

    def squeeze(self, axis=None):
        return np.squeeze(self, axis)

    def flatten(self):
        return np.reshape(self, -1)

    ravel = flatten

    def copy(self):
        return np.copy(self)

    def clip(self, *a, **k):
        return np.clip(self, *a, **k)

    def dot(self, b):
        return np.dot(self, b)

    def astype(self, dtype):
        return self._tracer.call(
            "ndarray.astype",
            lambda a, d: a.astype(d),
            lambda a, d: table.astype(a, d),
            (self, dtype),
            {},
        )

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, key):
        return self._tracer.call(
            "ndarray.__getitem__", operator.getitem, table.getitem, (self, key), {}
        )


class Tracer:
    """Builds one ATen graph from the NumPy calls of one run of a function."""

    def __init__(self, resolve_ctx, forced: dict[int, str] | None = None):
        self.graph = torch.fx.Graph()
        # calls (by index) an earlier trace of the same run found the op library refuses in
        # the whole graph: they run on NumPy, with that reason
        self.forced = dict(forced or {})
        self.calls: list[Call] = []
        self.inputs: list[torch.Tensor] = []  # the real value of every placeholder, in order
        self.constants: list[torch.Tensor] = []  # arrays the function closed over
        self._constant_of: dict[int, Array] = {}
        self._ctx = resolve_ctx
        from torch._subclasses.fake_tensor import FakeTensorMode

        self._fake = FakeTensorMode()

    def _meta(self, node, value) -> None:
        node.meta["val"] = tree_map(
            lambda t: self._fake.from_tensor(t) if isinstance(t, torch.Tensor) else t, value
        )

    def placeholder(self, value: torch.Tensor, name: str) -> Array:
        phs = [n for n in self.graph.nodes if n.op == "placeholder"]
        if phs:
            ctx = self.graph.inserting_after(phs[-1])
        else:
            first = next(iter(self.graph.nodes), None)
            ctx = self.graph.inserting_before(first)
        with ctx:
            node = self.graph.placeholder(name)
        self._meta(node, value)
        self.inputs.append(value)
        return Array(self, node, value)

    def constant(self, a: np.ndarray) -> Array:
        """An ndarray the function uses but was not passed (a closure, a global, np.ones(..)
        made inside): a graph input bound to that array on every call."""
        got = self._constant_of.get(id(a))
        if got is None:
            t = _to_torch(a)
            got = self.placeholder(t, f"const{len(self.constants)}")
            self.constants.append(t)
            self._constant_of[id(a)] = got
            got._keep = a  # the id stays this array's while the trace lives
        return got

    # -- one call ------------------------------------------------------------------------------
    def call(self, name, fn, translation, args, kwargs):
        call = Call(len(self.calls), name, call_site())
        self.calls.append(call)
        try:
            return self._call(call, fn, translation, args, kwargs)
        except BaseException:
            self.calls.remove(call)  # it made no node: the report does not list it
            raise

    def _call(self, call, fn, translation, args, kwargs):
        name = call.name
        leaves, spec = tree_flatten((args, kwargs))
        leaves = [self.constant(x) if isinstance(x, np.ndarray) else x for x in leaves]
        arrays = [x for x in leaves if isinstance(x, Array)]
        if any(x._tracer is not self for x in arrays):
            raise LegatoError(f"{call.where}: np.{name} mixes arrays of two legato.numpy traces")
        reason = self.forced.get(call.index, "no Legato translation of this NumPy function")
        if translation is not None and call.index not in self.forced:
            # a NumPy scalar (np.sqrt(d): float64) promotes as an array does (NEP 50), a
            # Python number is weak in both NumPy and torch
            dtypes = {x._value.dtype for x in arrays} | {
                _to_torch(np.asarray(x)).dtype for x in leaves if isinstance(x, np.generic)
            }
            if translation in table.BOOL_OPERANDS:
                dtypes.discard(torch.bool)  # np.where's condition
            if len(dtypes) != 1 or not next(iter(dtypes)).is_floating_point:
                reason = (
                    "operand dtypes "
                    + ", ".join(sorted(str(d).replace("torch.", "") for d in dtypes))
                    + ": legato.numpy translates calls on one floating dtype"
                )
            else:
                # of the one dtype: the weak Python number computes the same
                weak = [x.item() if isinstance(x, np.generic) else x for x in leaves]
                got = self._traced(call, translation, weak, spec)
                if not isinstance(got, str):
                    return got
                reason = got
        return self._on_numpy(call, fn, leaves, spec, reason)

    def _traced(self, call, translation, leaves, spec):
        """The call traced to ATen nodes (its Arrays), or why it cannot be."""
        from torch.fx.experimental.proxy_tensor import make_fx

        where = [i for i, x in enumerate(leaves) if isinstance(x, Array)]

        def run(*tensors):
            vals = list(leaves)
            for i, t in zip(where, tensors):
                vals[i] = t
            a, k = tree_unflatten(vals, spec)
            return translation(*a, **k)

        reals = [leaves[i]._value for i in where]
        try:
            sub = make_fx(run)(*reals)
        except table.NoTranslation as e:
            return f"not translated: {e}"
        except Exception as e:  # noqa: BLE001 - torch refuses the arguments: NumPy runs it
            return f"not translated: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if any(n.op == "get_attr" for n in sub.graph.nodes):
            return "not translated: its translation makes a tensor constant"
        values: dict = {}

        class Record(torch.fx.Interpreter):
            def run_node(self, n):
                r = super().run_node(n)
                values[n] = r
                return r

        out = Record(sub).run(*reals)
        val_map = {}
        phs = [n for n in sub.graph.nodes if n.op == "placeholder"]
        for ph, i in zip(phs, where):
            val_map[ph] = leaves[i]._node
        result = self.graph.graph_copy(sub.graph, val_map)
        made = [val_map[n] for n in sub.graph.nodes if n.op == "call_function"]
        for n in sub.graph.nodes:
            if n.op == "call_function":
                self._meta(val_map[n], values[n])
        for n in made:
            n.meta[CALL_META] = call.index
        call.nodes = [n.name for n in made]
        return self._wrap(result, out)

    def refusals(self) -> dict[int, str]:
        """The traced calls (by index) with a node the torch backend's op library refuses, and
        why: asked of the whole graph, once its output is added (a resolver may look at a
        node's users: a comparison is taken only when a `where` on Legato reads it)."""
        out: dict[int, str] = {}
        for n in self.graph.nodes:
            i = n.meta.get(CALL_META)
            if i is None or i in out or n.op != "call_function":
                continue
            if n.target is operator.getitem or not isinstance(n.meta.get("val"), torch.Tensor):
                continue
            res = registry.resolve(n, self._ctx)
            if res.impl is None:
                op = str(n.target).replace("aten::", "aten.").split(".default")[0]
                out[i] = f"{op}: {res.reason}"
        return out

    def _wrap(self, nodes, values):
        if isinstance(values, torch.Tensor):
            return Array(self, nodes, values)
        if isinstance(values, (tuple, list)):
            return type(values)(self._wrap(n, v) for n, v in zip(nodes, values))
        return values

    def _on_numpy(self, call, fn, leaves, spec, reason):
        call.numpy_reason = reason
        target = NumpyCall(fn, call, leaves, spec)
        arrays = [x for x in leaves if isinstance(x, Array)]
        # run first: a call that raises (the IndexError that ends `for row in x`) leaves no
        # node behind to raise again when the graph replays
        value = target(*(x._value for x in arrays))
        node = self.graph.call_function(target, tuple(x._node for x in arrays))
        call.nodes = [node.name]
        if isinstance(value, torch.Tensor):
            self._meta(node, value)
            return Array(self, node, value)
        if isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
            self._meta(node, value)
            outs = []
            for i, v in enumerate(value):
                g = self.graph.call_function(operator.getitem, (node, i))
                self._meta(g, v)
                outs.append(Array(self, g, v))
            return type(value)(outs)
        # not an array (np.shape, a Python number): a constant of the trace
        self.graph.erase_node(node)
        call.nodes = []
        return value
