"""legato.numpy.jit: NumPy functions run on Bertha match NumPy, and the report says where each
NumPy call ran (Legato kernel or NumPy, and why)."""

import math

import numpy as np
import pytest

import legato.numpy as lnp
from legato.errors import LegatoError

F32 = np.float32
RNG = np.random.default_rng(0)


def randn(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(F32)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def mlp(x, w1, b1, w2, b2):
    h = np.maximum(x @ w1 + b1, 0.0)
    return np.tanh(h @ w2 + b2)


S, H, D = 16, 2, 32
CAUSAL = np.triu(np.full((S, S), -1e9, dtype=F32), 1)  # a global the function closes over


def attention(x, wq, wk, wv):
    def heads(t):
        return t.reshape(S, H, D).transpose(1, 0, 2)

    q, k, v = heads(x @ wq), heads(x @ wk), heads(x @ wv)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(D) + CAUSAL
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return (p @ v).transpose(1, 0, 2).reshape(S, H * D)


def _all_on_legato(report, ops):
    assert report.numpy_calls == [], str(report)
    assert {c.ran for c in report.calls} == {"legato"}, str(report)
    ran = {op for c in report.calls for op in c.ops}
    assert set(ops) <= ran, (ops, str(report))
    assert report.num_kernels >= 1 and report.last_cycles > 0


@pytest.mark.parametrize(
    "fn, args, ops",
    [
        (softmax, (randn(8, 64),), ["aten.amax.default", "aten.exp.default"]),
        (layernorm, (randn(8, 64), randn(64), randn(64)), ["aten.mean.dim", "aten.sqrt.default"]),
        (
            mlp,
            (
                randn(8, 64),
                randn(64, 32, scale=0.1),
                randn(32),
                randn(32, 16, scale=0.1),
                randn(16),
            ),
            ["aten.mm.default", "aten.clamp_min.default", "aten.tanh.default"],
        ),
        (
            attention,
            (randn(S, H * D),) + tuple(randn(H * D, H * D, scale=0.1) for _ in range(3)),
            ["aten.mm.default", "aten.bmm.default", "aten.sum.dim_IntList"],
        ),
    ],
    ids=["softmax", "layernorm", "mlp", "attention"],
)
def test_matches_numpy_and_runs_on_legato(fn, args, ops):
    got = lnp.jit(fn)(*args)
    ref = fn(*args)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    report = lnp.last_report()
    _all_on_legato(report, ops)
    # every call is listed with the line of this file that made it
    assert all(c.where.startswith(__file__) for c in report.calls), str(report)


def partly(x):
    y = np.cumsum(x, axis=-1)  # no translation: NumPy
    z = 1.0 / (1.0 + np.exp(-x))  # reciprocal has no Legato implementation: NumPy
    return np.tanh(y) * z, x.shape


def test_the_rest_runs_on_numpy_and_is_reported():
    x = randn(4, 32)
    f = lnp.jit(partly)
    (got, shape) = f(x)
    ref, ref_shape = partly(x)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    assert shape == ref_shape
    r = lnp.last_report()
    by_name = {c.name: c for c in r.calls}
    assert by_name["cumsum"].ran == "numpy"
    assert "no Legato translation" in by_name["cumsum"].reason
    assert by_name["divide"].ran == "numpy"
    assert "aten.reciprocal" in by_name["divide"].reason
    assert by_name["tanh"].ran == "legato" and by_name["exp"].ran == "legato"
    text = str(r)
    assert "np.cumsum" in text and "NumPy (" in text and "Legato kernel" in text


def test_comparisons_feed_where_on_legato_and_a_bool_result_too():
    def leaky(x, keep):
        y = np.where(x > 0, x, 0.1 * x)  # the comparison is taken: a where on Legato reads it
        return np.where(keep, y, -1e9), x > 1  # a bool result: i1 on Legato (vpu.cvt)

    x = randn(8, 32)
    keep = x < 0.5
    got, above = lnp.jit(leaky)(x, keep)
    ref, ref_above = leaky(x, keep)
    assert got.dtype == ref.dtype and above.dtype == np.bool_
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    np.testing.assert_array_equal(above, ref_above)
    calls = lnp.last_report().calls
    assert [c.ran for c in calls] == ["legato"] * 5, calls


def test_float64_runs_on_numpy_exactly():
    x = RNG.standard_normal((4, 16))  # NumPy's default float64: Legato has no f64
    got = lnp.jit(softmax)(x)
    np.testing.assert_array_equal(got, softmax(x))
    r = lnp.last_report()
    assert r.legato_calls == [] and r.num_kernels == 0
    assert all("float64" in c.reason for c in r.numpy_calls)


def test_numpy_scalars_promote_as_in_numpy():
    @lnp.jit
    def scaled(x):
        return (x / np.sqrt(x.shape[-1]), x * np.float32(2.0))  # float64 scalar; float32 one

    x = randn(4, 16)
    got = scaled(x)
    ref = scaled.__wrapped__(x)
    assert [g.dtype for g in got] == [r.dtype for r in ref] == [np.float64, np.float32]
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=0)
    by_name = {c.name: c for c in lnp.last_report().calls}
    assert by_name["divide"].ran == "numpy" and "float64" in by_name["divide"].reason
    assert by_name["multiply"].ran == "legato"


def test_traces_once_per_signature():
    f = lnp.jit(softmax)
    a, b = randn(4, 32), randn(4, 32)
    f(a)
    r = lnp.last_report()
    np.testing.assert_allclose(f(b), softmax(b), rtol=1e-4, atol=1e-6)  # new values, one trace
    assert lnp.last_report() is r and len(f.report()) == 1
    assert r.summary.kernels[0].calls == 2
    c = randn(2, 32)
    np.testing.assert_allclose(f(c), softmax(c), rtol=1e-4, atol=1e-6)
    assert len(f.report()) == 2


def test_closure_constant_follows_the_array():
    w = randn(32, 32, scale=0.1)

    @lnp.jit
    def proj(x):
        return x @ w

    x = randn(4, 32)
    np.testing.assert_allclose(proj(x), x @ w, rtol=1e-4, atol=1e-4)  # f32 as bf16 halves
    w *= 2  # the graph reads the array it closed over, not a copy taken when tracing
    np.testing.assert_allclose(proj(x), x @ w, rtol=1e-4, atol=1e-4)  # f32 as bf16 halves


def test_rows_iterate_and_a_failing_call_leaves_no_node():
    @lnp.jit
    def f(x):
        try:
            x[len(x)]  # an IndexError while tracing: caught by the function itself
        except IndexError:
            pass
        return np.stack([row * 2.0 for row in x])

    x = randn(3, 8)
    np.testing.assert_allclose(f(x), x * 2.0, rtol=1e-6)
    np.testing.assert_allclose(f(x + 1), (x + 1) * 2.0, rtol=1e-6)  # the replay raises nothing
    assert [c.name for c in lnp.last_report().calls].count("ndarray.__getitem__") == 3


def test_data_dependent_control_flow_is_an_error():
    @lnp.jit
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(LegatoError, match=r"test_numpy_jit.py:\d+: bool\(\) of a traced array"):
        f(randn(4))


def test_value_dependent_shape_is_an_error_on_replay():
    @lnp.jit
    def f(x):
        return np.nonzero(x > 0)[0]

    x = np.array([1.0, -1.0, 2.0], dtype=F32)
    np.testing.assert_array_equal(f(x), [0, 2])
    with pytest.raises(LegatoError, match=r"np.nonzero returned shape .* depends on the values"):
        f(np.array([1.0, 1.0, 2.0], dtype=F32))


def test_out_argument_is_an_error():
    @lnp.jit
    def f(x):
        y = np.empty_like(x)
        np.exp(x, out=y)
        return y

    with pytest.raises(LegatoError, match=r"test_numpy_jit.py:\d+: np.exp\(\.\.\., out=\.\.\.\)"):
        f(randn(4))


def test_device_and_torch_options_pass_through():
    x = randn(4, 32)
    got = lnp.jit(softmax, device="bertha-evt1", options={"legato.strict": True})(x)
    np.testing.assert_allclose(got, softmax(x), rtol=1e-4, atol=1e-6)
    assert lnp.last_report().device == "bertha-evt1"
    with pytest.raises(LegatoError, match=r"unknown torch.compile option 'legato.nope'"):
        lnp.jit(softmax, options={"legato.nope": 1})
