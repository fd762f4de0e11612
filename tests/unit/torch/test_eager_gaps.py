"""What used to run eagerly (issue 13, item 3) and now runs on Legato: pow with any number as
exponent (and a number as base); where / masked_fill with a condition that broadcasts;
sum / mean / amax / amin over several (not all) dims; comparisons whose bool result leaves the
kernel, and mul by a bool. Each op is checked on every one of its torch OpInfo
samples that the case covers (`reference_inputs`, uncapped; f32 and bf16), compiled with
`torch.compile(backend="legato")` against eager torch, and on hand-picked special values in
strict mode."""

import math

import pytest
import torch

import legato.torch as lt
from legato.tools.opinfo_table import opinfos, run_sample, samples

pytest.importorskip("expecttest")  # torch.testing._internal needs it (a dev dependency)

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
INF, NAN = float("inf"), float("nan")
_INFOS: dict = {}


def _info(name, variant=""):
    if not _INFOS:
        _INFOS.update({(o.name, o.variant_test_name): o for o in opinfos()})
    return _INFOS[(name, variant)]


def _empty(s) -> bool:
    ts = [s.input, *s.args, *s.kwargs.values()]
    return any(isinstance(t, torch.Tensor) and t.numel() == 0 for t in ts)


def check_opinfo(name, dn, keep, variant=""):
    """Every OpInfo sample of `name` that `keep(sample)` selects runs wholly on Legato and
    matches eager (one with an empty tensor may run eagerly: nothing to compute); returns how
    many ran on Legato."""
    info, dtype = _info(name, variant), DTYPES[dn]
    ss = [s for s in samples(info, dtype, 10**6) or () if keep(s)]
    assert ss, f"no OpInfo sample of {name} is selected"
    on = 0
    for s in ss:
        o = run_sample(info, s, dtype)
        assert not o.wrong and o.status != "crash", f"[{o.sample}] {o.status}: {o.detail}"
        if _empty(s) and o.status == "eager":
            assert all("empty tensor" in r for r in o.reasons), (o.sample, o.reasons)
            continue
        assert o.status == "legato", f"[{o.sample}] {o.status}: {o.reasons}"
        on += 1
    return on


def run_strict(f, *args):
    """f(*args) through the backend in strict mode and eagerly; asserts nothing ran eagerly."""
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options={"legato.strict": True})(*args)
        ref = f(*args)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels >= 1, str(s)
    return y, ref, s


def assert_pow_close(y, ref, dtype):
    """Special values exact (NaN, infinities, zeros with their sign, +-1); the rest within f32's
    1e-5 relative (exp(e log x): ~|e log x| ulps) or two bf16 ulps."""
    assert y.dtype == ref.dtype and y.shape == ref.shape
    assert torch.equal(y.isnan(), ref.isnan())
    keep = ~ref.isnan()
    exact = keep & (~torch.isfinite(ref) | (ref == 0) | (ref.abs() == 1))
    assert torch.equal(y[exact], ref[exact])
    assert torch.equal(torch.signbit(y[keep]), torch.signbit(ref[keep]))
    rtol = 1e-5 if dtype == torch.float32 else 2**-7
    fin = keep & torch.isfinite(ref)
    torch.testing.assert_close(y[fin], ref[fin], rtol=rtol, atol=0.0)


# -- pow with a number as exponent or base ---------------------------------------------------

POW_X = [-2.0, -1.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, INF, -INF, NAN]
POW_X += [1e-3, -7.0, 40.0, 1e-20, -1e20, 0.999, -1.001]
# torch's fast paths (2, 3, -2, -1, 0.5, -0.5), 0, integers by squaring (up to 64) and above,
# odd and even, negative, non-integers, +-inf, NaN, an exponent bf16 rounds to an integer
POW_E = [2, 3, -2, -1, 0.5, -0.5, 0, 1, 4, 5, -3, 7, 64, -65, 100, 101, -1.7, 0.25, 3.2997]
POW_E += [INF, -INF, NAN, 2.001, 257.3]


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("e", POW_E, ids=str)
def test_pow_scalar_exponent_special_values(e, dn):
    dtype = DTYPES[dn]
    x = torch.tensor(POW_X, dtype=dtype).reshape(3, 7)
    y, ref, s = run_strict(lambda x: torch.pow(x * 1, e), x)
    assert "aten.pow.Tensor_Scalar" in str(s), str(s)
    assert_pow_close(y, ref, dtype)


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("b", [2.0, 0.5, 1.0, 0.0, -2.0, -0.5, 7.053372383117676])
def test_pow_number_base(b, dn):
    dtype = DTYPES[dn]
    y0 = torch.tensor([0.0, -0.0, 1.0, 2.0, 3.0, -3.0, 0.5, -0.5, INF, -INF, NAN, 2.5, -2.5, 10.0])
    y, ref, s = run_strict(lambda y: torch.pow(b, y * 1), y0.to(dtype))
    assert "aten.pow.Scalar" in str(s), str(s)
    assert_pow_close(y, ref, dtype)


def _number_exponent_or_base(s):
    return not isinstance(s.input, torch.Tensor) or not isinstance(s.args[0], torch.Tensor)


@pytest.mark.parametrize("dn", sorted(DTYPES))
def test_pow_opinfo_number_samples(dn):
    assert check_opinfo("pow", dn, _number_exponent_or_base) >= 5


def test_pow_exponent_rounds_to_bf16():
    """torch's bf16 kernel rounds the exponent to bf16 first: 257.3 is 258, an even integer."""
    assert float(torch.tensor(257.3, dtype=torch.bfloat16)) == 258.0
    x = torch.tensor([-1.01, 1.01], dtype=torch.bfloat16)
    y, ref, _ = run_strict(lambda x: torch.pow(x * 1, 257.3), x)
    assert torch.equal(y, ref) and ref[0] > 0
    assert math.isfinite(float(ref[0]))


# -- where / masked_fill with a condition that broadcasts ----------------------------------


def _float_values(dtype, *vs) -> bool:
    return all(
        (isinstance(v, torch.Tensor) and v.dtype == dtype)
        or (isinstance(v, (int, float)) and not isinstance(v, bool))
        for v in vs
    )


@pytest.mark.parametrize("dn", sorted(DTYPES))
def test_where_opinfo_samples(dn):
    """torch.where(cond, x, y) (OpInfo's `where(self, cond, other)`): every sample whose values
    are tensors of the dtype or numbers, the broadcasting conditions included."""
    dt = DTYPES[dn]
    n = check_opinfo("where", dn, lambda s: _float_values(dt, s.input, s.args[1]))
    assert n >= 8


@pytest.mark.parametrize("dn", sorted(DTYPES))
def test_masked_fill_opinfo_samples(dn):
    dt = DTYPES[dn]
    assert check_opinfo("masked_fill", dn, lambda s: _float_values(dt, s.input, s.args[1])) >= 7


def _causal(s, t):
    return torch.ones(s, t, dtype=torch.bool).tril(t - s)


MASK_CASES = {
    # HF's eager attention: a [B, 1, S, T] bool mask against [B, H, S, T] scores
    "where_causal_heads": lambda x, m: torch.where(m, x * 2, torch.finfo(x.dtype).min),
    "masked_fill_causal_heads": lambda x, m: (x * 2).masked_fill(~m, float("-inf")).softmax(-1),
    # a mask built by a comparison on Legato, broadcast over the heads
    "where_compare_broadcast": lambda x, m: torch.where(x[:, :1] > 0.25, x, -x),
    # a 0-d tensor fill value
    "masked_fill_tensor_value": lambda x, m: (x + 1).masked_fill(m, x[0, 0, 0, 0]),
}


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(MASK_CASES))
def test_broadcast_mask_on_legato_equals_eager(name, dn):
    torch.manual_seed(0)
    dt = DTYPES[dn]
    x = torch.randn(2, 4, 8, 16, dtype=dt)
    m = _causal(8, 16)[None, None].expand(2, 1, 8, 16).clone()
    m[1, 0, :, :3] = False  # padding of the second sequence
    y, ref, s = run_strict(MASK_CASES[name], x, m)
    assert "broadcast to" in str(s), str(s)
    if name.startswith("masked_fill_causal"):  # a softmax follows: within its rounding
        rtol = 2**-7 if dt == torch.bfloat16 else 1e-5
        torch.testing.assert_close(y, ref, rtol=rtol, atol=rtol)
    else:  # a selection: the same bits
        assert torch.equal(y, ref)


# -- reductions over several (not all) dims --------------------------------------------------

_REDUCTIONS = {
    "sum": lambda x, d, k: torch.sum(x, d, keepdim=k),
    "mean": lambda x, d, k: torch.mean(x, d, keepdim=k),
    "amax": lambda x, d, k: torch.amax(x, d, keepdim=k),
    "amin": lambda x, d, k: torch.amin(x, d, keepdim=k),
}


def _several_dims(s):
    d = s.kwargs.get("dim", s.args[0] if s.args else None)
    rank = s.input.dim() if isinstance(s.input, torch.Tensor) else 0
    return isinstance(d, (list, tuple)) and 1 < len(set(x % rank for x in d)) < rank


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("op", sorted(_REDUCTIONS))
def test_reduction_opinfo_several_dims(op, dn):
    assert check_opinfo(op, dn, _several_dims) >= 1


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("keepdim", [False, True], ids=["nokeep", "keep"])
@pytest.mark.parametrize("dims", [(1, 3), (0, 2), (-1, -2), (1, 2), (3, 0, 1)], ids=str)
@pytest.mark.parametrize("op", sorted(_REDUCTIONS))
def test_reduction_over_several_dims(op, dims, keepdim, dn):
    torch.manual_seed(0)
    dt = DTYPES[dn]
    x = torch.randn(2, 3, 4, 5, dtype=dt) * 3
    x[1, 2, 3, 4] = -0.0 if op == "amax" else 40.0
    f = _REDUCTIONS[op]
    y, ref, s = run_strict(lambda x: f(x * 1, dims, keepdim), x)
    assert "over dims" in str(s), str(s)
    assert y.shape == ref.shape and y.dtype == ref.dtype
    if op in ("amax", "amin"):  # a selection: the same bits
        assert torch.equal(y, ref)
    else:  # one reduction, in another order than torch's: within its rounding
        rtol = 2**-7 if dt == torch.bfloat16 else 1e-5
        torch.testing.assert_close(y, ref, rtol=rtol, atol=rtol)


# -- bool kernel outputs: comparisons -------------------------------------------------------

_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("op", _COMPARISONS)
def test_comparison_opinfo_samples_give_bool_outputs(op, dn):
    """Every sample with operands of the dtype (a number, NaN and +-inf included): the bool
    result is the kernel's output (the float mask converted to i1 by vpu.cvt)."""
    dt = DTYPES[dn]
    assert check_opinfo(op, dn, lambda s: _float_values(dt, s.input, s.args[0])) >= 20


BOOL_CASES = {
    # one comparison: a where's condition on Legato and a bool output
    "where_and_output": lambda x, y: (torch.where(x < y, x, y), x < y),
    # a bool output that broadcasts its operands, and one against a number
    "broadcast_output": lambda x, y: ((x * 2) >= y[:1], (x + 1) != 1.0),
}


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(BOOL_CASES))
def test_bool_outputs_on_legato_equal_eager(name, dn):
    torch.manual_seed(0)
    dt = DTYPES[dn]
    x, y = torch.randn(8, 64, dtype=dt), torch.randn(8, 64, dtype=dt)
    x[0, :4] = torch.tensor([NAN, 1.0, -0.0, INF])
    y[0, :4] = torch.tensor([0.0, 1.0, 0.0, INF])
    ys, refs, s = run_strict(BOOL_CASES[name], x, y)
    assert "(bool)" in str(s), str(s)
    for a, r in zip(ys, refs, strict=True):
        assert a.dtype == r.dtype and torch.equal(a, r)


MUL_CASES = {
    # `x * (p < q)`: torch promotes the bool to 1.0 / 0.0; on Legato where(m, x, x * 0.0)
    "mul_and_bool_output": lambda x, y, m: ((x * 2) * (x < y), x < y),
    "mask_times_x_broadcast": lambda x, y, m: (y[:1] > 0) * (x + 1),
    "mul_by_a_bool_input": lambda x, y, m: (x + 1) * m,
}


@pytest.mark.parametrize("dn", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(MUL_CASES))
def test_mul_by_a_bool_on_legato_equals_eager(name, dn):
    """x * bool: the same bits as torch, inf * False = NaN and -x * False = -0.0 included."""
    dt = DTYPES[dn]
    x, y = torch.randn(8, 64, dtype=dt), torch.randn(8, 64, dtype=dt)
    x[0, :4] = torch.tensor([INF, -INF, NAN, -1.0])
    y[0, :4] = torch.tensor([INF, -INF, 0.0, -2.0])
    got, ref, s = run_strict(MUL_CASES[name], x, y, y < 0.5)
    assert "mul by a mask" in str(s), str(s)
    for a, r in zip(*((got, ref) if isinstance(ref, tuple) else ((got,), (ref,))), strict=True):
        assert a.dtype == r.dtype and torch.equal(a.isnan(), r.isnan())
        keep = ~r.isnan()
        assert torch.equal(a[keep], r[keep])
        if a.is_floating_point():
            assert torch.equal(torch.signbit(a[keep]), torch.signbit(r[keep]))
