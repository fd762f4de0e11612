"""`@legato.autotune`: choose a kernel's constexpr parameters by simulated cycles.

```python
@legato.autotune(configs=[legato.Config(tile=64), legato.Config(tile=128)], key=["x"])
@legato.compile(backend="bertha")
def k(x: T, out: T, tile: legato.constexpr): ...
```

The first call for a (kernel, target, shape bucket) compiles and runs every config (in a process
pool, at most `workers` at once), ranks the configs whose outputs agree with the reference by the
emulator's simulated cycles (deterministic: each config runs once) and drops, with the reason,
every config that fails to compile or run or whose outputs differ. The choice is kept in memory,
in the JIT cache directory (`<cache_dir>/autotune/`, signed with the cache's per-user key like a
cache entry) and, on request, in a results file (`export`) that a later install reads
(`results=` or `load`) without tuning. Later calls run the chosen config.

What the choice is keyed by (`Autotuner._identity`, hashed by `tuning_key`): the kernel (name, source, the dependencies its cache
key hashes, the argument types), the target (name and ComputeModel fingerprint), the declared
configs, the constexpr values the call fixes and the shape bucket of the `key=` arguments (each
dim rounded up to a power of two). The compiler version is recorded, not keyed: every config
computes the same result, so a choice made by an older compiler is still a correct one (retune
with `tune()` to make it the fastest again).

The engine under the decorator (`Candidate`, `run_candidates`, `choose`, `ResultStore`) is also
what `bench/` uses to tune kernels whose search space changes the argument layout (a GEMV's
weight tiling): a candidate there is any zero-argument function that compiles, runs and returns
its cycles and outputs.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from legato.arrays import is_torch_tensor, torch_to_numpy
from legato.errors import LegatoError
from legato.jit import cache
from legato.version import __version__

FILE_FORMAT = "legato-autotune-1"


class AutotuneError(LegatoError):
    """A tuning that cannot be done: a bad declaration (empty configs, a key naming no argument)
    or a call where every config failed. The message starts with the user's `file:line`."""


class Config(dict):
    """One point of a search space: constexpr parameter values by name,
    `legato.Config(tile=64, split=2)`. A dict; its values must be JSON values (numbers, strings,
    booleans, None) so that a choice can be stored and shipped as a file."""

    def __init__(self, values: Mapping | None = None, /, **kwargs):
        super().__init__({**(values or {}), **kwargs})

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self.items()) + ")"

    def __hash__(self):  # a dict is unhashable; configs are compared by value
        return hash(canonical(self))


def canonical(config: Mapping) -> str:
    return json.dumps(dict(config), sort_keys=True)


def _user_line(depth: int = 2) -> str:
    """`file:line` of the user's code `depth` frames up (the decorator or the call)."""
    frame = sys._getframe(depth)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


# -- candidates and their outcomes ------------------------------------------------------------


@dataclass
class Candidate:
    """One config to try: `run()` compiles and runs it and returns (simulated cycles, outputs by
    name as numpy arrays). Runs in a forked worker process: it may be any callable (a closure)."""

    config: dict
    run: Callable[[], tuple[int, dict[str, np.ndarray]]]


@dataclass
class Outcome:
    config: dict
    cycles: int | None = None
    outputs: dict[str, np.ndarray] | None = None
    error: str | None = None  # why it failed to compile or run


@dataclass
class Row:
    config: dict
    status: str  # "best", "ok", "wrong" (outputs differ), "failed" (compile or run)
    cycles: int | None
    reason: str = ""


@dataclass
class TuneReport:
    """What a tuning found: one row per config in declaration order. `str(report)` is a table."""

    what: str
    rows: list[Row]
    reference: str  # what the outputs were checked against

    @property
    def best(self) -> Row:
        return next(r for r in self.rows if r.status == "best")

    @property
    def dropped(self) -> list[Row]:
        return [r for r in self.rows if r.status in ("wrong", "failed")]

    def __str__(self) -> str:
        lines = [f"autotune {self.what}: outputs checked against {self.reference}"]
        for r in self.rows:
            cyc = f"{r.cycles:>10}" if r.cycles is not None else " " * 10
            mark = "*" if r.status == "best" else " "
            line = f" {mark} {canonical(r.config):<40} {cyc}  {r.status}"
            reason = r.reason.replace("\n", "\n      ")
            lines.append(line + (f": {reason}" if reason else ""))
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {
            "what": self.what,
            "reference": self.reference,
            "rows": [
                {"config": r.config, "status": r.status, "cycles": r.cycles, "reason": r.reason}
                for r in self.rows
            ],
        }


# The candidates of the running tuning, read by forked workers by index (a fork inherits them:
# closures and Kernel objects need no pickling).
_JOBS: list[Candidate] = []
_jobs_lock = threading.Lock()


def _run_job(i: int) -> Outcome:
    cand = _JOBS[i]
    try:
        cycles, outputs = cand.run()
        return Outcome(cand.config, int(cycles), outputs)
    except LegatoError as e:
        return Outcome(cand.config, error=f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - a failing candidate is reported, not raised
        return Outcome(cand.config, error=f"{type(e).__name__}: {e}")


def default_workers(n: int) -> int:
    """At most 2 worker processes (`$LEGATO_AUTOTUNE_WORKERS` overrides), never more than the
    CPUs or the candidates."""
    env = os.environ.get("LEGATO_AUTOTUNE_WORKERS")
    cap = int(env) if env else 2
    return max(1, min(cap, os.cpu_count() or 1, n))


def run_candidates(candidates: Sequence[Candidate], workers: int | None = None) -> list[Outcome]:
    """Run every candidate, `workers` at a time in forked processes (1: in this process), and
    return their outcomes in order. A worker that dies fails its candidate, not the tuning."""
    workers = default_workers(len(candidates)) if workers is None else max(1, workers)
    with _jobs_lock:
        _JOBS[:] = list(candidates)
        try:
            # forked workers inherit the candidates (closures need no pickling); where there
            # is no fork, the candidates run here, one after another
            no_fork = "fork" not in multiprocessing.get_all_start_methods()
            if workers == 1 or len(candidates) == 1 or no_fork:
                return [_run_job(i) for i in range(len(candidates))]
            ctx = multiprocessing.get_context("fork")
            outcomes = []
            with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
                futures = [pool.submit(_run_job, i) for i in range(len(candidates))]
                for cand, fut in zip(candidates, futures, strict=True):
                    try:
                        outcomes.append(fut.result())
                    except Exception as e:  # noqa: BLE001 - e.g. BrokenProcessPool
                        outcomes.append(Outcome(cand.config, error=f"worker process failed: {e!r}"))
            return outcomes
        finally:
            _JOBS.clear()


def _compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """Why `got` is not `want` within tolerance, or None."""
    if got.shape != want.shape:
        return f"output '{name}' has shape {got.shape}, the reference {want.shape}"
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return None
    err = np.where(bad, np.abs(g - w), 0.0)
    at = np.unravel_index(int(np.nanargmax(err)), err.shape) if err.size else ()
    return (
        f"output '{name}' differs from the reference in {int(bad.sum())} of {g.size} elements "
        f"(rtol={rtol:g}, atol={atol:g}); worst at {tuple(int(i) for i in at)}: "
        f"{float(g[at]):g} instead of {float(w[at]):g}"
    )


def choose(
    what: str,
    outcomes: Sequence[Outcome],
    reference: Mapping[str, np.ndarray] | None = None,
    rtol: float = 2e-2,
    atol: float = 2e-2,
    reference_what: str = "the reference function",
) -> TuneReport:
    """Rank `outcomes`: drop the failed ones and those whose outputs differ from `reference`
    (None: the outputs of the first config that ran), and mark the one with the fewest cycles
    (the first of equals, in declaration order) "best". Raises AutotuneError if none is left."""
    ran = [o for o in outcomes if o.error is None]
    if reference is None:
        ref_from = ran[0] if ran else None
        ref = ref_from.outputs if ref_from is not None else {}
        ref_what = f"the first config that ran, {canonical(ref_from.config)}" if ran else "-"
    else:
        ref, ref_what = dict(reference), reference_what
    rows = []
    for o in outcomes:
        if o.error is not None:
            rows.append(Row(o.config, "failed", None, o.error))
            continue
        why = None
        for name, want in ref.items():
            if name not in o.outputs:
                why = f"output '{name}' was not produced"
            else:
                why = _compare(name, o.outputs[name], np.asarray(want), rtol, atol)
            if why:
                break
        rows.append(Row(o.config, "wrong" if why else "ok", o.cycles, why or ""))
    ok = [r for r in rows if r.status == "ok"]
    report = TuneReport(what, rows, ref_what)
    if not ok:
        raise AutotuneError(f"{what}: every config failed or computed a wrong result:\n{report}")
    min(ok, key=lambda r: r.cycles).status = "best"  # min keeps the first of equals
    return report


# -- stored choices ------------------------------------------------------------------------------


def _record_path(key: str) -> Path:
    return cache.cache_dir() / "autotune" / key[:2] / f"{key}.json"


@dataclass
class ResultStore:
    """The choices of one search space, by tuning key: in memory, in the signed cache directory
    and in results files. A choice read from anywhere must be one of `configs` (a file cannot
    make a kernel run a config its author did not declare)."""

    configs: list[dict]
    files: list[Path] = field(default_factory=list)
    memory: dict[str, dict] = field(default_factory=dict)  # key -> record
    _from_files: dict[str, dict] | None = None

    def _valid(self, record) -> bool:
        return (
            isinstance(record, dict)
            and isinstance(record.get("config"), dict)
            and canonical(record["config"]) in {canonical(c) for c in self.configs}
        )

    def lookup(self, key: str) -> tuple[dict, str] | None:
        """(record, where it came from: "memory", "cache" or the file) or None."""
        if key in self.memory:
            return self.memory[key], "memory"
        record = self._disk_load(key)
        if record is not None:
            self.memory[key] = record
            return record, "cache"
        for path, records in self._file_records().items():
            record = records.get(key)
            if record is not None and self._valid(record):
                self.memory[key] = record
                return record, str(path)
        return None

    def _file_records(self) -> dict[Path, dict]:
        if self._from_files is None:
            self._from_files = {}
            for path in self.files:
                if path.exists():
                    self._from_files[path] = read_results(path)
        return self._from_files

    def add_file(self, path: Path) -> int:
        """Read results file `path` now; returns how many of its records are for this space."""
        records = read_results(path)
        self._file_records()[path] = records
        if path not in self.files:
            self.files.append(path)
        return sum(1 for r in records.values() if self._valid(r))

    def _disk_load(self, key: str) -> dict | None:
        path = _record_path(key)
        try:
            entry = json.loads(path.read_bytes())
            payload = cache.verified_payload(entry)
        except (OSError, ValueError, cache.CacheKeyError):
            return None
        if payload is None or payload.get("key") != key or not self._valid(payload):
            cache.log.warning("legato: autotune record %s refused or damaged; retuning", path)
            return None
        return payload

    def store(self, key: str, record: dict) -> None:
        record = {**record, "key": key}
        self.memory[key] = record
        try:
            entry = cache.signed_entry(record)
            cache.write_atomic(_record_path(key), json.dumps(entry).encode())
        except (OSError, cache.CacheKeyError) as e:
            cache.log.warning("legato: cannot store the autotune record %s: %s", key, e)


def read_results(path: Path | str) -> dict[str, dict]:
    """The records of results file `path` by key. A file that is not a results file is an
    AutotuneError naming it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FILE_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {FILE_FORMAT!r}")
        return {r["key"]: r for r in data["records"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise AutotuneError(f"{path}: not a legato autotune results file ({e})") from None


def write_results(path: Path | str, records: Sequence[dict], merge: bool = True) -> None:
    """Write `records` to results file `path` (atomically); with `merge`, records of other keys
    already in the file are kept."""
    path = Path(path)
    old = read_results(path) if merge and path.exists() else {}
    for r in records:
        old[r["key"]] = r
    data = {"format": FILE_FORMAT, "records": [old[k] for k in sorted(old)]}
    cache.write_atomic(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
    path.chmod(0o644)  # a file to ship: readable by others (the temporary file was 0600)


def tuning_key(identity: Mapping) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=repr).encode()).hexdigest()


def record_of(report: TuneReport, identity: Mapping) -> dict:
    best = report.best
    return {
        "what": report.what,
        "identity": identity,
        "config": best.config,
        "cycles": best.cycles,
        "report": report.as_dict(),
        "legato": __version__,
        "compiler": cache.compiler_fingerprint(),
    }


# -- the decorator ------------------------------------------------------------------------------


def _bucket(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _host_array(x) -> np.ndarray:
    """A private numpy copy of tensor or array `x` (bf16 bit for bit)."""
    if is_torch_tensor(x):
        return torch_to_numpy(x)[0].copy()
    return np.array(x, copy=True)


class Autotuner:
    """What `@legato.autotune(...)` returns: call it like the kernel, without the tuned
    parameters. `report` is the last tuning's TuneReport (or the stored one), `best_config` the
    config the last call ran; other attributes (`last_run`, `model`, ...) are the kernel's."""

    def __init__(self, kernel, configs, key, reference, outputs, rtol, atol, workers, results, at):
        self.kernel = kernel
        self.configs = configs
        self.key = list(key)
        self.reference = reference
        self.outputs = list(outputs) if outputs is not None else None
        self.rtol, self.atol = rtol, atol
        self.workers = workers
        self.at = at  # the decorator's file:line
        self.__name__ = kernel.__name__
        self.__doc__ = kernel.__doc__
        self.__wrapped__ = kernel
        base = Path(kernel.source.file).parent
        files = [results] if isinstance(results, (str, Path)) else list(results or ())
        self.store = ResultStore(configs, [base / Path(f) for f in files])
        self.report: TuneReport | None = None
        self.best_config: dict | None = None
        self.tune_count = 0
        self._checked = False

    def __getattr__(self, name):  # last_run, model, compile_count, ... are the kernel's
        if name == "kernel":
            raise AttributeError(name)
        return getattr(self.kernel, name)

    def __repr__(self) -> str:
        return f"<legato.Autotuner {self.__name__} over {len(self.configs)} configs at {self.at}>"

    def _error(self, msg: str) -> AutotuneError:
        return AutotuneError(f"{self.at}: error: @legato.autotune of {self.__name__}: {msg}")

    def _check_params(self) -> None:
        """The configs name constexpr parameters and the key names parameters (needs the
        kernel's evaluated annotations, so done at the first call)."""
        if self._checked:
            return
        kinds = {p.name: p.kind for p in self.kernel.params}
        for c in self.configs:
            for name in c:
                if kinds.get(name) != "constexpr":
                    what = "a tensor" if name in kinds else "no"
                    raise self._error(
                        f"config {c!r} sets '{name}', which is {what} parameter; configs set "
                        "constexpr parameters ("
                        + ", ".join(n for n, k in kinds.items() if k == "constexpr")
                        + ")"
                    )
        tuned = {n for c in self.configs for n in c}
        for name in self.key:
            if name in tuned:
                raise self._error(f"key '{name}' is a tuned parameter (set by the configs)")
        for name in self.outputs or ():
            if kinds.get(name) != "tensor":
                raise self._error(f"outputs names '{name}', which is not a tensor parameter")
        self._checked = True

    def _split(self, args, kwargs):
        """(bound arguments without the tuned ones, by name) for a user call."""
        tuned = {n for c in self.configs for n in c}
        for name in tuned & set(kwargs):
            raise LegatoError(
                f"{_user_line(3)}: {self.__name__}: '{name}' is chosen by @legato.autotune "
                f"({self.at}); do not pass it"
            )
        sig = self.kernel.signature
        try:
            bound = sig.bind_partial(*args, **kwargs)
        except TypeError as e:
            raise LegatoError(f"{self.__name__} ({self.kernel.where}): {e}") from None
        for name in tuned & set(bound.arguments):
            raise LegatoError(
                f"{_user_line(3)}: {self.__name__}: '{name}' is chosen by @legato.autotune "
                f"({self.at}); do not pass it"
            )
        return dict(bound.arguments)

    def _identity(self, given: dict) -> dict:
        k = self.kernel
        if k._deps is None:
            from legato.frontend.deps import dependency_fingerprint

            k._deps = dependency_fingerprint(k.source)
        params = {p.name: p for p in k.params}
        tuned = {n for c in self.configs for n in c}
        fixed = {}
        for p in k.params:  # constexprs the call fixes (given or default) define the kernel
            if p.kind == "constexpr" and p.name not in tuned:
                v = given.get(p.name, p.default)
                fixed[p.name] = repr(getattr(v, "value", v))
        bucket = {}
        for name in self.key:
            p = params[name]
            if p.kind == "tensor":
                x = given.get(name)
                bucket[name] = [_bucket(d) for d in getattr(x, "shape", ())]
            else:
                bucket[name] = fixed.get(name)
        model = k.model
        return {
            "kernel": k.name,
            "source": hashlib.sha256(k.source.text.encode()).hexdigest(),
            "deps": k._deps.fingerprint(),
            "params": [[p.name, p.kind, str(p.spec)] for p in k.params],
            "target": [model.name, model.fingerprint()],
            "configs": sorted(canonical(c) for c in self.configs),
            "fixed": fixed,
            "bucket": bucket,
        }

    def _candidate(self, given: dict, config: dict) -> Candidate:
        kernel, tensor_names = (
            self.kernel,
            [p.name for p in self.kernel.params if p.kind == "tensor"],
        )
        outputs = self.outputs

        def run():
            call = {n: (_host_array(v) if n in tensor_names else v) for n, v in given.items()}
            kernel(**call, **config)
            access = getattr(kernel.last_artifacts, "arg_access", None) or ["readwrite"] * len(
                tensor_names
            )
            names = outputs or [n for n, a in zip(tensor_names, access) if a != "read"]
            return kernel.last_run.cycles, {n: call[n] for n in names}

        return Candidate(dict(config), run)

    def _reference_outputs(self, given: dict, outcomes: Sequence[Outcome]) -> dict:
        """The user reference's outputs by name (the names of the outputs the candidates
        produced when it returns a tuple or one array)."""
        tensor_names = [p.name for p in self.kernel.params if p.kind == "tensor"]
        call = {n: (_host_array(v) if n in tensor_names else v) for n, v in given.items()}
        got = self.reference(**call)
        ran = next((o for o in outcomes if o.error is None), None)
        names = self.outputs or (list(ran.outputs) if ran is not None else [])
        if isinstance(got, Mapping):
            pairs = dict(got)
        elif isinstance(got, (tuple, list)):
            pairs = dict(zip(names, got, strict=False))
        elif len(names) == 1:
            pairs = {names[0]: got}
        else:
            raise self._error(
                f"the reference returned one array but the kernel writes {len(names)} "
                f"arguments ({', '.join(names)}): name one with outputs=[...] or return a dict"
            )
        return {n: _host_array(v) for n, v in pairs.items()}

    def tune(self, *args, **kwargs) -> TuneReport:
        """Tune for these arguments now (whatever is stored), store the choice, and return the
        report. The arguments are not written."""
        self._check_params()
        given = self._split(args, kwargs)
        return self._tune(given, self._identity(given))

    def _tune(self, given: dict, identity: dict) -> TuneReport:
        what = f"{self.__name__} ({self.at}) on {self.kernel.model.name}"
        outcomes = run_candidates([self._candidate(given, c) for c in self.configs], self.workers)
        ref = None
        if self.reference is not None:
            ref = self._reference_outputs(given, outcomes)
        try:
            report = choose(what, outcomes, ref, self.rtol, self.atol)
        except AutotuneError as e:
            raise AutotuneError(f"{self.at}: error: {e}") from None
        self.tune_count += 1
        self.report = report
        self.store.store(tuning_key(identity), record_of(report, identity))
        return report

    def best(self, *args, **kwargs) -> dict:
        """The config a call with these arguments runs (tuning first if none is stored)."""
        self._check_params()
        given = self._split(args, kwargs)
        return self._best(given)

    def _best(self, given: dict) -> dict:
        identity = self._identity(given)
        found = self.store.lookup(tuning_key(identity))
        if found is None:
            return self._tune(given, identity).best.config
        record, where = found
        self.report = _report_from(record, where)
        return dict(record["config"])

    def __call__(self, *args, **kwargs):
        self._check_params()
        given = self._split(args, kwargs)
        config = self._best(given)
        self.best_config = config
        return self.kernel(**given, **config)

    def load(self, path) -> int:
        """Read results file `path` (a later `export`'s output); returns how many of its records
        are for this kernel's configs. Its choices serve calls without tuning."""
        return self.store.add_file(Path(path))

    def export(self, path, merge: bool = True) -> int:
        """Write every choice this tuner made or read in this process to results file `path`
        (keeping the file's other records with `merge`); returns how many were written."""
        records = list(self.store.memory.values())
        write_results(path, records, merge)
        return len(records)


def _report_from(record: dict, where: str) -> TuneReport:
    data = record.get("report") or {}
    rows = [
        Row(r["config"], r["status"], r.get("cycles"), r.get("reason", ""))
        for r in data.get("rows", ())
    ] or [Row(record["config"], "best", record.get("cycles"))]
    return TuneReport(
        f"{data.get('what', record.get('what', '?'))} (stored, from {where})",
        rows,
        data.get("reference", "?"),
    )


def autotune(
    configs: Sequence[Mapping],
    key: Sequence[str] = (),
    *,
    reference: Callable | None = None,
    outputs: Sequence[str] | None = None,
    rtol: float = 2e-2,
    atol: float = 2e-2,
    workers: int | None = None,
    results=None,
):
    """`@legato.autotune(configs=[...], key=[...])` above `@legato.compile`: choose the kernel's
    constexpr parameters among `configs` (`legato.Config(...)` or dicts) by simulated cycles.

    `key`: parameters whose values select a separate tuning (a tensor by its shape rounded up to
    powers of two, a constexpr by value; constexprs not tuned always do). `reference`: a function
    called like the kernel (on copies, without the tuned parameters) returning the expected
    outputs (one array, a tuple in `outputs` order, or a dict by name); default: the outputs of
    the first config that runs. `outputs`: the written arguments compared (default: every
    argument the kernel writes). `rtol`/`atol`: the tolerance (`numpy.isclose`). `workers`:
    processes compiling and running candidates at once (default at most 2). `results`: a
    results file (or several; relative to the kernel's file) read for choices before tuning.
    """
    at = _user_line()
    configs = [Config(c) for c in configs] if configs is not None else []
    if not configs:
        raise AutotuneError(f"{at}: error: @legato.autotune needs at least one config")
    for c in configs:
        try:
            if json.loads(canonical(c)) != dict(c):
                raise TypeError("does not survive JSON")
        except (TypeError, ValueError):
            raise AutotuneError(
                f"{at}: error: config {c!r}: values must be numbers, strings, booleans or None"
            ) from None
    if len({canonical(c) for c in configs}) != len(configs):
        raise AutotuneError(f"{at}: error: @legato.autotune lists a config twice")
    if isinstance(key, str):
        key = [key]

    def decorate(kernel):
        if not getattr(kernel, "_legato_kernel", False):
            raise AutotuneError(
                f"{at}: error: @legato.autotune decorates a @legato.compile kernel; put it "
                f"above @legato.compile (got {kernel!r})"
            )
        names = list(kernel.signature.parameters)
        for name in key:
            if name not in names:
                raise AutotuneError(
                    f"{at}: error: key '{name}' names no argument of {kernel.__name__} "
                    f"({', '.join(names)})"
                )
        return Autotuner(kernel, configs, key, reference, outputs, rtol, atol, workers, results, at)

    return decorate


def candidate_outputs(args: Sequence, names: Sequence[str]) -> dict[str, np.ndarray]:
    """`{name: a private numpy copy of args[i]}`, for a Candidate built by hand."""
    return {n: _host_array(a) for n, a in zip(names, args, strict=True)}


__all__ = [
    "AutotuneError",
    "Autotuner",
    "Candidate",
    "Config",
    "Outcome",
    "ResultStore",
    "TuneReport",
    "autotune",
    "choose",
    "read_results",
    "run_candidates",
    "tuning_key",
    "write_results",
]
