"""`LegatoGraphWrapper`: one ATen graph, partitioned into Legato kernels and extern nodes.

1. Every `call_function` node is resolved (`registry.resolve`): supported nodes have an `Impl`.
2. An MPU weight prepared from graph inputs only (nn.Linear's `t(W)`) is made extern
   ("weight preparation"), so the kernel loads it straight into mpu_buffer; a weight computed
   from on-chip values (K^T in attention) stays in the kernel.
3. torch.fx's `CapabilityBasedPartitioner` groups the supported nodes into partitions (no cycles);
   each partition becomes one `fused_N` submodule, which is compiled to ONE Legato kernel
   (`kernelgen.generate`) at graph-compile time and replaced by a `LegatoKernelModule`.
4. The rest of the graph runs eagerly: those nodes are the *extern* nodes.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from legato.context import CompileContext
from legato.model.targets import resolve_backend
from legato.torch import kernelgen, registry
from legato.torch.options import Options
from legato.torch.summary import ExternInfo, KernelInfo, PlacementSummary, record

log = logging.getLogger("legato.torch")

# Nodes that are bookkeeping, not computation: never counted as extern.
_BOOKKEEPING = {operator.getitem}


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


class Bounds:
    """Upper bounds of dynamic sizes, from the ShapeEnv's value ranges (mark_dynamic max=)."""

    def __init__(self, example_inputs):
        from torch._guards import detect_fake_mode

        mode = detect_fake_mode(example_inputs)
        self.shape_env = getattr(mode, "shape_env", None)

    def __call__(self, size) -> int | None:
        if isinstance(size, int):
            return size
        if self.shape_env is None:
            return None
        expr = size.node.expr if isinstance(size, torch.SymInt) else size
        try:
            upper = self.shape_env.bound_sympy(expr).upper
        except Exception:  # noqa: BLE001
            return None
        try:
            from torch.utils._sympy.numbers import IntInfinity

            if isinstance(upper, IntInfinity) or upper.is_finite is False:
                return None
            value = int(upper)
        except (TypeError, ValueError, AttributeError, ImportError):
            return None
        return value if value < 2**40 else None  # "bounded" by sys.maxsize is unbounded


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


class LegatoKernelModule(torch.nn.Module):
    """Runs one partition as its Legato kernel: tensor inputs in, outputs allocated and written
    in place by the kernel, returned in the structure of the fused submodule."""

    def __init__(
        self,
        gen: kernelgen.Generated,
        fused: torch.fx.GraphModule,
        info: KernelInfo,
        options: Options,
    ):
        super().__init__()
        self.gen = gen
        self.kernel = gen.kernel
        self.fused = fused  # used on meta tensors for output shapes
        self.info = info
        self.options = options
        placeholders = [n for n in fused.graph.nodes if n.op == "placeholder"]
        self.tensor_pos = [
            i for i, n in enumerate(placeholders) if isinstance(n.meta.get("val"), torch.Tensor)
        ]
        out = next(n for n in fused.graph.nodes if n.op == "output").args[0]
        self.single = not isinstance(out, (tuple, list))
        self._shapes: dict = {}

    def _out_shapes(self, args):
        key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
        shapes = self._shapes.get(key)
        if shapes is None:
            meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
            res = self.fused(*meta)
            res = [res] if self.single else list(res)
            # the strides the traced graph expects (a later extern view may depend on them);
            # the kernel writes a non-contiguous output through a contiguous copy
            shapes = [(tuple(r.shape), tuple(r.stride()), r.dtype) for r in res]
            self._shapes[key] = shapes
        return shapes

    def forward(self, *args):
        outs = [torch.empty_strided(s, st, dtype=dt) for s, st, dt in self._out_shapes(args)]
        ins = [args[i] for i in self.tensor_pos]
        with self.options.session():
            self.kernel(*ins, *outs)
        run = self.kernel.last_run
        cycles = int(getattr(run, "cycles", 0) or 0)
        self.info.calls += 1
        self.info.last_cycles = cycles
        self.info.total_cycles += cycles
        return outs[0] if self.single else tuple(outs)


_graph_counter = 0


class LegatoGraphWrapper:
    """One ATen graph (from aot_autograd) made runnable: Legato kernels + extern nodes."""

    def __init__(
        self, gm: torch.fx.GraphModule, example_inputs, options: Options, name: str | None = None
    ):
        global _graph_counter
        _graph_counter += 1
        self.name = name or f"graph{_graph_counter}"
        self.options = options
        self.bounds = Bounds(example_inputs)
        self.model = resolve_backend(options.device)(CompileContext(None, self.name))
        self.ctx = registry.ResolveContext(self.model, options, self.bounds)
        self.summary = PlacementSummary(self.name, options.device)
        self.decisions = self._decide(gm)
        self.gm = self._partition(gm)
        record(self.summary)
        if options.log_summary:
            log.info("%s", self.summary)

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
        # Weight preparation: an MPU weight computed from graph inputs only (nn.Linear's
        # t(W), a view) runs extern, so the kernel loads the prepared weight straight into
        # mpu_buffer. A weight computed from on-chip values (attention's K^T) stays in the
        # kernel: the compiler stages it from sram into mpu_buffer.
        for node, d in decisions.items():
            if d.impl is None:
                continue
            for pos, mem in d.impl.memory.items():
                if mem != "mpu_weight":
                    continue
                src = d.impl.args[pos]
                pd = decisions.get(src)
                if pd is None or pd.impl is None:
                    continue
                if all(a.op == "placeholder" for a in src.all_input_nodes):
                    decisions[src] = NodeDecision(
                        None,
                        f"prepares the MPU weight of {node.name} ({_op_name(node)}) "
                        "from graph inputs; it runs eagerly so the kernel loads the weight "
                        "straight into mpu_buffer",
                    )
        return decisions

    # -- partitions ----------------------------------------------------------------------------

    def _partition(self, gm):
        support = LegatoSupport(self.decisions)
        partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
        partitions = partitioner.propose_partitions()
        partitions = [
            p
            for p in partitions
            if sum(1 for n in p.nodes if n.target not in _BOOKKEEPING) >= self.options.min_ops
        ]
        in_partition = {n for p in partitions for n in p.nodes}
        for node in gm.graph.nodes:
            if node.op != "call_function" or node.target in _BOOKKEEPING:
                continue
            if _is_host(node):
                self.summary.host.append(f"{node.name}: {_op_name(node)}")
                continue
            if node not in in_partition:
                d = self.decisions.get(node)
                reason = (
                    d.reason
                    if d is not None and d.reason
                    else f"partition smaller than legato.min_ops={self.options.min_ops}"
                )
                self.summary.extern.append(ExternInfo(node.name, _op_name(node), reason))
        fused = partitioner.fuse_partitions(partitions) if partitions else gm
        kernels_by_sub = {}
        idx = 0
        for node in list(fused.graph.nodes):
            if node.op != "call_module" or not node.target.startswith("fused_"):
                continue
            sub = getattr(fused, node.target)
            module = self._compile_partition(node.target, sub, idx)
            idx += 1
            if module is None:
                continue
            kernels_by_sub[node.target] = module
        for target, module in kernels_by_sub.items():
            setattr(fused, target, module)
        fused.recompile()
        return fused

    def _compile_partition(self, target: str, sub: torch.fx.GraphModule, idx: int):
        inputs = [
            n
            for n in sub.graph.nodes
            if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)
        ]
        steps, nodes = [], []
        # fused submodules hold copies of the original nodes: find the decisions by name
        by_name = {n.name: d for n, d in self.decisions.items()}
        for n in sub.graph.nodes:
            if n.op != "call_function":
                continue
            if n.target in _BOOKKEEPING:
                steps.append(kernelgen.Step(n, None))  # an element of a tuple result
                continue
            d = by_name.get(n.name)
            impl = d.impl if d is not None else None
            if impl is None:  # re-resolve on the copy (args must point into `sub`)
                impl = registry.resolve(n, self.ctx).impl
            else:
                impl = self._rebind(impl, n)
            steps.append(kernelgen.Step(n, impl))
            nodes.append(f"{n.name}: {_op_name(n)} -> {impl.label}")
        out = next(n for n in sub.graph.nodes if n.op == "output").args[0]
        outputs = list(out) if isinstance(out, (tuple, list)) else [out]
        name = f"{self.name}_k{idx}"
        info = KernelInfo(name, nodes, "")
        try:
            gen = kernelgen.generate(name, inputs, steps, outputs, self.options.device, self.bounds)
            info.source_path = str(gen.path)
            gen.kernel.compile()
        except Exception as e:
            if self.options.on_kernel_error == "raise":
                raise
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            log.warning(
                "legato: kernel %s failed to compile, its %d node(s) run extern: %s",
                name,
                len(steps),
                first,
            )
            for s in steps:
                self.summary.extern.append(
                    ExternInfo(s.node.name, _op_name(s.node), f"kernel failed: {first}")
                )
            return None
        self.summary.kernels.append(info)
        return LegatoKernelModule(gen, sub, info, self.options)

    @staticmethod
    def _rebind(impl: registry.Impl, node) -> registry.Impl:
        """The implementation with its node operands replaced by `node`'s (the copy in the
        fused submodule): the resolver saw the original graph's nodes."""
        originals = node.args
        # map original arg nodes by name to the copy's arg nodes
        copy_by_name = {a.name: a for a in node.all_input_nodes}

        def sub(a):
            if isinstance(a, torch.fx.Node):
                return copy_by_name.get(a.name, a)
            if isinstance(a, (tuple, list)) and a and all(isinstance(x, torch.fx.Node) for x in a):
                return type(a)(sub(x) for x in a)
            return a

        del originals
        return registry.Impl(
            impl.fn, tuple(sub(a) for a in impl.args), dict(impl.memory), impl.name
        )

    def __call__(self, *args):
        return self.gm(*args)
