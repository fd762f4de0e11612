"""Slices that compute nothing (issue 13's decode graphs): an empty operand of a `cat` (Phi-3's
`q[..., rotary_dim:]` when the rotary covers the whole head; the empty tensor a DynamicCache
starts with) is dropped from the cat with its producer, so it neither runs eagerly nor splits
the kernel around it; a slice that keeps all of a dynamic dim (Gemma2's sliding window
`k[:, :, -w:]` of a cache dynamo guards to be at most w long) is the same tensor. Compared with
eager exactly (both move bits)."""

import pytest
import torch

import legato.torch as lt

DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


def rotary_like(x):
    rot, rest = x[..., :16], x[..., 16:]  # rest is empty: the rotary covers the head
    return torch.cat((rot * 2, rest), -1) + 1


@pytest.mark.parametrize("dn", sorted(DTYPES))
def test_empty_cat_operand_is_dropped(dn):
    x = torch.randn(1, 4, 3, 16, dtype=DTYPES[dn])
    g = torch.compile(rotary_like, backend="legato", options={"legato.strict": True})
    with torch.no_grad():
        assert torch.equal(g(x), rotary_like(x))
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    assert s.node_share == 1.0, str(s)


def test_empty_operand_of_another_dtype_is_kept():
    """torch promotes over every cat operand, the empty ones too: such an operand stays."""
    f = lambda x, e: torch.cat((x * 2, e), -1)  # noqa: E731 - a test case
    x, e = torch.randn(2, 8, dtype=torch.bfloat16), torch.zeros(2, 0)
    g = torch.compile(f, backend="legato")
    with torch.no_grad():
        y = g(x, e)
    assert y.dtype == torch.float32 and torch.equal(y, f(x, e))


def window(k):
    return k[:, :, -63:] * 2


@pytest.mark.parametrize("dn", sorted(DTYPES))
def test_slice_of_a_whole_dynamic_dim_runs_on_legato(dn):
    g = torch.compile(window, backend="legato", options={"legato.strict": True})
    with torch.no_grad():
        for n in (5, 7, 9):  # the second makes the length dynamic
            k = torch.randn(1, 2, n, 16, dtype=DTYPES[dn])
            assert torch.equal(g(k), window(k))
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    assert "whole dynamic dim" in str(s), str(s)
    assert all(k.calls == 2 for k in s.kernels), str(s)


def test_part_of_a_dynamic_dim_runs_eagerly():
    f = lambda k: k[:, 1:] * 2  # noqa: E731 - a test case
    g = torch.compile(f, backend="legato")
    with torch.no_grad():
        for n in (5, 7):
            k = torch.randn(2, n, 8)
            assert torch.equal(g(k), f(k))
    s = lt.last_summary()
    assert any("not all of it" in e.reason for e in s.extern), str(s)
