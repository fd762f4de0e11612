"""The LM head on Legato: vLLM's `compute_logits` (outside the compiled forward) as a Legato graph.

vLLM computes the logits of the sampled rows after the forward, `hidden[R, H] @ W[V, H]^T`
(R: the requests of the step), through the LM head layer's `cpu_linear` (`patches.install`
points it here on Bertha). That matmul goes through the `legato` torch.compile backend as a
graph of its own (W a parameter of a one-layer module sharing the layer's weight): chip_linear
takes it on every core (Llama-7B: 4096 x 32000, the weight laid out once in the MPU's streaming
layout) where it can, the single-core resolvers or the host otherwise (the graph's placement
says why, e.g. the tiny models' K = 64). R is a runtime row count bounded by vLLM's
`max_num_seqs` ($LEGATO_VLLM_MAX_SEQS, set by the platform; one row is dynamo's own static
graph).

Every call adds its kernels' simulated cycles, DRAM bytes and MACs (and the host nodes'
estimated bytes) to the report's last step, the forward step whose hidden states it reads
(`report.add_lm_head`).
"""

from __future__ import annotations

import logging
import os

import torch

log = logging.getLogger("vllm_legato")
MAX_SEQS_ENV = "LEGATO_VLLM_MAX_SEQS"


class _Head(torch.nn.Module):
    def __init__(self, weight, bias):
        super().__init__()
        # the layer's storage itself (no copy): a weight update is seen by the kernel module
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.bias = None if bias is None else torch.nn.Parameter(bias, requires_grad=False)

    def forward(self, x):
        return torch.nn.functional.linear(x, self.weight, self.bias)


def _backend(gm, example_inputs):
    """The `legato` backend; the returned callable reports each call's work (module docstring)."""
    from legato.torch.backend import legato_backend
    from legato.torch.wrapper import last_wrapper
    from vllm_legato import report, work
    from vllm_legato.compile import _options
    from vllm_legato.platform import BerthaPlatform

    compiled = legato_backend(gm, example_inputs, options=_options(BerthaPlatform.legato_device))
    wrapper = last_wrapper()
    mods = work.kernel_modules(wrapper.gm)
    host = work.host_nodes(wrapper.gm)
    report.add_lm_head_graph(wrapper.summary)

    def run(x, *rest):
        calls = [m.info.calls for m in mods]
        out = compiled(x, *rest)
        cycles = dram = macs = 0
        for m, c in zip(mods, calls):
            if m.info.calls > c and m.kernel.last_run is not None:
                run_ = m.kernel.last_run
                cycles += int(run_.cycles)
                dram += int(sum(run_.dram_bytes_per_channel))
                macs += int(run_.mac_count)
        rows = int(x.shape[0])
        hb = hm = 0
        for n in host:
            b, mm = work.node_work(n, rows)
            hb, hm = hb + b, hm + mm
        report.add_lm_head(cycles, dram, macs, hb, hm)
        return out

    return run


class LegatoLMHead:
    """`layer.cpu_linear` of vLLM's LM head on Bertha: `(x, weight, bias) -> logits` through
    Legato (module docstring)."""

    def __init__(self):
        self._compiled = {}

    def __call__(self, x, weight, bias=None):
        key = (weight.data_ptr(), None if bias is None else bias.data_ptr())
        fn = self._compiled.get(key)
        if fn is None:
            fn = self._compiled[key] = torch.compile(_Head(weight, bias), backend=_backend)
        bound = int(os.environ.get(MAX_SEQS_ENV) or 0)
        x = x.contiguous()
        if bound >= x.shape[0] >= 2:
            from legato.torch import mark_dynamic

            mark_dynamic(x, 0, max=bound)
        return fn(x)
