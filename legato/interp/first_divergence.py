"""Name the first op whose value diverges between the legato and core levels.

Every op the lowering creates carries the location of the legato op it implements, and memory
planning never reuses a buffer, so after a core-level run each buffer a legato op's value was
lowered to still holds that value. Running the legato level with a listener gives each op's
value; running the core level with a listener gives the buffers created at each location. The
first legato op (in execution order) none of whose same-shaped core buffers holds its bits is
the first divergence.

Kernels written as IR without locations get synthetic ones (`loc("<kernel>":N:1)`, N = the
op's position) before compiling, so the report can still point at the op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.interpreter import Interpreter
from xdsl.ir import Operation

from legato.compiler import compile_kernel
from legato.dialects import core as C
from legato.dialects import legato as lg
from legato.interp.api import parse_module, run


def _loc_key(op: Operation) -> str | None:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return None


def annotate_locations(module: ModuleOp, name: str) -> None:
    """Give every legato op without a file location a synthetic one, unique per op."""
    for i, op in enumerate(module.walk()):
        if op.dialect_name() == "legato" and not isinstance(op.location, FileLineColLoc):
            op.location = FileLineColLoc(StringAttr(f"<{name}>"), IntAttr(i + 1), IntAttr(1))


def _context_of(op: Operation) -> str:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, lg.OnOp | C.ProgramOp):
        parent = parent.parent_op()
    if parent is None:
        return "?"
    return parent.ctx.spelling


@dataclass
class LegatoValues(Interpreter.Listener):
    """Records, per (location, context), the op and the last value it computed."""

    values: dict[tuple[str, str], tuple[Operation, np.ndarray]] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)

    def will_interpret_op(self, op: Operation, args: Any) -> None:
        pass

    def did_interpret_op(self, op: Operation, results: Any) -> None:
        if op.dialect_name() != "legato" or isinstance(op, lg.OnOp) or len(results) != 1:
            return
        value = results[0]
        key = _loc_key(op)
        if key is None or not isinstance(value, np.ndarray):
            return
        k = (key, _context_of(op))
        if k not in self.values:
            self.order.append(k)
        self.values[k] = (op, np.array(value))


@dataclass
class CoreBuffers(Interpreter.Listener):
    """Records every buffer a core program creates, by (location, context); read after the run
    (through `bind_machine`, called by the core interpreter with its machine)."""

    buffers: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    machine: Any = None

    def bind_machine(self, machine) -> None:
        self.machine = machine

    def will_interpret_op(self, op: Operation, args: Any) -> None:
        pass

    def did_interpret_op(self, op: Operation, results: Any) -> None:
        if not isinstance(op, C.AllocOp | C.ViewOp | C.SubviewOp):
            return
        key = _loc_key(op)
        if key is None:
            return
        self.buffers.setdefault((key, _context_of(op)), []).append(results[0])

    def contents(self, key: tuple[str, str]) -> list[np.ndarray]:
        out = []
        for buf in self.buffers.get(key, []):
            try:
                out.append(buf.read(self.machine.memory))
            except Exception:  # noqa: BLE001 - a buffer we cannot read is no evidence
                continue
        return out


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.size != b.size:
        return False
    return np.array_equal(
        np.ascontiguousarray(a).view(np.uint8).reshape(-1),
        np.ascontiguousarray(b).view(np.uint8).reshape(-1),
    )


def first_divergent_op(kernel) -> str | None:
    """Compile `kernel` (a `CorpusKernel`) with located ops, run the legato and core levels and
    return a sentence naming the first legato op whose value the core level does not reproduce,
    or None when every comparable value agrees."""

    module = parse_module(kernel.mlir, kernel.name)
    annotate_locations(module, kernel.name)
    legato_listener = LegatoValues()
    run(module.clone(), "legato", kernel.args(), kernel.get_model(), listeners=[legato_listener])
    artifacts = compile_kernel(module, kernel.get_model())
    core_listener = CoreBuffers()
    core_module = parse_module(artifacts.core_ir, f"{kernel.name} (core)")
    run(core_module, "core", kernel.args(), kernel.get_model(), listeners=[core_listener])
    if core_listener.machine is None:
        return None
    for key in legato_listener.order:
        op, value = legato_listener.values[key]
        candidates = [c for c in core_listener.contents(key) if c.size == value.size]
        candidates = [c for c in candidates if c.dtype == value.dtype]
        if not candidates:
            continue  # nothing comparable at this location (e.g. a value moved into the MPU)
        if any(_same_bits(value, c) for c in candidates):
            continue
        flat_v = value.reshape(-1)
        flat_c = candidates[-1].reshape(-1)
        differs = (
            flat_v.view(np.uint8).reshape(flat_v.size, -1)
            != flat_c.view(np.uint8).reshape(flat_c.size, -1)
        ).any(axis=1)
        idx = int(np.nonzero(differs)[0][0])
        pos = np.unravel_index(idx, value.shape) if value.shape else ()
        return (
            f"first diverging op: {op.name} at {key[0]} on {key[1]}: element "
            f"{[int(p) for p in pos]} is {flat_v[idx]!r} at the legato level but "
            f"{flat_c[idx]!r} at the core level"
        )
    return None
