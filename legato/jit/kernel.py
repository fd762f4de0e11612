"""`@legato.compile`: the `Kernel` object.

A call `kernel(*args)` checks the arguments against the kernel's signature (dtype, rank, static
dims, dynamic dims against their bounds) before anything runs, converts them to numpy (bf16 through
`ml_dtypes`, bit for bit), compiles (or reuses a cached binary, `legato.jit.cache`), runs the
binary on the Bertha runtime and writes results back into the caller's tensors in place.
Non-contiguous tensors are copied in and written back; an input may alias an output (the kernel
reads the values at the call); two written arguments sharing memory, or a read-only one, are
refused before running.

The cache key hashes the kernel's source, the source of every `@legato.function` (and plain
helper) it reaches, the values of the simple globals it reads, the argument types, constexpr
values, the target's fingerprint, `legato.__version__` and the versions of xDSL, numpy and
ml_dtypes; changing any of them recompiles.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import warnings
from pathlib import Path

from legato import compiler
from legato.arrays import numpy_view
from legato.binding import bind, check_tensor
from legato.context import CompileContext, compiling
from legato.errors import (
    ArgumentError,
    CompileError,
    LegatoError,
    LegatoValueError,
    PerformanceWarning,
)
from legato.frontend.codegen import emit_kernel, kernel_params, print_module
from legato.frontend.deps import dependency_fingerprint
from legato.frontend.language import Param, constexpr
from legato.frontend.source import FunctionSource, LegatoFunction
from legato.jit import cache, repro
from legato.jit.session import OutputType, Session, current_session
from legato.model.compute_model import ComputeModel
from legato.model.targets import resolve_backend
from legato.targets.bertha import runtime
from legato.targets.bertha.abi import ABIError
from legato.targets.bertha.emulator import PROFILER
from legato.types import TensorSpec
from legato.version import __version__


class Kernel:
    """What `@legato.compile` returns. Call it with torch tensors or numpy arrays."""

    _legato_kernel = True  # how the frontend (a layer below) recognizes a kernel called in a kernel

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
        self._own_key = ""  # set with _deps: the hash of the key's parts fixed for this Kernel
        self.compile_count = 0
        self.last_run = None
        self.last_artifacts = None
        self.last_key: str | None = None
        # arguments the kernel writes are mapped into the emulator, not copied in and back
        # (`runtime.run_binary(map_written=)`): set it for kernels that update a large tensor
        # in a few places (a paged KV cache)
        self.map_written = False

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
            raise ArgumentError(
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
        check_tensor(p.spec, x, f"argument '{p.name}' of kernel {self.name} ({self.where})")

    # -- cache key -----------------------------------------------------------------------------

    def cache_key(self, constexprs: dict | None = None) -> str:
        if self._deps is None:
            self._deps = dependency_fingerprint(self.source)
            # What cannot change for this Kernel, hashed once (a cached call computes the key).
            own = {
                "kernel": self.name,
                "source": self.source.text,
                "file": self.source.file,
                # the binary's line table names source lines: a kernel moved in its file
                # recompiles
                "line": self.source.def_location.line,
                "params": [[p.name, p.kind, str(p.spec)] for p in self.params],
            }
            self._own_key = hashlib.sha256(json.dumps(own, sort_keys=True).encode()).hexdigest()
        model = self.model
        blob = {
            "kernel": self._own_key,
            "deps": self._deps.fingerprint(),
            "constexprs": sorted((k, repr(v)) for k, v in (constexprs or {}).items()),
            "target": [model.name, model.fingerprint()],
            "version": __version__,
            # A binary-format change must not serve stale binaries that the runtime refuses.
            "binary_format": cache.binary_format_version(),
            "compiler": cache.compiler_fingerprint(),
            "libraries": cache.library_versions(),
        }
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()

    # -- compile -------------------------------------------------------------------------------

    def emit_module(self, **constexprs):
        """The legato-dialect `builtin.module` of this kernel (the frontend's output)."""
        with compiling(self._context()) as ctx, compiler.gc_paused():
            module = emit_kernel(self.source, self.params, constexprs, ctx)
        return compiler.remember_source(module, functools.partial(self.emit_module, **constexprs))

    def to_mlir(self, *, debuginfo: bool = True, **constexprs) -> str:
        """The legato IR as text (with `loc(...)` locations when `debuginfo`)."""
        return print_module(self.emit_module(**constexprs), debuginfo=debuginfo)

    def lower(self, stage: OutputType | str = OutputType.MLIR, *args, **kwargs):
        """The kernel at `stage`: text for MLIR/CORE_IR/BACKEND_IR/ASM, bytes for BINARY.
        MLIR comes straight from the frontend (with locations); later stages compile."""
        if isinstance(stage, str):
            stage = _stage_named(stage)
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
        hit = cache.memory_get(key)
        if hit is not None:
            cache.stats["memory_hits"] += 1
            return hit
        # Looked up under the key's lock: a process that finds another compiling this kernel
        # waits for it and then reads its entry instead of compiling it again.
        with cache.compile_lock(key, f"kernel {self.name} ({self.where})"):
            return self._load_or_compile(key, constexprs)

    def _load_or_compile(self, key: str, constexprs: dict):
        hit = cache.disk_load(key)
        if hit is not None:
            cache.stats["disk_hits"] += 1
            # what the compile warned (a spill) is said again: a later run of the script is
            # as slow as the first, and should say why
            _replay((m, PerformanceWarning, f, n) for m, f, n in hit.warnings or ())
            hit = self._as_compiler_artifacts(hit, constexprs)
            cache.memory_put(key, hit)
            return hit
        try:
            module = self.emit_module(**constexprs)
            sess = current_session()
            if sess is not None and sess.output_type is OutputType.MLIR:
                # Written before the later stages run, so it is there even if they fail.
                self._write_output(sess, print_module(module))
            # through the module: tests put a fake toolchain in its place
            # Print only the stage the session writes; any other is printed when read.
            record = ()
            if sess is not None and sess.output_type not in (
                None,
                OutputType.MLIR,
                OutputType.BINARY,
            ):
                record = (sess.output_type.value,)
            with warnings.catch_warnings(record=True) as caught:
                # every PerformanceWarning recorded (for the cache entry), whatever the
                # caller's filters; said below under them
                warnings.simplefilter("always", PerformanceWarning)
                artifacts = compiler.compile_kernel(
                    module,
                    self.model,
                    self.name,
                    record=record,
                    source=functools.partial(self.emit_module, **constexprs),
                )
            _replay((w.message, w.category, w.filename, w.lineno) for w in caught)
            artifacts.warnings = [
                (str(w.message), w.filename, w.lineno)
                for w in caught
                if issubclass(w.category, PerformanceWarning)
            ]
        except CompileError as e:
            repro.compile_failed(self, constexprs, e)  # $LEGATO_REPRO: the bug report's folder
            # The message already points at the kernel's source line; the compiler's own frames
            # would only bury it, so the traceback ends here, under the user's call.
            raise e.with_traceback(None) from None
        except Exception as e:  # an internal error: the report's folder matters most here
            repro.compile_failed(self, constexprs, e)
            raise
        self.compile_count += 1
        cache.stats["compiles"] += 1
        cache.memory_put(key, artifacts)
        cache.disk_store(key, artifacts)
        return artifacts

    def _as_compiler_artifacts(self, stored: cache.StoredArtifacts, constexprs: dict):
        """The compiler's own Artifacts type for a disk-cache entry: it prints a stage the entry
        lacks from the frontend's module, when read."""
        return compiler.Artifacts(
            self.name,
            self.model,
            stored.binary,
            texts=stored.texts,
            source=functools.partial(self.emit_module, **constexprs),
            arg_access=stored.arg_access,
        )

    def compile(self, *args, **kwargs):
        """Compile (or fetch from the cache) without running. Arguments are sample tensors/arrays,
        TensorSpecs (checked against the signature) or nothing; constexprs by value."""
        tensors, constexprs = self._bind_for_compile(args, kwargs)
        for p, x in tensors:
            if isinstance(x, TensorSpec):
                if x != p.spec:
                    raise ArgumentError(
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
                raise ArgumentError(
                    f"kernel {self.name} ({self.where}) has constexpr parameters: pass their "
                    "values to compile()"
                )
            return [(p, None) for p in self.params if p.kind == "tensor"], {
                p.name: p.default for p in self.params if p.kind == "constexpr"
            }
        return self._bind(args, kwargs)

    def _write_output(self, sess: Session, data) -> Path:
        path = sess.output_path / f"{self.name}{sess.output_type.suffix}"
        cache.write_atomic(path, data if isinstance(data, bytes) else data.encode())
        return path

    # -- call ----------------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        tensors, constexprs = self._bind(args, kwargs)
        for p, x in tensors:
            self._check_tensor(p, x)
        artifacts = self._artifacts(constexprs)
        self.last_artifacts = artifacts
        sess = current_session()
        if sess is not None and sess.output_type is not None:
            if sess.output_type is OutputType.BINARY:
                self._write_output(sess, bytes(artifacts.binary))
            else:
                self._write_output(sess, getattr(artifacts, sess.output_type.value))
        # `with legato.profile()`: the profiler above this layer estimates the call's work from
        # its IR before the run (the emulator's run alone does not know its kernel)
        note = getattr(PROFILER.get(), "note_call", None)
        if note is not None:
            note(self, constexprs, tensors)
        bound = [bind(x) for _, x in tensors]
        limits = runtime.resolve_limits(
            *((sess.time_limit, sess.cycle_limit, sess.memory_limit) if sess is not None else ())
        )
        # $LEGATO_REPRO: the inputs as they are before the run writes any of them
        inputs = repro.snapshot([b.value for b in bound]) if repro.directory() else None
        try:
            result = runtime.run_binary(
                artifacts.binary,
                self.model,
                [b.value for b in bound],
                views=[numpy_view(x) for _, x in tensors],
                trace=sess is not None and sess.trace,
                # what the compiler recorded, not the binary's metadata: written back are only
                # the arguments the kernel itself writes
                expected_access=getattr(artifacts, "arg_access", None),
                map_written=self.map_written,
                hazards=sess.hazards if sess is not None else None,
                limits=limits,
            )
        except ABIError as e:
            raise ArgumentError(f"kernel {self.name} ({self.where}): {e}") from None
        except Exception as e:
            if inputs is not None:
                run = {
                    "binary": artifacts.binary,
                    "inputs": inputs,
                    "access": getattr(artifacts, "arg_access", None),
                    "limits": limits,
                    "map_written": self.map_written,
                }
                repro.run_failed(self, constexprs, e, run)
            raise
        self.last_run = result
        access = getattr(artifacts, "arg_access", None) or ["readwrite"] * len(bound)
        for b, acc in zip(bound, access):
            if acc != "read":  # a copied input is not written back (an expanded one cannot be)
                b.finish()

    _LEVELS = ("legato", "core", "backend")

    def interpret(self, *args, level: str = "legato", **kwargs):
        """Run the kernel with the interpreter of IR level `level` ("legato", "core" or
        "backend") instead of the emulator. Same argument handling as a call: torch tensors or
        numpy arrays, outputs written in place. Returns the interpreter's RunResult.

        The frontend's module is lowered in memory only as far as `level` (no binary, no text,
        no cache): `level="legato"` runs no compiler pass, so it works where a lowering fails.
        The run is bounded like a call's: `legato.session(time_limit=...)`, else
        `$LEGATO_TIME_LIMIT`, else the default (`TimeLimitExceeded` at the op it reached)."""
        if level not in self._LEVELS:
            raise LegatoError(
                f"unknown level {level!r}; expected one of {', '.join(self._LEVELS)} "
                "(call the kernel itself to run the binary on the emulator)"
            )
        tensors, constexprs = self._bind(args, kwargs)
        for p, x in tensors:
            self._check_tensor(p, x)
        try:
            module = self.emit_module(**constexprs)
            compiler.lower(module, self.model, level)
        except CompileError as e:
            raise e.with_traceback(None) from None
        # The interpreters load xDSL's interpreter framework (~0.4 s); only interpret() needs
        # them, so `import legato` (every legato-opt, every compile) does not pay for them.
        from legato import interp

        sess = current_session()
        limit = runtime.resolve_limits(sess.time_limit if sess is not None else None).time
        result = interp.run(module, level, [x for _, x in tensors], self.model, time_limit=limit)
        self.last_interp = result
        return result


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


# what `lower()` also accepts for a stage: the IR level's name as `legato-opt` and the
# interpreters spell it (`level="core"`)
_STAGE_ALIASES = {
    "legato": OutputType.MLIR,
    "core": OutputType.CORE_IR,
    "backend": OutputType.BACKEND_IR,
    "elf": OutputType.BINARY,
}


def _stage_named(name: str) -> OutputType:
    """The OutputType a stage name means: an OutputType's name or value ("core_ir",
    "BACKEND_IR") or an IR level ("legato", "core", "backend", "elf")."""
    key = name.strip().lower()
    for t in OutputType:
        if key == t.value:
            return t
    if key in _STAGE_ALIASES:
        return _STAGE_ALIASES[key]
    names = sorted({t.value for t in OutputType} | set(_STAGE_ALIASES))
    raise LegatoValueError(f"lower(): no stage {name!r}; the stages are {', '.join(names)}")


def _replay(recorded) -> None:
    """Warn again, under the caller's filters, what a compile warned: `(message, category,
    file, line)`, each at its own source line."""
    for message, category, filename, lineno in recorded:
        warnings.warn_explicit(message, category, filename, lineno)
