"""A static estimate of a kernel's work from its core IR, before anything runs.

`estimate(module, model, shapes)` walks every `core.program` of the (lowered) core kernel in
`module` and counts what the emulator will count for the same arguments: the shared-DRAM bytes
of its DMAs (each end that is a kernel argument counts, as on the channels), the MPU's MACs,
the VPU's element-ops (and which of those run at the transcendental rate), and for each
`core.pim_gemv` the `pim.gemv`s it lowers to (`arch.pim.PimLayout.operations`): x's and the
result's bytes over the channels and the weight bytes the PIM units read inside them. Only the index
arithmetic is evaluated (constants, `core.dim` of the arguments, `core.core_id`, `arith`, the
bounds of `scf.for` loops, iterated): no data. A size that depends on data (`core.load_index`)
takes its type's bound, and the estimate says it is an upper bound (`exact` False).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp

from legato import opset
from legato.dialects import core as C
from legato.targets.bertha import timing
from legato.targets.bertha.arch.pim import PimLayout
from legato.transforms.vpu_shapes import broadcast_form

# core.vpu_unary kinds that run at the transcendental rate (`vpu.cvt` is plain)
_TRANSCENDENTAL = frozenset(
    o.kind for o in opset.family(opset.UNARY) if o.cost == opset.TRANSCENDENTAL
)


@dataclass
class Estimate:
    """What the IR says a run will do (chip-wide totals) and the roofline of that work."""

    dram_bytes: int = 0
    macs: int = 0
    vpu_ops: int = 0
    vpu_transcendental_ops: int = 0
    pim_bytes: int = 0  # weight bytes read by the PIM units inside their channels
    exact: bool = True  # False: a size depended on data, its bound was counted
    per_program: dict[str, dict[str, int]] = field(default_factory=dict)
    roofline: timing.Roofline | None = None

    def as_dict(self) -> dict:
        return {
            "dram_bytes": self.dram_bytes,
            "macs": self.macs,
            "vpu_ops": self.vpu_ops,
            "vpu_transcendental_ops": self.vpu_transcendental_ops,
            "pim_bytes": self.pim_bytes,
            "exact": self.exact,
            "roofline": self.roofline.as_dict() if self.roofline else None,
        }

    def summary(self) -> str:
        bound = "" if self.exact else " (upper bound: some sizes depend on data)"
        text = (
            f"static estimate{bound}: DRAM bytes {self.dram_bytes}, MACs {self.macs}, "
            f"VPU element-ops {self.vpu_ops} ({self.vpu_transcendental_ops} transcendental)"
            + (f", PIM bytes {self.pim_bytes}" if self.pim_bytes else "")
        )
        if self.roofline is not None:
            r = self.roofline
            text += (
                f"; roofline {r.cycles} cycles ({r.bound}-bound: dram {r.dram_cycles}, "
                f"mpu {r.mpu_cycles}, vpu {r.vpu_cycles})"
            )
        return text


class _Buf:
    """A buffer value: its runtime shape (None entries: unknown, the bound is used), its
    element size, and whether it lies in shared DRAM (a kernel argument or a view of one)."""

    __slots__ = ("shape", "bounds", "itemsize", "shared")

    def __init__(self, shape, bounds, itemsize: int, shared: bool):
        self.shape, self.bounds, self.itemsize, self.shared = shape, bounds, itemsize, shared


class _Walker:
    def __init__(self, shapes: list[tuple[int, ...] | None], est: Estimate, counts: dict):
        self.shapes = shapes
        self.est = est
        self.counts = counts
        self.env: dict = {}
        self.core = 0
        self.model = None  # the target (set by `estimate`): PIM's layout depends on it

    # -- values ------------------------------------------------------------------------------
    def value(self, v):
        return self.env.get(v)

    def elements(self, b: _Buf) -> int:
        n = []
        for s, bd in zip(b.shape, b.bounds):
            if s is None:
                self.est.exact = False
                s = bd
            n.append(s)
        return prod(n)

    def _buf_type(self, v) -> C.BufType:
        return v.type

    def _shape_from(self, t: C.BufType, dyn) -> tuple[list, list]:
        dyn = iter(dyn)
        shape = [next(dyn) if d.is_dynamic else d.size for d in t.dims]
        return shape, [d.bound for d in t.dims]

    # -- ops ---------------------------------------------------------------------------------
    def block(self, block) -> None:
        for op in block.ops:
            self.op(op)

    def op(self, op) -> None:  # noqa: C901 - one case per op kind, like an interpreter
        v = self.value
        if isinstance(op, arith.ConstantOp):
            val = op.value
            self.env[op.result] = val.value.data if isinstance(val, IntegerAttr) else None
        elif isinstance(op, C.ArgOp):
            t = op.result.type
            if isinstance(t, C.BufType):
                i = op.index.data
                given = self.shapes[i] if i < len(self.shapes) else None
                bounds = [d.bound for d in t.dims]
                shape = list(given) if given is not None else [None] * len(bounds)
                self.env[op.result] = _Buf(shape, bounds, _itemsize(t), True)
        elif isinstance(op, C.DimOp):
            b = v(op.buf)
            self.env[op.result] = b.shape[op.dim.data] if b is not None else None
        elif isinstance(op, C.CoreIdOp):
            self.env[op.result] = self.core
        elif isinstance(op, C.AllocOp):
            t = op.result.type
            shape, bounds = self._shape_from(t, [v(d) for d in op.dyn_dims])
            self.env[op.result] = _Buf(shape, bounds, _itemsize(t), False)
        elif isinstance(op, C.SubviewOp):
            src = v(op.source)
            dyn = iter(v(s) for s in op.sizes)
            sizes = [next(dyn) if s == C.DYNAMIC else s for s in op.static_sizes.get_values()]
            t = op.result.type
            shared = src.shared if src is not None else False
            self.env[op.result] = _Buf(sizes, [d.bound for d in t.dims], _itemsize(t), shared)
        elif isinstance(op, C.ViewOp):
            src = v(op.source)
            t = op.result.type
            shape, bounds = self._shape_from(t, [v(d) for d in op.dyn_dims])
            shared = src.shared if src is not None else False
            self.env[op.result] = _Buf(shape, bounds, _itemsize(t), shared)
        elif isinstance(op, C.DmaOp):
            src, dst = v(op.src), v(op.dst)
            if op.nbytes is not None:
                n = v(op.nbytes)
                if n is None:
                    self.est.exact = False
                    n = self.elements(src) * src.itemsize
            else:
                n = self.elements(src) * src.itemsize
            ends = int(src.shared) + int(dst.shared)
            self.count("dram_bytes", n * ends)
        elif isinstance(op, C.MpuMatmulOp):
            a, out = v(op.input), v(op.out)
            rows_k = self.elements(a)
            n = out.shape[-1] if out.shape[-1] is not None else out.bounds[-1]
            self.count("macs", rows_k * n)
        elif isinstance(op, C.PimGemvOp):
            # one pim.gemv per tile and channel (core-to-backend): x in and the fp32 result
            # out over the channel, the tile's weight bytes read inside it (no MPU MACs)
            k, n = op.w.type.get_shape()
            layout = PimLayout(k, n, self.model.num_memory_channels)
            for _off, _c, k0, k1, j0, j1 in layout.operations():
                self.count("dram_bytes", (k1 - k0) * 2 + (j1 - j0) * 4)
                self.count("pim_bytes", (k1 - k0) * (j1 - j0) * 2)
        elif isinstance(op, C.VpuBinaryOp | C.VpuFillOp | C.VpuSelectOp):
            self.count("vpu_ops", self.elements(v(op.out)))
        elif isinstance(op, C.VpuUnaryOp):
            n = self.elements(v(op.out))
            it, ot = op.input.type, op.out.type
            copy = op.kind.data == "copy" or (
                op.kind.data == "cast" and it.get_element_type() == ot.get_element_type()
            )
            if copy and broadcast_form(it.dims, ot.dims)[0] not in ("full", None):
                n *= 2  # a broadcast copy is a fill and a max (convert-core-to-backend)
            self.count("vpu_ops", n)
            if op.kind.data in _TRANSCENDENTAL:
                self.count("vpu_transcendental_ops", n)
        elif isinstance(op, C.VpuReduceOp | C.VpuTransposeOp):
            self.count("vpu_ops", self.elements(v(op.input)))
        elif isinstance(op, C.LoadIndexOp):
            self.env[op.result] = None  # data: whatever it sizes takes its bound
        elif isinstance(op, scf.ForOp):
            self.loop(op)
        elif isinstance(op, scf.IfOp):
            cond = v(op.cond)
            if cond is None:
                raise _Unknown(f"an scf.if on a runtime condition ({op.name})")
            self.block(op.true_region.block if cond else op.false_region.block)
        elif op.name.startswith("arith.") and op.results:
            self.env[op.results[0]] = _arith(op.name, [v(x) for x in op.operands], op)

    def loop(self, op: scf.ForOp) -> None:
        lb, ub, step = self.value(op.lb), self.value(op.ub), self.value(op.step)
        if None in (lb, ub, step):
            raise _Unknown("a loop whose trip count depends on data")
        body = op.body.block
        iv = body.args[0]
        for i in range(lb, ub, step):
            self.env[iv] = i
            self.block(body)

    def count(self, what: str, n: int) -> None:
        self.counts[what] = self.counts.get(what, 0) + n
        setattr(self.est, what, getattr(self.est, what) + n)


class _Unknown(Exception):
    pass


def _itemsize(t: C.BufType) -> int:
    return (t.get_element_type().bitwidth + 7) // 8  # type: ignore[attr-defined]


def _arith(name: str, xs: list, op):
    """The value of an index `arith` op on known operands, None when one is unknown."""
    if any(x is None for x in xs):
        return None
    kind = name.removeprefix("arith.")
    if kind == "index_cast" or kind == "index_castui" or kind in ("extsi", "extui", "trunci"):
        return xs[0]
    if kind == "select":
        return xs[1] if xs[0] else xs[2]
    if kind == "cmpi":
        a, b = xs
        pred = op.predicate.value.data
        return int(
            [a == b, a != b, a < b, a <= b, a > b, a >= b, a < b, a <= b, a > b, a >= b][pred]
        )
    a, b = xs[0], xs[1] if len(xs) > 1 else None
    table = {
        "addi": lambda: a + b,
        "subi": lambda: a - b,
        "muli": lambda: a * b,
        "divsi": lambda: int(a / b),
        "divui": lambda: a // b,
        "floordivsi": lambda: a // b,
        "ceildivsi": lambda: -(-a // b),
        "ceildivui": lambda: -(-a // b),
        "remsi": lambda: a - int(a / b) * b,
        "remui": lambda: a % b,
        "minsi": lambda: min(a, b),
        "minui": lambda: min(a, b),
        "maxsi": lambda: max(a, b),
        "maxui": lambda: max(a, b),
        "andi": lambda: a & b,
        "ori": lambda: a | b,
        "xori": lambda: a ^ b,
        "shli": lambda: a << b,
        "shrsi": lambda: a >> b,
        "shrui": lambda: a >> b,
    }
    f = table.get(kind)
    if f is None:
        return None
    try:
        return f()
    except ZeroDivisionError:
        return None


def estimate(module: ModuleOp, model, shapes: list[tuple[int, ...] | None]) -> Estimate:
    """The work of the core kernel in `module` (lowered to the core level) run on `model` with
    tensor arguments of runtime `shapes` (one per kernel argument, None for a scalar or an
    unknown shape: its dims take their bounds). A program `on all_cores` is counted once per
    core. Raises LegatoError when a loop's trip count depends on data."""
    from legato.errors import LegatoError

    (kernel,) = (op for op in module.body.block.ops if isinstance(op, C.KernelOp))
    est = Estimate()
    for prog in kernel.body.block.ops:
        if not isinstance(prog, C.ProgramOp):
            continue
        ctx = prog.ctx
        name = prog.sym_name.data
        if ctx.is_all_cores:
            cores = range(model.num_cores)
        else:
            cores = [ctx.core_index or 0]
        counts: dict[str, int] = {}
        for c in cores:
            w = _Walker(shapes, est, counts)
            w.core, w.model = c, model
            try:
                w.block(prog.body.block)
            except _Unknown as e:
                raise LegatoError(
                    f"no static estimate for program {name}: {e}; the run's counts are exact"
                ) from None
        est.per_program[name] = counts
    est.roofline = timing.roofline(
        model,
        est.dram_bytes,
        est.macs,
        est.vpu_ops,
        est.vpu_transcendental_ops,
        est.pim_bytes,
    )
    return est
