"""`@legato.compile` kernels inside torch code.

Called between eager torch ops, a kernel needs nothing: it takes torch tensors and writes its
outputs in place (legato.jit). Inside a `torch.compile`d function, dynamo cannot trace the
kernel's Python (numpy conversion, the emulator), so it would graph-break around each call.
`legato.torch.custom_op(kernel)` registers the kernel as a torch custom op `legato::<name>` with
its outputs declared as mutated arguments and a fake (meta) implementation that does nothing:
dynamo puts one node in the graph, aot_autograd functionalizes it, and the legato backend runs it
as an extern node (the kernel's own binary on the emulator; see the placement summary).
"""

from __future__ import annotations

import threading

import torch

_lib = None
_lock = threading.Lock()
_ops: dict[str, object] = {}


def _library():
    global _lib
    if _lib is None:
        _lib = torch.library.Library("legato", "FRAGMENT")
    return _lib


def custom_op(kernel, mutates: tuple[str, ...] | None = None, name: str | None = None):
    """Register `kernel` (a `legato.Kernel` whose parameters are all tensors) as the torch op
    `torch.ops.legato.<name>`; returns that op. `mutates`: the output parameters (written in
    place), default the last parameter."""
    params = kernel.params
    if any(p.kind != "tensor" for p in params):
        raise TypeError(
            f"{kernel.name}: only kernels whose parameters are all tensors can be "
            "torch ops (bind constexprs with a wrapper kernel)"
        )
    mutates = tuple(mutates) if mutates is not None else (params[-1].name,)
    unknown = set(mutates) - {p.name for p in params}
    if unknown:
        raise ValueError(f"{kernel.name} has no parameter(s) {sorted(unknown)}")
    name = name or kernel.name
    with _lock:
        if name in _ops:
            return _ops[name]
        args = ", ".join(
            f"Tensor({chr(ord('a') + i)}!) {p.name}" if p.name in mutates else f"Tensor {p.name}"
            for i, p in enumerate(params)
        )
        lib = _library()
        lib.define(f"{name}({args}) -> ()")

        def impl(*tensors):
            kernel(*tensors)

        def fake(*tensors):
            return None

        lib.impl(name, impl, "CompositeExplicitAutograd")
        torch.library.register_fake(f"legato::{name}", fake, lib=lib)
        op = getattr(torch.ops.legato, name)
        op._legato_kernel = kernel
        _ops[name] = op
        return op


def kernel_of(target):
    """The legato Kernel behind a `legato::` op (overload or packet), else None."""
    ns = getattr(target, "namespace", None)
    if ns != "legato":
        return None
    base = getattr(target, "_overloadpacket", target)
    return _ops.get(getattr(base, "__name__", ""), None) and _ops[base.__name__]._legato_kernel
