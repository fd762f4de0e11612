"""The ELF line table (issue 17, item 4): each instruction's kernel source line travels in
`.legato.lines`, and emulator faults and deadlocks name the user's line."""

import json

import numpy as np
import pytest
from bertha_helpers import small_model, tensor

import legato
from legato.model import bertha
from legato.targets.bertha import elf
from legato.targets.bertha.abi import ArgLayout
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import BinaryError, read_elf, write_elf
from legato.targets.bertha.emulator import DeadlockError, EmulatorFault
from legato.targets.bertha.runtime import run_binary
from legato.types import i64

HERE = __file__


def line_of(text: str) -> int:
    """The line of this file that contains `text`."""
    with open(HERE) as f:
        return next(n for n, line in enumerate(f, 1) if text in line and "line_of" not in line)


NUMPY_LINE = next(
    i for i, t in enumerate(open(HERE).read().splitlines(), 1) if t == "import numpy as np"
)
# out-of-bounds store at pc 2 (8 bytes past the end of `out`)
OOB = ".program c0 on core(0)\n    ld r3, 8(r1)\n    li r4, 7\n    st r4, 8(r3)\n    halt\n"
DEADLOCK = ".program c0 on core(0)\n    li r3, 1\n    qwait sram.q0\n    halt\n"


def _build(src, args, lines):
    model = small_model()
    return model, write_elf(assemble(src), model, ArgLayout(list(args)), lines=lines)


def test_a_fault_names_the_kernel_source_line():
    lines = {"c0": [None, ("k.py", 3, 5), (HERE, NUMPY_LINE, 1), None]}
    model, binary = _build(OOB, [tensor("out", i64, [1], "write")], lines)
    assert read_elf(binary).lines == lines
    with pytest.raises(EmulatorFault) as ei:
        run_binary(binary, model, [np.zeros(1, np.int64)])
    e = ei.value
    assert e.pc == 2 and e.source == (HERE, NUMPY_LINE, 1)
    # the message quotes the line
    assert f"\n  at {HERE}:{NUMPY_LINE}:1: import numpy as np" in str(e)


def test_a_deadlock_names_each_blocked_modules_line():
    model, binary = _build(DEADLOCK, [], {"c0": [("k.py", 4, 9), ("k.py", 5, 9), None]})
    with pytest.raises(DeadlockError) as ei:
        run_binary(binary, model, [])
    e = ei.value
    assert e.sources == [("k.py", 5, 9)]
    assert "\n  core0 pc 1 is at k.py:5:9" in str(e)


@pytest.mark.parametrize(
    "table, want",
    [
        # the faulting store's own line is missing: the next instruction's (the op it sets up)
        ([None, None, None, ("k.py", 7, 3)], ("k.py", 7, 3)),
        # none after it: the nearest before it (a trailing instruction of an op)
        ([("k.py", 2, 1), ("k.py", 3, 5), None, None], ("k.py", 3, 5)),
    ],
    ids=["next", "previous"],
)
def test_a_fault_at_an_instruction_without_a_line_names_the_nearest(table, want):
    """Found auditing item 4: the lowering adds instructions without a line of their own (the
    `li`/`lsa` before an op, the argument-table `ld`s, a trailing `dmawait`, `halt`), ~40% of a
    small kernel's; a fault, limit or hazard stopped at one named no line at all."""
    model, binary = _build(OOB, [tensor("out", i64, [1], "write")], {"c0": table})
    with pytest.raises(EmulatorFault) as ei:
        run_binary(binary, model, [np.zeros(1, np.int64)])
    e = ei.value
    assert e.pc == 2 and e.source == want
    assert f"\n  at {want[0]}:{want[1]}:{want[2]} (the nearest line: pc 2 has none)" in str(e)


def test_a_deadlock_at_an_instruction_without_a_line_names_the_nearest():
    model, binary = _build(DEADLOCK, [], {"c0": [("k.py", 4, 9), None, None]})
    with pytest.raises(DeadlockError) as ei:
        run_binary(binary, model, [])
    assert ei.value.sources == [("k.py", 4, 9)]
    assert "\n  core0 pc 1 is at k.py:4:9 (the nearest line: pc 1 has none)" in str(ei.value)


def test_every_pc_of_a_compiled_kernel_has_a_line_of_its_own():
    """The lowerings locate every instruction they make at the op it was made for
    (`diagnostics.inherit_location`): the argument-table `ld`s and the `li` before an op at
    the op that reads them, the trailing `dmawait` / `halt` at the last op of the program.
    Before, ~40% of a small kernel's instructions had none (the nearest line stood in)."""
    from legato.targets.bertha.runtime import source_near

    x = np.ones((4, 8), np.float32)
    binary = read_elf(_double.lower("binary", x, np.zeros_like(x)))
    lines = set()
    for program, table in binary.lines.items():
        assert None not in table, program
        for pc in range(len(table)):
            loc, own = source_near(binary, program, pc)
            assert loc is not None and loc[0] == HERE and own, (program, pc)
            lines.add(loc[1])
    assert lines == {line_of('legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * 2.0)\n')}


def _one_core(ctx):
    return bertha.Bertha(ctx, "bertha", 1, False, 4, 1 << 30)


def _tt(shape):
    return legato.get_model().tensor_type(legato.types.float("float32"), shape, "shared_dram")


@legato.compile(backend=_one_core)
def _double(x: _tt([4, 8]), out: _tt([4, 8])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * 2.0)


def test_no_line_table_no_section_and_faults_as_before():
    model, binary = _build(OOB, [tensor("out", i64, [1], "write")], None)
    assert elf.LINES_SECTION not in [r[0] for r in elf._raw_sections(binary)]
    with pytest.raises(EmulatorFault) as ei:
        run_binary(binary, model, [np.zeros(1, np.int64)])
    assert ei.value.source is None and "\n  at" not in str(ei.value)


def test_a_malformed_line_table_is_refused():
    model, binary = _build(OOB, [tensor("out", i64, [1], "write")], {"c0": [("k.py", 1, 1)] * 4})
    with pytest.raises(BinaryError, match="line table of program 'c0' has 2 entries"):
        _build(OOB, [], {"c0": [None, ("k.py", 1, 1)]})
    for bad in (
        {"files": ["k.py"], "programs": {"c0": [[9, 0, 1, 1]]}},  # pc past the end
        {"files": ["k.py"], "programs": {"c0": [[0, 3, 1, 1]]}},  # no such file
        {"files": ["k.py"], "programs": {"zz": [[0, 0, 1, 1]]}},  # no such program
        {"files": [1], "programs": {}},
    ):
        from test_bertha_trust import rewrite

        with pytest.raises(BinaryError, match=elf.LINES_SECTION):
            read_elf(rewrite(binary, elf.LINES_SECTION, json.dumps(bad).encode()))


f32 = legato.types.float("float32")


def one_core(ctx):
    return bertha.Bertha(ctx, "bertha", 1, False, 4, 1 << 30)


@legato.compile(backend=one_core)
def double(
    x: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
    out: legato.get_model().tensor_type(f32, [4, 8], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * 2.0)  # LINE


def test_compiled_kernels_carry_their_source_lines():
    binary = read_elf(bytes(double.compile().binary))
    (table,) = binary.lines.values()
    line = next(i for i, t in enumerate(open(HERE).read().splitlines(), 1) if t.endswith("# LINE"))
    located = {loc for loc in table if loc is not None}
    assert located and all(loc[0] == HERE and loc[1] in (line - 1, line) for loc in located)
    # the DMA out, the load and the multiply: three different columns of the memcpy line
    assert len({loc[2] for loc in located if loc[1] == line}) == 3, located
