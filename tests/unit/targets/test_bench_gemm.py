"""The issue-5 GEMM prefill bench kernel (`bench/gemm.py`): [512, 4096] @ [4096, 4096] bf16
matches torch eager on both generations and reaches >= 85% of the MPU roofline; its layout follows
the target's core count; a small instance with the same structure runs bit-identically at every
IR level (the differential corpus, `tests/corpus/gemm_kernels.py`). The SPMD form
(`make_gemm_spmd`, one program) matches torch at full size and runs at every level too."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from bench.gemm import make_gemm
from bench.kernels import KERNELS


def _run(bk, target):
    """Compile and emulate once (no JIT/cache timings): (matches torch, max error, RunResult)."""
    import ml_dtypes
    import numpy as np
    import torch

    import legato
    from bench.runner import _model_factory, _to_numpy
    from legato.compiler import compile_kernel
    from legato.targets.bertha.runtime import run_binary

    factory = _model_factory(target)
    model = factory()
    bk = bk.specialize(model)
    targs = bk.make_args(torch, torch.Generator().manual_seed(0))
    kernel = legato.compile(backend=factory)(bk.fn)
    art = compile_kernel(kernel.emit_module(), model, bk.name)
    args = [_to_numpy(t) for t in targs]
    run = run_binary(bytes(art.binary), model, args)
    out = args[bk.out_index]
    assert out.dtype == ml_dtypes.bfloat16
    got = torch.from_numpy(out.view(np.int16)).view(torch.bfloat16).float()
    ref = bk.torch_fn(torch, targs).float()
    ok = torch.allclose(got, ref, rtol=bk.rtol, atol=bk.rtol)
    return ok, (got - ref).abs().max().item(), run, art


def test_registered_in_the_bench():
    (bk,) = [k for k in KERNELS if k.name == "gemm_512x4096x4096"]
    assert bk.for_model is not None
    assert bk.fn.__name__ == "gemm_512x4096x4096"


def test_layout_follows_the_core_count():
    from legato.model import bertha

    for model, cores, tn in ((bertha.evt0(), 32, 128), (bertha.evt1(), 64, 64)):
        bk = make_gemm().specialize(model)
        import torch

        wt = bk.make_args(torch, torch.Generator().manual_seed(0))[1]
        assert tuple(wt.shape) == (cores, 16, 256, tn)


@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_full_size_matches_torch_at_85_percent_of_the_mpu_roofline(target):
    ok, err, run, art = _run(make_gemm(512, 4096, 4096), target)
    assert ok, err
    r = run.roofline
    assert r.bound == "mpu"
    assert run.mac_count == 512 * 4096 * 4096
    assert r.mpu_cycles / run.cycles >= 0.85, (run.cycles, r.as_dict())
    # A is read from DRAM once per group of cores, not once per core
    assert run.dram_bytes < 2 * (4 << 20) * 4 + (32 << 20) * 2
    assert "dma2d" in art.asm  # column slabs of A and column blocks of out: one DMA each


@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_spmd_form_is_one_program_and_matches_torch(target):
    """`make_gemm_spmd` (the bench's GEMM): one all-cores program (all-to-all within a group),
    compiled in seconds instead of the per-core form's 25-40 s; >= 85% of the MPU roofline."""
    from bench.gemm import make_gemm_spmd

    ok, err, run, art = _run(make_gemm_spmd(512, 4096, 4096), target)
    assert ok, err
    assert art.asm.count(".program") == 1 and "core(r" in art.asm  # sends to a runtime core
    assert run.mac_count == 512 * 4096 * 4096
    assert run.roofline.bound == "mpu"
    assert run.roofline.mpu_cycles / run.cycles >= 0.85, (run.cycles, run.roofline.as_dict())
    assert run.dram_bytes < 2 * (4 << 20) * 4 + (32 << 20) * 2


@pytest.mark.parametrize("which", [0, 1], ids=["per_core", "spmd"])
def test_small_instance_runs_at_every_level_bit_identically(which):
    from legato.interp import differential as diff
    from tests.corpus.gemm_kernels import GEMM_CORPUS

    kernel = GEMM_CORPUS[which]
    compiled = diff.compile_corpus_kernel(kernel, record_passes=False)
    ir = compiled.artifacts.core_ir
    assert "_slot2" in ir and "accumulate = true" in ir  # receive rings, MPU accumulation
    results = {
        lvl: diff.run_level(kernel, lvl, None if lvl == "legato" else compiled)
        for lvl in diff.LEVELS
    }
    diff.check_reference(kernel, results["legato"])
    diff.check(kernel, results, compiled)
