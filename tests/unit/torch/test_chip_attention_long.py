"""Decode attention over a long KV cache (issue 14): past what one core's SRAM holds for its
chunk of keys (about 2000 cached tokens per core at head dim 128), each core streams its chunk
KV block by KV block (torch's 512-key blocks) with the online softmax, instead of refusing.
Through torch.compile, against eager, at 4096 cached tokens: the attention alone and with the
KV cache's append (`cat`) fused, bf16 and f32; every core runs."""

import pytest
import torch
import torch.nn.functional as F
from torch_backend_helpers import assert_close_bf16

import legato.torch as lt
from legato.torch import wrapper

L = 4096


def _compile_run(fn, *args):
    g = torch.compile(fn, backend="legato", options={"legato.strict": True})
    with torch.no_grad():
        got = g(*args)
        ref = fn(*args)
    s = lt.last_summary()
    assert s.num_extern == 0, str(s)
    mods = [m for m in wrapper.last_wrapper().kernel_modules() if m.gen.spmd]
    assert mods, str(s)
    for m in mods:
        ins = {k: v for k, v in m.kernel.last_run.instructions.items() if k.startswith("core")}
        assert len(ins) == 32 and all(v > 0 for v in ins.values()), (m.gen.name, ins)
    return got, ref, str(s)


def _close(a, b):
    if a.dtype == torch.bfloat16:
        assert_close_bf16(a, b)
    else:
        assert (a - b).abs().max() <= 1e-5 * b.abs().max()


@pytest.mark.parametrize(
    ("dtype", "heads", "hd"), [(torch.bfloat16, 16, 128), (torch.float32, 16, 64)]
)
def test_decode_attention_streams_a_long_cache(dtype, heads, hd):
    """16 KV groups on 32 cores: 2 cores per group, 2048 keys each (K and V over 1 MiB in bf16
    at head dim 128): streamed."""
    torch.manual_seed(0)
    q = torch.randn(1, heads, 1, hd, dtype=dtype)
    k = torch.randn(1, heads, L, hd, dtype=dtype)
    v = torch.randn(1, heads, L, hd, dtype=dtype)

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    got, ref, summary = _compile_run(f, q, k, v)
    assert "streamed" in summary, summary
    _close(got, ref)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_decode_attention_with_append_streams_a_long_cache(dtype):
    """The decode step's append fused into the attention (`cat` of the new key and value):
    the cached rows streamed, each copied to the appended cache as it is read."""
    torch.manual_seed(0)
    heads, hd = 16, 128 if dtype == torch.bfloat16 else 64
    q = torch.randn(1, heads, 1, hd, dtype=dtype)
    kc = torch.randn(1, heads, L, hd, dtype=dtype)
    vc = torch.randn(1, heads, L, hd, dtype=dtype)
    kn = torch.randn(1, heads, 1, hd, dtype=dtype)
    vn = torch.randn(1, heads, 1, hd, dtype=dtype)

    def f(q, kc, vc, kn, vn):
        k = torch.cat([kc, kn], dim=-2)
        v = torch.cat([vc, vn], dim=-2)
        return F.scaled_dot_product_attention(q, k, v), k, v

    (o, k, v), (ro, rk, rv), summary = _compile_run(f, q, kc, vc, kn, vn)
    assert "KV append" in summary and "streamed" in summary, summary
    _close(o, ro)
    assert torch.equal(k, rk) and torch.equal(v, rv)
