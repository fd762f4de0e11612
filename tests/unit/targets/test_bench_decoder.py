"""The Llama decoder-layer bench kernel (`bench/decoder.py`, issue 5): the layer's output and the
new token's key/value match torch eager, on both generations, reduced and full size; at full
size the layer streams every weight once and reaches >= 80% of the DRAM roofline."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import legato
from bench.decoder import _cores_per_block, make_decoder_layer
from bench.kernels import KERNELS
from legato.model import bertha

FACTORIES = {"bertha": bertha.evt0, "bertha-evt1": bertha.evt1}
TOL = 2e-2  # bf16: one rounding apart at the output's magnitude


def run(bk, target):
    """(run report, out, kv_new, reference out, reference kv_new) of one emulator run."""
    factory = FACTORIES[target]
    bk = bk.specialize(factory())
    args = bk.make_args(torch, torch.Generator().manual_seed(0))
    kernel = legato.compile(backend=factory)(bk.fn)
    kernel(*args)
    ref_out, ref_kv = bk.reference(torch, args)
    return kernel.last_run, args[11], args[12], ref_out, ref_kv


def weight_and_cache_bytes(hidden, heads, ffn, ctx):
    return 2 * (4 * hidden * hidden + 3 * hidden * ffn + 2 * heads * ctx * 128)


@pytest.mark.parametrize("target", sorted(FACTORIES))
def test_reduced_layer_matches_torch(target):
    """hidden 512 (4 heads), MLP 1792 (7 K-tiles, 14 column blocks: uneven over the cores),
    256 cached tokens (2 token blocks: split-KV attention)."""
    cfg = (512, 4, 1792, 256)
    report, out, kv, ref_out, ref_kv = run(make_decoder_layer(*cfg), target)
    torch.testing.assert_close(out.float(), ref_out.float(), rtol=TOL, atol=TOL)
    torch.testing.assert_close(kv.float(), ref_kv.float(), rtol=TOL, atol=TOL)
    assert report.dram_bytes >= weight_and_cache_bytes(*cfg)


@pytest.mark.parametrize("target", sorted(FACTORIES))
def test_full_layer_matches_torch_at_80_percent_of_the_dram_roofline(target):
    cfg = (4096, 32, 11008, 1024)
    report, out, kv, ref_out, ref_kv = run(make_decoder_layer(*cfg), target)
    torch.testing.assert_close(out.float(), ref_out.float(), rtol=TOL, atol=TOL)
    torch.testing.assert_close(kv.float(), ref_kv.float(), rtol=TOL, atol=TOL)
    assert report.roofline.bound == "dram"
    need = weight_and_cache_bytes(*cfg)
    assert need <= report.dram_bytes <= need * 1.02  # every weight and cache byte once
    assert report.efficiency >= 0.8, report.summary()


def test_registered_in_the_bench():
    (bk,) = [k for k in KERNELS if k.name == "decoder_layer_7b_ctx1024"]
    assert bk.specialize(bertha.evt1()).fn.__name__ == "decoder_layer_7b_ctx1024"


@pytest.mark.parametrize(
    "tiles,kt,p", [(1536, 16, 32), (1376, 43, 64), (2752, 16, 64), (8, 2, 64), (14, 1, 32)]
)
def test_tile_ranges_cover_every_tile_once_and_slots_are_dense(tiles, kt, p):
    """The partition gemv_stage computes at run time, replayed in Python: core c's tiles
    [c*T/P', (c+1)*T/P') with P' = min(P, T); the cores meeting a block get the slots
    0, 1, ... (c - first core of the block), fewer than the scratch's S."""
    s = _cores_per_block(tiles, kt, p)
    q = min(p, tiles)
    seen = []
    for c in range(p):
        start, end = min(c, q) * tiles // q, min(c + 1, q) * tiles // q
        seen += range(start, end)
        b_lo = start // kt
        for b in range(b_lo, min((end + kt - 1) // kt, b_lo + end - start)):
            first = ((b * kt + 1) * q - 1) // tiles
            last = ((b * kt + kt) * q - 1) // tiles
            assert first <= c <= last and last - first < s
            assert first * tiles // q <= b * kt < (first + 1) * tiles // q
    assert seen == list(range(tiles))
