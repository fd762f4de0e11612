"""nn.Linear with K not a multiple of 256 at chip scale (issue 14): the weight's last K-tile is
zero-padded in the compile-time layout and x is zero-filled to whole tiles on the core, so every
chip_linear form but the prefill one takes it. Results match eager (bf16 and f32), on every
core, with the weight laid out once (DRAM bytes per call: the padded weight plus the
activations, not a relayout)."""

import pytest
import torch

import legato.torch as lt
from tests.unit.torch.test_chip_linear import _check, _cores, _run
from tests.unit.torch.torch_backend_helpers import assert_close_bf16


@pytest.mark.parametrize(
    ("k", "n", "m", "dtype", "bias", "form"),
    [
        # one block per core (x zero-filled to 256 / 512 / 1024 columns)
        (200, 512, 1, torch.bfloat16, True, "linear_cols(tn=16, split=1)"),
        (300, 512, 2, torch.float32, False, "linear_cols(tn=16, split=1)"),
        (1000, 512, 1, torch.bfloat16, False, "linear_cols(tn=16, split=1)"),
        # tile ranges: 40 blocks of 128 on 32 cores, a runtime tile index into the filled x
        (300, 5120, 1, torch.bfloat16, True, "linear_tiles(tn=128, slots="),
        (1000, 5120, 2, torch.float32, True, "linear_tiles(tn=128, slots="),
        # many rows: `linear_gemm`, only its last slab zero-filled
        (300, 4000, 64, torch.bfloat16, False, "linear_gemm(tn=125)"),
        (1000, 512, 32, torch.float32, True, "linear_gemm(tn=16)"),
    ],
)
def test_odd_k_matches_eager(k, n, m, dtype, bias, form):
    torch.manual_seed(0)
    lin = torch.nn.Linear(k, n, bias=bias).to(dtype)
    x = torch.randn(m, k, dtype=dtype)
    _, y, ref, mod = _run(lin, x)
    _check(y, ref)
    assert form in " ".join(mod.info.nodes), mod.info.nodes
    cores = _cores(mod.kernel.last_run)
    assert len(cores) == 32 and all(v > 0 for v in cores.values()), cores


def test_odd_k_split_k_on_64_cores():
    """EVT1, 128 columns: 8 blocks of 16 over 64 cores (too few DMA ports to keep shared DRAM
    busy with the other cores idle), K (2000 -> 8 tiles) split over 8 (each core one tile of
    the zero-filled x, the partials through the scratch)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(2000, 128, bias=True).bfloat16()
    x = torch.randn(1, 2000, dtype=torch.bfloat16)
    _, y, ref, mod = _run(lin, x, "bertha-evt1")
    _check(y, ref)
    assert "linear_cols(tn=16, split=8)" in " ".join(mod.info.nodes), mod.info.nodes
    assert all(v > 0 for v in _cores(mod.kernel.last_run).values())


def test_odd_k_laid_out_once():
    torch.manual_seed(0)
    lin = torch.nn.Linear(300, 512, bias=False).bfloat16()
    x = torch.randn(1, 300, dtype=torch.bfloat16)
    g, y, ref, mod = _run(lin, x)
    with torch.no_grad():
        y2 = g(x)
    assert_close_bf16(y2, ref)
    assert mod.layout_count == 1
    run = mod.kernel.last_run
    weight = 512 * 512 * 2  # K padded to 512
    acts = (300 + 512) * 2
    assert weight <= run.dram_bytes <= weight + 32 * acts + 4096, run.dram_bytes


def test_odd_k_runtime_rows():
    """A runtime row count (mark_dynamic): one kernel, the zero columns a runtime-row view of a
    bound-sized zero tile."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(300, 512, bias=True).bfloat16()
    g = torch.compile(
        lin,
        backend="legato",
        dynamic=True,
        options={"legato.device": "bertha", "legato.strict": True},
    )
    with torch.no_grad():
        for m in (3, 16, 5):
            x = torch.randn(m, 300, dtype=torch.bfloat16)
            lt.mark_dynamic(x, 0, max=16)
            assert_close_bf16(g(x), lin(x))
    s = lt.last_summary()
    assert s.num_extern == 0, str(s)
