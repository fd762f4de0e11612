"""nn.Linear and a small MLP through torch.compile with a runtime token count (issue 14 item 1):
chip_linear's decode forms (one block per core, rounds, tile ranges, split-K, grouped) take a
dynamic M bounded by the dim's bound (one compiled kernel for every M, the column slabs of x and
of the output moved by dma2d over a runtime row count, f32 partials in runtime-row views of a
scratch sized at the bound), and above what one core's sram holds the decode form runs on
chunks of rows in a runtime loop; the results match eager for several M within the bound, and
the linear ran on Legato (all cores, no eager fallback)."""

import pytest
import torch

import legato.torch as lt
from legato.torch import wrapper
from tests.unit.torch.torch_backend_helpers import check_close
from tests.unit.torch.torch_backend_helpers import compile_dynamic_strict as _compile

BOUND = 16


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
            check_close(y, lin(x))
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
            check_close(g(x), mlp(x))
            s = lt.last_summary()
            assert s.num_extern == 0, str(s)
            forms = [" ".join(m.info.nodes) for m in _chip_kernels()]
            assert len(forms) == 2, forms  # gate/up (with SiLU * up) and down
            assert any("2 projections" in f for f in forms), forms


def _all_cores(mod):
    cores = {k: v for k, v in mod.kernel.last_run.instructions.items() if k.startswith("core")}
    assert len(cores) == 32 and all(v > 0 for v in cores.values()), cores


@pytest.mark.parametrize(
    ("n", "k", "form"),
    [
        # column blocks that do not fall evenly on the 32 cores: the tile-range form, its f32
        # partials in runtime-row views of a scratch sized at the bound
        (16 * 35, 512, "linear_tiles(tn=16, slots=2)"),
        (128 * 33, 512, "linear_tiles(tn=128, slots=2)"),
        # fewer column blocks than cores: split-K, the same
        (128, 2048, "linear_cols(tn=32, split=8)"),
    ],
)
def test_partial_forms_runtime_rows(n, k, form):
    """The tile-range and split-K forms with a runtime M: one kernel for every M, on every
    core, matching eager (their partials are runtime-row views `part[..., 0:m, :]`)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(k, n, bias=True).bfloat16()
    g = _compile(lin)
    kernels = set()
    with torch.no_grad():
        for m in (3, BOUND, 9):
            x = torch.randn(m, k, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=BOUND)
            check_close(g(x), lin(x))
            assert lt.last_summary().num_extern == 0, str(lt.last_summary())
            (mod,) = _chip_kernels()
            assert form in " ".join(mod.info.nodes), mod.info.nodes
            _all_cores(mod)
            kernels.add(id(mod.kernel))
    assert len(kernels) == 1


class _QKV(torch.nn.Module):
    def __init__(self, h, n):
        super().__init__()
        self.q = torch.nn.Linear(h, n, bias=False)
        self.k = torch.nn.Linear(h, n, bias=False)
        self.v = torch.nn.Linear(h, n, bias=False)

    def forward(self, x):
        return self.q(x), self.k(x), self.v(x)


def test_grouped_tile_ranges_runtime_rows():
    """q/k/v of 560 columns each (35 interleaved blocks on 32 cores: the grouped tile-range
    form) with a runtime M."""
    torch.manual_seed(0)
    qkv = _QKV(512, 16 * 35).float()
    g = _compile(qkv)
    with torch.no_grad():
        for m in (4, 11):
            x = torch.randn(m, 512)
            lt.mark_dynamic(x, 0, max=BOUND)
            for y, ref in zip(g(x), qkv(x)):
                check_close(y, ref)
            assert lt.last_summary().num_extern == 0, str(lt.last_summary())
            (mod,) = _chip_kernels()
            assert "linear_tiles(3 projections, tn=16" in " ".join(mod.info.nodes), mod.info.nodes
            _all_cores(mod)


@pytest.mark.parametrize(
    ("n", "k", "form"),
    [
        (512, 512, "linear_chunks(linear_gemm(tn=16), rows=307)"),
        # 28 blocks of 20 on 32 cores: the spare cores redo the last one
        (16 * 35, 512, "linear_chunks(linear_gemm(tn=20), rows=307)"),
        # 128 columns are too few for linear_gemm on 32 cores: the decode form, K split
        (128, 2048, "linear_chunks(linear_cols(tn=32, split=8), rows=128)"),
    ],
)
def test_chunks_runtime_rows_above_one_core(n, k, form):
    """A bound above what one core's sram holds of x (vLLM's 1024 tokens; at K = 512, 307
    rows): a runtime loop over chunks of x's rows, each `linear_gemm` (or the decode form
    when N is too small for it); one kernel for every M, below and above one chunk."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(k, n, bias=True).bfloat16()
    g = _compile(lin)
    kernels = set()
    with torch.no_grad():
        for m in (5, 700 if k == 512 else 300):
            x = torch.randn(m, k, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=1024)
            check_close(g(x), lin(x))
            assert lt.last_summary().num_extern == 0, str(lt.last_summary())
            (mod,) = _chip_kernels()
            assert form in " ".join(mod.info.nodes), mod.info.nodes
            _all_cores(mod)
            kernels.add(id(mod.kernel))
    assert len(kernels) == 1


def test_grouped_chunks_runtime_rows():
    """gate/up (one grouped kernel, in chunks of rows) and down at a bound of 1024 tokens."""
    torch.manual_seed(0)
    mlp = _MLP(512, 1024).bfloat16()
    g = _compile(mlp)
    with torch.no_grad():
        for m in (4, 400):
            x = torch.randn(m, 512, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=1024)
            check_close(g(x), mlp(x))
            assert lt.last_summary().num_extern == 0, str(lt.last_summary())
            forms = [" ".join(m.info.nodes) for m in _chip_kernels()]
            assert len(forms) == 2 and all("linear_chunks" in f for f in forms), forms
            assert any("2 projections" in f for f in forms), forms


@pytest.mark.parametrize(
    ("n", "bias", "form"),
    [(4000, False, "linear_gemm(tn=125)"), (1000, True, "linear_gemm(tn=8)")],
)
def test_gemm_form_runtime_rows(n, bias, form):
    """A runtime M bounded by 64 (GEMM_ROWS and up, within one core's sram): one `linear_gemm`
    kernel for every M, its x slabs and output blocks over the runtime rows."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, n, bias=bias).bfloat16()
    g = _compile(lin)
    kernels = set()
    with torch.no_grad():
        for m in (40, 64, 3):
            x = torch.randn(m, 512, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=64)
            check_close(g(x), lin(x))
            assert lt.last_summary().num_extern == 0, str(lt.last_summary())
            (mod,) = _chip_kernels()
            assert form in " ".join(mod.info.nodes), mod.info.nodes
            assert "(-1, 64)" in mod.gen.source, mod.gen.source
            _all_cores(mod)
            kernels.add(id(mod.kernel))
    assert len(kernels) == 1
