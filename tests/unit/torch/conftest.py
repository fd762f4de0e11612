"""Fixtures of the legato torch backend tests."""

import os

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _legato_cache(tmp_path_factory):
    """One JIT cache for the session (probes and kernels compile once), never ~/.cache."""
    old = os.environ.get("LEGATO_CACHE_DIR")
    os.environ["LEGATO_CACHE_DIR"] = str(tmp_path_factory.mktemp("legato-cache"))
    yield
    if old is None:
        os.environ.pop("LEGATO_CACHE_DIR", None)
    else:
        os.environ["LEGATO_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


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
