#!/usr/bin/env bash
# Create .venv (if missing) and install legato with its development tools.
# torch==2.13.0 is the CPU build; PIP_FIND_LINKS / pip.conf on these machines point at its wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' 2>&1 \
    | grep -v "^WARNING: Location" || true
# the emulator's compiled helpers (C through cffi; gcc): the emulator falls back to its Python
# reference without them, the tests in CI require them (tests/unit/targets/test_mpu_fast.py)
.venv/bin/python -m legato.targets.bertha.native_build
.venv/bin/python -c "import legato, xdsl, torch; print('legato', legato.__version__, '| xdsl', xdsl.__version__ if hasattr(xdsl, '__version__') else '', '| torch', torch.__version__)"
