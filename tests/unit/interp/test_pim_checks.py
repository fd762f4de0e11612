"""`pim.gemv` is seen by the runtime checks like every other instruction (issue 17, items 2 and 3):
its address operands are in the bounds table (`arch.bounds.ADDRESS_FIELDS`: dst, x and the
weight region), so an out-of-bounds operand derived from a runtime value stops at its source line
on the backend interpreter and on the emulator, and the backend interpreter's hazard checker sees
what it reads and writes (before, it skipped the instruction: a removed wait before a PIM
product was invisible there)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import legato
from legato import interp
from legato.compiler import compile_kernel, emit_binary, lower_to_backend
from legato.interp.differential import parse_module
from legato.interp.errors import InterpError, InterpHazardError
from legato.model import bertha
from legato.model.ir import attach_model
from legato.targets.bertha.arch.hazards import ReadBeforeTransferError
from legato.targets.bertha.emulator import EmulatorFault
from legato.targets.bertha.runtime import run_binary
from tests.corpus.pim_kernels import BF16, pim_evt0

BF = BF16.numpy
HERE = inspect.getsourcefile(inspect.currentframe())  # type: ignore[arg-type]

# x[64] @ W[64, 20] with x a view of a 192-element sram buffer at a runtime offset: the
# number of rows of argument 1 (so a test picks the offset by that argument's shape)
RUNTIME_X = """\
builtin.module {
  core.kernel @pim args [#core.arg<0, [64, 20], bf16, pim_dram, read>, #core.arg<1, [?256, 4], f32, shared_dram, read>] {
    core.program @core0 on core(0) {
      %w = core.arg 0 : !core.buf<[64, 20], bf16, pim_dram>
      %a = core.arg 1 : !core.buf<[?256, 4], f32, shared_dram>
      %n = core.dim %a, 0 : index
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[192], bf16, sram>
      %xs = core.subview %x [%n] [64] : !core.buf<[192], bf16, sram> -> !core.buf<[64], bf16, sram>
      %y = core.alloc sram {offset = 1024 : i64} : !core.buf<[24], f32, sram>
      core.pim_gemv %xs, %w, %y : !core.buf<[64], bf16, sram>, !core.buf<[64, 20], bf16, pim_dram>, !core.buf<[24], f32, sram> loc("k.py":7:5)
      core.dma_wait
      core.end
    }
  }
}
"""


def _backend():
    model = bertha.evt0_pim()
    module = parse_module(RUNTIME_X)
    attach_model(module, model)
    lower_to_backend(module, model)
    return module, model


def _args(offset: int):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 20)) / 8).astype(np.float32).astype(BF)
    return [w, np.zeros((offset, 4), np.float32)]


def test_the_compiler_bounds_a_pim_operand_at_a_runtime_address():
    module, _ = _backend()
    gemvs = [op for op in module.walk() if op.name == "backend.pim_gemv"]
    assert gemvs and all(
        str(op.attributes["legato.bounds"]) == '{b = "sram 0+384"}' for op in gemvs
    )


@pytest.mark.parametrize("offset", [0, 128])
def test_in_bounds_pim_operands_run_on_both(offset):
    module, model = _backend()
    interp.run(module, "backend", _args(offset), model)
    run_binary(emit_binary(module, model), model, _args(offset))


def test_an_out_of_bounds_pim_operand_stops_at_its_line_on_both():
    # offset 129: x reads bytes [258, 386) of the 384-byte buffer
    module, model = _backend()
    with pytest.raises(InterpError) as ei:
        interp.run(module, "backend", _args(129), model)
    text = str(ei.value)
    assert "out of bounds: reads bytes [258, 386) of the sram buffer at offset 0" in text
    assert "k.py:7:5" in text and "pim_gemv" in text
    with pytest.raises(EmulatorFault) as ef:
        run_binary(emit_binary(module, model), model, _args(129))
    assert "out of bounds: reads bytes [258, 386) of the sram buffer at offset 0" in str(ef.value)
    assert ef.value.source is not None and ef.value.source[:2] == ("k.py", 7)


K, N = 256, 40


def _tt(shape, memory="shared_dram"):
    return legato.get_model().tensor_type(BF16, shape, memory)


@legato.compile(backend=pim_evt0)
def received_matvec(x: _tt([1, K]), w: _tt([K, N], "pim_dram"), out: _tt([1, N])):
    """top sends x to core 0, which multiplies it by w on the PIM units: the product reads
    the buffer the transfer fills (its wait orders them)."""
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(x, device.get_core(0), "sram")  # hz:send
    with device.get_core(0):
        xs = legato.tensor.receive(x, 0, "sram")
        legato.tensor.memcpy(out, xs @ w)  # hz:pim


def _matvec_args():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, K)).astype(np.float32).astype(BF)
    w = (rng.standard_normal((K, N)) / 16).astype(np.float32).astype(BF)
    return [x, w, np.zeros((1, N), BF)]


def _line(tag: str) -> int:
    (n,) = [i for i, s in enumerate(open(HERE).read().splitlines(), 1) if s.endswith(tag)]
    return n


def test_a_removed_wait_before_a_pim_product_is_a_hazard_on_the_backend_interpreter():
    art = compile_kernel(received_matvec.emit_module(), received_matvec.model)
    ir = art.backend_ir
    assert "backend.pim_gemv" in ir
    args = _matvec_args()
    interp.run(ir, "backend", args, received_matvec.model)  # intact: clean
    ref = (args[0].astype(np.float32) @ args[1].astype(np.float32)).astype(BF)
    np.testing.assert_allclose(args[2].astype(np.float32), ref.astype(np.float32), rtol=2e-2)
    lines = ir.splitlines()
    (qwait,) = [i for i, s in enumerate(lines) if s.strip().startswith("backend.qwait ")]
    del lines[qwait]
    with pytest.raises(InterpHazardError) as ei:
        interp.run("\n".join(lines), "backend", _matvec_args(), received_matvec.model)
    e = ei.value
    assert isinstance(e.hazard, ReadBeforeTransferError)
    assert {e.first.source[1], e.second.source[1]} == {_line("# hz:send"), _line("# hz:pim")}
    assert "pim_gemv" in str(e) or "pim.gemv" in str(e)


# core 1 overwrites W (a DMA into its PIM-layout buffer) while core 0's PIM product reads it,
# with nothing ordering the two
UNORDERED_WEIGHT_WRITE = """\
builtin.module {
  core.kernel @pim args [#core.arg<0, [64, 20], bf16, pim_dram, readwrite>, #core.arg<1, [64], bf16, shared_dram, read>, #core.arg<2, [64, 20], bf16, shared_dram, read>] {
    core.program @core0 on core(0) {
      %w = core.arg 0 : !core.buf<[64, 20], bf16, pim_dram>
      %b = core.arg 1 : !core.buf<[64], bf16, shared_dram>
      %x = core.alloc sram {offset = 0 : i64} : !core.buf<[64], bf16, sram>
      %y = core.alloc sram {offset = 1024 : i64} : !core.buf<[24], f32, sram>
      core.dma %b to %x : !core.buf<[64], bf16, shared_dram>, !core.buf<[64], bf16, sram>
      core.dma_wait
      core.pim_gemv %x, %w, %y : !core.buf<[64], bf16, sram>, !core.buf<[64, 20], bf16, pim_dram>, !core.buf<[24], f32, sram> loc("k.py":7:5)
      core.end
    }
    core.program @core1 on core(1) {
      %w = core.arg 0 : !core.buf<[64, 20], bf16, pim_dram>
      %v = core.arg 2 : !core.buf<[64, 20], bf16, shared_dram>
      core.dma %v to %w : !core.buf<[64, 20], bf16, shared_dram>, !core.buf<[64, 20], bf16, pim_dram> loc("k.py":12:5)
      core.dma_wait
      core.end
    }
  }
}
"""


@pytest.mark.parametrize("level", ["core", "backend"])
def test_a_pim_product_reading_a_weight_another_core_writes_is_a_hazard(level):
    # the core interpreter counts the weight's whole PIM-layout buffer as read (before, it saw
    # only x: this pair was invisible at the core level)
    model = bertha.evt0_pim()
    module = parse_module(UNORDERED_WEIGHT_WRITE)
    if level == "backend":
        attach_model(module, model)
        lower_to_backend(module, model)
    w = np.ones((64, 20), BF)
    with pytest.raises(InterpHazardError) as ei:
        interp.run(module, level, [w, np.ones(64, BF), w.copy()], model)
    e = ei.value
    assert {e.first.source[1], e.second.source[1]} == {7, 12}, str(e)
    assert "pim_gemv" in str(e) or "pim.gemv" in str(e)
