"""The `legato` torch.compile backend.

Registered through the entry point group `torch_dynamo_backends` (pyproject.toml), so
`torch.compile(model, backend="legato", options={"legato.device": "bertha"})` works in a fresh
process without importing legato first: dynamo's `lookup_backend("legato")` loads this module.
It patches nothing global.

Dynamo hands over a torch-level FX graph; aot_autograd turns it into ATen graphs (inference:
under `torch.no_grad()`, or when no input requires grad); every ATen graph becomes a
`LegatoGraphWrapper`.
"""

from __future__ import annotations

import logging

import torch

from legato.torch.options import Options
from legato.torch.wrapper import LegatoGraphWrapper

log = logging.getLogger("legato.torch")


def legato_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None, **kwargs):
    """`torch.compile(..., backend="legato", options={...})`. See docs/torch.md for options."""
    if kwargs.get("mode") not in (None, "default"):
        log.info("legato backend: mode=%r is ignored", kwargs["mode"])
    opts = Options.parse(options)
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    counter = {"n": 0}

    def inference_compiler(aten_gm: torch.fx.GraphModule, aten_inputs):
        counter["n"] += 1
        wrapper = LegatoGraphWrapper(aten_gm, aten_inputs, opts)
        return make_boxed_func(wrapper)

    def training_compiler(aten_gm: torch.fx.GraphModule, aten_inputs):
        # Legato targets inference; a graph that needs autograd runs eagerly (documented).
        log.warning(
            "legato backend: graph requires grad; running it eagerly "
            "(wrap inference in torch.no_grad())"
        )
        return make_boxed_func(aten_gm)

    backend = aot_autograd(
        fw_compiler=training_compiler,
        bw_compiler=training_compiler,
        inference_compiler=inference_compiler,
    )
    return backend(gm, example_inputs)
