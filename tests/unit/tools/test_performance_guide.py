"""docs/performance.md's steps run, in order, in one file (the frontend reads kernel source with
`inspect`, so the blocks are written to a real .py file and run with runpy); each block checks
the numbers the guide quotes (as bounds) with asserts."""

from __future__ import annotations

import runpy
from pathlib import Path

import legato.jit

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "performance.md"


def blocks() -> list[str]:
    out, code = [], None
    for line in GUIDE.read_text().splitlines():
        if code is None:
            if line.strip() == "```python":
                code = []
        elif line.strip() == "```":
            out.append("\n".join(code) + "\n")
            code = None
        else:
            code.append(line)
    assert code is None, "unterminated ```python block"
    return out


def test_the_guide_has_every_step():
    assert len(blocks()) == 5


def test_the_guides_steps_reproduce(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    legato.jit.clear_memory_cache()
    path = tmp_path / "performance_guide.py"
    path.write_text("\n\n".join(blocks()))
    ns = runpy.run_path(str(path), run_name="performance_guide")
    printed = capsys.readouterr().out
    # the estimate comes before the first run's report, and the trace is written
    assert printed.index("static estimate") < printed.index("kernel v1")
    assert (tmp_path / "v3_trace.json").stat().st_size > 0
    assert ns["p3"].run.efficiency > 0.8 > 0.1 > ns["p1"].run.efficiency
