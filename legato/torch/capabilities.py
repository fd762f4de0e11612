"""What the compiler lowers, answered from the op table and the compiler's own dtype rules.

Resolvers call `ctx.probe(op, dtype)` before they accept a node: it refuses (an
`AssertionError` with the reason, so the node runs extern and the placement summary says why)
when the compiler would refuse a kernel doing `op` on `dtype`. The answer comes from the rules
the compiler itself checks, not from compiling probe kernels:

- an elementwise op (`legato.opset.ELEMENTWISE`: add, exp, lt, ...) computes on the element
  types of its row (`OpKind.dtypes`, which the lowering's dtype check reads);
- the other VPU work (reductions, broadcasts, transposes, casts, constants, where) on the float
  types the lowering accepts (`lower_tensor_ops.VPU_DTYPES`);
- matmul on the MPU's element types (the `matmul` row);
- data movement (reshape, concat, slice, gather) on every element type.

`OPS` lists the names `check` answers. The answer is the same for every Bertha generation (they
share the compiler's rules); `tests/unit/torch/test_capabilities.py` compiles one kernel per
(op, dtype) and checks the table agrees with the compiler both ways.
"""

from __future__ import annotations

from legato import opset
from legato.transforms.core_to_backend import STRIDED_DYNAMIC
from legato.transforms.lower_tensor_ops import TRANSPOSE_DYNAMIC

_FLOAT_VPU = (
    "constant",  # a Python float in an expression (`x * 2.0`)
    "sum",
    "mean",
    "max",  # the reduction `max(x, dim)`
    "broadcast_binary",  # a binary op with a broadcast operand (`x - x.sum(1, keepdim)`)
    "transpose",
    "broadcast",
    "cast_f32",
    "cast_bf16",
    "cast_i64",  # a float to an int64 index (vpu.cvt, truncating: argmax's result)
    "cast_i1",  # a float to a bool, true where nonzero (vpu.cvt: a comparison's result)
    "where",
)
_DATA_MOVEMENT = ("reshape", "concat", "slice", "gather")

OPS: tuple[str, ...] = (*opset.ELEMENTWISE, "clamp", *_FLOAT_VPU, *_DATA_MOVEMENT, "matmul")
"""The op names `check` answers."""

_ELEMENT_TYPES = {
    "float32": "f32",
    "bfloat16": "bf16",
    "float16": "f16",
    "int32": "i32",
    "int64": "i64",
    "bool": "i1",
    "int8": "i8",
}


def element_type(dtype) -> str | None:
    """The legato element type name of a torch dtype (or its name), None when it has none."""
    return _ELEMENT_TYPES.get(str(dtype).removeprefix("torch."))


def dtypes(op: str) -> tuple[str, ...] | None:
    """The element types the compiler lowers `op` on (None: every element type)."""
    if op in opset.ELEMENTWISE:
        return opset.ELEMENTWISE[op].dtypes
    if op == "clamp":
        return opset.BY_KIND[opset.CLAMP, "clamp"].dtypes
    if op in _FLOAT_VPU:
        from legato.transforms.lower_tensor_ops import VPU_DTYPES

        return tuple(VPU_DTYPES)
    if op == "matmul":
        return opset.BY_KIND["matmul", "matmul"].dtypes
    if op in _DATA_MOVEMENT:
        return None
    raise KeyError(f"no capability rule for {op!r}; known: {', '.join(OPS)}")


def check(device: str, op: str, dtype) -> str | None:
    """None when a kernel doing `op` on `dtype` compiles for `device`, else the reason not."""
    et = element_type(dtype)
    if et is None:
        return f"{op} on {dtype}: the dtype has no Legato element type"
    allowed = dtypes(op)
    if allowed is None or et in allowed:
        return None
    unit = "MPU" if op == "matmul" else "VPU"
    return (
        f"{op} on {dtype} does not compile for {device}: the {unit} computes it on "
        f"{', '.join(allowed)}, not {et}"
    )


def require(ctx, op: str, dtype) -> None:
    """Assert (a resolver's refusal) that `op` on `dtype` compiles for the context's device."""
    reason = check(ctx.options.device, op, dtype)
    assert reason is None, reason


def clear() -> None:
    """Nothing is cached any more (the answers are computed); kept for callers of the old API."""


# -- dynamic shapes: what the compiler lays out -----------------------------------------------
# Sizes are ints (static) or anything else (a dynamic size, e.g. a SymInt).

# `part_copy` and `transpose_steps` answer with the compiler's own refusals, STRIDED_DYNAMIC
# (its strided DMA) and TRANSPOSE_DYNAMIC (its VPU transpose)


def _static(n) -> bool:
    return type(n) is int


def _same(a, b) -> bool:
    if _static(a) and _static(b):
        return a == b
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return a is b or statically_known_true(a == b)


def _static_strides(shape, skip) -> bool:
    """Whether the strides of a contiguous buffer of `shape` are static at every dim not in
    `skip` (a dim the copy never steps over)."""
    return all(all(_static(n) for n in shape[i + 1 :]) for i in range(len(shape)) if i not in skip)


def part_copy(whole, part, strided: bool = False, into: bool = False) -> str | None:
    """None when the compiler copies the region `part` (a shape, same rank) of a contiguous
    buffer of shape `whole` to or from a contiguous buffer (a slice of `whole`, or a cat
    operand into its result), else the compiler's reason. A contiguous region (every dim before
    the last one it cuts has size 1; no step) is one DMA of a runtime length; any other is a
    strided copy, whose strides the compiler takes static only (core_to_backend._dma): a dim of
    size 1 is never stepped over; every other dim's stride, in `whole` and in `part`, must not
    depend on a dynamic size. `into`: `part` is an operand copied into `whole` (a cat); the
    compiler holds an operand's dynamic size apart from the result's unless both come from the
    same kernel input, which the graph does not say, so a dynamic dim of `part` counts as cut
    (a conservative answer: such a cat compiles when its operands share one input's size)."""
    assert len(whole) == len(part), (whole, part)
    cut = [
        i
        for i, (w, p) in enumerate(zip(whole, part))
        if not _same(w, p) or (into and not _static(p))
    ]
    if not strided and (not cut or all(_static(part[k]) and part[k] == 1 for k in range(cut[-1]))):
        return None
    ones = {i for i, p in enumerate(part) if _static(p) and p == 1}
    if _static_strides(whole, ones) and _static_strides(part, ones):
        return None
    return STRIDED_DYNAMIC


def transpose_steps(shape, steps) -> str | None:
    """None when the compiler transposes a contiguous buffer of `shape` by the VPU transposes
    `steps` (permutations keeping dims [0, k) and swapping two groups after them, applied in
    order), else the compiler's reason: the kept leading dims [0, k) of each step must have a
    static product (lower_tensor_ops.transpose3)."""
    cur = list(shape)
    for step in steps:
        k = next((i for i, p in enumerate(step) if p != i), len(step))
        lead = cur[:k]
        if not all(_static(n) for n in lead):
            return f"{TRANSPOSE_DYNAMIC} ({list(cur)}, keeping dims [0, {k}))"
        cur = [cur[i] for i in step]
    return None
