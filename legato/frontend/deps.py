"""What a kernel depends on besides its own source, for the JIT cache key.

The key must change when anything that changes the compiled program changes: the source of every
`@legato.function` the kernel reaches (transitively), of the plain Python helpers it calls
(transitively, with the globals *they* read), and the values the frontend reads at compile time:
simple globals (`N = 128`), attribute chains on any object (`cfg.scale`: the value at the end of
the chain), numpy arrays (dtype, shape and bytes) and plain objects made of such values. Modules
and classes are followed through attribute chains (`mylib.helper`) but not hashed themselves. A
name the function binds itself (a parameter, an assignment, a loop variable) is a local, not the
module global of the same name, so a global that a local shadows is not part of the key.
Helpers are followed whatever their form: lambdas, `functools.partial` (its function and bound
arguments), bound methods (`self.x` / `cls.x` they read, class attributes included), objects
with a `__call__`.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import textwrap
import types as pytypes
from dataclasses import dataclass, field

import numpy as np

from legato.frontend.source import FunctionSource, LegatoFunction
from legato.model.compute_model import ComputeModel
from legato.types import DType, TensorSpec

_SIMPLE = (int, float, str, bool, type(None), DType, TensorSpec, ComputeModel, bytes)


def _is_simple(value) -> bool:
    if isinstance(value, _SIMPLE):
        return True
    if isinstance(value, (tuple, list, frozenset)):
        return all(_is_simple(v) for v in value)
    if isinstance(value, dict):
        return all(_is_simple(k) and _is_simple(v) for k, v in value.items())
    return False


def _chains(tree: ast.AST) -> list[list[str]]:
    """Dotted name chains read in `tree`, each once, in first-read order: `a.b.c(...)` gives
    ['a', 'b', 'c']."""
    out: list[list[str]] = []
    seen_inner: set[int] = set()
    for node in ast.walk(tree):
        if id(node) in seen_inner:
            continue
        if isinstance(node, ast.Attribute):
            chain = []
            cur = node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                seen_inner.add(id(cur.value))
                cur = cur.value
            if isinstance(cur, ast.Name):
                out.append([cur.id, *reversed(chain)])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.append([node.id])
    # each chain once (a kernel reads the same names many times; the key is read every call)
    return [list(c) for c in dict.fromkeys(tuple(c) for c in out)]


def _local_names(tree: ast.FunctionDef | ast.Lambda) -> set[str]:
    """The names `tree` binds in its own scope (parameters, assignments, loop and `with` targets,
    imports, nested definitions), minus those it declares `global`/`nonlocal`. Comprehension and
    lambda scopes are not entered: their variables stay candidates for globals, which at worst
    adds an entry to the key (never leaves one out)."""
    args = tree.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    declared: set[str] = set()
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)
    todo = list(tree.body) if isinstance(tree.body, list) else [tree.body]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, comprehensions):
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return names - declared


def _global_chains(tree: ast.FunctionDef | ast.Lambda) -> list[list[str]]:
    """The name chains `tree` reads whose head is not one of its own locals."""
    local = _local_names(tree)
    return [c for c in _chains(tree) if c[0] not in local]


def _value_fingerprint(value, depth: int = 0) -> str | None:
    """A stable text for a value the frontend may read at compile time, or None when it has none
    (a tensor, a callable, an object with other state): simple values by repr, numpy arrays by
    dtype, shape and bytes, plain objects (dataclasses, config objects) by type and fields."""
    if _is_simple(value):
        return "value:" + repr(value)
    if isinstance(value, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
        return f"array:{value.dtype.str}:{value.shape}:{digest}"
    if isinstance(value, np.generic):
        return f"scalar:{value.dtype.str}:{value.tobytes().hex()}"
    if depth >= 4:
        return None
    if isinstance(value, (tuple, list)):
        parts = [_value_fingerprint(v, depth + 1) for v in value]
        return None if None in parts else f"{type(value).__name__}:[{','.join(parts)}]"
    if (
        not isinstance(value, (type, pytypes.ModuleType))
        and not callable(value)
        and isinstance(getattr(value, "__dict__", None), dict)
    ):
        fields = sorted(vars(value).items())
        parts = [_value_fingerprint(v, depth + 1) for _, v in fields]
        if None in parts:
            return None
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        body = ",".join(f"{k}={p}" for (k, _), p in zip(fields, parts, strict=True))
        return f"object:{kind}:{{{body}}}"
    return None


_MISSING = object()


def _lookup(fn, name: str):
    """What `name` means inside `fn` now: a closure variable, else a global (else _MISSING).
    Reads the cells and the globals dict directly (no copy): this runs on every kernel call."""
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None)
    if code is not None and closure and name in code.co_freevars:
        try:
            return closure[code.co_freevars.index(name)].cell_contents
        except ValueError:  # an empty cell
            return _MISSING
    return getattr(fn, "__globals__", {}).get(name, _MISSING)


def _python_helper(fn) -> tuple[str | None, list[list[str]], list[list[str]]]:
    """The source hash, the global name chains and the `self` chains (those whose head is the
    first parameter: `self.scale`, `cls.scale`, resolved on the object a bound method is bound
    to) of a plain Python helper; (None, [], []) when its source cannot be read. A lambda's
    source is the statement holding it: the chains of every lambda in it count (at worst an
    extra entry). Names the code reads that no chain found (a source that does not parse, a
    construct the walk misses) are added from the bytecode, so no global is left out."""
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        return None, [], []
    digest = "python:" + hashlib.sha256(text.encode()).hexdigest()
    chains: list[list[str]] = []
    selfs: list[list[str]] = []
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        tree = None
    if tree is not None:
        if fn.__name__ == "<lambda>":
            nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        else:
            defs = (ast.FunctionDef, ast.AsyncFunctionDef)
            nodes = [n for n in tree.body if isinstance(n, defs)][:1]
        for node in nodes:
            chains += _global_chains(node)
            args = node.args
            first = (*args.posonlyargs, *args.args)[:1]
            if first:
                selfs += [c for c in _chains(node) if c[0] == first[0].arg and len(c) > 1]
    known = {c[0] for c in chains}
    chains += [[name] for name in _code_globals(fn.__code__) if name not in known]
    return digest, chains, selfs


def _code_globals(code) -> list[str]:
    """Every global and free name `code` (and the code nested in it: lambdas, comprehensions)
    may read, in first-seen order (attribute names too: resolving one that is not a global
    finds nothing and adds nothing to the key)."""
    out: dict[str, None] = {}
    todo = [code]
    while todo:
        c = todo.pop()
        out.update(dict.fromkeys((*c.co_names, *c.co_freevars)))
        todo += [k for k in c.co_consts if isinstance(k, pytypes.CodeType)]
    return list(out)


@dataclass
class Dependencies:
    """The resolvable names a function reads; `fingerprint()` re-reads their current values."""

    source: FunctionSource
    chains: list[list[str]] = field(default_factory=list)
    # What does not change between calls, computed once: the name chains of each helper's
    # source (by FunctionSource, kept alive here so its id is not reused) and the source text
    # hash and name chains of each plain Python helper (by code object, kept alive likewise: a
    # redefinition is a new code object).
    _chains_of: dict[int, tuple[FunctionSource, list[list[str]], str]] = field(default_factory=dict)
    _python_of: dict[int, tuple[object, str | None, list[list[str]], list[list[str]]]] = field(
        default_factory=dict
    )

    # The last fingerprint and every name read to make it: (function, chain, value, witness).
    # When each name still resolves to the same object, with the same witness, and no value
    # could have changed in place, the fingerprint is the same (the walk itself only follows
    # those values), so a cached call re-reads the names without re-hashing anything.
    _last: dict | None = None
    _reads: list | None = None

    def fingerprint(self) -> dict:
        if self._reads is not None and all(
            _resolve(fn, chain) is value and _witness(value) is witness
            for fn, chain, value, witness in self._reads
        ):
            return dict(self._last)  # type: ignore[arg-type]
        found: dict[str, str] = {}
        reads: list = []
        self._visit(self.source.fn, self.chains, found, set(), reads)
        self._last = dict(found)
        self._reads = None if any(w is _CHANGEABLE for *_, w in reads) else reads
        return found

    def _visit(self, fn, chains, found: dict, visiting: set, reads: list) -> None:
        if id(fn) in visiting:
            return
        visiting.add(id(fn))
        prefix = getattr(fn, "__module__", "?") + ":" + getattr(fn, "__qualname__", "?")
        fn = inspect.unwrap(fn)
        for chain in chains:
            value = _resolve(fn, chain)
            reads.append((fn, chain, value, _witness(value)))
            if value is _MISSING:
                continue
            name = f"{prefix}/{'.'.join(chain)}"
            self._record(name, value, found, visiting, reads)

    def _record(self, name: str, value, found: dict, visiting: set, reads: list) -> None:
        if isinstance(value, LegatoFunction):
            sub = value.source
            cached = self._chains_of.get(id(sub))
            if cached is None or cached[0] is not sub:
                cached = self._chains_of[id(sub)] = (
                    sub,
                    _global_chains(sub.tree),
                    "function:" + hashlib.sha256(sub.text.encode()).hexdigest(),
                )
            found[name] = cached[2]
            self._visit(sub.fn, cached[1], found, visiting, reads)
        elif isinstance(value, pytypes.FunctionType) and not _is_legato(value):
            code = value.__code__
            cached = self._python_of.get(id(code))
            if cached is None or cached[0] is not code:
                cached = self._python_of[id(code)] = (code, *_python_helper(value))
            if cached[1] is not None:
                found[name] = cached[1]
                # The helper runs at compile time: the globals and helpers it reads count too.
                self._visit(value, cached[2], found, visiting, reads)
        elif isinstance(value, pytypes.MethodType) and isinstance(
            value.__func__, pytypes.FunctionType
        ):
            # `cfg.factor()`: the method's code and globals, and the object it reads as `self`
            # (its fields, and every `self.x` / `cls.x` it reads: a class attribute, or the
            # class a classmethod is bound to, has no fields of the instance's).
            bound_key = ("method", id(value.__func__), id(value.__self__))
            if bound_key in visiting:  # methods calling each other through `self`
                return
            visiting.add(bound_key)
            owner = _value_fingerprint(value.__self__)
            if owner is not None:
                found[name + "/self"] = owner
            self._record(name, value.__func__, found, visiting, reads)
            code = value.__func__.__code__
            cached = self._python_of.get(id(code))
            for chain in cached[3] if cached is not None and cached[0] is code else ():
                attr = value.__self__
                for part in chain[1:]:
                    try:
                        attr = getattr(attr, part)
                    except Exception:  # noqa: BLE001 - as `_resolve`: the chain stops here
                        break
                self._record(f"{name}/{'.'.join(chain)}", attr, found, visiting, reads)
        elif isinstance(value, functools.partial):
            # A partial runs its function with the arguments bound in it.
            self._record(name + "/func", value.func, found, visiting, reads)
            for i, arg in enumerate(value.args):
                self._record(f"{name}/arg{i}", arg, found, visiting, reads)
            for key, arg in sorted(value.keywords.items()):
                self._record(f"{name}/kw.{key}", arg, found, visiting, reads)
        elif _python_call(value) is not None:
            # A callable object (`scale()` of an instance with `__call__`): the call method,
            # bound to it (its code, its globals and the object's state).
            self._record(name + "/__call__", _python_call(value), found, visiting, reads)
        else:
            text = _value_fingerprint(value)
            if text is not None:
                found[name] = text


def _python_call(value):
    """`value.__call__` when `value` is an instance of a Python class defining `__call__`
    (a bound method of a plain function), else None."""
    if isinstance(value, (type, pytypes.FunctionType, pytypes.MethodType, pytypes.ModuleType)):
        return None
    if not isinstance(inspect.getattr_static(type(value), "__call__", None), pytypes.FunctionType):
        return None
    return value.__call__


def _resolve(fn, chain: list[str]):
    """What the name chain `chain` reads inside `fn` now (_MISSING when its head is unbound):
    the chain followed as the frontend does at compile time (`cfg.scale` reads an attribute of
    any object), stopping where it stops resolving."""
    value = _lookup(fn, chain[0])
    if value is _MISSING:
        return value
    for attr in chain[1:]:
        try:
            value = getattr(value, attr)
        except Exception:  # noqa: BLE001 - an attribute the frontend cannot read either
            break
    return value


_CHANGEABLE = object()
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), DType, TensorSpec, ComputeModel)


def _witness(value):
    """What besides `value`'s identity its fingerprint depends on: its source (a legato
    function) or code (a Python helper); `_CHANGEABLE` when its state could change in place
    (an array, a list, an object's fields, a bound method's object), so only re-hashing tells;
    None when its identity says everything (an immutable value, a module, a class, a builtin)."""
    if isinstance(value, LegatoFunction):
        return value.source
    if isinstance(value, pytypes.FunctionType):
        return value.__code__
    if value is _MISSING or isinstance(value, _IMMUTABLE):
        return None
    if isinstance(value, (tuple, frozenset)):
        return None if all(_witness(v) is None for v in value) else _CHANGEABLE
    if isinstance(value, (type, pytypes.ModuleType, pytypes.BuiltinFunctionType)):
        return None
    return _CHANGEABLE


def _is_legato(fn) -> bool:
    return (getattr(fn, "__module__", "") or "").split(".")[0] == "legato"


def dependency_fingerprint(source: FunctionSource) -> Dependencies:
    """The dependencies of the function `source` (cheap to fingerprint on every call)."""
    return Dependencies(source, _global_chains(source.tree))
