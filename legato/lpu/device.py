"""The `lpu` torch device: PrivateUse1 renamed, its ops run as Legato kernels.

torch 2.13 (CPU build) lets a backend be written in Python: `_setup_privateuseone_for_python_
backend` registers the hooks, device guard and device module PrivateUse1 needs, and
a wrapper subclass (`LpuTensor`) is a tensor whose device is `lpu:0` with no storage of its
own. Its storage is an allocation in the emulated shared DRAM of the process's Bertha device
(`targets.bertha.device.Device`, one per process): `t._buf`, a `Buffer` at a fixed device
address, freed when the last tensor using it goes; `t._lpu` is the tensor's view of those bytes
(a CPU tensor over the emulated DRAM itself, for views, fills and fallbacks; never a
user-visible CPU tensor until `.cpu()`, which copies).

Dispatch (`_dispatch`: `LpuTensor.__torch_dispatch__` for ops on lpu tensors, the PrivateUse1
*fallback* for factories):
- allocation and transfer (`empty`, `copy_`, `_to_copy` to or from another device): an
  allocation, a copy between host and device memory (counted in `Device.transfers`), no kernel;
- initialisation (`normal_`, `fill_`, ...) and factories: the host writes device memory
  (counted);
- views (`op.is_view`): metadata, a view of the same allocation, no kernel;
- any other op: ONE Legato kernel per op and signature (shapes, dtypes, non-tensor arguments;
  a Python number where the op takes a tensor is a 0-d tensor argument, so `x * 0.5` and
  `x * 0.25` share one kernel), built by the torch backend (`LegatoGraphWrapper` on a one-node
  ATen graph: the same op library and resolvers as torch.compile), cached, and launched on the
  device with its operands and results bound to their allocations: nothing is copied between
  host and device for it. An op the library does not take runs on the CPU, with a warning once
  per op (as MPS's fallback does): its operands are read to the host, its results written back;
- in-place and `out=` ops: their functional op as above, its result copied into the target on
  the device;
- a CPU tensor operand (but a 0-d one, a scalar) next to lpu tensors is refused, as on CUDA.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import sys
import threading
import warnings
import weakref
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from legato.errors import LegatoError
from legato.targets.bertha.device import Buffer, Device

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
        self.kernels: dict = {}  # signature -> _Compiled | str (why it runs on CPU)
        self.warned: set[str] = set()
        self.stats = Stats()
        self.lock = threading.RLock()
        self.enabled = False
        self.libs: list = []
        self.device: Device | None = None


STATE = _State()


def device() -> Device:
    """The process's Bertha device: the emulated shared DRAM every lpu tensor lives in."""
    with STATE.lock:
        if STATE.device is None:
            from legato.context import CompileContext
            from legato.model.targets import resolve_backend

            model = resolve_backend(STATE.target)(CompileContext(None, "lpu"))
            STATE.device = Device(model.shared_memory_size, name=NAME)
        return STATE.device


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
        _count("to_host", _nbytes(data), "print")
        r = repr(data)
        return r[:-1] + f", device='{NAME}:0')"

    __str__ = __repr__

    def tolist(self):
        """As on CUDA: the values, copied to the host."""
        return self.cpu().tolist()

    def numpy(self, *, force: bool = False):
        raise TypeError(
            f"can't convert {NAME}:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
            "tensor to host memory first."
        )


# -- device memory --------------------------------------------------------------------------


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _count(kind: str, nbytes: int, reason: str) -> None:
    if nbytes:
        device().transfers.count(kind, nbytes, reason)


def _extent(shape, stride, offset: int = 0) -> int:
    """Elements of storage a tensor of this layout spans (0 when it has no element)."""
    if any(n == 0 for n in shape):
        return 0
    return offset + sum((n - 1) * st for n, st in zip(shape, stride)) + 1


def _view_of(buf: Buffer, dtype, shape, stride, offset: int = 0) -> torch.Tensor:
    """The CPU tensor over `buf`'s bytes (the emulated DRAM) with this layout."""
    flat = torch.from_numpy(buf.array)
    itemsize = torch.empty((), dtype=dtype).element_size()
    flat = flat[: buf.nbytes // itemsize * itemsize].view(dtype)
    return flat.as_strided(tuple(shape), tuple(stride), offset)


def _allocate(shape, stride, dtype, name: str) -> torch.Tensor:
    """A new lpu tensor of this layout in a new allocation (zero-filled, nothing copied)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    buf = device().allocate(_extent(shape, stride) * itemsize, name)
    return _wrap(_view_of(buf, dtype, shape, stride), buf)


def _dense(shape, stride) -> bool:
    """Whether a layout covers its storage extent once (no overlap, no gap): copyable as is."""
    expected = 1
    for st, n in sorted((st, n) for n, st in zip(shape, stride) if n != 1):
        if st != expected:
            return False
        expected *= n
    return True


def _upload(host: torch.Tensor, reason: str) -> torch.Tensor:
    """A new lpu tensor holding a copy of CPU tensor `host` (its strides when they are dense);
    counted as host-to-device bytes."""
    shape, stride = tuple(host.shape), tuple(host.stride())
    if not _dense(shape, stride):
        host, stride = host.contiguous(), tuple(host.contiguous().stride())
    t = _allocate(shape, stride, host.dtype, reason)
    t._lpu.copy_(host)
    _count("to_device", _nbytes(host), reason)
    return t


def _wrap(data: torch.Tensor, buf: Buffer) -> torch.Tensor:
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
    t._buf = buf
    return t


def is_lpu(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == NAME


def memory(t: torch.Tensor) -> torch.Tensor:
    """The device memory of an lpu tensor: a CPU tensor over its bytes in the emulated DRAM
    (tests and tools read it; reading it is not counted as a transfer)."""
    data = t.__dict__.get("_lpu")
    if data is None:
        raise LegatoError(f"an {NAME} tensor of shape {tuple(t.shape)} without device memory")
    return data


def address(t: torch.Tensor) -> int:
    """The device address of an lpu tensor's first element in the emulated shared DRAM."""
    data = memory(t)
    buf = t.__dict__["_buf"]
    return buf.addr + data.data_ptr() - buf.array.ctypes.data


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

# Ops whose operands may be on different devices: the transfers themselves.
_TRANSFERS = {
    aten._copy_from.default,
    aten._copy_from_and_resize.default,
    aten.copy_.default,
    aten._to_copy.default,
}


def _copy(src, dst) -> None:
    """dst <- src, either or both on lpu: counted by direction."""
    n = _nbytes(_unwrap(dst))
    if is_lpu(src) and is_lpu(dst):
        _count("on_device", n, "copy_")
    else:
        _count("to_device" if is_lpu(dst) else "to_host", n, "copy_")
    _unwrap(dst).copy_(_unwrap(src))


def _dispatch(op, *args, **kwargs):
    name = op._schema.name
    if op is aten._copy_from.default:
        src, dst = args[0], args[1]
        _copy(src, dst)
        return dst
    if op is aten._copy_from_and_resize.default:
        src, dst = args[0], args[1]
        if tuple(dst.shape) != tuple(src.shape):
            raise LegatoError(
                f"legato.lpu: copying a {tuple(src.shape)} tensor into an lpu tensor of shape "
                f"{tuple(dst.shape)}: an lpu tensor cannot be resized in place"
            )
        _copy(src, dst)
        return dst
    if op is aten.copy_.default:
        _copy(args[1], args[0])
        return args[0]
    if op in (aten.empty.memory_format, aten.empty_strided.default):
        kw = {k: _host_device(v) for k, v in kwargs.items() if k != "pin_memory"}
        like = op(*args, **{**kw, "device": "meta"})  # the layout torch would give
        return _allocate(like.shape, like.stride(), like.dtype, "empty")
    if op is aten._to_copy.default and kwargs.get("device") is not None:
        device_to = torch.device(kwargs["device"])
        kw = {k: _host_device(v) for k, v in kwargs.items()}
        src = args[0]
        if device_to.type == NAME and is_lpu(src):  # lpu -> lpu: a cast on the device
            rest = {k: v for k, v in kwargs.items() if k != "device"}
            return _functional(op, (src,), rest)
        out = op(_unwrap(src), **kw)
        if device_to.type == NAME:
            return _upload(out, "to")
        _count("to_host", _nbytes(out) if is_lpu(src) else 0, "cpu")
        return out
    if op is aten._local_scalar_dense.default:  # .item(): one element read to the host
        _count("to_host", memory(args[0]).element_size(), "item")
        return memory(args[0]).item()
    leaves = tree_flatten((args, kwargs))[0]
    if not any(is_lpu(x) for x in leaves):
        return _on_host(op, args, kwargs, "factory")
    if name in _HOST_FILL:
        return _on_host(op, args, kwargs, "fill")
    _check_devices(op, args, kwargs)
    if op.is_view or op in _VIEW_LIKE:
        return _on_host(op, args, kwargs, "view")
    if op._schema.is_mutable:
        return _mutating(op, args, kwargs)
    return _functional(op, args, kwargs)


_CPU_INDICES = {"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"}


def _check_devices(op, args, kwargs) -> None:
    """Refuse a CPU tensor operand next to lpu ones, as CUDA does; a 0-d CPU tensor is a
    scalar and may be, as on CUDA."""
    if op._schema.name in _CPU_INDICES:  # CUDA takes CPU index tensors too
        named = dict(zip((a.name for a in op._schema.arguments), args)) | kwargs
        args, kwargs = tuple(v for k, v in named.items() if k != "indices"), {}
    for x in tree_flatten((args, kwargs))[0]:
        if isinstance(x, torch.Tensor) and not is_lpu(x) and x.dim() > 0:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two "
                f"devices, {NAME}:0 and {x.device}! ({_op_name(op)} got a {x.device} tensor of "
                f"shape {tuple(x.shape)}; move it with .to('{NAME}'), or make it there with "
                f"device='{NAME}')"
            )


def _on_host(op, args, kwargs, kind: str):
    """Runs `op` on the device memory itself, on the host: a view (`kind` "view", nothing
    moves), a fill or factory ("fill", "factory": the host writes device memory) or a CPU
    fallback ("fallback": its lpu operands are read to the host, its results written back).
    Transfers are counted by `kind`."""
    a, k = tree_map(_unwrap, (args, kwargs))
    k = {key: _host_device(v) for key, v in k.items()}
    ins = [x for x in tree_flatten((args, kwargs))[0] if is_lpu(x)]
    if kind == "fallback":
        for x in ins:
            _count("to_host", _nbytes(memory(x)), f"cpu fallback {_op_name(op)}")
    out = op(*a, **k)
    # an op that returns its (in-place) input returns the lpu tensor, not a new one; a view
    # shares its input's allocation
    by_id = {id(memory(x)): x for x in ins}
    by_storage = {memory(x).untyped_storage().data_ptr(): x for x in ins}
    reason = f"{kind} {_op_name(op)}" if kind != "factory" else f"factory {_op_name(op)}"

    def back(r):
        if not isinstance(r, torch.Tensor):
            return r
        src = by_id.get(id(r))
        if src is not None:
            if kind in ("fill", "fallback") and op._schema.is_mutable:
                _count("to_device", _nbytes(r), reason)
            return src
        if r.device.type == "cpu" and r.numel():
            owner = by_storage.get(r.untyped_storage().data_ptr())
            if owner is not None:
                if kind != "view" and op._schema.is_mutable:
                    _count("to_device", _nbytes(r), reason)
                return _wrap(r, owner.__dict__["_buf"])
        if kind == "view" and r.device.type == "cpu":
            owner = next((x for x in ins if memory(x).numel() == 0), None)
            if owner is not None:  # a view of an empty tensor: no bytes, any allocation
                return _wrap(r, owner.__dict__["_buf"])
        return _upload(r, reason)

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
        # "Tensor" before "default": `aten.add.default` is the Scalar + Scalar of TorchScript
        for o in ([overload[:-4]] if overload.endswith("_out") else []) + ["Tensor", "default"]:
            f = getattr(packet, o, None)
            if f is None or f._schema.is_mutable or not f._schema.arguments:
                continue
            if isinstance(f._schema.arguments[0].type, torch.TensorType):
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
                _copy(result, out)
                return out
        elif is_lpu(args[0]):
            try:
                result = _functional(f, args, kwargs)
            except Exception:  # noqa: BLE001 - the functional schema differs: run on the CPU
                result = None
            if isinstance(result, torch.Tensor):
                _copy(result, args[0])
                return args[0]
    _warn_once(op, "an in-place or out= op without a functional Legato counterpart")
    return _on_host(op, args, kwargs, "fallback")


def _signature(op, leaves, spec):
    key = [op, str(spec)]
    for x in leaves:
        if isinstance(x, torch.Tensor):
            d = _unwrap(x)
            key.append(("tensor", is_lpu(x), tuple(d.shape), d.dtype, d.is_contiguous()))
        else:
            key.append(("value", type(x).__name__, repr(x)))
    return tuple(key)


_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def _scalar(value, dtype) -> torch.Tensor:
    """A 0-d lpu tensor holding `value`: a kernel parameter (`_functional` counts its bytes
    as launch bytes when a kernel takes it)."""
    t = _allocate((), (), dtype, "scalar")
    t._lpu.fill_(value)
    return t


def _as_arguments(op, args, kwargs):
    """(args, kwargs) with every Python number given for a Tensor-typed argument (`x * 0.5`
    reaches aten as `mul.Tensor(x, 0.5)`) a 0-d lpu tensor of the operands' dtype, and every
    0-d CPU tensor a 0-d lpu tensor: kernel arguments, so that the kernel does not depend on
    their values. Only where the result is the same as with the number: every dimensioned
    tensor operand of one float dtype, and a number that dtype holds exactly (f32: any, as
    torch's CPU kernels compute with the number rounded to f32; bf16 and f16: 0.5, 2, -1, ...,
    not 0.1); None when nothing changed."""
    dims = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
    dtypes = {t.dtype for t in dims if t.dim() > 0}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _FLOATS:
        return None
    (dtype,) = dtypes
    changed = False

    def exact(v) -> bool:
        if not math.isfinite(v) or float(v) != v:
            return False
        f32 = torch.tensor(float(v), dtype=torch.float32)
        return dtype == torch.float32 or float(f32.to(dtype)) == float(f32)

    def lift(schema_arg, v):
        nonlocal changed
        if isinstance(v, torch.Tensor) and not is_lpu(v) and v.dim() == 0:
            changed = True  # a 0-d CPU tensor: torch casts it to the common dtype too
            value = v.item()
            return _scalar(value, dtype if not v.dtype.is_complex and exact(value) else v.dtype)
        if (
            isinstance(schema_arg.type, torch.TensorType)
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
            and exact(v)
        ):
            changed = True
            return _scalar(float(v), dtype)
        return v

    schema = op._schema.arguments
    new_args = tuple(lift(s, v) for s, v in zip(schema, args))
    by_name = {s.name: s for s in schema}
    new_kwargs = {k: lift(by_name[k], v) if k in by_name else v for k, v in kwargs.items()}
    return (new_args, new_kwargs) if changed else None


# `Scalar` overloads whose `Tensor` overload takes the same arguments, a tensor for `other`
# (`x.mul(0.5)` from Python arrives as mul.Tensor; `mul.Scalar` comes from decompositions)
_TENSOR_OVERLOAD = {
    aten.add.Scalar: aten.add.Tensor,
    aten.sub.Scalar: aten.sub.Tensor,
    aten.mul.Scalar: aten.mul.Tensor,
    aten.div.Scalar: aten.div.Tensor,
    aten.rsub.Scalar: aten.rsub.Tensor,
}


def _functional(op, args, kwargs):
    top = _TENSOR_OVERLOAD.get(op, op)
    lifted = _as_arguments(top, args, kwargs)
    if lifted is not None:
        got = _kernel(top, *lifted)
        if not isinstance(got, str):
            given = {id(x) for x in tree_flatten((args, kwargs))[0]}
            for x in tree_flatten(lifted)[0]:
                if isinstance(x, torch.Tensor) and id(x) not in given:
                    _count("launch", _nbytes(memory(x)), "scalar argument")
            return _launch(top, got, *lifted)
    got = _kernel(op, args, kwargs)
    if isinstance(got, str):
        _warn_once(op, got)
        return _on_host(op, args, kwargs, "fallback")
    return _launch(op, got, args, kwargs)


def _kernel(op, args, kwargs):
    """The compiled kernel of `op` on arguments of this signature (cached), or why none."""
    leaves, spec = tree_flatten((args, kwargs))
    key = _signature(op, leaves, spec)
    with STATE.lock:
        got = STATE.kernels.get(key)
        if got is None:
            got = STATE.kernels[key] = _build(op, leaves, spec)
    return got


# Dense copies of strided views of parameters (nn.Linear's `W.t()`), made once per parameter,
# view and version, as the torch backend lays parameters out once: source Buffer -> {(dtype,
# shape, stride, offset): (the view's `_version`, the dense lpu tensor)}. Dropped with the
# parameter's allocation.
_DENSE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _contiguous(x: torch.Tensor) -> torch.Tensor:
    """`x`, or a dense copy of it in a new allocation (a device-to-device copy; reused while a
    parameter's view is unchanged)."""
    data = memory(x)
    if data.is_contiguous():
        return x
    base = x._base if x._is_view() else None
    cached = base is not None and isinstance(base, torch.nn.Parameter)
    if cached:
        key = (data.dtype, tuple(data.shape), tuple(data.stride()), data.storage_offset())
        views = _DENSE.setdefault(x.__dict__["_buf"], {})
        got = views.get(key)
        if got is not None and got[0] == x._version:
            return got[1]
    t = _allocate(
        tuple(data.shape), torch.empty(data.shape, device="meta").stride(), data.dtype, "contiguous"
    )
    t._lpu.copy_(data)
    _count("on_device", _nbytes(data), "contiguous operand")
    if cached:
        views[key] = (x._version, t)
    return t


def _launch_scalar(x: torch.Tensor) -> torch.Tensor:
    """A 0-d CPU operand (a scalar, `_check_devices`) as a kernel parameter on the device."""
    t = _scalar(x.item(), x.dtype)
    _count("launch", _nbytes(memory(t)), "scalar argument")
    return t


@dataclass
class _Compiled:
    """An op's kernel: the graph wrapper, its one kernel module and how it is called."""

    wrapper: object
    module: object  # the LegatoKernelModule
    order: list  # position among the tensor leaves of each argument of the kernel module
    picks: list  # per result of the op: None (the module's result) or its index in the tuple
    extras: list | None = None  # the module's scratch, allocated on the device once


def _launch(op, compiled: _Compiled, args, kwargs):
    """Runs the kernel on the device: operands, results and scratch are its allocations."""
    leaves = tree_flatten((args, kwargs))[0]
    tensors = [
        _contiguous(x)
        if is_lpu(x)
        else _launch_scalar(x)
        if x.dim() == 0
        else _upload(x.contiguous(), "cpu index tensor")
        for x in leaves
        if isinstance(x, torch.Tensor)
    ]
    km = compiled.module
    margs = [memory(tensors[i]) for i in compiled.order]
    ins = [margs[i] for i in km.in_pos]
    shapes = km.shapes(margs)
    outs = [_allocate(sh, _dense_stride(sh, st), dt, "result") for sh, st, dt in shapes]
    kouts = [None] * len(outs)
    for j, i in enumerate(km.out_order):
        kouts[i] = memory(outs[j])
    if compiled.extras is None:
        compiled.extras = [
            _allocate(sh, torch.empty(sh, device="meta").stride(), dt, "scratch")
            for sh, dt in km.gen.extras
        ]
    dev = device()
    try:
        with km.options.session(), dev.active():
            km.kernel(*ins, *kouts, *(memory(e) for e in compiled.extras))
    except Exception as e:  # noqa: BLE001 - as the torch backend: the op runs on the CPU
        _warn_once(op, f"kernel run failed: {type(e).__name__}: {str(e).splitlines()[0]}")
        return _on_host(op, args, kwargs, "fallback")
    run = km.kernel.last_run
    with STATE.lock:
        STATE.stats.kernel_calls += 1
        STATE.stats.cycles += int(getattr(run, "cycles", 0) or 0)
        STATE.stats.legato_ops[_op_name(op)] += 1
    results = [outs[0] if j is None else outs[j] for j in compiled.picks]
    return results[0] if len(results) == 1 and compiled.picks == [None] else tuple(results)


def _dense_stride(shape, stride):
    """The traced strides when they are dense (a later op may depend on them), else
    row-major (the kernel writes every element)."""
    if _dense(shape, stride):
        return tuple(stride)
    return torch.empty(shape, device="meta").stride()


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
        outs = [node]
    elif isinstance(val, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in val):
        import operator

        outs = []
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
    return _launchable(op, wrapper) or "a graph the lpu device cannot launch as one kernel"


def _launchable(op, wrapper) -> _Compiled | None:
    """How to launch `wrapper`'s graph on the device: its placeholders, ONE kernel module
    (what a one-node graph becomes), getitems of its result, the output; None for any other
    graph (the lpu device launches the kernel itself, `_launch`, not the graph)."""
    import operator

    from legato.torch.wrapper import LegatoKernelModule

    graph = wrapper.gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    calls = [n for n in graph.nodes if n.op == "call_module"]
    if len(calls) != 1:
        return None
    (call,) = calls
    km = wrapper.gm.get_submodule(call.target)
    if not isinstance(km, LegatoKernelModule) or any(lay is not None for lay in km.layouts):
        return None
    if not all(isinstance(a, torch.fx.Node) and a.op == "placeholder" for a in call.args):
        return None
    picks = []  # per op result: None (the module's result itself) or its index in it
    (out_node,) = (n for n in graph.nodes if n.op == "output")
    for r in out_node.args[0]:
        if r is call and km.single:
            picks.append(None)
        elif r.op == "call_function" and r.target is operator.getitem and r.args[0] is call:
            picks.append(r.args[1])
        else:
            return None
    rest = [n for n in graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    if rest:
        return None
    order = [placeholders.index(a) for a in call.args]
    with STATE.lock:
        STATE.stats.kernels_compiled += 1
    log.info("legato.lpu: compiled %s for %s", km.kernel.name, _op_name(op))
    return _Compiled(wrapper, km, order, picks)


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
        # the composite kernels of arange, eye and randperm make an empty tensor and resize it
        # (`arange.start_out`), which a wrapper subclass cannot be: they get kernels of their own
        for op in (
            aten.empty.memory_format,
            aten.empty_strided.default,
            aten._copy_from.default,
            aten._to_copy.default,
            aten.arange.default,
            aten.arange.start,
            aten.arange.start_step,
            aten.eye.default,
            aten.eye.m,
            aten.randperm.default,
        ):
            name = op._schema.name[len("aten::") :]
            full = f"{name}.{op._overloadname}" if op._overloadname != "default" else name
            kernels.impl(full, functools.partial(_dispatch, op), "PrivateUse1")
        STATE.libs = [fallback, kernels]
        STATE.enabled = True
