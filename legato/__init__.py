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

from legato import sync, tensor, types
from legato.context import get_context, get_model
from legato.errors import (
    CompileError,
    DeviceAssertError,
    LegatoError,
    LegatoRuntimeError,
    PerformanceWarning,
)
from legato.frontend.language import device_assert, device_print
from legato.jit import (
    AutotuneError,
    Config,
    Kernel,
    OutputType,
    autotune,
    compile,
    constexpr,
    core_id,
    function,
    register_backend,
    session,
    static_range,
)
from legato.profiler import profile
from legato.version import __version__

__all__ = [
    "AutotuneError",
    "Config",
    "CompileError",
    "DeviceAssertError",
    "Kernel",
    "LegatoError",
    "LegatoRuntimeError",
    "OutputType",
    "PerformanceWarning",
    "__version__",
    "autotune",
    "compile",
    "constexpr",
    "core_id",
    "device_assert",
    "device_print",
    "function",
    "get_context",
    "get_model",
    "profile",
    "register_backend",
    "session",
    "static_range",
    "sync",
    "tensor",
    "types",
]

if "torch" in __import__("sys").modules:
    # torch is loaded already: make the seed's `torch._dynamo.mark_dynamic(x, 0, max=128)` work
    # on torch 2.13 (legato/torch/dynamic.py backports the upstream fix). Only then: torch is a
    # heavy optional dependency, and `import legato` must not load it. The public API sits above
    # every layer (docs/architecture.md), so it may import legato.torch.
    import legato.torch  # noqa: F401
