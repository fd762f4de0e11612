"""One Legato kernel per partition, generated as DSL source.

Why source and not IR built with the dialect builders: the op implementations are
`@legato.function`s written in the DSL, and only the frontend can inline them (static evaluation,
scoping, broadcasting of Python numbers, error locations). Generating a small kernel that calls
them reuses the whole frontend and the JIT (its disk cache keys on the kernel source and on the
source of every function it reaches); the generated file stays on disk, so every compile error
points at a real line a user can open (`$LEGATO_CACHE_DIR/torch/<hash>.py`).

The generated kernel has one `shared_dram` argument per tensor input of the partition, then one
per output. `top` request_loads each input to core 0 (into `sram`, or into `mpu_buffer` for an
operand an implementation wants as an MPU weight), core 0 receives them, calls the implementations
in graph order (intermediates stay in core memory) and memcpys the outputs back to shared DRAM.
"""

from __future__ import annotations

import hashlib
import math
import operator
import re
import types as pytypes
from dataclasses import dataclass, field
from pathlib import Path

import torch

from legato.errors import LegatoError
from legato.jit.cache import cache_dir, write_atomic
from legato.types import DType

_DTYPES = {
    torch.bfloat16: 'legato.types.float("bfloat16")',
    torch.float32: 'legato.types.float("float32")',
    torch.float16: 'legato.types.float("float16")',
    torch.int32: 'legato.types.int("int32")',
    torch.int8: 'legato.types.int("int8")',
    torch.int64: "legato.types.i64",
    torch.bool: "legato.types.i1",
}


class UnboundedDim(LegatoError):
    """A dynamic dimension without an upper bound reached the Legato compiler."""


def dtype_src(dtype: torch.dtype) -> str:
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise AssertionError(f"dtype {dtype} has no Legato element type") from None


def shape_src(shape, bound, what: str) -> str:
    """A DSL shape: ints, and `(-1, N)` for a dynamic dim bounded by N."""
    parts = []
    for i, d in enumerate(shape):
        if isinstance(d, int):
            parts.append(str(d))
            continue
        b = bound(d)
        if b is None:
            raise UnboundedDim(
                f"dim {i} of {what} is dynamic ({d}) without an upper bound; Legato allocates "
                f"buffers for the bound. Mark it with torch._dynamo.mark_dynamic(t, {i}, min=2, "
                f"max=N) (or legato.torch.mark_dynamic(t, {i}, max=N)), or pass "
                'options={"legato.unbounded_dims": "extern"} to run such nodes eagerly'
            )
        parts.append(f"(-1, {b})")
    return (
        "[" + ", ".join(parts) + "]"
        if all(isinstance(d, int) for d in shape)
        else ("(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")")
    )


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else f"n_{s}"


_SIMPLE_LITERALS = (int, float, bool, str, type(None))


def _literal(v) -> str | None:
    if isinstance(v, _SIMPLE_LITERALS):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return repr(v)
    if isinstance(v, (tuple, list)):
        items = [_literal(x) for x in v]
        if any(i is None for i in items):
            return None
        body = ", ".join(items)
        return (
            f"({body},)"
            if isinstance(v, tuple) and len(items) == 1
            else (f"({body})" if isinstance(v, tuple) else f"[{body}]")
        )
    return None


@dataclass
class Step:
    node: torch.fx.Node
    impl: object  # registry.Impl


@dataclass
class Generated:
    name: str
    source: str
    path: Path
    kernel: object  # legato.Kernel
    inputs: list  # fx nodes (tensor inputs, in kernel argument order)
    outputs: list  # fx nodes (in kernel argument order, after the inputs)
    # per input / output: per dim, the bound of a dynamic dim (None for a static one)
    input_bounds: list = field(default_factory=list)
    output_bounds: list = field(default_factory=list)


def generate(
    name: str,
    inputs: list,
    steps: list[Step],
    outputs: list,
    device: str,
    bound,
    cache_root: Path | None = None,
) -> Generated:
    """Generate, write and load the kernel `name` of one partition.

    `inputs`: the partition's tensor inputs (fx nodes with meta["val"]), `steps`: supported nodes
    in topological order with their implementations, `outputs`: nodes whose values leave the
    partition. `bound(symint) -> int | None` gives the upper bound of a dynamic size.
    """
    ns: dict[str, object] = {}
    var: dict[torch.fx.Node, str] = {}
    used: set[str] = set()

    def fresh(base: str) -> str:
        base = _ident(base)
        n, i = base, 1
        while n in used:
            n, i = f"{base}_{i}", i + 1
        used.add(n)
        return n

    def val(node):
        v = node.meta.get("val")
        if not isinstance(v, torch.Tensor):
            raise AssertionError(f"node {node.name} has no tensor value")  # noqa: TRY004
        return v

    # Which memories each input must be loaded into.
    wants: dict[torch.fx.Node, list[str]] = {n: [] for n in inputs}
    for s in steps:
        for pos, a in enumerate(s.impl.args if s.impl is not None else ()):
            mem = s.impl.memory.get(pos, "sram")
            for x in a if isinstance(a, (tuple, list)) else [a]:
                if isinstance(x, torch.fx.Node) and x in wants and mem not in wants[x]:
                    wants[x].append(mem)

    params, top, core = [], [], []
    arg_names = {}
    for n in inputs:
        v = val(n)
        p = fresh(f"in_{n.name}")
        arg_names[n] = p
        params.append(
            f"    {p}: legato.get_model().tensor_type({dtype_src(v.dtype)}, "
            f'{shape_src(v.shape, bound, f"input {n.name}")}, "shared_dram"),'
        )
    out_names = []
    for n in outputs:
        v = val(n)
        p = fresh(f"out_{n.name}")
        out_names.append(p)
        params.append(
            f"    {p}: legato.get_model().tensor_type({dtype_src(v.dtype)}, "
            f'{shape_src(v.shape, bound, f"output {n.name}")}, "shared_dram"),'
        )

    weight_var: dict[torch.fx.Node, str] = {}
    for n in inputs:
        for mem in wants[n] or ["sram"]:
            p = arg_names[n]
            if mem == "sram":
                top.append(f'        legato.tensor.request_load({p}, device.get_core(0), "sram")')
                var[n] = fresh(f"v_{n.name}")
                core.append(f'        {var[n]} = legato.tensor.receive({p}, 0, "sram")')
            elif mem == "mpu_weight":
                v = val(n)
                if not all(isinstance(d, int) for d in v.shape):
                    raise AssertionError(f"MPU weight {n.name} must have a static shape")
                top.append(
                    f'        legato.tensor.request_load({p}, device.get_core(0), "mpu_buffer")'
                )
                w = fresh(f"w_{n.name}")
                weight_var[n] = w
                core.append(
                    f"        {w} = legato.tensor.receive_type(legato.get_model().tensor_type("
                    f'{dtype_src(v.dtype)}, {list(v.shape)}, "mpu_weight"), 0, None, '
                    f'"mpu_buffer")'
                )
            elif mem == "shared_dram":
                pass  # used where it is (e.g. an embedding table): the kernel argument itself
            else:
                raise AssertionError(f"unknown operand memory {mem!r}")

    impl_names: dict[int, str] = {}
    for s in steps:
        if s.impl is None:  # getitem of a node whose implementation returns a tuple
            src, idx = s.node.args
            if s.node.target is not operator.getitem or src not in var:
                raise AssertionError(f"{s.node.name}: no implementation")
            var[s.node] = f"{var[src]}[{int(idx)}]"
            continue
        fn = s.impl.fn
        if id(fn) not in impl_names:
            impl_names[id(fn)] = fresh("impl_" + getattr(fn, "__name__", "fn"))
            ns[impl_names[id(fn)]] = fn
        args = []
        for pos, a in enumerate(s.impl.args):
            if isinstance(a, torch.fx.Node):
                if s.impl.memory.get(pos, "sram") == "mpu_weight" and a in weight_var:
                    args.append(weight_var[a])  # loaded into mpu_buffer from outside
                elif s.impl.memory.get(pos, "sram") == "mpu_weight" and a in inputs:
                    raise AssertionError(
                        f"{s.node.name}: MPU weight {a.name} was not loaded into mpu_buffer"
                    )
                elif s.impl.memory.get(pos, "sram") == "shared_dram" and a in arg_names:
                    args.append(arg_names[a])  # left in shared DRAM
                else:
                    args.append(var[a])
            elif (
                isinstance(a, (tuple, list)) and a and all(isinstance(x, torch.fx.Node) for x in a)
            ):
                args.append("(" + ", ".join(var[x] for x in a) + ",)")
            elif isinstance(a, DType):
                args.append(_global(ns, fresh, a))  # a simple global: hashed into the JIT key
            else:
                lit = _literal(a)
                args.append(lit if lit is not None else _global(ns, fresh, a))
        var[s.node] = fresh(f"v_{s.node.name}")
        core.append(
            f"        {var[s.node]} = {impl_names[id(fn)]}({', '.join(args)})"
            f"  # {s.node.format_node()[:120]}"
        )
    for n, p in zip(outputs, out_names):
        core.append(f"        legato.tensor.memcpy({p}, {var[n]})")

    body = "\n".join(
        [
            "# Generated by legato.torch (one partition of a torch.compile graph).",
            "import legato",
            "",
            "",
            f"@legato.compile(backend={device!r})",
            f"def {name}(",
            *params,
            "):",
            "    device = legato.get_context().get_device()",
            "    with device.get_top():",
            *top,
            "    with device.get_core(0):",
            *core,
            "",
        ]
    )

    # The impl functions are part of the kernel's identity: name them in the file (the JIT key
    # covers their sources too).
    def _where(v):
        f = getattr(v, "fn", v)
        return f"{getattr(f, '__module__', '?')}:{getattr(f, '__qualname__', repr(f))}"

    header = "".join(f"# {k} = {_where(v)}\n" for k, v in ns.items())
    source = header + body
    path = _write(source, name, cache_root)
    module = pytypes.ModuleType(f"legato_torch_generated_{path.stem}")
    module.__file__ = str(path)
    module.__dict__.update(ns)
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - our own source
    kernel = module.__dict__[name]

    def dim_bounds(n):
        return [None if isinstance(d, int) else bound(d) for d in val(n).shape]

    return Generated(
        name,
        source,
        path,
        kernel,
        list(inputs),
        list(outputs),
        [dim_bounds(n) for n in inputs],
        [dim_bounds(n) for n in outputs],
    )


def _global(ns: dict, fresh, value) -> str:
    n = fresh("c")
    ns[n] = value
    return n


def _write(source: str, name: str, cache_root: Path | None) -> Path:
    root = cache_root or (cache_dir() / "torch")
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = root / f"{name}_{digest}.py"
    if not path.exists():
        write_atomic(path, source.encode())
    return path
