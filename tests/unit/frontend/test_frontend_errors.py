"""Every bad kernel is a CompileError that names the problem and the Python file:line."""

from __future__ import annotations

import pytest
from frontend_helpers import line_of, load_kernel

import legato

HEADER = """
@legato.compile(backend="bertha")
def k(a: tt(((-1, 16), 256), "shared_dram"), w: tt([256, 128], "mpu_dram"),
      out: tt([16, 128], "shared_dram")):
    device = legato.get_context().get_device()
"""


def compile_error(tmp_path, body: str, marker: str, *, header: str = HEADER, nth: int = 0):
    """Emit the kernel; return (error text, expected `file:line:` prefix)."""
    mod, path = load_kernel(tmp_path, header + body)
    with pytest.raises(legato.CompileError) as info:
        mod.k.emit_module()
    err = info.value
    where = f"{path}:{line_of(path, marker, nth)}:"
    assert str(err).startswith(where), f"{where} not at the start of:\n{err}"
    assert err.location is not None and err.location.file == str(path)
    # The caret excerpt quotes the offending line.
    assert marker.strip() in str(err)
    return str(err)


def test_unknown_memory_space_in_request_load(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sramm")  # BAD
    """,
        "# BAD",
    )
    assert "unknown memory space 'sramm'" in msg and "shared_dram" in msg


def test_unknown_memory_space_in_receive(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "dram")  # BAD
    """,
        "# BAD",
    )
    assert "unknown memory space 'dram'" in msg


def test_shared_memory_is_not_a_receive_target(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "shared_dram")  # BAD
    """,
        "# BAD",
    )
    assert "'shared_dram' is a shared memory" in msg


def test_unknown_memory_space_in_tensor_type_in_body(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        t = tt([256, 128], "mpu_weights")  # BAD
    """,
        "# BAD",
    )
    assert "unknown memory space 'mpu_weights'" in msg


def test_matmul_shape_mismatch(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
        legato.tensor.request_load(w, device.get_core(0), "mpu_buffer")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
        wt = legato.tensor.receive_type(tt([128, 128], "mpu_weight"), 0, None, "mpu_buffer")
        r = x @ wt  # BAD
    """,
        "# BAD",
    )
    assert "matmul shape mismatch" in msg and "K = 256" in msg and "K = 128" in msg


def test_core_index_beyond_the_target(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(32):  # BAD
        pass
    """,
        "# BAD",
    )
    assert "core index 32 is out of range" in msg and "32 cores" in msg


def test_core_index_beyond_a_small_target(tmp_path):
    header = """
def four_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 4, False, 2, 1 << 30)


@legato.compile(backend=four_cores)
def k(a: tt([16, 256], "shared_dram")):
    device = legato.get_context().get_device()
"""
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(4), "sram")  # BAD
    """,
        "# BAD",
        header=header,
    )
    assert "core index 4 is out of range" in msg and "4 cores" in msg


def test_value_used_in_a_region_it_was_not_yielded_to(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
    with device.get_core(0):
        legato.tensor.memcpy(out, x)  # BAD
    """,
        "# BAD",
    )
    assert "values cross regions only by `yield`" in msg and "'x'" in msg


def test_yielded_value_used_by_another_context(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
        yield x
    with device.get_core(1):
        legato.tensor.memcpy(out, x)  # BAD
    """,
        "# BAD",
    )
    assert "'x' was yielded by a `core(0)` region" in msg and "core(1)" in msg


def test_receive_type_of_dynamic_type_without_src(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive_type(tt(((-1, 16), 256), "sram"), 0, None, "sram")  # BAD
    """,
        "# BAD",
    )
    assert "dynamic dims" in msg and "src" in msg


def test_receive_without_a_sender_would_block_forever(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
        y = legato.tensor.receive(a, 1, "sram")  # BAD
    """,
        "# BAD",
    )
    assert "would wait forever" in msg and "queue 1" in msg


def test_receive_on_top_is_refused(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        x = legato.tensor.receive(a, 0, "sram")  # BAD
    """,
        "# BAD",
    )
    assert "must run in a core context" in msg


def test_op_outside_any_context(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    legato.tensor.request_load(a, device.get_core(0), "sram")  # BAD
    """,
        "# BAD",
    )
    assert "must run in an execution context" in msg


def test_nested_contexts(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        with device.get_core(0):  # BAD
            pass
    """,
        "# BAD",
    )
    assert "cannot be nested" in msg


def test_unsupported_statement(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    while True:  # BAD
        pass
    """,
        "# BAD",
    )
    assert "a `while` loop is not supported in a Legato kernel" in msg


def test_runtime_if_is_refused(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        if a:  # BAD
            pass
    """,
        "# BAD",
    )
    assert "compile-time value" in msg


def test_undefined_name(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        y = nonexistent + 1  # BAD
    """,
        "# BAD",
    )
    assert "name 'nonexistent' is not defined" in msg


def test_yield_outside_region(tmp_path):
    msg = compile_error(tmp_path, "    yield a  # BAD\n", "# BAD")
    assert "only allowed inside" in msg


def test_static_assert_failure(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    assert legato.get_model().num_cores >= 64, "needs a big chip"  # BAD
    """,
        "# BAD",
    )
    assert "assertion failed" in msg and "needs a big chip" in msg


def test_python_function_given_a_tensor(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        n = len(a)  # BAD
    """,
        "# BAD",
    )
    assert "runs at compile time and cannot take tensors" in msg


def test_return_value_in_kernel(tmp_path):
    msg = compile_error(tmp_path, "    return a  # BAD\n", "# BAD")
    assert "returns nothing" in msg


def test_memcpy_shape_mismatch(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(w, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(w, 0, "sram")
        legato.tensor.memcpy(out, x)  # BAD
    """,
        "# BAD",
    )
    assert "memcpy" in msg and "does not fit" in msg


def test_missing_annotation(tmp_path):
    mod, path = load_kernel(
        tmp_path,
        """
        @legato.compile(backend="bertha")
        def k(a: tt([4], "shared_dram"), b):  # BAD
            pass
        """,
    )
    with pytest.raises(legato.CompileError) as info:
        mod.k.emit_module()
    assert str(info.value).startswith(f"{path}:{line_of(path, '# BAD')}:")
    assert "parameter 'b' has no type annotation" in str(info.value)


def test_bad_string_annotation_points_at_it(tmp_path):
    from frontend_helpers import PREAMBLE, load_source

    src = (
        "from __future__ import annotations\n"
        + PREAMBLE
        + ('@legato.compile(backend="bertha")\ndef k(a: tt([4], "sram_x")):  # BAD\n    pass\n')
    )
    mod = load_source(tmp_path, src)
    from pathlib import Path

    path = Path(mod.__file__)
    with pytest.raises(legato.CompileError) as info:
        mod.k.emit_module()
    assert str(info.value).startswith(f"{path}:{line_of(path, '# BAD')}:")
    assert "unknown memory space 'sram_x'" in str(info.value)


def test_error_shows_source_line_and_caret(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sramm")  # BAD
    """,
        "# BAD",
    )
    lines = msg.splitlines()
    assert "# BAD" in lines[1]
    caret = lines[2].index("^")
    assert lines[1][caret] == '"'  # the caret is under the memory argument


def test_error_inside_a_helper_points_into_the_helper(tmp_path):
    from frontend_helpers import load_source

    helper = load_source(
        tmp_path,
        "import legato\n\n\n@legato.function\ndef bad(x):\n"
        "    return legato.tensor.receive(x, 0, 'nowhere')  # BAD\n",
        name="legato_test_helper_mod",
    )
    mod, _ = load_kernel(
        tmp_path,
        """
        import legato_test_helper_mod as h

        @legato.compile(backend="bertha")
        def k(a: tt([4, 8], "shared_dram")):
            device = legato.get_context().get_device()
            with device.get_core(0):
                y = h.bad(a)
        """,
    )
    from pathlib import Path

    hpath = Path(helper.__file__)
    with pytest.raises(legato.CompileError) as info:
        mod.k.emit_module()
    assert str(info.value).startswith(f"{hpath}:{line_of(hpath, '# BAD')}:")
    assert "unknown memory space 'nowhere'" in str(info.value)


def test_shape_of_dynamic_tensor_is_refused(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
        m = x.shape[0]  # BAD
    """,
        "# BAD",
    )
    assert "dynamic dims [0]" in msg and ".bounds" in msg


def test_where_needs_a_tensor_value(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
        y = legato.tensor.where(x, 1.0, 0.0)  # BAD
    """,
        "# BAD",
    )
    assert "legato.tensor.where needs a tensor for `a` or `b`" in msg


def test_where_with_an_integer_condition(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        c = legato.tensor.full((4,), 1, legato.types.i32)
        x = legato.tensor.full((4,), 1.0, legato.types.f32)
        y = legato.tensor.where(c, x, 0.0)  # BAD
    """,
        "# BAD",
    )
    assert "the condition must be i1 (bool) or a float mask, got i32" in msg


def test_gather_with_float_indices_and_into_shared_memory(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
        y = legato.tensor.gather(w, x)  # BAD
    """,
        "# BAD",
    )
    assert "legato.gather: indices must be i64" in msg and "got bf16" in msg
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        i = legato.tensor.full((4,), 1, legato.types.i64)
        y = legato.tensor.gather(w, i, "shared_dram")  # BAD
    """,
        "# BAD",
    )
    assert "legato.tensor.gather: memory space 'shared_dram' is a shared memory" in msg


def test_a_builtin_called_with_a_bad_argument_names_its_signature(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        x = legato.tensor.load(a)
        y = legato.tensor.exp(x, dim=1)  # BAD
    """,
        "# BAD",
    )
    assert "legato.tensor.exp(x) has no argument 'dim' (x)" in msg


def test_a_builtin_called_with_too_many_arguments_names_its_signature(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        x = legato.tensor.load(a)
        y = legato.tensor.clamp(x, 0.0, 1.0, 2.0)  # BAD
    """,
        "# BAD",
    )
    assert "legato.tensor.clamp(x, min=None, max=None) takes at most 3 arguments" in msg


def test_clamp_needs_a_bound(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        x = legato.tensor.load(a)
        y = legato.tensor.clamp(x)  # BAD
    """,
        "# BAD",
    )
    assert "legato.tensor.clamp needs a min or a max bound" in msg


def test_clamp_bound_must_be_a_number(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        x = legato.tensor.load(a)
        y = legato.tensor.clamp(x, max=x)  # BAD
    """,
        "# BAD",
    )
    assert "legato.tensor.clamp: max must be a compile-time number or None, got tensor" in msg


def test_chained_tensor_comparison_is_refused(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        x = legato.tensor.load(a)
        y = 0.0 < x < 1.0  # BAD
    """,
        "# BAD",
    )
    assert "this comparison of tensors is not supported" in msg


def test_zero_slice_step_is_a_located_compile_error(tmp_path):
    # slice.indices() raised a bare ValueError before the step was checked (issue 17, item 8)
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        x = legato.tensor.load(a, "sram")
        legato.tensor.memcpy(out, x[:, 0:256:0] @ legato.tensor.load(w, "mpu_buffer"))  # BAD
    """,
        "# BAD",
    )
    assert "slice steps must be positive" in msg
