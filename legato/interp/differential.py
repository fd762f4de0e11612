"""Differential execution: one kernel at every IR level and on the emulator, compared bit for bit.

`run_everywhere(kernel)` compiles a `CorpusKernel` with `legato.compiler.compile_kernel`, runs
it with the same inputs at the legato, core and backend levels and as a binary on the emulator,
and `check(kernel, results)` requires identical bits everywhere (and torch agreement within bf16
tolerance). A disagreement raises `DivergenceError` naming the kernel, the two levels, the first
output element that differs, and -- by re-running the kernel after each pass of the pipeline --
the first pass after which the result changed (with the first op or instruction of that pass's
output that the interpreter ran differently, when it can tell).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from legato.arrays import numpy_to_torch
from legato.compiler import compile_kernel, context, print_ir
from legato.dialects import legato as lg
from legato.interp.api import detect_level, parse_module, run
from legato.interp.first_divergence import first_divergent_op
from legato.model import bertha
from legato.model.ir import attach_model
from legato.targets.bertha.abi import ARG_NAMES_ATTR
from legato.targets.bertha.runtime import run_binary
from legato.transforms import pipelines

LEVELS = ("legato", "core", "backend", "emulator")


@dataclass
class CorpusKernel:
    """One corpus entry: legato-level IR, an input factory and the torch reference.

    `make_args(rng)` returns every kernel argument (outputs zero-filled); `reference(tensors)`
    takes the same arguments as torch tensors and returns the expected value of each output
    argument listed in `outputs` (indices into the arguments)."""

    name: str
    mlir: str
    make_args: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[[list], list] | None
    outputs: tuple[int, ...]
    model: Any = None
    rtol: float = 2**-7
    atol: float = 2e-2
    seed: int = 0

    def args(self) -> list[np.ndarray]:
        return self.make_args(np.random.default_rng(self.seed))

    def get_model(self):
        if self.model is not None:
            return self.model

        return bertha.evt0()


class DivergenceError(AssertionError):
    """Two levels disagree on a kernel's result."""


@dataclass
class Compiled:
    artifacts: Any
    stages: dict[str, str] = field(default_factory=dict)  # pass name -> IR after it


def compile_corpus_kernel(kernel: CorpusKernel, record_passes: bool = True) -> Compiled:
    """compile_kernel on the kernel's IR; with `record_passes`, also the IR after every pass."""
    module = parse_module(kernel.mlir, kernel.name)
    art = compile_kernel(module, kernel.get_model())
    compiled = Compiled(art)
    if record_passes:
        compiled.stages = ir_after_each_pass(kernel)
    return compiled


def ir_after_each_pass(kernel: CorpusKernel) -> dict[str, str]:
    """The module printed after each pass of the compiler's pipeline, in order."""

    module = parse_module(kernel.mlir, kernel.name)
    from xdsl.dialects.builtin import ArrayAttr, StringAttr

    for k in module.body.block.ops:
        if isinstance(k, lg.KernelOp):
            k.attributes[ARG_NAMES_ATTR] = ArrayAttr(
                [StringAttr(a.name_hint or f"arg{i}") for i, a in enumerate(k.args)]
            )
    attach_model(module, kernel.get_model())
    ctx = context()
    out: dict[str, str] = {}
    for cls in (*pipelines.LEGATO_TO_CORE, *pipelines.CORE_TO_BACKEND):
        p = cls()
        p.apply(ctx, module)
        out[p.name] = print_ir(module)
    return out


def run_level(kernel: CorpusKernel, level: str, compiled: Compiled | None) -> list[np.ndarray]:
    """Run `kernel` at `level` on fresh inputs; returns every argument after the run."""
    args = kernel.args()
    model = kernel.get_model()
    if level == "legato":
        run(kernel.mlir, "legato", args, model)
    elif level == "emulator":
        assert compiled is not None
        run_binary(compiled.artifacts.binary, model, args)
    else:
        assert compiled is not None
        text = compiled.artifacts.core_ir if level == "core" else compiled.artifacts.backend_ir
        run(parse_module(text, f"{kernel.name} ({level})"), level, args, model)
    return args


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(np.uint8)


def first_difference(a: np.ndarray, b: np.ndarray) -> str | None:
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    if np.array_equal(_bits(a), _bits(b)):
        return None
    diff = np.argwhere(_bits(a).reshape(a.shape + (-1,)) != _bits(b).reshape(b.shape + (-1,)))
    idx = tuple(int(i) for i in diff[0][:-1])
    return f"element {list(idx)}: {a[idx]!r} vs {b[idx]!r}"


def check(
    kernel: CorpusKernel, results: dict[str, list[np.ndarray]], compiled: Compiled | None = None
) -> None:
    """Raise `DivergenceError` unless every level's outputs equal the legato level's bit for bit,
    and the legato level agrees with the torch reference within tolerance."""
    base_level = "legato" if "legato" in results else next(iter(results))
    base = results[base_level]
    for level, outs in results.items():
        if level == base_level:
            continue
        for i in kernel.outputs:
            d = first_difference(base[i], outs[i])
            if d is not None:
                where = bisect_passes(kernel, compiled) if compiled is not None else ""
                if compiled is not None:
                    where = "\n".join(w for w in (where, _first_op(kernel)) if w)
                raise DivergenceError(
                    f"kernel '{kernel.name}': the {base_level} and {level} levels disagree on "
                    f"argument {i}, first at {d}" + (f"\n{where}" if where else "")
                )
    if kernel.reference is not None:
        check_reference(kernel, base)


def check_reference(kernel: CorpusKernel, outs: list[np.ndarray]) -> None:
    import torch

    tens = [numpy_to_torch(a) for a in kernel.args()]
    expected = kernel.reference(tens)
    for i, exp in zip(kernel.outputs, expected):
        got = (
            outs[i].astype(np.float32)
            if outs[i].dtype.kind == "V" or outs[i].dtype == np.dtype(ml_dtypes.bfloat16)
            else outs[i]
        )
        exp_np = exp.detach().float().numpy() if isinstance(exp, torch.Tensor) else np.asarray(exp)
        if not np.allclose(
            np.asarray(got, np.float64),
            exp_np.astype(np.float64),
            rtol=kernel.rtol,
            atol=kernel.atol,
            equal_nan=True,
        ):
            err = np.abs(np.asarray(got, np.float64) - exp_np)
            at = np.unravel_index(np.nanargmax(err), err.shape)
            raise DivergenceError(
                f"kernel '{kernel.name}': argument {i} differs from the torch reference beyond "
                f"rtol={kernel.rtol}, atol={kernel.atol}: at {list(map(int, at))} got "
                f"{np.asarray(got)[at]!r}, torch {exp_np[at]!r}"
            )


def _first_op(kernel: CorpusKernel) -> str:
    try:
        return first_divergent_op(kernel) or ""
    except Exception as e:  # noqa: BLE001 - a report, not a test
        return f"(could not compare op by op: {e})"


def bisect_passes(kernel: CorpusKernel, compiled: Compiled | None) -> str:
    """Run the IR after each pass of the pipeline; name the first pass whose output computes a
    different result from the legato level (and the first op it ran on the differing data)."""
    stages = compiled.stages if compiled is not None and compiled.stages else None
    if stages is None:
        try:
            stages = ir_after_each_pass(kernel)
        except Exception as e:  # noqa: BLE001 - a report, not a test
            return f"(could not re-run the pipeline pass by pass: {e})"
    base = run_level(kernel, "legato", None)
    for name, text in stages.items():
        args = kernel.args()
        try:
            module = parse_module(text, f"{kernel.name} after {name}")
            run(module, detect_level(module), args, kernel.get_model())
        except Exception as e:  # noqa: BLE001
            return f"first bad pass: {name} (its output fails to run: {e})"
        for i in kernel.outputs:
            d = first_difference(base[i], args[i])
            if d is not None:
                return f"first bad pass: {name} (after it argument {i} differs at {d})"
    return (
        "every intermediate IR agrees with the legato level (the difference is after the "
        "last pass: assembler, encoder, ELF or emulator)"
    )


def run_everywhere(
    kernel: CorpusKernel, levels: Sequence[str] = LEVELS
) -> tuple[dict[str, list[np.ndarray]], Compiled | None]:
    compiled = None
    if any(lv != "legato" for lv in levels):
        compiled = compile_corpus_kernel(kernel, record_passes=False)
    return {lv: run_level(kernel, lv, compiled) for lv in levels}, compiled
