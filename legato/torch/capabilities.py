"""What the compiler for a target can lower today, found by compiling tiny probe kernels.

The op library is written ahead of the compiler: an implementation may use a legato op (say
`legato.tensor.exp`) that has no lowering for the target yet. Resolvers call `ctx.probe(op,
dtype)`; the first time, a one-op kernel (`[8, 64]` input on core 0) is generated and compiled
(not run); if that fails, the resolver refuses with the compiler's message and the node runs
extern, so the placement summary says exactly which lowering is missing. Results are cached per
process and target; compiled probes are also in the JIT's disk cache.
"""

from __future__ import annotations

import hashlib
import threading
import types as pytypes

from legato.torch.kernelgen import _write, dtype_src

_X = "[8, 64]"
# op -> (expression over x, output shape source, output dtype or None for x's)
PROBES = {
    **{
        op: (f"legato.tensor.{op}(x, x)", _X, None)
        for op in ("add", "sub", "mul", "div", "maximum", "minimum")
    },
    **{
        op: (f"legato.tensor.{op}(x)", _X, None)
        for op in (
            "neg",
            "exp",
            "log",
            "sqrt",
            "rsqrt",
            "tanh",
            "sigmoid",
            "silu",
            "gelu",
            "cos",
            "sin",
        )
    },
    "constant": ("x * 2.0", _X, None),
    "sum": ("legato.tensor.sum(x, 1, True)", "[8, 1]", None),
    "mean": ("legato.tensor.mean(x, 1, True)", "[8, 1]", None),
    "max": ("legato.tensor.max(x, axis=1, keepdim=True)", "[8, 1]", None),
    "broadcast_binary": ("legato.tensor.sub(x, legato.tensor.sum(x, 1, True))", _X, None),
    "reshape": ("legato.tensor.reshape(x, (4, 128))", "[4, 128]", None),
    "transpose": ("legato.tensor.transpose(x, (1, 0))", "[64, 8]", None),
    "broadcast": (
        "legato.tensor.broadcast(legato.tensor.reshape(x, (1, 8, 64)), (2, 8, 64))",
        "[2, 8, 64]",
        None,
    ),
    "concat": ("legato.tensor.concat((x, x), 0)", "[16, 64]", None),
    "slice": ("x[2:6, :]", "[4, 64]", None),
    "cast_f32": ("legato.tensor.cast(x, legato.types.float('float32'))", _X, "float32"),
    "cast_bf16": ("legato.tensor.cast(x, legato.types.float('bfloat16'))", _X, "bfloat16"),
    "where": ("legato.tensor.where(x, x, 0.0)", _X, None),
    "matmul": ("x @ legato.tensor.transpose(x, (1, 0))", "[8, 8]", None),
    # extra inputs: name -> (legato dtype source, shape)
    "gather": (
        "legato.tensor.gather(x, ids)",
        "[4, 64]",
        None,
        {"ids": ("legato.types.i64", "[4]")},
    ),
}

_results: dict[tuple[str, str, str], str | None] = {}
_lock = threading.Lock()


def check(device: str, op: str, dtype) -> str | None:
    """None when `op` on `dtype` compiles for `device`, else the reason it does not."""
    import torch

    key = (device, op, str(dtype))
    with _lock:
        if key in _results:
            return _results[key]
    expr, out_shape, out_dtype = PROBES[op][:3]
    extra = PROBES[op][3] if len(PROBES[op]) > 3 else {}
    out_t = (
        dtype_src({"float32": torch.float32, "bfloat16": torch.bfloat16}[out_dtype])
        if out_dtype
        else dtype_src(dtype)
    )
    source = "\n".join(
        [
            "import legato",
            "",
            f"@legato.compile(backend={device!r})",
            "def probe(",
            f'    x: legato.get_model().tensor_type({dtype_src(dtype)}, {_X}, "shared_dram"),',
            *(
                f'    {n}: legato.get_model().tensor_type({t}, {sh}, "shared_dram"),'
                for n, (t, sh) in extra.items()
            ),
            f'    out: legato.get_model().tensor_type({out_t}, {out_shape}, "shared_dram"),',
            "):",
            "    device = legato.get_context().get_device()",
            "    with device.get_top():",
            '        legato.tensor.request_load(x, device.get_core(0), "sram")',
            *(
                f'        legato.tensor.request_load({n}, device.get_core(0), "sram")'
                for n in extra
            ),
            "    with device.get_core(0):",
            '        x = legato.tensor.receive(x, 0, "sram")',
            *(f'        {n} = legato.tensor.receive({n}, 0, "sram")' for n in extra),
            f"        legato.tensor.memcpy(out, {expr})",
            "",
        ]
    )
    reason = None
    try:
        path = _write(source, f"probe_{op}", None)
        module = pytypes.ModuleType(f"legato_probe_{hashlib.sha1(source.encode()).hexdigest()}")
        module.__file__ = str(path)
        exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102
        module.probe.compile()
    except Exception as e:  # noqa: BLE001 - any failure means: not supported (yet)
        msg = str(e).strip().splitlines()
        reason = f"{op} on {dtype} does not compile for {device} yet: " + (
            msg[0] if msg else type(e).__name__
        )
    with _lock:
        _results[key] = reason
    return reason


def require(ctx, op: str, dtype) -> None:
    reason = check(ctx.options.device, op, dtype)
    assert reason is None, reason


def clear() -> None:
    with _lock:
        _results.clear()
