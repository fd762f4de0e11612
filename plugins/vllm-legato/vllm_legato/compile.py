"""The compile backend vLLM calls (by qualified name) for the model's forward graph.

vLLM marks the token dimension of the forward's inputs dynamic without an upper bound; its
token budget per step is `scheduler_config.max_num_batched_tokens`, so every dynamic symbol of
the graph is bounded by it here (the `legato` backend reads bounds from the ShapeEnv's value
ranges) before the graph goes to `legato.torch.backend.legato_backend`. The returned callable
records, for every forward step, the simulated Bertha cycles of its Legato kernels
(`vllm_legato.report`).
"""

from __future__ import annotations

import logging
import os

import torch

log = logging.getLogger("vllm_legato")

# vLLM's CPU attention kernels use AMX tiles without asking Linux for them; torch asks (through
# oneDNN) only when it runs a bf16 matmul itself. With every matmul of the forward on Legato,
# nothing in the process had asked, and the first attention step died of SIGILL. Ask up front.
if hasattr(torch._C, "_cpu") and hasattr(torch._C._cpu, "_init_amx"):
    torch._C._cpu._init_amx()


def _options(device: str) -> dict:
    return {
        "legato.device": device,
        # A kernel the compiler cannot build yet runs eagerly and is reported (never silent).
        "legato.on_kernel_error": os.environ.get("LEGATO_VLLM_ON_KERNEL_ERROR", "extern"),
        "legato.log_summary": True,
    }


def _bound_dynamic_dims(example_inputs, bound: int) -> list[str]:
    """Give every free symbol in the inputs' shapes the upper bound `bound` (vLLM's budget)."""
    from torch._guards import detect_fake_mode
    from torch.utils._sympy.value_ranges import ValueRanges

    fake_mode = detect_fake_mode(example_inputs)
    shape_env = getattr(fake_mode, "shape_env", None)
    if shape_env is None:
        return []
    symbols = set()
    for x in example_inputs:
        dims = ()
        if isinstance(x, torch.Tensor):
            dims = tuple(x.shape)
        elif isinstance(x, torch.SymInt):
            dims = (x,)
        for d in dims:
            if isinstance(d, torch.SymInt):
                symbols |= d.node.expr.free_symbols
    bounded = []
    for s in sorted(symbols, key=str):
        vr = shape_env.var_to_range.get(s)
        lower = vr.lower if vr is not None else 0
        upper = vr.upper if vr is not None else bound
        if upper is None or not upper.is_finite or upper > bound:
            shape_env.var_to_range[s] = ValueRanges(lower, bound)
        bounded.append(f"{s} in [{lower}, {min(upper, bound) if upper.is_finite else bound}]")
    return bounded


def legato_vllm_backend(gm: torch.fx.GraphModule, example_inputs):
    """torch.compile backend (vLLM `CompilationMode.DYNAMO_TRACE_ONCE`): the `legato` backend
    with the token dimension bounded by vLLM's `max_num_batched_tokens`."""
    from vllm.config import get_current_vllm_config_or_none

    from legato.torch import summaries
    from legato.torch.backend import legato_backend
    from legato.torch.wrapper import last_wrapper
    from vllm_legato.platform import TOKEN_BOUND_ENV, BerthaPlatform
    from vllm_legato.report import instrument

    cfg = get_current_vllm_config_or_none()
    if cfg is not None:
        bound = int(cfg.scheduler_config.max_num_batched_tokens)
    elif os.environ.get(TOKEN_BOUND_ENV):
        bound = int(os.environ[TOKEN_BOUND_ENV])
    else:
        raise RuntimeError(
            "vllm_legato: no vLLM config and no $LEGATO_VLLM_TOKEN_BOUND: cannot "
            "bound the token dimension (the Bertha platform sets it)"
        )
    device = BerthaPlatform.legato_device
    bounded = _bound_dynamic_dims(example_inputs, bound)
    log.info(
        "legato: compiling a forward graph for %s; dynamic dims %s",
        device,
        ", ".join(bounded) or "none",
    )
    from vllm_legato.ops import fuse_silu_and_mul

    fused = fuse_silu_and_mul(gm)
    if fused:
        log.info("legato: %d gate/up projection(s) fused with their SiluAndMul", fused)
    vllm_ops = _vllm_ops(gm)
    n_before = len(summaries())
    compiled = legato_backend(gm, example_inputs, options=_options(device))
    graphs = summaries()[n_before:]
    # the partitioned graph (one ATen graph per forward): its kernels and host nodes give
    # each step's work on Legato and on the host (vllm_legato.work)
    wrapper = last_wrapper() if len(graphs) == 1 else None
    return instrument(
        compiled,
        graphs,
        device,
        bound,
        vllm_ops,
        gm=wrapper.gm if wrapper is not None else None,
    )


def _vllm_ops(gm: torch.fx.GraphModule) -> dict[str, int]:
    """vLLM's own ops in the dynamo graph (attention, KV-cache update, ...), by name: in the ATen
    graph a mutating one hides inside `auto_functionalized_v2`."""
    out: dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        t = node.target
        if isinstance(t, torch._ops.OpOverload):
            qual = f"{t.namespace}::{t._opname}"
        elif isinstance(t, torch._ops.OpOverloadPacket):
            qual = t._qualified_op_name
        else:
            continue
        ns, _, op = qual.partition("::")
        if ns not in ("aten", "prims"):
            out[f"{ns}.{op}"] = out.get(f"{ns}.{op}", 0) + 1
    return out
