"""`legato-opt` output targets: `-t asm` prints Bertha assembly, `-t bin` writes the ELF binary.

Both accept a module at any level (legato, core or backend) and lower it first, with the model
the module carries (`legato.model`) or the named `target` (`legato.model.targets`). They drive
the compiler, so they sit with the tools, above it (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException
from xdsl.utils.target import Target

from legato.compiler import emit_binary, lower_to_backend, verify_sync
from legato.dialects import backend as be
from legato.errors import CompileError, LegatoError
from legato.model.ir import model_of


def _lowered(module: ModuleOp, target: str):
    """The model, and whether the module was proven at the core level on the way."""
    model = model_of(module, target)
    try:
        proven = lower_to_backend(module, model)
    except LegatoError as e:
        raise DiagnosticException(str(e)) from e
    return model, proven


@dataclass(frozen=True)
class AsmTarget(Target):
    name: ClassVar[str] = "asm"

    target: str = "bertha"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        model, proven = _lowered(module, self.target)
        for kernel in module.walk():
            if isinstance(kernel, be.KernelOp):
                try:  # as for -t bin (emit_binary): refused, located at the op
                    verify_sync(kernel, model, log=not proven)
                except CompileError as e:
                    raise DiagnosticException(str(e)) from None
        be.print_assembly(module, output)


@dataclass(frozen=True)
class BinaryTarget(Target):
    """Writes the ELF to `path`, or to the `-o` file (binary). Refuses to write to a terminal."""

    name: ClassVar[str] = "bin"

    target: str = "bertha"
    path: str = ""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        model, proven = _lowered(module, self.target)
        try:
            data = emit_binary(module, model, proven)
        except LegatoError as e:
            raise DiagnosticException(str(e)) from e
        if self.path:
            with open(self.path, "wb") as f:
                f.write(data)
            return
        buffer = getattr(output, "buffer", None)
        if buffer is None or output.isatty():
            raise DiagnosticException(
                "-t bin writes binary data: give `-o FILE` or `-t bin{path=FILE}`"
            )
        output.flush()
        buffer.write(data)
        buffer.flush()
