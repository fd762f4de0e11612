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
