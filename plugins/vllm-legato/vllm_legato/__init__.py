"""vllm-legato: a vLLM platform plugin that serves models on Bertha through Legato.

vLLM calls `register()` (entry point group `vllm.platform_plugins`, name `bertha`) in every
process while it picks the platform. The Bertha platform is chosen only when asked:

    LEGATO_VLLM=1              Bertha EVT0 (`bertha`)
    LEGATO_VLLM=bertha-evt1    Bertha EVT1 (also: `evt1`); `bertha` / `evt0` name EVT0

Otherwise (unset, empty or `0`) `register()` returns None and stock vLLM picks its platform as
if the plugin were not installed. This module imports neither vllm nor torch.
"""

from __future__ import annotations

import os

__version__ = "0.1.0"

ENV = "LEGATO_VLLM"
_DEVICES = {
    "1": "bertha",
    "true": "bertha",
    "yes": "bertha",
    "on": "bertha",
    "bertha": "bertha",
    "evt0": "bertha",
    "bertha-evt0": "bertha",
    "evt1": "bertha-evt1",
    "bertha-evt1": "bertha-evt1",
}


def selected_device() -> str | None:
    """The Legato device named by $LEGATO_VLLM, or None when the plugin is not asked for."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return None
    if value not in _DEVICES:
        raise ValueError(
            f"{ENV}={os.environ[ENV]!r}: expected 1, bertha, evt0, bertha-evt1 "
            "or evt1 (or unset/0 for stock vLLM)"
        )
    return _DEVICES[value]


def register() -> str | None:
    """vLLM platform plugin hook: the Bertha platform's qualified name when $LEGATO_VLLM asks."""
    return "vllm_legato.platform.BerthaPlatform" if selected_device() else None


def register_general() -> None:
    """vLLM general plugin hook (every vLLM process): the Bertha glue of `vllm_legato.patches`,
    only while $LEGATO_VLLM selects Bertha."""
    if selected_device():
        from vllm_legato.patches import install

        install()


def load_report(path: str | os.PathLike | None = None):
    """The run report (`vllm_legato.report.Report`): from the JSON file at `path` (default
    $LEGATO_VLLM_REPORT), else this process's own."""
    from vllm_legato.report import load_report as _load

    return _load(path)
