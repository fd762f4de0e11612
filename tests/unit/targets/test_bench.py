"""`python -m bench` runs and reports what issue 5 asks for (no timing assertions: wall times
depend on the machine)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from bench.gemm import make_gemm, make_gemm_spmd
from bench.kernels import KERNELS, make_gemv
from bench.runner import measure, table

KEYS = {
    "name",
    "target",
    "cycles",
    "roofline_cycles",
    "efficiency",
    "bound",
    "dram_bytes",
    "wall_s",
    "torch_wall_s",
    "wall_ratio",
    "frontend_s",
    "compile_s",
    "first_call_s",
    "cached_call_s",
    "cached_call_overhead_s",
    "disk_cached_call_s",
    "matches_torch",
}


@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_measure_seed_matmul(target):
    row = measure(KERNELS[0], target, repeat=1)
    assert KEYS <= set(row)
    assert row["name"] == "simple_matmul" and row["target"] == target
    assert row["matches_torch"]
    assert 0 < row["roofline_cycles"] <= row["cycles"]
    assert 0 < row["efficiency"] <= 1
    assert row["dram_bytes"] == 10 * 256 * 2 + 256 * 128 * 2 + 10 * 128 * 2
    assert row["jit_compiles"] == 1  # the first call compiled, the cached calls did not
    for k in ("wall_s", "torch_wall_s", "compile_s", "first_call_s", "cached_call_s"):
        assert row[k] > 0
    assert 0 < row["cached_call_overhead_s"] <= row["cached_call_s"]
    text = table([row])
    assert "simple_matmul" in text and target in text
    assert table([row], markdown=True).startswith("| kernel | target |")


def test_python_m_bench_json():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--json",
            "--repeat",
            "1",
            "--target",
            "bertha",
            "--kernel",
            "simple_matmul",
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [(r["name"], r["target"]) for r in rows] == [("simple_matmul", "bertha")]
    assert KEYS <= set(rows[0])


@pytest.mark.parametrize("name", ["rmsnorm_32x4096", "softmax_32x4096"])
def test_row_kernels_match_torch_and_use_every_core(name):
    (bk,) = [k for k in KERNELS if k.name == name]
    row = measure(bk, "bertha", repeat=1)
    assert row["matches_torch"], row["max_abs_err_vs_torch"]
    assert 0 < row["efficiency"] <= 1
    assert row["dram_bytes"] >= 2 * 32 * 4096 * 2  # every row in and out at least once


@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_gemv_decode_matches_torch_and_streams_every_weight_once(target):
    """GEMV x[1,4096] @ W[4096,4096] (W pre-tiled in the streaming layout, bench/kernels.py)."""
    (bk,) = [k for k in KERNELS if k.name == "gemv_1x4096x4096"]
    row = measure(bk, target, repeat=1)
    assert row["matches_torch"], row["max_abs_err_vs_torch"]
    assert row["bound"] == "dram"
    assert 0 < row["efficiency"] <= 1
    weight = 4096 * 4096 * 2
    assert weight <= row["dram_bytes"] <= weight + 64 * (4096 * 2 + 4096 * 4) + 4096 * 2


def test_gemv_factory_smaller_instance_matches_torch():
    from bench.kernels import make_gemv

    row = measure(make_gemv(1024, 4096), "bertha", repeat=1)
    assert row["name"] == "gemv_1024x4096" and row["matches_torch"]


def test_gemv_tile_width_follows_the_core_count():
    from bench.kernels import gemv_tile_n
    from legato.model import bertha

    assert gemv_tile_n(bertha.evt0(), 4096) == 128  # 32 cores x 128 columns
    assert gemv_tile_n(bertha.evt1(), 4096) == 64  # 64 cores x 64 columns: no split-K
    assert gemv_tile_n(bertha.evt1(), 8192) == 128


def test_gemv_split_k_form_still_matches_torch_on_evt1():
    """A fixed 128-wide tile on 64 cores: two cores per column block, partials + barrier."""
    from bench.kernels import make_gemv

    row = measure(make_gemv(1024, 4096, tile_n=128), "bertha-evt1", repeat=1)
    assert row["matches_torch"], row["max_abs_err_vs_torch"]
    assert row["dram_bytes"] >= 1024 * 4096 * 2 + 2 * 4096 * 4  # weights and both partials


def test_interp_throughput_reports_every_executor():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "bench/interp_throughput.py", "--repeat", "1", "--kernel", "add_bf16"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    rows = [line.split("|")[1:-1] for line in res.stdout.splitlines() if line.startswith("| add")]
    assert [r[1].strip() for r in rows] == ["legato", "core", "backend", "emulator"]
    for r in rows:
        ops, rate = int(r[4]), float(r[5])  # kernel, executor, wall, CPU, ops, ops/CPU s
        assert ops > 0 and rate > 0
    totals = [
        line for line in res.stdout.splitlines() if " ops/s" in line and "over 1 kernels" in line
    ]
    assert len(totals) == 4


@pytest.mark.parametrize(
    "make",
    [
        lambda: make_gemm(8, 512, 256, None, 2, 2),
        lambda: make_gemm_spmd(8, 512, 256, None, 2, 2),
        lambda: make_gemv(512, 256, None, 128),
    ],
    ids=["gemm", "gemm_spmd", "gemv"],
)
def test_torch_best_computes_torch_fn_on_nn_linear_layout(make):
    """The torch time of the GEMM/GEMV rows may come from `torch_best` (W untiled, one
    F.linear): it must compute what `torch_fn` computes on the tiled weight, and the
    weight it rebuilds must be W itself (checked against a plain x @ W in f32)."""
    import torch

    bk = make()
    args = bk.make_args(torch, torch.Generator().manual_seed(0))
    ref = bk.torch_fn(torch, args)
    got = bk.torch_best(torch, args)()
    torch.testing.assert_close(got.float(), ref.float(), rtol=2e-2, atol=2e-2)
    x, wt = args[0], args[1]
    nb, kt, tk, tn = wt.shape
    w = wt.permute(1, 2, 0, 3).reshape(kt * tk, nb * tn)  # [k, n]: block b is columns b*tn..
    torch.testing.assert_close(got.float(), x.float() @ w.float(), rtol=2e-2, atol=2e-2)


def test_decoder_torch_best_is_the_reference_layer_with_an_in_place_cache():
    """The decoder row's torch time may come from `torch_best` (weights as nn.Linear holds
    them, the new key and value written into a free cache slot): the same bits as `torch_fn`
    (the same bf16 ops in the same order), and a second call too (the slot is overwritten,
    not appended)."""
    import torch

    from bench.decoder import make_decoder_layer
    from legato.model import bertha

    bk = make_decoder_layer(256, 2, 512, 256, "decoder_tiny").specialize(
        bertha.Bertha(None, "bertha", 4, False, 8, 1 << 30)
    )
    args = bk.make_args(torch, torch.Generator().manual_seed(0))
    ref = bk.torch_fn(torch, args)
    layer = bk.torch_best(torch, args)
    assert torch.equal(layer(), ref)
    assert torch.equal(layer(), ref)
