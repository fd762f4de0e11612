"""Helpers of the legato torch backend tests."""

import torch


def assert_close_bf16(actual, expected, ulps=2.0):
    """Within `ulps` bf16 ulps of eager (relative to max(|expected|, 1/64))."""
    a, e = actual.float(), expected.float()
    assert a.shape == e.shape, (a.shape, e.shape)
    tol = ulps * torch.finfo(torch.bfloat16).eps * e.abs().clamp_min(1 / 64)
    bad = (a - e).abs() > tol
    assert not bad.any(), (
        f"{int(bad.sum())} element(s) differ from eager; max |diff| "
        f"{(a - e).abs().max().item():.4g}"
    )


def compile_dynamic_strict(mod):
    """`mod` through the backend on EVT0 with a dynamic batch (torch.compile's dynamic=True),
    strict: a kernel that fails to compile raises instead of running eagerly."""
    return torch.compile(
        mod,
        backend="legato",
        dynamic=True,
        options={"legato.device": "bertha", "legato.strict": True},
    )


def check_close(y, ref):
    """bf16: `assert_close_bf16`; f32: 1e-4 relative, and 1e-4 of the largest |ref|."""
    if y.dtype == torch.bfloat16:
        assert_close_bf16(y, ref)
    else:
        torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def run_case_strict(cases, name, dtype, op_pattern):
    """Runs case `name` of `cases` ({name: (f, make_args(dtype), op)}) through the backend in
    strict mode and eagerly; asserts that nothing ran extern and that an `aten.<op>` overload
    matching `op_pattern.format(op=op)` (a regex) ran on Legato. Returns (result, eager)."""
    import re

    import legato.torch as lt

    torch.manual_seed(0)
    f, make, op = cases[name]
    args = make(dtype)
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options={"legato.strict": True})(*args)
        ref = f(*args)
    s = lt.last_summary()
    assert s.num_extern == 0, str(s)
    # the op itself ran on Legato (not a decomposition into other ops)
    assert re.search(op_pattern.format(op=op), str(s)), str(s)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    return y, ref
