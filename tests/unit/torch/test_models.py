"""Models compiled with the legato backend match eager; placement is asserted exactly."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch_backend_helpers import assert_close_bf16

import legato.torch as lt

BF16 = torch.bfloat16


class MLP(torch.nn.Module):
    """RMSNorm -> Linear(256->128) -> SiLU -> Linear(128->64, no bias) -> softmax."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.Parameter(torch.rand(256, dtype=BF16) + 0.5)
        self.up = torch.nn.Linear(256, 128, dtype=BF16)
        self.down = torch.nn.Linear(128, 64, bias=False, dtype=BF16)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm
        return torch.softmax(self.down(F.silu(self.up(h))), dim=-1)


def run(model, *xs, **options):
    compiled = torch.compile(model, backend="legato", options=options or None)
    with torch.no_grad():
        return compiled(*xs), model(*xs)


def test_matmul_weight_256x128():
    torch.manual_seed(0)
    W = torch.randn(256, 128, dtype=BF16)
    x = torch.randn(10, 256, dtype=BF16)
    y, ref = run(lambda x: x @ W, x)
    assert_close_bf16(y, ref)
    s = lt.last_summary()
    assert (s.num_kernels, s.num_extern) == (1, 0), str(s)
    assert s.kernels[0].last_cycles > 0


def test_mlp_is_one_kernel():
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(16, 256, dtype=BF16)
    y, ref = run(model, x)
    assert_close_bf16(y, ref, ulps=4)
    s = lt.last_summary()
    # everything: the two weight transposes of nn.Linear are prepared by the kernel module once
    # per parameter version (MPU weights come from outside the kernel)
    assert s.num_kernels == 1, str(s)
    assert s.num_extern == 0, str(s)
    assert sum("prepared from" in n for n in s.kernels[0].nodes) == 2, str(s)
    assert s.legato_nodes == 12


def test_f32_mm_runs_on_legato_split_into_bf16_halves():
    torch.manual_seed(2)
    W = torch.randn(256, 128)
    x = torch.randn(4, 256)
    y, ref = run(lambda x: torch.exp(x @ W * 0.01), x)
    # legato.numerics.matmul_f32_split: ~2^-16 relative, not bit-equal to torch's f32 matmul
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-5)
    s = lt.last_summary()
    assert (s.num_kernels, s.num_extern) == (1, 0), str(s)
    assert "aten.mm.default" in "\n".join(s.kernels[0].nodes)


def test_f16_mm_falls_back_with_the_resolvers_reason():
    W = torch.randn(64, 32, dtype=torch.float16)
    x = torch.randn(4, 64, dtype=torch.float16)
    y, ref = run(lambda x: x @ W, x)
    torch.testing.assert_close(y, ref)
    s = lt.last_summary()
    (mm,) = [e for e in s.extern if e.op == "aten.mm.default"]
    # (chip_linear's refusal comes first: it is asked first)
    assert mm.reason.startswith("resolver refused: "), mm.reason
    assert "the MPU multiplies bf16" in mm.reason, mm.reason


def test_weight_larger_than_the_mpu_tile_is_tiled():
    torch.manual_seed(3)
    W = torch.randn(384, 160, dtype=BF16)  # 2 K tiles x 2 N tiles, partial ones
    x = torch.randn(4, 384, dtype=BF16)
    y, ref = run(lambda x: x @ W, x)
    assert_close_bf16(y, ref)
    s = lt.last_summary()
    assert (s.num_kernels, s.num_extern) == (1, 0), str(s)


def test_weight_larger_than_the_mpu_buffer_falls_back():
    W = torch.randn(512, 512, dtype=BF16)  # 512 KiB > 256 KiB of mpu_buffer
    x = torch.randn(4, 512, dtype=BF16)
    y, ref = run(lambda x: x @ W, x)
    assert_close_bf16(y, ref)
    s = lt.last_summary()
    assert s.num_kernels == 0 and s.num_extern == 1
    assert "does not fit one core's mpu_buffer" in s.extern[0].reason


def test_dynamic_batch_bounded_by_mark_dynamic():
    torch.manual_seed(1)
    W = torch.randn(256, 128, dtype=BF16)

    def f(x):
        return F.gelu(x @ W) + 1.0

    g = torch.compile(f, backend="legato")
    first = None
    with torch.no_grad():
        for n in (10, 7, 128, 1):
            x = torch.randn(n, 256, dtype=BF16)
            lt.mark_dynamic(x, 0, max=128)
            assert_close_bf16(g(x), f(x))
            first = first or lt.last_summary()
    graphs = lt.summaries()[-2:]
    assert graphs[0] is first
    src = Path(first.kernels[0].source_path).read_text()
    assert "(-1, 128)" in src  # one kernel for 2..128
    assert first.kernels[0].calls == 3
    # size 1 is specialized by dynamo: its own static graph, one kernel
    assert graphs[1].num_kernels == 1 and graphs[1].kernels[0].calls == 1


def test_size_one_with_min_1_shares_the_dynamic_kernel():
    W = torch.randn(256, 128, dtype=BF16)
    g = torch.compile(lambda x: x @ W, backend="legato")
    n_before = len(lt.summaries())
    with torch.no_grad():
        for n in (1, 9):
            x = torch.randn(n, 256, dtype=BF16)
            lt.mark_dynamic(x, 0, min=1, max=64)
            assert_close_bf16(g(x), x @ W)
    assert len(lt.summaries()) == n_before + 1
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.kernels[0].calls == 2 and s.num_extern == 0, str(s)


def test_unbounded_dim_gets_the_assumed_bound_and_larger_calls_run_eagerly():
    W = torch.randn(256, 128, dtype=BF16)
    f = lambda x: x @ W
    x = torch.randn(6, 256, dtype=BF16)
    torch._dynamo.mark_dynamic(x, 0)  # dynamic, no max
    g = torch.compile(f, backend="legato", options={"legato.max_dynamic_dim": 32})
    with torch.no_grad():
        assert_close_bf16(g(x), f(x))
        s = lt.last_summary()
        assert (s.num_kernels, s.num_extern) == (1, 0), str(s)
        assert "(-1, 32)" in Path(s.kernels[0].source_path).read_text()
        big = torch.randn(40, 256, dtype=BF16)  # above the assumed bound: eager, no recompile
        assert_close_bf16(g(big), f(big))
    assert lt.last_summary() is s
    assert (s.kernels[0].calls, s.kernels[0].eager_calls) == (1, 1), str(s)
    assert "above the bound 32" in s.kernels[0].eager_reason
    with pytest.raises(Exception, match="above the bound 32"), torch.no_grad():
        torch._dynamo.reset()
        g = torch.compile(
            f, backend="legato", options={"legato.max_dynamic_dim": 32, "legato.strict": True}
        )
        g(x)
        g(big)


def test_unbounded_dim_without_an_assumed_bound_is_extern_or_a_strict_error():
    W = torch.randn(256, 128, dtype=BF16)
    x = torch.randn(6, 256, dtype=BF16)
    torch._dynamo.mark_dynamic(x, 0)  # dynamic, no max
    g = torch.compile(lambda x: x @ W, backend="legato", options={"legato.max_dynamic_dim": None})
    with torch.no_grad():
        assert_close_bf16(g(x), x @ W)
    s = lt.last_summary()
    assert s.num_kernels == 0 and "no upper bound" in s.extern[0].reason
    torch._dynamo.reset()
    g = torch.compile(
        lambda x: x @ W,
        backend="legato",
        options={"legato.max_dynamic_dim": None, "legato.strict": True},
    )
    with pytest.raises(Exception, match="no upper bound"), torch.no_grad():
        g(x)


def test_evt1_device():
    torch.manual_seed(2)
    model = MLP()
    x = torch.randn(4, 256, dtype=BF16)
    y, ref = run(model, x, **{"legato.device": "bertha-evt1"})
    assert_close_bf16(y, ref, ulps=4)
    s = lt.last_summary()
    assert s.device == "bertha-evt1" and s.num_kernels == 1
