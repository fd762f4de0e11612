"""Helpers of the end-to-end compiler tests: build a legato kernel from text, compile it to a
binary, run it on the emulator and at the legato level (the interpreter), compare bit for bit."""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
from xdsl.parser import Parser

from legato.compiler import compile_kernel, context
from legato.model import bertha
from legato.targets.bertha.runtime import run_binary

NP = {"bf16": ml_dtypes.bfloat16, "f32": np.float32, "f16": np.float16}


def ttype(shape: Sequence, dtype: str, space: str) -> str:
    dims = ", ".join(f"?{d[1]}" if isinstance(d, tuple) else str(d) for d in shape)
    return f"!legato.tensor<[{dims}], {dtype}, {space}>"


def core0_kernel(
    inputs: Sequence[tuple[Sequence, str]],
    out: tuple[Sequence, str],
    body: str,
    name: str = "k",
    spaces: Sequence[str] | None = None,
    r_shape: Sequence | None = None,
) -> str:
    """Top sends each input i to core 0 (queue i; `spaces[i]`, default sram); core 0 receives
    them as %x0, %x1, ..., runs `body` (which defines %r in sram) and memcpys %r out."""
    spaces = list(spaces) if spaces is not None else ["sram"] * len(inputs)
    args = [f"%a{i} : {ttype(s, d, 'shared_dram')}" for i, (s, d) in enumerate(inputs)]
    args.append(f"%out : {ttype(out[0], out[1], 'shared_dram')}")
    lines = [f"legato.kernel @{name}({', '.join(args)}) {{", "  legato.on top {"]
    for i, (s, d) in enumerate(inputs):
        lines.append(
            f"    legato.request_load %a{i} to core(0) memory {spaces[i]} queue {i} : "
            f"{ttype(s, d, 'shared_dram')}"
        )
    lines += ["    legato.yield", "  }", "  legato.on core(0) {"]
    for i, (s, d) in enumerate(inputs):
        lines.append(
            f"    %x{i} = legato.receive %a{i} queue {i} memory {spaces[i]} : "
            f"{ttype(s, d, 'shared_dram')} -> {ttype(s, d, spaces[i])}"
        )
    lines += ["    " + line for line in body.strip().splitlines()]
    lines.append(
        f"    legato.memcpy %out, %r : {ttype(out[0], out[1], 'shared_dram')}, "
        f"{ttype(r_shape if r_shape is not None else out[0], out[1], 'sram')}"
    )
    lines += ["    legato.yield", "  }", "  legato.return", "}"]
    return "\n".join(lines)


def parse(text: str):
    return Parser(context(), text, "test.mlir").parse_module()


def compile_text(text: str, model=None):
    model = model or bertha.evt0()
    return compile_kernel(parse(text), model)


def run_both(text: str, args: Sequence[np.ndarray], model=None):
    """Compile and run `text` on the emulator; run it with the legato interpreter too.
    Returns (emulator args, interpreter args, artifacts)."""
    from legato.interp import run

    model = model or bertha.evt0()
    art = compile_kernel(parse(text), model)
    emu = [np.array(a, copy=True) for a in args]
    run_binary(art.binary, model, emu)
    ref = [np.array(a, copy=True) for a in args]
    ref = list(run(parse(text), "legato", ref, model))
    return emu, ref, art


def bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def assert_bit_equal(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    ba, bb = bits(a), bits(b)
    if not np.array_equal(ba, bb):
        bad = np.argwhere(ba != bb)
        i = tuple(bad[0])
        raise AssertionError(f"{len(bad)} elements differ; first at {i}: {a[i]!r} vs {b[i]!r}")


def rand(shape, dtype: str, rng, low=-2.0, high=2.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype(np.float32).astype(NP[dtype])
