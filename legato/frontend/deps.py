"""What a kernel depends on besides its own source, for the JIT cache key.

The key must change when anything that changes the compiled program changes: the source of every
`@legato.function` the kernel reaches (transitively), of plain Python helpers it calls statically,
and the values of simple globals it reads (`N = 128` at module level). Modules and classes are
followed through attribute chains (`mylib.helper`) but not hashed themselves.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import types as pytypes
from dataclasses import dataclass, field

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


@dataclass
class Dependencies:
    """The resolvable names a function reads; `fingerprint()` re-reads their current values."""

    source: FunctionSource
    chains: list[list[str]] = field(default_factory=list)
    # What does not change between calls, computed once: the name chains of each helper's
    # source (by FunctionSource, kept alive here so its id is not reused) and the source text
    # hash of each plain Python helper (by code object: a redefinition is a new code object).
    _chains_of: dict[int, tuple[FunctionSource, list[list[str]], str]] = field(default_factory=dict)
    _python_hash: dict[object, str | None] = field(default_factory=dict)

    def fingerprint(self) -> dict:
        found: dict[str, str] = {}
        self._visit(self.source, self.chains, found, set())
        return found

    def _visit(self, src: FunctionSource, chains, found: dict, visiting: set) -> None:
        if id(src.fn) in visiting:
            return
        visiting.add(id(src.fn))
        fn = inspect.unwrap(src.fn)
        prefix = getattr(src.fn, "__module__", "?") + ":" + getattr(src.fn, "__qualname__", "?")
        for chain in chains:
            value = _lookup(fn, chain[0])
            if value is _MISSING:
                continue
            for attr in chain[1:]:
                if not isinstance(value, (pytypes.ModuleType, type)):
                    break
                if not hasattr(value, attr):
                    break
                value = getattr(value, attr)
            name = f"{prefix}/{'.'.join(chain)}"
            self._record(name, value, found, visiting)

    def _record(self, name: str, value, found: dict, visiting: set) -> None:
        if isinstance(value, LegatoFunction):
            sub = value.source
            cached = self._chains_of.get(id(sub))
            if cached is None or cached[0] is not sub:
                cached = self._chains_of[id(sub)] = (
                    sub,
                    _chains(sub.tree),
                    "function:" + hashlib.sha256(sub.text.encode()).hexdigest(),
                )
            found[name] = cached[2]
            self._visit(sub, cached[1], found, visiting)
        elif _is_simple(value):
            found[name] = "value:" + repr(value)
        elif isinstance(value, pytypes.FunctionType) and not _is_legato(value):
            code = value.__code__
            if code not in self._python_hash:
                try:
                    text = inspect.getsource(value)
                except (OSError, TypeError):
                    text = None
                self._python_hash[code] = (
                    None if text is None else "python:" + hashlib.sha256(text.encode()).hexdigest()
                )
            if self._python_hash[code] is not None:
                found[name] = self._python_hash[code]


def _is_legato(fn) -> bool:
    return (getattr(fn, "__module__", "") or "").split(".")[0] == "legato"


def dependency_fingerprint(source: FunctionSource) -> Dependencies:
    """The dependencies of the function `source` (cheap to fingerprint on every call)."""
    return Dependencies(source, _chains(source.tree))
