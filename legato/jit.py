"""`@legato.compile`: the `Kernel` object, argument binding, the JIT cache and sessions.

A call `kernel(*args)` checks the arguments against the kernel's signature (dtype, rank, static
dims, dynamic dims against their bounds) before anything runs, converts them to numpy (bf16 through
`ml_dtypes`, bit for bit), compiles (or reuses a cached binary), runs the binary on the Bertha
runtime and writes results back into the caller's tensors in place. Non-contiguous tensors are
copied in and written back; an input may alias an output (the kernel reads the values at the
call); two written arguments sharing memory, or a read-only one, are refused before running.

Cache: in memory and on disk (`$LEGATO_CACHE_DIR`, default `~/.cache/legato`). The key hashes the
kernel's source, the source of every `@legato.function` (and plain helper) it reaches, the values
of the simple globals it reads, the argument types, constexpr values, the target's fingerprint and
`legato.__version__`; changing any of them recompiles. Entries are written atomically (a temporary
file, then a rename), so processes compiling the same kernel at once each write the same complete
entry and no reader sees a partial one; an entry that is truncated, not JSON, fails its checksum
or holds a binary the reader refuses is recompiled and overwritten.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import enum
import functools
import hashlib
import inspect
import json
import os
import tempfile
import threading
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from legato.context import CompileContext, compiling
from legato.errors import CompileError, LegatoError, LegatoRuntimeError
from legato.frontend.source import FunctionSource, LegatoFunction
from legato.model.compute_model import ComputeModel
from legato.types import TensorSpec, dtype_of

# --------------------------------------------------------------------------------------------
# Output types and sessions


class OutputType(enum.Enum):
    """The stage a `legato.session` writes out."""

    MLIR = "mlir"  # the legato dialect, as the frontend emits it
    CORE_IR = "core_ir"
    BACKEND_IR = "backend_ir"
    ASM = "asm"
    BINARY = "binary"  # the ELF

    @property
    def suffix(self) -> str:
        return _SUFFIX[self]


_SUFFIX = {
    OutputType.MLIR: ".mlir",
    OutputType.CORE_IR: ".core.mlir",
    OutputType.BACKEND_IR: ".backend.mlir",
    OutputType.ASM: ".s",
    OutputType.BINARY: ".elf",
}


@dataclass(frozen=True)
class Session:
    output_type: OutputType | None
    output_path: Path | None


_session: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "legato_session", default=None
)


@contextlib.contextmanager
def session(output_type: OutputType | str | None = None, output_path=None):
    """JIT options for the kernel calls inside the `with`: write stage `output_type` of every
    kernel called to `output_path/<kernel><suffix>` (the kernels still run)."""
    if isinstance(output_type, str):
        try:
            output_type = OutputType[output_type.upper()]
        except KeyError:
            raise LegatoError(
                f"unknown output_type {output_type!r}; expected one of "
                f"{', '.join(t.name for t in OutputType)}"
            ) from None
    if output_type is not None and not isinstance(output_type, OutputType):
        raise LegatoError(f"output_type must be a legato.OutputType, got {output_type!r}")
    if output_type is not None and output_path is None:
        output_path = "."
    token = _session.set(
        Session(output_type, Path(output_path) if output_path is not None else None)
    )
    try:
        yield _session.get()
    finally:
        _session.reset(token)


def current_session() -> Session | None:
    return _session.get()


# --------------------------------------------------------------------------------------------
# Language markers


class constexpr:
    """Annotation of a compile-time parameter: `n: legato.constexpr`. Its value is part of the
    cache key, and the kernel body sees it as a static Python value."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"


def static_range(*args):
    """`for i in legato.static_range(n):` unrolls at compile time (a plain `range` in Python)."""
    return range(*args)


static_range._legato_static_range = True


def core_id():
    """The index of the running core inside a `with device.get_all_cores():` region."""
    raise LegatoError("legato.core_id() only exists inside a @legato.compile kernel")


core_id._legato_op = "core_id"


def function(fn):
    """`@legato.function`: a helper written in Legato, inlined into the kernels that call it."""
    if isinstance(fn, LegatoFunction):
        return fn
    if not callable(fn):
        raise LegatoError("@legato.function decorates a function")
    return LegatoFunction(fn)


# --------------------------------------------------------------------------------------------
# Backends


def _bertha_evt0(ctx):
    from legato.model import bertha

    return bertha.evt0(ctx)


def _bertha_evt1(ctx):
    from legato.model import bertha

    return bertha.evt1(ctx)


_BACKENDS = {"bertha": _bertha_evt0, "bertha-evt0": _bertha_evt0, "bertha-evt1": _bertha_evt1}


def register_backend(name: str, factory) -> None:
    """Make `@legato.compile(backend=name)` use `factory(ctx) -> ComputeModel`."""
    _BACKENDS[name] = factory


def resolve_backend(backend):
    """A factory `fn(ctx) -> ComputeModel` for `backend` (factory, module with `get_model`, name,
    or a ComputeModel)."""
    if isinstance(backend, ComputeModel):
        return lambda ctx: backend
    if isinstance(backend, str):
        if backend not in _BACKENDS:
            raise LegatoError(
                f"unknown backend {backend!r}; registered backends: {', '.join(sorted(_BACKENDS))}"
            )
        return _BACKENDS[backend]
    if inspect.ismodule(backend):
        if not callable(getattr(backend, "get_model", None)):
            raise LegatoError(
                f"backend module {backend.__name__} has no get_model(ctx) to build its ComputeModel"
            )
        return backend.get_model
    if callable(backend):
        return backend
    raise LegatoError(
        f"backend must be a factory fn(ctx) -> ComputeModel, a module with get_model, or a "
        f"registered name ({', '.join(sorted(_BACKENDS))}); got {backend!r}"
    )


# --------------------------------------------------------------------------------------------
# Cache


@dataclass
class StoredArtifacts:
    """Artifacts read back from the on-disk cache: the binary and the text stages the compile
    recorded (`texts`, by stage name; an entry stores only what was printed)."""

    binary: bytes
    texts: dict


_ARTIFACT_TEXT = ("mlir", "core_ir", "backend_ir", "asm")
_memory_cache: dict[str, object] = {}
_cache_lock = threading.Lock()
stats: Counter = Counter()  # "compiles", "memory_hits", "disk_hits", "corrupt_entries"
CACHE_FORMAT = 2  # 2: text stages optional (only those printed are stored)


def cache_dir() -> Path:
    env = os.environ.get("LEGATO_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "legato"


def clear_memory_cache() -> None:
    with _cache_lock:
        _memory_cache.clear()


def _entry_path(key: str) -> Path:
    return cache_dir() / key[:2] / f"{key}.json"


def _validate_cached_binary(binary: bytes) -> None:
    """Raise unless the runtime's reader accepts `binary`: a binary it would refuse (damaged
    before the entry's checksum was taken, or by an older writer) is recompiled, not served."""
    from legato.targets.bertha.elf import read_elf

    read_elf(binary)


def _disk_load(key: str):
    path = _entry_path(key)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    try:
        entry = json.loads(blob)
        payload = entry["payload"]
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        if entry.get("format") != CACHE_FORMAT or entry.get("sha256") != digest:
            raise ValueError("checksum mismatch")
        if payload["key"] != key:
            raise ValueError("key mismatch")
        texts = {name: payload[name] for name in _ARTIFACT_TEXT if name in payload}
        if not all(isinstance(t, str) for t in texts.values()):
            raise ValueError("a text stage is not a string")
        stored = StoredArtifacts(base64.b64decode(payload["binary"], validate=True), texts)
        _validate_cached_binary(stored.binary)
        return stored
    except Exception:  # noqa: BLE001 - any damage means: recompile and overwrite
        stats["corrupt_entries"] += 1
        return None


def _disk_store(key: str, artifacts) -> None:
    recorded = getattr(artifacts, "recorded", None)  # the compiler's Artifacts print lazily
    if recorded is not None:
        payload = recorded()
    else:
        payload = {name: getattr(artifacts, name) for name in _ARTIFACT_TEXT}
    payload["binary"] = base64.b64encode(bytes(artifacts.binary)).decode()
    payload["key"] = key
    entry = {
        "format": CACHE_FORMAT,
        "sha256": hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest(),
        "payload": payload,
    }
    path = _entry_path(key)
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


def _write_atomic(path: Path, data: bytes) -> None:
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


# --------------------------------------------------------------------------------------------
# Arguments


@dataclass
class _BoundArg:
    """One tensor argument converted for the runtime; `writeback` copies results to the caller."""

    array: np.ndarray
    writeback: object | None  # callable or None when `array` shares the caller's memory


def _torch():
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    return torch


def _is_torch_tensor(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _shape_of(x) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


def _to_numpy(x, spec: TensorSpec) -> _BoundArg:
    """`x` (torch tensor or numpy array of `spec`'s dtype) as a C-contiguous numpy array."""
    if _is_torch_tensor(x):
        torch = _torch()
        t = x.detach()
        contiguous = t.is_contiguous()
        src = t if contiguous else t.contiguous()
        if src.dtype == torch.bfloat16:
            arr = src.view(torch.int16).numpy().view(spec.dtype.numpy)
        else:
            arr = src.numpy()
        if contiguous:
            return _BoundArg(arr, None)

        def writeback(arr=arr, t=t, torch=torch):
            if t.dtype == torch.bfloat16:
                back = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
            else:
                back = torch.from_numpy(arr)
            t.copy_(back.reshape(t.shape))

        return _BoundArg(arr, writeback)
    arr = x
    if arr.flags.c_contiguous and arr.flags.writeable:
        return _BoundArg(arr, None)
    copy = np.ascontiguousarray(arr).copy()
    if not arr.flags.writeable:
        return _BoundArg(copy, None)
    return _BoundArg(copy, lambda copy=copy, arr=arr: np.copyto(arr, copy))


def _numpy_view(x) -> np.ndarray:
    """A numpy array sharing `x`'s memory (any strides), for the runtime's aliasing checks."""
    if _is_torch_tensor(x):
        torch = _torch()
        t = x.detach()
        return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()
    return x


@dataclass(frozen=True)
class Param:
    """A kernel parameter: a tensor (`spec`) or a compile-time value (`constexpr`)."""

    name: str
    kind: str  # "tensor" | "constexpr"
    spec: TensorSpec | None = None
    default: object = inspect.Parameter.empty


# --------------------------------------------------------------------------------------------
# Kernel


class Kernel:
    """What `@legato.compile` returns. Call it with torch tensors or numpy arrays."""

    def __init__(self, fn, backend="bertha"):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.name = fn.__name__
        self.backend = backend
        self._factory = resolve_backend(backend)
        self.source = FunctionSource.of(fn)
        self.signature = inspect.signature(fn)
        self._model: ComputeModel | None = None
        self._params: list[Param] | None = None
        self._deps = None
        self.compile_count = 0
        self.last_run = None
        self.last_artifacts = None
        self.last_key: str | None = None

    def __repr__(self) -> str:
        return f"<legato.Kernel {self.name} at {self.where}>"

    @functools.cached_property
    def where(self) -> str:
        """`file:line` of the kernel's `def` (used in error messages; read on every call)."""
        loc = self.source.def_location
        return f"{loc.file}:{loc.line}"

    # -- target and signature ----------------------------------------------------------------

    @property
    def model(self) -> ComputeModel:
        """The target ComputeModel (the backend factory is called once)."""
        if self._model is None:
            ctx = CompileContext(None, self.name)
            model = self._factory(ctx)
            if not isinstance(model, ComputeModel):
                raise LegatoError(
                    f"backend {self.backend!r} of kernel {self.name} returned {model!r}, "
                    "not a ComputeModel"
                )
            self._model = model
        return self._model

    def _context(self) -> CompileContext:
        return CompileContext(self.model, self.name)

    @property
    def params(self) -> list[Param]:
        """The kernel's parameters with their evaluated annotations."""
        if self._params is None:
            from legato.frontend.codegen import kernel_params

            with compiling(self._context()) as ctx:
                self._params = kernel_params(self.source, ctx)
        return self._params

    # -- binding -------------------------------------------------------------------------------

    def _bind(self, args, kwargs):
        """(tensor args in order, constexpr values by name); raises on any mismatch."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            n_expected = len(self.params)
            raise LegatoRuntimeError(
                f"kernel {self.name} ({self.where}) takes {n_expected} argument(s) "
                f"({', '.join(p.name for p in self.params)}): {e}"
            ) from None
        bound.apply_defaults()
        tensors, constexprs = [], {}
        for p in self.params:
            value = bound.arguments[p.name]
            if p.kind == "constexpr":
                if isinstance(value, constexpr):
                    value = value.value
                constexprs[p.name] = value
            else:
                tensors.append((p, value))
        return tensors, constexprs

    def _check_tensor(self, p: Param, x) -> None:
        spec = p.spec
        what = f"argument '{p.name}' of kernel {self.name} ({self.where})"
        if not (_is_torch_tensor(x) or isinstance(x, np.ndarray)):
            raise LegatoRuntimeError(
                f"{what}: expected a torch tensor or numpy array of type {spec}, "
                f"got {type(x).__name__}"
            )
        if _is_torch_tensor(x) and x.device.type != "cpu":
            raise LegatoRuntimeError(f"{what}: tensor is on {x.device}; pass a CPU tensor")
        try:
            actual = dtype_of(x)
        except TypeError as e:
            raise LegatoRuntimeError(f"{what}: {e}; expected {spec.dtype.name}") from None
        if actual != spec.dtype:
            raise LegatoRuntimeError(
                f"{what}: dtype mismatch: expected {spec.dtype.name} ({_dtype_str(spec.dtype)}), "
                f"got {actual.name} ({x.dtype})"
            )
        shape = _shape_of(x)
        if len(shape) != spec.rank:
            raise LegatoRuntimeError(
                f"{what}: expected a rank-{spec.rank} tensor {spec}, got shape {shape}"
            )
        for i, (dim, n) in enumerate(zip(spec.dims, shape)):
            if dim.is_dynamic:
                if n > dim.bound:
                    raise LegatoRuntimeError(
                        f"{what}: dim {i} is {n}, above its declared upper bound {dim.bound} "
                        f"(type {spec}); the binary is sized for at most {dim.bound}"
                    )
            elif n != dim.size:
                raise LegatoRuntimeError(
                    f"{what}: dim {i} must be {dim.size} (type {spec}), got {n} (shape {shape})"
                )

    # -- cache key -----------------------------------------------------------------------------

    def cache_key(self, constexprs: dict | None = None) -> str:
        from legato import __version__
        from legato.frontend.deps import dependency_fingerprint

        if self._deps is None:
            self._deps = dependency_fingerprint(self.source)
        model = self.model
        blob = {
            "kernel": self.name,
            "source": self.source.text,
            "file": self.source.file,
            "deps": self._deps.fingerprint(),
            "params": [[p.name, p.kind, str(p.spec)] for p in self.params],
            "constexprs": sorted((k, repr(v)) for k, v in (constexprs or {}).items()),
            "target": [model.name, model.fingerprint()],
            "version": __version__,
            # A binary-format change must not serve stale binaries that the runtime refuses.
            "binary_format": _binary_format_version(),
            "compiler": _compiler_fingerprint(),
        }
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()

    # -- compile -------------------------------------------------------------------------------

    def emit_module(self, **constexprs):
        """The legato-dialect `builtin.module` of this kernel (the frontend's output)."""
        from legato.frontend.codegen import emit_kernel

        with compiling(self._context()) as ctx:
            return emit_kernel(self.source, self.params, constexprs, ctx)

    def to_mlir(self, *, debuginfo: bool = True, **constexprs) -> str:
        """The legato IR as text (with `loc(...)` locations when `debuginfo`)."""
        from legato.frontend.codegen import print_module

        return print_module(self.emit_module(**constexprs), debuginfo=debuginfo)

    def lower(self, stage: OutputType | str = OutputType.MLIR, *args, **kwargs):
        """The kernel at `stage`: text for MLIR/CORE_IR/BACKEND_IR/ASM, bytes for BINARY.
        MLIR comes straight from the frontend (with locations); later stages compile."""
        if isinstance(stage, str):
            stage = OutputType[stage.upper()]
        if stage is OutputType.MLIR:
            _, constexprs = self._bind_for_compile(args, kwargs)
            return self.to_mlir(**constexprs)
        artifacts = self.compile(*args, **kwargs)
        return (
            bytes(artifacts.binary)
            if stage is OutputType.BINARY
            else getattr(artifacts, stage.value)
        )

    def _artifacts(self, constexprs: dict):
        key = self.cache_key(constexprs)
        self.last_key = key
        with _cache_lock:
            hit = _memory_cache.get(key)
        if hit is not None:
            stats["memory_hits"] += 1
            return hit
        hit = _disk_load(key)
        if hit is not None:
            stats["disk_hits"] += 1
            hit = self._as_compiler_artifacts(hit, constexprs)
            with _cache_lock:
                _memory_cache[key] = hit
            return hit
        try:
            module = self.emit_module(**constexprs)
            sess = _session.get()
            if sess is not None and sess.output_type is OutputType.MLIR:
                # Written before the later stages run, so it is there even if they fail.
                from legato.frontend.codegen import print_module

                self._write_output(sess, print_module(module))
            try:
                from legato.compiler import compile_kernel
            except ImportError as e:
                raise LegatoError(f"the Legato compiler is not available: {e}") from None
            # Print only the stage the session writes; any other is printed when read.
            record = ()
            if sess is not None and sess.output_type not in (
                None,
                OutputType.MLIR,
                OutputType.BINARY,
            ):
                record = (sess.output_type.value,)
            artifacts = compile_kernel(
                module,
                self.model,
                self.name,
                record=record,
                source=functools.partial(self.emit_module, **constexprs),
            )
        except CompileError as e:
            # The message already points at the kernel's source line; the compiler's own frames
            # would only bury it, so the traceback ends here, under the user's call.
            raise e.with_traceback(None) from None
        self.compile_count += 1
        stats["compiles"] += 1
        with _cache_lock:
            _memory_cache[key] = artifacts
        _disk_store(key, artifacts)
        return artifacts

    def _as_compiler_artifacts(self, stored: StoredArtifacts, constexprs: dict):
        """The compiler's own Artifacts type for a disk-cache entry, when it can be built: it
        prints a stage the entry lacks from the frontend's module, when read."""
        try:
            from legato.compiler import Artifacts
        except ImportError:
            return stored
        return Artifacts(
            self.name,
            self.model,
            stored.binary,
            texts=stored.texts,
            source=functools.partial(self.emit_module, **constexprs),
        )

    def compile(self, *args, **kwargs):
        """Compile (or fetch from the cache) without running. Arguments are sample tensors/arrays,
        TensorSpecs (checked against the signature) or nothing; constexprs by value."""
        tensors, constexprs = self._bind_for_compile(args, kwargs)
        for p, x in tensors:
            if isinstance(x, TensorSpec):
                if x != p.spec:
                    raise LegatoRuntimeError(
                        f"argument '{p.name}' of kernel {self.name} ({self.where}): "
                        f"type {x} does not match the declared {p.spec}"
                    )
            elif x is not None:
                self._check_tensor(p, x)
        artifacts = self._artifacts(constexprs)
        self.last_artifacts = artifacts
        return artifacts

    def _bind_for_compile(self, args, kwargs):
        if not args and not kwargs:
            if any(
                p.kind == "constexpr" and p.default is inspect.Parameter.empty for p in self.params
            ):
                raise LegatoRuntimeError(
                    f"kernel {self.name} ({self.where}) has constexpr parameters: pass their "
                    "values to compile()"
                )
            return [(p, None) for p in self.params if p.kind == "tensor"], {
                p.name: p.default for p in self.params if p.kind == "constexpr"
            }
        return self._bind(args, kwargs)

    def _write_output(self, sess: Session, data) -> Path:
        path = sess.output_path / f"{self.name}{sess.output_type.suffix}"
        _write_atomic(path, data if isinstance(data, bytes) else data.encode())
        return path

    # -- call ----------------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        tensors, constexprs = self._bind(args, kwargs)
        for p, x in tensors:
            self._check_tensor(p, x)
        artifacts = self._artifacts(constexprs)
        self.last_artifacts = artifacts
        sess = _session.get()
        if sess is not None and sess.output_type is not None:
            if sess.output_type is OutputType.BINARY:
                self._write_output(sess, bytes(artifacts.binary))
            else:
                self._write_output(sess, getattr(artifacts, sess.output_type.value))
        bound = [_to_numpy(x, p.spec) for p, x in tensors]
        from legato.targets.bertha.abi import ABIError
        from legato.targets.bertha.runtime import run_binary

        try:
            result = run_binary(
                artifacts.binary,
                self.model,
                [b.array for b in bound],
                views=[_numpy_view(x) for _, x in tensors],
            )
        except ABIError as e:
            raise LegatoRuntimeError(f"kernel {self.name} ({self.where}): {e}") from None
        self.last_run = result
        for b in bound:
            if b.writeback is not None:
                b.writeback()

    _LEVELS = ("legato", "core", "backend")

    def interpret(self, *args, level: str = "legato", **kwargs):
        """Run the kernel with the interpreter of IR level `level` ("legato", "core" or
        "backend") instead of the emulator. Same argument handling as a call: torch tensors or
        numpy arrays, outputs written in place. Returns the interpreter's RunResult.

        The frontend's module is lowered in memory only as far as `level` (no binary, no text,
        no cache): `level="legato"` runs no compiler pass, so it works where a lowering fails."""
        if level not in self._LEVELS:
            raise LegatoError(
                f"unknown level {level!r}; expected one of {', '.join(self._LEVELS)} "
                "(call the kernel itself to run the binary on the emulator)"
            )
        tensors, constexprs = self._bind(args, kwargs)
        for p, x in tensors:
            self._check_tensor(p, x)
        from legato.compiler import lower
        from legato.interp import run

        try:
            module = self.emit_module(**constexprs)
            lower(module, self.model, level)
        except CompileError as e:
            raise e.with_traceback(None) from None
        result = run(module, level, [x for _, x in tensors], self.model)
        self.last_interp = result
        return result


@functools.lru_cache(maxsize=1)
def _compiler_fingerprint() -> str:
    """A hash of the compiler's own sources (like Triton's), so an edited compiler never serves
    binaries an older one produced under the same version number."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "torch" in path.relative_to(root).parts[:1]:
            continue  # the torch integration does not change what a kernel compiles to
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _binary_format_version() -> int:
    from legato.targets.bertha.elf import FORMAT_VERSION

    return FORMAT_VERSION


def _dtype_str(dtype) -> str:
    try:
        return str(dtype.torch)
    except Exception:  # noqa: BLE001
        return str(dtype.numpy)


def compile(fn=None, *, backend="bertha"):
    """`@legato.compile(backend=...)`: turn a Python function into a Legato kernel.

    `backend` is a factory `fn(ctx) -> ComputeModel`, a module with `get_model(ctx)` (such as
    `legato.model.bertha`), a registered name (`"bertha"`, `"bertha-evt1"`) or a ComputeModel.
    """
    if fn is not None and not callable(fn):
        raise LegatoError("@legato.compile decorates a function; did you mean @legato.compile()?")

    def decorate(f):
        if isinstance(f, (Kernel, LegatoFunction)):
            raise LegatoError(f"{f.__name__} is already a Legato kernel or function")
        return Kernel(f, backend=backend)

    return decorate(fn) if fn is not None else decorate
