"""Where a forward step's work ran: DRAM bytes and MACs on Legato (measured by the emulator) and
on the host (estimated from the graph), per step, for the report's share on Legato.

Legato: every Legato kernel the step ran (the graph's kernel modules, and the attention
backend's kernels, `vllm_legato.attention.STATS`): the emulator's DRAM bytes (all channels) and
MAC count. Host: every node of the partitioned graph that runs eagerly, with the step's token
count put into its symbolic shapes: bytes = its tensor operands and results (views move nothing
and count 0, and so do allocations), MACs = M * K * N of a matmul (`mm`, `addmm`, `bmm`); plus the LM head
(`compute_logits`, outside the compiled forward, on the host as in stock vLLM): its weight and
one row of MACs per request. vLLM's attention ops are not host work (their kernels are Legato's).
"""

from __future__ import annotations

import math

import torch

_MATMULS = {"mm", "addmm", "bmm", "baddbmm"}


def _is_view(target) -> bool:
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.returns:
        return False
    a = schema.returns[0].alias_info
    return a is not None and not a.is_write


def _numel(t, tokens: int) -> int:
    n = 1
    for d in t.shape:
        if isinstance(d, torch.SymInt):
            e = d.node.expr
            d = int(e.subs({s: tokens for s in e.free_symbols}))
        n *= int(d)
    return n


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)


def _val(a):
    return a.meta.get("val") if isinstance(a, torch.fx.Node) else None


def host_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The nodes of the partitioned graph that run eagerly on the host (not a Legato kernel's
    call, not vLLM's attention ops, not shape bookkeeping)."""
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        if n.target.namespace not in ("aten", "prims"):
            continue  # vLLM's ops (their kernels are the attention backend's) and host asserts
        if _is_view(n.target):
            continue
        out.append(n)
    return out


def node_modules(gm: torch.fx.GraphModule) -> dict[str, str]:
    """{node name: the class name of the vLLM layer it was traced in} for the graph's
    call_function nodes (dynamo's `nn_module_stack`, innermost layer)."""
    out = {}
    for n in gm.graph.nodes:
        stack = n.meta.get("nn_module_stack") if n.op == "call_function" else None
        if stack:
            cls = list(stack.values())[-1][1]
            out[n.name] = getattr(cls, "__name__", None) or str(cls).rsplit(".", 1)[-1].strip("'>")
    return out


# allocations: their result is written by whoever fills it (vLLM's attention op writes its
# output through the LEGATO_ATTN kernels), so they move no bytes themselves
_ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


# lookups: they read the rows they return, not their whole table (an embedding's weight is
# its first operand: Llama-7B's is 262 MB, of which a decode step reads a row per token)
_LOOKUPS = {"embedding"}


def node_work(n: torch.fx.Node, tokens: int) -> tuple[int, int]:
    """(DRAM bytes, MACs) of host node n at `tokens` tokens: its tensor operands and results,
    an embedding's table counted by the rows it reads (the result's bytes)."""
    if n.target._opname in _ALLOCATIONS:
        return 0, 0
    nbytes = 0
    args = n.args
    if n.target._opname in _LOOKUPS:
        for t in _tensors(_val(n)):
            nbytes += _numel(t, tokens) * t.element_size()  # the rows read
        args = args[1:]  # the indices (and none of the table besides those rows)
    for a in (*args, *n.kwargs.values()):
        for t in _tensors(_val(a) if isinstance(a, torch.fx.Node) else None):
            nbytes += _numel(t, tokens) * t.element_size()
    for t in _tensors(_val(n)):
        nbytes += _numel(t, tokens) * t.element_size()
    macs = 0
    if n.target._opname in _MATMULS:
        a, b = (_val(x) for x in n.args[-2:])
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            k = int(b.shape[-2])
            macs = _numel(a, tokens) // k * int(b.shape[-1]) * k
    return nbytes, macs


# (hidden size, vocabulary, element size) of the model being served: set from the vLLM config
# when the attention backend's layers are built (the compile backend may run without one)
LM_HEAD: tuple[int, int, int] | None = None


def set_lm_head(vllm_config) -> None:
    global LM_HEAD
    mc = vllm_config.model_config
    esz = torch.empty((), dtype=mc.dtype).element_size()
    LM_HEAD = (mc.get_hidden_size(), mc.get_vocab_size(), esz)


def lm_head_work(requests: int) -> tuple[int, int]:
    """(DRAM bytes, MACs) of the LM head for `requests` sampled rows (its weight read once);
    (0, 0) when the model's sizes are not known."""
    if LM_HEAD is None or not requests:
        return 0, 0
    hidden, vocab, esz = LM_HEAD
    return hidden * vocab * esz + requests * (hidden + vocab) * esz, requests * hidden * vocab


def kernel_modules(gm: torch.fx.GraphModule) -> list:
    from legato.torch.wrapper import LegatoKernelModule

    return [m for m in gm.modules() if isinstance(m, LegatoKernelModule)]


def share(legato: int, host: int) -> float:
    total = legato + host
    return legato / total if total else math.nan
