"""Backend ops encode straight to instruction words (issue 12, item 5): for every corpus kernel,
the ELF the compiler builds from the ops in memory equals, byte for byte, the ELF of its printed
assembly assembled again (the assembler stays for `.s` input)."""

from __future__ import annotations

import pytest

from legato.compiler import bounds_table, compile_kernel, debug_table, emit_binary
from legato.dialects import backend as be
from legato.errors import CompileError
from legato.interp.differential import parse_module
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import write_elf
from legato.transforms import pipelines
from legato.transforms.core_to_backend import arg_layout
from tests.corpus.kernels import CORPUS


@pytest.mark.parametrize("kernel", CORPUS, ids=[k.name for k in CORPUS])
def test_binary_from_ops_equals_binary_from_reassembled_assembly(kernel):
    model = kernel.get_model()
    module = parse_module(kernel.mlir, kernel.name)
    try:
        art = compile_kernel(module, model)
    except CompileError:
        pytest.skip("the pipeline cannot compile this corpus entry yet")
    (bk,) = [op for op in module.body.block.ops if isinstance(op, be.KernelOp)]
    text = be.print_assembly(module)
    reassembled = write_elf(
        assemble(text, filename=f"{kernel.name}.s"),
        model,
        arg_layout(bk),
        compiler={"pipeline": pipelines.describe()},
        kernel=bk.sym_name.data,
        bounds=bounds_table(bk),  # metadata of the ops, which the assembly text does not carry
        debug=debug_table(bk),
    )
    assert art.binary == emit_binary(module, model) == reassembled
    encoded, parsed = be.encode(module), assemble(text)
    assert encoded.kernel == parsed.kernel
    for mine, theirs in zip(encoded.programs, parsed.programs, strict=True):
        assert (mine.name, mine.context, mine.memory, mine.labels) == (
            theirs.name,
            theirs.context,
            theirs.memory,
            theirs.labels,
        )
        assert mine.instructions == theirs.instructions


def test_an_unallocated_register_names_the_op():
    from legato.dialects.legato import context_from_str

    li = be.LiOp(5)
    prog = be.ProgramOp("core0", context_from_str("core(0)"), [li, be.HaltOp()])
    with pytest.raises(ValueError, match="backend.li: register .* is not allocated"):
        prog.encode()
