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
    """Dotted name chains read in `tree`: `a.b.c(...)` gives ['a', 'b', 'c']."""
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
    return out


def _scope(fn) -> dict:
    fn = inspect.unwrap(fn)
    scope = dict(getattr(fn, "__globals__", {}))
    try:
        scope.update(inspect.getclosurevars(fn).nonlocals)
    except (TypeError, ValueError):
        pass
    return scope


@dataclass
class Dependencies:
    """The resolvable names a function reads; `fingerprint()` re-reads their current values."""

    source: FunctionSource
    chains: list[list[str]] = field(default_factory=list)

    def fingerprint(self) -> dict:
        found: dict[str, str] = {}
        self._visit(self.source, self.chains, found, set())
        return found

    def _visit(self, src: FunctionSource, chains, found: dict, visiting: set) -> None:
        if id(src.fn) in visiting:
            return
        visiting.add(id(src.fn))
        scope = _scope(src.fn)
        prefix = getattr(src.fn, "__module__", "?") + ":" + getattr(src.fn, "__qualname__", "?")
        for chain in chains:
            if chain[0] not in scope:
                continue
            value = scope[chain[0]]
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
            found[name] = "function:" + hashlib.sha256(sub.text.encode()).hexdigest()
            self._visit(sub, _chains(sub.tree), found, visiting)
        elif _is_simple(value):
            found[name] = "value:" + repr(value)
        elif isinstance(value, pytypes.FunctionType) and not _is_legato(value):
            try:
                text = inspect.getsource(value)
            except (OSError, TypeError):
                return
            found[name] = "python:" + hashlib.sha256(text.encode()).hexdigest()


def _is_legato(fn) -> bool:
    return (getattr(fn, "__module__", "") or "").split(".")[0] == "legato"


def dependency_fingerprint(source: FunctionSource) -> Dependencies:
    """The dependencies of the function `source` (cheap to fingerprint on every call)."""
    return Dependencies(source, _chains(source.tree))
