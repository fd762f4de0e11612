"""`backend-allocate-registers` tries the linear scan before the pressure sweep after a round
that split a few values (a scan that fits shows the sweep would split nothing): the allocation
must be the one the sweep-first rounds make, on programs that spill, rematerialize and copy
the Instruction Table over several rounds."""

from pathlib import Path

import pytest
from xdsl.parser import Parser

from legato.compiler import context
from legato.dialects.backend import print_assembly
from legato.transforms import regalloc

FILECHECK = Path(__file__).parents[2] / "filecheck" / "transforms"
INPUTS = [
    "backend-allocate-registers.mlir",
    "backend-allocate-registers-spill.mlir",
    "backend-allocate-registers-table-copy.mlir",
]


def _allocated(text: str) -> str:
    ctx = context()
    module = Parser(ctx, text).parse_module()
    regalloc.BackendAllocateRegistersPass().apply(ctx, module)
    return f"{module}\n{print_assembly(module)}"


@pytest.mark.parametrize("name", INPUTS)
def test_scan_first_allocates_as_the_sweep_first_rounds(name, monkeypatch):
    text = (FILECHECK / name).read_text()
    rounds = []
    scan = regalloc.BackendAllocateRegistersPass._scan
    sweep = regalloc.BackendAllocateRegistersPass._pressure_victims

    def counted_scan(self, *args):
        rounds.append("scan")
        return scan(self, *args)

    def counted_sweep(self, *args):
        rounds.append("sweep")
        return sweep(self, *args)

    monkeypatch.setattr(regalloc.BackendAllocateRegistersPass, "_scan", counted_scan)
    monkeypatch.setattr(regalloc.BackendAllocateRegistersPass, "_pressure_victims", counted_sweep)
    shortcut = _allocated(text)
    with_shortcut = list(rounds)
    rounds.clear()
    monkeypatch.setattr(regalloc, "_FEW", -1)  # never scan first: every round sweeps
    assert _allocated(text) == shortcut
    if name != "backend-allocate-registers.mlir":  # these split, then scan first
        assert with_shortcut.count("sweep") < rounds.count("sweep")
