"""MPU weights of single-core kernels prepared once per parameter version (issue 14): nn.Linear's
`t(W)` is not an eager node run per call (it split partitions and counted as extern), the
kernel module makes it from W on the first call and again only when W changes, and the
kernel loads it straight into mpu_buffer. Results match eager; DMA bytes per call are the
weight and the activations."""

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


def test_weight_read_twice_is_not_prepared():
    """W read by the transpose and by another op (tied weights): t(W) runs eagerly as
    before, the results still match."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(64, 128, dtype=torch.bfloat16))

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = w

        def forward(self, x):
            return torch.relu(x @ self.w.t()), self.w.sum(0)

    m = M()
    x = torch.randn(4, 128, dtype=torch.bfloat16)
    with torch.no_grad():
        ys = _compile(m)(x)
        refs = m(x)
    for y, ref in zip(ys, refs, strict=True):
        torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
    s = lt.last_summary()
    assert not any("prepared from" in n for k in s.kernels for n in k.nodes), str(s)


def test_transpose_feeding_an_eager_matmul_stays_on_the_host():
    """A Linear whose matmul runs eagerly (K = 320 chip_linear does not take, a weight one
    core cannot hold): its t(W) is not a Legato kernel of its own that copies the weight to
    the chip and back per call (it was 42k cycles here); it is an eager view, with its reason
    recorded. (The case was 512 -> 1024 at a row bound of 1024, which chip_linear now takes in
    chunks of rows.)"""
    torch.manual_seed(0)
    lin = torch.nn.Linear(320, 4096, bias=False).bfloat16()

    def f(x):
        return lin(x)

    g = torch.compile(f, backend="legato", dynamic=True)
    with torch.no_grad():
        for m in (3, 5):
            x = torch.randn(m, 320, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=1024)
            torch.testing.assert_close(g(x), f(x), rtol=0, atol=0)
    s = lt.last_summary()
    assert any(e.op == "aten.mm.default" and "resolver refused" in e.reason for e in s.extern), s
    views = [e for e in s.extern if e.node.startswith("t")]
    assert s.num_kernels == 0, str(s)
    assert views and all("free on the host" in e.reason for e in views), str(s)
