"""The `lpu` torch device: tensors live on it, transfer to and from the CPU, ordinary torch ops
on them run as Legato kernels (one per op and signature, cached), ops Legato lacks fall back to
the CPU with one warning, and a tiny Llama moved there with Module.to("lpu") matches the CPU."""

import sys
import warnings
from pathlib import Path

import pytest
import torch

import legato.lpu as lpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "torch"))

BF16 = torch.bfloat16


@pytest.fixture(autouse=True)
def _fresh_stats():
    lpu.reset()
    yield


def test_tensors_live_on_lpu_and_round_trip_exactly():
    cpu = torch.randn(4, 8)
    x = cpu.to("lpu")
    assert x.device == torch.device("lpu", 0) and x.device.type == "lpu" and x.is_lpu
    assert x.shape == cpu.shape and x.dtype == cpu.dtype
    torch.testing.assert_close(x.cpu(), cpu, rtol=0, atol=0)
    assert x.cpu().device.type == "cpu"
    y = torch.randn(3, 5, device="lpu", dtype=BF16)
    assert y.device.type == "lpu" and y.dtype == BF16 and y.shape == (3, 5)
    z = torch.zeros(2, 2, device="lpu")
    torch.testing.assert_close(z.cpu(), torch.zeros(2, 2), rtol=0, atol=0)
    t = torch.tensor([1.0, 2.0], device="lpu")
    assert t.device.type == "lpu" and t.cpu().tolist() == [1.0, 2.0]
    like = torch.zeros_like(x)
    assert like.device.type == "lpu" and not like.cpu().any()
    assert "device='lpu:0'" in repr(x)
    with pytest.raises(TypeError, match=r"can't convert lpu:0 .* Use Tensor.cpu\(\)"):
        x.numpy()
    assert x.to("lpu") is x  # already there: no copy, as on CUDA
    # transfers and fills are host writes: no kernel, no CPU fallback
    assert lpu.stats().kernel_calls == 0 and not lpu.stats().cpu_ops, str(lpu.stats())


def test_ops_run_as_legato_kernels_and_match_the_cpu():
    a, w = torch.randn(8, 64), torch.randn(64, 32)
    x, wl = a.to("lpu"), w.to("lpu")
    y = torch.softmax(x @ wl * 0.5 + 1.0, dim=-1)
    assert y.device.type == "lpu"
    ref = torch.softmax(a @ w * 0.5 + 1.0, dim=-1)
    torch.testing.assert_close(y.cpu(), ref, rtol=1e-4, atol=1e-5)
    s = lpu.stats()
    for op in ("aten.mm.default", "aten._softmax.default", "aten.mul.Tensor", "aten.add.Tensor"):
        assert s.legato_ops[op] == 1, str(s)
    assert s.kernel_calls == 4 and not s.cpu_ops and s.cycles > 0, str(s)


def test_one_kernel_per_op_and_signature_cached():
    x = torch.randn(4, 16, device="lpu")
    torch.exp(x)
    before = lpu.stats().kernels_compiled
    assert before >= 1
    for _ in range(2):
        torch.exp(torch.randn(4, 16, device="lpu"))  # same op, same shape: the cached kernel
    assert lpu.stats().kernels_compiled == before
    assert lpu.stats().legato_ops["aten.exp.default"] == 3
    torch.exp(torch.randn(2, 16, device="lpu"))  # a new shape: a new kernel
    assert lpu.stats().kernels_compiled == before + 1


def test_views_are_metadata_and_share_device_memory():
    cpu = torch.randn(4, 6)
    x = cpu.to("lpu")
    v = x.t()[1:3]
    assert v.device.type == "lpu" and v.shape == (2, 4) and v.stride() == cpu.t()[1:3].stride()
    assert lpu.stats().kernel_calls == 0
    v.mul_(2.0)  # in place through a view: the kernel's result written into x's memory
    expect = cpu.clone()
    expect.t()[1:3] *= 2.0
    torch.testing.assert_close(x.cpu(), expect)
    assert lpu.stats().legato_ops["aten.mul.Tensor"] == 1, str(lpu.stats())
    x.add_(1.0)
    torch.testing.assert_close(x.cpu(), expect + 1.0)
    assert x[0, 0].item() == pytest.approx(float(expect[0, 0] + 1.0))


def test_an_op_without_legato_falls_back_to_the_cpu_with_one_warning():
    cpu = torch.randn(6, 6)
    x = cpu.to("lpu")
    with pytest.warns(UserWarning, match=r"'aten.tril.default' .* falls back to run on the CPU"):
        y = torch.tril(x)
    assert y.device.type == "lpu"
    torch.testing.assert_close(y.cpu(), torch.tril(cpu), rtol=0, atol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time: no warning
        torch.tril(x)
    s = lpu.stats()
    assert s.cpu_ops["aten.tril.default"] == 2 and "aten.tril.default" in s.cpu_reasons
    assert "cpu    aten.tril.default: 2 call(s)" in str(s)


def test_the_warning_names_the_users_line():
    x = torch.randn(3, 3, device="lpu")
    with pytest.warns(UserWarning) as got:
        torch.triu(x)
    assert got[0].filename == __file__


def _device_tiny_llama():
    """The tiny Llama of the torch tests, its positions made on the device of its inputs (as
    a model written for CUDA does: CPU and lpu operands do not mix)."""
    from test_decoder import TinyLlama

    class DeviceTinyLlama(TinyLlama):
        def forward(self, ids):
            s = ids.shape[1]
            pos = torch.arange(s, dtype=torch.float32, device=ids.device)
            f = pos[:, None] * self.inv_freq[None, :]
            emb = torch.cat((f, f), dim=-1)
            cos, sin = emb.cos().to(BF16), emb.sin().to(BF16)
            x = self.emb(ids)
            for blk in self.blocks:
                x = blk(x, cos, sin)
            return self.head(self.norm(x))

    return DeviceTinyLlama()


def test_module_to_lpu_tiny_llama_matches_cpu():
    torch.manual_seed(0)
    model = _device_tiny_llama().eval()
    ids = torch.randint(0, 256, (1, 12))
    with torch.no_grad():
        ref = model(ids)
        m = model.to("lpu")
        assert all(p.device.type == "lpu" for p in m.parameters())
        y = m(ids.to("lpu"))
        assert y.device.type == "lpu"
        again = m(ids.to("lpu"))
    # bf16 tolerance relative to the logits' scale, as the torch.compile test of this model
    for out in (y, again):
        torch.testing.assert_close(
            out.cpu().float(), ref.float(), rtol=1.6e-2, atol=1.6e-2 * ref.abs().max().item()
        )
    s = lpu.stats()
    for op in ("aten.mm.default", "aten.bmm.default", "aten.embedding.default"):
        assert s.legato_ops[op] > 0, str(s)
    legato_calls = sum(s.legato_ops.values())
    assert legato_calls > 10 * sum(s.cpu_ops.values()), str(s)


def test_target_is_a_legato_device_and_evt1_runs():
    from legato.errors import LegatoError

    with pytest.raises(LegatoError, match=r"set_target\('cuda'\): not a Legato device"):
        lpu.set_target("cuda")
    cpu = torch.randn(4, 32)
    try:
        lpu.set_target("bertha-evt1")
        y = torch.tanh(cpu.to("lpu"))
    finally:
        lpu.set_target("bertha")
    torch.testing.assert_close(y.cpu(), torch.tanh(cpu), rtol=1e-5, atol=1e-6)
    assert lpu.stats().legato_ops["aten.tanh.default"] == 1
