# lit configuration of Legato's FileCheck suites: `lit -v tests/filecheck`.
#
# `legato-opt` resolves to the checkout's tools/legato-opt run by the venv's Python, so tests
# exercise the working tree even when the package is not installed; `filecheck` is the venv's;
# `%python` is the venv's Python (for .py tests: `// RUN: %python %s | filecheck %s`).
import os
import shutil
import sys

import lit.formats

config.name = "legato"  # noqa: F821 - `config` is provided by lit
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir", ".py"]  # noqa: F821
config.excludes = ["lit.cfg.py", "__pycache__", "Inputs"]  # noqa: F821
config.test_source_root = os.path.dirname(os.path.abspath(__file__))  # noqa: F821

_repo = os.path.dirname(os.path.dirname(config.test_source_root))  # noqa: F821
_venv_bin = os.path.join(_repo, ".venv", "bin")
_python = os.path.join(_venv_bin, "python")
if not os.path.exists(_python):
    _python = sys.executable
_filecheck = os.path.join(_venv_bin, "filecheck")
if not os.path.exists(_filecheck):
    _filecheck = shutil.which("filecheck") or "filecheck"

config.substitutions.append(("%python", _python))  # noqa: F821
config.substitutions.append((r"\blegato-opt\b", f"{_python} {_repo}/tools/legato-opt"))  # noqa: F821
config.substitutions.append((r"(?<![/\w.-])filecheck\b", _filecheck))  # noqa: F821

# The tests import `legato` from this checkout; keep the environment's PATH for `not` etc.
config.environment["PYTHONPATH"] = _repo + os.pathsep + os.environ.get("PYTHONPATH", "")  # noqa: F821
config.environment["PATH"] = _venv_bin + os.pathsep + os.environ.get("PATH", "")  # noqa: F821
