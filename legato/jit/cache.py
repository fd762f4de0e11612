"""The JIT cache: in memory and on disk (`$LEGATO_CACHE_DIR`, default `~/.cache/legato`).

Entries are written atomically (a temporary file, then a rename), so processes compiling the same
kernel at once each write the same complete entry and no reader sees a partial one; an entry that
is truncated, not JSON, fails its checksum or holds a binary the reader refuses is recompiled and
overwritten. The key (built by `Kernel.cache_key`) includes `compiler_fingerprint()` and
`binary_format_version()` and `library_versions()`, so an edited compiler, a new binary format or
an upgraded xDSL/numpy/ml_dtypes never serves old entries.

Entries are signed (HMAC-SHA256) with a key kept per user (`signing_key_path()`: `$LEGATO_CACHE_KEY`,
else `signing.key` in the cache directory, 32 random bytes created on first use with mode 0600).
An entry whose signature does not verify under that key (written by someone else, or edited and
re-hashed) is refused: logged (`logging.getLogger("legato.cache")`) with the reason, counted in
`stats["refused_entries"]`, recompiled and overwritten. A key file that is not the user's own or
that others can read or write is not used: the disk cache is then off, with a warning.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import hashlib
import hmac
import importlib.metadata
import json
import logging
import os
import secrets
import stat
import tempfile
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from legato.errors import CompileError, LegatoError
from legato.targets.bertha.elf import FORMAT_VERSION, read_elf


@dataclass
class StoredArtifacts:
    """Artifacts read back from the on-disk cache: the binary and the text stages the compile
    recorded (`texts`, by stage name; an entry stores only what was printed)."""

    binary: bytes
    texts: dict
    arg_access: list[str] | None = None  # the kernel's own signature, recorded at compile time
    warnings: list | None = None  # the compile's PerformanceWarnings: (message, file, line)


_ARTIFACT_TEXT = ("mlir", "core_ir", "backend_ir", "asm")
_memory_cache: dict[str, object] = {}
_cache_lock = threading.Lock()
stats: Counter = Counter()
""""compiles", "memory_hits", "disk_hits", "corrupt_entries" (damaged or refused: recompiled),
"refused_entries" (of those, the ones whose signature did not verify)."""
CACHE_FORMAT = 3  # 2: text stages optional (only those printed are stored); 3: HMAC-signed
log = logging.getLogger("legato.cache")


def cache_dir() -> Path:
    env = os.environ.get("LEGATO_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "legato"


def clear_memory_cache() -> None:
    with _cache_lock:
        _memory_cache.clear()


def memory_get(key: str):
    """The artifacts cached in this process under `key`, or None."""
    with _cache_lock:
        return _memory_cache.get(key)


def memory_put(key: str, artifacts) -> None:
    with _cache_lock:
        _memory_cache[key] = artifacts


def _entry_path(key: str) -> Path:
    return cache_dir() / key[:2] / f"{key}.json"


def validate_cached_binary(binary: bytes) -> None:
    """Raise unless the runtime's reader accepts `binary`: a binary it would refuse (damaged
    before the entry's checksum was taken, or by an older writer) is recompiled, not served."""
    read_elf(binary)


class CacheKeyError(LegatoError):
    """The cache's signing key cannot be used (not the user's own, readable by others, ...)."""


KEY_ENV = "LEGATO_CACHE_KEY"
KEY_BYTES = 32


def signing_key_path() -> Path:
    """Where the user's cache signing key lives: `$LEGATO_CACHE_KEY`, else `signing.key` in
    `cache_dir()`."""
    env = os.environ.get(KEY_ENV)
    return Path(env) if env else cache_dir() / "signing.key"


def _read_key(path: Path) -> bytes:
    """The key in `path`, refusing (CacheKeyError) a file that is a symlink, not a regular file,
    not owned by this user, accessible to group or others, or not `KEY_BYTES` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise CacheKeyError(f"cannot open the cache signing key {path}: {e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheKeyError(f"the cache signing key {path} is not a regular file")
        if st.st_uid != os.geteuid():
            raise CacheKeyError(
                f"the cache signing key {path} belongs to uid {st.st_uid}, not to this user "
                f"(uid {os.geteuid()})"
            )
        if st.st_mode & 0o077:
            raise CacheKeyError(
                f"the cache signing key {path} has mode {stat.S_IMODE(st.st_mode):04o}; "
                "it must be readable and writable by its owner only (0600)"
            )
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise CacheKeyError(
            f"the cache signing key {path} holds {len(key)} bytes, expected {KEY_BYTES}"
        )
    return key


def signing_key() -> bytes:
    """This user's cache signing key, created (mode 0600, atomically: a temporary file linked
    into place, so concurrent first uses agree on one key) when absent. CacheKeyError when the
    file cannot be used."""
    path = signing_key_path()
    if not os.path.lexists(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".key-")  # created 0600
            try:
                os.write(fd, secrets.token_bytes(KEY_BYTES))
                os.close(fd)
                with contextlib.suppress(FileExistsError):  # another process won the race
                    os.link(tmp, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        except OSError as e:
            raise CacheKeyError(f"cannot create the cache signing key {path}: {e}") from None
    return _read_key(path)


def _signature(key: bytes, payload: dict) -> str:
    return hmac.new(key, json.dumps(payload, sort_keys=True).encode(), hashlib.sha256).hexdigest()


class _Refused(Exception):
    """An entry this cache did not sign."""


def disk_load(key: str):
    """The entry stored under `key`, or None: absent, or damaged or not signed with this user's
    key (logged with the reason and counted in `stats`; the caller recompiles and overwrites)."""
    path = _entry_path(key)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    try:
        secret = signing_key()
    except CacheKeyError as e:
        warnings.warn(f"legato: the disk cache is off: {e}", stacklevel=3)
        return None
    try:
        entry = json.loads(blob)
        if entry.get("format") != CACHE_FORMAT:
            raise ValueError(f"cache format {entry.get('format')!r}, expected {CACHE_FORMAT}")
        payload = entry["payload"]
        mac = entry.get("hmac")
        if not isinstance(mac, str) or not hmac.compare_digest(mac, _signature(secret, payload)):
            raise _Refused(
                f"its signature does not verify with this user's key ({signing_key_path()})"
            )
        if payload["key"] != key:
            raise ValueError("key mismatch")
        texts = {name: payload[name] for name in _ARTIFACT_TEXT if name in payload}
        if not all(isinstance(t, str) for t in texts.values()):
            raise ValueError("a text stage is not a string")
        access = payload.get("arg_access")
        if access is not None and not (
            isinstance(access, list) and all(a in ("read", "write", "readwrite") for a in access)
        ):
            raise ValueError(f"arg_access is {access!r}")
        said = payload.get("warnings", [])
        if not (
            isinstance(said, list)
            and all(
                isinstance(w, list)
                and len(w) == 3
                and isinstance(w[0], str)
                and isinstance(w[1], str)
                and isinstance(w[2], int)
                for w in said
            )
        ):
            raise ValueError(f"warnings is {said!r}")
        stored = StoredArtifacts(
            base64.b64decode(payload["binary"], validate=True),
            texts,
            access,
            [tuple(w) for w in said],
        )
        validate_cached_binary(stored.binary)
        return stored
    except Exception as e:  # noqa: BLE001 - any damage means: recompile and overwrite
        stats["corrupt_entries"] += 1
        if isinstance(e, _Refused):
            stats["refused_entries"] += 1
            why = f"refused, not signed by this cache: {e}"
        else:
            why = f"damaged ({type(e).__name__}: {e})"
        log.warning("legato: JIT cache entry %s %s; recompiling", path, why)
        return None


def disk_store(key: str, artifacts) -> None:
    """Store `artifacts` under `key`, atomically; a cache that cannot be written only warns."""
    recorded = getattr(artifacts, "recorded", None)  # the compiler's Artifacts print lazily
    if recorded is not None:
        payload = recorded()
    else:
        payload = {name: getattr(artifacts, name) for name in _ARTIFACT_TEXT}
    payload["binary"] = base64.b64encode(bytes(artifacts.binary)).decode()
    if getattr(artifacts, "arg_access", None) is not None:
        payload["arg_access"] = list(artifacts.arg_access)
    if getattr(artifacts, "warnings", None):
        payload["warnings"] = [list(w) for w in artifacts.warnings]
    payload["key"] = key
    path = _entry_path(key)
    try:
        entry = {
            "format": CACHE_FORMAT,
            "hmac": _signature(signing_key(), payload),
            "payload": payload,
        }
    except CacheKeyError as e:
        warnings.warn(f"legato: the disk cache is off: {e}", stacklevel=3)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entry, f)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        warnings.warn(f"legato: cannot write the JIT cache entry {path}: {e}", stacklevel=3)


DEFAULT_LOCK_TIMEOUT = 600.0  # seconds; `$LEGATO_COMPILE_LOCK_TIMEOUT` overrides


def _lock_path(key: str) -> Path:
    return cache_dir() / "locks" / f"{key}.lock"


@contextlib.contextmanager
def compile_lock(key: str, what: str, timeout: float | None = None):
    """Hold the cache directory's lock for `key` (an exclusive `flock` on `locks/<key>.lock`):
    processes compiling the same kernel at once compile it once; the others wait here, then read
    the entry the first one stored. Waits at most `timeout` seconds (default
    `$LEGATO_COMPILE_LOCK_TIMEOUT`, else 600) and then raises a CompileError naming `what` (the
    kernel) and the lock file. A cache directory where no lock can be created is used unlocked
    (as an unwritable cache is: it only costs duplicate compiles). The lock files stay: removing
    one while another process waits on it would let a third process lock a new file at once."""
    if timeout is None:
        timeout = float(os.environ.get("LEGATO_COMPILE_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT))
    path = _lock_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise CompileError(
                        f"{what}: timed out after {timeout:g} s waiting for another process "
                        f"compiling the same kernel (lock {path})",
                        note="if no other process is compiling it, the lock is held by a hung "
                        "process; stop it, or raise $LEGATO_COMPILE_LOCK_TIMEOUT",
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename (no reader sees a part)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """A hash of the compiler's own sources (like Triton's), so an edited compiler never serves
    binaries an older one produced under the same version number."""
    root = Path(__file__).resolve().parent.parent  # the legato package
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "torch" in path.relative_to(root).parts[:1]:
            continue  # the torch integration does not change what a kernel compiles to
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


# The libraries whose versions can change what a kernel compiles to: xDSL (the IR, its printer and
# passes), numpy and ml_dtypes (constant folding, bf16 rounding of literals and of array globals).
KEY_LIBRARIES = ("xdsl", "numpy", "ml_dtypes")


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@functools.lru_cache(maxsize=1)
def library_versions() -> tuple[tuple[str, str], ...]:
    """The installed version of each of `KEY_LIBRARIES` (part of the cache key): an upgraded
    xDSL or numpy never serves a binary the older one produced."""
    return tuple((name, _distribution_version(name)) for name in KEY_LIBRARIES)


def binary_format_version() -> int:
    """The ELF format version the runtime reads (part of the cache key)."""
    return FORMAT_VERSION


def signed_entry(payload: dict) -> dict:
    """`payload` wrapped as a signed cache entry (the format `disk_load` verifies), for other
    records kept in the cache directory (autotune choices). CacheKeyError if the key is unusable."""
    return {"format": CACHE_FORMAT, "hmac": _signature(signing_key(), payload), "payload": payload}


def verified_payload(entry) -> dict | None:
    """The payload of a `signed_entry`, or None when it is not one or its signature does not
    verify with this user's key (logged). CacheKeyError if the key is unusable."""
    if not isinstance(entry, dict) or entry.get("format") != CACHE_FORMAT:
        return None
    payload, mac = entry.get("payload"), entry.get("hmac")
    if not isinstance(payload, dict) or not isinstance(mac, str):
        return None
    if not hmac.compare_digest(mac, _signature(signing_key(), payload)):
        stats["refused_entries"] += 1
        return None
    return payload
