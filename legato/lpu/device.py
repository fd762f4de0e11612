"""The `lpu` torch device: PrivateUse1 renamed, its ops run as Legato kernels.

torch 2.13 (CPU build) lets a backend be written in Python: `_setup_privateuseone_for_python_
backend` registers the hooks, device guard and device module PrivateUse1 needs, and
a wrapper subclass (`LpuTensor`) is a tensor whose device is `lpu:0` with no storage of its
own. Every one carries its *device memory*, `t._lpu`: a CPU tensor of the same shape and
strides that stands for its bytes in Bertha's shared DRAM (the emulator maps it into the
DRAM of each kernel launch; it never becomes a user-visible CPU tensor until `.cpu()`).

Dispatch (`_dispatch`: `LpuTensor.__torch_dispatch__` for ops on lpu tensors, the PrivateUse1
*fallback* for factories):
- allocation, transfer and initialisation (`empty`, `copy_`, `_to_copy` to or from another
  device, `normal_`, `fill_`, ...): host writes and reads of device memory, no kernel;
- views (`op.is_view`): metadata, a view of the device memory, no kernel;
- any other op: ONE Legato kernel per op and signature (shapes, dtypes, non-tensor arguments),
  built by the torch backend (`LegatoGraphWrapper` on a one-node ATen graph: the same op
  library and resolvers as torch.compile) and cached; an op the library does not take runs on
  the CPU, with a warning once per op (as MPS's fallback does);
- in-place and `out=` ops: their functional op as above, its result copied into the target.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import warnings
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from legato.errors import LegatoError

log = logging.getLogger("legato.lpu")

NAME = "lpu"
aten = torch.ops.aten

# Ops that only move bytes between the host and device memory, or fill it from the host.
_HOST_FILL = {
    "aten::normal_",
    "aten::uniform_",
    "aten::random_",
    "aten::bernoulli_",
    "aten::exponential_",
    "aten::fill_",
    "aten::zero_",
    "aten::_local_scalar_dense",
    "aten::resize_",
    "aten::set_",
    "aten::is_pinned",
    "aten::_pin_memory",
    # factories shaped like a tensor: filled on the host, nothing computed
    "aten::empty_like",
    "aten::zeros_like",
    "aten::ones_like",
    "aten::full_like",
    "aten::rand_like",
    "aten::randn_like",
    "aten::randint_like",
    "aten::new_empty",
    "aten::new_empty_strided",
    "aten::new_zeros",
    "aten::new_ones",
    "aten::new_full",
}


# Not views by their schema, but a view of their input on every backend torch has: metadata.
_VIEW_LIKE = {aten._unsafe_view.default}


@dataclass
class Stats:
    """What ran where on the lpu device since the last `reset`."""

    kernels_compiled: int = 0
    kernel_calls: int = 0
    cycles: int = 0  # simulated, summed over the kernel calls
    legato_ops: Counter = field(default_factory=Counter)  # op -> calls run as a Legato kernel
    cpu_ops: Counter = field(default_factory=Counter)  # op -> calls run on the CPU (fallback)
    cpu_reasons: dict = field(default_factory=dict)  # op -> why (the op library's answer)

    def __str__(self) -> str:
        lines = [
            f"lpu: {self.kernel_calls} Legato kernel call(s) ({self.kernels_compiled} "
            f"kernel(s) compiled), {sum(self.cpu_ops.values())} CPU fallback call(s), "
            f"{self.cycles} simulated cycles"
        ]
        lines += [f"  legato {op}: {n} call(s)" for op, n in self.legato_ops.most_common()]
        lines += [
            f"  cpu    {op}: {n} call(s) ({self.cpu_reasons.get(op, '')})"
            for op, n in self.cpu_ops.most_common()
        ]
        return "\n".join(lines)


class _State:
    def __init__(self):
        self.target = "bertha"
        self.kernels: dict = {}  # signature -> LegatoGraphWrapper | str (why it runs on CPU)
        self.warned: set[str] = set()
        self.stats = Stats()
        self.lock = threading.RLock()
        self.enabled = False
        self.libs: list = []


STATE = _State()


class LpuTensor(torch.Tensor):
    """A tensor on `lpu`: a wrapper subclass (sizes, strides and dtype of its device memory,
    device `lpu:0`, no storage of its own) whose every op comes to `_dispatch` through
    `__torch_dispatch__`, below autograd and above torch's composite kernels (which would take
    its empty storage for its bytes)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, *args, **(kwargs or {}))

    def __repr__(self, *, tensor_contents=None):
        data = self.__dict__.get("_lpu")
        if data is None:
            return f"tensor(<no device memory>, size={tuple(self.shape)}, device='{NAME}:0')"
        r = repr(data)
        return r[:-1] + f", device='{NAME}:0')"

    __str__ = __repr__

    def numpy(self, *, force: bool = False):
        raise TypeError(
            f"can't convert {NAME}:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
            "tensor to host memory first."
        )


def _wrap(data: torch.Tensor) -> torch.Tensor:
    t = torch.Tensor._make_wrapper_subclass(
        LpuTensor,
        data.shape,
        strides=data.stride(),
        storage_offset=data.storage_offset(),
        dtype=data.dtype,
        device=torch.device(NAME, 0),
        requires_grad=data.requires_grad,
    )
    t._lpu = data
    return t


def is_lpu(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == NAME


def memory(t: torch.Tensor) -> torch.Tensor:
    """The device memory of an lpu tensor (a CPU tensor; tests and tools read it)."""
    data = t.__dict__.get("_lpu")
    if data is None:
        raise LegatoError(f"an {NAME} tensor of shape {tuple(t.shape)} without device memory")
    return data


def _unwrap(x):
    return memory(x) if is_lpu(x) else x


def _host_device(v):
    if isinstance(v, torch.device) and v.type == NAME:
        return torch.device("cpu")
    if isinstance(v, str) and v.split(":")[0] == NAME:
        return torch.device("cpu")
    return v


def _op_name(op) -> str:
    return f"{op._schema.name.replace('::', '.')}.{op._overloadname or 'default'}"


def _warn_once(op, reason: str) -> None:
    name = _op_name(op)
    with STATE.lock:
        STATE.stats.cpu_ops[name] += 1
        STATE.stats.cpu_reasons[name] = reason
        if name in STATE.warned:
            return
        STATE.warned.add(name)
    warnings.warn(
        f"legato.lpu: the operator '{name}' has no Legato implementation for these arguments "
        f"({reason}); it falls back to run on the CPU. This may have performance "
        "implications (the warning is shown once per operator).",
        UserWarning,
        stacklevel=_user_stacklevel(),
    )


_SKIP = (
    os.path.dirname(os.path.abspath(__file__)),
    os.path.dirname(os.path.abspath(torch.__file__)),
)


def _user_stacklevel() -> int:
    """The `stacklevel` of `warnings.warn` (called from `_warn_once`) that names the user's
    line: the first frame outside legato.lpu and torch."""
    f, level = sys._getframe(2), 2
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_SKIP):
        f, level = f.f_back, level + 1
    return level


# -- the dispatcher -------------------------------------------------------------------------


def _dispatch(op, *args, **kwargs):
    name = op._schema.name
    if op is aten._copy_from.default:
        src, dst = args[0], args[1]
        _unwrap(dst).copy_(_unwrap(src))
        return dst
    if op is aten._copy_from_and_resize.default:
        src, dst = args[0], args[1]
        if tuple(dst.shape) != tuple(src.shape):
            raise LegatoError(
                f"legato.lpu: copying a {tuple(src.shape)} tensor into an lpu tensor of shape "
                f"{tuple(dst.shape)}: an lpu tensor cannot be resized in place"
            )
        memory(dst).copy_(_unwrap(src))
        return dst
    if op is aten.copy_.default:
        _unwrap(args[0]).copy_(_unwrap(args[1]))
        return args[0]
    if op in (aten.empty.memory_format, aten.empty_strided.default):
        kw = {k: _host_device(v) for k, v in kwargs.items() if k != "pin_memory"}
        return _wrap(op(*args, **kw))
    if op is aten._to_copy.default and "device" in kwargs:
        device = torch.device(kwargs["device"]) if kwargs["device"] is not None else None
        kw = {k: _host_device(v) for k, v in kwargs.items()}
        out = op(_unwrap(args[0]), **kw)
        return _wrap(out) if device is not None and device.type == NAME else out
    if name in _HOST_FILL or not any(is_lpu(x) for x in tree_flatten((args, kwargs))[0]):
        return _on_host(op, args, kwargs)
    if op.is_view or op in _VIEW_LIKE:
        return _on_host(op, args, kwargs)
    if op._schema.is_mutable:
        return _mutating(op, args, kwargs)
    return _functional(op, args, kwargs)


def _on_host(op, args, kwargs):
    """Runs `op` on the device memory itself (a view, a fill, a factory): no kernel."""
    a, k = tree_map(_unwrap, (args, kwargs))
    k = {key: _host_device(v) for key, v in k.items()}
    out = op(*a, **k)
    # an op that returns its (in-place) input returns the lpu tensor, not a new one
    ins = {id(memory(x)): x for x in tree_flatten((args, kwargs))[0] if is_lpu(x)}

    def back(r):
        if not isinstance(r, torch.Tensor):
            return r
        return ins[id(r)] if id(r) in ins else _wrap(r)

    return tree_map(back, out)


def _functional_of(op):
    """The functional overload of an in-place (`add_.Tensor`) or out= (`add.out`) op, if any."""
    base = op._schema.name.split("::")[1]
    overload = op._overloadname
    if base.endswith("_"):
        packet = getattr(aten, base[:-1], None)
        return getattr(packet, overload, None) if packet is not None else None
    if overload == "out" or overload.endswith("_out"):
        packet = getattr(aten, base, None)
        if packet is None:
            return None
        for o in ([overload[:-4]] if overload.endswith("_out") else []) + ["default", "Tensor"]:
            f = getattr(packet, o, None)
            if f is not None and not f._schema.is_mutable:
                return f
    return None


def _mutating(op, args, kwargs):
    f = _functional_of(op)
    if f is not None:
        if "out" in kwargs:
            out = kwargs["out"]
            rest = {k: v for k, v in kwargs.items() if k != "out"}
            try:
                result = _functional(f, args, rest)
            except Exception:  # noqa: BLE001 - the functional schema differs: run on the CPU
                result = None
            if isinstance(result, torch.Tensor) and isinstance(out, torch.Tensor):
                if tuple(out.shape) != tuple(result.shape):
                    raise LegatoError(
                        f"legato.lpu: {_op_name(op)} with out= of shape {tuple(out.shape)} for "
                        f"a result of shape {tuple(result.shape)}: an lpu tensor cannot be "
                        "resized in place; use the result instead"
                    )
                memory(out).copy_(memory(result))
                return out
        elif is_lpu(args[0]):
            try:
                result = _functional(f, args, kwargs)
            except Exception:  # noqa: BLE001 - the functional schema differs: run on the CPU
                result = None
            if isinstance(result, torch.Tensor):
                memory(args[0]).copy_(memory(result))
                return args[0]
    _warn_once(op, "an in-place or out= op without a functional Legato counterpart")
    return _on_host(op, args, kwargs)


def _signature(op, leaves, spec):
    key = [op, str(spec)]
    for x in leaves:
        if isinstance(x, torch.Tensor):
            d = _unwrap(x)
            key.append(("tensor", is_lpu(x), tuple(d.shape), d.dtype, d.is_contiguous()))
        else:
            key.append(("value", type(x).__name__, repr(x)))
    return tuple(key)


def _functional(op, args, kwargs):
    leaves, spec = tree_flatten((args, kwargs))
    key = _signature(op, leaves, spec)
    with STATE.lock:
        got = STATE.kernels.get(key)
        if got is None:
            got = STATE.kernels[key] = _build(op, leaves, spec)
    name = _op_name(op)
    if isinstance(got, str):
        _warn_once(op, got)
        return _on_host(op, args, kwargs)
    wrapper = got
    ins = [_unwrap(x).contiguous() for x in leaves if isinstance(x, torch.Tensor)]
    outs = wrapper(*ins)
    with STATE.lock:
        STATE.stats.kernel_calls += 1
        STATE.stats.cycles += wrapper.summary.last_cycles
        STATE.stats.legato_ops[name] += 1
    outs = [_wrap(o) for o in outs]
    return outs[0] if wrapper.single else tuple(outs)


def _build(op, leaves, spec):
    """The one-kernel graph wrapper of `op` on these arguments, or why it runs on the CPU."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from legato.torch.options import Options
    from legato.torch.wrapper import LegatoGraphWrapper

    mode = FakeTensorMode()
    graph = torch.fx.Graph()
    node_leaves, fake_leaves, example = [], [], []
    for i, x in enumerate(leaves):
        if isinstance(x, torch.Tensor):
            d = _unwrap(x).contiguous()
            ph = graph.placeholder(f"in{i}")
            ph.meta["val"] = mode.from_tensor(d)
            node_leaves.append(ph)
            fake_leaves.append(ph.meta["val"])
            example.append(d)
        else:
            node_leaves.append(x)
            fake_leaves.append(x)
    a, k = tree_unflatten(fake_leaves, spec)
    try:
        with mode:
            val = op(*a, **k)
    except Exception as e:  # noqa: BLE001 - torch itself cannot type it: the CPU says why
        return f"no output shape: {type(e).__name__}"
    a, k = tree_unflatten(node_leaves, spec)
    node = graph.call_function(op, tuple(a), k)
    node.meta["val"] = val
    if isinstance(val, torch.Tensor):
        outs, single = [node], True
    elif isinstance(val, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in val):
        import operator

        outs, single = [], False
        for j, v in enumerate(val):
            g = graph.call_function(operator.getitem, (node, j))
            g.meta["val"] = v
            outs.append(g)
    else:
        return "a result that is not a tensor"
    graph.output(tuple(outs))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    opts = Options.parse({"legato.device": STATE.target, "legato.log_summary": False})
    try:
        wrapper = LegatoGraphWrapper(gm, example, opts, name=f"lpu_{op._schema.name[6:]}")
    except Exception as e:  # noqa: BLE001 - strict is off: a failure is a CPU fallback
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    s = wrapper.summary
    if s.extern or not s.kernels:
        if s.extern:
            return s.extern[0].reason
        if s.host:
            return (
                "integer or bool work is index arithmetic on the host (Legato computes in "
                "f32 and bf16)"
            )
        return "no kernel (metadata only)"
    wrapper.single = single
    with STATE.lock:
        STATE.stats.kernels_compiled += 1
    log.info("legato.lpu: compiled %s for %s", s.kernels[0].name, _op_name(op))
    return wrapper


# -- registration ---------------------------------------------------------------------------


def enable() -> None:
    """Make `lpu` a torch device (idempotent). PrivateUse1 can be renamed once per process:
    another backend holding it is an error."""
    with STATE.lock:
        if STATE.enabled:
            return
        current = torch._C._get_privateuse1_backend_name()
        if current not in ("privateuseone", NAME):
            raise LegatoError(
                f"legato.lpu: torch's PrivateUse1 backend is already named {current!r} in this "
                f"process; the {NAME} device needs it"
            )
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        if current != NAME:
            _setup_privateuseone_for_python_backend(NAME)
        # ops on lpu tensors come through LpuTensor.__torch_dispatch__; an op without one (a
        # factory: torch.randn(..., device="lpu"), empty) dispatches on the device's key
        fallback = torch.library.Library("_", "IMPL")
        fallback.fallback(_dispatch, "PrivateUse1")
        # allocation and transfer get kernels of their own too: `torch.tensor(data,
        # device="lpu")` reaches them from C++ where torch 2.13's Python fallback cannot find
        # the op ("func != nullptr" internal assert); a per-op kernel is found
        kernels = torch.library.Library("aten", "IMPL")
        for op in (
            aten.empty.memory_format,
            aten.empty_strided.default,
            aten._copy_from.default,
            aten._to_copy.default,
        ):
            name = op._schema.name[len("aten::") :]
            full = f"{name}.{op._overloadname}" if op._overloadname != "default" else name
            kernels.impl(full, functools.partial(_dispatch, op), "PrivateUse1")
        STATE.libs = [fallback, kernels]
        STATE.enabled = True
