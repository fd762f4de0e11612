"""docs/language.md's examples run: every ```python block is written to its own .py file (the
frontend reads kernel source with `inspect`, so a real file is needed) and run with runpy; each
checks its own result with asserts. A failure names the block's heading."""

from __future__ import annotations

import re
import runpy
import sys
import traceback
from pathlib import Path

import pytest

import legato.jit

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"


def blocks() -> list[tuple[str, int, str]]:
    """(heading, line, code) of every ```python block, in order."""
    out, heading, code, start = [], "(top)", None, 0
    for i, line in enumerate(DOC.read_text().splitlines(), 1):
        if code is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            elif line.strip() == "```python":
                code, start = [], i + 1
        elif line.strip() == "```":
            out.append((heading, start, "\n".join(code) + "\n"))
            code = None
        else:
            code.append(line)
    assert code is None, f"unterminated ```python block at {DOC}:{start}"
    return out


BLOCKS = blocks()


def _id(b) -> str:
    return re.sub(r"\W+", "_", b[0]).strip("_")[:40] + f"-L{b[1]}"


def test_the_doc_has_examples():
    assert len(BLOCKS) >= 20
    headings = {h for h, _, _ in BLOCKS}
    for needed in ("Memory planning", "Errors", "Runtime loops", "Synchronization"):
        assert any(needed.lower() in h.lower() for h in headings), needed


@pytest.mark.parametrize("block", BLOCKS, ids=[_id(b) for b in BLOCKS])
def test_example_runs(block, tmp_path, monkeypatch):
    heading, line, code = block
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(legato.jit.cache, "_memory_cache", {})
    monkeypatch.chdir(tmp_path)
    path = tmp_path / f"language_example_L{line}.py"
    # pad so that the line numbers of the file are those of the doc (errors point into the doc)
    path.write_text("\n" * (line - 1) + code)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        runpy.run_path(str(path), run_name="__main__")
    except BaseException as e:  # noqa: BLE001
        tb = "".join(traceback.format_exception(e, limit=-2))
        pytest.fail(
            f"example under '{heading}' (docs/language.md:{line}) failed:\n{tb}", pytrace=False
        )
    finally:
        for name in [m for m in sys.modules if m.startswith("language_example_")]:
            del sys.modules[name]
