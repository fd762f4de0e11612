"""nn.Linear through torch.compile at chip scale (issue 14, legato.torch.library.chip_linear):
results match eager, every core executes instructions, the weight is laid out once (DMA bytes
per call are the weight plus the activations), and a parameter update is seen."""

import pytest
import torch

import legato.torch as lt
from legato.torch import wrapper
from tests.unit.torch.torch_backend_helpers import assert_close_bf16


def _run(lin, x, device="bertha"):
    g = torch.compile(
        lin, backend="legato", options={"legato.device": device, "legato.strict": True}
    )
    with torch.no_grad():
        y = g(x)
        ref = lin(x)
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
    (mod,) = wrapper.last_wrapper().kernel_modules()
    assert mod.gen.spmd, mod.gen.source
    return g, y, ref, mod


def _check(y, ref):
    if y.dtype == torch.bfloat16:
        assert_close_bf16(y, ref)
    else:
        torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def _cores(run):
    return {k: v for k, v in run.instructions.items() if k.startswith("core")}


@pytest.mark.parametrize(
    ("dtype", "bias", "m", "device", "k", "n", "form"),
    [
        (torch.bfloat16, True, 1, "bertha", 512, 512, "linear_cols(tn=16, split=1)"),
        (torch.bfloat16, False, 4, "bertha", 512, 512, "linear_cols(tn=16, split=1)"),
        (torch.float32, True, 2, "bertha", 512, 512, "linear_cols(tn=16, split=1)"),
        # 64 cores, 512 columns: a block of 8 on each core, no split K
        (torch.bfloat16, True, 1, "bertha-evt1", 512, 512, "linear_cols(tn=8, split=1)"),
        (torch.float32, False, 1, "bertha-evt1", 512, 512, "linear_cols(tn=8, split=1)"),
        # 128 columns: 2 a core, K split over 8 cores through the scratch
        (torch.bfloat16, True, 1, "bertha-evt1", 2048, 128, "linear_cols(tn=16, split=8)"),
        (torch.float32, False, 1, "bertha-evt1", 2048, 128, "linear_cols(tn=16, split=8)"),
        # 256 columns, one K-tile (neither split K nor tile ranges tile it): a block of 8 / 4
        # columns on each core (`_decode_tiles`, MIN_STEP_TN), not one core for the weight
        (torch.bfloat16, False, 1, "bertha", 256, 256, "linear_cols(tn=8, split=1)"),
        (torch.bfloat16, True, 3, "bertha-evt1", 256, 256, "linear_cols(tn=4, split=1)"),
        (torch.float32, True, 1, "bertha", 256, 256, "linear_cols(tn=8, split=1)"),
        (torch.float32, False, 2, "bertha-evt1", 256, 256, "linear_cols(tn=4, split=1)"),
    ],
)
def test_linear_every_core(dtype, bias, m, device, k, n, form):
    torch.manual_seed(0)
    lin = torch.nn.Linear(k, n, bias=bias).to(dtype)
    x = torch.randn(m, k, dtype=dtype)
    _, y, ref, mod = _run(lin, x, device)
    _check(y, ref)
    assert form in " ".join(mod.info.nodes), mod.info.nodes
    cores = _cores(mod.kernel.last_run)
    assert len(cores) == (32 if device == "bertha" else 64)
    assert all(v > 0 for v in cores.values()), cores
    # every weight byte read once, x by every core
    weight = k * n * dtype.itemsize
    run = mod.kernel.last_run
    assert run.dram_bytes <= weight + len(cores) * (m * k + 2 * m * n) * dtype.itemsize + 8192, (
        run.dram_bytes
    )


def test_weight_laid_out_once_and_update_seen():
    """Second call: no new layout, DRAM bytes ~ weight + activations (the transpose of the
    weight is folded, nothing relays it out per call). After an in-place update the next call
    lays it out again and sees the new weight."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(1024, 512, bias=True).bfloat16()
    x = torch.randn(1, 1024, dtype=torch.bfloat16)
    g, y, ref, mod = _run(lin, x)
    _check(y, ref)
    with torch.no_grad():
        g(x)
    assert mod.layout_count == 1
    run = mod.kernel.last_run
    weight = 1024 * 512 * 2
    acts = (1024 + 512 + 512) * 2
    assert weight <= run.dram_bytes <= weight + 32 * acts + 4096, run.dram_bytes
    with torch.no_grad():
        lin.weight.mul_(0.5)
        lin.bias.zero_()
        y2 = g(x)
        ref2 = lin(x)
    assert mod.layout_count == 2
    _check(y2, ref2)
    # a new parameter tensor (another storage) is laid out as well
    with torch.no_grad():
        lin.weight = torch.nn.Parameter(torch.randn(512, 1024, dtype=torch.bfloat16))
        y3 = g(x)
        ref3 = lin(x)
    _check(y3, ref3)


def test_linear_4096_decode():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4096, 4096, bias=False).bfloat16()
    x = torch.randn(1, 4096, dtype=torch.bfloat16)
    _, y, ref, mod = _run(lin, x)
    _check(y, ref)
    run = mod.kernel.last_run
    assert all(v > 0 for v in _cores(run).values())
    assert run.efficiency > 0.9, (run.cycles, run.roofline_cycles)


@pytest.mark.slow
def test_linear_4096_prefill():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4096, 4096, bias=True).bfloat16()
    x = torch.randn(512, 4096, dtype=torch.bfloat16)
    _, y, ref, mod = _run(lin, x)
    _check(y, ref)
    assert "linear_rows_cols" in " ".join(mod.info.nodes)
    run = mod.kernel.last_run
    assert all(v > 0 for v in _cores(run).values())
    assert run.efficiency > 0.8, (run.cycles, run.roofline_cycles)


def test_prefill_form_mid_size():
    """The prefill form (rows and columns, group exchange) at a mid size: [256, 1024] @ [1024, 1024]."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(1024, 1024, bias=True).bfloat16()
    x = torch.randn(256, 1024, dtype=torch.bfloat16)
    _, y, ref, mod = _run(lin, x)
    _check(y, ref)
    assert "linear_rows_cols" in " ".join(mod.info.nodes), mod.info.nodes
    assert all(v > 0 for v in _cores(mod.kernel.last_run).values())


def test_not_a_parameter_falls_back_single_core():
    """x @ y.t() with y an activation: not chip_linear's (no layout of a non-parameter)."""

    def f(x, y):
        return x @ y.t()

    x, y = torch.randn(4, 256).bfloat16(), torch.randn(128, 256).bfloat16()
    with torch.no_grad():
        out = torch.compile(f, backend="legato")(x, y)
    assert_close_bf16(out, f(x, y))
    s = str(lt.last_summary())
    assert "chip_linear" not in s, s


@pytest.mark.parametrize(
    ("dtype", "m", "bias"), [(torch.bfloat16, 1, True), (torch.float32, 2, False)]
)
def test_more_column_blocks_than_cores(dtype, m, bias):
    """N = 5120 on 32 cores: 40 blocks of 128 do not fall evenly on the cores: the tile-range
    form (`linear_tiles`), every weight tile read once (DRAM bytes = the weight plus the small
    partials and activations, not the 48 blocks of whole rounds)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 5120, bias=bias).to(dtype)
    x = torch.randn(m, 512, dtype=dtype)
    _, y, ref, mod = _run(lin, x)
    _check(y, ref)
    assert "linear_tiles(tn=128, slots=2)" in " ".join(mod.info.nodes), mod.info.nodes
    run = mod.kernel.last_run
    assert all(v > 0 for v in _cores(run).values())
    weight = 512 * 5120 * lin.weight.element_size()
    partials = 40 * 2 * m * 128 * 4
    assert weight <= run.dram_bytes <= weight + 3 * partials + 32 * 3 * 512 * m * 4, run.dram_bytes


@pytest.mark.parametrize(
    ("device", "n", "bias"),
    [
        # 50 blocks of 128 x 2 K-tiles on 32 cores: whole blocks give a core 4 tiles at most,
        # as equal tile ranges would (ceil(100 / 32))
        ("bertha", 6400, True),
        # the tiny Llama's lm_head width on 64 cores: 250 blocks, 8 tiles at most either way
        ("bertha-evt1", 32000, False),
    ],
)
def test_uneven_whole_blocks_no_partials(device, n, bias):
    """Column blocks that do not fall evenly on the cores, where whole blocks cost no core more
    weight tiles than tile ranges: `linear_blocks`, each block computed whole by one core and
    written once (no f32 partial through DRAM, no barrier): DRAM bytes are the weight, x per
    core and the output, nothing more; every core runs; the result matches eager."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, n, bias=bias).bfloat16()
    x = torch.randn(1, 512, dtype=torch.bfloat16)
    _, y, ref, mod = _run(lin, x, device)
    _check(y, ref)
    assert "linear_blocks(tn=128)" in " ".join(mod.info.nodes), mod.info.nodes
    assert "legato.sync.barrier" not in mod.gen.source
    run = mod.kernel.last_run
    cores = _cores(run)
    p = 32 if device == "bertha" else 64
    assert len(cores) == p and all(v > 0 for v in cores.values()), cores
    weight = 512 * n * 2
    small = p * 512 * 2 + n * 2 + (n * 2 if bias else 0)
    assert weight <= run.dram_bytes <= weight + small + p * 4096, run.dram_bytes


def test_whole_rounds_of_column_blocks():
    """N = 8192 on 32 cores: 64 blocks of 128, two unrolled rounds of one block per core."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 8192, bias=True).bfloat16()
    x = torch.randn(1, 256, dtype=torch.bfloat16)
    _, y, ref, mod = _run(lin, x)
    _check(y, ref)
    assert "linear_cols(tn=128, split=1)" in " ".join(mod.info.nodes), mod.info.nodes
    assert all(v > 0 for v in _cores(mod.kernel.last_run).values())


def test_llama_mlp_width_decode_every_tile_once():
    """Llama-7B's gate/up shape, [1, 4096] @ [4096, 11008], on 64 cores: 86 blocks of 128 over
    64 cores in tile ranges, >= 90% of the DRAM roofline (whole rounds read 128 blocks: 66%)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(4096, 11008, bias=False).bfloat16()
    x = torch.randn(1, 4096, dtype=torch.bfloat16)
    _, y, ref, mod = _run(lin, x, "bertha-evt1")
    _check(y, ref)
    assert "linear_tiles" in " ".join(mod.info.nodes), mod.info.nodes
    run = mod.kernel.last_run
    assert all(v > 0 for v in _cores(run).values())
    assert run.efficiency > 0.9, (run.cycles, run.roofline_cycles)


@pytest.mark.parametrize(
    ("dtype", "m", "n", "bias", "form"),
    [
        # an lm_head shape: 4000 columns = 32 blocks of 125, one per core (60 rows: not in
        # whole row pieces of the prefill form's groups of 8, `linear_rows_cols`)
        (torch.bfloat16, 60, 4000, False, "linear_gemm(tn=125)"),
        # 1000 columns: the fewest columns per core is 32, as 4 rounds of 8 (125 blocks on 32
        # cores: in the last round 3 spare cores redo the last block)
        (torch.bfloat16, 48, 1000, True, "linear_gemm(tn=8)"),
        (torch.float32, 32, 512, True, "linear_gemm(tn=16)"),
    ],
)
def test_many_rows_gemm_form(dtype, m, n, bias, form):
    """Prefill rows that fit one core's sram (M >= GEMM_ROWS): `linear_gemm`, every core its
    column blocks over all rows, no f32 partial through DRAM (DRAM bytes: the weight once, x
    once per core, the output once)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, n, bias=bias).to(dtype)
    x = torch.randn(m, 512, dtype=dtype)
    _, y, ref, mod = _run(lin, x)
    _check(y, ref)
    assert form in " ".join(mod.info.nodes), mod.info.nodes
    run = mod.kernel.last_run
    assert all(v > 0 for v in _cores(run).values())
    es = lin.weight.element_size()
    blocks = -(-n // int(form.split("tn=")[1].rstrip(")")))
    tn = n // blocks
    redone = (-(-blocks // 32) * 32 - blocks) * tn  # columns the spare cores compute again
    weight = 512 * (n + redone) * es
    acts = (32 * m * 512 + m * (n + redone) + (32 * n if bias else 0)) * es
    assert weight <= run.dram_bytes <= weight + acts + 64 * 1024, run.dram_bytes


class _GateUp(torch.nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.gate = torch.nn.Linear(h, f, bias=False)
        self.up = torch.nn.Linear(h, f, bias=False)

    def forward(self, x):
        return torch.nn.functional.silu(self.gate(x)) * self.up(x)


def test_grouped_gemm_form_with_epilogue():
    """gate/up on 60 rows (not in whole row pieces of the prefill form's groups of 8): one
    grouped `linear_gemm` kernel, SiLU(gate) * up as its epilogue."""
    torch.manual_seed(0)
    mod = _GateUp(512, 1024).bfloat16()
    x = torch.randn(60, 512, dtype=torch.bfloat16)
    g = torch.compile(mod, backend="legato", options={"legato.device": "bertha"})
    with torch.no_grad():
        y = g(x)
        ref = mod(x)
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
    s = lt.last_summary()
    assert s.num_extern == 0, str(s)
    nodes = [" ".join(k.info.nodes) for k in wrapper.last_wrapper().kernel_modules()]
    assert any("linear_gemm(2 projections, tn=32)" in f for f in nodes), nodes


@pytest.mark.parametrize(
    ("device", "form"),
    [("bertha", "linear_gemm(tn=16)"), ("bertha-evt1", "linear_cols(tn=16, split=2)")],
)
def test_gemm_form_or_split_k_by_dram_bytes(device, form):
    """[124, 512] @ [512, 512] (124 rows: not in whole row pieces of the prefill form's groups,
    `linear_rows_cols`): on 32 cores `linear_gemm`; on 64 its 64 copies of x would move more
    bytes (9.2 MB) than split-K's halves of x and its partials (5.6 MB): the decode form."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 512, bias=True).bfloat16()
    x = torch.randn(124, 512, dtype=torch.bfloat16)
    _, y, ref, mod = _run(lin, x, device)
    _check(y, ref)
    assert form in " ".join(mod.info.nodes), mod.info.nodes


@pytest.mark.parametrize(
    ("device", "form", "grp"),
    [("bertha", "linear_rows_cols(tn=16)", 8), ("bertha-evt1", "linear_rows_cols(tn=8)", 16)],
)
def test_prefill_rows_in_group_pieces_take_the_prefill_form(device, form, grp):
    """[128, 512] @ [512, 512] (a prefill projection at 128 tokens, rows in whole pieces of a
    group): the prefill form, whose groups read each slab of x once between them and exchange
    it core to core, moves fewer bytes than `linear_gemm` (x once per core) or split-K: x
    p / grp times, the weight and the output once."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 512, bias=True).bfloat16()
    x = torch.randn(128, 512, dtype=torch.bfloat16)
    _, y, ref, mod = _run(lin, x, device)
    _check(y, ref)
    assert form in " ".join(mod.info.nodes), mod.info.nodes
    run = mod.kernel.last_run
    p = 32 if device == "bertha" else 64
    assert len(_cores(run)) == p and all(v > 0 for v in _cores(run).values())
    least = (512 * 512 + 128 * 512) * 2
    assert least <= run.dram_bytes <= least + (p // grp * 128 * 512 + p * 512) * 2 + 65536, (
        run.dram_bytes
    )
