"""A runtime M whose projection is too narrow to split over the cores and whose bound does not
fit one core's sram (a small model's prefill at another prompt length, torch.compile's
default dynamic shapes: M bounded by `legato.max_dynamic_dim`): chip_linear's
`linear_row_chunks` gives the cores chunks of rows instead of columns (a runtime loop over the
runtime M). Before, both chip_linear (`no tiling of 128 output columns over 32 cores`) and the
single-core matmul (`... need 2457600 bytes of SRAM`) refused and the matmul ran eagerly: f32
Llama's second-length graph had 29% of its matmul FLOPs on Legato. GPT-2's Conv1D (`addmm(b,
x, W)` with W a [K, N] parameter, no `t(W)`) is laid out the same way. Results match eager for
M below, at and above one chunk, one kernel for every M; a matmul the single-core form takes
at the bound stays there."""

import pytest
import torch

import legato.torch as lt
from legato.torch import wrapper
from tests.unit.torch.torch_backend_helpers import check_close
from tests.unit.torch.torch_backend_helpers import compile_dynamic_strict as _compile

BOUND = 1024  # legato.max_dynamic_dim's default


class _Conv1D(torch.nn.Module):
    """GPT-2's Conv1D: y = addmm(b, x, W), W [K, N] used as is."""

    def __init__(self, k, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(k, n) / k**0.5)
        self.bias = torch.nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight)


def _kernels(form):
    return [m for m in wrapper.last_wrapper().kernel_modules() if form in " ".join(m.info.nodes)]


@pytest.mark.parametrize(
    ("dtype", "mod", "form"),
    [
        # Llama's q/o projection and lm_head in f32 (K = 64: one zero-padded tile)
        (torch.float32, lambda: torch.nn.Linear(64, 128), "linear_row_chunks(tn=128, rows=32)"),
        (torch.float32, lambda: torch.nn.Linear(300, 64, bias=False), "(tn=64, rows=32)"),
        # GPT-2's c_attn: 192 columns in 3 blocks of 64
        (torch.bfloat16, lambda: _Conv1D(64, 192), "linear_row_chunks(tn=64, rows=32)"),
        # GPT-2's c_fc: 256 columns are 32 blocks of 8, one per core: the [K, N] weight laid
        # out for the column-split forms too
        (torch.float32, lambda: _Conv1D(64, 256), "linear_chunks(linear_gemm(tn=8), rows=170)"),
    ],
    ids=["linear-f32", "linear-k300-f32", "conv1d-bf16", "conv1d-f32"],
)
def test_runtime_rows_over_the_cores(dtype, mod, form):
    torch.manual_seed(0)
    lin = mod().to(dtype)
    g = _compile(lin)
    kernels = set()
    with torch.no_grad():
        for m in (3, 40, 100):  # within one chunk, two, four (three cores idle, one partial)
            x = torch.randn(m, lin.weight.shape[1 if isinstance(lin, torch.nn.Linear) else 0])
            x = x.to(dtype)
            lt.mark_dynamic(x, 0, max=BOUND)
            check_close(g(x), lin(x))
            s = lt.last_summary()
            assert s.num_extern == 0 and s.matmul_flop_share == 1.0, str(s)
            (k,) = _kernels("chip_linear")
            assert form in " ".join(k.info.nodes), k.info.nodes
            assert all(c.eager_calls == 0 for c in s.kernels), str(s)
            kernels.add(id(k.kernel))
    assert len(kernels) == 1  # one kernel for every M


def test_single_core_form_kept_when_it_fits():
    """bf16 Linear(64, 128) fits one core at the bound: the single-core matmul (fused with its
    neighbours) takes it, not the row-split form."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 128, bias=False).bfloat16()
    g = _compile(lin)
    with torch.no_grad():
        for m in (3, 40):
            x = torch.randn(m, 64, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=BOUND)
            check_close(g(x), lin(x))
            s = lt.last_summary()
            assert s.num_extern == 0, str(s)
            assert not _kernels("chip_linear"), [k.info.nodes for k in s.kernels]
