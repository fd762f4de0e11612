"""The compiler driver: one kernel from the legato dialect to a Bertha binary.

`compile_kernel(module, model)` runs the named pipelines of `legato.transforms.pipelines` and
returns every stage's artifact. Each stage's text re-parses with `legato-opt`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from legato.dialects import backend as be
from legato.dialects import core
from legato.dialects import legato as lg
from legato.errors import CompileError
from legato.model.compute_model import ComputeModel
from legato.model.ir import attach_model
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import write_elf
from legato.transforms import pipelines
from legato.transforms.kernel_abi import arg_layout
from legato.transforms.registry import get_all_dialects

STAGES = ("mlir", "core_ir", "backend_ir", "asm", "binary")


@dataclass
class Artifacts:
    kernel: str
    model: ComputeModel
    mlir: str
    core_ir: str
    backend_ir: str
    asm: str
    binary: bytes

    def stage(self, name: str) -> str | bytes:
        return getattr(self, name)


def context() -> Context:
    """An xDSL context with every dialect Legato's IR uses."""
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.dialects.scf import Scf

    ctx = Context()
    for d in (Builtin, Arith, Func, Scf):
        ctx.load_dialect(d)
    for factory in get_all_dialects().values():
        ctx.load_dialect(factory())
    return ctx


def print_ir(module: ModuleOp, debuginfo: bool = True) -> str:
    from io import StringIO

    out = StringIO()
    Printer(stream=out, print_debuginfo=debuginfo).print_op(module)
    return out.getvalue() + "\n"


def _verify(module: ModuleOp, stage: str) -> None:
    try:
        module.verify()
    except VerifyException as e:
        raise CompileError(f"internal compiler error: the {stage} IR does not verify: {e}") from e


def compile_kernel(
    module: ModuleOp, model: ComputeModel, kernel_name: str | None = None
) -> Artifacts:
    """Compile the one `legato.kernel` in `module` (modified in place) down to a binary."""
    kernels = [op for op in module.body.block.ops if isinstance(op, lg.KernelOp)]
    if len(kernels) != 1:
        raise CompileError(f"expected one legato.kernel in the module, found {len(kernels)}")
    name = kernel_name or kernels[0].sym_name.data
    attach_model(module, model)
    _verify(module, "legato")
    ctx = context()
    mlir = print_ir(module)

    pipelines.legato_to_core(model).apply(ctx, module)
    _verify(module, "core")
    core_ir = print_ir(module)

    pipelines.core_to_backend(model).apply(ctx, module)
    _verify(module, "backend")
    backend_ir = print_ir(module)

    asm = be.print_assembly(module)
    binary = emit_binary(module, model, asm)
    return Artifacts(name, model, mlir, core_ir, backend_ir, asm, binary)


def level_of(module: ModuleOp) -> str:
    """`legato`, `core` or `backend`: the level of the kernel in `module`."""
    for op in module.body.block.ops:
        if isinstance(op, lg.KernelOp):
            return "legato"
        if isinstance(op, core.KernelOp):
            return "core"
        if isinstance(op, be.KernelOp):
            return "backend"
    raise CompileError("the module holds no legato.kernel, core.kernel or backend.kernel")


def lower_to_backend(module: ModuleOp, model: ComputeModel) -> None:
    """Lower `module` (at any level) in place to allocated backend IR."""
    level = level_of(module)
    ctx = context()
    if level == "legato":
        pipelines.legato_to_core(model).apply(ctx, module)
        level = "core"
    if level == "core":
        pipelines.core_to_backend(model).apply(ctx, module)


def emit_binary(module: ModuleOp, model: ComputeModel, asm: str | None = None) -> bytes:
    """The ELF binary of the (allocated) backend kernel in `module`."""

    kernels = [op for op in module.body.block.ops if isinstance(op, be.KernelOp)]
    if len(kernels) != 1:
        raise CompileError(f"expected one backend.kernel in the module, found {len(kernels)}")
    kernel = kernels[0]
    if kernel.args is None:
        raise CompileError("backend.kernel has no `args`: the binary needs the argument layout")
    layout = arg_layout(kernel)
    if asm is None:
        asm = be.print_assembly(module)
    assembled = assemble(asm, filename=f"{kernel.sym_name.data}.s")
    return write_elf(
        assembled,
        model,
        layout,
        compiler={"pipeline": pipelines.describe()},
        kernel=kernel.sym_name.data,
    )
