"""`LegatoGraphWrapper`: one ATen graph, partitioned into Legato kernels and extern nodes.

1. Every `call_function` node is resolved (`registry.resolve`): supported nodes have an `Impl`.
2. An MPU weight prepared from one parameter only (nn.Linear's `t(W)`) is made by the kernel
   module once per parameter version (`_prepared`: a `kernelgen.Layout`; it no longer runs per
   call nor splits partitions), other weights prepared from graph inputs only are made extern
   ("weight preparation"), so the kernel loads the weight straight into mpu_buffer; a weight
   computed from on-chip values (K^T in attention) stays in the kernel.
3. torch.fx's `CapabilityBasedPartitioner` groups the supported nodes into partitions (no cycles);
   each partition becomes one `fused_N` submodule, which is compiled to ONE Legato kernel
   (`kernelgen.generate`) at graph-compile time and replaced by a `LegatoKernelModule`.
4. The rest of the graph runs eagerly: those nodes are the *extern* nodes.

Chip scale (issue 14): a node whose implementation is `spmd` is a partition of its own (the
partitioner's partitions are split around it, in graph order), with the nodes that only prepare
a parameter for it (`kernelgen.Layout.fold`, nn.Linear's `t(W)`): its kernel runs on every
core, takes that parameter laid out once by the `LegatoKernelModule` (again only when the
parameter's storage changes) and never runs the folded nodes. Graph inputs that are
parameters or buffers (aot_autograd's static inputs) carry `meta[kernelgen.PARAM_META]`.
spmd nodes whose implementations say they can be computed together (`Impl.group_key`:
projections of one input to the same width) are one kernel (`LegatoGraphWrapper._group`);
identical views are merged first (`_merge_views`) so that the projections of one input read
one node.
"""

from __future__ import annotations

import logging
import math
import operator
from dataclasses import dataclass

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from legato.context import CompileContext
from legato.model.targets import resolve_backend
from legato.torch import kernelgen, registry, sites
from legato.torch.options import Options
from legato.torch.summary import ExternInfo, KernelInfo, PlacementSummary, record

log = logging.getLogger("legato.torch")

# A graph whose kernels keep failing to compile is not bisected forever: after this many nodes
# made eager for it, a failing partition runs eagerly whole.
_MAX_CULPRITS = 24

# Nodes that are bookkeeping, not computation: never counted as extern.
_BOOKKEEPING = {operator.getitem}


def _folds(impl) -> list:
    """The nodes an spmd implementation folds into the layouts of its parameter operands."""
    return [f for a in impl.args if isinstance(a, kernelgen.Layout) for f in a.fold]


def _folded_impl(impl) -> bool:
    """An implementation that does not run in the kernel (folded into a layout, computed by
    another node's kernel, or prepared once per parameter version)."""
    return impl.fn is None


def _prepared(src):
    """The `kernelgen.Layout` that makes the MPU weight `src` (nn.Linear's t(W)) once per
    parameter version in the kernel module, instead of an eager node per call: when `src` is
    one op on one parameter W (a graph input with `PARAM_META`) that nothing else reads, and
    `src` has one reader. None otherwise (it then runs eagerly, `_prepare_weights`)."""
    ins = src.all_input_nodes
    v = src.meta.get("val")
    if (
        len(ins) != 1
        or src.args[:1] != (ins[0],)
        or ins[0] in src.args[1:]
        or ins[0].op != "placeholder"
        or not ins[0].meta.get(kernelgen.PARAM_META)
        or list(ins[0].users) != [src]
        or len(src.users) != 1
        or not isinstance(v, torch.Tensor)
        or not all(isinstance(d, int) for d in v.shape)
        or not isinstance(ins[0].meta.get("val"), torch.Tensor)
    ):
        return None
    target, args, kwargs, w = src.target, src.args, src.kwargs, ins[0]

    def prepare(param):
        out = target(*(param if a is w else a for a in args), **kwargs)
        return out.contiguous()

    return kernelgen.Layout(w, prepare, tuple(v.shape), v.dtype, "shared_dram", fold=(src,))


_TRANSPOSES = {torch.ops.aten.t.default, torch.ops.aten.transpose.int}
PREPARED_ON_HOST = "prepared on the host once per parameter version (kept with the graph)"


def _prepared_on_host(src) -> bool:
    """`src` is one transpose of one parameter that other nodes read too (a tied LM head's
    t(W), which `_prepared` does not take: the kernel's input is the parameter itself), has a
    static shape and is read by nodes only (not returned): it is computed by a `PreparedOnce`
    module, on the host, once per parameter version."""
    ins = src.all_input_nodes
    v = src.meta.get("val")
    return (
        src.target in _TRANSPOSES
        and len(ins) == 1
        and ins[0].op == "placeholder"
        and bool(ins[0].meta.get(kernelgen.PARAM_META))
        and isinstance(v, torch.Tensor)
        and all(isinstance(d, int) for d in v.shape)
        and all(u.op != "output" for u in src.users)
    )


class PreparedOnce(torch.nn.Module):
    """Computes the node `target(*args)` from parameters on the first call and again only when
    a parameter's storage changes (data_ptr, `_version`, shape, dtype), and returns the kept
    contiguous result otherwise: a weight prepared once per compiled graph instead of per call
    (a tied LM head's t(W): an eager transpose on every call in bf16, an on-chip transpose of
    the whole weight in f32 before). `count`: how often it was made."""

    def __init__(self, target, args, kwargs, inputs):
        super().__init__()
        self.target, self.args, self.kwargs = target, args, kwargs
        self.inputs = inputs  # the names of the input nodes, in forward's argument order
        self.count = 0
        self._key = None
        self._value = None

    def forward(self, *params):
        key = tuple((p.data_ptr(), p._version, tuple(p.shape), p.dtype) for p in params)
        if key != self._key:
            env = dict(zip(self.inputs, params))
            args = torch.fx.node.map_arg(self.args, lambda n: env[n.name])
            kwargs = torch.fx.node.map_arg(self.kwargs, lambda n: env[n.name])
            with torch.no_grad():
                self._value = self.target(*args, **kwargs).contiguous()
            self._key = key
            self.count += 1
        return self._value


def _install_prepared(fused, names) -> None:
    """Replace the nodes of `fused` named `names` by calls of a `PreparedOnce` each."""
    for node in list(fused.graph.nodes):
        if node.op != "call_function" or node.name not in names:
            continue
        ins = node.all_input_nodes
        mod = PreparedOnce(node.target, node.args, node.kwargs, [a.name for a in ins])
        target = f"prepared_{node.name}"
        fused.add_submodule(target, mod)
        with fused.graph.inserting_before(node):
            new = fused.graph.call_module(target, tuple(ins))
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        fused.graph.erase_node(node)


def _taken(impl) -> list:
    """The nodes an spmd implementation takes over: its folded nodes and the nodes it computes
    and writes itself (`Impl.writes`) or computes on chip (`Impl.takes`); none of them runs on
    its own."""
    return _folds(impl) + list(impl.writes) + list(impl.takes)


def _is_host(node) -> bool:
    """Shape bookkeeping on the host (SymInt arithmetic, runtime asserts of unbacked sizes):
    not tensor computation, never a Legato candidate, reported apart from extern nodes."""
    if node.target in _BOOKKEEPING:
        return True
    v = node.meta.get("val")
    if isinstance(v, torch.Tensor):
        return False
    if isinstance(v, (tuple, list)) and any(isinstance(x, torch.Tensor) for x in v):
        return False
    return "val" in node.meta or str(getattr(node.target, "__name__", "")).startswith("_assert")


def _custom_kernel(node) -> str | None:
    """The name of the `legato::` custom op (legato.torch.custom_op) a node calls, if any."""
    targets = [node.target] + [a for a in node.args[:1] if not isinstance(a, torch.fx.Node)]
    for t in targets:
        if getattr(t, "namespace", None) == "legato":
            return getattr(getattr(t, "_overloadpacket", t), "__name__", str(t))
    return None


def _op_name(node) -> str:
    t = node.target
    if hasattr(t, "_schema") and hasattr(t, "_overloadname"):
        return f"{t._schema.name.replace('::', '.')}.{t._overloadname or 'default'}"
    return getattr(t, "__name__", str(t))


def _symints(node):
    """SymInt sizes in a node's value and in its tensor arguments."""
    vals = [node.meta.get("val")]
    vals += [a.meta.get("val") for a in node.all_input_nodes]
    for v in vals:
        if isinstance(v, torch.Tensor):
            for d in v.shape:
                if isinstance(d, torch.SymInt):
                    yield d


def _statically_empty(v) -> bool:
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return isinstance(v, torch.Tensor) and any(statically_known_true(d == 0) for d in v.shape)


def _empty_operand(node) -> str | None:
    """Why a node with an empty (size-0) tensor runs eagerly: there is nothing to compute, and
    Legato's memories and MPU take no empty tile. `cat` drops empty operands itself (the [0]
    tensor DynamicCache starts its KV cache with), so only its result counts."""
    vals = [node.meta.get("val")]
    if node.target is not torch.ops.aten.cat.default:
        vals += [a.meta.get("val") for a in node.all_input_nodes]
    vals = [x for v in vals for x in (v if isinstance(v, (tuple, list)) else [v])]
    if any(_statically_empty(v) for v in vals):
        return "empty tensor (a size-0 dim): nothing to compute on Legato"
    return None


def _matmul_flops(node, bounds) -> int:
    """Multiply-add FLOPs (2 per MAC) of a matmul or attention node; 0 for other nodes. A
    dynamic size counts with its example value (else its bound)."""

    def shape(a):
        v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
        if not isinstance(v, torch.Tensor):
            return None
        out = []
        for d in v.shape:
            if isinstance(d, int):
                out.append(d)
            else:
                hint = getattr(d.node, "hint", None)
                out.append(int(hint) if hint is not None else (bounds(d) or 0))
        return out

    aten = torch.ops.aten
    t, args = node.target, node.args
    if t in (aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default):
        a, b = (args[1], args[2]) if t in (aten.addmm.default, aten.baddbmm.default) else args[:2]
        sa, sb = shape(a), shape(b)
        if sa is None or sb is None:
            return 0
        return 2 * math.prod(sa) * sb[-1]
    if "scaled_dot_product" in str(t):
        sq, sk, sv = (shape(x) for x in args[:3])
        if sq is None or sk is None or sv is None:
            return 0
        # q @ k^T and p @ v per query head (kv heads shared under GQA)
        return 2 * math.prod(sq[:-1]) * sk[-2] * (sq[-1] + sv[-1])
    return 0


def _host_views(gm, decisions) -> None:
    """Views of graph inputs that only eager nodes read run eagerly too: on the host a view (a
    weight's `t(W)` before a matmul that runs eagerly, say) costs nothing, while as a Legato
    kernel it copies the whole tensor to the chip and back on every call (a 7B layer's
    weights: ~0.8 GB of DRAM traffic per step). Decided after the MPU weights are prepared and
    projections grouped, so only nodes no Legato node reads are affected; reverse graph order
    decides a reader (reshape of t(W)) before what it reads."""
    for node in reversed(list(gm.graph.nodes)):
        d = decisions.get(node)
        if d is None or d.impl is None or not _view_of_input(node):
            continue
        readers = [u for u in node.users if u.op != "output"]
        if readers and all(u in decisions and decisions[u].impl is None for u in readers):
            decisions[node] = NodeDecision(
                None,
                "a view of a graph input that only eagerly run nodes read: free on the host, a "
                "Legato kernel would copy the tensor to the chip and back on every call",
            )


def _view_of_input(node) -> bool:
    """`node` is a chain of `_HOST_VIEWS` over one graph input (a graph input itself: True)."""
    while node.op == "call_function" and node.target in _HOST_VIEWS:
        ins = node.all_input_nodes
        if len(ins) != 1:
            return False
        node = ins[0]
    return node.op in ("placeholder", "get_attr")


_INDEX_DTYPES = (torch.int64, torch.int32, torch.bool)


def _host_index_work(gm, decisions) -> set:
    """Integer and bool tensor work computed from graph inputs only (position ids, cache
    positions, masks built from them, and their conversion to float): index arithmetic that runs
    on the host before the kernels, upstream of every Legato value, so it never splits a
    partition. Reported with the host work, not as extern computation."""
    host: set = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or node not in decisions or decisions[node].impl:
            continue
        v = node.meta.get("val")
        ins = [a for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        if not isinstance(v, torch.Tensor) or not all(
            a.op in ("placeholder", "get_attr") or a in host for a in ins
        ):
            continue
        index_in = [a for a in ins if a.meta["val"].dtype in _INDEX_DTYPES]
        if v.dtype in _INDEX_DTYPES and len(index_in) == len(ins):
            host.add(node)  # int/bool from int/bool (or from nothing: arange, ones)
        elif node.target is torch.ops.aten._to_copy.default and index_in and len(ins) == 1:
            host.add(node)  # positions converted to float for the rotary embedding
    return host


class Bounds:
    """Upper bounds of dynamic sizes, from the ShapeEnv's value ranges (mark_dynamic max=).

    A symbol torch left without an upper bound (torch.compile's automatic dynamic shapes) is
    assumed to be at most `assume` (`legato.max_dynamic_dim`) when that is set; `assumed`
    records which symbols got that bound, so a call above it can run eagerly instead."""

    def __init__(self, example_inputs, assume: int | None = None):
        from torch._guards import detect_fake_mode

        mode = detect_fake_mode(example_inputs)
        self.shape_env = getattr(mode, "shape_env", None)
        self.assume = assume
        self.assumed: set = set()

    def _ranges(self, expr):
        from torch.utils._sympy.value_ranges import ValueRanges

        ranges = {}
        for x in expr.free_symbols:
            r = self.shape_env.var_to_range.get(x)
            if r is None:
                continue
            if self.assume is not None and _infinite(r.upper):
                r = ValueRanges(r.lower, max(int(r.lower), self.assume))
                self.assumed.add(x)
            ranges[x] = r
        return ranges

    def __call__(self, size) -> int | None:
        if isinstance(size, int):
            return size
        if self.shape_env is None:
            return None
        expr = size.node.expr if isinstance(size, torch.SymInt) else size
        try:
            from torch.utils._sympy.value_ranges import bound_sympy

            upper = bound_sympy(expr, self._ranges(expr)).upper
        except Exception:  # noqa: BLE001 - no bound known: the caller reports the dim
            return None
        if _infinite(upper):
            return None
        try:
            value = int(upper)
        except (TypeError, ValueError):
            return None
        return value if value < 2**40 else None  # "bounded" by sys.maxsize is unbounded


def _infinite(upper) -> bool:
    try:
        from torch.utils._sympy.numbers import IntInfinity

        if isinstance(upper, IntInfinity) or getattr(upper, "is_finite", True) is False:
            return True
        return int(upper) >= 2**40
    except (TypeError, ValueError):
        return True


@dataclass
class NodeDecision:
    impl: registry.Impl | None
    reason: str | None


class LegatoSupport(OperatorSupportBase):
    """`OperatorSupport` for the partitioner: a node is supported when a resolver returned an
    implementation (decisions computed once, up front, by `LegatoGraphWrapper`)."""

    def __init__(self, decisions: dict):
        self.decisions = decisions

    def is_node_supported(self, submodules, node) -> bool:
        if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
            node = node.args[0]  # an element of a supported node's tuple result
        d = self.decisions.get(node)
        return d is not None and d.impl is not None


class OutputShapes:
    """Sizes, strides and dtypes of a partition's outputs for one call.

    They come from the fake values the traced graph recorded (`meta["val"]`), their symbolic
    sizes evaluated with this call's input sizes, never by running the partition again (meta
    tensors cannot run `_to_copy(device=cpu)` nor bf16 `rms_norm`). A size whose symbol no input
    carries is found by running the partition under a FakeTensorMode instead."""

    def __init__(self, fused: torch.fx.GraphModule, outputs: list):
        placeholders = [n for n in fused.graph.nodes if n.op == "placeholder"]
        self.fused = fused
        self.plan = []  # (arg position, dim or None, symbol)
        for i, n in enumerate(placeholders):
            v = n.meta.get("val")
            if isinstance(v, torch.Tensor):
                for d, size in enumerate(v.shape):
                    if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                        self.plan.append((i, d, size.node.expr))
            elif isinstance(v, torch.SymInt) and v.node.expr.is_Symbol:
                self.plan.append((i, None, v.node.expr))
        known = {sym for _, _, sym in self.plan}
        self.outs = []
        free = set()
        for o in outputs:
            v = o.meta["val"]
            sizes = [_expr(x) for x in v.shape]
            strides = [_expr(x) for x in v.stride()]
            for e in sizes + strides:
                free |= getattr(e, "free_symbols", set())
            self.outs.append((sizes, strides, v.dtype))
        self.symbolic = bool(free)
        self.complete = free <= known
        self._cache: dict = {}

    def __call__(self, args) -> list:
        key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
        shapes = self._cache.get(key)
        if shapes is not None:
            return shapes
        if not self.symbolic:
            shapes = [(tuple(sz), tuple(st), dt) for sz, st, dt in self.outs]
        elif self.complete:
            env = {}
            for i, d, sym in self.plan:
                env[sym] = int(args[i].shape[d] if d is not None else args[i])
            shapes = [
                (tuple(_eval(x, env) for x in sz), tuple(_eval(x, env) for x in st), dt)
                for sz, st, dt in self.outs
            ]
        else:
            shapes = self._fake_run(args)
        self._cache[key] = shapes
        return shapes

    def _fake_run(self, args):
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode() as mode:
            fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            res = self.fused(*fakes)
        res = list(res) if isinstance(res, (tuple, list)) else [res]
        return [(tuple(r.shape), tuple(r.stride()), r.dtype) for r in res]


def _expr(x):
    return x.node.expr if isinstance(x, torch.SymInt) else int(x)


def _eval(e, env) -> int:
    return e if isinstance(e, int) else int(e.xreplace(env))


def _empty_out(shape, stride, dtype):
    """The output buffer: the traced strides (a later extern op may depend on them), unless they
    overlap (an `expand`'s stride 0): the kernel writes every element, so a dense buffer."""
    expected = 1
    for st, sz in sorted((st, sz) for sz, st in zip(shape, stride) if sz != 1):
        if st != expected:
            return torch.empty(shape, dtype=dtype)
        expected *= sz
    return torch.empty_strided(shape, stride, dtype=dtype)


def _original_names(fused: torch.fx.GraphModule, subs: list[str]) -> dict[str, list[str]]:
    """Per fused submodule, the original graph node each of its placeholders stands for.

    `fuse_partitions` fuses one partition after the other and names a submodule's placeholders
    after the nodes that feed it at that moment: when an earlier-fused partition produced an
    input, that is the `getitem` of (or the call of) the earlier submodule, not the node the
    kernel was generated for. The submodule's output node keeps the original names, so the
    call's arguments are traced back through it."""
    outputs = {}
    for t in subs:
        out = next(n for n in getattr(fused, t).graph.nodes if n.op == "output").args[0]
        outputs[t] = [o.name for o in out] if isinstance(out, (tuple, list)) else [out.name]

    def original(a) -> str:
        if a.op == "call_module" and a.target in outputs and len(outputs[a.target]) == 1:
            return outputs[a.target][0]
        if (
            a.op == "call_function"
            and a.target is operator.getitem
            and isinstance(a.args[0], torch.fx.Node)
            and a.args[0].op == "call_module"
            and a.args[0].target in outputs
        ):
            return outputs[a.args[0].target][a.args[1]]
        return a.name

    return {
        n.target: [original(a) for a in n.args]
        for n in fused.graph.nodes
        if n.op == "call_module" and n.target in outputs
    }


class LegatoKernelModule(torch.nn.Module):
    """Runs one partition as its Legato kernel: tensor inputs in, outputs allocated and written
    in place by the kernel, returned in the structure of the fused submodule.

    A call the kernel cannot take (a dynamic size above the bound the kernel was built for,
    `legato.max_dynamic_dim`) or whose run fails runs the partition eagerly instead (a warning,
    counted in the summary's `eager_calls`) unless `legato.strict` / `on_kernel_error="raise"`.
    """

    def __init__(
        self,
        gen: kernelgen.Generated,
        fused: torch.fx.GraphModule,
        info: KernelInfo,
        options: Options,
        input_names: list[str] | None = None,
        sites: list | None = None,
    ):
        """`input_names`: per placeholder of `fused`, the name of the original graph node it
        stands for (default: the placeholder's own name; fusing an earlier partition renames
        the nodes it replaces, see `_original_names`). `sites`: (implementation function,
        node) per node of the kernel, to name the model's line of a failing run (`sites`)."""
        super().__init__()
        self.gen = gen
        self.sites = list(sites or ())
        self.kernel = gen.kernel
        self.layouts = list(gen.layouts) or [None] * len(gen.inputs)
        self._laid: dict[int, tuple] = {}  # input index -> (storage key, laid-out tensor)
        self.layout_count = 0  # parameters laid out (first call, then on each storage change)
        # outputs no one reads and scratch: allocated on the first call (the module is built
        # under aot_autograd's fake mode) and reused by every call
        self._extras: list | None = None
        self.fused = fused  # runs eagerly for a call the kernel cannot take
        self.info = info
        self.options = options
        placeholders = input_names or [n.name for n in fused.graph.nodes if n.op == "placeholder"]
        self.in_pos = [placeholders.index(n.name) for n in gen.inputs]
        out = next(n for n in fused.graph.nodes if n.op == "output").args[0]
        self.single = not isinstance(out, (tuple, list))
        names = [out.name] if self.single else [o.name for o in out]
        by_name = {n.name: i for i, n in enumerate(gen.outputs)}
        self.out_order = [by_name[nm] for nm in names]  # fused output j is kernel output
        self.shapes = OutputShapes(fused, [gen.outputs[i] for i in self.out_order])
        self._warned = False

    def _laid_out(self, ins: list) -> list:
        """`ins` with every input an spmd operand wants laid out replaced by its laid-out copy:
        made on the first call and again when the parameter's storage changed (another
        data_ptr, shape or dtype, or an in-place update: `_version`); the parameters a layout
        is also built from (`Layout.also`) are not kernel arguments and are dropped."""
        out = list(ins)
        pos = {n: i for i, n in enumerate(self.gen.inputs)}
        for i, lay in enumerate(self.layouts):
            if not isinstance(lay, kernelgen.Layout):
                continue
            srcs = [ins[i], *(ins[pos[a]] for a in lay.also)]
            key = tuple((t.data_ptr(), t._version, tuple(t.shape), t.dtype) for t in srcs)
            have = self._laid.get(i)
            if have is None or have[0] != key:
                with torch.no_grad():
                    laid = lay.fn(*(t.detach() for t in srcs)).contiguous()
                assert tuple(laid.shape) == tuple(lay.shape) and laid.dtype == lay.dtype, (
                    f"layout of {lay.node.name}: got {tuple(laid.shape)} {laid.dtype}, the kernel "
                    f"takes {tuple(lay.shape)} {lay.dtype}"
                )
                have = self._laid[i] = (key, laid)
                self.layout_count += 1
            out[i] = have[1]
        return [t for t, lay in zip(out, self.layouts) if lay is not kernelgen.PART_OF_LAYOUT]

    def _too_large(self, ins, shapes) -> str | None:
        tensors = [(f"input {n.name}", t.shape) for n, t in zip(self.gen.inputs, ins)]
        tensors += [(f"output {self.gen.outputs[j].name}", s[0]) for j, s in enumerate(shapes)]
        bounds = list(self.gen.input_bounds) + [self.gen.output_bounds[j] for j in self.out_order]
        for (what, shape), bnds in zip(tensors, bounds):
            for d, (n, b) in enumerate(zip(shape, bnds)):
                if b is not None and n > b:
                    return (
                        f"{what}: dim {d} is {n}, above the bound {b} the kernel was built for "
                        "(legato.max_dynamic_dim, or mark_dynamic(..., max=N))"
                    )
        return None

    def _eager(self, args, reason: str):
        if self.options.on_kernel_error == "raise":
            raise kernelgen.LegatoError(f"legato kernel {self.info.name}: {reason}")
        if not self._warned:
            log.warning("legato: kernel %s runs eagerly for this call: %s", self.info.name, reason)
            self._warned = True
        self.info.eager_calls += 1
        self.info.eager_reason = reason
        return self.fused(*args)

    def forward(self, *args):
        shapes = self.shapes(args)
        # (a non-contiguous input, even an expanded one, is bound as a dense copy: the JIT
        # writes back only the arguments the kernel writes, never an input)
        ins = [args[i] for i in self.in_pos]
        reason = self._too_large(ins, shapes)
        if reason is not None:
            return self._eager(args, reason)
        if any(lay is not None for lay in self.layouts):
            ins = self._laid_out(ins)
        outs = [_empty_out(*s) for s in shapes]
        kouts = [None] * len(outs)
        for j, i in enumerate(self.out_order):
            kouts[i] = outs[j]
        try:
            with self.options.session():
                if self._extras is None:
                    self._extras = [torch.empty(sh, dtype=dt) for sh, dt in self.gen.extras]
                self.kernel(*ins, *kouts, *self._extras)
        except Exception as e:  # noqa: BLE001 - strict raises it; else the call runs eagerly
            if self.options.on_kernel_error == "raise":
                sites.name_user_lines(e, self.sites, str(self.gen.path))
                raise
            return self._eager(args, f"kernel run failed: {_first_line(e)}")
        run = self.kernel.last_run
        cycles = int(getattr(run, "cycles", 0) or 0)
        self.info.calls += 1
        self.info.last_cycles = cycles
        self.info.total_cycles += cycles
        return outs[0] if self.single else tuple(outs)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


_graph_counter = 0
_last_wrapper = None


def last_wrapper() -> LegatoGraphWrapper | None:
    """The most recently built graph wrapper (tests and benches look at its kernel modules)."""
    return _last_wrapper


def _static_input_indices(example_inputs) -> set[int]:
    """Which graph inputs are parameters or buffers of the compiled module.

    aot_autograd records them as the static inputs of the graph it hands the compiler
    (`TracingContext.fw_metadata.static_input_indices`: under dynamo's
    inline_inbuilt_nn_modules the parameters are plain graph inputs and the example inputs fake
    tensors, so `isinstance(x, nn.Parameter)` does not tell); outside a torch.compile (a graph
    wrapped by hand) real `nn.Parameter` inputs count."""
    try:
        from torch._guards import TracingContext

        tc = TracingContext.try_get()
        meta = getattr(tc, "fw_metadata", None) if tc is not None else None
        idx = getattr(meta, "static_input_indices", None)
        if idx is not None:
            return {int(i) for i in idx}
    except Exception:  # noqa: BLE001 - no tracing context: fall back to the inputs' types
        pass
    return {i for i, x in enumerate(example_inputs) if isinstance(x, torch.nn.Parameter)}


# A segment of single-core work before an spmd node is fused into its kernel as a prologue
# (computed on every core) when it reads at most this many bytes: each core loads them.
PROLOGUE_BYTES = 64 * 1024

# The most arguments a chain of spmd kernels (`LegatoGraphWrapper._chains`) takes. Each kernel
# argument's address is a scalar load from the argument table; past what the registers hold,
# the register allocator copies the table into sram with one DMA and re-loads addresses from
# the copy (`backend-allocate-registers`), so arguments cost about 2 cycles per re-load, not a
# DRAM latency each (before, 65 arguments cost 26.9k cycles before the first DMA). The bound
# keeps the table copy and the kernel small. Measured on the tiny Llama decode step
# (EVT0 / EVT1): 22 -> 161.3k / 111.9k cycles (6 / 7 kernels), 48 -> 160.5k / 110.3k,
# 64 -> 160.5k / 110.1k (2 / 2), 100 -> 159.9k / 109.6k (the whole 4-layer stack one kernel).
CHAIN_ARGUMENTS = 128

# ATen ops fused as epilogues besides those tagged pointwise: elementwise copies and casts
_ELEMENTWISE = {
    torch.ops.aten._to_copy.default,
    torch.ops.aten.clone.default,
    torch.ops.aten.alias.default,
    torch.ops.aten.detach.default,
}


def _nbytes(node) -> int | None:
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor):
        return 0
    if not all(isinstance(d, int) for d in v.shape):
        return None
    return v.numel() * v.element_size()


def _epilogue(s, group: list, seg: list, decisions, own: bool = False) -> list:
    """The nodes of `seg` (the single-core segment after the spmd node `s`) that can run as its
    epilogue, finishing each block of its result before it is written: elementwise (pointwise
    ATen ops, casts and copies) with a single-core implementation, or views
    (`kernelgen.EPILOGUE_VIEWS`), of a shape that holds `s`'s static [M, N] result
    (`kernelgen.row_col`: [M, N], [1, M, N], ...) and not of a wider dtype (a widening cast
    starts a norm's f32 statistics: written out, it would only make the next kernel read
    more), reading only `s`, other epilogue nodes and tensors from before the kernel that
    broadcast over the result's blocks ([M, N], [N], [1, N], [M, 1], one element; e.g. SiLU
    of the gate projection, read a block at a time, times the up projection's block); each
    depending on `s` or feeding a node that does. `own` (`Impl.epilogue_own`): only nodes
    that read nothing but `s`'s group and each other, and none at all unless one of them
    computes (not only views)."""
    v = s.meta.get("val")
    if not isinstance(v, torch.Tensor) or v.dim() != 2:
        return []
    m, n = v.shape
    if not (isinstance(m, int) and isinstance(n, int)):
        return []
    inside, done = set(seg), set(group)
    cand: list = []
    for node in seg:
        d = decisions.get(node)
        t = node.target
        nv = node.meta.get("val")
        view = t in kernelgen.EPILOGUE_VIEWS
        if (
            d is None
            or d.impl is None
            or d.impl.spmd
            or any(mem != "sram" for mem in d.impl.memory.values())
            or not (view or t in _ELEMENTWISE or torch.Tag.pointwise in getattr(t, "tags", ()))
            or not isinstance(nv, torch.Tensor)
            or kernelgen.row_col(nv.shape, m, n) is None
            or nv.element_size() > v.element_size()
        ):
            continue
        ins = node.all_input_nodes
        if any(a in inside and a not in cand for a in ins):
            continue
        if view:
            src = node.args[0]
            sv = src.meta.get("val") if isinstance(src, torch.fx.Node) else None
            if not isinstance(sv, torch.Tensor) or kernelgen.row_col(sv.shape, m, n) is None:
                continue
        elif not all(a in done or a in cand or _broadcasts(a, tuple(nv.shape)) for a in ins):
            continue
        if own and not all(a in done or a in cand for a in ins):
            continue
        cand.append(node)
    # those that depend on `s`, and those that feed one of them
    keep: set = set()
    for node in cand:
        if any(a in done or a in keep for a in node.all_input_nodes):
            keep.add(node)
    for node in reversed(cand):
        if any(u in keep for u in node.users):
            keep.add(node)
    out = [node for node in cand if node in keep]
    if own and all(n.target in kernelgen.EPILOGUE_VIEWS for n in out):
        return []
    return out


def _block_bytes(node) -> int:
    """Bytes of one block of an epilogue node's value (`_epilogue`: computed a block of at most
    128 columns at a time, in f32, never whole)."""
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor) or not v.dim():
        return 0
    n = _nbytes(node)
    if n is None:
        return 0
    cols = v.shape[-1]
    return n // v.element_size() // cols * min(cols, 128) * 4 if isinstance(cols, int) else n


def _prologue_read(seg: list, decisions) -> int | None:
    """Bytes each core reads to compute `seg` as a prologue (None: a dynamic size): its inputs
    loaded whole, except an input every reader uses where it is (a `"shared_dram"` operand: an
    embedding table), of which each reader reads as many bytes as its result (a decode step's
    embedding row)."""
    inside = set(seg)

    def in_place(n, a) -> bool:
        impl = decisions[n].impl if n.target not in _BOOKKEEPING else None
        return impl is not None and any(
            x is a and impl.memory.get(pos, "sram") == "shared_dram"
            for pos, x in enumerate(impl.args)
        )

    sizes = []
    for a in {a for n in seg for a in n.all_input_nodes if a not in inside}:
        readers = [n for n in seg if a in n.all_input_nodes]
        if all(in_place(n, a) for n in readers):
            sizes += [_nbytes(n) for n in readers]
        else:
            sizes.append(_nbytes(a))
    return None if None in sizes else sum(sizes)


def _needs(seg: list, x) -> set:
    """The nodes of `seg` that `x` (one of them) is computed from, x included."""
    inside, need = set(seg), {x}
    for n in reversed(seg):
        if n in need:
            need.update(a for a in n.all_input_nodes if a in inside)
    return need


def _components(nodes: list) -> list[list]:
    """The weakly connected parts of `nodes` (edges between two of them), each in the order
    of `nodes`."""
    inside = set(nodes)
    part: dict = {}
    for n in nodes:
        if n in part:
            continue
        part[n] = n
        todo = [n]
        while todo:
            x = todo.pop()
            for y in (*x.all_input_nodes, *x.users):
                if y in inside and y not in part:
                    part[y] = n
                    todo.append(y)
    roots = list(dict.fromkeys(part[n] for n in nodes))
    return [[n for n in nodes if part[n] is r] for r in roots]


def _broadcasts(node, shape) -> bool:
    """`node` is a static tensor that broadcasts to `shape` (each of its dims 1 or equal)."""
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor) or v.dim() > len(shape):
        return False
    dims = list(v.shape)
    if not all(isinstance(d, int) for d in dims):
        return False
    return all(d in (1, f) for d, f in zip(dims, list(shape)[len(shape) - len(dims) :]))


def _has_fused(nodes, s, wrapper) -> bool:
    """The kernel of the spmd node `s` holds fused work besides its folded nodes and getitems."""
    impl = wrapper.decisions[s].impl
    own = set(_taken(impl)) | {s, *impl.members}
    return any(n not in own and not (n.target in _BOOKKEEPING and n.args[0] is s) for n in nodes)


def _prepared_reader(node, decisions):
    """The one reader of `node` when `node` is an MPU weight the kernel module prepares once
    per parameter version (`_prepared`: `Impl(None, (Layout,))` for a single-core
    implementation): the prepared tensor is an input of its reader's kernel, so the two must be
    in one kernel (a prepared step has no value inside a kernel to write out). Else None."""
    d = decisions.get(node)
    if d is None or d.impl is None or d.impl.spmd:
        return None
    if not kernelgen._prepared_step(kernelgen.Step(node, d.impl)) or len(node.users) != 1:
        return None
    return next(iter(node.users))


def _slots(
    nodes: list, spmd: list, own: dict, placed: dict | None = None, follow: dict | None = None
) -> dict:
    """Which single-core segment each non-spmd node of one partition runs in: slot i is the
    segment between the partition's spmd nodes `spmd[i - 1]` and `spmd[i]` (graph order).

    A node can run in any slot from `lo` (after the last spmd node it depends on) to `hi - 1`
    (before the first spmd node that depends on it). The fewest slots that give every node one
    of its range are chosen greedily (interval stabbing: ranges by their last slot, each chosen
    slot the last of the first range not yet covered); each node runs in the earliest chosen
    slot at or after its `lo`, which keeps producers in slots no later than their consumers
    (a consumer's `lo` is at least its producer's). `placed`: nodes computed by the kernel
    of another spmd node (`Impl.members` and `Impl.writes`: node -> that spmd node), ready,
    and needing their inputs, where that spmd node is. `follow`: node -> the node whose slot it
    takes (a prepared MPU weight goes with its reader, `_prepared_reader`, whatever its own
    range: it only exists as an input of its reader's kernel)."""
    index = {s: i + 1 for i, s in enumerate(spmd)}  # spmd[i] closes slot i
    index.update({w: index[s] for w, s in (placed or {}).items() if s in index})
    inside = set(nodes)
    readers = follow or {}
    # (a reader that is an spmd node, or taken by one, has no slot: the node keeps its own)
    follow = {
        n: r
        for n, r in readers.items()
        if n in inside and r in inside and r not in index and r not in own and r not in readers
    }
    lo: dict = {}
    for n in nodes:  # graph order is topological
        lo[n] = max(
            [index[a] if a in index else lo.get(a, 0) for a in n.all_input_nodes if a in inside],
            default=0,
        )
    hi: dict = {}
    for n in reversed(nodes):
        hi[n] = min(
            [index[u] - 1 if u in index else hi.get(u, len(spmd)) for u in n.users if u in inside],
            default=len(spmd),
        )
    free = [n for n in nodes if n not in index and n not in own and n not in follow]
    chosen: list[int] = []
    for n in sorted(free, key=lambda n: hi[n]):
        if not any(lo[n] <= c <= hi[n] for c in chosen):
            chosen.append(hi[n])
    chosen.sort()
    slot = {n: next(c for c in chosen if c >= lo[n]) for n in free}
    slot.update({n: slot[r] for n, r in follow.items()})
    return slot


# views merged by `_merge_views` (not t/permute: a transposed parameter shared by two nodes
# could no longer be folded into either's layout)
_MERGED_VIEWS = {
    torch.ops.aten.view.default,
    torch.ops.aten._unsafe_view.default,
    torch.ops.aten.reshape.default,
}

# views and transpositions: free on the host (they alias their input), a copy on the chip
_HOST_VIEWS = _MERGED_VIEWS | {
    torch.ops.aten.t.default,
    torch.ops.aten.transpose.int,
    torch.ops.aten.permute.default,
    torch.ops.aten.expand.default,
    torch.ops.aten.alias.default,
    torch.ops.aten.detach.default,
}


def _merge_views(gm: torch.fx.GraphModule) -> int:
    """Make identical views of one tensor one node (nn.Linear on a 3-d input views it to 2-d
    once per projection: q, k and v then read three nodes holding the same value, and the
    projections of one input are recognised by their input node, `Impl.group_key`). Views
    compute nothing and alias their input, so merging them changes no value. Returns how
    many nodes were removed."""

    def key(a):
        if isinstance(a, (list, tuple)):
            return tuple(key(x) for x in a)
        return a

    seen: dict = {}
    removed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _MERGED_VIEWS:
            continue
        if any(u.op == "output" for u in node.users):
            continue  # a graph output keeps its own tensor (aot_autograd tracks output aliases)
        try:
            k = (node.target, key(node.args), key(tuple(sorted(node.kwargs.items()))))
            hash(k)
        except TypeError:
            continue
        first = seen.setdefault(k, node)
        if first is not node:
            node.replace_all_uses_with(first)
            gm.graph.erase_node(node)
            removed += 1
    return removed


def _warn_eager_nodes(summary: PlacementSummary) -> None:
    """One log warning per graph for the nodes that run eagerly because no resolver takes them
    (issue 13: the reason is in `last_summary()`, and the user is told); a kernel that failed
    has its own warning where it failed, and a view left on the host for eager readers is free."""
    groups: dict[tuple[str, str], int] = {}
    for e in summary.extern:
        if e.reason.startswith(("no resolver", "resolver refused")):
            groups[(e.op, e.reason)] = groups.get((e.op, e.reason), 0) + 1
    if not groups:
        return
    shown = [f"{op} x{n}: {why}" if n > 1 else f"{op}: {why}" for (op, why), n in groups.items()]
    more = f"; and {len(shown) - 8} more (legato.torch.last_summary())" if len(shown) > 8 else ""
    log.warning(
        "legato: %d node(s) of %s run eagerly: %s%s",
        sum(groups.values()),
        summary.graph,
        "; ".join(shown[:8]),
        more,
    )


class LegatoGraphWrapper:
    """One ATen graph (from aot_autograd) made runnable: Legato kernels + extern nodes."""

    def __init__(
        self, gm: torch.fx.GraphModule, example_inputs, options: Options, name: str | None = None
    ):
        global _graph_counter
        _graph_counter += 1
        self.name = name or f"graph{_graph_counter}"
        self.options = options
        self.bounds = Bounds(example_inputs, options.max_dynamic_dim)
        self._kernels = 0
        self._no_fuse: set = set()  # spmd nodes whose kernel failed with fused work
        self._epilogue_nodes: set = set()  # nodes fused as an epilogue of an spmd node
        # chains of spmd kernels merged into one (`_chains`): the merged nodes -> each phase's
        self._phases: dict[frozenset, list[list]] = {}
        self._no_chain: set = set()  # spmd nodes whose chain failed to compile: apart
        # row-local segments that may be phases of a chain (`_rows_phase`): their nodes ->
        # (the nodes, one core's sram a block holds, their `chip_rows.RowPlan`); and segments
        # that may be core-0 phases (`_serial_phase`): plan None, the sram core 0 holds
        self._rows_groups: dict[frozenset, tuple] = {}
        # spmd kernels with the row phase before them fused as a piece prologue
        # (`_piece_prologues`): their nodes -> (the row phase's nodes, one core's sram it
        # holds, the nodes the operand needs, the others)
        self._pieces: dict[frozenset, tuple] = {}
        self.model = resolve_backend(options.device)(CompileContext(None, self.name))
        self.ctx = registry.ResolveContext(self.model, options, self.bounds)
        self.summary = PlacementSummary(self.name, options.device)
        static = _static_input_indices(example_inputs)
        for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
            if i in static:
                n.meta[kernelgen.PARAM_META] = True
        if registry.run_graph_passes(gm) | bool(_merge_views(gm)):
            gm.recompile()
        self.decisions = self._decide(gm)
        self.gm = self._partition(gm)
        record(self.summary)
        _warn_eager_nodes(self.summary)
        if options.log_summary:
            log.info("%s", self.summary)
        global _last_wrapper
        _last_wrapper = self

    def kernel_modules(self) -> list[LegatoKernelModule]:
        """The graph's kernels, in the order of the graph."""
        return [m for m in self.gm.modules() if isinstance(m, LegatoKernelModule)]

    # -- decisions -----------------------------------------------------------------------------

    def _decide(self, gm) -> dict:
        decisions: dict = {}
        for node in gm.graph.nodes:
            if node.op != "call_function" or _is_host(node):
                continue
            unbounded = [x for x in _symints(node) if self.bounds(x) is None]
            if unbounded and registry.resolvers_for(node.target):
                msg = f"dynamic size {unbounded[0]} has no upper bound (mark_dynamic(..., max=N))"
                if self.options.unbounded_dims == "error":
                    raise kernelgen.UnboundedDim(
                        f"{node.name} ({_op_name(node)}): {msg}. Legato allocates buffers for "
                        "the upper bound of every dynamic dim: mark it with "
                        "legato.torch.mark_dynamic(t, dim, max=N) (or "
                        "torch._dynamo.mark_dynamic(t, dim, min=2, max=N)), or pass "
                        'options={"legato.unbounded_dims": "extern"} to run such nodes eagerly'
                    )
                decisions[node] = NodeDecision(None, msg)
                continue
            empty = _empty_operand(node)
            if empty is not None:
                decisions[node] = NodeDecision(None, empty)
                continue
            res = registry.resolve(node, self.ctx)
            d = NodeDecision(res.impl, res.reason)
            custom = _custom_kernel(node)
            if custom is not None and d.impl is None:
                d = NodeDecision(
                    None,
                    f"custom Legato kernel legato::{custom} (runs its own "
                    "binary between the graph's kernels)",
                )
            decisions[node] = d
        for node in list(decisions):
            self._prepare_weights(node, decisions)
        self._solo: dict = {}  # grouped node -> its own decision (`_group`, `_ungroup`)
        self._no_group: set = set()
        self._group(decisions)
        _host_views(gm, decisions)
        self.host_index = _host_index_work(gm, decisions)
        return decisions

    def _group(self, decisions) -> None:
        """Several spmd nodes in one kernel: nodes whose implementations have equal
        `Impl.group_key`s (projections of one input to the same width: q/k/v, gate/up) are
        computed by the implementation their first node's `merge` returns; the others become
        its `members` (computed by its kernel, like a folded node). Each kernel costs a launch,
        the DRAM latency of its first loads and its barriers; for small weights that is most of
        a projection's time. The nodes of a key take only that input and parameters, so they
        are independent of each other. A merge that refuses (AssertionError) leaves them
        apart."""
        buckets: dict = {}
        for node, d in decisions.items():  # graph order
            impl = d.impl
            if (
                impl is not None
                and impl.spmd
                and impl.group_key is not None
                and impl.merge is not None
                and node not in self._no_group
            ):
                buckets.setdefault(impl.group_key, []).append(node)
        for nodes in buckets.values():
            if len(nodes) < 2:
                continue
            try:
                impl = decisions[nodes[0]].impl.merge(nodes, self.ctx)
            except AssertionError as e:
                log.debug("legato: %s stay apart: %s", [n.name for n in nodes], e)
                continue
            for n in nodes:
                self._solo[n] = decisions[n]
            decisions[nodes[0]] = NodeDecision(impl, None)
            for n in nodes[1:]:
                decisions[n] = NodeDecision(
                    registry.Impl(None, (), name=f"computed by the kernel of {nodes[0].name}"),
                    None,
                )
            self._prepare_weights(nodes[0], decisions)

    def _ungroup(self, leader) -> None:
        """The kernel of the group led by `leader` failed (or its nodes fell into different
        partitions): each node gets its own decision back and is never grouped again."""
        members = self.decisions[leader].impl.members
        for n in (leader, *members):
            self.decisions[n] = self._solo.pop(n)
            self._no_group.add(n)
            self._prepare_weights(n, self.decisions)
        self._no_fuse.discard(leader)

    @staticmethod
    def _prepare_weights(node, decisions) -> None:
        """Weight preparation: an MPU weight computed from one parameter (nn.Linear's t(W)) is
        prepared by the kernel module once per parameter version (`_prepared`); one computed
        from other graph inputs only runs extern. Either way the kernel loads the prepared
        weight straight into mpu_buffer. A
        weight computed from on-chip values (attention's K^T) stays in the kernel: the compiler
        stages it from sram into mpu_buffer. The nodes an spmd implementation folds into a
        parameter layout are taken over by it: they never run (unless its kernel fails)."""
        d = decisions.get(node)
        if d is None or d.impl is None:
            return
        if d.impl.spmd:
            for fold in _folds(d.impl):
                decisions[fold] = NodeDecision(
                    registry.Impl(
                        None, (), name=f"folded into the parameter layout of {node.name}"
                    ),
                    None,
                )
            for w in (*d.impl.writes, *d.impl.takes):
                decisions[w] = NodeDecision(
                    registry.Impl(None, (), name=f"computed by the kernel of {node.name}"), None
                )
            return
        for pos, mem in d.impl.memory.items():
            src = d.impl.args[pos]
            # an MPU weight, or a transposed weight an f32 matmul reads from sram (the
            # kernel would transpose it on the chip on every call)
            if mem != "mpu_weight" and not (
                mem == "sram" and isinstance(src, torch.fx.Node) and src.target in _TRANSPOSES
            ):
                continue
            pd = decisions.get(src)
            if pd is None or pd.impl is None or _folded_impl(pd.impl):
                continue
            prep = _prepared(src)
            if prep is not None:
                decisions[src] = NodeDecision(
                    registry.Impl(
                        None,
                        (prep,),
                        name=f"prepared from {prep.node.name} once per parameter version",
                    ),
                    None,
                )
                continue
            if _prepared_on_host(src):
                # a tied weight (t(W) of a W other nodes read too): made on the host once per
                # parameter version and kept with the compiled graph (`PreparedOnce`)
                decisions[src] = NodeDecision(None, PREPARED_ON_HOST)
                continue
            if mem == "mpu_weight" and all(a.op == "placeholder" for a in src.all_input_nodes):
                # (an f32 matmul's transposed graph input stays in its kernel: transposed on
                # the chip, not split from it)
                decisions[src] = NodeDecision(
                    None,
                    f"prepares the MPU weight of {node.name} ({_op_name(node)}) "
                    "from graph inputs; it runs eagerly so the kernel loads the weight "
                    "straight into mpu_buffer",
                )

    def _without_spmd(self, node, why: str) -> None:
        """The spmd kernel of `node` failed to compile: ask its other resolvers (the single-core
        ones), and give its folded nodes their own decisions back."""
        folds = _taken(self.decisions[node].impl)
        impl, refusals = None, [f"spmd kernel failed: {why}"]
        for r in registry.resolvers_for(node.target):
            try:
                got = r(node, self.ctx)
            except AssertionError as e:
                refusals.append(str(e))
                continue
            except Exception as e:  # noqa: BLE001 - as registry.resolve
                if self.options.strict:
                    raise
                refusals.append(f"{type(e).__name__}: {e}")
                continue
            if got is not None and not got.spmd:
                impl = got
                break
        self.decisions[node] = NodeDecision(impl, None if impl else "; ".join(refusals))
        for f in folds:
            res = registry.resolve(f, self.ctx)
            self.decisions[f] = NodeDecision(res.impl, res.reason)
        self._prepare_weights(node, self.decisions)

    def _spmd_node(self, n) -> bool:
        d = self.decisions.get(n)
        return d is not None and d.impl is not None and d.impl.spmd

    def _split_spmd(self, partitions):
        """Each spmd node becomes a partition of its own (with its folded nodes and the getitems
        of its tuple result); the partitioner's partition around it is cut into as few
        single-core segments as its dependencies allow (`_slots`): each kernel costs a launch
        and a DRAM round trip, so small work that can wait for a later spmd node, or run before
        an earlier one, shares one kernel with its neighbours (the q, k and v views and the
        rotary of both between the projections and the cache appends: one kernel, not three).
        The partitions stay acyclic: the partitioner's partitions are convex (every path between
        two of its nodes stays inside), and along such a path the slots never decrease."""
        from torch.fx.passes.infra.partitioner import Partition

        if not any(self._spmd_node(n) for p in partitions for n in p.nodes):
            return partitions
        for p in partitions:
            for n in p.nodes:
                if self._spmd_node(n) and any(
                    m not in p.nodes for m in self.decisions[n].impl.members
                ):
                    self._ungroup(n)  # its nodes were not partitioned together
        own: dict = {}  # folded node / getitem / member -> its spmd node
        members: dict = {}
        for p in partitions:
            for n in p.nodes:
                if self._spmd_node(n):
                    for f in _taken(self.decisions[n].impl):
                        own[f] = n
                    for m in self.decisions[n].impl.members:
                        own[m] = members[m] = n
                    for u in n.users:
                        if u.target is operator.getitem:
                            own[u] = n
        order = {n: i for i, n in enumerate(self._order)}
        out = []
        for p in partitions:
            nodes = sorted(p.nodes, key=order.__getitem__)
            spmd = [n for n in nodes if self._spmd_node(n)]
            if not spmd:
                out.append(nodes)
                continue
            placed = {**members, **{w: s for s in spmd for w in self.decisions[s].impl.writes}}
            follow = {n: r for n in nodes if (r := _prepared_reader(n, self.decisions))}
            slot = _slots(nodes, spmd, own, placed, follow)
            segs = [[n for n in nodes if slot.get(n) == i] for i in range(len(spmd) + 1)]
            groups = [
                list(_taken(self.decisions[s].impl))
                + [s]
                + list(self.decisions[s].impl.members)
                + [u for u in s.users if own.get(u) is s]
                for s in spmd
            ]
            for i, s in enumerate(spmd):
                if s not in self._no_fuse:
                    self._fuse_into(s, groups[i], segs, i)
            pieces = []  # (nodes, its spmd node or None for a single-core segment)
            for i in range(len(spmd) + 1):
                if segs[i]:
                    pieces.append((segs[i], None))
                if i < len(spmd):
                    pieces.append((groups[i], spmd[i]))
            out += self._chains(pieces)
        return [Partition(id=i, nodes=seg) for i, seg in enumerate(out)]

    def _spmd_of(self, group: list):
        return next(n for n in group if self._spmd_node(n))

    def _phase_sram(self, group: list) -> int:
        """Bytes of one core's sram the kernel of `group` holds at most: its spmd
        implementation's `onchip` (unknown: its tensor operands whole) plus the values of the
        work fused into it."""
        rows = self._rows_groups.get(frozenset(group))
        if rows is not None:
            return rows[1]
        piece = self._pieces.get(frozenset(group))
        if piece is not None:
            seg = set(piece[0])
            return self._phase_sram([n for n in group if n not in seg]) + piece[1]
        spmd = next(n for n in group if self._spmd_node(n))
        impl = self.decisions[spmd].impl
        own = {spmd, *impl.members, *_taken(impl)}
        if impl.onchip is not None:
            held = impl.onchip
        else:
            held = sum(
                _nbytes(a) or 0
                for a in impl.args
                if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)
            )
        fused = sum(
            _block_bytes(n) if n in self._epilogue_nodes else _nbytes(n) or 0
            for n in group
            if n not in own and n.target not in _BOOKKEEPING and not _folded_impl(impl)
        )
        return held + fused

    def _fits(self, chain: list, group: list) -> bool:
        """Whether `group` (one spmd node's kernel) may join `chain` as its next phase: neither
        failed in a chain before, no parameter one of them takes laid out is read as it is by
        the other (the kernel's argument is the laid-out copy), each phase with the next one's
        preload (`Impl.preload_bytes`, issued in it) fits one core's sram (the phases reuse
        each other's space, `core-plan-memory`), and the chain's arguments fit the scalar
        registers (`CHAIN_ARGUMENTS`)."""
        if any(self._spmd_node(n) and n in self._no_chain for n in (*group, *chain[0])):
            return False

        def laid(nodes):
            out = set()
            for n in nodes:
                if self._spmd_node(n):
                    for a in self.decisions[n].impl.args:
                        if isinstance(a, kernelgen.Layout):
                            out |= {a.node, *a.also}
            return out

        def reads(nodes):
            inside = set(nodes)
            return {
                a
                for n in nodes
                if not (self._spmd_node(n) or n.target in _BOOKKEEPING)
                and self.decisions.get(n) is not None
                and self.decisions[n].impl is not None
                and not _folded_impl(self.decisions[n].impl)
                for a in n.all_input_nodes
                if a not in inside
            } | {
                a
                for n in nodes
                if self._spmd_node(n)
                for a in self.decisions[n].impl.args
                if isinstance(a, torch.fx.Node)
            }

        before = [n for g in chain for n in g]
        if laid(before) & reads(group) or laid(group) & reads(before):
            return False
        groups = [*chain, group]
        pre = [
            0
            if frozenset(g) in self._rows_groups
            else self.decisions[self._spmd_of(g)].impl.preload_bytes
            for g in groups
        ]
        held = [self._phase_sram(g) + nxt for g, nxt in zip(groups, [*pre[1:], 0], strict=True)]
        if max(held) > self.model.sram_size:
            return False
        return self._arguments([*before, *group]) <= CHAIN_ARGUMENTS

    def _arguments(self, nodes: list) -> int:
        """The arguments of the kernel of the chain `nodes` (`kernelgen.generate_chain`):
        its tensor inputs (a layout's `also` parameters are not), outputs, the activations
        one phase writes and a later one reads, and each implementation's scratch."""
        inputs, _, outputs = self._kernel_io(nodes)
        also = {
            x
            for n in nodes
            if self._spmd_node(n)
            for a in self.decisions[n].impl.args
            if isinstance(a, kernelgen.Layout)
            for x in a.also
        }
        spmd = [n for n in nodes if self._spmd_node(n)]
        inside = set(nodes)
        # values crossing phases (an upper bound: every value read by another spmd node's
        # group; the fused work of one phase reads its own values on chip)
        acts = {
            a
            for n in spmd
            for a in self.decisions[n].impl.args
            if isinstance(a, torch.fx.Node) and a in inside
        } | {
            a
            for g, _, _ in self._rows_groups.values()
            if g <= inside
            for n in g
            for a in n.all_input_nodes
            if a in inside and a not in g
        }
        scratch = sum(len(self.decisions[n].impl.scratch) for n in spmd)
        return len([i for i in inputs if i not in also]) + len(outputs) + len(acts) + scratch

    def _chains(self, pieces: list) -> list[list]:
        """Consecutive spmd kernels of one partition made one kernel, each a phase of it
        (`kernelgen.generate_chain`: a barrier between two), while the chain fits one core's
        on-chip memory (`_fits`): a launch, the first loads' DRAM latency and a drain per
        node saved (a decoder layer's q/k/v, attention, o, gate/up and down: one kernel, not
        five). A single-core segment before, between or after them joins the chain as a row
        phase (`_rows_phase`) or a core-0 phase (`_serial_phase`), else it ends it. Convex:
        `pieces` are in an order every path follows (`_slots`), and a chain is a run of
        consecutive pieces."""
        out: list[list] = []
        chain: list = []  # the groups of the current chain (each one spmd node's kernel)

        def close():
            if len(chain) > 1 or (chain and frozenset(chain[0]) in self._pieces):
                merged = [n for g in chain for n in g]
                self._phases[frozenset(merged)] = [self._phase(g) for g in chain]
                out.append(merged)
            elif chain:
                out.append(chain[0])
            chain.clear()

        inside = {n for nodes, _ in pieces for n in nodes}
        for piece, s in self._piece_prologues(pieces):
            runs = [piece]
            if s is None and not (
                self.options.fuse_chains
                and (self._rows_phase(piece) or self._serial_phase(piece, inside))
            ):
                runs = self._serial_runs(piece, inside) if self.options.fuse_chains else None
                if runs is None:
                    close()
                    out.append(piece)
                    continue
                for r in runs:
                    self._serial_phase(r, inside)  # (records each run's sram)
            for nodes in runs:
                if not (chain and self.options.fuse_chains and self._fits(chain, nodes)):
                    close()
                chain.append(nodes)
        close()
        return out

    def _piece_prologues(self, pieces: list) -> list:
        """`pieces` (as `_chains` takes them) with each row-local segment that computes the
        operand an spmd kernel after it takes one piece of rows at a time (`Impl.rows_prologue`:
        the prefill projections' x, a residual add + RMSNorm) merged into that kernel as its
        piece prologue (`kernelgen.PiecePhase`): each core computes the rows it reads on chip,
        instead of a row phase, a barrier and x's round trip through shared DRAM
        (`legato.fuse_pieces`)."""
        if not (self.options.fuse_chains and self.options.fuse_pieces):
            return pieces
        out: list = []
        for nodes, s in pieces:
            if (
                s is not None
                and out
                and out[-1][1] is None
                and self._piece_of(out[-1][0], nodes, s)
            ):
                seg = out.pop()[0]
                merged = [*seg, *nodes]
                pos, r = self.decisions[s].impl.rows_prologue
                inputs, steps, outputs = self._kernel_io(seg)
                plan = self._rows_groups[frozenset(seg)][2]
                from legato.torch.library import chip_rows

                held = chip_rows.block_bytes(inputs, steps, outputs, plan, self.model.num_cores, r)
                need = _needs(seg, self.decisions[s].impl.args[pos])
                self._pieces[frozenset(merged)] = (
                    list(seg),
                    held,
                    [n for n in seg if n in need],
                    [n for n in seg if n not in need],
                )
                out.append((merged, s))
            else:
                out.append((nodes, s))
        return out

    def _piece_of(self, seg: list, group: list, s) -> bool:
        """Whether the row-local segment `seg` before the spmd kernel `group` (of node `s`)
        can be its piece prologue (`_piece_prologues`): the implementation takes one
        (`Impl.rows_prologue`), `seg` is a row phase (`_rows_phase`) computing that operand
        [M, K] with its rows in dim 0, and nothing else of the kernel reads `seg`."""
        from legato.torch.library import chip_rows

        impl = self.decisions[s].impl
        if impl.rows_prologue is None or s in self._no_chain or s in self._no_fuse:
            return False
        if not self._rows_phase(seg):
            return False
        pos, r = impl.rows_prologue
        x = impl.args[pos]
        inside = set(seg)
        if x not in inside or any(
            isinstance(a, torch.fx.Node) and a in inside
            for k, a in enumerate(impl.args)
            if k != pos
        ):
            return False
        own = {s, *impl.members}
        if any(a in inside for n in group if n not in own for a in n.all_input_nodes):
            return False
        # the work x does not need runs after the projection, rows over every core (the
        # first RMSNorm's neighbours: the rotary's cos/sin tables, the mask); none of it may
        # read what x needs (computed on the piece's cores only)
        need = _needs(seg, x)
        if any(a in need for n in seg if n not in need for a in n.all_input_nodes):
            return False
        inputs, steps, outputs = self._kernel_io(seg)
        plan = self._rows_groups[frozenset(seg)][2]
        if not chip_rows.piece_operand(inputs, steps, outputs, plan, x, r):
            return False
        # the piece's blocks beside the kernel's own (a chain's `_fits` counts them as well)
        held = chip_rows.block_bytes(inputs, steps, outputs, plan, self.model.num_cores, r)
        return self._phase_sram(group) + held <= self.model.sram_size

    def _phase(self, group: list):
        """A phase of a chain for `kernelgen.generate`: the nodes of one spmd node's kernel, or
        a `kernelgen.RowsPhase` for a row-local segment (`_rows_phase`), or a
        `kernelgen.PiecePhase` for an spmd kernel with a piece prologue (`_piece_prologues`)."""
        from legato.torch.library import chip_rows, chip_serial

        piece = self._pieces.get(frozenset(group))
        if piece is not None:
            seg, _, need, rest = piece
            plan = self._rows_groups[frozenset(seg)][2]
            ncores = self.model.num_cores

            def piece_lines(inputs, steps, outputs, x, r, names, ns, fresh, impl_names):
                return chip_rows.piece_lines(
                    inputs, steps, outputs, plan, x, r, names, ns, fresh, impl_names
                )

            def rest_lines(inputs, steps, outputs, names, ns, fresh, impl_names, indent):
                return chip_rows.phase_lines(
                    inputs, steps, outputs, plan, ncores, names, ns, fresh, impl_names, indent
                )

            return kernelgen.PiecePhase(list(group), need, piece_lines, rest, rest_lines)
        rows = self._rows_groups.get(frozenset(group))
        if rows is None:
            return list(group)
        plan, ncores = rows[2], self.model.num_cores
        inputs, _, outputs = self._kernel_io(group)
        if plan is None:  # a core-0 phase (`_serial_phase`)
            return kernelgen.RowsPhase(list(group), inputs, outputs, chip_serial.phase_lines)

        def lines(inputs, steps, outputs, names, ns, fresh, impl_names, indent):
            return chip_rows.phase_lines(
                inputs, steps, outputs, plan, ncores, names, ns, fresh, impl_names, indent
            )

        return kernelgen.RowsPhase(list(group), inputs, outputs, lines)

    def _rows_phase(self, seg: list) -> bool:
        """Whether the single-core segment `seg` between two chip-scale kernels can be a phase
        of their chain: it is row-local work a row-split kernel takes on its own
        (`chip_rows.plan`: a prefill's RMSNorm, rotary, head views), so in the chain it runs on
        every core as it would alone, its blocks of rows from and to shared DRAM
        (`kernelgen.RowsPhase`). Records its plan and its sram (`chip_rows.block_bytes`)."""
        from legato.torch.library import chip_rows

        key = frozenset(seg)
        if key in self._rows_groups:
            return self._rows_groups[key][2] is not None  # (None: a core-0 phase)
        if any(n in self._no_chain for n in seg):
            return False
        inputs, steps, outputs = self._kernel_io(seg)
        plan = chip_rows.plan(inputs, steps, outputs)
        if plan is None:
            return False
        held = chip_rows.block_bytes(inputs, steps, outputs, plan, self.model.num_cores)
        self._rows_groups[key] = (key, held, plan)
        return True

    def _serial_phase(self, seg: list, inside: set) -> bool:
        """Whether the single-core segment `seg` next to chip-scale kernels can be a phase of
        their chain run by core 0 (`chip_serial`: a decode step's norm, projections too narrow
        for every core, rotary; the other cores wait at the next barrier): one kernel, not a
        single-core kernel between two all-core ones. The budget is one core's on-chip
        memory: every value and loaded input of the segment in sram (`_fits` adds the next
        phase's preload) and its MPU weights in mpu_buffer. Not when a value of a dynamic
        shape would cross to or from another phase of the partition (`inside`): a chain's
        activation buffers have the bound's static size (Gemma2's sliding-window slices of the
        cache an attention appended). Records its sram as a row phase's (`_rows_groups`, plan
        None)."""
        key = frozenset(seg)
        if key in self._rows_groups:
            return self._rows_groups[key][2] is None
        held = self._serial_sram(seg, inside)
        if held is None:
            return False
        self._rows_groups[key] = (key, held, None)
        return True

    def _serial_sram(self, seg: list, inside: set) -> int | None:
        """The sram core 0 holds for `seg` as a core-0 phase (`_serial_phase`), or None when it
        cannot be one. Records nothing."""
        from legato.torch.library import chip_serial

        key = frozenset(seg)
        if any(n in self._no_chain for n in seg):
            return None
        inputs, steps, outputs = self._kernel_io(seg)
        crossing = [a for a in inputs if a in inside] + [
            o for o in outputs if any(u in inside and u not in key for u in o.users)
        ]
        if any(_nbytes(a) is None for a in crossing):
            return None
        for st in steps:
            impl = st.impl
            if st.node.target in _BOOKKEEPING:
                continue
            if impl is None or impl.spmd or impl.rows_only:
                return None
            if impl.fn is None and not kernelgen._prepared_step(st):
                return None  # (folded into a layout, or computed by another kernel)
            if impl.fn is None and any(u not in key for u in st.node.users):
                return None  # a prepared weight is an input of its reader's phase only
        held = chip_serial.onchip_bytes(inputs, steps, self.bounds)
        if held is None or held[0] > self.model.sram_size or held[1] > self.model.mpu_buffer_size:
            return None
        return held[0]

    def _serial_runs(self, seg: list, inside: set) -> list[list] | None:
        """`seg` (a single-core segment of a chain, in graph order) cut into consecutive runs
        that are each a core-0 phase (`_serial_phase`), as few as graph order allows (each run
        as long as it fits), when `seg` is not one as a whole because its MPU weights do not
        fit one core's mpu_buffer together (a 256-wide layer's q, k and v projections on EVT0:
        3 x 128 KiB against 256 KiB; the column block the compiler stages to multiply by a
        weight wider than the MPU tile takes the space of that weight, dead once transposed
        into sram, so the weights alone are the budget). A prepared MPU weight
        (`_prepared_reader`) and a getitem go with the node that reads / makes them. None when
        the segment has no MPU weight over budget or some run would not be a phase: the
        segment then ends the chain as a single-core kernel, as before (one whose weights do
        not fit could only compile with its matmuls eager, each splitting the kernels
        further). Graph-order runs keep the partition acyclic: every edge goes from a run to
        itself or a later one, and a path leaving the partition cannot come back into it (it
        is convex)."""
        from legato.torch.library import chip_serial

        inputs, steps, _ = self._kernel_io(seg)
        weights = [
            st for st in steps if st.impl is not None and "mpu_weight" in st.impl.memory.values()
        ]
        if len(weights) < 2:
            return None  # (one run would hold them all)
        held = chip_serial.onchip_bytes(inputs, steps, self.bounds)
        if held is None or held[1] <= self.model.mpu_buffer_size:
            return None  # (not a phase for another reason than its MPU weights)
        key = set(seg)
        follow = {}
        for n in seg:
            r = _prepared_reader(n, self.decisions)
            if r in key:
                follow[n] = r
            elif n.target in _BOOKKEEPING and n.args[0] in key:
                follow[n] = n.args[0]
        heads = [n for n in seg if n not in follow]

        def run(nodes):
            take = set(nodes)
            return [n for n in seg if n in take or follow.get(n) in take]

        runs: list[list] = []
        cur: list = []
        for n in heads:
            if cur and self._serial_sram(run([*cur, n]), inside) is not None:
                cur.append(n)
                continue
            if cur:
                runs.append(run(cur))
            if self._serial_sram(run([n]), inside) is None:
                return None
            cur = [n]
        runs.append(run(cur))
        return runs

    def _split_rows(self, partitions):
        """A single-core partition made of independent parts (no edge between them: a
        prefill's first RMSNorm beside the rotary's cos/sin tables and the mask) is cut so that
        each part that is a row-split kernel on its own (`chip_rows.plan`) is one, on every
        core; the other parts stay one single-core kernel. Acyclic: the partitions are convex,
        and no path joins two parts of one (it would run inside it), so each part, and any
        union of parts, is convex too."""
        from torch.fx.passes.infra.partitioner import Partition

        from legato.torch.library import chip_rows

        order = {n: i for i, n in enumerate(self._order)}
        out, cut = [], False
        for p in partitions:
            nodes = sorted(p.nodes, key=order.__getitem__)
            parts = [] if any(self._spmd_node(n) for n in nodes) else _components(nodes)
            if len(parts) > 1 and chip_rows.plan(*self._kernel_io(nodes)):
                parts = []  # row-split as a whole: one launch for all its parts
            rows = (
                [] if len(parts) < 2 else [c for c in parts if chip_rows.plan(*self._kernel_io(c))]
            )
            if not rows:
                out.append(p)
                continue
            cut = True
            taken = {n for c in rows for n in c}
            rest = [n for n in nodes if n not in taken]
            out += [Partition(nodes=c) for c in rows] + ([Partition(nodes=rest)] if rest else [])
        if not cut:
            return partitions
        for i, p in enumerate(out):
            p.id = i
        return out

    def _fuse_into(self, s, group: list, segs: list, i: int) -> None:
        """Fuse small work into the kernel of the spmd node `s` (`segs[i]` runs before it,
        `segs[i + 1]` after): the elementwise nodes after it that work on its result
        (`_epilogue`) when its implementation takes an epilogue, and the whole segment before
        it as a prologue computed on every core when it computes an operand the implementation
        takes as an on-chip value (`Impl.values`) and reads little (`PROLOGUE_BYTES`). Each
        such segment would otherwise be a kernel of its own: a launch and a DRAM round trip
        for a few KiB (a norm, a residual add, SiLU(gate) * up in decode)."""
        impl = self.decisions[s].impl
        if impl.epilogue and i + 1 < len(segs):
            epi = _epilogue(s, group, segs[i + 1], self.decisions, impl.epilogue_own)
            if epi:
                self._epilogue_nodes.update(epi)
                group.extend(epi)
                segs[i + 1] = [n for n in segs[i + 1] if n not in set(epi)]
        seg = segs[i]
        if not impl.values or not seg:
            return
        inside = set(seg)
        feeds = [
            pos for pos, a in enumerate(impl.args) if isinstance(a, torch.fx.Node) and a in inside
        ]
        if not feeds or any(pos not in impl.values for pos in feeds):
            return
        if any(
            self.decisions[n].impl is None
            or self.decisions[n].impl.spmd
            or any(m not in ("sram", "shared_dram") for m in self.decisions[n].impl.memory.values())
            or kernelgen._prepared_step(kernelgen.Step(n, self.decisions[n].impl))
            for n in seg
            if n.target not in _BOOKKEEPING
        ):
            # a matmul's weight (an MPU weight, or f32's prepared t(W)) would be read by every
            # core: the segment is a core-0 phase of the chain instead (`_serial_phase`;
            # measured on the tiny Llama's f32 decode step, its first q/k/v projections as the
            # attention's prologue: 21674 / 19181 cycles EVT0 / EVT1, as a core-0 phase
            # 20997 / 18432)
            return
        read = _prologue_read(seg, self.decisions)
        if read is None or read > PROLOGUE_BYTES:
            return
        group[:0] = seg
        segs[i] = []

    # -- partitions ----------------------------------------------------------------------------

    def _propose(self, gm):
        support = LegatoSupport(self.decisions)
        partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
        self._order = list(gm.graph.nodes)
        partitions = [
            p
            for p in self._split_rows(self._split_spmd(partitioner.propose_partitions()))
            if sum(1 for n in p.nodes if n.target not in _BOOKKEEPING) >= self.options.min_ops
        ]
        return partitioner, partitions

    def _partition(self, gm):
        """Partitions whose kernels all compile. A partition that fails is bisected to the first
        node that makes it fail; that node runs eagerly (reason `kernel failed: ...`) and the
        graph is partitioned again, up to `_MAX_CULPRITS` times per graph (then a failing
        partition runs eagerly whole)."""
        compiled: dict[frozenset, kernelgen.Generated | str] = {}
        culprits = 0
        while True:
            partitioner, partitions = self._propose(gm)
            retry = False
            for p in partitions:
                nodes = [n for n in gm.graph.nodes if n in p.nodes]
                got = self._compiled(nodes, compiled)
                if isinstance(got, kernelgen.Generated):
                    continue
                spmd = [n for n in nodes if self._spmd_node(n)]
                if len(spmd) > 1 or frozenset(nodes) in self._phases:
                    log.warning(
                        "legato: the chain of chip-scale kernels %s fails to compile as one "
                        "kernel, compiling them apart: %s",
                        ", ".join(n.name for n in spmd),
                        got,
                    )
                    self._no_chain.update(spmd)
                    retry = True
                    continue
                if spmd and spmd[0] not in self._no_fuse and _has_fused(nodes, spmd[0], self):
                    log.warning(
                        "legato: the chip-scale kernel of %s (%s) with the work fused into it "
                        "fails to compile, compiling that work apart: %s",
                        spmd[0].name,
                        _op_name(spmd[0]),
                        got,
                    )
                    self._no_fuse.add(spmd[0])
                    retry = True
                    continue
                if spmd and self.decisions[spmd[0]].impl.members:
                    log.warning(
                        "legato: the chip-scale kernel of %s with %s fails to compile, "
                        "compiling them apart: %s",
                        spmd[0].name,
                        ", ".join(m.name for m in self.decisions[spmd[0]].impl.members),
                        got,
                    )
                    self._ungroup(spmd[0])
                    retry = True
                    continue
                if spmd:
                    log.warning(
                        "legato: the chip-scale kernel of %s (%s) fails to compile, trying its "
                        "single-core implementations: %s",
                        spmd[0].name,
                        _op_name(spmd[0]),
                        got,
                    )
                    self._without_spmd(spmd[0], got)
                    retry = True
                    continue
                if culprits >= _MAX_CULPRITS:
                    for n in nodes:
                        if n.target not in _BOOKKEEPING:
                            self.decisions[n] = NodeDecision(None, f"kernel failed: {got}")
                    retry = True
                    continue
                culprit, why = self._bisect(nodes, got, compiled)
                log.warning(
                    "legato: %s (%s) runs eagerly: its kernel fails to compile: %s",
                    culprit.name,
                    _op_name(culprit),
                    why,
                )
                self.decisions[culprit] = NodeDecision(None, f"kernel failed: {why}")
                # a prepared t(W) the culprit read is now read by an eager node only: a view
                # on the host (free), not a prepared step left without its reader, which
                # would fail in the next kernel and be bisected out as a culprit of its own
                _host_views(gm, self.decisions)
                culprits += 1
                retry = True
            if not retry:
                break
        in_partition = {n for p in partitions for n in p.nodes}
        prepared: set = set()
        for node in gm.graph.nodes:
            if node.op != "call_function" or node.target in _BOOKKEEPING:
                continue
            flops = _matmul_flops(node, self.bounds)
            self.summary.matmul_flops += flops
            if node in in_partition:
                self.summary.matmul_flops_legato += flops
            if _is_host(node):
                self.summary.host.append(f"{node.name}: {_op_name(node)}")
                continue
            if node in self.host_index:
                self.summary.host.append(f"{node.name}: {_op_name(node)} (index arithmetic)")
                continue
            d = self.decisions.get(node)
            if node not in in_partition and d is not None and d.reason == PREPARED_ON_HOST:
                self.summary.host.append(f"{node.name}: {_op_name(node)} ({PREPARED_ON_HOST})")
                prepared.add(node.name)
                continue
            if node not in in_partition:
                d = self.decisions.get(node)
                reason = (
                    d.reason
                    if d is not None and d.reason
                    else f"partition smaller than legato.min_ops={self.options.min_ops}"
                )
                self.summary.extern.append(ExternInfo(node.name, _op_name(node), reason))
        gens = []
        for p in partitions:
            nodes = [n for n in gm.graph.nodes if n in p.nodes]
            gens.append((nodes, compiled[frozenset(nodes)]))
        # (fusing renames the nodes a partition replaces: kernel modules find their inputs
        # through `_original_names`, whatever the order partitions are fused in)
        fused = partitioner.fuse_partitions(partitions) if partitions else gm
        subs = [
            n.target
            for n in fused.graph.nodes
            if n.op == "call_module" and n.target.startswith("fused_")
        ]
        # fused submodules hold copies of the partition's nodes, with the same names
        by_names = {frozenset(n.name for n in nodes): (nodes, gen) for nodes, gen in gens}
        originals = _original_names(fused, subs)
        for target in subs:
            sub = getattr(fused, target)
            names = frozenset(n.name for n in sub.graph.nodes if n.op == "call_function")
            nodes, gen = by_names[names]
            labels = [
                f"{n.name}: {_op_name(n)} -> {self.decisions[n].impl.label}"
                for n in nodes
                if n.target not in _BOOKKEEPING
            ]
            info = KernelInfo(gen.name, labels, str(gen.path))
            self.summary.kernels.append(info)
            setattr(
                fused,
                target,
                LegatoKernelModule(
                    gen,
                    sub,
                    info,
                    self.options,
                    originals[target],
                    [(self.decisions[n].impl.fn, n) for n in nodes if n.target not in _BOOKKEEPING],
                ),
            )
        _install_prepared(fused, prepared)
        fused.recompile()
        return fused

    def _kernel_io(self, nodes):
        """The tensor inputs, steps and outputs of a kernel running `nodes` of the graph."""
        inside = set(nodes)
        inputs, outputs, steps = [], [], []
        for n in nodes:
            for a in n.all_input_nodes:
                if (
                    a not in inside
                    and a not in inputs
                    and isinstance(a.meta.get("val"), torch.Tensor)
                ):
                    inputs.append(a)
            d = self.decisions.get(n)
            steps.append(kernelgen.Step(n, None if n.target in _BOOKKEEPING else d.impl))
            if any(u not in inside for u in n.users) and isinstance(
                n.meta.get("val"), torch.Tensor
            ):
                outputs.append(n)
        return inputs, steps, outputs

    def _compiled(self, nodes, cache) -> kernelgen.Generated | str:
        """The compiled kernel of `nodes`, or the first line of why it does not compile."""
        key = frozenset(nodes)
        if key in cache:
            return cache[key]
        self._kernels += 1
        name = f"{self.name}_k{self._kernels - 1}"
        try:
            inputs, steps, outputs = self._kernel_io(nodes)
            gen = self._row_split(name, inputs, steps, outputs)
            if gen is None:
                gen = kernelgen.generate(
                    name,
                    inputs,
                    steps,
                    outputs,
                    self.options.device,
                    self.bounds,
                    epilogue=frozenset(n for n in nodes if n in self._epilogue_nodes),
                    phases=self._phases.get(key),
                )
                gen.kernel.compile()
            result: kernelgen.Generated | str = gen
        except Exception as e:  # noqa: BLE001 - strict raises it; else the nodes run eagerly
            if self.options.on_kernel_error == "raise":
                raise
            result = _first_line(e)
        cache[key] = result
        return result

    def _row_split(self, name, inputs, steps, outputs):
        """The all-core kernel of a row-local partition (`chip_rows`: a prefill's norms and
        elementwise chains over many rows), compiled; None when the partition is not one or
        its row-split kernel fails to compile (then it is generated for one core)."""
        from legato.torch.library import chip_rows

        plan = chip_rows.plan(inputs, steps, outputs)
        if plan is None:
            return None
        try:
            gen = chip_rows.generate_rows(
                name, inputs, steps, outputs, self.options.device, self.model.num_cores, plan
            )
            gen.kernel.compile()
        except Exception as e:  # noqa: BLE001 - the single-core kernel is generated instead
            if self.options.on_kernel_error == "raise":
                raise
            log.warning("legato: the row-split kernel of %s fails, one core: %s", name, e)
            return None
        return gen

    def _bisect(self, nodes, why: str, cache):
        """The first node of `nodes` (graph order) whose prefix fails to compile, with the
        reason. A prefix keeps the getitems of the tuple results it holds, and a prepared MPU
        weight goes with its reader (`_prepared_reader`: without it, it cannot be a kernel's)."""
        inside = set(nodes)
        follow = {n: r for n in nodes if (r := _prepared_reader(n, self.decisions)) in inside}
        compute = [n for n in nodes if n.target not in _BOOKKEEPING and n not in follow]

        def prefix(k):
            keep = set(compute[:k])
            return [
                n
                for n in nodes
                if n in keep
                or (n.target in _BOOKKEEPING and n.args[0] in keep)
                or follow.get(n) in keep
            ]

        lo, hi = 1, len(compute)  # prefix(hi) fails; find the smallest failing k
        while lo < hi:
            mid = (lo + hi) // 2
            got = self._compiled(prefix(mid), cache)
            if isinstance(got, kernelgen.Generated):
                lo = mid + 1
            else:
                hi, why = mid, got
        got = self._compiled(prefix(lo), cache)
        return compute[lo - 1], (got if isinstance(got, str) else why)

    def __call__(self, *args):
        return self.gm(*args)
