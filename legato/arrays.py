"""torch <-> numpy, the one place: kernel arguments arrive as torch tensors or numpy arrays and
every consumer (the JIT, the interpreters, the runtime) works on numpy.

bf16 crosses as its bits (a torch bf16 tensor is viewed as int16, then as `ml_dtypes.bfloat16`),
so nothing rounds on the way. torch is imported lazily: it is a heavy optional dependency, and a
process that passes only numpy arrays never loads it.
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

_BF16 = np.dtype(ml_dtypes.bfloat16)


def _torch():
    """The torch module if the process has loaded it (a torch tensor implies it has)."""
    return sys.modules.get("torch")


def is_torch_tensor(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def torch_to_numpy(t) -> tuple[np.ndarray, bool]:
    """(a numpy array of CPU tensor `t`'s values, whether it is a copy): a view of `t`'s memory
    when `t` is contiguous, else a contiguous copy. Tensors on another device are copied to the
    CPU first."""
    torch = _torch()
    x = t.detach()
    if x.device.type != "cpu":
        return torch_to_numpy(x.cpu())[0], True
    copied = not x.is_contiguous()
    if copied:
        x = x.contiguous()
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(_BF16), copied
    return x.numpy(), copied


def numpy_to_torch(a: np.ndarray):
    """A new torch tensor holding `a`'s values (bf16 bit for bit)."""
    import torch  # lazy: torch is optional, and only a caller that asks for torch pays for it

    if a.dtype == _BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(a))


def numpy_view(x) -> np.ndarray:
    """A numpy array sharing `x`'s memory (any strides), for aliasing checks."""
    if is_torch_tensor(x):
        torch = _torch()
        t = x.detach()
        return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()
    return x


def copy_back(original, value: np.ndarray) -> None:
    """Write `value` (a private copy) into the caller's tensor or array `original`."""
    if is_torch_tensor(original):
        torch = _torch()
        if original.dtype == torch.bfloat16:
            src = torch.from_numpy(value.view(np.int16).copy()).view(torch.bfloat16)
        else:
            src = torch.from_numpy(np.ascontiguousarray(value))
        with torch.no_grad():
            original.copy_(src.reshape(original.shape))
    else:
        np.copyto(original, value.reshape(original.shape))


def save_npy(path, arr: np.ndarray) -> None:
    """`np.save`, except that a bf16 array's header names its dtype `bfloat16` (numpy writes
    `<V2`, two opaque bytes): `np.load` then gives a `ml_dtypes.bfloat16` array back in any
    process that imported ml_dtypes (and `legato-run` reads both forms)."""
    arr = np.asarray(arr)
    if arr.dtype != _BF16:
        np.save(path, arr)
        return
    arr = np.ascontiguousarray(arr)
    with open(path, "wb") as f:
        header = {"descr": "bfloat16", "fortran_order": False, "shape": arr.shape}
        np.lib.format.write_array_header_1_0(f, header)
        f.write(arr.tobytes())
