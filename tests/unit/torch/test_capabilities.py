"""The torch backend's capability answers (`legato.torch.capabilities`, from the op table) agree
with the compiler: for every op it answers and every element type, a one-op kernel compiles
exactly when `check` says it does (a resolver never accepts what the compiler refuses, nor
refuses what it compiles)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from legato import opset
from legato.errors import LegatoError
from legato.torch import capabilities
from legato.torch.kernelgen import dtype_src

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool)
_X = "[8, 64]"
# op -> (expression over x, output shape, output dtype or None for x's)
ORACLE = {
    **{
        op: (f"legato.tensor.{op}(x, x)" if row.arity == 2 else f"legato.tensor.{op}(x)", _X, None)
        for op, row in opset.ELEMENTWISE.items()
    },
    "clamp": ("legato.tensor.clamp(x, max=1)", _X, None),
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
    "cast_f32": ("legato.tensor.cast(x, legato.types.float('float32'))", _X, torch.float32),
    "cast_bf16": ("legato.tensor.cast(x, legato.types.float('bfloat16'))", _X, torch.bfloat16),
    "cast_i64": ("legato.tensor.cast(x, legato.types.i64)", _X, torch.int64),
    "cast_i1": ("legato.tensor.cast(x, legato.types.i1)", _X, torch.bool),
    "where": ("legato.tensor.where(x, x, 0.0)", _X, None),
    "matmul": ("x @ legato.tensor.transpose(x, (1, 0))", "[8, 8]", None),
    "gather": ("legato.tensor.gather(x, ids)", "[4, 64]", None),
}


def _compiles(tmp_path, op: str, dtype) -> bool:
    """Compile (not run) a kernel whose core 0 does `op` on an [8, 64] tensor of `dtype`."""
    expr, out_shape, out_dtype = ORACLE[op]
    source = "\n".join(
        [
            "import legato",
            "",
            "@legato.compile(backend='bertha')",
            "def oracle(",
            f'    x: legato.get_model().tensor_type({dtype_src(dtype)}, {_X}, "shared_dram"),',
            '    ids: legato.get_model().tensor_type(legato.types.i64, [4], "shared_dram"),',
            f"    out: legato.get_model().tensor_type({dtype_src(out_dtype or dtype)}, "
            f'{out_shape}, "shared_dram"),',
            "):",
            "    device = legato.get_context().get_device()",
            "    with device.get_top():",
            '        legato.tensor.request_load(x, device.get_core(0), "sram")',
            '        legato.tensor.request_load(ids, device.get_core(0), "sram")',
            "    with device.get_core(0):",
            '        x = legato.tensor.receive(x, 0, "sram")',
            '        ids = legato.tensor.receive(ids, 0, "sram")',
            f"        legato.tensor.memcpy(out, {expr})",
            "",
        ]
    )
    path = tmp_path / f"oracle_{op}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"oracle_{op}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.oracle.compile()
    except LegatoError:
        return False
    return True


def test_every_answered_op_has_an_oracle_kernel():
    assert set(ORACLE) == set(capabilities.OPS)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", capabilities.OPS)
def test_answer_agrees_with_the_compiler(tmp_path, op, dtype):
    answer = capabilities.check("bertha", op, dtype)
    compiled = _compiles(tmp_path, op, dtype)
    assert (answer is None) == compiled, (
        f"capabilities says {answer or 'supported'}, but the kernel "
        f"{'compiles' if compiled else 'does not compile'}"
    )


def test_refusal_names_op_dtype_and_what_the_unit_takes():
    reason = capabilities.check("bertha-evt1", "exp", torch.int32)
    assert reason == (
        "exp on torch.int32 does not compile for bertha-evt1: the VPU computes it on bf16, f32, "
        "f16, not i32"
    )
    assert "has no Legato element type" in capabilities.check("bertha", "add", torch.complex64)
    with pytest.raises(KeyError, match="no capability rule for 'nonsense'"):
        capabilities.check("bertha", "nonsense", torch.float32)
