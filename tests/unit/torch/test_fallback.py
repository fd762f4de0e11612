"""Extern fallback: no resolver, a resolver that asserts or crashes, a kernel that fails to
compile: the node runs eagerly by default; `legato.strict` raises."""

import pytest
import torch
from torch_backend_helpers import assert_close_bf16

import legato
import legato.torch as lt

BF16 = torch.bfloat16


def test_node_without_resolver_runs_extern(caplog):
    def f(x):
        return torch.flip(x * 2.0, [-1]) + 1.0

    x = torch.randn(8, 64, dtype=BF16)
    with torch.no_grad(), caplog.at_level("WARNING", logger="legato.torch"):
        y = torch.compile(f, backend="legato")(x)
    assert_close_bf16(y, f(x), ulps=8)
    s = lt.last_summary()
    assert [(e.op, e.reason) for e in s.extern] == [("aten.flip.default", "no resolver")]
    assert s.num_kernels == 2  # x*2 and +1 on either side of the extern flip
    # the user is told, once per graph, with the op and the reason
    warned = [r.message for r in caplog.records if "run eagerly" in r.message]
    assert warned == [f"legato: 1 node(s) of {s.graph} run eagerly: aten.flip.default: no resolver"]


def test_refused_nodes_warn_once_per_graph_grouped(caplog):
    def f(x):
        return torch.flip(torch.flip(x, [-1]) * 2.0, [-1]) + 1.0

    x = torch.randn(8, 64, dtype=BF16)
    with torch.no_grad(), caplog.at_level("WARNING", logger="legato.torch"):
        torch.compile(f, backend="legato")(x)
    warned = [r.message for r in caplog.records if "run eagerly" in r.message]
    assert len(warned) == 1 and "2 node(s)" in warned[0], warned
    assert "aten.flip.default x2: no resolver" in warned[0], warned


@legato.function
def never_used(x):
    return x


def test_a_refusing_resolver_falls_through_to_the_next_one():
    asked = []

    def refuse(node, ctx):
        asked.append(node.name)
        raise AssertionError("test resolver refuses tanh")

    lt.register(torch.ops.aten.tanh.default, refuse)
    try:
        x = torch.randn(8, 64, dtype=BF16)
        with torch.no_grad():
            y = torch.compile(lambda x: torch.tanh(x) * 3.0, backend="legato")(x)
        assert_close_bf16(y, torch.tanh(x) * 3.0)
        s = lt.last_summary()
        assert asked == ["tanh"]  # the newest resolver is asked first ...
        assert s.num_kernels == 1 and s.num_extern == 0, str(s)  # ... then the built-in one
    finally:
        lt.unregister(torch.ops.aten.tanh.default, refuse)


def test_only_resolver_asserting():
    op = torch.ops.aten.flip.default

    def refuse(node, ctx):
        assert node.meta["val"].dtype == torch.float32, "flip only for f32 in this test"
        return lt.Impl(never_used, (node.args[0],))

    lt.register(op, refuse)
    try:
        x = torch.randn(8, 64, dtype=BF16)
        with torch.no_grad():
            y = torch.compile(lambda x: torch.flip(x, [1]), backend="legato")(x)
        assert_close_bf16(y, torch.flip(x, [1]))
        s = lt.last_summary()
        assert s.num_kernels == 0
        assert s.extern[0].reason.startswith("resolver refused: flip only for f32 in this test")
    finally:
        lt.unregister(op, refuse)


@legato.function
def broken(x):
    return legato.tensor.matmul(x, x)  # [8, 64] @ [8, 64]: a compile error


def test_kernel_that_fails_to_compile_runs_eagerly_by_default_and_strict_raises(caplog):
    op = torch.ops.aten.cumsum.default

    def resolve(node, ctx):
        return lt.Impl(broken, (node.args[0],))

    lt.register(op, resolve)
    try:
        x = torch.randn(8, 64, dtype=BF16)

        def f(x):
            return torch.cumsum(x * 2.0, 1) + 1.0

        with torch.no_grad(), caplog.at_level("WARNING", logger="legato.torch"):
            y = torch.compile(f, backend="legato")(x)
        assert_close_bf16(y, f(x), ulps=8)
        s = lt.last_summary()
        # bisected: only the failing node runs eagerly, its neighbours stay Legato kernels
        assert [(e.op, e.reason.split(":")[0]) for e in s.extern] == [
            ("aten.cumsum.default", "kernel failed")
        ], str(s)
        assert "matmul" in s.extern[0].reason
        assert s.num_kernels == 2 and all(k.calls == 1 for k in s.kernels), str(s)
        assert any("cumsum" in r.message and "runs eagerly" in r.message for r in caplog.records)
        for options in ({"legato.strict": True}, {"legato.on_kernel_error": "raise"}):
            torch._dynamo.reset()
            with pytest.raises(Exception, match="matmul"), torch.no_grad():
                torch.compile(f, backend="legato", options=options)(x)
    finally:
        lt.unregister(op, resolve)


def test_a_resolver_that_crashes_is_a_refusal_unless_strict():
    op = torch.ops.aten.tanh.default

    def crash(node, ctx):
        raise KeyError("a bug in this resolver")

    lt.register(op, crash)
    try:
        x = torch.randn(8, 64, dtype=BF16)
        with torch.no_grad():
            y = torch.compile(torch.tanh, backend="legato")(x)
        assert_close_bf16(y, torch.tanh(x))
        s = lt.last_summary()
        assert s.num_kernels == 1 and s.num_extern == 0, str(s)  # the built-in resolver ran
        torch._dynamo.reset()
        with pytest.raises(Exception, match="a bug in this resolver"), torch.no_grad():
            torch.compile(torch.tanh, backend="legato", options={"legato.strict": True})(x)
    finally:
        lt.unregister(op, crash)


def test_a_user_resolver_registered_before_any_compile_is_asked_first():
    """In a fresh process (the libraries not loaded yet), a user's resolver still takes
    precedence over the built-in one registered for the same op."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import torch
        import legato.torch as lt
        asked = []
        def refuse(node, ctx):
            asked.append(node.name)
            assert False, "no"
        lt.register(torch.ops.aten.tanh.default, refuse)
        x = torch.randn(8, 64, dtype=torch.bfloat16)
        with torch.no_grad():
            torch.compile(lambda x: torch.tanh(x) * 3.0, backend="legato")(x)
        print(asked)
    """)
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=600
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "['tanh']"
