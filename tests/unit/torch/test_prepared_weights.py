"""MPU weights of single-core kernels prepared once per parameter version (issue 14): nn.Linear's
`t(W)` is not an eager node run per call (it split partitions and counted as extern), the
kernel module makes it from W on the first call and again only when W changes, and the
kernel loads it straight into mpu_buffer. Results match eager; DMA bytes per call are the
weight and the activations."""

import pytest
import torch

import legato.torch as lt
from legato.torch import wrapper


def _compile(f):
    return torch.compile(f, backend="legato", options={"legato.strict": True})


def test_transpose_prepared_once_on_legato():
    torch.manual_seed(0)
    lin = torch.nn.Linear(128, 64, bias=False).bfloat16()

    def f(x):
        return torch.relu(lin(x)) * 2

    x = torch.randn(4, 128, dtype=torch.bfloat16)
    g = _compile(f)
    with torch.no_grad():
        g(x)
        y = g(x)
        ref = f(x)
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert any("prepared from" in n for n in k.info.nodes), k.info.nodes
    assert k.layout_count == 1
    # the weight, x and the result: nothing else moves
    assert k.kernel.last_run.dram_bytes == (128 * 64 + 4 * 128 + 4 * 64) * 2
    with torch.no_grad():
        lin.weight.mul_(-0.5)
        y = g(x)
        ref = f(x)
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
    assert k.layout_count == 2


DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


class Tied(torch.nn.Module):
    """An embedding whose table is also the LM head (GPT-2, OPT, Gemma): W is read by the
    embedding and, transposed, by the head's matmul."""

    def __init__(self, dtype):
        super().__init__()
        self.emb = torch.nn.Embedding(128, 64).to(dtype)

    def forward(self, ids):
        return (self.emb(ids) * 2) @ self.emb.weight.t()


@pytest.mark.parametrize("dn", sorted(DTYPES))
def test_tied_weight_transpose_is_prepared_once_on_the_host(dn):
    """The tied t(W) is made on the host once per parameter version and kept with the
    compiled graph (`wrapper.PreparedOnce`): not an eager transpose per call (bf16, where it
    counted as extern) nor an on-chip transpose of the whole weight per call (f32). DMA bytes
    per call: the weight once, the gathered rows, the ids and the logits."""
    torch.manual_seed(0)
    dtype = DTYPES[dn]
    m, ids = Tied(dtype), torch.randint(0, 128, (1, 8))
    g = _compile(m)
    with torch.no_grad():
        for _ in range(3):
            y = g(ids)
        ref = m(ids)
    rtol = 0 if dtype == torch.bfloat16 else 1e-5  # f32: the MPU's split bf16 products
    torch.testing.assert_close(y, ref, rtol=rtol, atol=rtol and 1e-3)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    assert any("prepared on the host once" in h for h in s.host), str(s)
    (k,) = s.kernels
    assert not any("transpose" in n for n in k.nodes), k.nodes
    w = wrapper.last_wrapper()
    (prep,) = [mod for mod in w.gm.modules() if isinstance(mod, wrapper.PreparedOnce)]
    assert prep.count == 1
    (km,) = w.kernel_modules()
    size = dtype.itemsize
    assert km.kernel.last_run.dram_bytes == 128 * 64 * size + 8 * 64 * size + 8 * 8 + 8 * 128 * size
    with torch.no_grad():
        m.emb.weight.mul_(-0.5)  # a new parameter version: made again
        y = g(ids)
        ref = m(ids)
    torch.testing.assert_close(y, ref, rtol=rtol, atol=rtol and 1e-3)
    assert prep.count == 2


def test_f32_linear_transpose_is_prepared_once_on_legato():
    """An f32 matmul reads its weight from sram: t(W) is prepared by the kernel module once per
    parameter version too, instead of an on-chip transpose per call."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(128, 64, bias=False)
    x = torch.randn(4, 128)
    g = _compile(lambda x: torch.relu(lin(x)) * 2)
    with torch.no_grad():
        g(x)
        y = g(x)
        ref = torch.relu(lin(x)) * 2
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-4)  # the MPU's split bf16 products
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert any("prepared from" in n for n in k.info.nodes), k.info.nodes
    assert k.layout_count == 1
    assert k.kernel.last_run.dram_bytes == (128 * 64 + 4 * 128 + 4 * 64) * 4


def test_transpose_feeding_an_eager_matmul_stays_on_the_host():
    """A linear whose matmul runs eagerly (its weight is a graph input of runtime width, which the
    MPU's laid-out weight cannot be): its t(W) is not a Legato kernel of its own that copies the
    weight to the chip and back per call (it was 42k cycles for a 320 x 4096 weight); it is an
    eager view, with its reason recorded. (The case was a Linear of a shape chip_linear refused,
    512 -> 1024 at a row bound of 1024 and then K = 320; it takes every static shape now: rows in
    chunks, K zero-padded.)"""
    torch.manual_seed(0)

    def f(x, w):
        return torch.nn.functional.linear(x, w)

    g = torch.compile(f, backend="legato", dynamic=True)
    with torch.no_grad():
        for n in (4096, 2048):
            x = torch.randn(3, 320, dtype=torch.bfloat16)
            w = torch.randn(n, 320, dtype=torch.bfloat16)
            lt.mark_dynamic(w, 0, max=8192)
            torch.testing.assert_close(g(x, w), f(x, w), rtol=0, atol=0)
    s = lt.last_summary()
    assert any(e.op == "aten.mm.default" and "resolver refused" in e.reason for e in s.extern), s
    views = [e for e in s.extern if e.node.startswith("t")]
    assert s.num_kernels == 0, str(s)
    assert views and all("free on the host" in e.reason for e in views), str(s)
