"""Resolvers: which Legato implementation runs an ATen node.

A *resolver* is registered for one ATen op (an `OpOverload` such as `torch.ops.aten.mm.default`,
an `OpOverloadPacket` such as `torch.ops.aten.mm` meaning every overload, or the string
`"aten::mm"`). The partitioner calls it with the node and a `ResolveContext`; it returns an
`Impl` (a `@legato.function` written in the Legato DSL plus how to call it), or raises
`AssertionError` to say "not for these dtypes/shapes" (the node then runs eagerly, extern, and the
message shows up in the placement summary).

Several resolvers may be registered for one op; the most recently registered is asked first (so a
third-party library can specialise a built-in op) and the first `Impl` wins.

Libraries are Python modules that register resolvers when imported. They are found through the
entry point group `legato-library` (value: a module, or `module:function` called once with no
arguments), or imported explicitly.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from legato.torch.capabilities import require

log = logging.getLogger("legato.torch")

ENTRY_POINT_GROUP = "legato-library"
# setuptools' pyproject validation rejects '-' in group names: pyproject-built packages register
# under the underscore spelling; both are scanned.
ENTRY_POINT_GROUPS = ("legato-library", "legato_library")
BUILTIN_LIBRARIES = (
    "legato.torch.library.aten",
    "legato.torch.library.composite",
    "legato.torch.library.chip_linear",
    "legato.torch.library.chip_attention",
)


@dataclass
class Impl:
    """How a node runs on Legato.

    `fn` is a `@legato.function`; the generated kernel calls it as `fn(*args)` where each entry of
    `args` is either an fx `Node` (a tensor operand: the on-chip value of that node or graph input)
    or a compile-time Python value (int, float, bool, None, str, tuples/lists of those, a legato
    DType). `memory` maps an operand position to the core memory it must be in when it is a kernel
    input: "sram" (default) or "mpu_weight" (loaded through mpu_buffer into the MPU's weight tile).
    An operand that must be in `mpu_weight` has to come from outside the kernel (a graph input or
    an extern node); the partitioner enforces this.

    `spmd=True` (issue 14, chip scale): the implementation runs on every core. The generated
    kernel calls `fn(*args, *outs, *scratch)` inside `with device.get_all_cores():`, where each
    tensor operand, each of the node's outputs (`outs`: one, or one per element of a tuple
    result) and each scratch tensor is the kernel's shared-DRAM argument itself, not a loaded
    value: the function loads what each core needs (`legato.tensor.load(x[...])`), writes its
    outputs with `legato.tensor.memcpy(out[...], v)` and may meet the other cores at
    `legato.sync.barrier()`. `scratch` lists shared-DRAM scratch tensors `(shape, torch.dtype)`
    the kernel takes as extra arguments (partial sums between phases). A node with an spmd
    implementation is a partition of its own, with the small work the partitioner fuses into it
    (`kernelgen.generate_spmd`): `values` lists the operand positions the function also takes
    as an on-chip value (computed on every core by a fused prologue; the function loads the
    operand only when it is in shared DRAM, e.g. `if x.memory == "shared_dram"`), and
    `epilogue=True` says it takes `epi, eargs` after its scratch and, when `epi` is not None,
    calls `epi(y, r0, rows, j0, width, *eargs)` on every block y = result[r0:r0+rows,
    j0:j0+width] of its 2-d result instead of writing it; `epilogue_own=True` takes only an
    epilogue that computes something from the node's own results and constants (reads no other
    tensor: SiLU(gate) * up of a grouped gate/up, not a residual add, whose loads would hold up
    the implementation's pieces after it). `writes` lists other graph nodes the
    implementation computes itself (an attention's KV-cache `cat` operands): they join its
    partition, never run on their own, and their outputs follow the node's own in `outs`.
    `takes` lists graph nodes between the implementation's operands and the node that it
    computes on chip and nothing outside it reads (a prefill attention's head views and rotary
    of q and k, `chip_attention.rows_attention_rotary`): they join its partition, never run and
    are never written (their values exist only inside its kernel; if the kernel fails, they get
    their own decisions back).

    Several spmd nodes in one kernel (issue 14): `group_key` (hashable, None: never) says
    which nodes of one partition the implementation can compute together (equal keys: e.g.
    projections of one input to the same width, q/k/v or gate/up); the partitioner then calls
    `merge(nodes, ctx)` with those nodes (graph order, all mutually independent) for one
    implementation of them all, whose `members` are the nodes after the first. Its kernel
    writes the first node's result and each member's (`outs`, one tuple of them all) and its
    epilogue gets the tuple of their blocks (`epi(ys, r0, rows, j0, width, *eargs)`, ys[i]
    the same block of each result).

    `preload` (spmd only; None: none) = `(fn, args)`: a `@legato.function` the kernel calls
    first, before any fused prologue, as `fn(*args)` (`args` as `Impl.args`, every tensor the
    kernel's shared-DRAM argument); its value is passed to the implementation after its scratch
    (`fn(*args, *outs, *scratch, pre)`). It issues the loads that do not wait for the prologue
    (a decode attention's KV-cache rows), so their DRAM latency overlaps the prologue's work.

    `rows_only` (a reason, None: no such limit): the implementation is row-local and its whole
    operands do not fit one core's memory, only a block of rows does; it runs only in a
    row-split all-core kernel (`legato.torch.library.chip_rows`), and a kernel of any other form
    refuses it with this reason.

    `onchip` (spmd only; None: unknown, counted as its tensor operands whole): the bytes of one
    core's sram its kernel holds at most, and `preload_bytes` those its `preload` holds (in
    sram or mpu_buffer). The partitioner chains spmd kernels into one while each phase, with
    the next phase's preload (issued in it, `kernelgen.generate_chain`), fits one core's sram
    (`LegatoGraphWrapper._fits`: the phases reuse the space of the ones before).
    `preload_ahead_only`: the preload helps only issued ahead of other work (a fused
    prologue's steps, an earlier phase of a chain); with none, the implementation gets `()`
    instead and loads those tiles itself (a projection's first weight tiles, loaded before x,
    would only delay x).

    `rows_prologue` (spmd only; None: none) = `(pos, r)`: the implementation reads operand
    `pos` ([M, K], rows in dim 0) in pieces of r rows and can take, in a chain, the row-local
    work computing it as a fused prologue (`kernelgen.PiecePhase`): it then gets None for that
    operand and the keywords `pro=(load, run), pargs=(...)`, and each core calls `ld =
    load(r0, wcores, *pargs)`, issues its own first loads, then `piece = run(ld, r0, wcores,
    *pargs)` for the rows [r0, r0 + r) it reads; the cores below `wcores` (one per piece) also
    write that work's other outputs (a residual sum), each row once.
    """

    fn: Any
    args: tuple
    memory: dict[int, str] = field(default_factory=dict)
    name: str | None = None
    spmd: bool = False
    scratch: tuple = ()
    values: frozenset = frozenset()
    epilogue: bool = False
    epilogue_own: bool = False
    group_key: Any = None
    merge: Any = None
    members: tuple = ()
    writes: tuple = ()
    takes: tuple = ()
    rows_only: str | None = None
    preload: Any = None
    onchip: int | None = None
    preload_bytes: int = 0
    preload_ahead_only: bool = False
    rows_prologue: tuple | None = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        fn = getattr(self.fn, "fn", self.fn)
        return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


@dataclass
class ResolveContext:
    """What a resolver may look at besides the node: the target ComputeModel, the options and
    the dynamic-dimension bounds (`bound(symint_or_int)`)."""

    model: Any
    options: Any
    bound: Callable[[Any], int | None]

    def probe(self, op: str, dtype) -> None:
        """Assert that the compiler for this target can lower the legato op `op` on `dtype`
        (compiles a tiny probe kernel once per process and target)."""
        require(self, op, dtype)


Resolver = Callable[[Any, ResolveContext], Impl]

_resolvers: dict[Any, list[Resolver]] = {}
_graph_passes: list[Callable[[Any], bool]] = []
_lock = threading.RLock()
_loaded = False
_library_errors: list[tuple[str, str]] = []


def _key(op) -> str:
    """'aten::mm.default' for an overload, 'aten::mm' for a packet or string."""
    if isinstance(op, str):
        return op if "::" in op else f"aten::{op}"
    name = getattr(op, "_schema", None)
    if name is not None and hasattr(op, "_overloadname"):  # OpOverload
        overload = op._overloadname or "default"
        return f"{op._schema.name}.{overload}"
    qualified = getattr(op, "_qualified_op_name", None)  # OpOverloadPacket
    if qualified is not None:
        return qualified
    raise TypeError(f"cannot register a resolver for {op!r}: expected an ATen op or 'ns::name'")


def register(op, resolver: Resolver | None = None):
    """Register `resolver(node, ctx) -> Impl` for `op`. Usable as a decorator:

    ```python
    @legato.torch.register(torch.ops.aten.mm.default)
    def mm(node, ctx):
        ...
        return Impl(my_mm, (node.args[0], node.args[1]), memory={1: "mpu_weight"})
    ```
    """
    if resolver is None:
        return lambda r: register(op, r)
    # Libraries first, so a resolver registered by user code is always newer than the built-in
    # ones (asked first), whether or not anything was compiled yet. (Inside load_libraries this
    # returns at once: it marks itself loaded before importing.) Not from a built-in library
    # being imported on its own (`import legato.torch.library.aten`): loading the others then,
    # from inside its import, would register them before it (asked after it) and import them
    # while it is half-initialized.
    if getattr(resolver, "__module__", None) not in BUILTIN_LIBRARIES:
        load_libraries()
    ops = op if isinstance(op, (list, tuple)) else [op]
    with _lock:
        for o in ops:
            _resolvers.setdefault(_key(o), []).append(resolver)
    return resolver


def register_graph_pass(fn: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """Register `fn(gm) -> bool`, run on every ATen graph before its nodes are resolved: it may
    replace nodes by nodes that compute the same values for every input (e.g. an index offset
    folded into the gather it feeds) and returns whether it changed the graph. Usable as a
    decorator."""
    with _lock:
        if fn not in _graph_passes:
            _graph_passes.append(fn)
    return fn


def run_graph_passes(gm) -> bool:
    """Run the registered graph passes on `gm` (registration order); whether any changed it."""
    load_libraries()
    with _lock:
        passes = list(_graph_passes)
    changed = False
    for fn in passes:
        changed = bool(fn(gm)) or changed
    return changed


def unregister(op, resolver: Resolver) -> None:
    with _lock:
        lst = _resolvers.get(_key(op), [])
        if resolver in lst:
            lst.remove(resolver)


def resolvers_for(target) -> list[Resolver]:
    """Resolvers for a node target, most recent first (exact overload before whole packet)."""
    load_libraries()
    keys = []
    try:
        exact = _key(target)
        keys.append(exact)
        packet = exact.rsplit(".", 1)[0] if hasattr(target, "_overloadname") else None
        if packet and packet != exact:
            keys.append(packet)
    except TypeError:
        return []
    out: list[Resolver] = []
    with _lock:
        for k in keys:
            out.extend(reversed(_resolvers.get(k, [])))
    return out


def load_libraries(force: bool = False) -> list[tuple[str, str]]:
    """Import the built-in library and every `legato-library` entry point (once). Returns the
    libraries that failed to load as (name, error); they are logged, not fatal."""
    global _loaded
    with _lock:
        if _loaded and not force:
            return list(_library_errors)
        _loaded = True
        for mod in BUILTIN_LIBRARIES:
            importlib.import_module(mod)
        from importlib.metadata import entry_points

        eps = [ep for g in ENTRY_POINT_GROUPS for ep in entry_points(group=g)]
        for ep in eps:
            try:
                obj = ep.load()
                if callable(obj):
                    obj()
                log.debug("legato-library %s loaded from %s", ep.name, ep.value)
            except Exception as e:  # noqa: BLE001 - one broken library must not break torch
                _library_errors.append((ep.name, f"{type(e).__name__}: {e}"))
                log.warning(
                    "legato-library entry point %s (%s) failed to load: %s", ep.name, ep.value, e
                )
        return list(_library_errors)


@dataclass
class Resolution:
    """The outcome of resolving one node."""

    impl: Impl | None
    reason: str | None  # None when supported; else "no resolver" / "resolver refused: ..."


def resolve(node, ctx: ResolveContext) -> Resolution:
    resolvers = resolvers_for(node.target)
    if not resolvers:
        return Resolution(None, "no resolver")
    refusals = []
    for r in resolvers:
        try:
            impl = r(node, ctx)
        except AssertionError as e:
            refusals.append(str(e) or f"{getattr(r, '__qualname__', r)} asserted")
            continue
        except Exception as e:  # a resolver's bug must not break the model (unless strict)
            if getattr(ctx.options, "strict", False):
                raise
            where = getattr(r, "__qualname__", r)
            log.warning(
                "legato resolver %s failed on %s: %s: %s", where, node.name, type(e).__name__, e
            )
            refusals.append(f"{where} failed: {type(e).__name__}: {e}")
            continue
        if impl is None:
            refusals.append(f"{getattr(r, '__qualname__', r)} returned None")
            continue
        return Resolution(impl, None)
    return Resolution(None, "resolver refused: " + "; ".join(refusals))
