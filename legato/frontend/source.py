"""The source of a kernel or `@legato.function`: its AST, file and absolute positions.

The frontend never runs a kernel body; it parses the function's source (`inspect.getsource` +
`textwrap.dedent`) and maps every AST node back to the real file, line and column so IR
locations and errors point at what the user wrote.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field

from legato.errors import CompileError, LegatoError, SourceLocation


@dataclass
class FunctionSource:
    """A parsed Python function: `tree` is its `ast.FunctionDef`, positions map to `file`."""

    fn: object
    file: str
    first_line: int  # line of the first source line (decorator or `def`) in `file`
    indent: int  # columns removed by dedent
    text: str  # the dedented source
    tree: ast.FunctionDef

    @staticmethod
    def of(fn) -> FunctionSource:
        fn = inspect.unwrap(fn)
        try:
            lines, first_line = inspect.getsourcelines(fn)
            file = inspect.getsourcefile(fn) or inspect.getfile(fn)
        except (OSError, TypeError) as e:
            raise LegatoError(
                f"cannot read the source of {getattr(fn, '__qualname__', fn)!r}: {e}. "
                "Legato compiles kernels from their source, so they must be defined in a file"
            ) from None
        raw = "".join(lines)
        text = textwrap.dedent(raw)
        first_raw = next((ln for ln in raw.splitlines() if ln.strip()), "")
        first_dedented = next((ln for ln in text.splitlines() if ln.strip()), "")
        indent = len(first_raw) - len(first_dedented)  # what dedent removed from every line
        module = ast.parse(text, filename=file)
        tree = next(
            (n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
            None,
        )
        if tree is None:
            raise LegatoError(f"{file}:{first_line}: expected a function definition")
        return FunctionSource(fn, file, max(first_line, 1), indent, text, tree)

    def loc(self, node: ast.AST | None) -> SourceLocation:
        """Absolute file:line:col (1-based col) of `node`; the `def` line when `node` is None."""
        return SourceLocation(self.file, *self.line_col(node))

    def line_col(self, node: ast.AST | None) -> tuple[int, int]:
        """`loc(node)`'s line and column."""
        if node is None or not hasattr(node, "lineno"):
            node = self.tree
        return self.first_line + node.lineno - 1, node.col_offset + self.indent + 1

    @property
    def def_location(self) -> SourceLocation:
        """Where the `def` keyword is (not the decorator)."""
        return self.loc(self.tree)

    def error(self, node: ast.AST | None, message: str, note: str | None = None) -> CompileError:
        return CompileError(message, self.loc(node), note)


@dataclass
class LegatoFunction:
    """A `@legato.function` helper: inlined into every kernel (or helper) that calls it."""

    fn: object
    _source: FunctionSource | None = field(default=None, repr=False)

    def __post_init__(self):
        self.__name__ = getattr(self.fn, "__name__", "function")
        self.__qualname__ = getattr(self.fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(self.fn, "__doc__", None)
        self.__wrapped__ = self.fn

    @property
    def source(self) -> FunctionSource:
        if self._source is None:
            self._source = FunctionSource.of(self.fn)
        return self._source

    def __call__(self, *args, **kwargs):
        raise LegatoError(
            f"{self.__qualname__} is a @legato.function: it is inlined into the Legato kernels "
            "that call it and cannot be called from Python"
        )
