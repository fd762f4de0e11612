"""Every op at every level carries the user's source location (issue 17, item 7).

The lowerings locate each op they make at the op it was made for (`diagnostics.inherit_location`,
applied by the drivers' builders and by the passes that insert ops), so an error raised by a late
pass (backend selection, register allocation, memory planning, binary checks) and every entry of
the binary's line table names the user's file:line. A verifier failure after a pass is located
at the failing op and never prints the whole module.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from xdsl.dialects.builtin import FileLineColLoc, ModuleOp

from legato import compiler
from legato.dialects import backend as be
from legato.errors import CompileError
from legato.jit.kernel import Kernel
from legato.targets.bertha.elf import read_elf
from legato.transforms import pipelines

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.corpus import dsl_kernels, pim_kernels, runtime_kernels  # noqa: E402

KERNELS = [
    k
    for mod in (dsl_kernels, runtime_kernels, pim_kernels)
    for k in vars(mod).values()
    if isinstance(k, Kernel)
]


def test_the_kernels_are_there():
    # DSL kernels of every construct the lowerings handle: multi-core transfers, runtime loops
    # with carried tensors, the MPU in a loop, SPMD, barriers, semaphores, core-to-core sends,
    # a ring, debug prints and asserts, PIM
    assert len(KERNELS) >= 12, [k.name for k in KERNELS]


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_every_op_of_every_level_has_the_kernels_source_location(kernel):
    module = kernel.emit_module()
    model = kernel.model
    compiler.attach_model(module, model)
    ctx = compiler.context()
    where = Path(kernel.source.file).name
    for p in pipelines.LEGATO_TO_CORE + pipelines.CORE_TO_BACKEND:
        p().apply(ctx, module)
        ops = [op for op in module.walk() if not isinstance(op, ModuleOp)]
        missing = [op.name for op in ops if not isinstance(op.location, FileLineColLoc)]
        assert not missing, (p.name, len(missing), len(ops), sorted(set(missing)))
        files = {Path(op.location.filename.data).name for op in ops}
        assert files == {where}, p.name
    # and the binary's line table has an entry of its own for every instruction
    binary = compiler.emit_binary(module, model)
    for program, table in read_elf(bytes(binary)).lines.items():
        assert None not in table, program


def test_a_lowering_that_breaks_the_ir_is_a_located_error_without_an_ir_dump(monkeypatch):
    kernel = dsl_kernels.rmsnorm_rows
    real = pipelines.core_to_backend

    def broken(model=None):
        pipeline = real(model)

        class Broken:
            def apply(self, ctx, module):
                pipeline.apply(ctx, module)
                prog = next(op for op in module.walk() if isinstance(op, be.ProgramOp))
                prog.body.block.add_op(be.LiOp(1 << 40, be.reg(5)))  # imm out of range

        return Broken()

    monkeypatch.setattr(pipelines, "core_to_backend", broken)
    with pytest.raises(CompileError) as info:
        compiler.compile_kernel(kernel.emit_module(), kernel.model, verify_each=True)
    e = info.value
    text = str(e)
    # the op has no location of its own: its program's (the first `with device.get_...()`)
    assert e.location is not None and e.location.file == dsl_kernels.__file__, text
    assert "the backend IR does not verify: backend.li:" in text.splitlines()[0]
    assert "a bug in Legato" in text
    assert len(text.splitlines()) <= 5, text  # the message, the source line, a caret, a note
    assert "builtin.module" not in text and not getattr(e, "__notes__", None)
    assert e.__cause__ is None and e.__suppress_context__  # no chained dump in the traceback
