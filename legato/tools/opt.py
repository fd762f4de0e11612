"""`legato-opt`: the mlir-opt-like driver of Legato.

xDSL's own `xdsl-opt` (dialects builtin, func, arith, scf, ...; `-p` pipelines with options,
`--split-input-file`, `--verify-diagnostics`, `--print-op-generic`, `-t <target>`) plus Legato's
dialects (`legato.dialects.get_all_dialects`), passes and targets
(`legato.transforms.registry`). Errors in the input are reported as diagnostics with their
location and a non-zero exit status, never as a Python traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    PassFailedException,
)
from xdsl.xdsl_opt_main import xDSLOptMain

from legato.errors import LegatoError
from legato.transforms import registry


class LegatoOptMain(xDSLOptMain):
    """xDSLOptMain with Legato's dialects, passes and targets registered."""

    version_format = "legato-opt (xdsl {xdsl_version})"

    def __init__(
        self,
        description: str = "Legato modular optimizer driver",
        args: Sequence[str] | None = None,
    ):
        super().__init__(description=description, args=args)
        # `-t bin -o FILE`: the binary target writes FILE itself (bytes, not text).
        if self.args.output_file and self.args.target.split("{")[0] == "bin":
            if "{" not in self.args.target:
                self.args.target = f'bin{{path="{self.args.output_file}"}}'
            self.args.output_file = None

    def register_all_dialects(self):
        super().register_all_dialects()
        for name, factory in registry.get_all_dialects().items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self):
        super().register_all_passes()
        for name, factory in registry.get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self):
        super().register_all_targets()
        for name, factory in registry.get_all_targets().items():
            self.available_targets[name] = factory


def main(args: Sequence[str] | None = None) -> int:
    """Run legato-opt; returns (and exits with) the status: 0 on success, 1 on an error."""
    try:
        LegatoOptMain(args=args).run()
    except (ParseError, DiagnosticException, PassFailedException, LegatoError, ArgSpecParseError) as e:
        sys.stdout.flush()
        print(_format_error(e), file=sys.stderr)
        for note in getattr(e, "__notes__", ()):
            print(note, file=sys.stderr)
        sys.exit(1)
    except (OSError, ValueError) as e:
        sys.stdout.flush()
        print(f"legato-opt: error: {e}", file=sys.stderr)
        sys.exit(1)
    return 0


def _format_error(e: Exception) -> str:
    text = str(e)
    if not text.startswith("legato-opt"):
        return text
    return text


if __name__ == "__main__":
    main()
