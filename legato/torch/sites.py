"""The model's line behind a kernel error (issue 13): a Legato error names the kernel source
line it comes from, and through torch that line is in a library implementation
(`composite.py`'s gather) or the generated partition, not in the user's model. `name_user_lines`
adds to the error the Python file:line of the fx node (its `stack_trace`) whose implementation
holds that line.

A line inside an implementation's own function maps to every node of the kernel that uses it
(one, usually; several are all named); a line of the generated kernel maps to the node its step
computes (the step's trailing `# %name : ...` comment). A line in a helper the implementation
calls (an `@legato.function` of `aten.py`) names no node: the error is left as it is.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import re

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n(?: +(.*)\n)?')
_STEP_NODE = re.compile(r"#\s*%(\w+)\s*:")


def _span(fn) -> tuple[str, int, int] | None:
    """(real path, first line, last line) of the Python function behind `fn` (a
    `@legato.function` wraps it as `.fn`), or None without a source."""
    return _source_span(getattr(fn, "fn", fn))


@functools.cache
def _source_span(f) -> tuple[str, int, int] | None:
    try:
        lines, start = inspect.getsourcelines(f)
        path = inspect.getsourcefile(f)
    except (OSError, TypeError):
        return None
    if path is None:
        return None
    return os.path.realpath(path), start, start + len(lines) - 1


def error_line(e: BaseException) -> tuple[str, int] | None:
    """The kernel source (file, line) a Legato error names: an emulator fault's `source`, a
    compile error's `location`."""
    src = getattr(e, "source", None)
    if isinstance(src, tuple) and len(src) >= 2:
        return str(src[0]), int(src[1])
    loc = getattr(e, "location", None)
    if loc is not None and hasattr(loc, "file"):
        return str(loc.file), int(loc.line)
    return None


def user_line(node) -> str | None:
    """`file:line: code` of the innermost frame of fx node `node`'s stack trace (the model's
    line that made it), or None when it has none."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    if not frames:
        return None
    path, line, code = frames[-1]
    return f"{path}:{line}: {code.strip()}" if code else f"{path}:{line}"


def nodes_at(e: BaseException, sites, generated: str | None = None) -> list:
    """The fx nodes whose computation holds the kernel line `e` names. `sites`: (implementation
    function, node) per node of the kernel; `generated`: the path of the generated kernel
    source, whose step lines name their node."""
    where = error_line(e)
    if where is None:
        return []
    path, line = os.path.realpath(where[0]), where[1]
    if generated is not None and path == os.path.realpath(generated):
        m = _STEP_NODE.search(linecache.getline(generated, line))
        names = {m.group(1)} if m else set()
        return [n for _, n in sites if n.name in names]
    found = []
    for fn, node in sites:
        span = _span(fn) if fn is not None else None
        if span is not None and span[0] == path and span[1] <= line <= span[2]:
            found.append(node)
    return found


def name_user_lines(e: BaseException, sites, generated: str | None = None) -> BaseException:
    """`e` with the model's lines of the nodes behind it (`nodes_at`) added to its message and
    kept as `e.user_lines` (a list of `file:line: code`); unchanged when none is found."""
    lines = []
    for node in nodes_at(e, sites, generated):
        text = user_line(node)
        if text is not None and text not in lines:
            lines.append(f"{text}  ({node.name}: {node.target})")
    if not lines:
        return e
    e.user_lines = [t.split("  (", 1)[0] for t in lines]
    head = "  in the model at " if len(lines) == 1 else "  in the model at one of "
    e.args = ("\n".join([str(e), head + lines[0], *(f"    {t}" for t in lines[1:])]),)
    return e
