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

from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
from xdsl.ir import Operation
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

    def apply_passes(self, prog: ModuleOp):
        # Verify first ourselves so that an error names the source location of the failing op
        # (the frontend puts `loc("k.py":12:8)` on every op); the pipeline verifies again.
        if not self.args.disable_verify:
            verify_with_locations(prog)
        super().apply_passes(prog)


def verify_with_locations(module: Operation) -> None:
    """Verify `module` innermost op first; an error of an op with a file location (its own or
    its nearest ancestor's) is re-raised as `file:line:col: error: message` followed by xDSL's
    annotated IR."""
    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as e:
            where = source_location(op)
            if where is None:
                raise
            text = str(e)
            head = _headline(text)
            detail = "" if head.strip() == text.strip() else "\n" + text
            raise type(e)(f"{where}: error: {head}{detail}") from None


def source_location(op: Operation | None) -> str | None:
    """`file:line:col` of `op` or of its nearest ancestor with a file location."""
    while op is not None:
        loc = op.location
        if isinstance(loc, FileLineColLoc):
            return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
        op = op.parent_op()
    return None


def _headline(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("| "):
            return line[2:].removeprefix("Operation does not verify: ")
    return text.splitlines()[0] if text else "verification failed"


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
