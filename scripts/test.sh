#!/usr/bin/env bash
# Run every test: pytest (parallel) and the lit/FileCheck suites (parallel).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
status=0
python -m pytest -n auto -q tests/unit "$@" || status=$?
lit -sv tests/filecheck || status=$?
exit $status
