"""A prepared MPU weight (nn.Linear's `t(W)`, made once per parameter version by the kernel
module: `wrapper._prepared`) travels with its matmul when the graph is cut around chip-scale
nodes (issue 13). The case is a decode step with a runtime KV length: the KV `cat`s and the
attention are all-core kernels, single-core work runs before them (q * scale) and after them
(the output projection). The cut once put `t(W)` in the first single-core segment and its
matmul in the last, and `kernelgen.generate` raised `KeyError: t` (strict: a crash; default:
`t` eager for no good reason). A prepared step the splitter still leaves without its reader is
refused with its reason and runs eagerly, never a crash."""

import pytest
import torch
import torch.nn.functional as F

import legato.torch as lt
from legato.torch import wrapper

H, D = 4, 16


def _decode_step(dtype):
    torch.manual_seed(0)
    lin = torch.nn.Linear(H * D, 64, bias=False).to(dtype)

    def f(q, kc, vc, kn, vn):
        k = torch.cat([kc, kn], dim=2)
        v = torch.cat([vc, vn], dim=2)
        a = F.scaled_dot_product_attention(q * 0.5, k, v)
        return lin(a.transpose(1, 2).reshape(1, H * D)), k, v

    def args(length):
        one = [torch.randn(1, H, 1, D, dtype=dtype) for _ in range(3)]
        cached = [torch.randn(1, H, length, D, dtype=dtype) for _ in range(2)]
        return [one[0], *cached, *one[1:]]

    return f, args


def _check(ys, refs, dtype):
    for y, ref in zip(ys, refs, strict=True):
        if dtype == torch.bfloat16:
            torch.testing.assert_close(y.float(), ref.float(), rtol=2**-7, atol=2**-7)
        else:
            torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_prepared_weight_stays_with_its_matmul(dtype):
    f, args = _decode_step(dtype)
    g = torch.compile(f, backend="legato", options={"legato.strict": True})
    with torch.no_grad():
        for length in (5, 6, 7):  # the second length makes it dynamic
            a = args(length)
            _check(g(*a), f(*a), dtype)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.matmul_flop_share == 1.0, str(s)
    kernels = wrapper.last_wrapper().kernel_modules()
    assert any("runtime KV length" in n for k in kernels for n in k.info.nodes), str(s)
    assert all(k.calls == 2 and k.eager_calls == 0 for k in s.kernels), str(s)
    if dtype == torch.float32:
        return  # the f32 matmul takes its weight from sram (split into bf16 halves): no prep
    # the all-core nodes split the graph into several kernels; t(W) is in the matmul's
    (k,) = [k for k in kernels if any("prepared from" in n for n in k.info.nodes)]
    assert any(n.startswith("mm:") for n in k.info.nodes), k.info.nodes


def test_prepared_weight_cut_from_its_reader_runs_eagerly(monkeypatch, tmp_path):
    """If the splitter left a prepared step without its reader (simulated: the splitter does
    not know it is one), the step is refused with its reason and runs eagerly (a log warning);
    strict mode raises that reason, not a KeyError."""
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wrapper, "_prepared_reader", lambda node, decisions: None)
    dtype = torch.bfloat16
    f, args = _decode_step(dtype)
    g = torch.compile(f, backend="legato")
    with torch.no_grad():
        for length in (5, 6):
            a = args(length)
            _check(g(*a), f(*a), dtype)
    s = lt.last_summary()
    (t,) = [e for e in s.extern if e.op == "aten.t.default"]
    assert "prepared once per parameter version is read by mm in another kernel" in t.reason, t
    assert s.matmul_flop_share == 1.0, str(s)
    torch._dynamo.reset()
    g = torch.compile(f, backend="legato", options={"legato.strict": True})
    with torch.no_grad(), pytest.raises(Exception, match="prepared once per parameter version"):
        for length in (5, 6):
            g(*args(length))


def test_runtime_kv_length_bounded_below_a_torch_block():
    """A runtime KV length whose bound is below torch's 512-key block (a sliding window's
    slice of the cache, here `legato.max_dynamic_dim`): the attention's KV tile is capped at the
    bound (it was 512 keys: `offset + size 512 exceeds the bound`, the kernel failed)."""
    dtype = torch.bfloat16
    f, args = _decode_step(dtype)
    opts = {"legato.strict": True, "legato.max_dynamic_dim": 48}
    g = torch.compile(f, backend="legato", options=opts)
    with torch.no_grad():
        for length in (5, 6, 47):
            a = args(length)
            _check(g(*a), f(*a), dtype)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.matmul_flop_share == 1.0, str(s)
    assert any("runtime KV length" in n for k in s.kernels for n in k.nodes), str(s)
