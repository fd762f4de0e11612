"""Small work fused into the all-core kernels (issue 14): the single-core segments between
chip-scale (spmd) nodes are merged into as few kernels as their dependencies allow, an
RMSNorm before a projection runs as its prologue on every core, elementwise work after it
(a residual add, SiLU(gate) * up) as its epilogue on each block of the result. Results match
eager (bf16 and f32); every core of a fused kernel executes instructions."""

import pytest
import torch

import legato
import legato.torch as lt
from legato.torch import wrapper
from tests.unit.torch.test_chip_plumbing import spmd_mm_wt as toy_mm
from tests.unit.torch.torch_backend_helpers import assert_close_bf16


def _norm(x, w):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)


class Block(torch.nn.Module):
    """A decode MLP block: RMSNorm, gate/up, SiLU(gate) * up, down, residual."""

    def __init__(self, hidden=512, ffn=1024):
        super().__init__()
        self.w = torch.nn.Parameter(1 + torch.randn(hidden) / 8)
        self.gate = torch.nn.Linear(hidden, ffn, bias=False)
        self.up = torch.nn.Linear(hidden, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        h = _norm(x, self.w)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def _compile(mod, device="bertha"):
    return torch.compile(
        mod,
        backend="legato",
        options={"legato.device": device, "legato.strict": True, "legato.fuse_chains": False},
    )


def _check(y, ref):
    if y.dtype == torch.bfloat16:
        # a block's chain of roundings: within 2 bf16 ulps of the largest output
        assert_close_bf16(y, ref)
    else:
        torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def _every_core(mod, n=32):
    cores = {k: v for k, v in mod.kernel.last_run.instructions.items() if k.startswith("core")}
    assert len(cores) == n and all(v > 0 for v in cores.values()), cores


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_mlp_block_is_two_all_core_kernels(dtype):
    """norm -> gate and up in one kernel (norm as its prologue, SiLU(gate) * up as its
    epilogue), down (the residual as its epilogue): 2 kernels, all on every core, no
    single-core kernel left."""
    torch.manual_seed(0)
    mod = Block().to(dtype)
    x = torch.randn(1, 512, dtype=dtype)
    with torch.no_grad():
        y = _compile(mod)(x)
        ref = mod(x)
    _check(y, ref)
    s = lt.last_summary()
    assert s.num_kernels == 2 and s.num_extern == 0, str(s)
    mods = wrapper.last_wrapper().kernel_modules()
    assert all(m.gen.spmd for m in mods), [m.gen.source for m in mods]
    for m in mods:
        _every_core(m)
    gate_up, down = mods
    labels = [" ".join(m.info.nodes) for m in mods]
    assert "rsqrt" in labels[0] and "2 projections" in labels[0], labels
    assert "silu" in labels[0] and "mul" in labels[0], labels
    assert "add" in labels[1], labels
    # the epilogues are functions the projection calls per block; the prologue runs on every
    # core, and the normalized row is read by no other kernel (not written)
    assert "def epi_" in gate_up.gen.source and "def epi_" in down.gen.source
    assert "for _ in range(legato.core_id(), 1, device.num_cores):" not in gate_up.gen.source


def test_epilogue_operand_broadcasts_over_rows():
    """y = lin(x) * s + b with s [N] and b [1, N] (sliced per block) and M = 4 rows."""
    torch.manual_seed(0)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(512, 512, bias=True)
            self.s = torch.nn.Parameter(torch.randn(512))
            self.b = torch.nn.Parameter(torch.randn(1, 512))

        def forward(self, x):
            return torch.relu(self.lin(x) * self.s + self.b)

    mod = M().bfloat16()
    x = torch.randn(4, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y = _compile(mod, "bertha-evt1")(x)
        ref = mod(x)
    _check(y, ref)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert k.gen.spmd and "def epi_" in k.gen.source
    _every_core(k, 64)


def test_projection_result_used_by_the_epilogue_and_after():
    """lin(x) leaves the kernel too (returned): the epilogue writes it besides its own result."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 512, bias=False).bfloat16()

    def f(x, r):
        y = lin(x)
        return y, y + r

    x, r = torch.randn(1, 512, dtype=torch.bfloat16), torch.randn(1, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y, z = _compile(f)(x, r)
        ry, rz = f(x, r)
    assert_close_bf16(y, ry)
    assert_close_bf16(z, rz)
    # the epilogue adds r to the very block it writes as y
    torch.testing.assert_close(z, y + r, rtol=0, atol=0)
    assert lt.last_summary().num_kernels == 1, str(lt.last_summary())


def _spmd_kernels(f) -> list[bool]:
    """Compile f on x [1, 512] bf16, check it against eager; per kernel: is it all-core."""
    x = torch.randn(1, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y = _compile(f)(x)
        ref = f(x)
    assert_close_bf16(y, ref)
    return [m.gen.spmd for m in wrapper.last_wrapper().kernel_modules()]


def test_small_segments_between_projections_merge():
    """Views of q and k computed after each projection but needed only at the end run in one
    single-core kernel, not one after each projection. (Of different widths: projections of
    one input to the same width would share one kernel, test_chip_group.py.)"""
    torch.manual_seed(0)
    q = torch.nn.Linear(512, 512, bias=False).bfloat16()
    k = torch.nn.Linear(512, 256, bias=False).bfloat16()

    def f(x):
        a = q(x).view(1, 4, 128).transpose(0, 1)
        b = k(x).view(1, 2, 128).transpose(0, 1)
        return (a[:2] * b).sum(-1)

    assert _spmd_kernels(f) == [True, True, False]


def test_reduction_is_not_an_epilogue():
    """A row reduction of the projection's result (softmax) is not elementwise: its own kernel."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 512, bias=False).bfloat16()

    def f(x):
        return torch.softmax(lin(x), -1)

    assert _spmd_kernels(f) == [True, False]


@legato.function
def _dram_only_mm(x, wt, out):
    assert x.memory == "shared_dram", "this toy takes x from shared DRAM only"
    toy_mm(x, wt, out)


def test_fused_kernel_that_fails_compiles_its_work_apart():
    """An spmd implementation that claims to take an on-chip operand (`Impl.values`) but loads
    it from shared DRAM anyway fails to compile with its prologue: the prologue becomes its own
    kernel again and the spmd kernel compiles alone (a warning, not an eager fallback)."""
    from legato.torch import registry
    from tests.unit.torch import test_chip_plumbing as toy

    def resolver(node, ctx):
        impl = toy._mm_resolver(node, ctx)
        return registry.Impl(_dram_only_mm, impl.args, spmd=True, values=frozenset({0}))

    r = registry.register(torch.ops.aten.mm.default, resolver)
    try:
        lin = torch.nn.Linear(128, 256, bias=False)

        def f(x):
            return lin(torch.relu(x))

        x = torch.randn(4, 128)
        with torch.no_grad():
            y = torch.compile(f, backend="legato")(x)
        torch.testing.assert_close(y, f(x), rtol=1e-2, atol=1e-2)
        s = lt.last_summary()
        assert s.num_kernels == 2 and s.num_extern == 0, str(s)
        mods = wrapper.last_wrapper().kernel_modules()
        assert [m.gen.spmd for m in mods] == [False, True]
    finally:
        registry.unregister(torch.ops.aten.mm.default, r)


def test_epilogue_through_views():
    """Hugging Face's shape: x [1, 1, H] viewed to [1, H] for the projection and its result
    viewed back to [1, 1, N] before the residual add: the views are part of the epilogue."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 512, bias=False).bfloat16()

    def f(x, r):
        return r + torch.nn.functional.silu(lin(x))

    x = torch.randn(1, 1, 512, dtype=torch.bfloat16)
    r = torch.randn(1, 1, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y = _compile(f)(x, r)
        ref = f(x, r)
    assert_close_bf16(y, ref)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert "def epi_" in k.gen.source, k.gen.source
    _every_core(k)
