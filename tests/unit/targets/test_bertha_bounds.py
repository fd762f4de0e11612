"""Runtime bounds (issue 17, item 2): an index or slice at a runtime offset past the end of an
argument or buffer stops with the kernel's source line, the argument, its size and the bytes
asked for, on the emulator and in the core and backend interpreters; it never reads or writes
the neighbouring allocation (shared-DRAM arguments are packed, so without the check it would)."""

import json

import numpy as np
import pytest
import torch
from test_bertha_trust import edit_json

import legato
from legato.compiler import emit_binary, lower
from legato.interp.differential import parse_module
from legato.interp.errors import InterpError
from legato.model import bertha
from legato.model.targets import target_model
from legato.targets.bertha import elf
from legato.targets.bertha.arch.bounds import Extent
from legato.targets.bertha.elf import BinaryError, read_elf
from legato.targets.bertha.emulator import OutOfBoundsError
from legato.targets.bertha.runtime import run_binary

HERE = __file__
f32 = legato.types.float("float32")


def line_of(marker: str) -> int:
    return next(i for i, t in enumerate(open(HERE).read().splitlines(), 1) if t.endswith(marker))


def one_core(ctx):
    return bertha.Bertha(ctx, "bertha", 1, False, 4, 1 << 30)


def tt(shape):
    return legato.get_model().tensor_type(f32, shape, "shared_dram")


@legato.compile(backend=one_core)
def row_after(n: tt(((-1, 8), 32)), b: tt([32, 32]), after: tt([4, 32]), out: tt([1, 32])):
    """out = b[n + 31]: in bounds for n = 0, one row past `b` (into `after`) for n = 1."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        c = n.size(0)
        legato.tensor.memcpy(out, legato.tensor.load(b[c + 31 : c + 32, :]))  # READ


@legato.compile(backend=one_core)
def write_row(n: tt(((-1, 8), 32)), x: tt([1, 32]), out: tt([2, 32]), after: tt([4, 32])):
    """out[n] = x: in bounds for n < 2, into `after` for n = 2."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        c = n.size(0)
        legato.tensor.memcpy(out[c : c + 1, :], legato.tensor.load(x))  # WRITE


def rows(n):
    return torch.zeros(n, 32)


def test_an_in_bounds_runtime_slice_reads_its_row():
    b = torch.randn(32, 32)
    out = torch.zeros(1, 32)
    row_after(rows(0), b, torch.full((4, 32), 7.0), out)
    assert torch.equal(out[0], b[31])


def test_a_read_past_an_argument_stops_at_the_kernels_line():
    b, after, out = torch.randn(32, 32), torch.full((4, 32), 7.0), torch.zeros(1, 32)
    with pytest.raises(OutOfBoundsError) as ei:
        row_after(rows(1), b, after, out)
    e = ei.value
    assert isinstance(e, legato.errors.LegatoRuntimeError)
    msg = str(e)
    # the argument, its size, the bytes asked for (row 32 of 128-byte rows), the source line
    assert "reads bytes [4096, 4224) of argument 'b' ([32, 32] f32), which has 4096 bytes" in msg
    assert e.what.startswith("argument 'b'") and e.size == 4096 and e.range == (4096, 4224)
    assert e.source[:2] == (HERE, line_of("# READ"))
    assert f"\n  at {HERE}:{line_of('# READ')}:" in msg
    assert torch.equal(out, torch.zeros(1, 32))  # nothing of `after` reached the caller


def test_a_write_past_an_argument_never_reaches_the_next_one():
    x, out, after = torch.randn(1, 32), torch.zeros(2, 32), torch.full((4, 32), 7.0)
    write_row(rows(1), x, out, after)
    assert torch.equal(out[1], x[0]) and torch.equal(out[0], torch.zeros(32))
    with pytest.raises(OutOfBoundsError, match=r"writes bytes \[256, 384\) of argument 'out'"):
        write_row(rows(2), x, torch.zeros(2, 32), after)
    assert torch.equal(after, torch.full((4, 32), 7.0))


@pytest.mark.parametrize("level", ["core", "backend"])
def test_the_interpreters_refuse_the_same_access(level):
    b, after = torch.randn(32, 32), torch.full((4, 32), 7.0)
    row_after.interpret(rows(0), b, after, out := torch.zeros(1, 32), level=level)
    assert torch.equal(out[0], b[31])
    with pytest.raises(InterpError, match=r"outside|out of bounds") as ei:
        row_after.interpret(rows(1), b, after, torch.zeros(1, 32), level=level)
    assert f"{HERE}:{line_of('# READ')}" in str(ei.value)
    with pytest.raises(InterpError, match=r"outside|out of bounds"):
        write_row.interpret(rows(2), torch.ones(1, 32), torch.zeros(2, 32), after, level=level)


# -- .mlir level: a core module whose subview starts at the runtime end of a dynamic dim ------

CORE_IR = """
builtin.module {
  core.kernel @past args [#core.arg<0, [?8, 4], f32, shared_dram, read>,
                          #core.arg<1, [4, 4], f32, shared_dram, read>,
                          #core.arg<2, [1, 4], f32, shared_dram, write>] {
    core.program @core0 on core(0) {
      %a = core.arg 0 : !core.buf<[?8, 4], f32, shared_dram>
      %o = core.arg 2 : !core.buf<[1, 4], f32, shared_dram>
      %n = core.dim %a, 0 : index
      %c = arith.constant OFFSET : index
      %r = arith.addi %n, %c : index
      %v = core.subview %a [%r, 0] [1, 4] : !core.buf<[?8, 4], f32, shared_dram> -> !core.buf<[1, 4], f32, shared_dram>
      core.dma %v to %o : !core.buf<[1, 4], f32, shared_dram>, !core.buf<[1, 4], f32, shared_dram>
      core.dma_wait
      core.end
    }
  }
}
"""


def _core_module(offset: int):
    return parse_module(CORE_IR.replace("OFFSET", str(offset)), "past")


def _binary(offset: int) -> bytes:
    module = _core_module(offset)
    lower(module, target_model("bertha"), "backend")
    return emit_binary(module, target_model("bertha"))


def _args():
    a = np.arange(8, dtype=np.float32).reshape(2, 4)  # 2 of its 8 rows: 32 bytes
    return [a, np.full((4, 4), 7.0, np.float32), np.zeros((1, 4), np.float32)]


def test_a_core_module_reading_past_a_dynamic_dims_runtime_end_is_refused():
    model = target_model("bertha")
    args = _args()
    run_binary(_binary(-1), model, args)
    assert np.array_equal(args[2][0], args[0][1])  # row n - 1
    binary = _binary(0)
    # one bounded operand: the DMA's source (field b), within argument 0
    (marks,) = read_elf(binary).bounds["core0"].values()
    assert marks == {"b": Extent(arg=0)}
    args = _args()
    with pytest.raises(OutOfBoundsError, match=r"reads bytes \[32, 48\) of argument 'arg0'"):
        run_binary(binary, model, args)
    assert np.array_equal(args[2], np.zeros((1, 4), np.float32))


def test_the_bounds_are_resolved_once_per_binary_and_argument_layout(monkeypatch):
    """The runtime resolves a binary's extents once per argument layout (issue 15): the
    cached resolution equals a fresh `arch.bounds.resolve`, and any change of an argument's
    address, size or name resolves again, never reusing the old extents."""
    from legato.targets.bertha import runtime
    from legato.targets.bertha.arch.bounds import resolve

    model = target_model("bertha")
    data = _binary(-1)
    binary = runtime.load_binary(data, model, cached=True)
    ext = {0: (0x1000, 32, "argument 'arg0' ([2, 4] f32)"), 2: (0x2000, 16, "argument 'o'")}
    got = runtime.resolved_bounds(binary, ext)
    fresh = {p: resolve(rows, ext) for p, rows in binary.bounds.items()}
    assert got == fresh and got["core0"]  # (one bounded pc)
    assert runtime.resolved_bounds(binary, dict(ext)) is got
    for changed in (
        {**ext, 0: (0x1040, 32, ext[0][2])},  # another address
        {**ext, 0: (0x1000, 48, ext[0][2])},  # another size
        {**ext, 0: (0x1000, 32, "argument 'arg0' ([3, 4] f32)")},  # another name
        {2: ext[2]},  # argument 0 not placed
    ):
        again = runtime.resolved_bounds(binary, changed)
        assert again is not got and again != got
        assert again == {p: r for p, rows in binary.bounds.items() if (r := resolve(rows, changed))}

    calls = []

    def counted(rows, extents):
        calls.append(dict(extents))
        return resolve(rows, extents)

    monkeypatch.setattr(runtime, "resolve_bounds", counted)
    args = _args()
    run_binary(data, model, args)
    n = len(calls)
    args = _args()
    run_binary(data, model, args)  # the same layout: resolved before
    assert len(calls) == n and np.array_equal(args[2][0], args[0][1])
    # Three rows of arg0 (48 bytes): row 2 is in bounds only with this run's extent, so a
    # reused two-row resolution would fault here.
    args = _args()
    args[0] = np.arange(12, dtype=np.float32).reshape(3, 4)
    run_binary(data, model, args)
    assert len(calls) == n + 1 and calls[-1][0][1] == 48
    assert np.array_equal(args[2][0], args[0][2])


@pytest.mark.parametrize("level", ["core", "backend"])
def test_the_interpreters_refuse_it_at_the_mlir_level(level):
    from legato.interp import api

    model = target_model("bertha")
    module = _core_module(0)
    if level == "backend":
        lower(module, model, "backend")
    with pytest.raises(InterpError, match=r"out of bounds: reads bytes \[32, 48\) of argument"):
        api.run(module, None, _args(), model)


# -- the binary's `.legato.bounds` -----------------------------------------------------------


def _sections(binary: bytes) -> dict[str, bytes]:
    return {n: d for n, _t, _f, d in elf._raw_sections(binary)}


def test_the_bounds_section_is_checked_by_the_reader():
    binary = _binary(0)
    table = json.loads(_sections(binary)[elf.BOUNDS_SECTION])
    ((pc, field, ext),) = table["programs"]["core0"]
    assert (field, ext) == ("b", {"arg": 0})
    for bad, why in (
        ([[999, "b", {"arg": 0}]], "no instruction 999"),
        ([[pc, "c", {"arg": 0}]], "field 'c' of a dma instruction is not an address"),
        ([[pc, "b", {"arg": 7}]], "argument 7 is not a tensor argument"),
        ([[pc, "b", ["nowhere", 0, 8]]], "'nowhere' is not a core memory space"),
        ([[pc, "b", {"arg": 0}], [pc, "b", {"arg": 1}]], "field 'b' given twice"),
        ("rows", "rows not a list"),
    ):

        def fn(meta, bad=bad):
            meta["programs"]["core0"] = bad

        with pytest.raises(BinaryError, match=elf.BOUNDS_SECTION) as ei:
            read_elf(edit_json(binary, elf.BOUNDS_SECTION, fn))
        assert why in str(ei.value)


def test_a_static_kernel_carries_no_bounds():
    """Accesses at static offsets are proven in bounds at compile time: no section, no cost."""
    from test_bertha_lines import double

    binary = bytes(double.compile().binary)
    assert elf.BOUNDS_SECTION not in _sections(binary)


i64 = legato.types.int("int64")


@legato.compile(backend=one_core)
def lookup(
    table: tt([8, 16]),
    ids: legato.get_model().tensor_type(i64, [3], "shared_dram"),
    after: tt([4, 16]),
    out: tt([3, 16]),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        i = legato.tensor.load(ids, "sram")
        legato.tensor.memcpy(out, legato.tensor.gather(table, i))  # GATHER


def test_a_gathered_id_past_the_table_is_refused():
    table, after = torch.randn(8, 16), torch.full((4, 16), 7.0)
    out = torch.zeros(3, 16)
    lookup(table, torch.tensor([7, 0, 3]), after, out)
    assert torch.equal(out, table[[7, 0, 3]])
    for bad in (8, -1):
        out = torch.zeros(3, 16)
        with pytest.raises(OutOfBoundsError, match="of argument 'table'") as ei:
            lookup(table, torch.tensor([1, bad, 2]), after, out)
        assert ei.value.source[:2] == (HERE, line_of("# GATHER"))
        assert not (out == 7.0).any()


@legato.compile(backend=one_core)
def lookup_on_chip(
    table: tt([12, 16]),
    ids: legato.get_model().tensor_type(i64, [3], "shared_dram"),
    out: tt([3, 16]),
):
    """Rows of an on-chip table that is a slice (rows 2..9) of a larger SRAM buffer, and the
    same with torch's `x[idx]` wrap (a negative id counts from the end)."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        t = (legato.tensor.load(table, "sram") + 1.0)[2:10]
        i = legato.tensor.load(ids, "sram")
        g = legato.tensor.gather(t, i)  # ON_CHIP
        w = legato.tensor.gather(t, i, wrap=True)  # ON_CHIP_WRAP
        legato.tensor.memcpy(out, g + w)


@pytest.mark.parametrize("level", ["emulator", "backend", "core", "legato"])
def test_a_gathered_id_past_an_on_chip_table_is_refused(level):
    """The table's buffer has rows past the table (rows 10, 11 of the slice's buffer): id 8 and
    id -1 (without wrap) must stop at the gather's line, never read the buffer's next row; and a
    wrapping gather refuses id 8 too (a `rem rows` wrapped it to row 0: torch raises)."""
    table = torch.randn(12, 16)
    t = table[2:10] + 1.0
    out = torch.zeros(3, 16)
    run = _runner(lookup_on_chip, level)
    run(table, torch.tensor([7, 0, 3]), out)
    assert torch.equal(out, t[[7, 0, 3]] * 2)
    for bad, marker in ((8, "# ON_CHIP"), (-1, "# ON_CHIP"), (9, "# ON_CHIP")):
        with pytest.raises((OutOfBoundsError, InterpError)) as ei:
            run(table, torch.tensor([1, bad, 2]), torch.zeros(3, 16))
        assert f"{HERE}:{line_of(marker)}" in _where(ei.value), str(ei.value)


@legato.compile(backend=one_core)
def lookup_wrap_only(
    table: tt([12, 16]),
    ids: legato.get_model().tensor_type(i64, [3], "shared_dram"),
    out: tt([3, 16]),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        t = (legato.tensor.load(table, "sram") + 1.0)[2:10]
        i = legato.tensor.load(ids, "sram")
        legato.tensor.memcpy(out, legato.tensor.gather(t, i, wrap=True))  # WRAP_ONLY


@pytest.mark.parametrize("level", ["emulator", "backend", "core", "legato"])
def test_a_wrapping_gather_takes_minus_rows_to_rows_and_refuses_the_rest(level):
    table = torch.randn(12, 16)
    t = table[2:10] + 1.0
    run = _runner(lookup_wrap_only, level)
    out = torch.zeros(3, 16)
    run(table, torch.tensor([-1, -8, 7]), out)
    assert torch.equal(out, t[[-1, -8, 7]])
    for bad in (8, 15, -9, -16):
        with pytest.raises((OutOfBoundsError, InterpError)) as ei:
            run(table, torch.tensor([0, bad, 1]), torch.zeros(3, 16))
        assert f"{HERE}:{line_of('# WRAP_ONLY')}" in _where(ei.value), (bad, str(ei.value))


def _runner(kernel, level):
    """Runs `kernel` on the emulator (its JIT call) or at one interpreter level."""
    if level == "emulator":
        return kernel
    return lambda *tensors: kernel.interpret(*tensors, level=level)


def _where(e) -> str:
    src = getattr(e, "source", None)
    return f"{src[0]}:{src[1]}" if src else str(e)


@legato.compile(backend=one_core)
def lookup_two_indices(
    table: tt([12, 4, 16]),
    ids: legato.get_model().tensor_type(i64, [3], "shared_dram"),
    cols: legato.get_model().tensor_type(i64, [3], "shared_dram"),
    out: tt([3, 16]),
):
    """`t[i, j]` of an on-chip table that is a slice (rows 2..9) of a larger SRAM buffer, with
    and without torch's wrap."""
    device = legato.get_context().get_device()
    with device.get_core(0):
        t = (legato.tensor.load(table, "sram") + 1.0)[2:10]
        i = legato.tensor.load(ids, "sram")
        j = legato.tensor.load(cols, "sram")
        g = legato.tensor.gather(t, (i, j))  # TWO
        w = legato.tensor.gather(t, (i, j), wrap=True)  # TWO_WRAP
        legato.tensor.memcpy(out, g + w)


@pytest.mark.parametrize("level", ["emulator", "backend", "core", "legato"])
def test_a_two_index_gather_refuses_an_index_past_its_own_dim(level):
    """`t[i, j]` combines the indices into the row `4 i + j` on the scalar unit: a `j` past its
    dim of 4 whose combined row lies inside the table (i=1, j=4: row 8) or inside the buffer
    after it (i=7, j=4) must stop at the gather's line, never read another row; a wrapping
    gather takes j = -4 to 0 but refuses -5."""
    table = torch.randn(12, 4, 16)
    t = table[2:10] + 1.0
    run = _runner(lookup_two_indices, level)
    out = torch.zeros(3, 16)
    i, j = torch.tensor([7, 0, 3]), torch.tensor([3, 0, 1])
    run(table, i, j, out)
    assert torch.equal(out, t[i, j] * 2)
    for bad_i, bad_j, marker in (
        (1, 4, "# TWO"),
        (7, 4, "# TWO"),
        (0, -1, "# TWO"),
        (8, 0, "# TWO"),
    ):
        with pytest.raises((OutOfBoundsError, InterpError)) as ei:
            run(table, torch.tensor([0, bad_i, 2]), torch.tensor([0, bad_j, 1]), out)
        assert f"{HERE}:{line_of(marker)}" in _where(ei.value), (bad_i, bad_j, str(ei.value))


@legato.compile(backend=one_core)
def lookup_two_wrap(
    table: tt([8, 4, 16]),
    ids: legato.get_model().tensor_type(i64, [3], "shared_dram"),
    cols: legato.get_model().tensor_type(i64, [3], "shared_dram"),
    out: tt([3, 16]),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        i = legato.tensor.load(ids, "sram")
        j = legato.tensor.load(cols, "sram")
        legato.tensor.memcpy(out, legato.tensor.gather(table, (i, j), wrap=True))  # WRAP_TWO


@pytest.mark.parametrize("level", ["emulator", "backend", "core", "legato"])
def test_a_wrapping_two_index_gather_from_shared_dram(level):
    """The table left in shared DRAM (an argument): negative indices count from the end of
    their own dim; one outside [-d, d) of its dim stops at the line."""
    table = torch.randn(8, 4, 16)
    run = _runner(lookup_two_wrap, level)
    out = torch.zeros(3, 16)
    i, j = torch.tensor([-1, -8, 7]), torch.tensor([-4, 3, -1])
    run(table, i, j, out)
    assert torch.equal(out, table[i, j])
    for bad_i, bad_j in ((0, 4), (0, -5), (8, 0), (-9, 1), (-1, 7)):
        with pytest.raises((OutOfBoundsError, InterpError)) as ei:
            run(table, torch.tensor([0, bad_i, 1]), torch.tensor([0, bad_j, 1]), out)
        assert f"{HERE}:{line_of('# WRAP_TWO')}" in _where(ei.value), (bad_i, bad_j, str(ei.value))
