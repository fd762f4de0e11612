"""The legato-level interpreter: data movement, every tensor op against torch/numpy, errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from interp_kernels import SEED_MATMUL, core0_kernel, ttype

from legato import numerics
from legato.interp import (
    DeadlockError,
    InterpArgumentError,
    InterpError,
    InvalidModuleError,
    UnsupportedOpError,
    run,
)

BF16 = ml_dtypes.bfloat16
rng = np.random.default_rng(1234)


def rand(shape, dtype=BF16, positive=False):
    x = rng.standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.1
    return x.astype(np.float32).astype(dtype)


def t(x: np.ndarray) -> torch.Tensor:
    if x.dtype == np.dtype(BF16):
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(x.copy())


def n(x: torch.Tensor) -> np.ndarray:
    if x.dtype == torch.bfloat16:
        return x.contiguous().view(torch.int16).numpy().view(BF16)
    return x.numpy()


# -- the seed ------------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [10, 7, 1])
def test_seed_matmul(rows):
    a, b = rand((rows, 256)), rand((256, 128))
    out = np.zeros((10, 128), BF16)
    result = run(SEED_MATMUL, "legato", [a, b, out])
    assert result[2] is out  # written in place
    expected = numerics.round_to(numerics.matmul_acc(a, b), BF16)
    assert np.array_equal(out[:rows].view(np.uint16), expected.view(np.uint16))
    assert not out[rows:].astype(np.float32).any()
    ref = (t(a).float() @ t(b).float()).to(torch.bfloat16).float().numpy()
    np.testing.assert_allclose(out[:rows].astype(np.float32), ref, rtol=2**-7, atol=1e-2)
    assert result.stats.ops_per_task["core 0"] > 0 and result.stats.transfers == 2


def test_torch_arguments_written_in_place():
    a = torch.randn(10, 256, dtype=torch.bfloat16)
    b = torch.randn(256, 128, dtype=torch.bfloat16)
    out = torch.zeros(10, 128, dtype=torch.bfloat16)
    run(SEED_MATMUL, "legato", [a, b, out])
    torch.testing.assert_close(out.float(), (a.float() @ b.float()), rtol=2e-2, atol=5e-2)


# -- elementwise ---------------------------------------------------------------------------

BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}
UNARY = {
    "neg": torch.neg,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
}


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_ops_match_torch_bit_for_bit(op, dtype):
    npd = BF16 if dtype == "bf16" else np.float32
    shape_a, shape_b = [4, 64], [1, 64]  # broadcasting
    a, b = rand(shape_a, npd), rand(shape_b, npd, positive=(op == "div"))
    body = (
        f"%r = legato.{op} %x0, %x1 : {ttype(shape_a, dtype, 'sram')}, "
        f"{ttype(shape_b, dtype, 'sram')} -> {ttype(shape_a, dtype, 'sram')}"
    )
    out = np.zeros(shape_a, npd)
    run(
        core0_kernel([(shape_a, dtype), (shape_b, dtype)], (shape_a, dtype), body),
        "legato",
        [a, b, out],
    )
    ref = n(BINARY[op](t(a), t(b)))
    assert np.array_equal(out.view(np.uint8), ref.view(np.uint8))


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_ops_match_torch(op, dtype):
    npd = BF16 if dtype == "bf16" else np.float32
    shape = [8, 32]
    x = rand(shape, npd, positive=op in ("log", "sqrt", "rsqrt"))
    body = f"%r = legato.{op} %x0 : {ttype(shape, dtype, 'sram')}"
    out = np.zeros(shape, npd)
    run(core0_kernel([(shape, dtype)], (shape, dtype), body), "legato", [x, out])
    ref = UNARY[op](t(x)).float().numpy()
    tol = 2**-7 if dtype == "bf16" else 1e-6
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=tol, atol=tol)


def test_integer_elementwise():
    shape = [5]
    a = np.array([7, -7, 3, 0, 100], np.int32)
    b = np.array([2, 2, -2, 5, 7], np.int32)
    for op, ref in [("add", a + b), ("mul", a * b), ("div", a // b), ("neg", -a)]:
        if op == "neg":
            body = f"%r = legato.neg %x0 : {ttype(shape, 'i32', 'sram')}"
        else:
            body = (
                f"%r = legato.{op} %x0, %x1 : {ttype(shape, 'i32', 'sram')}, "
                f"{ttype(shape, 'i32', 'sram')} -> {ttype(shape, 'i32', 'sram')}"
            )
        out = np.zeros(shape, np.int32)
        run(
            core0_kernel([(shape, "i32"), (shape, "i32")], (shape, "i32"), body),
            "legato",
            [a, b, out],
        )
        assert np.array_equal(out, ref), op


@pytest.mark.parametrize(
    "src,dst", [("f32", "bf16"), ("bf16", "f32"), ("f32", "i32"), ("i32", "f32")]
)
def test_cast(src, dst):
    np_of = {"bf16": BF16, "f32": np.float32, "i32": np.int32}
    x = (rng.standard_normal((3, 8)) * 50).astype(np_of[src])
    body = f"%r = legato.cast %x0 : {ttype([3, 8], src, 'sram')} -> {ttype([3, 8], dst, 'sram')}"
    out = np.zeros((3, 8), np_of[dst])
    run(core0_kernel([([3, 8], src)], ([3, 8], dst), body), "legato", [x, out])
    torch_dst = {"bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32}[dst]
    assert np.array_equal(out, n(t(x).to(torch_dst)))


# -- reductions ----------------------------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_reductions(op, dim, keepdim):
    shape = [6, 40]
    x = rand(shape, np.float32)
    rshape = list(shape)
    if keepdim:
        rshape[dim] = 1
    else:
        del rshape[dim]
    kd = " keepdim" if keepdim else ""
    body = (
        f"%r = legato.{op} %x0 dim {dim}{kd} : {ttype(shape, 'f32', 'sram')} -> "
        f"{ttype(rshape, 'f32', 'sram')}"
    )
    out = np.zeros(rshape, np.float32)
    run(core0_kernel([(shape, "f32")], (rshape, "f32"), body), "legato", [x, out])
    ref = getattr(torch, op)(t(x), dim=dim, keepdim=keepdim).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    if op == "sum":  # the defined order: sequential fp32 over the axis
        acc = np.zeros(np.delete(np.array(shape), dim), np.float32)
        for i in range(shape[dim]):
            acc += np.take(x, i, axis=dim)
        assert np.array_equal(out.reshape(acc.shape), acc)


# -- shape ops -----------------------------------------------------------------------------


def _shape_op(body, in_shape, out_shape, dtype="f32"):
    npd = np.float32 if dtype == "f32" else BF16
    x = np.arange(np.prod(in_shape), dtype=np.float32).reshape(in_shape).astype(npd)
    out = np.zeros(out_shape, npd)
    run(core0_kernel([(in_shape, dtype)], (out_shape, dtype), body), "legato", [x, out])
    return x, out


def test_reshape_transpose_broadcast_slice():
    T = lambda s: ttype(s, "f32", "sram")
    x, out = _shape_op(f"%r = legato.reshape %x0 : {T([4, 6])} -> {T([2, 12])}", [4, 6], [2, 12])
    assert np.array_equal(out, x.reshape(2, 12))
    x, out = _shape_op(
        f"%r = legato.transpose %x0 [1, 0] : {T([4, 6])} -> {T([6, 4])}", [4, 6], [6, 4]
    )
    assert np.array_equal(out, x.T)
    x, out = _shape_op(f"%r = legato.broadcast_to %x0 : {T([1, 6])} -> {T([3, 6])}", [1, 6], [3, 6])
    assert np.array_equal(out, np.broadcast_to(x, (3, 6)))
    x, out = _shape_op(
        f"%r = legato.slice %x0 [1, 0] [2, 3] [1, 2] : {T([4, 6])} -> {T([2, 3])}", [4, 6], [2, 3]
    )
    assert np.array_equal(out, x[1:3, 0:6:2])


def test_cat_and_constant():
    T = lambda s: ttype(s, "f32", "sram")
    body = f"""
%c = legato.constant 2.5 : {T([2, 3])}
%r = legato.cat %x0, %c dim 0 : {T([2, 3])}, {T([2, 3])} -> {T([4, 3])}
"""
    x = rand((2, 3), np.float32)
    out = np.zeros((4, 3), np.float32)
    run(core0_kernel([([2, 3], "f32")], ([4, 3], "f32"), body), "legato", [x, out])
    assert np.array_equal(out, np.concatenate([x, np.full((2, 3), 2.5, np.float32)]))


def test_dynamic_dims_follow_the_runtime_extent():
    T = lambda s: ttype(s, "bf16", "sram")
    body = f"""
%e = legato.exp %x0 : {T([(-1, 16), 8])}
%r = legato.add %e, %x0 : {T([(-1, 16), 8])}, {T([(-1, 16), 8])} -> {T([(-1, 16), 8])}
"""
    x = rand((5, 8))
    out = np.zeros((16, 8), BF16)
    src = core0_kernel([([(-1, 16), 8], "bf16")], ([16, 8], "bf16"), body)
    # memcpy %out [16, 8] <- %r [?16, 8] : declared types differ; rewrite the memcpy line
    src = src.replace(
        f"legato.memcpy %out, %r : {ttype([16, 8], 'bf16', 'shared_dram')}, {T([16, 8])}",
        f"legato.memcpy %out, %r : {ttype([16, 8], 'bf16', 'shared_dram')}, {T([(-1, 16), 8])}",
    )
    run(src, "legato", [x, out])
    ref = (t(x).exp() + t(x)).float().numpy()
    np.testing.assert_allclose(out[:5].astype(np.float32), ref, rtol=2**-7, atol=1e-2)
    assert not out[5:].astype(np.float32).any()


# -- concurrency ---------------------------------------------------------------------------

FIFO = """
legato.kernel @fifo(%a : !legato.tensor<[4], f32, shared_dram>, %b : !legato.tensor<[4], f32, shared_dram>,
                    %c : !legato.tensor<[4], f32, shared_dram>, %out : !legato.tensor<[12], f32, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(1) memory sram queue 2 : !legato.tensor<[4], f32, shared_dram>
    legato.request_load %b to core(1) memory sram queue 2 : !legato.tensor<[4], f32, shared_dram>
    legato.request_load %c to core(1) memory sram queue 2 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.on core(1) {
    %x = legato.receive %a queue 2 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    %y = legato.receive %a queue 2 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    %z = legato.receive %a queue 2 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    %r = legato.cat %x, %y, %z dim 0 : !legato.tensor<[4], f32, sram>, !legato.tensor<[4], f32, sram>, !legato.tensor<[4], f32, sram> -> !legato.tensor<[12], f32, sram>
    legato.memcpy %out, %r : !legato.tensor<[12], f32, shared_dram>, !legato.tensor<[12], f32, sram>
    legato.yield
  }
  legato.return
}
"""


def test_fifo_order_per_queue():
    a, b, c = (np.full(4, v, np.float32) for v in (1, 2, 3))
    out = np.zeros(12, np.float32)
    run(FIFO, "legato", [a, b, c, out])
    assert np.array_equal(out, np.repeat([1, 2, 3], 4).astype(np.float32))


PING_PONG = """
legato.kernel @pingpong(%a : !legato.tensor<[4], f32, shared_dram>, %out : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) -> (!legato.tensor<[4], f32, sram>) {
    %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    %y = legato.add %x, %x : !legato.tensor<[4], f32, sram>, !legato.tensor<[4], f32, sram> -> !legato.tensor<[4], f32, sram>
    legato.request_load %y to core(1) memory sram queue 0 : !legato.tensor<[4], f32, sram>
    legato.yield %y : !legato.tensor<[4], f32, sram>
  }
  legato.on core(1) {
    %z = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    %w = legato.mul %z, %z : !legato.tensor<[4], f32, sram>, !legato.tensor<[4], f32, sram> -> !legato.tensor<[4], f32, sram>
    legato.memcpy %out, %w : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.on top {
    legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.return
}
"""


def test_contexts_run_concurrently_and_cores_send_to_cores():
    # top's region comes last in the text but core 0 waits for it: only concurrency runs this.
    a = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    run(PING_PONG, "legato", [a, out])
    assert np.array_equal(out, (2 * a) ** 2)


ALL_CORES = """
legato.kernel @spmd(%a : !legato.tensor<[4], f32, shared_dram>, %out : !legato.tensor<[4], f32, shared_dram>) {
  legato.on all_cores {
    legato.yield
  }
  legato.on top {
    legato.request_load %a to core(3) memory sram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.on core(3) {
    %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    legato.memcpy %out, %x : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
"""


def test_all_cores_spawns_every_core():
    from legato.model import bertha

    a = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    model = bertha.Bertha(None, "bertha", 4, False, 8, 1 << 30)
    r = run(ALL_CORES, "legato", [a, out], model)
    assert set(r.stats.ops_per_task) == {"top", "core 0", "core 1", "core 2", "core 3"}
    assert np.array_equal(out, a)


DEADLOCK = """
legato.kernel @dead(%a : !legato.tensor<[4], f32, shared_dram>, %out : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram> loc("dead.py":4:8)
    legato.request_load %x to core(1) memory sram queue 0 : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.on core(1) {
    %y = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram> loc("dead.py":8:8)
    legato.request_load %y to core(0) memory sram queue 0 : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
"""


def test_deadlock_names_each_blocked_context_and_op():
    with pytest.raises(DeadlockError) as e:
        run(DEADLOCK, "legato", [np.zeros(4, np.float32), np.zeros(4, np.float32)])
    msg = str(e.value)
    assert "core 0: blocked in 'legato.receive' at dead.py:4:8" in msg
    assert "core 1: blocked in 'legato.receive' at dead.py:8:8" in msg
    assert "queue 0" in msg


# -- bad input -----------------------------------------------------------------------------


def test_wrong_arguments_are_named():
    a, b, out = rand((10, 256)), rand((256, 128)), np.zeros((10, 128), BF16)
    with pytest.raises(InterpArgumentError, match="takes 3 argument"):
        run(SEED_MATMUL, "legato", [a, b])
    with pytest.raises(InterpArgumentError, match="argument 1: dtype mismatch: expected bf16"):
        run(SEED_MATMUL, "legato", [a, b.astype(np.float32), out])
    with pytest.raises(
        InterpArgumentError, match="argument 0: dim 0 is 11, above its declared upper bound 10"
    ):
        run(SEED_MATMUL, "legato", [rand((11, 256)), b, out])
    with pytest.raises(InterpArgumentError, match="argument 2: dim 1 must be 128"):
        run(SEED_MATMUL, "legato", [a, b, np.zeros((10, 64), BF16)])


def test_module_that_does_not_verify():
    bad = SEED_MATMUL.replace("%a to core(0) memory sram", "%a to top memory sram")
    with pytest.raises(InvalidModuleError, match="does not verify.*target must be core"):
        run(bad, "legato", [])


def test_unparsable_and_wrong_level():
    with pytest.raises(InvalidModuleError, match="cannot parse"):
        run("legato.kernel @k(", "legato", [])
    with pytest.raises(InvalidModuleError, match="legato level, not the core level"):
        run(SEED_MATMUL, "core", [])


def test_op_without_implementation_is_named():
    src = core0_kernel(
        [([4], "f32")],
        ([4], "f32"),
        '%r = "test.unknown"(%x0) : (!legato.tensor<[4], f32, sram>) -> '
        "!legato.tensor<[4], f32, sram>",
    )
    from xdsl.context import Context  # noqa: F401 - unregistered ops need allow_unregistered

    from legato.interp import api

    ctx = api.make_context()
    ctx.allow_unregistered = True
    from xdsl.parser import Parser

    module = Parser(ctx, src).parse_module()
    with pytest.raises(UnsupportedOpError, match="no implementation for 'test.unknown'"):
        run(module, "legato", [np.zeros(4, np.float32), np.zeros(4, np.float32)])


def test_receive_shape_mismatch():
    src = """
legato.kernel @k(%a : !legato.tensor<[?8], f32, shared_dram>, %b : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[?8], f32, shared_dram>
    legato.yield
  }
  legato.on core(0) {
    %x = legato.receive %b queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
"""
    with pytest.raises(InterpError, match=r"\[core 0\] 'legato.receive'.*shape \[6\]"):
        run(src, "legato", [np.zeros(6, np.float32), np.zeros(4, np.float32)])
