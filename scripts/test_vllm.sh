#!/usr/bin/env bash
# The vLLM part of the test suite: set up .venv-vllm (scripts/bootstrap_vllm.sh) and run
# tests/vllm in it (marker `vllm`: tests/vllm/conftest.py starts 13 vLLM engines in 7 processes
# side by side, and a `vllm serve` server; the Bertha Llama's f32 engine, the server and the bench share
# their compiled kernels through the Legato cache; a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap_vllm.sh
exec .venv-vllm/bin/python -m pytest -q -m vllm tests/vllm "$@"
