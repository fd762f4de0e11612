"""vLLM tests: run in .venv-vllm (`bash scripts/test_vllm.sh`); skipped where vllm is missing."""

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "vllm: starts vLLM engines (slow; .venv-vllm only)")


def pytest_collection_modifyitems(config, items):
    try:
        import vllm  # noqa: F401
        import vllm_legato  # noqa: F401
    except ImportError:
        skip = pytest.mark.skip(
            reason="vllm / vllm-legato not installed "
            "(bash scripts/bootstrap_vllm.sh; tests run in .venv-vllm)"
        )
        for item in items:
            if "vllm" in item.keywords:
                item.add_marker(skip)
