"""The on-disk JIT cache: four processes compiling one kernel at once compile it once (a lock per
key), leave one consistent entry and all compute the right result; a damaged entry (truncated, bad JSON, a binary the reader
refuses) is recompiled and overwritten."""

from __future__ import annotations

import base64
import json
import multiprocessing

import numpy as np
import pytest

import legato
from legato import jit
from tests.corpus.one_core import double

X = np.arange(32, dtype=np.float32).reshape(4, 8)


def _worker(cache, barrier, results, i):
    import os

    os.environ["LEGATO_CACHE_DIR"] = cache
    jit.clear_memory_cache()
    jit.stats.clear()
    barrier.wait()  # all four look up the (empty) cache at the same moment
    out = np.zeros((4, 8), np.float32)
    double(X, out)
    results[i] = (
        bool(np.array_equal(out, X * 2)),
        jit.stats["compiles"],
        jit.stats["corrupt_entries"],
    )


def _entries(cache):
    """The cache's entries, without the compile locks (`locks/<key>.lock`, which stay) and the
    signing key."""
    return sorted(
        p
        for p in cache.rglob("*")
        if p.is_file() and p.parent.name != "locks" and p.name != "signing.key"
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path))
    jit.clear_memory_cache()
    yield tmp_path
    jit.clear_memory_cache()


def test_four_processes_compile_the_same_kernel(cache, tmp_path_factory, monkeypatch):
    # Warm up (imports, the compiler's fingerprint) with a compile into another cache before
    # forking, so that the children spend their time compiling at the same moment.
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path_factory.mktemp("warm")))
    double(X, np.zeros((4, 8), np.float32))
    jit.clear_memory_cache()
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(cache))
    assert not _entries(cache)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(4)
    with ctx.Manager() as manager:
        results = manager.dict()
        procs = [
            ctx.Process(target=_worker, args=(str(cache), barrier, results, i)) for i in range(4)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0, 0, 0, 0]
        results = dict(results)
    assert all(ok for ok, _, _ in results.values()), results
    assert not any(corrupt for _, _, corrupt in results.values()), results
    # the compile lock: one process compiled, the three others waited and read its entry
    assert sum(compiles for _, compiles, _ in results.values()) == 1, results
    # exactly one entry, no temporary files left, and it is a valid, loadable entry
    entries = _entries(cache)
    assert len(entries) == 1 and entries[0].suffix == ".json", entries
    key = entries[0].stem
    stored = jit._disk_load(key)
    assert stored is not None
    # a fresh process-like lookup serves it without compiling
    jit.stats.clear()
    out = np.zeros((4, 8), np.float32)
    double(X, out)
    assert np.array_equal(out, X * 2)
    assert jit.stats["compiles"] == 0 and jit.stats["disk_hits"] == 1


def _rewrite_binary(entry: dict, binary: bytes) -> dict:
    """`entry` holding `binary`, signed with this user's key (a consistent entry)."""
    payload = dict(entry["payload"], binary=base64.b64encode(binary).decode())
    return {
        **entry,
        "payload": payload,
        "hmac": jit.cache._signature(jit.cache.signing_key(), payload),
    }


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[: len(raw) // 2],  # truncated
        lambda raw: b"{not json",  # bad JSON
        # unknown cache format
        lambda raw: raw.replace(f'"format": {jit.cache.CACHE_FORMAT}'.encode(), b'"format": 99'),
        lambda raw: raw[:-40] + b"0" * 30 + raw[-10:],  # signature no longer matches
        # a consistent entry whose binary the reader refuses: one byte of code flipped
        lambda raw: json.dumps(_rewrite_binary(json.loads(raw), _flip(json.loads(raw)))).encode(),
        # ... or a binary that is not an ELF at all
        lambda raw: json.dumps(_rewrite_binary(json.loads(raw), b"\x7fELF garbage")).encode(),
    ],
)
def test_a_damaged_entry_is_recompiled(cache, damage):
    out = np.zeros((4, 8), np.float32)
    double(X, out)
    (entry,) = _entries(cache)
    good = entry.read_bytes()
    entry.write_bytes(damage(good))
    jit.clear_memory_cache()
    jit.stats.clear()
    out[:] = 0
    double(X, out)
    assert np.array_equal(out, X * 2)
    assert jit.stats["corrupt_entries"] == 1 and jit.stats["compiles"] == 1
    # the entry was overwritten with a good one
    assert jit._disk_load(entry.stem) is not None
    assert _entries(cache) == [entry]


def _flip(entry: dict) -> bytes:
    binary = bytearray(base64.b64decode(entry["payload"]["binary"]))
    binary[0x48] ^= 0x01  # inside the header/first section: the reader refuses it
    return bytes(binary)


def test_a_held_compile_lock_times_out_with_a_clear_error(cache, monkeypatch):
    key = double.cache_key()
    ctx = multiprocessing.get_context("fork")
    held, release = ctx.Event(), ctx.Event()

    def hold():
        with jit.cache.compile_lock(key, "holder"):
            held.set()
            release.wait(30)

    holder = ctx.Process(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        monkeypatch.setenv("LEGATO_COMPILE_LOCK_TIMEOUT", "0.2")
        with pytest.raises(
            legato.CompileError,
            match=r"kernel double \(.*one_core.py:\d+\): timed out after 0.2 s waiting for another process",
        ):
            double(X, np.zeros((4, 8), np.float32))
    finally:
        release.set()
        holder.join(30)
    # released: the call compiles
    out = np.zeros((4, 8), np.float32)
    double(X, out)
    assert np.array_equal(out, X * 2)
