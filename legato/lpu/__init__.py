"""`lpu`: a torch device whose ops run as Legato kernels on the emulated Bertha.

```python
import legato.lpu
x = torch.randn(8, 64, device="lpu")      # or cpu_tensor.to("lpu")
y = torch.softmax(x @ w.to("lpu"), -1)    # each op: one Legato kernel, compiled once, cached
print(y.cpu())
print(legato.lpu.stats())                  # which ops ran as Legato kernels, which on the CPU
print(legato.lpu.transfers())              # bytes copied between host and device memory
```
Importing this module makes the device (PrivateUse1 renamed `lpu`). See docs/lpu.md.
"""

from __future__ import annotations

from legato.lpu.device import STATE, LpuTensor, Stats, address, device, enable, is_lpu, memory
from legato.model.targets import target_names
from legato.targets.bertha.device import Transfers

enable()


def set_target(name: str) -> None:
    """Which Bertha generation the `lpu` device is ("bertha", "bertha-evt1"); kernels already
    compiled for the other one are dropped."""
    if name not in target_names():
        from legato.errors import LegatoError

        raise LegatoError(
            f"legato.lpu.set_target({name!r}): not a Legato device; expected one of "
            + ", ".join(target_names())
        )
    with STATE.lock:
        if name != STATE.target:
            STATE.kernels.clear()
        STATE.target = name


def stats() -> Stats:
    """What ran where on `lpu` since the process started (or `reset()`)."""
    return STATE.stats


def transfers() -> Transfers:
    """Bytes copied between host and device memory since the process started (or `reset()`):
    `to_device` / `to_host` (`.to`, `.cpu`, fills, CPU fallbacks), `on_device` (dense copies of
    strided operands, in-place results), `launch` (Instruction Tables, scalar arguments),
    `staged` (host arrays bound to a kernel launch), and per reason in `by_reason`."""
    return device().transfers


def reset() -> None:
    """Zero the statistics and transfer counts and show the CPU-fallback warnings again
    (compiled kernels and tensors stay)."""
    with STATE.lock:
        STATE.stats = Stats()
        STATE.warned.clear()
        device().transfers = Transfers()


__all__ = [
    "LpuTensor",
    "Stats",
    "Transfers",
    "address",
    "device",
    "enable",
    "is_lpu",
    "memory",
    "reset",
    "set_target",
    "stats",
    "transfers",
]
