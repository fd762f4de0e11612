"""The disk cache signs its entries with a per-user HMAC key and refuses entries it did not sign
(issue 17, item 6): a poisoned entry, re-hashed with an unkeyed SHA-256 as the old format allowed,
is recompiled, with the reason logged; the key is created 0600 and a key others can read is not
used."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import multiprocessing
import os
import stat

import numpy as np
import pytest

import legato
from legato import jit
from tests.corpus.one_core import f32, one_core


@legato.compile(backend=one_core)
def triple(
    x: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
    out: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * 3.0)


@legato.compile(backend=one_core)
def negate(
    x: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
    out: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * -1.0)


X = np.arange(32, dtype=np.float32).reshape(4, 8)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LEGATO_CACHE_KEY", raising=False)
    jit.clear_memory_cache()
    jit.stats.clear()
    yield tmp_path / "cache"
    jit.clear_memory_cache()


def _entry(cache, kernel):
    return jit.cache._entry_path(kernel.last_key)


def _run(kernel):
    out = np.zeros((4, 8), np.float32)
    kernel(X, out)
    return out


def test_the_key_is_created_once_with_mode_0600(cache):
    _run(triple)
    path = cache / "signing.key"
    st = path.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    key = path.read_bytes()
    assert len(key) == jit.cache.KEY_BYTES
    jit.clear_memory_cache()
    _run(negate)
    assert path.read_bytes() == key  # reused, not replaced
    entry = json.loads(_entry(cache, negate).read_text())
    assert "sha256" not in entry and len(entry["hmac"]) == 64


def test_a_poisoned_entry_rehashed_without_the_key_is_refused(cache, caplog):
    # The attack of issue 17: put another kernel's binary into triple's entry and recompute the
    # unkeyed SHA-256 the old format checked. The entry is consistent, its binary valid.
    _run(negate)
    bad_binary = json.loads(_entry(cache, negate).read_text())["payload"]["binary"]
    assert np.array_equal(_run(triple), X * 3)
    path = _entry(cache, triple)
    entry = json.loads(path.read_text())
    payload = dict(entry["payload"], binary=bad_binary)
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    for mac in (digest, entry["hmac"], None):  # unkeyed hash, the old signature, none at all
        forged = {"format": entry["format"], "payload": payload, "sha256": digest}
        if mac is not None:
            forged["hmac"] = mac
        path.write_text(json.dumps(forged))
        jit.clear_memory_cache()
        jit.stats.clear()
        with caplog.at_level(logging.WARNING, logger="legato.cache"):
            out = _run(triple)
        assert np.array_equal(out, X * 3)  # recompiled: not -X
        assert jit.stats["refused_entries"] == 1 and jit.stats["compiles"] == 1
        assert any(
            "refused, not signed by this cache" in r.getMessage() and str(path) in r.getMessage()
            for r in caplog.records
        ), caplog.records
        caplog.clear()
    # the overwritten entry is signed and served again
    jit.clear_memory_cache()
    jit.stats.clear()
    assert np.array_equal(_run(triple), X * 3)
    assert jit.stats["disk_hits"] == 1 and jit.stats["compiles"] == 0


def test_an_entry_signed_with_another_users_key_is_refused(cache, tmp_path, monkeypatch):
    other = tmp_path / "other.key"
    monkeypatch.setenv("LEGATO_CACHE_KEY", str(other))
    _run(triple)  # signed with the other key
    assert other.exists()
    monkeypatch.delenv("LEGATO_CACHE_KEY")
    jit.clear_memory_cache()
    jit.stats.clear()
    _run(triple)
    assert jit.stats["refused_entries"] == 1 and jit.stats["compiles"] == 1


@pytest.mark.parametrize("mode", [0o644, 0o660, 0o604])
def test_a_key_others_can_access_is_not_used(cache, mode):
    _run(triple)
    path = cache / "signing.key"
    path.chmod(mode)
    jit.clear_memory_cache()
    jit.stats.clear()
    with pytest.warns(UserWarning, match=r"disk cache is off: .*signing.key has mode 0"):
        out = _run(triple)
    assert np.array_equal(out, X * 3)
    assert jit.stats["compiles"] == 1 and jit.stats["disk_hits"] == 0


def test_a_symlinked_key_is_not_used(cache, tmp_path):
    real = tmp_path / "real.key"
    real.write_bytes(b"k" * jit.cache.KEY_BYTES)
    real.chmod(0o600)
    cache.mkdir(parents=True)
    (cache / "signing.key").symlink_to(real)
    with pytest.raises(jit.cache.CacheKeyError, match="cannot open"):
        jit.cache.signing_key()


def _child(cache_dir, results):
    os.environ["LEGATO_CACHE_DIR"] = cache_dir
    jit.clear_memory_cache()
    jit.stats.clear()
    out = np.zeros((4, 8), np.float32)
    triple(X, out)
    results["ok"] = bool(np.array_equal(out, X * 3))
    results["stats"] = dict(jit.stats)


def test_another_process_of_the_same_user_accepts_the_entry(cache):
    _run(triple)
    ctx = multiprocessing.get_context("fork")
    with ctx.Manager() as manager:
        results = manager.dict()
        p = ctx.Process(target=_child, args=(str(cache), results))
        p.start()
        p.join(120)
        assert p.exitcode == 0
        assert results["ok"]
        stats = results["stats"]
    assert stats.get("disk_hits") == 1 and not stats.get("compiles"), stats


def test_concurrent_first_uses_agree_on_one_key(cache):
    ctx = multiprocessing.get_context("fork")
    with ctx.Manager() as manager:
        keys = manager.list()

        def make():
            keys.append(base64.b64encode(jit.cache.signing_key()).decode())

        procs = [ctx.Process(target=make) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert len(set(keys)) == 1 and len(keys) == 4
    assert [p.name for p in cache.iterdir()] == ["signing.key"]  # no temporary file left
