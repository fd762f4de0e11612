"""nn.Linear and a small MLP through torch.compile with a runtime token count (issue 14 item 1):
chip_linear's decode form takes a dynamic M bounded by the dim's bound (one compiled kernel for
every M, the column slabs of x and of the output moved by dma2d over a runtime row count), the
results match eager for several M within the bound, and the linear ran on Legato (all cores, no
eager fallback)."""

import pytest
import torch

import legato.torch as lt
from legato.torch import wrapper
from tests.unit.torch.torch_backend_helpers import assert_close_bf16

BOUND = 16


def _compile(mod):
    return torch.compile(
        mod,
        backend="legato",
        dynamic=True,
        options={"legato.device": "bertha", "legato.strict": True},
    )


def _check(y, ref):
    if y.dtype == torch.bfloat16:
        assert_close_bf16(y, ref)
    else:
        torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def _chip_kernels():
    """The kernel modules of the last compiled graph that run a chip_linear form."""
    return [
        m
        for m in wrapper.last_wrapper().kernel_modules()
        if "chip_linear" in " ".join(m.info.nodes)
    ]


@pytest.mark.parametrize(
    ("dtype", "bias", "n", "form"),
    [
        (torch.bfloat16, True, 512, "linear_cols(tn=16, split=1)"),
        (torch.bfloat16, False, 4096, "linear_cols(tn=128, split=1)"),
        (torch.float32, True, 1024, "linear_cols(tn=32, split=1)"),
    ],
)
def test_linear_runtime_rows(dtype, bias, n, form):
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, n, bias=bias).to(dtype)
    g = _compile(lin)
    kernels = set()
    with torch.no_grad():
        for m in (3, 2, BOUND, 7):  # (torch specializes M = 1: a static graph)
            x = torch.randn(m, 512, dtype=dtype)
            lt.mark_dynamic(x, 0, max=BOUND)
            y = g(x)
            _check(y, lin(x))
            s = lt.last_summary()
            assert s.num_extern == 0, str(s)
            (mod,) = _chip_kernels()
            assert form in " ".join(mod.info.nodes), mod.info.nodes
            assert "(-1, 16)" in mod.gen.source, mod.gen.source  # one kernel for every M
            cores = {
                k: v for k, v in mod.kernel.last_run.instructions.items() if k.startswith("core")
            }
            assert len(cores) == 32 and all(v > 0 for v in cores.values()), cores
            kernels.add(id(mod.kernel))
    assert len(kernels) == 1  # no recompilation per M


class _MLP(torch.nn.Module):
    """Llama's MLP: down(silu(gate(x)) * up(x)); gate and up are one grouped kernel."""

    def __init__(self, h, f):
        super().__init__()
        self.gate = torch.nn.Linear(h, f, bias=False)
        self.up = torch.nn.Linear(h, f, bias=False)
        self.down = torch.nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def test_mlp_runtime_rows():
    torch.manual_seed(0)
    mlp = _MLP(512, 1024).bfloat16()
    g = _compile(mlp)
    with torch.no_grad():
        for m in (5, 2, 12):
            x = torch.randn(m, 512, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=BOUND)
            _check(g(x), mlp(x))
            s = lt.last_summary()
            assert s.num_extern == 0, str(s)
            forms = [" ".join(m.info.nodes) for m in _chip_kernels()]
            assert len(forms) == 2, forms  # gate/up (with SiLU * up) and down
            assert any("2 projections" in f for f in forms), forms


@pytest.mark.parametrize(("n", "form"), [(16 * 35, "tn=16"), (128 * 33, "tn=128")])
def test_uneven_blocks_runtime_rows(n, form):
    """Column blocks that do not fall evenly on the cores (statically the tile-range form,
    whose scratch would need a runtime-row view): with a runtime M, rounds of 32 blocks, the
    cores past the last block redoing it; still every core, and the right result."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, n, bias=True).bfloat16()
    g = _compile(lin)
    with torch.no_grad():
        for m in (3, 9):
            x = torch.randn(m, 512, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=BOUND)
            _check(g(x), lin(x))
            assert lt.last_summary().num_extern == 0, str(lt.last_summary())
            (mod,) = _chip_kernels()
            assert f"linear_cols({form}, split=1)" in " ".join(mod.info.nodes), mod.info.nodes


def test_split_k_refuses_runtime_rows():
    """Fewer column blocks than half the cores (statically split-K): rounds would read the
    weight more than twice, so chip_linear refuses a runtime M (the node runs on the
    single-core path, still on Legato) and the result is right."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 128, bias=False).bfloat16()  # 8 blocks of 16 on 32 cores
    g = torch.compile(lin, backend="legato", dynamic=True, options={"legato.device": "bertha"})
    with torch.no_grad():
        x = torch.randn(3, 512, dtype=torch.bfloat16)
        lt.mark_dynamic(x, 0, max=BOUND)
        _check(g(x), lin(x))
    assert lt.last_summary().num_extern == 0, str(lt.last_summary())
    assert not _chip_kernels()
