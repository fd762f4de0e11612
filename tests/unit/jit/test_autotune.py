"""`@legato.autotune`: the choice is the config with the fewest simulated cycles among those
whose outputs agree, wrong and failing configs are dropped with their reason, the choice is
stored (a second call, a second process) and shipped as a file read without tuning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import legato
import legato.jit
from legato.jit import autotuner
from tests.unit.jit import autotune_kernels as ak

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    legato.jit.clear_memory_cache()
    yield tmp_path / "cache"
    legato.jit.clear_memory_cache()


def _args():
    x = np.random.default_rng(0).uniform(1.0, 2.0, (ak.ROWS, 256)).astype(np.float32)
    return x, np.zeros_like(x)


def test_picks_the_fewest_cycles_of_the_correct_configs():
    x, out = _args()
    tuner = ak.make()
    tuner(x, out)
    assert np.array_equal(out, x + 1.0)
    # every config run by hand: its cycles, and whether it computes x + 1
    plain = legato.compile(backend=ak.two_cores)(ak.plus_one)
    by_hand = {}
    for c in ak.CONFIGS:
        o = np.zeros_like(x)
        try:
            plain(x, o, **c)
        except legato.CompileError:
            continue
        by_hand[c["rows"]] = (plain.last_run.cycles, np.array_equal(o, x + 1.0))
    correct = {r: cyc for r, (cyc, ok) in by_hand.items() if ok}
    assert len(correct) >= 3 and len(set(correct.values())) > 1  # a choice to make
    assert tuner.best_config == {"rows": min(correct, key=correct.get)}
    rows = {r.config["rows"]: r for r in tuner.report.rows}
    for r, (cyc, _) in by_hand.items():
        assert rows[r].cycles == cyc  # the cycles the tuner ranked are the emulator's
    assert tuner.last_run.cycles == min(correct.values())


def test_wrong_and_failing_configs_are_dropped_with_the_reason():
    x, out = _args()
    tuner = ak.make()
    tuner(x, out)
    rows = {r.config["rows"]: r for r in tuner.report.rows}
    assert rows[3].status == "wrong"  # 3 does not divide 8: rows 6 and 7 stay 0
    assert "output 'out' differs" in rows[3].reason and "512 of 2048" in rows[3].reason
    assert rows[16].status == "failed"
    assert "CompileError" in rows[16].reason and "at most ROWS rows per tile" in rows[16].reason
    assert {r.config["rows"] for r in tuner.report.dropped} == {3, 16}
    text = str(tuner.report)
    assert "wrong: output 'out'" in text and "failed: CompileError" in text and "*" in text


def test_a_user_reference_catches_what_the_first_config_would_not():
    # against a reference where 1 is added twice, every config is wrong: an error naming the line
    x, out = _args()
    tuner = ak.make(reference=lambda x, out: x + 2.0)
    with pytest.raises(legato.AutotuneError) as e:
        tuner(x, out)
    msg = str(e.value)
    assert "autotune_kernels.py:" in msg and "every config failed or computed a wrong result" in msg
    assert msg.count("wrong: output 'out'") == 4
    good = ak.make(reference=ak.reference)
    good(x, out)
    assert good.report.reference == "the reference function" and good.best_config == {"rows": 8}


def test_the_choice_is_cached_for_a_second_call_and_a_second_process(cache):
    x, out = _args()
    tuner = ak.make()
    tuner(x, out)
    tuner(x, out)
    assert tuner.tune_count == 1
    again = ak.make()  # a new tuner in this process: from the signed record on disk
    again(x, out)
    assert again.tune_count == 0 and again.best_config == tuner.best_config
    assert "stored, from cache" in again.report.what
    assert list((cache / "autotune").rglob("*.json"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LEGATO_CACHE_DIR": str(cache)}
    got = subprocess.run(
        [sys.executable, "-c", "from tests.unit.jit.autotune_kernels import *; second_process()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    child = json.loads(got.stdout.strip().splitlines()[-1])
    assert child["tune_count"] == 0 and child["best"] == tuner.best_config
    assert child["compiles"] == 0  # and the chosen binary from the JIT cache


def test_another_shape_bucket_or_target_tunes_again():
    x, out = _args()
    tuner = ak.make()
    tuner(x, out)
    evt1 = legato.autotune(configs=ak.CONFIGS, key=["x"], workers=1)(
        legato.compile(backend="bertha-evt1")(ak.plus_one)
    )
    evt1(x, out)
    assert evt1.tune_count == 1  # another target's choice is its own


def test_an_exported_file_is_read_without_tuning(tmp_path, monkeypatch):
    x, out = _args()
    tuner = ak.make()
    tuner(x, out)
    shipped = tmp_path / "tuned.json"
    assert tuner.export(shipped) == 1
    data = json.loads(shipped.read_text())
    assert data["records"][0]["config"] == tuner.best_config
    # a fresh cache directory: only the file knows the choice
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "other"))
    legato.jit.clear_memory_cache()
    later = ak.make(results=str(shipped))
    later(x, out)
    assert later.tune_count == 0 and later.best_config == tuner.best_config
    assert np.array_equal(out, x + 1.0)
    loaded = ak.make()
    assert loaded.load(shipped) == 1
    assert loaded.best(x, out) == tuner.best_config and loaded.tune_count == 0
    # a file cannot choose a config the kernel does not declare: it is ignored, and tuned
    data["records"][0]["config"] = {"rows": 4}
    shipped.write_text(json.dumps(data))
    forged = ak.make(results=str(shipped))
    forged(x, out)
    assert forged.tune_count == 1 and forged.best_config == {"rows": 8}


def test_declaration_errors_name_the_users_line():
    kernel = legato.compile(backend=ak.two_cores)(ak.plus_one)
    line = sys._getframe().f_lineno
    with pytest.raises(legato.AutotuneError, match=rf"test_autotune.py:{line + 2}: .*at least one"):
        legato.autotune(configs=[], key=["x"])
    with pytest.raises(legato.AutotuneError, match=rf":{line + 4}: .*key 'y' names no argument"):
        legato.autotune(configs=ak.CONFIGS, key=["y"])(kernel)
    bad = legato.autotune(configs=[legato.Config(x=1)])(kernel)
    with pytest.raises(legato.AutotuneError, match="sets 'x', which is a tensor parameter"):
        bad(*_args())
    with pytest.raises(legato.AutotuneError, match="above @legato.compile"):
        legato.autotune(configs=ak.CONFIGS)(ak.plus_one)
    tuner = legato.autotune(configs=ak.CONFIGS)(kernel)
    line = sys._getframe().f_lineno
    with pytest.raises(legato.LegatoError, match=rf":{line + 2}: .*'rows' is chosen by @legato"):
        tuner(*_args(), rows=2)


def test_an_edited_cache_record_is_refused_and_retuned(cache):
    x, out = _args()
    ak.make()(x, out)
    (path,) = (cache / "autotune").rglob("*.json")
    entry = json.loads(path.read_text())
    entry["payload"]["config"] = {"rows": 1}  # a declared config, but not signed so
    path.write_text(json.dumps(entry))
    again = ak.make()
    again(x, out)
    assert again.tune_count == 1 and again.best_config == {"rows": 8}


def _pid_candidate(i: int, dies: bool = False):
    def run():
        if dies:
            time.sleep(1)  # after the others (instant) are done: they must not share its fate
            os._exit(3)  # a worker that dies (e.g. killed by the OOM killer)
        return 10 + i, {"pid": np.array([os.getpid()])}

    return autotuner.Candidate({"i": i}, run)


def test_candidates_run_in_parallel_worker_processes_and_a_dead_one_fails_alone():
    cands = [_pid_candidate(0), _pid_candidate(1), _pid_candidate(2), _pid_candidate(3, True)]
    outcomes = autotuner.run_candidates(cands, workers=2)
    assert [o.config for o in outcomes] == [{"i": i} for i in range(4)]  # declaration order
    assert [o.cycles for o in outcomes[:3]] == [10, 11, 12]
    pids = {int(o.outputs["pid"][0]) for o in outcomes[:3]}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2  # forked workers, at most 2
    assert outcomes[3].cycles is None and "worker process failed" in outcomes[3].error
    # workers=1: in this process, one after another
    (one,) = autotuner.run_candidates([_pid_candidate(0)], workers=1)
    assert int(one.outputs["pid"][0]) == os.getpid()
