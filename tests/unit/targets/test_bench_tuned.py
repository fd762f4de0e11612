"""The bench's declared search spaces (`bench.kernels.SPACES`) ship their choices in
`bench/tuned.json`: the bench reads them without tuning, each choice is one of the space's
configs, beats or equals the hand pick in the report it was tuned with, and the GEMV's narrow-tile
form (several column blocks per core, a point of its space) computes x @ W."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

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
    rows = {autotuner.canonical(r["config"]): r for r in record["report"]["rows"]}
    hand = rows[autotuner.canonical(space.hand(model))]
    assert hand["status"] in ("ok", "best"), "the hand pick must be a correct config"
    assert record["cycles"] <= hand["cycles"]
    assert space.choice(model) == record["config"]  # what the bench runs, without tuning


def test_gemv_with_several_column_blocks_per_core():

    from bench.runner import measure

    row = measure(make_gemv(1024, 4096, tile_n=64), "bertha", repeat=1)  # 2 blocks per core
    assert row["matches_torch"], row["max_abs_err_vs_torch"]
