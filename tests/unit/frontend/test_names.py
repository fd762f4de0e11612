"""Issue 4's fixed names: every `legato.tensor` op named as in torch, and the Python operators,
compiled from DSL source and run as a binary on the emulator (by calling the kernel), compared
with torch. One small kernel per name; older spellings (cast, broadcast, concat, axis=) too."""

from __future__ import annotations

import pytest
import torch
from frontend_helpers import load_kernel

import legato

SHAPE = (4, 8)

# name -> (expression over core tensors `x`, `y` ([4, 8] f32) and `w` ([8, 4] f32),
#          the result's shape, the torch reference over tensors x, y, w)
CASES = {
    "add": ("legato.tensor.add(x, y)", SHAPE, lambda x, y, w: torch.add(x, y)),
    "sub": ("legato.tensor.sub(x, y)", SHAPE, lambda x, y, w: torch.sub(x, y)),
    "mul": ("legato.tensor.mul(x, y)", SHAPE, lambda x, y, w: torch.mul(x, y)),
    "div": ("legato.tensor.div(x, y)", SHAPE, lambda x, y, w: torch.div(x, y)),
    "maximum": ("legato.tensor.maximum(x, y)", SHAPE, lambda x, y, w: torch.maximum(x, y)),
    "minimum": ("legato.tensor.minimum(x, y)", SHAPE, lambda x, y, w: torch.minimum(x, y)),
    "neg": ("legato.tensor.neg(x)", SHAPE, lambda x, y, w: torch.neg(x)),
    "exp": ("legato.tensor.exp(x)", SHAPE, lambda x, y, w: torch.exp(x)),
    "log": ("legato.tensor.log(y)", SHAPE, lambda x, y, w: torch.log(y)),
    "sqrt": ("legato.tensor.sqrt(y)", SHAPE, lambda x, y, w: torch.sqrt(y)),
    "rsqrt": ("legato.tensor.rsqrt(y)", SHAPE, lambda x, y, w: torch.rsqrt(y)),
    "tanh": ("legato.tensor.tanh(x)", SHAPE, lambda x, y, w: torch.tanh(x)),
    "sigmoid": ("legato.tensor.sigmoid(x)", SHAPE, lambda x, y, w: torch.sigmoid(x)),
    "silu": ("legato.tensor.silu(x)", SHAPE, lambda x, y, w: torch.nn.functional.silu(x)),
    "gelu": ("legato.tensor.gelu(x)", SHAPE, lambda x, y, w: torch.nn.functional.gelu(x)),
    # the MPU multiplies bf16 (fp32 accumulation, rounded once to bf16)
    "matmul": (
        "legato.tensor.matmul(legato.tensor.to(x, bf16), legato.tensor.to(w, bf16))",
        (4, 4),
        lambda x, y, w: _bf16_matmul(x, w),
    ),
    "sum": ("legato.tensor.sum(x, dim=1)", (4,), lambda x, y, w: torch.sum(x, dim=1)),
    "sum_keepdim": (
        "legato.tensor.sum(x, dim=1, keepdim=True)",
        (4, 1),
        lambda x, y, w: torch.sum(x, dim=1, keepdim=True),
    ),
    "sum_dim0": (
        "legato.tensor.sum(x, 0, keepdim=True)",
        (1, 8),
        lambda x, y, w: torch.sum(x, 0, keepdim=True),
    ),
    "sum_negative_dim": ("legato.tensor.sum(x, dim=-1)", (4,), lambda x, y, w: x.sum(dim=-1)),
    "sum_dims_tuple": (
        "legato.tensor.sum(x, dim=(0, 1), keepdim=True)",
        (1, 1),
        lambda x, y, w: torch.sum(x, dim=(0, 1), keepdim=True),
    ),
    "mean": (
        "legato.tensor.mean(x, dim=1, keepdim=True)",
        (4, 1),
        lambda x, y, w: torch.mean(x, dim=1, keepdim=True),
    ),
    "mean_dims_tuple": (
        "legato.tensor.mean(x, dim=(0, 1), keepdim=True)",
        (1, 1),
        lambda x, y, w: torch.mean(x, dim=(0, 1), keepdim=True),
    ),
    "amax": (
        "legato.tensor.amax(x, dim=1, keepdim=True)",
        (4, 1),
        lambda x, y, w: torch.amax(x, dim=1, keepdim=True),
    ),
    "amin": ("legato.tensor.amin(x, dim=0)", (8,), lambda x, y, w: torch.amin(x, dim=0)),
    "reshape": (
        "legato.tensor.reshape(x, (8, 4))",
        (8, 4),
        lambda x, y, w: torch.reshape(x, (8, 4)),
    ),
    "transpose": (
        "legato.tensor.transpose(x, 0, 1)",
        (8, 4),
        lambda x, y, w: torch.transpose(x, 0, 1),
    ),
    "transpose_dims": ("legato.tensor.transpose(x, (1, 0))", (8, 4), lambda x, y, w: x.T),
    "broadcast_to": (
        "legato.tensor.broadcast_to(x[0:1, :], (4, 8))",
        SHAPE,
        lambda x, y, w: torch.broadcast_to(x[0:1, :], (4, 8)),
    ),
    "cat": ("legato.tensor.cat((x, y), dim=0)", (8, 8), lambda x, y, w: torch.cat((x, y), dim=0)),
    "cat_dim1": ("legato.tensor.cat([x, y], 1)", (4, 16), lambda x, y, w: torch.cat([x, y], 1)),
    "to": (
        "legato.tensor.to(legato.tensor.to(x, bf16), f32)",
        SHAPE,
        lambda x, y, w: x.to(torch.bfloat16).to(torch.float32),
    ),
    # the op table's rows added for the torch work
    "abs": ("legato.tensor.abs(x)", SHAPE, lambda x, y, w: torch.abs(x)),
    "erf": ("legato.tensor.erf(x)", SHAPE, lambda x, y, w: torch.erf(x)),
    "gelu_tanh": (
        "legato.tensor.gelu_tanh(x)",
        SHAPE,
        lambda x, y, w: torch.nn.functional.gelu(x, approximate="tanh"),
    ),
    "softplus": (
        "legato.tensor.softplus(x)",
        SHAPE,
        lambda x, y, w: torch.nn.functional.softplus(x),
    ),
    "log1p": ("legato.tensor.log1p(y)", SHAPE, lambda x, y, w: torch.log1p(y)),
    "clamp": ("legato.tensor.clamp(x, -0.5, max=0.5)", SHAPE, lambda x, y, w: x.clamp(-0.5, 0.5)),
    "clamp_min": ("legato.tensor.clamp(x, min=0.0)", SHAPE, lambda x, y, w: x.clamp(min=0.0)),
    **{
        op: (
            f"legato.tensor.{op}(x, y - 1.0)",
            SHAPE,
            lambda x, y, w, _op=op: getattr(torch, _op)(x, y - 1.0).float(),
        )
        for op in ("eq", "ne", "lt", "le", "gt", "ge")
    },
    "where_lt_mask": (
        "legato.tensor.where(x < 0.0, y, x)",
        SHAPE,
        lambda x, y, w: torch.where(x < 0.0, y, x),
    ),
    # Python operators
    "op_lt": ("x < y - 1.0", SHAPE, lambda x, y, w: (x < y - 1.0).float()),
    "op_ge_scalar": ("x >= 0.25", SHAPE, lambda x, y, w: (x >= 0.25).float()),
    "op_eq_self": ("x == x", SHAPE, lambda x, y, w: (x == x).float()),
    "op_ne": ("x != y", SHAPE, lambda x, y, w: (x != y).float()),
    "op_add": ("x + y", SHAPE, lambda x, y, w: x + y),
    "op_sub": ("x - y", SHAPE, lambda x, y, w: x - y),
    "op_mul": ("x * y", SHAPE, lambda x, y, w: x * y),
    "op_div": ("x / y", SHAPE, lambda x, y, w: x / y),
    "op_matmul": (
        "legato.tensor.to(x, bf16) @ legato.tensor.to(w, bf16)",
        (4, 4),
        lambda x, y, w: _bf16_matmul(x, w),
    ),
    "op_neg": ("-x", SHAPE, lambda x, y, w: -x),
    "op_scalar": ("2.0 * x - 1.0 + y / 4.0", SHAPE, lambda x, y, w: 2.0 * x - 1.0 + y / 4.0),
    "op_broadcast": ("x * y[:, 0:1] + x[1:2, :]", SHAPE, lambda x, y, w: x * y[:, 0:1] + x[1:2, :]),
    "slicing": ("x[1:3, 2:6]", (2, 4), lambda x, y, w: x[1:3, 2:6]),
    "slicing_int_index": ("x[2, :]", (8,), lambda x, y, w: x[2, :]),
    # older spellings keep working
    "cast": ("legato.tensor.cast(x, bf16)", SHAPE, lambda x, y, w: x.to(torch.bfloat16)),
    "sum_axis": ("legato.tensor.sum(x, axis=1)", (4,), lambda x, y, w: x.sum(1)),
    "max_reduce": ("legato.tensor.max(x, 1)", (4,), lambda x, y, w: x.amax(1)),
    "min_elementwise": ("legato.tensor.min(x, y)", SHAPE, lambda x, y, w: torch.minimum(x, y)),
    "broadcast": (
        "legato.tensor.broadcast(x[:, 0:1], (4, 8))",
        SHAPE,
        lambda x, y, w: x[:, 0:1].expand(4, 8),
    ),
    "concat": (
        "legato.tensor.concat((x, y), axis=1)",
        (4, 16),
        lambda x, y, w: torch.cat((x, y), 1),
    ),
}


def _bf16_matmul(x, w):
    return (x.bfloat16().float() @ w.bfloat16().float()).bfloat16()


BODY = """
f32 = legato.types.float("float32")


@legato.compile(backend=bertha)
def k(a: tt([4, 8], "shared_dram", f32), b: tt([4, 8], "shared_dram", f32),
      c: tt([8, 4], "shared_dram", f32), out: tt({out_shape}, "shared_dram", {out_dtype})):
    device = legato.get_context().get_device()
    with device.get_core(0):
        x = legato.tensor.load(a)
        y = legato.tensor.load(b)
        w = legato.tensor.load(c)
        legato.tensor.memcpy(out, {expr})
"""


def _inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=g)
    y = torch.rand(4, 8, generator=g) + 0.5  # positive: log, sqrt, rsqrt, div
    w = torch.randn(8, 4, generator=g)
    return x, y, w


@pytest.mark.parametrize("name", list(CASES))
def test_name_runs_on_the_emulator_like_torch(name, tmp_path, cache_dir):
    expr, out_shape, ref = CASES[name]
    x, y, w = _inputs()
    expect = ref(x, y, w)
    out_dtype = "bf16" if expect.dtype == torch.bfloat16 else "f32"
    mod, _ = load_kernel(
        tmp_path, BODY.format(expr=expr, out_shape=list(out_shape), out_dtype=out_dtype)
    )
    out = torch.zeros(out_shape, dtype=expect.dtype)
    mod.k(x, y, w, out)
    assert mod.k.last_run is not None
    # f32 VPU math is computed in float64 and rounded once: within a few f32 ulps of torch
    tol = {"gelu": 1e-5, "gelu_tanh": 1e-5, "matmul": 1e-2, "op_matmul": 1e-2}.get(name, 2e-6)
    torch.testing.assert_close(out, expect, rtol=tol, atol=tol)


def test_every_fixed_name_exists():
    names = [
        "add",
        "sub",
        "mul",
        "div",
        "maximum",
        "minimum",
        "neg",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "tanh",
        "sigmoid",
        "silu",
        "gelu",
        "matmul",
        "sum",
        "mean",
        "amax",
        "amin",
        "reshape",
        "transpose",
        "broadcast_to",
        "cat",
        "to",
    ]
    for n in names:
        fn = getattr(legato.tensor, n)
        assert getattr(fn, "_legato_op", None), n
        with pytest.raises(legato.LegatoError, match="only exists inside"):
            fn()


def test_sum_over_every_dim(tmp_path, cache_dir):
    """`sum(x)` without dim reduces every dim (here kept as [1, 1])."""
    body = """
f32 = legato.types.float("float32")


@legato.compile(backend=bertha)
def k(a: tt([4, 8], "shared_dram", f32), out: tt([1, 1], "shared_dram", f32)):
    device = legato.get_context().get_device()
    with device.get_core(0):
        x = legato.tensor.load(a)
        legato.tensor.memcpy(out, legato.tensor.sum(x, keepdim=True))
"""
    mod, _ = load_kernel(tmp_path, body)
    x = _inputs()[0]
    out = torch.zeros(1, 1)
    mod.k(x, out)
    torch.testing.assert_close(out, x.sum().reshape(1, 1), rtol=1e-6, atol=1e-6)


def test_reduction_dim_errors(tmp_path, cache_dir):
    body = """
f32 = legato.types.float("float32")


@legato.compile(backend=bertha)
def k(a: tt([4, 8], "shared_dram", f32), out: tt([4], "shared_dram", f32)):
    device = legato.get_context().get_device()
    with device.get_core(0):
        x = legato.tensor.load(a)
        legato.tensor.memcpy(out, legato.tensor.amax(x, dim="rows"))
"""
    mod, _ = load_kernel(tmp_path, body)
    with pytest.raises(legato.CompileError, match="dim must be a compile-time int"):
        mod.k(torch.zeros(4, 8), torch.zeros(4))
