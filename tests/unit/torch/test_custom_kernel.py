"""The seed's custom_kernel, with a real body: between eager torch ops, and inside a
torch.compile'd function (as the custom op legato::custom_kernel, no graph break)."""

import torch
import torch.nn.functional as F
from torch_backend_helpers import assert_close_bf16

import legato
import legato.torch as lt

BF16 = torch.bfloat16


@legato.compile(backend="bertha")
def custom_kernel(
    input: legato.get_model().tensor_type(
        legato.types.float("bfloat16"), ((-1, 10), 256), "shared_dram"
    ),
    output: legato.get_model().tensor_type(
        legato.types.float("bfloat16"), ((-1, 10), 256), "shared_dram"
    ),
):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(input, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(input, 0, "sram")
        legato.tensor.memcpy(output, legato.tensor.silu(x) * 2.0)


def reference(a, b):
    return torch.exp(F.silu(a + b) * 2.0)


def test_between_eager_torch_ops():
    a, b = torch.randn(7, 256, dtype=BF16), torch.randn(7, 256, dtype=BF16)
    c = torch.add(a, b)
    out = torch.zeros(7, 256, dtype=BF16)
    custom_kernel(c, out)
    assert custom_kernel.last_run.cycles > 0
    assert_close_bf16(torch.exp(out), reference(a, b))


def test_inside_torch_compile_without_graph_break():
    op = lt.custom_op(custom_kernel)

    def f(a, b):
        c = torch.add(a, b)
        out = torch.zeros_like(c)
        op(c, out)
        return torch.exp(out)

    a, b = torch.randn(10, 256, dtype=BF16), torch.randn(10, 256, dtype=BF16)
    assert_close_bf16(f(a, b), reference(a, b))  # eager, through the op
    with torch.no_grad():
        y = torch.compile(f, backend="legato", fullgraph=True)(a, b)  # fullgraph: no break
    assert_close_bf16(y, reference(a, b))
    s = lt.last_summary()
    assert s.num_kernels == 2, str(s)  # add, exp
    reasons = {e.op: e.reason for e in s.extern}
    assert set(reasons) == {"aten.zeros_like.default", "auto_functionalized_v2"}, str(s)
    assert "custom Legato kernel legato::custom_kernel" in reasons["auto_functionalized_v2"]
