#!/usr/bin/env bash
# Run every test: pytest (parallel) and the lit/FileCheck suites (parallel).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
status=0
python -m pytest -n auto -q tests/unit "$@" || status=$?
lit -sv tests/filecheck || status=$?
# vLLM on Bertha (issue 8): its own venv (.venv-vllm), a few engine start-ups; LEGATO_SKIP_VLLM=1
# skips it for a quick local run.
if [ "${LEGATO_SKIP_VLLM:-0}" != "1" ]; then
    bash scripts/test_vllm.sh || status=$?
fi
exit $status
