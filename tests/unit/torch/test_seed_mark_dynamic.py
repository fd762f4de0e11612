"""The seed's line `torch._dynamo.mark_dynamic(x, 0, max=128)` works on torch 2.13 once legato
is loaded (fresh processes: the backport patches torch's function)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_seed_line_after_import_legato():
    r = _run("""
        import torch
        import legato
        x = torch.zeros(16, 32, 32)
        torch._dynamo.mark_dynamic(x, 0, max=128)  # dim 0 dynamic, upper bound 128
        (rng,) = x._dynamo_dynamic_range
        print(rng.min, rng.max)
        f = torch.compile(lambda t: t * 2, backend="eager")
        print(tuple(f(x).shape))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "128", "(16,", "32,", "32)"]


def test_seed_line_with_the_legato_backend_bounds_the_dim():
    r = _run("""
        import torch
        import legato
        f = torch.compile(lambda t: t * 2, backend="legato", options={"legato.device": "bertha"})
        for n in (16, 40):
            x = torch.randn(n, 32).bfloat16()
            torch._dynamo.mark_dynamic(x, 0, max=128)
            with torch.no_grad():
                y = f(x)
            assert torch.equal(y, x * 2), n
        s = legato.torch.last_summary()
        print(s.kernels and "kernels" or "none")
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "kernels" in r.stdout


def test_calls_with_min_or_without_max_are_unchanged():
    r = _run("""
        import torch
        import legato
        x = torch.zeros(16, 8)
        torch._dynamo.mark_dynamic(x, 0, min=4, max=64)
        torch._dynamo.mark_dynamic(x, 1)
        print(sorted((d.dim, d.min, d.max) for d in x._dynamo_dynamic_range))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[(0, 4, 64), (1, None, None)]"
