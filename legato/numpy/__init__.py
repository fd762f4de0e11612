"""Legato for NumPy: `legato.numpy.jit` runs a NumPy function on Bertha.

```python
import legato.numpy as lnp

@lnp.jit                      # or @lnp.jit(device="bertha-evt1")
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

y = softmax(np.random.randn(8, 64).astype(np.float32))   # a numpy.ndarray, as NumPy's
print(lnp.last_report())      # which NumPy calls ran as Legato kernels, which on NumPy
```
The first call with a new signature (shapes, dtypes, non-array arguments) traces the function
(`legato.numpy.trace`) into an ATen graph and hands it to the torch backend's partitioner
(`legato.torch.LegatoGraphWrapper`): the same op library, fusion into kernels and fallback as
`torch.compile(backend="legato")`. See docs/numpy.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from legato.errors import LegatoError
from legato.numpy.trace import Array, Tracer


@dataclass
class CallPlacement:
    """Where one NumPy call of the function ran."""

    name: str  # "matmul", "sum", "ndarray.__getitem__", ...
    where: str  # file:line of the call in the user's code
    ran: str  # "legato" | "numpy" | "cpu" (torch eager, extern) | "legato+cpu" | "host"
    kernels: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)  # the ATen ops it was traced to
    reason: str | None = None  # why (part of) it did not run on Legato

    def __str__(self) -> str:
        s = f"np.{self.name} at {self.where}: "
        if self.ran == "numpy":
            return s + f"NumPy ({self.reason})"
        if self.ran == "host":
            return s + "host (a view on the host: " + ", ".join(self.ops) + ")"
        s += {"legato": "Legato", "cpu": "CPU (torch eager)", "legato+cpu": "Legato + CPU"}[
            self.ran
        ]
        if self.kernels:
            s += " kernel " + ", ".join(dict.fromkeys(self.kernels))
        s += " [" + ", ".join(self.ops) + "]"
        return s + (f" ({self.reason})" if self.reason else "")


@dataclass
class NumpyReport:
    """What ran where for one traced signature of a `legato.numpy.jit` function."""

    function: str
    device: str
    calls: list[CallPlacement]
    summary: object  # the torch backend's PlacementSummary of the graph

    @property
    def legato_calls(self) -> list[CallPlacement]:
        return [c for c in self.calls if c.ran in ("legato", "legato+cpu")]

    @property
    def numpy_calls(self) -> list[CallPlacement]:
        return [c for c in self.calls if c.ran == "numpy"]

    @property
    def num_kernels(self) -> int:
        return self.summary.num_kernels

    @property
    def last_cycles(self) -> int:
        """Simulated cycles of the last call (sum over its Legato kernels)."""
        return self.summary.last_cycles

    def __str__(self) -> str:
        lines = [
            f"legato.numpy placement of {self.function} on {self.device}: "
            f"{len(self.legato_calls)} of {len(self.calls)} NumPy call(s) on Legato in "
            f"{self.num_kernels} kernel(s), {len(self.numpy_calls)} on NumPy; "
            f"{self.last_cycles} cycles (last call)"
        ]
        lines += [f"  {c}" for c in self.calls]
        return "\n".join(lines)


_reports: list[NumpyReport] = []


def last_report() -> NumpyReport | None:
    """The report of the most recent call of any `legato.numpy.jit` function."""
    return _reports[-1] if _reports else None


def _placements(tracer: Tracer, summary) -> list[CallPlacement]:
    kernel_of = {
        label.split(":")[0]: (k.name, label.split(": ", 1)[1].split(" -> ")[0])
        for k in summary.kernels
        for label in k.nodes
    }
    extern = {e.node: (e.op, e.reason) for e in summary.extern}
    host = {h.split(":")[0]: h.split(": ", 1)[1] for h in summary.host}
    out = []
    for call in tracer.calls:
        if call.numpy_reason is not None:
            out.append(CallPlacement(call.name, call.where, "numpy", reason=call.numpy_reason))
            continue
        kernels, ops, reasons, on_cpu, on_host = [], [], [], False, False
        for n in call.nodes:
            if n in kernel_of:
                kernels.append(kernel_of[n][0])
                ops.append(kernel_of[n][1])
            elif n in extern:
                on_cpu = True
                ops.append(extern[n][0])
                reasons.append(f"{extern[n][0]}: {extern[n][1]}")
            elif n in host:
                on_host = True
                ops.append(host[n])
        if not (kernels or on_cpu or on_host):
            continue  # bookkeeping only, or merged into an identical view of another call
        ran = ("legato+cpu" if on_cpu else "legato") if kernels else ("cpu" if on_cpu else "host")
        out.append(
            CallPlacement(call.name, call.where, ran, kernels, ops, "; ".join(reasons) or None)
        )
    return out


@dataclass
class _Traced:
    wrapper: object
    tracer: Tracer
    array_leaves: list[int]
    out_spec: object
    out_leaves: list  # per output leaf: its index into the graph's outputs, or a constant
    report: NumpyReport


class JitFunction:
    """A NumPy function that runs on a Legato device; see `jit`."""

    def __init__(self, fn, device: str, options: dict | None):
        from legato.torch.options import Options

        self.fn = fn
        self.options = Options.parse({"legato.device": device, **(options or {})})
        self._traces: dict = {}
        functools.update_wrapper(self, fn)

    def _key(self, leaves, spec):
        key = [str(spec)]
        for x in leaves:
            if isinstance(x, np.ndarray):
                key.append(("array", x.shape, x.dtype.str))
            else:
                try:
                    hash(x)
                except TypeError:
                    raise LegatoError(
                        f"{self.__qualname__}: argument {x!r} is neither a numpy.ndarray nor "
                        "hashable: legato.numpy.jit keys its traces on the values of non-array "
                        "arguments"
                    ) from None
                key.append(("value", type(x), x))
        return tuple(key)

    def _trace(self, leaves, spec) -> _Traced:
        from legato.context import CompileContext
        from legato.model.targets import resolve_backend
        from legato.torch import registry
        from legato.torch.wrapper import Bounds, LegatoGraphWrapper

        name = f"numpy_{getattr(self.fn, '__name__', 'fn')}"
        model = resolve_backend(self.options.device)(CompileContext(None, name))
        ctx = registry.ResolveContext(model, self.options, Bounds([], None))
        forced: dict[int, str] = {}
        while True:  # at most one more trace per call the op library refuses
            tracer, array_leaves, slots, out_spec = self._trace_once(ctx, leaves, spec, forced)
            refused = tracer.refusals()
            if not refused:
                break
            forced.update(refused)
        gm = torch.fx.GraphModule(torch.nn.Module(), tracer.graph)
        wrapper = LegatoGraphWrapper(gm, tracer.inputs, self.options, name=name)
        report = NumpyReport(
            self.__qualname__,
            self.options.device,
            _placements(tracer, wrapper.summary),
            wrapper.summary,
        )
        return _Traced(wrapper, tracer, array_leaves, out_spec, slots, report)

    def _trace_once(self, ctx, leaves, spec, forced):
        tracer = Tracer(ctx, forced)
        traced, array_leaves = [], []
        for i, x in enumerate(leaves):
            if isinstance(x, np.ndarray):
                array_leaves.append(i)
                traced.append(tracer.placeholder(_tensor(x), f"arg{i}"))
            else:
                traced.append(x)
        args, kwargs = tree_unflatten(traced, spec)
        result = self.fn(*args, **kwargs)
        out_leaves, out_spec = tree_flatten(result)
        outs, slots = [], []
        for x in out_leaves:
            if isinstance(x, Array):
                slots.append(len(outs))
                outs.append(x._node)
            else:
                slots.append(("constant", x))
        tracer.graph.output(tuple(outs))
        tracer.graph.lint()
        return tracer, array_leaves, slots, out_spec

    def __call__(self, *args, **kwargs):
        leaves, spec = tree_flatten((args, kwargs))
        key = self._key(leaves, spec)
        t = self._traces.get(key)
        if t is None:
            t = self._traces[key] = self._trace(leaves, spec)
        inputs = [_tensor(leaves[i]) for i in t.array_leaves] + t.tracer.constants
        got = t.wrapper(*inputs)
        results = [got[s].detach().numpy() if isinstance(s, int) else s[1] for s in t.out_leaves]
        _reports.append(t.report)
        del _reports[:-64]
        return tree_unflatten(results, t.out_spec)

    def report(self) -> list[NumpyReport]:
        """The reports of every signature traced so far."""
        return [t.report for t in self._traces.values()]


def _tensor(a: np.ndarray) -> torch.Tensor:
    if not a.flags.writeable:
        a = a.copy()  # torch.from_numpy wants a writeable array (the kernel only reads it)
    return torch.from_numpy(a)


def jit(fn=None, *, device: str = "bertha", options: dict | None = None):
    """Run the NumPy function `fn` on the Legato device `device`: its NumPy calls that the
    torch backend's op library covers run as Legato kernels on the emulated chip, the rest on
    NumPy (or, for an ATen node whose kernel fails to compile, torch on the CPU). Results are
    numpy.ndarrays equal to NumPy's up to the device's rounding. `options` are the
    `torch.compile(backend="legato")` options (`{"legato.strict": True}`, ...; docs/torch.md).
    Traces once per signature: the array arguments' shapes and dtypes and the values of the
    other arguments."""
    if fn is None:
        return lambda f: JitFunction(f, device, options)
    return JitFunction(fn, device, options)


__all__ = ["CallPlacement", "JitFunction", "NumpyReport", "jit", "last_report"]
