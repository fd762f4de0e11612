"""Several projections in one all-core kernel (issue 14, `Impl.group_key` / `merge`,
chip_linear._merge): independent nn.Linear nodes that read the same input and have the same
width (q/k/v, gate/up) are one kernel, their weights laid out once as one interleaved
streaming layout, each result written by the kernel (or handed, a block of each, to the fused
epilogue: SiLU(gate) * up). Results match eager; every core executes instructions; the DRAM
bytes of a call are the weights plus the activations (nothing re-laid-out per call)."""

import pytest
import torch

import legato.torch as lt
from legato.torch import wrapper
from tests.unit.torch.torch_backend_helpers import assert_close_bf16


def _compile(mod, device):
    return torch.compile(
        mod,
        backend="legato",
        options={"legato.device": device, "legato.strict": True, "legato.fuse_chains": False},
    )


def _check(y, ref):
    if y.dtype == torch.bfloat16:
        assert_close_bf16(y, ref)
    else:
        torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def _every_core(mod, device):
    cores = {k: v for k, v in mod.kernel.last_run.instructions.items() if k.startswith("core")}
    assert len(cores) == (32 if device == "bertha" else 64), cores
    assert all(v > 0 for v in cores.values()), cores


class QKV(torch.nn.Module):
    def __init__(self, hidden, nq, nkv, bias):
        super().__init__()
        self.q = torch.nn.Linear(hidden, nq, bias=bias)
        self.k = torch.nn.Linear(hidden, nkv, bias=bias)
        self.v = torch.nn.Linear(hidden, nkv, bias=bias)

    def forward(self, x):
        return self.q(x), self.k(x), self.v(x)


@pytest.mark.parametrize(
    ("dtype", "bias", "m", "device", "form"),
    [
        # 512 columns each on 32 cores: one block of 3 x 16 columns per core
        (torch.bfloat16, False, 1, "bertha", "linear_cols(3 projections, tn=16, split=1)"),
        # on 64 cores: 3 x 8 columns per core
        (torch.bfloat16, True, 1, "bertha-evt1", "linear_cols(3 projections, tn=8, split=1)"),
        (torch.float32, True, 2, "bertha", "linear_cols(3 projections, tn=16, split=1)"),
    ],
)
def test_qkv_one_kernel(dtype, bias, m, device, form):
    torch.manual_seed(0)
    mod = QKV(512, 512, 512, bias).to(dtype)
    x = torch.randn(m, 512, dtype=dtype)
    g = _compile(mod, device)
    with torch.no_grad():
        ys = g(x)
        ys = g(x)  # the second call: the layout is not made again
        refs = mod(x)
    for y, ref in zip(ys, refs, strict=True):
        _check(y, ref)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert form in " ".join(k.info.nodes), k.info.nodes
    _every_core(k, device)
    # one laid-out weight (and one bias) for the three, made on the first call only
    assert k.layout_count == (2 if bias else 1)
    run = k.kernel.last_run
    weights = 3 * 512 * 512 * x.element_size()
    acts = (512 + 3 * 512 * (1 + bias)) * m * x.element_size()
    assert weights <= run.dram_bytes <= weights + 64 * acts + 4096, run.dram_bytes


def test_grouped_weights_update_seen():
    """An in-place update of one of the grouped weights lays the group's weight out again."""
    torch.manual_seed(0)
    mod = QKV(512, 512, 512, False).bfloat16()
    x = torch.randn(1, 512, dtype=torch.bfloat16)
    g = _compile(mod, "bertha")
    with torch.no_grad():
        g(x)
        mod.v.weight.mul_(-0.5)
        ys = g(x)
        refs = mod(x)
    for y, ref in zip(ys, refs, strict=True):
        _check(y, ref)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert k.layout_count == 2


def test_gqa_groups_projections_of_one_width():
    """q is 512 wide, k and v 256 wide: k and v share a kernel, q has its own."""
    torch.manual_seed(0)
    mod = QKV(512, 512, 256, False).bfloat16()
    x = torch.randn(1, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        ys = _compile(mod, "bertha")(x)
        refs = mod(x)
    for y, ref in zip(ys, refs, strict=True):
        _check(y, ref)
    mods = wrapper.last_wrapper().kernel_modules()
    labels = sorted(" ".join(m.info.nodes) for m in mods)
    assert len(mods) == 2, labels
    assert sum("2 projections" in lbl for lbl in labels) == 1, labels


def test_projections_of_different_inputs_stay_apart():
    torch.manual_seed(0)
    a, b = (torch.nn.Linear(512, 512, bias=False).bfloat16() for _ in range(2))

    def f(x, z):
        return a(x), b(z)

    x, z = (torch.randn(1, 512, dtype=torch.bfloat16) for _ in range(2))
    with torch.no_grad():
        ys = _compile(f, "bertha")(x, z)
    for y, ref in zip(ys, (a(x), b(z)), strict=True):
        _check(y, ref)
    mods = wrapper.last_wrapper().kernel_modules()
    assert len(mods) == 2 and not any("projections" in " ".join(m.info.nodes) for m in mods)


def _norm(x, w):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)


class MLP(torch.nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.w = torch.nn.Parameter(1 + torch.randn(hidden) / 8)
        self.gate = torch.nn.Linear(hidden, ffn, bias=False)
        self.up = torch.nn.Linear(hidden, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        h = _norm(x, self.w)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


@pytest.mark.parametrize(
    ("ffn", "device", "form"),
    [
        (1536, "bertha", "linear_cols(2 projections, tn=48, split=1)"),
        (1536, "bertha-evt1", "linear_cols(2 projections, tn=24, split=1)"),
        # 2304 = 72 per core, too wide for two in one tile: 36 blocks of 2 x 64 columns, not
        # a multiple of the cores: the tile-range form
        (2304, "bertha", "linear_tiles(2 projections, tn=64"),
    ],
)
def test_gate_up_one_kernel_with_silu_mul(ffn, device, form):
    """RMSNorm (prologue), gate and up (one weight) and SiLU(gate) * up (epilogue, on the
    gate and up blocks of the same columns) in one kernel; down (+ residual) the other."""
    torch.manual_seed(0)
    mod = MLP(512, ffn).bfloat16()
    x = torch.randn(1, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y = _compile(mod, device)(x)
        ref = mod(x)
    assert_close_bf16(y, ref)
    s = lt.last_summary()
    assert s.num_kernels == 2 and s.num_extern == 0, str(s)
    first, down = wrapper.last_wrapper().kernel_modules()
    labels = " ".join(first.info.nodes)
    assert form in labels and "rsqrt" in labels and "silu" in labels, labels
    assert "def epi_" in first.gen.source
    for k in (first, down):
        assert k.gen.spmd
        _every_core(k, device)
    # gate's and up's results are never written: only SiLU(gate) * up leaves the kernel
    run = first.kernel.last_run
    weights = 2 * 512 * ffn * 2
    assert weights <= run.dram_bytes <= weights + 64 * (512 + ffn) * 2 + 8192, run.dram_bytes


def test_gate_up_uneven_whole_blocks_with_silu_mul():
    """hidden 256 (one K-tile), MLP 2304: 36 blocks of 2 x 64 columns on 32 cores, whole
    blocks give no core more tiles than tile ranges (2): `linear_blocks` for gate/up with
    SiLU(gate) * up as its epilogue (gate and up never written), no partials; matches eager."""
    torch.manual_seed(0)
    mod = MLP(256, 2304).bfloat16()
    x = torch.randn(1, 256, dtype=torch.bfloat16)
    with torch.no_grad():
        y = _compile(mod, "bertha")(x)
        ref = mod(x)
    assert_close_bf16(y, ref)
    first = wrapper.last_wrapper().kernel_modules()[0]
    labels = " ".join(first.info.nodes)
    assert "linear_blocks(2 projections, tn=64)" in labels and "silu" in labels, labels
    _every_core(first, "bertha")
    run = first.kernel.last_run
    weights = 2 * 256 * 2304 * 2
    assert weights <= run.dram_bytes <= weights + 64 * (256 + 2304) * 2 + 8192, run.dram_bytes


@pytest.mark.parametrize(
    ("bias", "device", "form"),
    [
        # 128 rows: the cores of a group of 8 read x's slabs once between them and exchange
        # them core to core; 3 x 16 columns per core
        (False, "bertha", "linear_rows_cols(3 projections, tn=16)"),
        # 64 cores, groups of 16: 3 x 8 columns per core, the biases interleaved as the weight
        (True, "bertha-evt1", "linear_rows_cols(3 projections, tn=8)"),
    ],
)
def test_qkv_prefill_one_kernel_rows_cols(bias, device, form):
    """q/k/v over a 128-token prompt: the prefill form (`linear_rows_cols`) moves fewer bytes
    than every core loading all of x (`linear_gemm`), grouped as the decode forms are. Each
    result matches eager; every core runs; x is read about p / group times, the weights once."""
    torch.manual_seed(0)
    mod = QKV(512, 512, 512, bias).bfloat16()
    x = torch.randn(128, 512, dtype=torch.bfloat16)
    g = _compile(mod, device)
    with torch.no_grad():
        ys = g(x)
        ys = g(x)
        refs = mod(x)
    for y, ref in zip(ys, refs, strict=True):
        torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert form in " ".join(k.info.nodes), k.info.nodes
    _every_core(k, device)
    run = k.kernel.last_run
    p = 32 if device == "bertha" else 64
    copies = p // (8 if p == 32 else 16)
    weights = 3 * 512 * 512 * 2
    outs = 3 * 128 * 512 * 2
    assert weights + outs <= run.dram_bytes <= weights + outs + copies * 128 * 512 * 2 + 65536, (
        run.dram_bytes
    )


class GateUp(torch.nn.Module):
    def __init__(self, hidden, ffn, bias):
        super().__init__()
        self.gate = torch.nn.Linear(hidden, ffn, bias=bias)
        self.up = torch.nn.Linear(hidden, ffn, bias=bias)

    def forward(self, x):
        return self.gate(x), self.up(x)


@pytest.mark.parametrize(
    ("mod", "form"),
    [
        # gate/up of the tiny Llama's prefill: 2 x 48 columns per core, a part per projection
        (lambda: GateUp(512, 1536, False), "linear_rows_cols(2 projections, tn=48)"),
        # q/k/v with biases: 3 parts of 16 columns, each with its bias
        (lambda: QKV(512, 512, 512, True), "linear_rows_cols(3 projections, tn=16)"),
    ],
)
def test_prefill_group_parts_match_one_tile(mod, form, monkeypatch):
    """At 16-row pieces (128 rows on 32 cores) the prefill form multiplies a group's weight
    tile one projection after the other (`_rows_cols_parts`, `linear_rows_cols_parts`: the
    matmuls of one start while the next is still read): the same arithmetic as the whole tile
    at once (`linear_rows_cols`), so the results are bit-equal to that schedule's, and match
    eager; every core runs."""
    from legato.torch.library import chip_linear

    torch.manual_seed(0)
    mod = mod().bfloat16()
    x = torch.randn(128, 512, dtype=torch.bfloat16)

    def run(impl):
        torch._dynamo.reset()
        g = _compile(mod, "bertha")
        with torch.no_grad():
            g(x)
            ys = g(x)
        (k,) = wrapper.last_wrapper().kernel_modules()
        assert form in " ".join(k.info.nodes), k.info.nodes
        assert f"{impl}(" in k.gen.source, k.gen.source
        _every_core(k, "bertha")
        return ys

    with torch.no_grad():
        refs = mod(x)
    assert chip_linear._rows_cols_parts(len(refs), refs[0].shape[1] // 32) == len(refs)
    parts = run("linear_rows_cols_parts")
    monkeypatch.setattr(chip_linear, "_rows_cols_parts", lambda g, r: 1)
    whole = run("_rows_cols_group")
    for y, y1, ref in zip(parts, whole, refs, strict=True):
        assert torch.equal(y, y1)
        torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
