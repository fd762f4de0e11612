"""`legato.device_print` / `legato.device_assert` agree at every level (issue 18 item 2).

The same kernel is run by the legato, core and backend interpreters and by the emulator: each
module's sequence of records (module, core, source line, message, value bits) is the same,
the values are the ones numpy computes, only the emulator has cycles; a failed assert names the
kernel's Python line, the module and the failing elements at every level. The binary carries
the debug table only when the kernel prints (`.legato.debug`), and the reader and the emulator
refuse a debug instruction whose entry is missing or of the other kind.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import legato
from legato.errors import DeviceAssertError
from legato.interp.differential import run_everywhere
from legato.model import bertha
from legato.targets.bertha import isa
from legato.targets.bertha.arch import debug
from legato.targets.bertha.asm import assemble
from legato.targets.bertha.elf import DEBUG_SECTION, BinaryError, read_elf, write_elf
from legato.targets.bertha.emulator import EmulatorFault
from legato.targets.bertha.runtime import run_binary
from tests.corpus.dsl_kernels import DEBUG_ROWS, debug_rows, rmsnorm_rows

F32 = legato.types.float("float32")
LEVELS = ("legato", "core", "backend")


@legato.compile(backend=bertha)
def spmd_debug(x: legato.get_model().tensor_type(F32, [1, 8], "shared_dram")):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_all_cores(), "sram")
    with device.get_all_cores():
        xs = legato.tensor.receive(x, 0, "sram")
        c = legato.core_id()
        legato.device_print("core", c, xs[:, 0:2])
        legato.device_assert(xs < 4.0, "x is below 4")


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, t in enumerate(lines) if text in t)


def _per_module(records) -> dict:
    out: dict = {}
    for r in records:
        out.setdefault(r.module, []).append(r.key())
    return out


def _runs(kernel, make_args):
    """{level: (records, args)} for the three interpreters and the emulator."""
    out = {}
    for level in LEVELS:
        args = make_args()
        out[level] = (kernel.interpret(*args, level=level).prints, args)
    args = make_args()
    kernel(*args)
    out["emulator"] = (kernel.last_run.prints, args)
    return out


def test_every_level_prints_the_same_records():
    x = np.arange(8, dtype=np.float32).reshape(1, 8) / 4
    runs = _runs(spmd_debug, lambda: [x.copy()])
    n = spmd_debug.model.num_cores
    line = _line_of(spmd_debug, 'device_print("core"')
    base = _per_module(runs["legato"][0])
    assert sorted(base) == sorted(f"core{i}" for i in range(n))
    for level, (records, _) in runs.items():
        assert _per_module(records) == base, level
        for r in records:
            core = int(r.module[4:])
            assert r.core == core and r.loc[1] == line and r.message == "core"
            value, head = r.values
            assert value == core  # the runtime core id
            np.testing.assert_array_equal(head, x[:, 0:2])
            assert (r.cycle is None) == (level != "emulator")
            text = r.text()
            assert (
                text.startswith(f"[core{core} (core {core})") and f":{line}: core {core} " in text
            )
    cycles = [r.cycle for r in runs["emulator"][0]]
    assert all(c > 0 for c in cycles)


def test_the_corpus_kernel_prints_the_same_at_every_level(capsys):
    results, compiled = run_everywhere(DEBUG_ROWS)
    del results, compiled
    printed = capsys.readouterr().out.splitlines()
    # four levels x two cores x two prints, each a line of its own
    assert len(printed) == 16
    by_level = [printed[i : i + 4] for i in range(0, 16, 4)]
    strip = [sorted(p.split("] ", 1)[1] for p in lines) for lines in by_level]
    assert strip[0] == strip[1] == strip[2] == strip[3]
    x = DEBUG_ROWS.args()[0]
    for i in range(2):
        row_max = debug.format_value(x[i : i + 1].max(1, keepdims=True))
        assert f"<no source location>: row {i} max {row_max}" in strip[0]
    assert all("cycle" in p for p in by_level[3]) and not any("cycle" in p for p in by_level[0])


def test_printed_values_are_the_kernels_values():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    runs = _runs(debug_rows, lambda: [x.copy(), np.zeros_like(x)])
    for records, args in runs.values():
        mods = {}
        for r in records:
            mods.setdefault(r.module, []).append(r)
        for i in range(2):
            row_max, head = mods[f"core{i}"]
            assert row_max.message == f"row {i} max" and head.message == "head"
            np.testing.assert_array_equal(row_max.values[0], x[i : i + 1].max(1, keepdims=True))
            np.testing.assert_array_equal(head.values[0], args[1][i : i + 1, 0:4])
        np.testing.assert_allclose(args[1], np.exp(x - x.max(1, keepdims=True)), rtol=1e-6)


@pytest.mark.parametrize("level", [*LEVELS, "emulator"])
def test_a_failed_assert_names_the_line_and_the_elements(level):
    x = np.arange(8, dtype=np.float32).reshape(1, 8)  # 4..7 fail `x < 4`
    with pytest.raises(DeviceAssertError) as e:
        if level == "emulator":
            spmd_debug(x)
        else:
            spmd_debug.interpret(x, level=level)
    line = _line_of(spmd_debug, "device_assert(")
    msg = str(e.value)
    assert f"device_assert failed at {__file__}:{line}: x is below 4" in msg
    assert "4 of 8 elements of the condition are false, at (0, 4), (0, 5), (0, 6), (0, 7)" in msg
    assert e.value.loc[1] == line and e.value.module.startswith("core")
    assert ("at cycle" in msg) == (level == "emulator")


def test_a_kernel_without_them_has_no_debug_table():
    art = rmsnorm_rows.compile()
    assert read_elf(art.binary).debug == []
    assert DEBUG_SECTION.encode() not in art.binary
    art = debug_rows.compile()
    entries = read_elf(art.binary).debug
    assert [(e.op, e.site, e.arg, e.kind) for e in entries] == [
        ("print", 0, 0, "tensor"),
        ("print", 1, 0, "tensor"),
        ("assert", 2, 0, "tensor"),
        ("print", 3, 0, "tensor"),
        ("print", 4, 0, "tensor"),
        ("assert", 5, 0, "tensor"),
    ]
    assert entries[0].loc[1] == _line_of(debug_rows, 'device_print("row"')


def _binary(asm: str, entries: list[debug.Entry]) -> bytes:
    from legato.targets.bertha.abi import ArgLayout

    mod = assemble(asm)
    return write_elf(mod, bertha.evt0(), ArgLayout.from_json({"args": []}), debug=entries)


ASM = """.kernel k
.program core0 on core(0)
    li r3, 7
    dbg.print r3, r0, 0
    dbg.assert r3, r0, 1
    halt
"""


def test_hand_written_debug_instructions():
    site = debug.Entry("print", 0, "r3 is", ("k.s", 3, 5))
    check = debug.Entry("assert", 1, "r3 nonzero", ("k.s", 4, 5))
    res = run_binary(_binary(ASM, [site, check]), bertha.evt0(), [])
    (rec,) = res.prints
    assert (rec.module, rec.core, rec.values, rec.message) == ("core0", 0, [7], "r3 is")
    assert rec.cycle == 1  # after `li`; the debug instructions take no cycle
    assert res.module_cycles["core0"] == 2
    with pytest.raises(BinaryError, match="names debug entry 1, which .legato.debug does not"):
        read_elf(_binary(ASM, [site, site]))  # an assert naming a print entry
    with pytest.raises(BinaryError, match="value kind 'vector'"):
        _binary(ASM, [site, debug.Entry("assert", 1, "", None, kind="vector")])
    # no table at all: the instruction faults when it runs, naming the entry
    with pytest.raises(EmulatorFault, match="names debug entry 0, but the binary's .legato.debug"):
        run_binary(_binary(ASM, []), bertha.evt0(), [])
    assert isa.BY_MNEMONIC["dbg.print"].timing == "M"


def test_frontend_errors():
    with pytest.raises(legato.CompileError, match="compile-time values .* come before"):

        @legato.compile(backend=bertha)
        def k1(x: legato.get_model().tensor_type(F32, [1, 8], "shared_dram")):
            device = legato.get_context().get_device()
            with device.get_top():
                legato.device_print("x", x, "after")

        k1.to_mlir()
    with pytest.raises(legato.CompileError, match="the condition is false at compile time: no"):

        @legato.compile(backend=bertha)
        def k2(x: legato.get_model().tensor_type(F32, [1, 8], "shared_dram")):
            device = legato.get_context().get_device()
            with device.get_top():
                legato.device_assert(1 > 2, "no")

        k2.to_mlir()
    with pytest.raises(legato.CompileError, match="must run in an execution context"):

        @legato.compile(backend=bertha)
        def k3(x: legato.get_model().tensor_type(F32, [1, 8], "shared_dram")):
            legato.device_print("x", x)

        k3.to_mlir()
    with pytest.raises(legato.LegatoError, match="only exists inside a @legato.compile kernel"):
        legato.device_print("x")


@pytest.mark.parametrize(
    "table",
    [b"[]", b'{"entries": 3}', b'{"entries": [[1, 2]]}', b'{"entries": [{"op": "print"}]}', b"{"],
)
def test_a_malformed_debug_table_is_a_binary_error(table):
    """Whatever the section holds, reading it is a BinaryError naming it (nothing else)."""
    from legato.targets.bertha.elf import _read_debug

    with pytest.raises(BinaryError, match=r"\.legato\.debug is not a valid debug table"):
        _read_debug(table, [])
