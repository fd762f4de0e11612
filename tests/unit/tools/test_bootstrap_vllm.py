"""scripts/bootstrap_vllm.sh re-installs a shared .venv-vllm when another checkout runs it.

A .venv-vllm shared by several checkouts (a symlink to one venv) used to keep its editable
installs pointing at whichever checkout bootstrapped it first with the same file contents: the
stamp hashed the files, not the checkout's path. The script is run here against a fake venv
whose `python` only logs its arguments (no package is installed), in two copies of a checkout
sharing it; an install is a logged `pip install ... -e . -e plugins/vllm-legato`."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "bootstrap_vllm.sh"

FAKE_PYTHON = """#!/usr/bin/env bash
# logs "<cwd> <args>" and answers nothing; `-` reads its program from stdin (a heredoc)
echo "$(pwd -P) $*" >> "$FAKE_LOG"
for a in "$@"; do [ "$a" = - ] && cat > /dev/null; done
exit 0
"""


def _checkout(tmp: Path, name: str, venv: Path) -> Path:
    """A checkout holding the files the script reads, with `.venv-vllm` a symlink to `venv`."""
    co = tmp / name
    (co / "scripts").mkdir(parents=True)
    (co / "plugins" / "vllm-legato").mkdir(parents=True)
    shutil.copy(SCRIPT, co / "scripts" / "bootstrap_vllm.sh")
    shutil.copy(ROOT / "pyproject.toml", co / "pyproject.toml")
    plugin = ROOT / "plugins" / "vllm-legato" / "pyproject.toml"
    shutil.copy(plugin, co / "plugins" / "vllm-legato" / "pyproject.toml")
    os.symlink(venv, co / ".venv-vllm")
    return co


def _run(co: Path, log: Path) -> list[str]:
    """Run the script in `co`; the checkouts that installed (the cwd of each logged install)."""
    before = log.read_text().splitlines() if log.exists() else []
    env = {**os.environ, "FAKE_LOG": str(log), "PIP_FIND_LINKS": ""}
    subprocess.run(
        ["bash", str(co / "scripts" / "bootstrap_vllm.sh")],
        check=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    new = log.read_text().splitlines()[len(before) :]
    return [line.split(" ", 1)[0] for line in new if " install " in line and "-e ." in line]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_shared_venv_is_reinstalled_by_each_checkout_and_only_then(tmp_path):
    venv = tmp_path / "shared-venv"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(FAKE_PYTHON)
    py.chmod(py.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "log"
    a, b = _checkout(tmp_path, "a", venv), _checkout(tmp_path, "b", venv)
    a_path, b_path = str(a.resolve()), str(b.resolve())

    assert _run(a, log) == [a_path]  # first bootstrap installs
    assert _run(a, log) == []  # nothing changed: the imports are only checked
    assert _run(b, log) == [b_path]  # same files, another checkout: re-pointed at b
    assert _run(b, log) == []
    assert _run(a, log) == [a_path]  # and back
    stamp = (venv / ".legato-vllm-installed").read_text()
    assert a_path in stamp
    # a change of the files that decide the install re-installs too
    with open(a / "pyproject.toml", "a") as f:
        f.write("\n# changed\n")
    assert _run(a, log) == [a_path]
    # the final check is told the checkout, to refuse a venv importing another one's legato
    last = log.read_text().splitlines()[-1]
    assert last.startswith(a_path) and last.endswith(f" - {a_path}")
