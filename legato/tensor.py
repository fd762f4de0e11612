"""`legato.tensor`: the tensor operations of the Legato language.

These names only have a meaning inside a `@legato.compile` kernel (or a `@legato.function` it
calls): the frontend recognises them in the kernel's AST and emits `legato` dialect ops. Calling
one from ordinary Python raises a `LegatoError` that says so.
"""

from __future__ import annotations

import inspect

from legato import opset
from legato.errors import LegatoError

SIGNATURES: dict[str, inspect.Signature] = {}
"""op name -> its real signature: the frontend binds a call's arguments to it (Triton's
builtin pattern), so a bad call is an error at the call naming this signature."""


def _signature(params: str) -> inspect.Signature:
    """The signature of the parameter list `params` ("(x, dim=None, keepdim=False)")."""
    ns: dict = {}
    exec(f"def _f{params}: pass", {}, ns)  # noqa: S102 - our own parameter lists, below
    return inspect.signature(ns["_f"])


def _op(name: str, signature: str, doc: str):
    sig = _signature(signature)

    def stub(*args, **kwargs):
        raise LegatoError(
            f"legato.tensor.{name} only exists inside a @legato.compile kernel "
            f"(or a @legato.function called from one); it cannot be called from Python"
        )

    stub.__name__ = name
    stub.__qualname__ = name
    stub.__module__ = __name__
    stub.__doc__ = f"legato.tensor.{name}{signature}: {doc}"
    stub.__signature__ = sig
    stub._legato_op = name  # how the frontend recognises it
    SIGNATURES[name] = sig
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
    "(type, queue, src, memory)",
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
matmul = _op(
    "matmul",
    "(a, b, dtype=None)",
    "[M, K] @ [K, N] -> [M, N], fp32 accumulation, rounded once to a's dtype (or dtype=f32 for "
    "bf16 operands: the fp32 accumulator)",
)
full = _op(
    "full", "(shape, value, dtype, memory='sram')", "a static-shape tensor filled with `value`"
)

_ELEMENTWISE_BINARY = tuple(o.name for o in opset.legato_binary())
"""The binary elementwise ops (`legato.opset`): `(a, b)`, torch broadcasting; the comparisons
`eq ne lt le gt ge` give 1 where true and 0 where false in the operands' dtype (a mask
`legato.tensor.where` takes as is)."""
_ELEMENTWISE_UNARY = tuple(o.name for o in opset.legato_unary())
"""The unary elementwise ops (`legato.opset`): `(x)`."""
_OTHER = {
    "cast": ("(x, dtype)", "convert `x` to element type `dtype`"),
    "clamp": (
        "(x, min=None, max=None)",
        "`x` clamped to [min, max] (torch.clamp; compile-time number bounds, either may be None)",
    ),
    "to": ("(x, dtype)", "convert `x` to element type `dtype` (torch's spelling of cast)"),
    "sum": (
        "(x, dim=None, keepdim=False, axis=None)",
        "sum over `dim` (an int, a tuple, None: all)",
    ),
    "mean": (
        "(x, dim=None, keepdim=False, axis=None)",
        "mean over `dim` (an int, a tuple, None: all)",
    ),
    "amax": (
        "(x, dim=None, keepdim=False, axis=None)",
        "maximum over `dim` (an int, a tuple, None: all)",
    ),
    "amin": (
        "(x, dim=None, keepdim=False, axis=None)",
        "minimum over `dim` (an int, a tuple, None: all)",
    ),
    "max": (
        "(x, dim=None, keepdim=False, axis=None)",
        "maximum over `dim`; `max(a, b)` (two positional operands, `b` a tensor or a float) "
        "is the elementwise maximum",
    ),
    "min": (
        "(x, dim=None, keepdim=False, axis=None)",
        "minimum over `dim`; `min(a, b)` is the elementwise minimum",
    ),
    "broadcast": ("(x, shape)", "broadcast `x` to `shape` (also `broadcast_to`)"),
    "reshape": ("(x, shape)", "reshape `x` to `shape`"),
    "transpose": (
        "(x, dims=None, dim1=None)",
        "`transpose(x, dim0, dim1)` swaps two dims; `transpose(x, dims)` permutes the dims",
    ),
    "concat": ("(xs, dim=None, axis=None)", "concatenate along `dim` (default 0; also `cat`)"),
    "where": (
        "(cond, a, b)",
        "`a` where `cond` is true, else `b` (torch.where, broadcasting; `cond` bool or a float "
        "mask, true where nonzero; `a`/`b` may be numbers)",
    ),
    "gather": (
        "(table, indices, memory='sram', wrap=False, offset=0)",
        "rows of `table` (any memory, e.g. a shared_dram embedding table) selected by the i64 "
        "`indices`: `table[indices]`, dims indices.shape + table.shape[1:] (torch's embedding); "
        "`wrap=True`: a negative index counts from the end (torch's `x[idx]`); a tuple of "
        "index tensors of one shape, `(i0, i1, ...)`, indexes that many leading dims: "
        "`table[i0, i1, ...]`, the row combined on the scalar unit; `offset=c` (a compile-time "
        "int): the first index selects row `index + c`, added on the scalar unit in int64 "
        "(torch's `embedding(table, p + c)`), then wrapped and range-checked",
    ),
    "scatter": (
        "(table, indices, rows)",
        "write `rows` (core memory) into the rows of `table` (any memory, e.g. a paged KV cache "
        "in shared_dram) selected by the i64 `indices`: `table[indices] = rows` in place, one "
        "DMA per row (torch's index_copy_ along dim 0; the inverse of gather)",
    ),
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
    ["request_load", "receive", "receive_type", "memcpy", "load", "matmul", "full"]
    + list(_ELEMENTWISE_BINARY)
    + list(_ELEMENTWISE_UNARY)
    + list(_OTHER)
)
__all__ = list(OPS) + ["broadcast_to", "cat"]
