"""bf16 `addmm(bias, x, t(W))` on one core sums the product and the bias in f32 and rounds once,
as torch's CPU addmm does. Computed as `x @ W + bias` in bf16 it rounded twice (the product,
then the sum): 1-2 bf16 ulps off eager on about a third of the elements, always farther from
the f32 result than eager. Now at most ~0.1% of the elements differ, by one ulp (where the two
f32 sums, in another order, straddle a bf16 rounding boundary), at a static and at a runtime
row count."""

import re

import pytest
import torch

import legato.torch as lt
from tests.unit.torch.torch_backend_helpers import assert_close_bf16, compile_dynamic_strict


def _rounded_once(y, ref):
    differ = int((y != ref).sum())
    assert differ <= max(1, ref.numel() // 500), f"{differ} of {ref.numel()} elements differ"
    assert_close_bf16(y, ref, ulps=1.0)


@pytest.mark.parametrize(("k", "n"), [(64, 128), (96, 40)])
def test_bf16_addmm_static_rounds_once(k, n):
    torch.manual_seed(0)
    lin = torch.nn.Linear(k, n).bfloat16()
    g = torch.compile(
        lin, backend="legato", options={"legato.device": "bertha", "legato.strict": True}
    )
    with torch.no_grad():
        x = torch.randn(7, k, dtype=torch.bfloat16)
        y, ref = g(x), lin(x)
    s = str(lt.last_summary())
    assert "aten.addmm_scaled" in s and lt.last_summary().num_extern == 0, s
    _rounded_once(y, ref)


def test_bf16_addmm_runtime_rows_round_once():
    torch.manual_seed(1)
    lin = torch.nn.Linear(64, 128).bfloat16()
    g = compile_dynamic_strict(lin)
    with torch.no_grad():
        for m in (3, 40, 17):
            x = torch.randn(m, 64, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=1024)
            y, ref = g(x), lin(x)
            assert lt.last_summary().num_extern == 0, str(lt.last_summary())
            _rounded_once(y, ref)


def test_f32_addmm_keeps_the_plain_form():
    """f32 has nothing to gain from the f32 sum: the plain `x @ W + bias` stays."""
    torch.manual_seed(2)
    lin = torch.nn.Linear(64, 48)
    g = torch.compile(
        lin, backend="legato", options={"legato.device": "bertha", "legato.strict": True}
    )
    with torch.no_grad():
        x = torch.randn(5, 64)
        y, ref = g(x), lin(x)
    s = str(lt.last_summary())
    assert re.search(r"library\.aten\.addmm$", s, re.M), s
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)
