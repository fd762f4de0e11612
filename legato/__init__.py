"""Legato: a Python-embedded kernel DSL and compiler for the Bertha LPU.

```python
@legato.compile(backend=get_bertha)
def kernel(a: legato.get_model().tensor_type(legato.types.float("bfloat16"), [16, 256], "shared_dram"), ...):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    ...
```
"""

__version__ = "0.1.0"

from legato import sync, tensor, types
from legato.context import get_context
from legato.errors import CompileError, LegatoError, LegatoRuntimeError
from legato.jit import (
    Kernel,
    OutputType,
    compile,
    constexpr,
    core_id,
    function,
    register_backend,
    session,
    static_range,
)
from legato.model import get_model

__all__ = [
    "CompileError",
    "Kernel",
    "LegatoError",
    "LegatoRuntimeError",
    "OutputType",
    "__version__",
    "compile",
    "constexpr",
    "core_id",
    "function",
    "get_context",
    "get_model",
    "register_backend",
    "session",
    "static_range",
    "sync",
    "tensor",
    "types",
]

if "torch" in __import__("sys").modules:
    # torch is loaded already: make the seed's `torch._dynamo.mark_dynamic(x, 0, max=128)` work
    # on torch 2.13 (legato/torch/dynamic.py backports the upstream fix).
    import legato.torch  # noqa: F401
