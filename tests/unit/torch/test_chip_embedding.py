"""The embedding at chip scale (issue 14): a prefill's many rows are gathered on every core
(`aten.embedding_rows`, blocks of rows split across the cores), and a decode step's one row is
gathered in the prologue of the kernel that reads it (no kernel of its own). Checked against
eager: a gather copies rows, so the bits are equal."""

import pytest
import torch

import legato.torch as lt
from legato.torch import wrapper
from legato.torch.library import aten as lib

BF16 = torch.bfloat16


def _compile(mod, *args):
    torch._dynamo.reset()
    with torch.no_grad():
        return torch.compile(mod, backend="legato", options={"legato.strict": True})(*args)


def _cores(k) -> dict:
    ins = k.kernel.last_run.instructions
    return {c: n for c, n in ins.items() if c.startswith("core")}


@pytest.mark.parametrize("shape", [(1, 512), (2, 192)], ids=["1x512", "2x192"])
def test_prefill_embedding_gathers_on_every_core(shape, monkeypatch):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(4096, 512).to(BF16)
    ids = torch.randint(0, 4096, shape, generator=torch.Generator().manual_seed(1))
    y = _compile(emb, ids)
    (k,) = wrapper.last_wrapper().kernel_modules()
    cores = _cores(k)
    assert k.gen.spmd and len(cores) == 32 and min(cores.values()) > 0, cores
    with torch.no_grad():
        assert torch.equal(y, emb(ids))
    split = k.kernel.last_run.cycles
    monkeypatch.setattr(lib, "EMBEDDING_SPLIT_BYTES", 1 << 60)  # the single-core kernel
    one = _compile(emb, ids)
    (k1,) = wrapper.last_wrapper().kernel_modules()
    assert not k1.gen.spmd and torch.equal(one, y)
    assert split * 4 < k1.kernel.last_run.cycles, (split, k1.kernel.last_run.cycles)


class EmbedProject(torch.nn.Module):
    """A decode step's token: embedded, normalized and projected (a Llama's first layer)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(4096, 512)
        self.w = torch.nn.Parameter(1 + torch.randn(512) / 8)
        self.q = torch.nn.Linear(512, 1024, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        xf = x.float()
        x = self.w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)
        return self.q(x)


def test_decode_embedding_is_gathered_in_the_next_kernels_prologue():
    torch.manual_seed(2)
    mod = EmbedProject().to(BF16)
    ids = torch.tensor([[1234]])
    y = _compile(mod, ids)
    assert lt.last_summary().num_extern == 0
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert k.gen.spmd and any("embedding" in n for n in k.info.nodes), k.info.nodes
    assert min(_cores(k).values()) > 0
    with torch.no_grad():
        ref = mod(ids)
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
