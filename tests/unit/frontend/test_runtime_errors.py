"""Errors of the runtime constructs (runtime loops, runtime slices, core_id, sync): each is a
CompileError at the offending Python line that says what to write instead."""

from __future__ import annotations

import pytest
from frontend_helpers import line_of, load_kernel

import legato

HEADER = """
@legato.compile(backend="bertha")
def k(x: tt(((-1, 64), 32), "shared_dram"), out: tt([64, 32], "shared_dram")):
    device = legato.get_context().get_device()
"""


def compile_error(tmp_path, body: str, marker: str = "# BAD") -> str:
    mod, path = load_kernel(tmp_path, HEADER + body)
    with pytest.raises(legato.CompileError) as info:
        mod.k.emit_module()
    where = f"{path}:{line_of(path, marker)}:"
    assert str(info.value).startswith(where), f"{where} not at the start of:\n{info.value}"
    return str(info.value)


def test_runtime_index_carried_around_a_loop(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        n = x.size(0)
        m = n
        for i in range(n):  # BAD
            m = m + 1
    """,
    )
    assert "'m' is a runtime index defined before this loop" in msg
    assert "compute it from the loop index 'i'" in msg


def test_name_assigned_in_a_loop_is_not_visible_after_it(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        for i in range(x.size(0)):
            t = legato.tensor.load(x[i:i + 1, :])
        legato.tensor.memcpy(out, t)  # BAD
    """,
    )
    assert "'t' is assigned inside the runtime loop at line" in msg
    assert "assign the tensor before the loop" in msg


def test_compile_time_value_changed_in_a_runtime_loop(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        k = 0
        for i in range(x.size(0)):  # BAD
            k = k + 1
    """,
    )
    assert "'k' is a compile-time value (int 0) assigned inside this runtime loop" in msg
    assert "legato.static_range" in msg


def test_carried_tensor_must_keep_its_type(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        acc = legato.tensor.load(x[0:2, :])
        for i in range(x.size(0)):  # BAD
            acc = legato.tensor.sum(acc, 0, keepdim=True)
    """,
    )
    assert "'acc' is a tensor assigned inside this runtime loop" in msg
    assert "must keep its type" in msg


@pytest.mark.parametrize(
    "call",
    [
        'legato.tensor.request_load(x, device.get_core(1), "sram")',
        'legato.tensor.receive(x, 0, "sram")',
    ],
)
def test_transfers_inside_a_runtime_loop(tmp_path, call):
    msg = compile_error(
        tmp_path,
        f"""
    with device.get_core(0):
        for i in range(x.size(0)):
            {call}  # BAD
    """,
    )
    assert "is not supported inside a runtime loop" in msg and "legato.tensor.load" in msg


def test_yield_and_return_inside_a_runtime_loop(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        for i in range(x.size(0)):
            return  # BAD
    """,
    )
    assert "`return` is not supported inside a runtime loop" in msg


def test_function_returning_inside_its_own_runtime_loop(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        legato.tensor.memcpy(out[0:1, :], first_row(legato.tensor.load(x)))


@legato.function
def first_row(t):
    for i in range(t.size(0)):
        return t[0:1, :]  # BAD
    """,
    )
    assert "`return` is not supported inside a runtime loop" in msg


def test_function_called_inside_a_runtime_loop_returns(tmp_path):
    """A @legato.function's own return is not a return from the caller's runtime loop."""
    mod, _ = load_kernel(
        tmp_path,
        HEADER
        + """
    with device.get_core(0):
        for i in range(x.size(0)):
            legato.tensor.memcpy(out[i:i + 1, :], twice(legato.tensor.load(x[i:i + 1, :])))


@legato.function
def twice(t):
    return t + t
    """,
    )
    assert "scf.for" in mod.k.to_mlir()


def test_static_range_of_a_runtime_value(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        for i in legato.static_range(x.size(0)):  # BAD
            pass
    """,
    )
    assert "static_range needs compile-time bounds" in msg and "range(n)" in msg


def test_runtime_step(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        n = x.size(0)
        for i in range(0, n, n):  # BAD
            pass
    """,
    )
    assert "the step of a runtime range must be a positive compile-time int" in msg


def test_runtime_slice_needs_a_static_size(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        n = x.size(0)
        t = legato.tensor.load(x[0:n // 2, :])  # BAD
    """,
    )
    assert "is not a compile-time int" in msg and "x[i*R:(i+1)*R]" in msg
    assert "dim 0 of tensor<[?64, 32], bf16, shared_dram> is dynamic" in msg and "s[0:m]" in msg


def test_runtime_size_view_starting_past_the_dim(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        t = legato.tensor.load(out[64 : 64 + x.size(0), :])  # BAD
    """,
    )
    assert "dim 0: a slice starting at 64 is empty in tensor<[64, 32], bf16, shared_dram>" in msg


def test_if_on_a_runtime_index(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        if x.size(0):  # BAD
            pass
    """,
    )
    assert "`if` on a runtime" in msg


def test_runtime_index_from_another_region(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        n = x.size(0)
    with device.get_core(0):
        for i in range(n):  # BAD
            pass
    """,
    )
    assert "'n' is a runtime index of another region" in msg


def test_barrier_outside_all_cores(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        legato.sync.barrier()  # BAD
    """,
    )
    assert "get_all_cores()" in msg and "legato.sync.signal" in msg


def test_wait_in_all_cores(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_all_cores():
        legato.sync.wait(0)  # BAD
    """,
    )
    assert "legato.sync.wait cannot run in an all-cores region" in msg


def test_signal_to_all_cores(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.sync.signal(device.get_all_cores(), 0)  # BAD
    """,
    )
    assert "the target must be device.get_top() or device.get_core(i)" in msg


def test_core_id_on_top(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        c = legato.core_id()  # BAD
    """,
    )
    assert "legato.core_id()" in msg and "on top" in msg


def test_load_on_top(tmp_path):
    msg = compile_error(
        tmp_path,
        """
    with device.get_top():
        t = legato.tensor.load(x)  # BAD
    """,
    )
    assert "must run in a core context" in msg


def test_core_id_in_a_single_core_region_is_static(tmp_path):
    mod, _ = load_kernel(
        tmp_path,
        HEADER
        + """
    with device.get_core(3):
        c = legato.core_id()
        assert c == 3, "core_id() of get_core(3) is the compile-time 3"
    """,
    )
    mod.k.emit_module()


def test_clamped_slice_of_a_dynamic_dim_as_a_matmul_operand(tmp_path):
    # a ceil-div loop reaches the partial tile: the slice is clamped (a runtime size), and the
    # error says how to get a static one (the whole tiles, as the FileCheck test
    # frontend/static-slice-of-dynamic-dim.py shows)
    msg = compile_error(
        tmp_path,
        """
    with device.get_core(0):
        a = legato.tensor.load(x[0:8, :])
        for t in range((x.size(0) + 31) // 32):
            w = legato.tensor.load(x[t * 32 : t * 32 + 32, :])
            b = legato.tensor.matmul(a, w)  # BAD
    """,
    )
    assert "inner dimensions differ" in msg and "K = ?32" in msg
    assert "for t in range(x.size(d) // R)" in msg


def test_whole_tile_slice_of_a_dynamic_dim_is_a_matmul_operand(tmp_path):
    # the same slice in a loop over the whole tiles has the static size 32
    mod, _ = load_kernel(
        tmp_path,
        HEADER
        + """
    with device.get_core(0):
        a = legato.tensor.load(x[0:8, :])
        for t in range(x.size(0) // 32):
            w = legato.tensor.load(x[t * 32 : t * 32 + 32, :])
            legato.tensor.memcpy(out[0:8, :], legato.tensor.matmul(a, w))
    """,
    )
    assert "-> !legato.tensor<[32, 32], bf16, shared_dram>" in mod.k.to_mlir(debuginfo=False)
