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
An MPU weight the kernel module prepares from a parameter once per parameter version (a step
`Impl(None, (Layout,))`, nn.Linear's `t(W)`) is not computed: the parameter's argument is the
prepared tensor (`Generated.layouts`).

A partition that is one node with a chip-scale implementation (`Impl.spmd`, `generate_spmd`)
gets a kernel whose arguments are its shared-DRAM inputs (a parameter the implementation wants
pre-laid-out, `Layout`, in its laid-out form), the node's outputs, then the implementation's
scratch tensors, and whose body is `with device.get_all_cores(): fn(*args, *outs, *scratch)`.
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


# fx placeholder meta key: True on a graph input that is a parameter or buffer of the compiled
# module (aot_autograd's static inputs): an spmd implementation may ask for it pre-laid-out.
PARAM_META = "legato_parameter"


@dataclass(eq=False)
class Layout:
    """An operand of an spmd implementation that is a parameter laid out once (issue 14).

    `node` is the graph input (a placeholder with `meta[PARAM_META]`), `fold` the nodes between
    it and the value the op reads (nn.Linear's `t(W)`): they are folded into the layout and not
    run per call. `fn(param) -> tensor` builds the laid-out copy (contiguous, `shape` and
    `dtype`, in kernel memory `memory`, e.g. "mpu_dram"); the kernel module calls it on the
    first call and again whenever the parameter's storage changes (data_ptr or `_version`).
    `also`: other parameters the layout is built from (`fn(param, *also)`: several
    projections' weights laid out as one); they are not arguments of the kernel.
    """

    node: torch.fx.Node
    fn: object
    shape: tuple
    dtype: torch.dtype
    memory: str = "mpu_dram"
    fold: tuple = ()
    also: tuple = ()


# `Generated.layouts` entry of an input that is part of another input's `Layout` (`also`):
# the kernel module passes it to that layout and not to the kernel
PART_OF_LAYOUT = "part of a layout"


@dataclass
class Step:
    node: torch.fx.Node
    impl: object  # registry.Impl


@dataclass
class RowsPhase:
    """A phase of a chain (`generate_chain`) that is row-local work on every core (a prefill's
    RMSNorm, rotary, head views: `legato.torch.library.chip_rows`) between two chip-scale
    nodes: `nodes` its steps' nodes in graph order, `inputs` / `outputs` the tensors it reads
    from / writes for outside it, and `lines(inputs, steps, outputs, names, ns, fresh,
    impl_names, indent)` the source lines computing it on every core (`names`: each input's
    and output's shared-DRAM tensor in the kernel)."""

    nodes: list
    inputs: list
    outputs: list
    lines: object


@dataclass
class PiecePhase:
    """A phase of a chain (`generate_chain`): the nodes of one chip-scale node's kernel
    (`nodes`, as a phase given as a list) with the row-local work before it (`rows`, their
    nodes in graph order; `plan` its `chip_rows.RowPlan`) fused as a prologue that computes the
    operand the node takes one piece of rows at a time (`Impl.rows_prologue`: each core the
    rows it reads, `chip_rows.piece_lines`), instead of a row phase of its own, a barrier and
    the operand's round trip through shared DRAM. `lines(inputs, steps, outputs, x, r, names,
    ns, fresh, impl_names)` gives `(load fn, run fn, pargs, source lines)` of that prologue
    (`chip_rows.piece_lines`). `rest`: the row-local work beside it that the operand does not
    need (the first RMSNorm's neighbours: the rotary's cos/sin tables, the mask), run after the
    node's call with its rows over every core, as a row phase but with no barrier of its own
    (`rest_lines`, as `RowsPhase.lines`; its results are read after a later barrier)."""

    nodes: list
    rows: list
    lines: object
    rest: list = field(default_factory=list)
    rest_lines: object = None


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
    # spmd kernels: per input, the Layout the kernel module applies to it (None: as given;
    # PART_OF_LAYOUT: an `also` parameter of another input's Layout, not a kernel argument)
    layouts: list = field(default_factory=list)
    # spmd kernels: tensors the kernel module allocates once and passes after the outputs, as
    # (shape, torch dtype): outputs of the node no one reads (tuple elements), then scratch
    extras: list = field(default_factory=list)
    spmd: bool = False


def generate(
    name: str,
    inputs: list,
    steps: list[Step],
    outputs: list,
    device: str,
    bound,
    cache_root: Path | None = None,
    epilogue: frozenset = frozenset(),
    phases: list | None = None,
) -> Generated:
    """Generate, write and load the kernel `name` of one partition.

    `inputs`: the partition's tensor inputs (fx nodes with meta["val"]), `steps`: supported nodes
    in topological order with their implementations, `outputs`: nodes whose values leave the
    partition. `bound(symint) -> int | None` gives the upper bound of a dynamic size. With an
    spmd step: the steps in `epilogue` and those that depend on it are its fused epilogue,
    the others its prologue (`generate_spmd`). `phases` (lists of the steps' nodes, in order):
    a chain of spmd nodes in one kernel, each phase one spmd node with its fused work
    (`generate_chain`).
    """
    for s in steps:
        if s.impl is not None and s.impl.rows_only:
            raise AssertionError(f"{s.node.name}: {s.impl.rows_only}")
    spmd = [s for s in steps if s.impl is not None and s.impl.spmd]
    if spmd:
        if phases is None:
            if len(spmd) != 1:
                raise AssertionError(
                    f"{spmd[0].node.name}: a node with an spmd implementation is a partition of "
                    "its own (or a phase of a chain: `phases`)"
                )
            phases = [[s.node for s in steps]]
        by_node = {s.node: s for s in steps}
        for n in outputs:  # (as below: a prepared step's reader must be in its kernel)
            if n in by_node and _prepared_step(by_node[n]):
                raise AssertionError(
                    f"{n.name}: an MPU weight prepared once per parameter version is read by "
                    f"{', '.join(u.name for u in n.users)} in another kernel (the prepared "
                    "tensor is an input of its reader's kernel, it has no value to write out)"
                )
        chain = []
        for nodes in phases:
            if isinstance(nodes, RowsPhase):
                chain.append((nodes, [by_node[n] for n in nodes.nodes], []))
                continue
            rows = None
            if isinstance(nodes, PiecePhase):
                rows = (nodes, [by_node[n] for n in nodes.rows], [by_node[n] for n in nodes.rest])
                nodes = [n for n in nodes.nodes if n not in {*nodes.rows, *nodes.rest}]
            ph = [by_node[n] for n in nodes if n in by_node]
            own = [s for s in ph if s.impl is not None and s.impl.spmd]
            if len(own) != 1:
                raise AssertionError(
                    f"{ph[0].node.name}: a phase of a chain holds one spmd node, not {len(own)}"
                )
            chain.append((own[0], *_around(own[0], ph, epilogue), rows))
        return generate_chain(name, inputs, chain, outputs, device, bound, cache_root)
    ns: dict[str, object] = {}
    var: dict[torch.fx.Node, str] = {}
    fresh = _namer()
    # steps prepared once per parameter version by the kernel module (an MPU weight t(W),
    # `Impl(None, (Layout,))`): the kernel takes the prepared tensor as the parameter's input
    prep = {s.node: s.impl.args[0] for s in steps if _prepared_step(s)}
    laid = {lay.node: lay for lay in prep.values()}
    for n in outputs:
        if n in prep:
            raise AssertionError(
                f"{n.name}: an MPU weight prepared once per parameter version is read by "
                f"{', '.join(u.name for u in n.users)} in another kernel (the prepared tensor "
                "is an input of its reader's kernel, it has no value to write out)"
            )

    def val(n):
        lay = laid.get(n)
        if lay is not None:
            return torch.empty(lay.shape, dtype=lay.dtype, device="meta")
        return _tensor_val(n)

    def src(x):
        return prep[x].node if x in prep else x

    # Which memories each input must be loaded into.
    wants: dict[torch.fx.Node, list[str]] = {n: [] for n in inputs}
    for s in steps:
        for pos, a in enumerate(s.impl.args if s.impl is not None else ()):
            mem = s.impl.memory.get(pos, "sram")
            for x in a if isinstance(a, (tuple, list)) else [a]:
                x = src(x) if isinstance(x, torch.fx.Node) else x
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

    def operand(s, pos, a):
        a = src(a)
        if s.impl.memory.get(pos, "sram") == "mpu_weight" and a in weight_var:
            return weight_var[a]  # loaded into mpu_buffer from outside
        if s.impl.memory.get(pos, "sram") == "mpu_weight" and a in inputs:
            raise AssertionError(
                f"{s.node.name}: MPU weight {a.name} was not loaded into mpu_buffer"
            )
        if s.impl.memory.get(pos, "sram") == "shared_dram" and a in arg_names:
            return arg_names[a]  # left in shared DRAM
        return var[a]

    impl_names: dict[int, str] = {}
    for s in steps:
        if s.node in prep:
            continue
        line = _step_line(s, var, operand, ns, fresh, impl_names, "        ")
        if line is not None:
            core.append(line)
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
            *(top or ["        pass  # no tensor inputs (a filled tensor: torch.ones)"]),
            "    with device.get_core(0):",
            *core,
            "",
        ]
    )
    kernel, path, source = _load(name, ns, body, cache_root)

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
        layouts=[laid.get(n) for n in inputs],
    )


def _step_line(s: Step, var: dict, operand, ns: dict, fresh, impl_names: dict, indent: str):
    """The source line computing step `s` on a core (its value named in `var`; None for a
    getitem, which only names an element). `operand(s, pos, node)` gives the text of a tensor
    operand at argument position `pos`."""
    if s.impl is None:  # getitem of a node whose implementation returns a tuple
        src, idx = s.node.args
        if s.node.target is not operator.getitem or src not in var:
            raise AssertionError(f"{s.node.name}: no implementation")
        var[s.node] = f"{var[src]}[{int(idx)}]"
        return None
    fn = s.impl.fn
    if id(fn) not in impl_names:
        impl_names[id(fn)] = fresh("impl_" + getattr(fn, "__name__", "fn"))
        ns[impl_names[id(fn)]] = fn
    args = []
    for pos, a in enumerate(s.impl.args):
        if isinstance(a, torch.fx.Node):
            args.append(operand(s, pos, a))
        elif isinstance(a, (tuple, list)) and a and all(isinstance(x, torch.fx.Node) for x in a):
            args.append("(" + ", ".join(var[x] for x in a) + ",)")
        elif isinstance(a, DType):
            args.append(_global(ns, fresh, a))  # a simple global: hashed into the JIT key
        else:
            lit = _literal(a)
            args.append(lit if lit is not None else _global(ns, fresh, a))
    var[s.node] = fresh(f"v_{s.node.name}")
    return (
        f"{indent}{var[s.node]} = {impl_names[id(fn)]}({', '.join(args)})"
        f"  # {s.node.format_node()[:120]}"
    )


def _load(name: str, ns: dict, body: str, cache_root: Path | None):
    """Write the kernel source (headed by where each global comes from) and load it."""

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
    return module.__dict__[name], path, source


def _namer():
    used: set[str] = set()

    def fresh(base: str) -> str:
        base = _ident(base)
        n, i = base, 1
        while n in used:
            n, i = f"{base}_{i}", i + 1
        used.add(n)
        return n

    return fresh


def _around(step: Step, steps: list, epilogue: frozenset) -> tuple[list, list]:
    """The fused prologue and epilogue of the spmd `step` among `steps` (its phase): the steps
    that depend on it (or that the partitioner chose, `epilogue`: e.g. SiLU of another
    projection's result, computed a block at a time) are its epilogue, the others its prologue
    (graph order is topological, but a prologue node may come after the spmd node in it)."""
    after = {step.node, *step.impl.members}
    pre, post = [], []
    for s in steps:
        if s is step or _folded(s):
            continue
        if s.impl is None and s.node.args[0] is step.node:
            after.add(s.node)  # a getitem of the spmd node's tuple result
            continue
        if s.node in epilogue or any(a in after for a in s.node.all_input_nodes):
            after.add(s.node)
            post.append(s)
        else:
            pre.append(s)
    return pre, post


def _param(p: str, dtype: torch.dtype, shape_text: str, memory: str = "shared_dram") -> str:
    return f"    {p}: legato.get_model().tensor_type({dtype_src(dtype)}, {shape_text}, {memory!r}),"


def generate_spmd(
    name: str,
    inputs: list,
    step: Step,
    outputs: list,
    device: str,
    bound,
    cache_root: Path | None = None,
    prologue: list[Step] = (),
    epilogue: list[Step] = (),
) -> Generated:
    """Generate, write and load the kernel of a partition that is one node with a chip-scale
    implementation (`step.impl.spmd`; see `registry.Impl`), with the small work fused before
    and after it: a chain of one phase (`generate_chain`)."""
    return generate_chain(
        name,
        inputs,
        [(step, list(prologue), list(epilogue), None)],
        outputs,
        device,
        bound,
        cache_root,
    )


def generate_chain(
    name: str,
    inputs: list,
    phases: list[tuple],
    outputs: list,
    device: str,
    bound,
    cache_root: Path | None = None,
) -> Generated:
    """Generate, write and load the all-core kernel of a chain of chip-scale nodes
    (`Impl.spmd`; see `registry.Impl`), each a *phase* `(step, prologue, epilogue)`: the node
    with the small work fused before and after it. The phases run one after the other in one
    `with device.get_all_cores():` region, a `legato.sync.barrier()` between two (a phase reads
    what every core of the one before wrote): one launch for a decoder layer's projections and
    attention, not one per node, and each phase's first loads follow the previous phase's last
    instructions on the same core, not a kernel's start.

    Arguments: the partition's tensor inputs (an input an operand wants as a `Layout`: its
    laid-out form, in the Layout's memory; a parameter a Layout is also built from,
    `Layout.also`: none), then `outputs` (the nodes, the getitems of tuple results,
    `impl.members`, prologue and epilogue nodes that leave the partition), then `extras`: the
    activations one phase writes and a later one reads (`[1, hidden]` rows in shared DRAM,
    allocated once by the kernel module), the nodes' other tuple elements or members' results
    (written, never read) and each implementation's scratch tensors. With members, `outs` is
    passed as one tuple (the node's result, then each member's) and the epilogue's `y` is the
    tuple of their blocks. Each phase, on every core:

    - `prologue` (single-core implementations, `Impl.values`): every core loads the prologue's
      inputs and computes it (a few KiB: cheaper than a kernel launch and a DRAM round trip);
      core 0 writes the prologue values that leave the phase; an operand of the node computed
      by the prologue is passed as that on-chip value (only at positions in `impl.values`).
    - `impl.preload` (`(pre, pre_args)`): `v = pre(*pre_args)` after the prologue's loads and
      before its steps (loads of the node's own operands that do not wait for the prologue);
      `v` is passed after the scratch; in a chain, a preload of kernel inputs only (weight
      tiles, cached K/V rows) is issued in the previous phase, after its own loads and before
      its steps (`Impl.preload_bytes` count in that phase's sram, `LegatoGraphWrapper._fits`);
    - the call `fn(*args, *outs, *scratch)`, every other tensor operand the kernel argument
      itself (or the shared-DRAM activation an earlier phase wrote);
    - `epilogue` (elementwise steps on the node's [M, N] result, `Impl.epilogue`): generated as
      a function `epi(y, r0, rows, j0, width, *eargs)` the implementation calls on each block
      of its result instead of writing it; it loads the matching slices of its other operands,
      computes the chain and writes the slices of the outputs. The call is then `fn(*args,
      *outs, *scratch, epi, eargs)`.
    """
    fresh = _namer()
    ns: dict[str, object] = {}
    layout_of: dict[torch.fx.Node, Layout] = {}
    part_of: set = set()
    phases = [tuple(p) if len(p) == 4 else (*p, None) for p in phases]
    for step, pre, post, _ in phases:
        # an MPU weight prepared once per parameter version (`_prepared_step`) that a phase's
        # single-core work reads (a core-0 phase, `chip_serial`): the kernel takes the
        # prepared tensor as the parameter's input, as `generate` does
        for s in (*pre, *post):
            if _prepared_step(s):
                lay = s.impl.args[0]
                if layout_of.get(lay.node, lay) is not lay:
                    raise AssertionError(f"{s.node.name}: two layouts of {lay.node.name}")
                layout_of[lay.node] = lay
        if isinstance(step, RowsPhase):
            continue
        for a in step.impl.args:
            if isinstance(a, Layout):
                for x in (a.node, *a.also):
                    if layout_of.get(x, a) is not a or (x in part_of and x not in a.also):
                        raise AssertionError(f"{step.node.name}: two layouts of {x.name}")
                layout_of[a.node] = a
                part_of.update(a.also)
    # a parameter passed laid out is read by nothing else in the kernel (its argument is the
    # laid-out copy)
    laid = set(layout_of) | part_of
    for step, pre, post, rows in phases:
        for s in (*_own(step), *pre, *post, *_rows(rows)):
            if s.impl is None or _folded(s):
                continue
            for a in s.impl.args:
                xs = a if isinstance(a, (tuple, list)) else [a]
                for x in xs:
                    if isinstance(x, torch.fx.Node) and x in laid:
                        raise AssertionError(
                            f"{s.node.name}: reads {x.name}, which the kernel takes laid out"
                        )
    params, arg_names, layouts, in_bounds = [], {}, [], []
    for n in inputs:
        if n in part_of:
            layouts.append(PART_OF_LAYOUT)
            in_bounds.append(
                [None if isinstance(d, int) else bound(d) for d in _tensor_val(n).shape]
            )
            continue
        p = fresh(f"in_{n.name}")
        arg_names[n] = p
        lay = layout_of.get(n)
        layouts.append(lay)
        if lay is not None:
            params.append(_param(p, lay.dtype, str(list(lay.shape)), lay.memory))
            in_bounds.append([None] * len(lay.shape))
            continue
        v = _tensor_val(n)
        params.append(_param(p, v.dtype, shape_src(v.shape, bound, f"input {n.name}")))
        in_bounds.append([None if isinstance(d, int) else bound(d) for d in v.shape])

    out_names, out_bounds = {}, []
    for o in outputs:
        v = _tensor_val(o)
        p = fresh(f"out_{o.name}")
        out_names[o] = p
        params.append(_param(p, v.dtype, shape_src(v.shape, bound, f"output {o.name}")))
        out_bounds.append([None if isinstance(d, int) else bound(d) for d in v.shape])
    extras, extra_params = [], []

    # buffers of one phase that the next phases may reuse, by (kind, shape, dtype): the results
    # nothing reads (written, never read) and the scratch (written and read within its phase,
    # between barriers): a chain's phases run one after the other, so one buffer serves one
    # such tensor of each phase (one kernel argument less each: `wrapper.CHAIN_ARGUMENTS`)
    pool: dict[tuple, list[str]] = {}
    taken: dict[tuple, int] = {}  # of this phase

    def pooled(kind: str, shape: tuple, dtype) -> str | None:
        key = (kind, shape, dtype)
        have, used = pool.setdefault(key, []), taken.get(key, 0)
        taken[key] = used + 1
        return have[used] if used < len(have) else None

    def extra(tag: str, e, what: str, kind: str | None = None) -> str:
        # a buffer of its (bound) size the kernel module allocates once
        shape = tuple(d if isinstance(d, int) else bound(d) for d in e.shape)
        if any(d is None for d in shape):
            raise UnboundedDim(f"{what} has an unbounded dynamic size")
        if kind is not None:
            p = pooled(kind, shape, e.dtype)
            if p is not None:
                return p
        p = fresh(tag)
        if kind is not None:
            pool[(kind, shape, e.dtype)].append(p)
        extras.append((shape, e.dtype))
        extra_params.append(_param(p, e.dtype, str(list(shape))))
        return p

    # what each phase computes (its node, getitems of its tuple result, members, writes and
    # fused steps); a value a later phase reads goes through shared DRAM
    made: dict[torch.fx.Node, int] = {}
    for i, (step, pre, post, rows) in enumerate(phases):
        if isinstance(step, RowsPhase):
            for n in step.nodes:
                made[n] = i
            continue
        node = step.node
        for n in (
            node,
            *step.impl.members,
            *step.impl.writes,
            *(s.node for s in (*pre, *post, *_rows(rows))),
        ):
            made[n] = i
        for u in node.users:
            if u.target is operator.getitem:
                made[u] = i
    for i, (step, pre, post, rows) in enumerate(phases):
        for s in (*_own(step), *pre, *post, *_rows(rows)):
            # (an spmd node's operands: the new K/V rows of an attention's KV appends too)
            spmd_args = s.impl.args if s.impl is not None and s.impl.spmd else ()
            for a in dict.fromkeys(
                (*s.node.all_input_nodes, *(a for a in spmd_args if isinstance(a, torch.fx.Node)))
            ):
                j = made.get(a)
                if j is not None and j < i and a not in out_names:
                    out_names[a] = extra(f"act_{a.name}", _tensor_val(a), a.name)
                if j is not None and j > i:
                    raise AssertionError(f"{s.node.name} reads {a.name} of a later phase")
    for a in made:
        if a in out_names:
            arg_names.setdefault(a, out_names[a])  # later phases read it from shared DRAM

    impl_names: dict[int, str] = {}
    epi_srcs: list[str] = []
    lines: list[str] = []
    ahead = 0  # where in `lines` the next phase's preload goes (after this phase's loads)
    for i, (step, prologue, epilogue, rows) in enumerate(phases):
        taken.clear()
        if isinstance(step, RowsPhase):
            # row-local work on every core (its blocks of rows from and to shared DRAM): the
            # next phase's preload is issued before its loop
            if i:
                lines.append("        legato.sync.barrier()  # the previous phase's writes")
            ahead = len(lines)
            names = {n: arg_names[n] for n in step.inputs}
            for o in step.outputs:
                if o not in out_names:
                    raise AssertionError(f"{o.name}: a row phase's result nothing reads")
                names[o] = out_names[o]
            lines += step.lines(
                step.inputs, prologue, step.outputs, names, ns, fresh, impl_names, "        "
            )
            continue
        node, impl = step.node, step.impl
        fused = {s.node for s in (*prologue, *epilogue, *_rows(rows))}
        after: list[str] = []
        # the node's outputs in the implementation's order: one, or one per tuple element, or
        # the node's and each member's (`Impl.members`, passed as one tuple)
        value = node.meta.get("val")
        elements = list(value) if isinstance(value, (tuple, list)) else [value]
        members = list(impl.members)
        if members:
            elements = [value, *(m.meta.get("val") for m in members)]
        readers: dict[int, torch.fx.Node] = {}
        for o in out_names:
            if made.get(o) != i:
                continue
            if o is node:
                readers[0] = o
            elif o in members:
                readers[1 + members.index(o)] = o
            elif o.target is operator.getitem and o.args[0] is node:
                readers[int(o.args[1])] = o
            elif o not in fused and o not in impl.writes:
                raise AssertionError(f"{o.name} is not an output of the spmd node {node.name}")
        # (reader, value, name of its buffer when nothing reads it, what it is): the node's
        # results, then the nodes it computes itself (Impl.writes)
        results = [
            (readers.get(k), e, f"{node.name}_{k}", f"{node.name}: result {k}")
            for k, e in enumerate(elements)
        ]
        results += [(w, _tensor_val(w), w.name, w.name) for w in impl.writes]
        outs = []
        for reader, e, tag, what in results:
            if not isinstance(e, torch.Tensor):
                raise AssertionError(f"{what} is not a tensor")
            outs.append(
                out_names[reader]
                if reader in out_names
                else extra(f"unused_{tag}", e, what, "unused")
            )
        scratch = []
        for k, (shape, dt) in enumerate(impl.scratch):
            shape = tuple(int(d) for d in shape)
            p = pooled("scratch", shape, dt)
            if p is None:
                p = fresh(f"scratch_{k}")
                pool[("scratch", shape, dt)].append(p)
                extras.append((shape, dt))
                extra_params.append(_param(p, dt, str(list(shape))))
            scratch.append(p)

        load_lines, body_lines, var = _prologue_lines(
            prologue, arg_names, out_names, ns, fresh, impl_names
        )

        def arg_src(pos, a, values, var=var, node=node) -> str:
            if isinstance(a, Layout):
                return arg_names[a.node]
            if isinstance(a, torch.fx.Node):
                if a in var and pos not in values:
                    raise AssertionError(
                        f"{node.name}: operand {pos} ({a.name}) comes from the fused prologue, "
                        "but the implementation takes it only from shared DRAM"
                    )
                return var[a] if a in var else arg_names[a]
            if isinstance(a, (tuple, list)) and a and all(isinstance(x, torch.fx.Node) for x in a):
                return "(" + ", ".join(arg_names[x] for x in a) + ",)"
            if isinstance(a, DType):
                return _global(ns, fresh, a)
            lit = _literal(a)
            return lit if lit is not None else _global(ns, fresh, a)

        pro_pos = impl.rows_prologue[0] if rows is not None and impl.rows_prologue else None
        args = [
            "None" if pos == pro_pos else arg_src(pos, a, impl.values)
            for pos, a in enumerate(impl.args)
        ]
        pro_kw = []
        if rows is not None:
            # the row-local work computing operand x one piece of rows per core (`PiecePhase`):
            # x is never in shared DRAM (unless a later phase reads it: then the writing cores
            # write it, as every output of that work), the implementation gets None for it
            if impl.rows_prologue is None:
                raise AssertionError(f"{node.name}: its implementation takes no piece prologue")
            pos, r = impl.rows_prologue
            x = impl.args[pos]
            if x not in {s.node for s in rows[1]}:
                raise AssertionError(f"{node.name}: operand {pos} is not the piece prologue's")
            r_in, r_out, names = _segment_io(rows[1], arg_names, out_names)
            load_fn, run_fn, pargs, src = rows[0].lines(
                r_in, rows[1], r_out, x, r, names, ns, fresh, impl_names
            )
            epi_srcs += src
            if rows[2]:
                a_in, a_out, names = _segment_io(rows[2], arg_names, out_names)
                after = rows[0].rest_lines(
                    a_in, rows[2], a_out, names, ns, fresh, impl_names, "        "
                )
            pro_kw = [
                f"pro=({load_fn}, {run_fn})",
                "pargs=(" + "".join(f"{a}, " for a in pargs) + ")",
            ]
        pre_lines = []
        if impl.preload is not None:
            # after the prologue's loads (few bytes, which its first steps wait for), before
            # its steps: loads that do not wait for it (see `Impl.preload`)
            pre_fn, pre_args = impl.preload
            pre_name = fresh("pre_" + getattr(pre_fn, "__name__", "fn"))
            ns[pre_name] = pre_fn
            pre_var = fresh("v_preload")
            pre_call = ", ".join(arg_src(pos, a, frozenset()) for pos, a in enumerate(pre_args))
            line = f"        {pre_var} = {pre_name}({pre_call})"
            if i and all(
                made.get(x) is None
                for a in pre_args
                for x in (a if isinstance(a, (tuple, list)) else [a])
                if isinstance(x, torch.fx.Node)
            ):
                # in a chain, loads of kernel inputs only (a projection's first weight tiles)
                # are issued in the previous phase, before its steps: their DRAM latency and
                # transfer overlap its work instead of following its barrier
                lines.insert(ahead, line)
            elif body_lines or not impl.preload_ahead_only:
                pre_lines.append(line)
            else:
                pre_var = "()"  # nothing to overlap: the implementation loads them itself
            scratch = [*scratch, pre_var]
        tail = []
        if epilogue:
            if not impl.epilogue:
                raise AssertionError(f"{node.name}: its implementation takes no fused epilogue")
            epi_name, eargs, epi_src = _epilogue_fn(
                node,
                epilogue,
                arg_names,
                var,
                out_names,
                ns,
                fresh,
                impl_names,
                impl.members,
                early=load_lines,
            )
            epi_srcs += epi_src
            tail = [epi_name, "(" + "".join(f"{e}, " for e in eargs) + ")"]
        fn_name = fresh("impl_" + getattr(impl.fn, "__name__", "fn"))
        ns[fn_name] = impl.fn
        if members:
            outs = ["(" + ", ".join(outs) + ",)"]
        call = ", ".join(args + outs + scratch + tail + pro_kw)
        if i:
            lines.append("        legato.sync.barrier()  # the previous phase's writes")
        lines += [*load_lines, *pre_lines]
        ahead = len(lines)
        lines += [*body_lines, f"        {fn_name}({call})  # {node.format_node()[:120]}", *after]
    kind = (
        "one chip-scale node" if len(phases) == 1 else f"a chain of {len(phases)} chip-scale nodes"
    )
    body = "\n".join(
        [
            f"# Generated by legato.torch ({kind} of a torch.compile graph).",
            "import legato",
            "",
            "",
            *epi_srcs,
            f"@legato.compile(backend={device!r})",
            f"def {name}(",
            *params,
            *extra_params,
            "):",
            "    device = legato.get_context().get_device()",
            "    with device.get_all_cores():",
            *lines,
            "",
        ]
    )
    kernel, path, source = _load(name, ns, body, cache_root)
    return Generated(
        name,
        source,
        path,
        kernel,
        list(inputs),
        list(outputs),
        in_bounds,
        out_bounds,
        layouts=layouts,
        extras=extras,
        spmd=True,
    )


def _rows(rows) -> list:
    """The row-local steps fused as a phase's piece prologue (`PiecePhase`), or none."""
    return [] if rows is None else [*rows[1], *rows[2]]


def _own(step) -> tuple:
    """The chip-scale step of a phase of `generate_chain` (none for a `RowsPhase`)."""
    return () if isinstance(step, RowsPhase) else (step,)


def _prologue_lines(prologue, arg_names, out_names, ns, fresh, impl_names):
    """Source lines of a fused prologue on every core (see `generate_spmd`): its input loads,
    then its steps; and the on-chip value of each node it computes (and of each input it
    loads)."""
    var: dict[torch.fx.Node, str] = {}
    lines: list[str] = []
    if not prologue:
        return [], lines, var
    loaded: dict[torch.fx.Node, str] = {}
    # every input's load is issued before the first step: loaded at first use, each load's
    # DRAM latency would follow the steps before it (three q/k/v rows and the rotary's cos and
    # sin: five latencies in a row instead of one)
    loads: list[str] = []

    def operand(s, pos, a):
        mem = s.impl.memory.get(pos, "sram")
        if mem == "shared_dram" and a in arg_names:
            return arg_names[a]  # used where it is (an embedding table: rows gathered from it)
        if mem != "sram":
            raise AssertionError(
                f"{s.node.name}: a fused prologue takes sram and shared-DRAM operands only"
            )
        if a in var:
            return var[a]
        if a not in loaded:
            loaded[a] = fresh(f"v_{a.name}")
            loads.append(f"        {loaded[a]} = legato.tensor.load({arg_names[a]})")
        return loaded[a]

    for s in prologue:
        line = _step_line(s, var, operand, ns, fresh, impl_names, "        ")
        if line is not None:
            lines.append(line)
    leaving = [s.node for s in prologue if s.node in out_names]
    if leaving:
        # core 0 writes what leaves the kernel (a loop that runs once on core 0 only: the
        # values are the same on every core)
        lines.append("        for _ in range(legato.core_id(), 1, device.num_cores):")
        lines += [f"            legato.tensor.memcpy({out_names[n]}, {var[n]})" for n in leaving]
    return loads, lines, var


# views fused into an epilogue: on a block of an [M, N] result they change nothing (the blocks of
# an [..., M, N]-like view are the same elements)
EPILOGUE_VIEWS = {
    torch.ops.aten.view.default,
    torch.ops.aten._unsafe_view.default,
    torch.ops.aten.reshape.default,
    torch.ops.aten.alias.default,
    torch.ops.aten.clone.default,
    torch.ops.aten.detach.default,
}


def row_col(shape, m: int, n: int) -> int | None:
    """For a static shape holding an [m, n] result in row-major order with its rows in one dim
    (`[1, m, n]`, `[m, 1, n]`, `[n]` when m == 1): the index of that row dim (-1: none, m == 1);
    None for any other shape."""
    shape = list(shape)
    if not shape or any(not isinstance(d, int) for d in shape) or shape[-1] != n:
        return None
    if math.prod(shape[:-1]) != m:
        return None
    big = [i for i, d in enumerate(shape[:-1]) if d != 1]
    if len(big) > 1:
        return None
    return big[0] if big else -1


def _piece(shape, like, m: int, n: int) -> tuple[str, str | None]:
    """The subscript of an epilogue operand of `shape` (broadcasting to `like`, a `row_col`
    shape of the [m, n] result) for the block [r0:r0+rows, j0:j0+width], and the 2-d shape
    of that piece ("(rows, width)", ...; None when the operand is 2-d already)."""
    shape, like = list(shape), list(like)
    if any(not isinstance(d, int) for d in shape) or len(shape) > len(like):
        raise AssertionError(f"epilogue operand of shape {shape} against {like}")
    row = row_col(like, m, n)
    full = like[len(like) - len(shape) :]
    subs, has_rows, has_cols = [], False, False
    for i, (d, f) in enumerate(zip(shape, full)):
        at = len(like) - len(shape) + i
        if d == f and f > 1 and at == len(like) - 1:
            subs.append("j0 : j0 + width")
            has_cols = True
        elif d == f and f > 1 and at == row:
            subs.append("r0 : r0 + rows")
            has_rows = True
        elif d == 1:
            subs.append(":")
        else:
            raise AssertionError(f"epilogue operand of shape {shape} against {like}")
    sub = "" if all(x == ":" for x in subs) else "[" + ", ".join(subs) + "]"
    flat = None
    if len(shape) != 2:
        flat = f"({'rows' if has_rows else 1}, {'width' if has_cols else 1})"
    return sub, flat


# an epilogue operand (a kernel input) of at most this many bytes is loaded whole by every core
# before the implementation's call, not a block at a time inside the epilogue (`_epilogue_fn`)
EPILOGUE_LOAD_BYTES = 16 * 1024


def _static_bytes(node) -> int | None:
    """Bytes of a node's static tensor value; None for a dynamic one."""
    v = _tensor_val(node)
    if not all(isinstance(d, int) for d in v.shape):
        return None
    return v.numel() * v.element_size()


def _epilogue_fn(
    node,
    epilogue,
    arg_names,
    prologue_var,
    out_names,
    ns,
    fresh,
    impl_names,
    members=(),
    early=None,
):
    """The source of a fused epilogue function (see `generate_spmd`): its name, the kernel
    values passed to it (`eargs`) and its lines. Every value in it is a 2-d block
    [rows, width] of the [M, N] result; a view (`EPILOGUE_VIEWS`) is the same block, an
    operand or output of another `row_col` shape is reshaped from / to it. A kernel input of
    at most `EPILOGUE_LOAD_BYTES` (a decode step's residual row) is loaded whole by the
    kernel's first lines (appended to `early`, when given) and sliced on chip: loaded by the
    epilogue, its DRAM latency followed the projection's last tile on every core."""
    m, n = (int(d) for d in _tensor_val(node).shape)
    fn = fresh(f"epi_{node.name}")
    members = list(members)
    # several results (`Impl.members`): y is the tuple of their blocks
    var: dict[torch.fx.Node, str] = (
        {o: f"y[{i}]" for i, o in enumerate([node, *members])} if members else {node: "y"}
    )
    params: list[str] = []
    eargs: list[str] = []
    lines: list[str] = []
    inside = {s.node for s in epilogue} | {node, *members}

    def operand_of(like):
        def operand(s, pos, a):
            if a in var:
                return var[a]
            if a in inside:
                raise AssertionError(f"{s.node.name}: epilogue operand {a.name} not computed yet")
            p = fresh(f"e_{a.name}")
            params.append(p)
            sub, flat = _piece(_tensor_val(a).shape, like, m, n)
            small = _static_bytes(a)
            if (
                a not in prologue_var
                and early is not None
                and small is not None
                and small <= EPILOGUE_LOAD_BYTES
            ):
                prologue_var[a] = fresh(f"v_{a.name}")
                early.append(f"        {prologue_var[a]} = legato.tensor.load({arg_names[a]})")
            if a in prologue_var:  # on the core already: its slice
                eargs.append(prologue_var[a])
                piece = f"{p}{sub}"
            else:
                eargs.append(arg_names[a])
                piece = f"legato.tensor.load({p}{sub})"
            if flat is not None:
                piece = f"legato.tensor.reshape({piece}, {flat})"
            lines.append(f"    {p}_v = {piece}")
            var[a] = f"{p}_v"
            return var[a]

        return operand

    for s in epilogue:
        shape = tuple(_tensor_val(s.node).shape)
        if row_col(shape, m, n) is None:
            raise AssertionError(f"{s.node.name}: an epilogue step must keep the [{m}, {n}] result")
        if s.node.target in EPILOGUE_VIEWS:
            src = s.node.args[0]
            var[s.node] = operand_of(tuple(_tensor_val(src).shape))(s, 0, src)
            continue
        line = _step_line(s, var, operand_of(shape), ns, fresh, impl_names, "    ")
        if line is not None:
            lines.append(line)
    wrote: list[str] = []
    for o in [node, *members, *(s.node for s in epilogue)]:
        if o in out_names:
            p = fresh(f"o_{o.name}")
            params.append(p)
            eargs.append(out_names[o])
            shape = list(_tensor_val(o).shape)
            row = row_col(shape, m, n)
            sub = ", ".join(
                "j0 : j0 + width"
                if i == len(shape) - 1
                else ("r0 : r0 + rows" if i == row else ":")
                for i in range(len(shape))
            )
            v = var[o]
            if len(shape) != 2:
                dims = ", ".join(
                    "width" if i == len(shape) - 1 else ("rows" if i == row else "1")
                    for i in range(len(shape))
                )
                v = f"legato.tensor.reshape({v}, ({dims},))"
            lines.append(f"    legato.tensor.memcpy({p}[{sub}], {v})")
            wrote.append(var[o])
    # the blocks written, returned: a caller that runs the epilogue on several blocks in a row
    # may keep them to the end (`chip_linear.linear_rows_cols_parts`), so that the next block's
    # values do not reuse a buffer whose write is still in flight (and wait for it)
    lines.append(f"    return ({''.join(f'{v}, ' for v in wrote)})")
    src = [
        "@legato.function",
        f"def {fn}(y, r0, rows, j0, width, {', '.join(params)}):",
        *lines,
        "",
        "",
    ]
    return fn, eargs, src


def _tensor_val(node):
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor):
        raise AssertionError(f"node {node.name} has no tensor value")  # noqa: TRY004
    return v


def _segment_io(steps: list, arg_names: dict, out_names: dict) -> tuple[list, list, dict]:
    """A piece prologue's segment of `steps` in a chain (`PiecePhase`): the tensors it reads
    from outside it (in order of first use), its nodes the kernel writes out, and the
    parameter name of each."""
    inside = {s.node for s in steps}
    ins = list(
        dict.fromkeys(
            a
            for s in steps
            for a in s.node.all_input_nodes
            if a not in inside and isinstance(a.meta.get("val"), torch.Tensor)
        )
    )
    outs = [s.node for s in steps if s.node in out_names]
    return ins, outs, {**{a: arg_names[a] for a in ins}, **{o: out_names[o] for o in outs}}


def _prepared_step(step: Step) -> bool:
    """A step the kernel module prepares once per parameter version (its `Impl.args` one
    `Layout` of the parameter it reads, `fn` None): the kernel takes its value as an input."""
    impl = step.impl
    return (
        impl is not None
        and impl.fn is None
        and len(impl.args) == 1
        and isinstance(impl.args[0], Layout)
    )


def _folded(step: Step) -> bool:
    """A step folded into an spmd node's parameter layout (it does not run in the kernel)."""
    return step.impl is not None and step.impl.fn is None


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
