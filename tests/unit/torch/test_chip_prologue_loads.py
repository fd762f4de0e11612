"""A fused prologue issues every input's load before its first step (issue 14,
`kernelgen._prologue_lines`): loaded at first use, each load's DRAM latency followed the steps
before it (a decode layer's q/k/v rows, cos and sin: five latencies in a row)."""

import torch

from legato.torch import wrapper

BF16 = torch.bfloat16


class ScaledProjection(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(512, 1024, bias=False)

    def forward(self, x, s, t):
        return self.q(x * s + t)


def test_prologue_loads_come_before_its_steps():
    torch.manual_seed(0)
    mod = ScaledProjection().to(BF16)
    x, s, t = (torch.randn(1, 512, dtype=BF16) for _ in range(3))
    torch._dynamo.reset()
    with torch.no_grad():
        y = torch.compile(mod, backend="legato", options={"legato.strict": True})(x, s, t)
        ref = mod(x, s, t)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert k.gen.spmd
    body = k.gen.source.split("with device.get_all_cores():", 1)[1].splitlines()
    kinds = ["load" if "legato.tensor.load(" in ln else "step" for ln in body if "= " in ln]
    assert kinds[:3] == ["load"] * 3 and "load" not in kinds[3:], body
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)


class Residual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.o = torch.nn.Linear(512, 1024, bias=False)

    def forward(self, x, h):
        return h + self.o(x)


def test_small_epilogue_operands_are_loaded_before_the_call():
    # the residual row (2 KiB, `kernelgen.EPILOGUE_LOAD_BYTES`) is loaded whole by the kernel's
    # first lines and sliced on chip by the epilogue: loaded inside it, its DRAM latency
    # followed the projection's last weight tile on every core
    torch.manual_seed(1)
    mod = Residual().to(BF16)
    x, h = torch.randn(1, 512, dtype=BF16), torch.randn(1, 1024, dtype=BF16)
    torch._dynamo.reset()
    with torch.no_grad():
        y = torch.compile(mod, backend="legato", options={"legato.strict": True})(x, h)
        ref = mod(x, h)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert k.gen.spmd
    epi, body = k.gen.source.split("with device.get_all_cores():", 1)
    epi = epi.split("def epi_", 1)[1]
    assert "legato.tensor.load(" not in epi.split("@legato.compile", 1)[0], k.gen.source
    assert sum("legato.tensor.load(" in ln for ln in body.splitlines()) == 1, body
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
