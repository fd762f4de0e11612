"""docs/errors.md cannot rot: every catalogued error has a trigger here that raises it for real,
and the `Message contains:` fragment of its entry is in the raised error's text. An entry
without a trigger, or a trigger without an entry, fails too."""

from __future__ import annotations

import importlib.util
import itertools
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import legato
from legato.errors import CompileError, LegatoError, LegatoRuntimeError
from legato.model import bertha
from legato.targets.bertha.elf import BinaryError
from legato.targets.bertha.emulator import EmulatorError

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
ENTRY = re.compile(r"^### `([a-z0-9-]+)`", re.MULTILINE)
FRAGMENT = re.compile(r"^Message contains: `(.+)`\s*$", re.MULTILINE)


def doc_entries() -> dict[str, str | None]:
    """{entry id: its `Message contains:` fragment (None when the entry has none)}."""
    text = DOC.read_text()
    heads = list(ENTRY.finditer(text))
    out: dict[str, str | None] = {}
    for h, nxt in itertools.zip_longest(heads, heads[1:]):
        body = text[h.end() : nxt.start() if nxt else len(text)]
        frags = FRAGMENT.findall(body)
        assert h.group(1) not in out, f"entry {h.group(1)} is catalogued twice"
        out[h.group(1)] = frags[0] if len(frags) == 1 else None
    return out


# ---- helpers ------------------------------------------------------------------------------

PREAMBLE = """\
import legato
import legato.model.bertha as bertha

bf16 = legato.types.float("bfloat16")
f32 = legato.types.float("float32")


def tt(shape, memory, dtype=bf16):
    return legato.get_model().tensor_type(dtype, shape, memory)


"""

HEADER = """
@legato.compile(backend="bertha")
def k(a: tt(((-1, 16), 256), "shared_dram"), w: tt([256, 128], "mpu_dram"),
      out: tt([16, 128], "shared_dram")):
    device = legato.get_context().get_device()
"""

_count = itertools.count()


def load(tmp_path: Path, source: str):
    """Import PREAMBLE + source from a real file (errors then quote its lines)."""
    name = f"legato_errors_doc_{next(_count)}"
    path = tmp_path / f"{name}.py"
    path.write_text(PREAMBLE + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def raised(exc_type, fn, *args, **kwargs) -> str:
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    return str(info.value)


def compile_error(tmp_path, body: str, header: str = HEADER) -> str:
    mod = load(tmp_path, header + body)
    return raised(CompileError, mod.k.emit_module)


def compile_error_at_call(tmp_path, source: str, *args) -> str:
    mod = load(tmp_path, source)
    return raised(CompileError, mod.k, *args)


def run_opt_error(tmp_path, text: str, *argv) -> str:
    import contextlib
    import io

    from legato.tools.opt import main

    path = tmp_path / "in.mlir"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(path), *map(str, argv)])
        except SystemExit as e:
            status = e.code
    assert status != 0 and "Traceback" not in err.getvalue(), err.getvalue()
    return err.getvalue()


# ---- frontend -----------------------------------------------------------------------------


def frontend_unsupported_construct(tmp_path):
    return compile_error(
        tmp_path,
        """
    while True:
        pass
    """,
    )


def frontend_unknown_memory_space(tmp_path):
    return compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sramm")
    """,
    )


def frontend_matmul_shape_mismatch(tmp_path):
    return compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
        legato.tensor.request_load(w, device.get_core(0), "mpu_buffer")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
        wt = legato.tensor.receive_type(tt([128, 128], "mpu_weight"), 0, None, "mpu_buffer")
        r = x @ wt
    """,
    )


def frontend_value_outside_region(tmp_path):
    return compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
    with device.get_core(0):
        legato.tensor.memcpy(out, x)
    """,
    )


def frontend_core_index_out_of_range(tmp_path):
    return compile_error(
        tmp_path,
        """
    with device.get_core(32):
        pass
    """,
    )


def frontend_unbounded_dynamic_dim(tmp_path):
    return raised(
        TypeError,
        load,
        tmp_path,
        """
@legato.compile(backend="bertha")
def k(a: tt((-1, 256), "shared_dram")):
    pass
""",
    )


def frontend_runtime_condition(tmp_path):
    return compile_error(
        tmp_path,
        """
    with device.get_core(0):
        if a:
            pass
    """,
    )


def frontend_undefined_name(tmp_path):
    return compile_error(
        tmp_path,
        """
    with device.get_core(0):
        y = nonexistent + 1
    """,
    )


def frontend_op_outside_context(tmp_path):
    return compile_error(
        tmp_path,
        """
    legato.tensor.request_load(a, device.get_core(0), "sram")
    """,
    )


def frontend_python_function_given_tensor(tmp_path):
    return compile_error(
        tmp_path,
        """
    with device.get_core(0):
        n = len(a)
    """,
    )


# ---- passes -------------------------------------------------------------------------------


def pass_unmatched_receive(tmp_path):
    return compile_error(
        tmp_path,
        """
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
    with device.get_core(0):
        x = legato.tensor.receive(a, 0, "sram")
        y = legato.tensor.receive(a, 1, "sram")
    """,
    )


def pass_sync_never_released(tmp_path):
    return compile_error_at_call(
        tmp_path,
        """
@legato.compile(backend="bertha")
def k(a: tt([16, 256], "shared_dram", f32)):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.sync.wait(1, 1)
        legato.sync.signal(device.get_core(0), 0, 1)
    with device.get_core(0):
        legato.sync.wait(0, 1)
        legato.sync.signal(device.get_top(), 1, 1)
""",
        np.zeros((16, 256), np.float32),
    )


def pass_out_of_memory(tmp_path):
    z = np.zeros((512, 1024), np.float32)
    return compile_error_at_call(
        tmp_path,
        """
import dataclasses


def small_private_dram(ctx):
    return dataclasses.replace(bertha.evt0(), private_dram_size=4 << 20)


@legato.compile(backend=small_private_dram)
def k(x: tt([512, 1024], "shared_dram", f32), y: tt([512, 1024], "shared_dram", f32),
      z: tt([512, 1024], "shared_dram", f32), out: tt([512, 1024], "shared_dram", f32)):
    device = legato.get_context().get_device()
    with device.get_core(0):
        a = legato.tensor.load(x, "sram")
        b = legato.tensor.load(y, "sram")
        c = legato.tensor.load(z, "sram")
        p = a * b
        legato.tensor.memcpy(out, p + c)
""",
        z,
        z,
        z,
        z.copy(),
    )


CORE_XORI = """builtin.module {
  core.kernel @k args [] {
    core.program @core0 on core(0) {
      %a = arith.constant 1 : index
      %b = arith.xori %a, %a : index
      core.end
    }
  }
}
"""


def pass_unlowerable_op(tmp_path):
    return run_opt_error(tmp_path, CORE_XORI, "-p", "convert-core-to-backend")


# ---- legato-opt ---------------------------------------------------------------------------

OPT_KERNEL = """\
legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    %e = legato.exp %x : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
"""


def opt_not_utf8(tmp_path):
    return run_opt_error(tmp_path, b"\x00\xff garbage {{{")


def opt_parse_error(tmp_path):
    return run_opt_error(tmp_path, OPT_KERNEL[: OPT_KERNEL.index("%e")])


def opt_unknown_op(tmp_path):
    return run_opt_error(tmp_path, OPT_KERNEL.replace("legato.exp", "legato.frobnicate"))


def opt_verifier_error(tmp_path):
    return run_opt_error(tmp_path, OPT_KERNEL.replace("[4], f32, sram", "[8], f32, sram"))


def opt_pass_broke_ir(tmp_path):
    from dataclasses import dataclass

    from xdsl.passes import ModulePass

    from legato.transforms import registry

    @dataclass(frozen=True)
    class BreakYield(ModulePass):
        """A pass with a bug: it leaves the `legato.on` region without its `legato.yield`."""

        name = "break-yield"

        def apply(self, ctx, op):
            for inner in list(op.walk()):
                if inner.name == "legato.yield":
                    inner.detach()
                    inner.erase()

    real = registry.get_all_passes
    registry.get_all_passes = lambda: {**real(), "break-yield": lambda: BreakYield}
    try:
        return run_opt_error(tmp_path, OPT_KERNEL, "-p", "break-yield")
    finally:
        registry.get_all_passes = real


def opt_unknown_pass(tmp_path):
    return run_opt_error(tmp_path, OPT_KERNEL, "-p", "no-such-pass")


def opt_bad_pass_option(tmp_path):
    return run_opt_error(tmp_path, OPT_KERNEL, "-p", "convert-legato-to-core{bogus=1}")


def opt_wait_never_released(tmp_path):
    text = (
        "backend.kernel @k args [] {\n  backend.program @c0 on core(0) {\n"
        "    backend.qwait sram queue 3\n    backend.halt\n  }\n}\n"
    )
    return run_opt_error(tmp_path, text, "-t", "asm")


def opt_pass_error(tmp_path):
    return run_opt_error(tmp_path, OPT_KERNEL, "-p", "convert-legato-to-core")


# ---- arguments at call time ---------------------------------------------------------------


def _two_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 2, False, 4, 1 << 30)


_f32 = legato.types.float("float32")


def _tt(shape):
    return legato.get_model().tensor_type(_f32, shape, "shared_dram")


@legato.compile(backend=_two_cores)
def scale(x: _tt([(-1, 8), 16]), out: _tt([8, 16])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        legato.tensor.memcpy(out, legato.tensor.load(x, "sram") * 2.0 + 1.0)


@legato.compile(backend=_two_cores)
def split(x: _tt([4, 8]), o1: _tt([4, 8]), o2: _tt([4, 8])):
    device = legato.get_context().get_device()
    with device.get_core(0):
        v = legato.tensor.load(x, "sram")
        legato.tensor.memcpy(o1, v + 1.0)
        legato.tensor.memcpy(o2, v * 3.0)


def _x(n=5):
    return torch.arange(n * 16, dtype=torch.float32).reshape(n, 16) / 7


def args_wrong_dtype(tmp_path):
    return raised(LegatoRuntimeError, scale, _x(), torch.zeros(8, 16, dtype=torch.bfloat16))


def args_wrong_shape(tmp_path):
    return raised(LegatoRuntimeError, scale, _x(), torch.zeros(8, 17))


def args_wrong_rank(tmp_path):
    return raised(LegatoRuntimeError, scale, _x()[None], torch.zeros(8, 16))


def args_dynamic_dim_over_bound(tmp_path):
    return raised(LegatoRuntimeError, scale, _x(9), torch.zeros(8, 16))


def args_wrong_count(tmp_path):
    return raised(LegatoRuntimeError, scale, _x())


def args_not_a_tensor(tmp_path):
    return raised(LegatoRuntimeError, scale, _x(), 3.0)


def args_overlapping_outputs(tmp_path):
    o = torch.zeros(4, 8)
    return raised(LegatoRuntimeError, split, torch.ones(4, 8), o, o)


def args_read_only_output(tmp_path):
    out = np.zeros((4, 8), np.float32)
    out.flags.writeable = False
    return raised(
        LegatoRuntimeError, split, np.ones((4, 8), np.float32), out, np.zeros((4, 8), np.float32)
    )


# ---- binaries -----------------------------------------------------------------------------

TINY_ASM = ".kernel k\n.program top on top\n    halt\n.program core0 on core(0)\n    halt\n"


def _model(name="bertha", cores=4):
    return bertha.Bertha(None, name, cores, False, 8, 1 << 30)


def _binary(model=None) -> bytes:
    from legato.targets.bertha.abi import ArgLayout
    from legato.targets.bertha.asm import assemble
    from legato.targets.bertha.elf import write_elf

    return write_elf(assemble(TINY_ASM), model or _model(), ArgLayout([]))


def _run_binary(data, model=None, **kw):
    from legato.targets.bertha.runtime import run_binary

    return run_binary(data, model or _model(), [], **kw)


def binary_other_target(tmp_path):
    return raised(BinaryError, _run_binary, _binary(_model("bertha")), _model("bertha-evt1"))


def binary_checksum(tmp_path):
    data = bytearray(_binary())
    i = bytes(data).index(b'"kernel"')
    data[i + 1] = ord("K")  # an edit inside a checksummed section
    return raised(BinaryError, _run_binary, bytes(data))


def binary_truncated(tmp_path):
    return raised(BinaryError, _run_binary, _binary()[:40])


def binary_not_elf(tmp_path):
    return raised(BinaryError, _run_binary, b"#!/bin/sh\necho hi\n" + bytes(64))


def binary_format_version(tmp_path):
    import struct

    data = bytearray(_binary())
    data[48:52] = struct.pack("<I", 7)
    return raised(BinaryError, _run_binary, bytes(data))


# ---- emulator faults ----------------------------------------------------------------------


def _run_asm(src, args=(), values=(), **kw):
    from legato.targets.bertha.abi import Arg, ArgLayout
    from legato.targets.bertha.asm import assemble
    from legato.targets.bertha.elf import write_elf
    from legato.targets.bertha.runtime import run_binary
    from legato.types import TensorSpec

    model = _model()
    layout = ArgLayout(
        [Arg(n, TensorSpec.make(dt, shape, "shared_dram"), acc) for n, dt, shape, acc in args]
    )
    return run_binary(write_elf(assemble(src), model, layout), model, list(values), **kw)


def emulator_out_of_bounds(tmp_path):
    from legato.types import i64

    src = (
        ".program top on top\n    halt\n.program c1 on core(1)\n    ld r3, 8(r1)\n"
        "    li r4, 7\n    st r4, 64(r3)\n    halt\n"
    )
    return raised(
        EmulatorError, _run_asm, src, [("out", i64, [8], "write")], [np.zeros(8, np.int64)]
    )


def emulator_index_out_of_bounds(tmp_path):
    import torch

    mod = load(
        tmp_path,
        """
        @legato.compile(backend="bertha")
        def k(n: tt(((-1, 8), 32), "shared_dram", f32), b: tt([32, 32], "shared_dram", f32),
              out: tt([1, 32], "shared_dram", f32)):
            device = legato.get_context().get_device()
            with device.get_core(0):
                c = n.size(0)
                legato.tensor.memcpy(out, legato.tensor.load(b[c + 32:c + 33, :]))
        """,
    )
    return raised(EmulatorError, mod.k, torch.zeros(0, 32), torch.zeros(32, 32), torch.zeros(1, 32))


def emulator_deadlock(tmp_path):
    from legato.types import i64

    src = (
        ".program top on top\n    ld r3, 8(r1)\n    lsa r4, core0.sram, 0\n    li r5, 64\n"
        "    dma r4, r3, r5, core0.sram.q1\n    dmawait\n    halt\n"
        ".program c0 on core(0)\n    qwait sram.q0\n    halt\n"
    )
    return raised(EmulatorError, _run_asm, src, [("x", i64, [8], "read")], [np.zeros(8, np.int64)])


def emulator_hazard(tmp_path):
    from legato.targets.bertha.arch.hazards import HazardError
    from legato.types import i64

    # core 0 reads the sram top's DMA fills without waiting on the queue it notifies
    src = (
        ".program top on top\n    ld r3, 8(r1)\n    lsa r4, core0.sram, 0\n    li r5, 64\n"
        "    dma r4, r3, r5, core0.sram.q0\n    halt\n"
        ".program c0 on core(0)\n.mem sram 64\n    lsa r3, sram, 0\n    ld r4, 0(r3)\n    halt\n"
    )
    return raised(
        HazardError, _run_asm, src, [("x", i64, [8], "read")], [np.zeros(8, np.int64)], hazards=True
    )


def emulator_instruction_limit(tmp_path):
    return raised(
        EmulatorError, _run_asm, ".program top on top\nL0:\n    jmp L0\n", instruction_limit=1000
    )


# ---- interpreters -------------------------------------------------------------------------

INTERP_DEADLOCK = """
legato.kernel @dead(%a : !legato.tensor<[4], f32, shared_dram>, %out : !legato.tensor<[4], f32, shared_dram>) {
  legato.on core(0) {
    %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram> loc("dead.py":4:8)
    legato.request_load %x to core(1) memory sram queue 0 : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.on core(1) {
    %y = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram> loc("dead.py":8:8)
    legato.request_load %y to core(0) memory sram queue 0 : !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
"""

INTERP_EXP = """
legato.kernel @k(%a : !legato.tensor<[4], f32, shared_dram>, %out : !legato.tensor<[4], f32, shared_dram>) {
  legato.on top {
    legato.request_load %a to core(0) memory sram queue 0 : !legato.tensor<[4], f32, shared_dram>
    legato.yield
  }
  legato.on core(0) {
    %x = legato.receive %a queue 0 memory sram : !legato.tensor<[4], f32, shared_dram> -> !legato.tensor<[4], f32, sram>
    %e = OP %x : !legato.tensor<[4], f32, sram>
    legato.memcpy %out, %e : !legato.tensor<[4], f32, shared_dram>, !legato.tensor<[4], f32, sram>
    legato.yield
  }
  legato.return
}
"""


def _interp(src, args, **kw):
    from legato.interp import run

    return run(src, "legato", args, **kw)


def _z4():
    return np.zeros(4, np.float32)


def interp_deadlock(tmp_path):
    return raised(LegatoError, _interp, INTERP_DEADLOCK, [_z4(), _z4()])


def interp_arguments(tmp_path):
    return raised(LegatoError, _interp, INTERP_EXP.replace("OP", "legato.exp"), [_z4()])


def interp_unsupported_op(tmp_path):
    from xdsl.parser import Parser

    from legato.interp import api

    ctx = api.make_context()
    ctx.allow_unregistered = True
    src = INTERP_EXP.replace(
        "%e = OP %x : !legato.tensor<[4], f32, sram>",
        '%e = "test.unknown"(%x) : (!legato.tensor<[4], f32, sram>) -> '
        "!legato.tensor<[4], f32, sram>",
    )
    module = Parser(ctx, src).parse_module()
    return raised(LegatoError, _interp, module, [_z4(), _z4()])


def interp_invalid_module(tmp_path):
    src = INTERP_EXP.replace("OP", "legato.exp").replace("to core(0) memory", "to top memory")
    return raised(LegatoError, _interp, src, [_z4(), _z4()])


def interp_step_limit(tmp_path):
    return raised(
        LegatoError, _interp, INTERP_EXP.replace("OP", "legato.exp"), [_z4(), _z4()], max_steps=2
    )


def interp_time_limit(tmp_path):
    mod = load(
        tmp_path,
        """
        @legato.compile(backend="bertha")
        def k(a: tt([4, 32], "shared_dram", f32), out: tt([4, 32], "shared_dram", f32)):
            device = legato.get_context().get_device()
            with device.get_core(0):
                x = legato.tensor.load(a, "sram")
                for _ in range(300):
                    x = x + 1.0
                legato.tensor.memcpy(out, x)
        """,
    )
    a = np.zeros((4, 32), np.float32)
    with legato.session(time_limit=1e-9):
        return raised(LegatoError, mod.k.interpret, a, np.zeros_like(a))


# ---- torch backend fallbacks --------------------------------------------------------------


def _summary_of(fn, *args, **options):
    import torch._dynamo

    import legato.torch as lt

    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.compile(fn, backend="legato", options=options or None)(*args)
        return str(lt.last_summary())
    finally:
        torch._dynamo.reset()


def torch_no_resolver(tmp_path):
    x = torch.randn(8, 64, dtype=torch.bfloat16)
    return _summary_of(lambda x: torch.flip(x, [-1]), x)


def torch_resolver_refused(tmp_path):
    W = torch.randn(64, 32, dtype=torch.float16)
    return _summary_of(lambda x: x @ W, torch.randn(8, 64, dtype=torch.float16))


# ---- the JIT cache ------------------------------------------------------------------------


def cache_compile_lock_timeout(tmp_path):
    import os

    from legato.jit import cache

    mod = load(tmp_path, HEADER.replace("def k(a: tt(((-1, 16), 256)", "def k(a: tt([16, 256]"))
    saved = os.environ.get("LEGATO_COMPILE_LOCK_TIMEOUT")
    os.environ["LEGATO_COMPILE_LOCK_TIMEOUT"] = "0.1"
    try:
        # A lock held through another open file: flock refuses it even within this process.
        with cache.compile_lock(mod.k.cache_key(), "holder"):
            return raised(CompileError, mod.k.compile)
    finally:
        if saved is None:
            del os.environ["LEGATO_COMPILE_LOCK_TIMEOUT"]
        else:
            os.environ["LEGATO_COMPILE_LOCK_TIMEOUT"] = saved


def torch_lpu_mixed_devices(tmp_path):
    import legato.lpu  # noqa: F401 - makes the device

    return raised(RuntimeError, lambda: torch.ones(4, device="lpu") + torch.ones(4))


TRIGGERS = {
    name.replace("_", "-"): fn
    for name, fn in dict(globals()).items()
    if callable(fn)
    and name.split("_")[0]
    in ("frontend", "pass", "opt", "cache", "args", "binary", "emulator", "interp", "torch")
    and not name.startswith("_")
    and name != "torch"
}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_every_entry_has_a_fragment_and_a_trigger():
    entries = doc_entries()
    assert len(entries) >= 30
    assert [e for e, frag in entries.items() if frag is None] == [], (
        "entries without exactly one `Message contains:` line"
    )
    assert sorted(set(entries) - set(TRIGGERS)) == [], "catalogued errors without a trigger"
    assert sorted(set(TRIGGERS) - set(entries)) == [], "triggers without a catalogue entry"


@pytest.mark.parametrize("entry", sorted(doc_entries()))
def test_documented_message_is_the_real_one(entry, tmp_path, cache_dir):
    fragment = doc_entries()[entry]
    assert fragment, f"{entry}: no `Message contains:` line in docs/errors.md"
    assert entry in TRIGGERS, f"{entry}: no trigger in {__file__}"
    text = TRIGGERS[entry](tmp_path)
    assert fragment in text, f"{entry}: {fragment!r} not in the real message:\n{text}"
