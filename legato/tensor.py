"""`legato.tensor`: the tensor operations of the Legato language.

These names only have a meaning inside a `@legato.compile` kernel (or a `@legato.function` it
calls): the frontend recognises them in the kernel's AST and emits `legato` dialect ops. Calling
one from ordinary Python raises a `LegatoError` that says so.
"""

from __future__ import annotations

from legato.errors import LegatoError


def _op(name: str, signature: str, doc: str):
    def stub(*args, **kwargs):
        raise LegatoError(
            f"legato.tensor.{name} only exists inside a @legato.compile kernel "
            f"(or a @legato.function called from one); it cannot be called from Python"
        )

    stub.__name__ = name
    stub.__qualname__ = name
    stub.__module__ = __name__
    stub.__doc__ = f"legato.tensor.{name}{signature}: {doc}"
    stub._legato_op = name  # how the frontend recognises it
    return stub


# Data movement (the seed's).
request_load = _op(
    "request_load",
    "(src, target_ctx, memory, queue=0)",
    "start a transfer of `src` into the memory of `target_ctx` (a core)",
)
receive = _op(
    "receive",
    "(like, queue, memory)",
    "wait for the next transfer on (queue, memory); result shaped like `like`",
)
receive_type = _op(
    "receive_type",
    "(type, queue, src_or_None, memory)",
    "wait for the next transfer on (queue, memory); result of the given tensor type",
)
memcpy = _op("memcpy", "(dst, src)", "copy `src` into `dst`")
load = _op(
    "load",
    "(src, memory='sram')",
    "copy `src` (shared or core memory, e.g. a tile `x[i*R:(i+1)*R]`) into the running core's "
    "memory; returns the copy",
)

# Compute.
matmul = _op("matmul", "(a, b)", "[M, K] @ [K, N] -> [M, N], fp32 accumulation")

_ELEMENTWISE_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
_ELEMENTWISE_UNARY = ("neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu")
_OTHER = {
    "cast": ("(x, dtype)", "convert `x` to element type `dtype`"),
    "sum": ("(x, axis)", "sum over `axis`"),
    "max": ("(a, b) or (x, axis=...)", "elementwise maximum, or maximum over `axis`"),
    "min": ("(a, b) or (x, axis=...)", "elementwise minimum, or minimum over `axis`"),
    "mean": ("(x, axis)", "mean over `axis`"),
    "broadcast": ("(x, shape)", "broadcast `x` to `shape`"),
    "reshape": ("(x, shape)", "reshape `x` to `shape`"),
    "transpose": ("(x, dims)", "permute the dims of `x`"),
    "concat": ("(xs, axis)", "concatenate along `axis`"),
}

for _name in _ELEMENTWISE_BINARY:
    globals()[_name] = _op(_name, "(a, b)", f"elementwise {_name} with broadcasting")
for _name in _ELEMENTWISE_UNARY:
    globals()[_name] = _op(_name, "(x)", f"elementwise {_name}")
for _name, (_sig, _doc) in _OTHER.items():
    globals()[_name] = _op(_name, _sig, _doc)
del _name, _sig, _doc
broadcast_to = broadcast  # noqa: F821 - torch spellings
cat = concat  # noqa: F821

OPS = tuple(
    ["request_load", "receive", "receive_type", "memcpy", "load", "matmul"]
    + list(_ELEMENTWISE_BINARY)
    + list(_ELEMENTWISE_UNARY)
    + list(_OTHER)
)
__all__ = list(OPS) + ["broadcast_to", "cat"]
