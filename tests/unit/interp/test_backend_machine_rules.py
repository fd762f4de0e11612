"""The backend interpreter applies the machine model's rules (`legato.targets.bertha.arch`) with
the emulator's wording: the dma2d stride rule, the core a selector names, one program a module."""

import numpy as np
import pytest

from legato.interp import api
from legato.interp.errors import InterpError, InvalidModuleError
from legato.model import bertha

HEAD = "backend.kernel @k args [#core.arg<0, [16], f32, shared_dram, read>] {\n"


def _run(body: str):
    return api.run(HEAD + body + "}\n", "backend", [np.zeros(16, np.float32)], bertha.evt0())


def test_dma2d_stride_smaller_than_the_row_is_the_emulators_fault():
    body = """  backend.program @c on core(0) {
    %d = backend.lsa sram, 0 : !backend.reg
    %s = backend.lsa sram, 4096 : !backend.reg
    %r = backend.li 64 : !backend.reg
    %shape = backend.lih %r, 2 : (!backend.reg) -> !backend.reg
    %lo = backend.li 8 : !backend.reg
    %stride = backend.lih %lo, 64 : (!backend.reg) -> !backend.reg
    backend.dma2d %d, %s, %shape, %stride : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
    backend.halt
  }
"""
    with pytest.raises(
        InterpError,
        match=r"dma2d strides \(src 8, dst 64\) smaller than the row of 64 bytes: rows would "
        "overlap",
    ):
        _run(body)


def test_lsa_of_a_core_the_model_lacks():
    body = """  backend.program @c on core(0) {
    %c = backend.li 40 : !backend.reg
    %a = backend.lsa core(%c) sram, 0 : (!backend.reg) -> !backend.reg
    backend.halt
  }
"""
    with pytest.raises(InterpError, match=r"core index 40 out of range \(the model has 32 cores\)"):
        _run(body)


def test_notify_of_a_core_the_model_lacks():
    body = """  backend.program @c on core(0) {
    %c = backend.li 33 : !backend.reg
    %a = backend.lsa sram, 0 : !backend.reg
    %n = backend.li 8 : !backend.reg
    backend.dma %a, %a, %n notify core(%c) sram queue 0 : (!backend.reg, !backend.reg, !backend.reg, !backend.reg) -> ()
    backend.halt
  }
"""
    with pytest.raises(InterpError, match=r"core index 33 out of range \(the model has 32 cores\)"):
        _run(body)


def test_two_programs_on_one_core():
    body = """  backend.program @a on core(1) {
    backend.halt
  }
  backend.program @b on all_cores {
    backend.halt
  }
"""
    with pytest.raises(
        InvalidModuleError, match=r"core 1 has two programs \(@a and @b\); a module has one PC"
    ):
        _run(body)
