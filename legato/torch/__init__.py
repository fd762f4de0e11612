"""Legato for PyTorch: the `legato` torch.compile backend, the op library and its resolvers.

```python
model = torch.compile(model, backend="legato", options={"legato.device": "bertha"})
with torch.no_grad():
    y = model(x)
print(legato.torch.last_summary())   # which nodes ran as Legato kernels, which extern, cycles
```
See docs/torch.md.
"""

from legato.torch.custom import custom_op
from legato.torch.dynamic import install_backport, mark_dynamic
from legato.torch.registry import (
    Impl,
    ResolveContext,
    load_libraries,
    register,
    register_graph_pass,
    unregister,
)
from legato.torch.summary import PlacementSummary, last_summary, summaries

install_backport()  # the seed's `torch._dynamo.mark_dynamic(x, 0, max=128)` on torch 2.13


def __getattr__(name):
    # Lazy on purpose: the backend and the wrapper import torch._dynamo and torch.fx, which cost
    # seconds; `import legato.torch` (done by `import legato` once torch is loaded) must not.
    if name == "legato_backend":
        from legato.torch.backend import legato_backend

        return legato_backend
    if name == "LegatoGraphWrapper":
        from legato.torch.wrapper import LegatoGraphWrapper

        return LegatoGraphWrapper
    raise AttributeError(name)


__all__ = [
    "Impl",
    "LegatoGraphWrapper",
    "PlacementSummary",
    "ResolveContext",
    "custom_op",
    "last_summary",
    "legato_backend",
    "load_libraries",
    "mark_dynamic",
    "register",
    "register_graph_pass",
    "summaries",
    "unregister",
]
