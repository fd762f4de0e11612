"""A third-party op library found through the `legato-library` entry point group.

tests/fixtures/third_party_lib is pip-installed (no index, no build isolation: no network) into
a temporary directory; a fresh process with that directory on PYTHONPATH compiles a model using
aten.hardtanh, which only the third-party library implements (Legato's own library has
no resolver for it: `test_without_the_library_hardtanh_is_extern`)."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "third_party_lib"

SCRIPT = textwrap.dedent(
    """
    import torch
    import legato.torch as lt

    def f(x):
        return torch.nn.functional.hardtanh(x * 3.0, -0.5, 2.0) * 2.0

    x = torch.randn(8, 64).bfloat16()
    with torch.no_grad():
        y = torch.compile(f, backend="legato")(x)
    assert torch.equal(y, f(x)), (y - f(x)).abs().max()
    import legato_extra_ops
    assert legato_extra_ops.LOADED
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    assert any("legato_extra_ops.hardtanh" in n for n in s.kernels[0].nodes), str(s)
    print("OK")
    """
)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    src = tmp_path_factory.mktemp("src") / "third_party_lib"
    shutil.copytree(FIXTURE, src)  # build in a copy: the repo stays clean
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "--target",
            str(target),
            str(src),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return target


def _run(site, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(site), LEGATO_CACHE_DIR=str(tmp_path))
    return subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )


def test_third_party_library_via_entry_point(site, tmp_path):
    dist = list(site.glob("legato_extra_ops-*.dist-info"))
    assert dist and "[legato-library]" in (dist[0] / "entry_points.txt").read_text()
    r = _run(site, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("OK")


def test_without_the_library_hardtanh_is_extern(tmp_path):
    code = SCRIPT.replace("import legato_extra_ops\n", "").replace(
        "assert legato_extra_ops.LOADED\n", ""
    )
    code = code.split("s = lt.last_summary()")[0] + textwrap.dedent(
        """
        s = lt.last_summary()
        assert [(e.op, e.reason) for e in s.extern] == [
            ("aten.hardtanh.default", "no resolver")
        ], str(s)
        print("OK")
        """
    )
    env = dict(os.environ, LEGATO_CACHE_DIR=str(tmp_path))
    env.pop("PYTHONPATH", None)
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
