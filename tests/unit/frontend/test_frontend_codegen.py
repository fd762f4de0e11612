"""The frontend: Python AST -> legato dialect (IR shape, locations, annotations, static eval)."""

from __future__ import annotations

import pytest
from frontend_helpers import SEED_KERNEL, line_of, load_kernel, load_source
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, FileLineColLoc
from xdsl.parser import Parser

import legato
from legato.dialects.legato import Legato, OnOp

SEED_IR = """\
builtin.module {
  legato.kernel @simple_matmul(%a: !legato.tensor<[?10, 256], bf16, shared_dram>, %b: !legato.tensor<[256, 128], bf16, mpu_dram>, %out: !legato.tensor<[10, 128], bf16, shared_dram>) attributes {target = "bertha"} {
    legato.on top {
      legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?10, 256], bf16, shared_dram>
      legato.request_load %b to core(0) memory mpu_buffer queue 0 : !legato.tensor<[256, 128], bf16, mpu_dram>
      legato.yield
    }
    legato.on core(0) {
      %loaded_a = legato.receive %a queue 0 memory sram : !legato.tensor<[?10, 256], bf16, shared_dram> -> !legato.tensor<[?10, 256], bf16, sram>
      %loaded_b = legato.receive_type queue 0 memory mpu_buffer : !legato.tensor<[256, 128], bf16, mpu_weight>
      %result = legato.matmul %loaded_a, %loaded_b : !legato.tensor<[?10, 256], bf16, sram>, !legato.tensor<[256, 128], bf16, mpu_weight> -> !legato.tensor<[?10, 128], bf16, sram>
      legato.memcpy %out, %result : !legato.tensor<[10, 128], bf16, shared_dram>, !legato.tensor<[?10, 128], bf16, sram>
      legato.yield
    }
    legato.return
  }
}
"""


def _parse(text: str):
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Legato)
    return Parser(ctx, text).parse_module()


def test_seed_kernel_ir_exact(tmp_path):
    mod = load_source(tmp_path, SEED_KERNEL)
    assert mod.simple_matmul.to_mlir(debuginfo=False) == SEED_IR


def test_seed_kernel_every_op_has_its_python_location(tmp_path):
    mod = load_source(tmp_path, SEED_KERNEL)
    path = mod.__file__
    module = mod.simple_matmul.emit_module()
    module.verify()
    for op in module.walk():
        assert isinstance(op.location, FileLineColLoc), op.name
        assert op.location.filename.data == path, op.name
    text = mod.simple_matmul.to_mlir()
    from pathlib import Path

    p = Path(path)
    want = {
        "legato.kernel @simple_matmul": (line_of(p, "def simple_matmul"), 1),
        "request_load %a": (line_of(p, "request_load(a, "), 9),
        "request_load %b": (line_of(p, "request_load(b, "), 9),
        "legato.receive %a": (line_of(p, "loaded_a = "), 20),
        "legato.receive_type": (line_of(p, "loaded_b = "), 20),
        "legato.matmul": (line_of(p, "result = loaded_a @ loaded_b"), 18),
        "legato.memcpy": (line_of(p, "memcpy(out, result)"), 9),
    }
    lines = text.splitlines()
    for key, (line, col) in want.items():
        hit = next(ln for ln in lines if key in ln)
        assert hit.rstrip().endswith(f'loc("{path}":{line}:{col})') or (
            # the kernel op prints its loc after the region
            key.startswith("legato.kernel")
        ), (key, hit)
    assert lines[-2].strip() == f'}} loc("{path}":{line_of(p, "def simple_matmul")}:1)'
    # With-regions point at their `with`.
    ons = [op for op in module.walk() if isinstance(op, OnOp)]
    assert [op.location.line.data for op in ons] == [
        line_of(p, "with device.get_top()"),
        line_of(p, "with device.get_core(0)"),
    ]


def test_ir_with_locations_reparses(tmp_path):
    mod = load_source(tmp_path, SEED_KERNEL)
    text = mod.simple_matmul.to_mlir()
    again = _parse(text)
    again.verify()
    assert str(again) == str(mod.simple_matmul.emit_module())


def test_future_annotations_strings_are_evaluated(tmp_path):
    src = "from __future__ import annotations\n" + SEED_KERNEL
    mod = load_source(tmp_path, src)
    assert isinstance(mod.simple_matmul.fn.__annotations__["a"], str)
    assert mod.simple_matmul.to_mlir(debuginfo=False) == SEED_IR


def test_def_time_annotations_use_the_default_model():
    spec = legato.get_model().tensor_type(legato.types.float("bfloat16"), [4, 8], "sram")
    assert str(spec) == "tensor<[4, 8], bf16, sram>"
    assert legato.get_model().num_cores == 32


def test_get_model_inside_kernel_is_the_target(tmp_path):
    mod, _ = load_kernel(
        tmp_path,
        """
        @legato.compile(backend="bertha-evt1")
        def k(a: tt([4, 8], "shared_dram")):
            n = legato.get_model().num_cores
            device = legato.get_context().get_device()
            assert n == 64 and device.num_cores == 64, "target model is evt1"
            with device.get_core(n - 1):
                x = legato.tensor.receive(a, 0, "sram")
            with device.get_top():
                legato.tensor.request_load(a, device.get_core(63), "sram")
        """,
    )
    text = mod.k.to_mlir(debuginfo=False)
    assert 'target = "bertha-evt1"' in text
    assert "legato.on core(63)" in text


def test_yield_passes_value_to_later_region_of_same_context(tmp_path):
    mod, _ = load_kernel(
        tmp_path,
        """
        @legato.compile(backend="bertha")
        def k(a: tt([16, 256], "shared_dram"), w: tt([256, 128], "mpu_dram"),
              out: tt([16, 128], "shared_dram")):
            device = legato.get_context().get_device()
            with device.get_top():
                legato.tensor.request_load(a, device.get_core(1), "sram")
                legato.tensor.request_load(w, device.get_core(1), "mpu_buffer")
            with device.get_core(1):
                wt = tt([256, 128], "mpu_weight")
                x = legato.tensor.receive(a, 0, "sram")
                weight = legato.tensor.receive_type(wt, 0, None, "mpu_buffer")
                q = x @ weight
                yield q
            with device.get_core(1):
                legato.tensor.memcpy(out, q)
        """,
    )
    text = mod.k.to_mlir(debuginfo=False)
    assert "    %q = legato.on core(1) -> (!legato.tensor<[16, 128], bf16, sram>) {\n" in text
    assert "      legato.yield %q_1 : !legato.tensor<[16, 128], bf16, sram>\n" in text
    assert "    legato.on core(1) (%q_2 = %q) {\n" in text
    assert (
        "      legato.memcpy %out, %q_2 : !legato.tensor<[16, 128], bf16, shared_dram>, "
        "!legato.tensor<[16, 128], bf16, sram>\n" in text
    )
    mod.k.emit_module().verify()


def test_static_if_for_and_function_inlining(tmp_path):
    mod, _ = load_kernel(
        tmp_path,
        """
        @legato.function
        def load_to(x, core, dev):
            legato.tensor.request_load(x, dev.get_core(core), "sram")

        @legato.function
        def double(x):
            return x + x

        N = 3

        @legato.compile(backend="bertha")
        def k(a: tt([8, 64], "shared_dram"), out: tt([8, 64], "shared_dram"), flag: legato.constexpr = True):
            device = legato.get_context().get_device()
            with device.get_top():
                for i in legato.static_range(N):
                    load_to(a, i, device)
            for i in range(N):
                with device.get_core(i):
                    x = legato.tensor.receive(a, 0, "sram")
                    if flag:
                        y = double(x)
                    else:
                        y = legato.tensor.exp(x)
                    legato.tensor.memcpy(out, y)
        """,
    )
    text = mod.k.to_mlir(debuginfo=False)
    assert text.count("legato.request_load") == 3
    assert [f"legato.on core({i})" in text for i in range(3)] == [True] * 3
    assert text.count("legato.add") == 3 and "legato.exp" not in text
    text2 = mod.k.to_mlir(debuginfo=False, flag=False)
    assert text2.count("legato.exp") == 3 and "legato.add" not in text2


def test_elementwise_scalar_and_reductions(tmp_path):
    mod, _ = load_kernel(
        tmp_path,
        """
        @legato.compile(backend="bertha")
        def k(a: tt([8, 64], "shared_dram"), out: tt([8], "shared_dram")):
            device = legato.get_context().get_device()
            with device.get_top():
                legato.tensor.request_load(a, device.get_core(0), "sram")
            with device.get_core(0):
                x = legato.tensor.receive(a, 0, "sram")
                y = legato.tensor.silu(x * 2.0 - x)
                s = legato.tensor.sum(legato.tensor.maximum(y, x), axis=1)
                legato.tensor.memcpy(out, s)
        """,
    )
    text = mod.k.to_mlir(debuginfo=False)
    for op in (
        "legato.constant 2.0",
        "legato.mul",
        "legato.sub",
        "legato.silu",
        "legato.maximum",
        "legato.sum %",
    ):
        assert op in text, op
    mod.k.emit_module().verify()


def test_python_level_calls_of_kernel_only_names_fail_clearly():
    import pytest

    with pytest.raises(legato.LegatoError, match="only exists inside a @legato.compile kernel"):
        legato.tensor.receive(None, 0, "sram")
    with pytest.raises(legato.LegatoError, match="only exists inside a @legato.compile kernel"):
        legato.tensor.request_load(None, None, "sram")
    core0 = legato.get_context().get_device().get_core(0)
    with pytest.raises(legato.LegatoError, match="only has a meaning inside"):
        core0.__enter__()
    with pytest.raises(legato.LegatoError, match="is out of range"):
        legato.get_context().get_device().get_core(32)


def test_shape_ops_slices_and_casts(tmp_path):
    mod, _ = load_kernel(
        tmp_path,
        """
        @legato.compile(backend="bertha")
        def k(a: tt([8, 64], "shared_dram"), out: tt([64, 4], "shared_dram", legato.types.float("float32"))):
            device = legato.get_context().get_device()
            with device.get_top():
                legato.tensor.request_load(a, device.get_core(0), "sram")
            with device.get_core(0):
                x = legato.tensor.receive(a, 0, "sram")
                top = x[0:4, :]
                both = legato.tensor.concat((top, x[4:8]), axis=0)
                r = legato.tensor.reshape(both, (2, 4, 64))
                row = r[1]
                t = legato.tensor.transpose(row)
                f = legato.tensor.cast(t, legato.types.float("float32"))
                legato.tensor.memcpy(out, f)
        """,
    )
    module = mod.k.emit_module()
    module.verify()
    text = mod.k.to_mlir(debuginfo=False)
    assert "legato.slice %x [0, 0] [4, 64] [1, 1]" in text
    assert "legato.cat" in text and "legato.reshape" in text
    assert "legato.transpose %" in text and "[1, 0]" in text
    assert "-> !legato.tensor<[64, 4], f32, sram>" in text


def test_helper_arguments_bind_as_python_binds_them(tmp_path):
    """A helper's parameters bound as Python binds a call (`inline`: all positional arguments of
    plain parameters zipped, any other call through `Signature.bind`): each way of passing
    the same values inlines the same ops, and a call Python refuses is refused."""
    source = """
        @legato.function
        def scaled(x, times=2):
            y = x
            for _ in legato.static_range(times - 1):
                y = y + x
            return y

        @legato.function
        def first(x, *rest):
            return x if not rest else rest[0]

        @legato.compile(backend="bertha")
        def k(a: tt([8, 64], "shared_dram"), out: tt([8, 64], "shared_dram"), how: legato.constexpr = 0):
            device = legato.get_context().get_device()
            with device.get_core(0):
                legato.tensor.request_load(a, device.get_core(0), "sram")
                x = legato.tensor.receive(a, 0, "sram")
                if how == 0:
                    y = scaled(x, 3)
                elif how == 1:
                    y = scaled(x, times=3)
                elif how == 2:
                    y = scaled(times=3, x=x)
                elif how == 3:
                    y = first(scaled(x), scaled(x, 3))
                elif how == 4:
                    y = scaled(x)
                else:
                    y = scaled(x, 3, 4)
                legato.tensor.memcpy(out, y)
        """
    mod, _ = load_kernel(tmp_path, source)
    texts = [mod.k.to_mlir(debuginfo=False, how=h) for h in range(5)]
    assert texts[0].count("legato.add") == 2
    assert texts[1] == texts[0] and texts[2] == texts[0]
    assert texts[3].count("legato.add") == 3  # both arguments inlined, the second returned
    assert texts[4].count("legato.add") == 1  # the default
    with pytest.raises(legato.LegatoError, match=r"scaled\(\): too many positional arguments"):
        mod.k.to_mlir(debuginfo=False, how=5)
