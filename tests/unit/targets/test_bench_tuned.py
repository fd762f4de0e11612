"""The bench's declared search spaces (`bench.kernels.SPACES`) ship their choices in
`bench/tuned.json`: the bench reads them without tuning, each choice is one of the space's
configs, passed the torch check and beats or equals the hand pick in the report it was tuned
with, and, run again here where it is not the hand pick, matches torch eager. Every config of
every space builds on both targets; the points of the spaces the hand picks never ran (the
GEMV's narrow tiles, the GEMM's group spread, the decoder's per-phase core counts) compute what
torch computes on small instances."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import legato  # noqa: E402
from bench.kernels import SPACES, TUNED, make_gemv  # noqa: E402
from legato.jit import autotuner  # noqa: E402
from legato.model import bertha  # noqa: E402


@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
@pytest.mark.parametrize("space", SPACES, ids=[s.name for s in SPACES])
def test_the_shipped_file_has_each_choice(space, target, monkeypatch, tmp_path):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path))  # only the file can answer
    model = bertha.evt0() if target == "bertha" else bertha.evt1()
    store = autotuner.ResultStore(space.configs, [TUNED])
    found = store.lookup(autotuner.tuning_key(space.identity(model)))
    assert found is not None, f"{TUNED} has no choice for {space.name} on {target}: retune"
    record, where = found
    assert where == str(TUNED)
    assert record["config"] in space.configs
    assert record["identity"] == space.identity(model)
    rows = {autotuner.canonical(r["config"]): r for r in record["report"]["rows"]}
    hand = rows[autotuner.canonical(space.hand(model))]
    assert hand["status"] in ("ok", "best"), "the hand pick must be a correct config"
    best = rows[autotuner.canonical(record["config"])]
    assert best["status"] == "best" and best["cycles"] == record["cycles"]  # it matched torch
    assert record["cycles"] <= hand["cycles"]
    assert all(r["cycles"] >= record["cycles"] for r in rows.values() if r["status"] == "ok")
    assert space.choice(model) == record["config"]  # what the bench runs, without tuning


def test_gemv_with_several_column_blocks_per_core():

    from bench.runner import measure

    row = measure(make_gemv(1024, 4096, tile_n=64), "bertha", repeat=1)  # 2 blocks per core
    assert row["matches_torch"], row["max_abs_err_vs_torch"]


def _targets():
    return [("bertha", bertha.evt0()), ("bertha-evt1", bertha.evt1())]


@pytest.mark.parametrize("space", SPACES, ids=[s.name for s in SPACES])
def test_every_config_of_each_space_builds_on_both_targets(space):
    """A space is a list of distinct configs over the same parameters, the hand pick among
    them, and each builds the bench kernel laid out for each target (a config that cannot run
    on a target, e.g. more attention cores than it has, fails when compiled: the tuner drops it
    with the reason)."""
    keys = {tuple(sorted(c)) for c in space.configs}
    assert len(keys) == 1, keys
    assert len({autotuner.canonical(c) for c in space.configs}) == len(space.configs)
    for _name, model in _targets():
        assert space.hand(model) in space.configs
        for config in space.configs:
            bk = space.build(model, **config)
            assert bk.name == space.name and bk.specialize(model) is not None


def _run_once(bk, model):
    """Compile and emulate `bk` on `model` once: (output, torch eager's)."""
    import torch

    from bench.runner import _to_numpy
    from legato.compiler import compile_kernel
    from legato.targets.bertha.runtime import run_binary

    bk = bk.specialize(model)
    targs = bk.make_args(torch, torch.Generator().manual_seed(0))
    module = legato.compile(backend=model)(bk.fn).emit_module()
    binary = bytes(compile_kernel(module, model, bk.name).binary)
    args = [_to_numpy(t) for t in targs]
    run_binary(binary, model, args)
    got = torch.from_numpy(args[bk.out_index].view("int16")).view(torch.bfloat16).float()
    return got, bk.torch_fn(torch, targs).float(), bk.rtol


def _tuned_not_hand():
    out = []
    for space in SPACES:
        for name, model in _targets():
            found = autotuner.ResultStore(space.configs, [TUNED]).lookup(
                autotuner.tuning_key(space.identity(model))
            )
            if found is not None and found[0]["config"] != space.hand(model):
                out.append(pytest.param(space, name, id=f"{space.name}-{name}"))
    return out


@pytest.mark.parametrize("space, target", _tuned_not_hand())
def test_a_tuned_choice_that_is_not_the_hand_pick_matches_torch(
    space, target, monkeypatch, tmp_path
):
    """(the hand picks run at full size in test_bench_decoder.py / test_bench_gemm.py /
    test_bench.py)"""
    import torch

    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path))
    model = dict(_targets())[target]
    got, want, tol = _run_once(space.build(model, **space.choice(model)), model)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_decoder_phase_core_counts_match_torch(target):
    """Fewer cores in three GEMV phases (a fraction, a count, a quarter): the idle cores skip
    the phase, the partial-sum slots follow each phase's own count."""
    import torch

    from bench.decoder import make_decoder_layer

    model = dict(_targets())[target]
    phases = {"qkv": "P/2", "gu": 5, "down": "P/4"}
    bk = make_decoder_layer(512, 4, 1792, 256, attn_split=1, phase_cores=phases)
    bk = bk.specialize(model)
    targs = bk.make_args(torch, torch.Generator().manual_seed(0))
    kernel = legato.compile(backend=model)(bk.fn)
    kernel(*targs)
    ref_out, ref_kv = bk.reference(torch, targs)
    torch.testing.assert_close(targs[11].float(), ref_out.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(targs[12].float(), ref_kv.float(), rtol=2e-2, atol=2e-2)


def test_decoder_phase_cores_are_checked():
    from bench.decoder import make_decoder_layer

    with pytest.raises(AssertionError, match=r"names no GEMV phase: \['mlp'\]"):
        make_decoder_layer(512, 4, 1792, 256, phase_cores={"mlp": 2})
    with pytest.raises(AssertionError, match=r"phase_cores\['o'\] = 'half': a count or 'P/d'"):
        make_decoder_layer(512, 4, 1792, 256, phase_cores={"o": "half"})
    with pytest.raises(AssertionError, match=r"phase_cores\['qkv'\] = 33: the chip has 32"):
        make_decoder_layer(512, 4, 1792, 256, phase_cores={"qkv": 33})


@pytest.mark.parametrize("spread", [1, 3])
def test_gemm_group_spread_matches_torch(spread):
    """Groups starting `spread` k-slabs apart (3: not the default on either chip, and the start
    slabs wrap around K) compute A @ W."""
    import torch

    from bench.gemm import make_gemm_spmd

    model = bertha.evt0()
    bk = make_gemm_spmd(64, 1024, 2048, "gemm_small", 32, 8, spread)
    got, want, tol = _run_once(bk, model)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_write_tuned_drops_the_records_of_an_older_declaration(tmp_path, monkeypatch):
    """Records of a space tuned over other configs are dropped; other benches' records stay."""
    import bench.kernels as bk

    space = SPACES[0]
    stale = {"key": "a", "identity": {"bench": space.name, "configs": ["{}"]}, "config": {}}
    other = {"key": "b", "identity": {"bench": "another", "configs": ["{}"]}, "config": {}}
    current = {"key": "c", "identity": space.identity(bertha.evt0()), "config": space.configs[0]}
    path = tmp_path / "tuned.json"
    autotuner.write_results(path, [stale, other, current])
    monkeypatch.setattr(bk, "TUNED", path)
    monkeypatch.setattr(space.store, "memory", {})  # (what other tests looked up)
    bk.write_tuned([space])
    assert set(autotuner.read_results(path)) == {"b", "c"}
