"""Runtime values in the frontend: index scalars, runtime loops, dynamic slices, core-side loads,
SPMD and synchronization (mixed into `codegen.CodeGenerator`).

* `IRScalar`: a runtime `index` value (`x.size(0)` of a dynamic dim, `legato.core_id()` in an
  all-cores region, a runtime loop's index, and arithmetic on them). It is kept as an affine form
  `const + sum(coef * atom)` over opaque SSA atoms, so `x[i*R:(i+1)*R]` has the static size R;
  `+`, `-` and `*` by an int stay affine, `*` of two runtime values, `//`, `%`, `min` and `max`
  make a new atom (`arith` ops). It is materialized as `arith` ops where an op needs the value.
* `for i in range(n)` with a runtime bound is an `scf.for` (step: a positive compile-time int).
  Tensors assigned in the body that exist before the loop are carried around it (iter_args,
  same type on every iteration); names first assigned in the body are not visible after it;
  compile-time values must not change in the body.
* `x[a:b, ...]` with runtime bounds (or a partial slice of a dynamic dim) is a
  `legato.dynamic_slice`. On a static dim a size `b - a` that is not a compile-time int gives a
  dynamic dim bounded by the dim (`scratch[0:m]`: a runtime-row view of a buffer sized at the
  bound), not clamped. Otherwise the size must fold to a compile-time int; on a dynamic dim the
  runtime size is clamped to what the tensor holds (Python/torch slicing), unless the slice
  provably lies inside the dim (a loop over its whole tiles: `legato.frontend.bounds`), when it
  keeps its static size; on a static dim the slice must lie within the dim at run time.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, Region, SSAValue

import legato.dialects.legato as L
from legato.context import Device, ExecContext
from legato.dialects.fast_build import build_flat
from legato.dialects.shared_attrs import integer_attr
from legato.frontend.bounds import DimFact, DivFact, Facts, LoopFact, MinFact
from legato.frontend.language import static_range
from legato.frontend.values import IRScalar, IRValue
from legato.frontend.values import describe as _describe
from legato.frontend.values import op_symbol as _op_symbol
from legato.types import CORE_SPACES, Dim

# --------------------------------------------------------------------------------------------
# Values


def _affine(a: IRScalar | int, b: IRScalar | int, kb: int, region) -> IRScalar | int:
    """a + kb * b (affine); an int when no runtime term is left."""
    terms: dict[int, list] = {}
    const = 0
    for x, k in ((a, 1), (b, kb)):
        if isinstance(x, int):
            const += k * x
            continue
        const += k * x.const
        for ssa, c in x.terms:
            entry = terms.setdefault(id(ssa), [ssa, 0])
            entry[1] += k * c
    kept = tuple((s, c) for s, c in terms.values() if c != 0)
    if not kept:
        return const
    return IRScalar(kept, const, region)


def _scale(a: IRScalar, k: int, region) -> IRScalar | int:
    if k == 0:
        return 0
    return IRScalar(tuple((s, c * k) for s, c in a.terms), a.const * k, region)


@dataclass(frozen=True)
class RuntimeRange:
    """`range(lb, ub, step)` with a runtime bound: iterated by an `scf.for`."""

    lb: IRScalar | int
    ub: IRScalar | int
    step: int


@dataclass(frozen=True)
class LoopLocal:
    """What a name assigned inside a runtime loop is after the loop: unusable."""

    name: str
    line: int


class TensorMethod:
    """`x.size` of a tensor: `x.size(d)` is a static int or a runtime index."""

    def __init__(self, gen, value, node: ast.AST):
        self.gen, self.value, self.node = gen, value, node

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != 1 or isinstance(args[0], bool) or not isinstance(args[0], int):
            raise self.gen.error(self.node, "x.size(d) takes one compile-time int dim")
        return self.gen.dim_of(self.value, args[0], self.node)


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    out: list[str] = []
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in out:
                out.append(n.id)
    return out


def _same_static(a, b) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001
        return False


def _form_key(x: IRScalar | int):
    if isinstance(x, int):
        return x
    return (tuple((id(s), c) for s, c in x.terms), x.const)


_SCALAR_OPS = {ast.FloorDiv: arith.DivSIOp, ast.Mod: arith.RemSIOp, ast.Mult: arith.MuliOp}

_INDEX = IndexType()
_NO_OVERFLOW = arith.IntegerOverflowAttr("none")  # the default of the ops with overflow flags


def index_constant(value: int) -> arith.ConstantOp:
    """`arith.ConstantOp.from_int_and_width(value, IndexType())`, built directly (the value
    attribute shared, `shared_attrs`)."""
    return build_flat(arith.ConstantOp, (), (_INDEX,), {"value": integer_attr(value, _INDEX)})


def index_binary(cls: type, a: SSAValue, b: SSAValue):
    """`cls(a, b)` for an `arith` binary op on index values (`AddiOp`, `MuliOp`, `DivSIOp`,
    ...), built directly: the result is of `a`'s type, the overflow flags (of the ops that
    have them) xDSL's default."""
    props = {"overflowFlags": _NO_OVERFLOW} if issubclass(cls, _WITH_OVERFLOW) else None
    return build_flat(cls, (a, b), (a.type,), props)


_WITH_OVERFLOW = arith.SignlessIntegerBinaryOperationWithOverflow


# --------------------------------------------------------------------------------------------
# The mixin


class RuntimeCodegen:
    """Runtime scalars, loops, dynamic slices, loads, SPMD and sync for `CodeGenerator`."""

    blocks: list[Block]
    loop_depth: int

    # -- scalars -------------------------------------------------------------------------------

    def index_const(self, value: int, node: ast.AST) -> SSAValue:
        return self.emit(index_constant(value), node).results[0]

    def materialize(self, value: IRScalar | int, node: ast.AST) -> SSAValue:
        """An `index` SSA value holding `value` (emits arith ops at the current point)."""
        if isinstance(value, int):
            return self.index_const(value, node)
        acc: SSAValue | None = None
        for ssa, c in value.terms:
            term = (
                ssa
                if c == 1
                else self.emit(
                    index_binary(arith.MuliOp, ssa, self.index_const(c, node)), node
                ).results[0]
            )
            acc = (
                term
                if acc is None
                else self.emit(index_binary(arith.AddiOp, acc, term), node).results[0]
            )
        assert acc is not None
        if value.const:
            acc = self.emit(
                index_binary(arith.AddiOp, acc, self.index_const(value.const, node)), node
            ).results[0]
        return acc

    def new_scalar(self, ssa: SSAValue) -> IRScalar:
        return IRScalar.atom(ssa, self.region)

    def check_index_operand(self, value, node: ast.AST):
        if isinstance(value, IRScalar):
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            what = "a tensor" if isinstance(value, IRValue) else _describe(value)
            raise self.error(
                node, f"runtime index arithmetic takes runtime indices and ints, got {what}"
            )
        return value

    def scalar_binary(self, node, op, left, right, left_node, right_node):
        a = self.check_index_operand(left, left_node)
        b = self.check_index_operand(right, right_node)
        if isinstance(op, ast.Add):
            return _affine(a, b, 1, self.region)
        if isinstance(op, ast.Sub):
            return _affine(a, b, -1, self.region)
        if isinstance(op, ast.Mult) and (isinstance(a, int) or isinstance(b, int)):
            s, k = (b, a) if isinstance(a, int) else (a, b)
            return _scale(s, k, self.region)
        if type(op) in _SCALAR_OPS:
            if isinstance(b, int) and b == 0:
                raise self.error(node, "division by zero")
            if isinstance(b, int) and b == 1 and isinstance(op, ast.FloorDiv):
                return a
            cls = _SCALAR_OPS[type(op)]
            atom = self.cached_atom(
                (cls, _form_key(a), _form_key(b)),
                lambda: self.emit(
                    index_binary(
                        cls, self.materialize(a, left_node), self.materialize(b, right_node)
                    ),
                    node,
                ).results[0],
            )
            if isinstance(b, int) and b > 0 and not isinstance(op, ast.Mult):
                self.index_facts().record(atom, DivFact(a, b, isinstance(op, ast.Mod)))
            return atom
        raise self.error(
            node,
            f"operator {_op_symbol(op)} is not supported on runtime indices (they have + - * "
            "// % and min/max)",
        )

    def scalar_unary(self, node, operand: IRScalar):
        if isinstance(node.op, ast.USub):
            return _scale(operand, -1, self.region)
        if isinstance(node.op, ast.UAdd):
            return operand
        raise self.error(node, "runtime indices support unary - and + only")

    def scalar_minmax(self, node: ast.Call, fn, args: list):
        if len(args) < 2:
            raise self.error(node, f"{fn.__name__}() of runtime indices takes at least 2 values")
        vals = [self.check_index_operand(a, node) for a in args]
        cls = arith.MinSIOp if fn is min else arith.MaxSIOp

        def build():
            acc = self.materialize(vals[0], node)
            for v in vals[1:]:
                acc = self.emit(cls(acc, self.materialize(v, node)), node).results[0]
            return acc

        atom = self.cached_atom((cls, *(_form_key(v) for v in vals)), build)
        if fn is min:
            self.index_facts().record(atom, MinFact(tuple(vals)))
        return atom

    def index_facts(self) -> Facts:
        """What is known of the runtime indices' ranges (`legato.frontend.bounds`)."""
        return self.__dict__.setdefault("_index_facts", Facts())

    def cached_atom(self, key: tuple, build) -> IRScalar:
        """The atom of a non-affine scalar op: the same op on the same operands in a block that
        encloses the current point is reused, so `(c + 1) % n` written twice is one value
        (and `x[j*R:j*R+R]` with that j has a static size)."""
        cache = self.__dict__.setdefault("_atom_cache", {})
        visible = [self.region.block, *self.blocks]
        hit = cache.get(key)
        if hit is not None and any(hit[0] is b for b in visible) and hit[1].region is self.region:
            return hit[1]
        s = self.new_scalar(build())
        cache[key] = (self.current_block(), s)
        return s

    def runtime_call(self, fn, args: list, kwargs: dict, node: ast.Call):
        """Builtins that accept runtime indices; NotImplemented for anything else."""
        if any(isinstance(a, IRScalar) for a in [*args, *kwargs.values()]):
            if fn is static_range:
                raise self.error(
                    node,
                    "legato.static_range needs compile-time bounds (it unrolls); use range(n) "
                    "for a loop over a runtime value",
                )
            if fn is range:
                return self.runtime_range(node, args, kwargs)
            if fn in (min, max) and not kwargs:
                return self.scalar_minmax(node, fn, args)
            if getattr(fn, "__func__", None) is Device.get_core and len(args) == 1 and not kwargs:
                if self.region is None or self.region.ctx.kind != "all_cores":
                    raise self.error(
                        node,
                        "device.get_core of a runtime index (a core chosen at run time) is only "
                        "supported in a `with device.get_all_cores():` region, as a "
                        "request_load target",
                    )
                return fn(*args)  # checked where it is used (request_load)
        return NotImplemented

    def runtime_range(self, node: ast.Call, args: list, kwargs: dict) -> RuntimeRange:
        if kwargs or not 1 <= len(args) <= 3:
            raise self.error(node, "range() takes 1 to 3 positional arguments")
        lb, ub, step = (
            (0, args[0], 1) if len(args) == 1 else (*args[:2], args[2] if len(args) == 3 else 1)
        )
        for v in (lb, ub):
            self.check_index_operand(v, node)
        if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
            raise self.error(
                node, "the step of a runtime range must be a positive compile-time int"
            )
        return RuntimeRange(lb, ub, step)

    def dim_of(self, value, d: int, node: ast.AST):
        spec = value.spec
        if not -spec.rank <= d < spec.rank:
            raise self.error(node, f"dim {d} is out of range for {spec}")
        d %= spec.rank
        dim = spec.dims[d]
        if not dim.is_dynamic:
            return dim.size
        if self.region is None:
            raise self.error(
                node, "x.size(d) of a dynamic dim is a runtime value: use it inside a region"
            )
        r = self.emit(L.DimOp(value.ssa, d), node).results[0]
        s = self.new_scalar(r)
        self.index_facts().record(s, DimFact(value.ssa, d))
        return s

    # -- runtime loops -------------------------------------------------------------------------

    def current_block(self) -> Block:
        return self.blocks[-1] if self.blocks else self.region.block

    def runtime_for(self, node: ast.For, rng: RuntimeRange) -> None:
        if self.region is None:
            raise self.error(
                node, "a loop over a runtime value must be inside an execution context"
            )
        if node.orelse:
            raise self.error(node.orelse[0], "`for ... else` is not supported in a Legato kernel")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the index of a runtime loop must be a plain name")
        env = self.frame.env
        target = node.target.id
        lb = self.materialize(rng.lb, node.iter)
        ub = self.materialize(rng.ub, node.iter)
        step = self.index_const(rng.step, node.iter)
        assigned = [n for n in assigned_names(node.body) if n != target]
        before = {n: env[n] for n in assigned if n in env}
        for n, v in before.items():
            if isinstance(v, IRScalar):
                raise self.error(
                    node,
                    f"'{n}' is a runtime index defined before this loop and assigned inside it; "
                    "runtime indices are not carried around runtime loops: compute it from the "
                    f"loop index '{target}' instead",
                )
        carried = [n for n in assigned if isinstance(before.get(n), IRValue)]
        init = [self.use(before[n], node) for n in carried]
        block = Block(arg_types=[IndexType(), *(v.type for v in init)])
        block.args[0].name_hint = target if target.isidentifier() else None
        target_before = env.get(target, None)
        env[target] = self.new_scalar(block.args[0])
        env[target].name = target
        self.index_facts().record(env[target], LoopFact(rng.lb, rng.ub))
        for n, arg, v in zip(carried, block.args[1:], init):
            arg.name_hint = n
            env[n] = IRValue(arg, v.spec, self.region, n, None, v.defined_at, v.source)
        self.blocks.append(block)
        self.loop_depth += 1
        try:
            self.visit_body(node.body)
        finally:
            self.blocks.pop()
            self.loop_depth -= 1
        yields = []
        for n, v0 in zip(carried, init):
            v = env.get(n)
            if not isinstance(v, IRValue) or v.type != v0.type:
                raise self.error(
                    node,
                    f"'{n}' is a tensor assigned inside this runtime loop, so it is carried from "
                    f"one iteration to the next and must keep its type {v0.spec}; at the end of "
                    f"the body it is {_describe(v)}",
                )
            yields.append(v.ssa)
        y = scf.YieldOp(*yields)
        y.location = self.loc(node)
        block.add_op(y)
        self.check(y, node)
        loop = scf.ForOp(lb, ub, step, [v.ssa for v in init], Region(block))
        self.emit(loop, node)
        line = self.frame.source.loc(node).line
        for n in assigned:
            if n in carried:
                v0 = init[carried.index(n)]
                res = loop.results[carried.index(n)]
                res.name_hint = n
                env[n] = IRValue(res, v0.spec, self.region, n, None, v0.defined_at, v0.source)
            elif n in before:
                if not _same_static(env.get(n), before[n]):
                    raise self.error(
                        node,
                        f"'{n}' is a compile-time value ({_describe(before[n])}) assigned inside "
                        "this runtime loop; compile-time values cannot change from one runtime "
                        "iteration to the next (use legato.static_range to unroll)",
                    )
                env[n] = before[n]
            else:
                env[n] = LoopLocal(n, line)
        env[target] = target_before if target_before is not None else LoopLocal(target, line)

    def refuse_in_loop(self, node: ast.AST, what: str, instead: str) -> None:
        if self.loop_depth:
            raise self.error(node, f"{what} is not supported inside a runtime loop; {instead}")

    # -- dynamic slices ------------------------------------------------------------------------

    def needs_dynamic_slice(self, value, items: tuple) -> bool:
        for d, it in zip(value.spec.dims, items):
            if isinstance(it, IRScalar):
                return True
            if isinstance(it, slice):
                if any(isinstance(p, IRScalar) for p in (it.start, it.stop, it.step)):
                    return True
                if d.is_dynamic and it != slice(None):
                    return True
        return False

    def dynamic_slice(self, value, items: tuple, node: ast.AST):
        """`x[...]` with runtime bounds -> legato.dynamic_slice (+ reshape for int indices)."""
        spec = value.spec
        offsets: list = []
        sizes: list = []
        dims: list[Dim] = []
        keep: list[bool] = []
        for i, (d, it) in enumerate(zip(spec.dims, items)):
            if isinstance(it, slice):
                if it.step not in (None, 1):
                    raise self.error(
                        node, "a slice with runtime bounds (or of a dynamic dim) takes step 1"
                    )
                start = 0 if it.start is None else it.start
                self.check_index_operand(start, node)
                if isinstance(start, int) and start < 0:
                    raise self.error(node, f"dim {i}: negative slice starts are not supported here")
                if it.stop is None:
                    if isinstance(start, int) and start == 0:
                        if d.is_dynamic:
                            offsets.append(0)
                            sizes.append(self.materialize(self.dim_of(value, i, node), node))
                            dims.append(d)
                        else:
                            offsets.append(0), sizes.append(d.size), dims.append(d)
                        keep.append(True)
                        continue
                    if not d.is_dynamic and isinstance(start, int):
                        n = max(0, d.size - start)
                        offsets.append(start), sizes.append(n), dims.append(Dim(n, n))
                        keep.append(True)
                        continue
                    raise self.error(
                        node,
                        f"dim {i}: a slice with a runtime start needs an end whose distance to "
                        "the start is a compile-time int (x[i*R:(i+1)*R] or x[i:i+R])",
                    )
                stop = self.check_index_operand(it.stop, node)
                size = _affine(stop, start, -1, self.region)
                if not isinstance(size, int) and not d.is_dynamic:
                    # a runtime-size view of a static dim (`scratch[0:m]`): a dynamic dim
                    # bounded by what the dim holds past a static start; not clamped: an end
                    # past the dim stops the run at this line (as a runtime offset does)
                    bound = d.size - start if isinstance(start, int) else d.size
                    if isinstance(stop, int):  # x[i:4]: at most 4 (the start is >= 0)
                        bound = min(bound, stop)
                    if bound <= 0:
                        raise self.error(
                            node, f"dim {i}: a slice starting at {start} is empty in {spec}"
                        )
                    offsets.append(
                        start if isinstance(start, int) else self.materialize(start, node)
                    )
                    sizes.append(self.materialize(size, node))
                    dims.append(Dim(None, bound))
                    keep.append(True)
                    continue
                if not isinstance(size, int):
                    raise self.error(
                        node,
                        f"dim {i}: the size of this slice ({_describe(stop)} - "
                        f"{_describe(start)}) is not a compile-time int, and dim {i} of {spec} "
                        "is dynamic; write the end as the start plus a constant "
                        "(x[i*R:(i+1)*R] or x[i:i+R]) (a runtime size is taken on a static "
                        "dim: a view of a buffer sized at the bound, s[0:m])",
                    )
                size = max(size, 0)
                if not d.is_dynamic:
                    if size > d.size or (isinstance(start, int) and start + size > d.size):
                        raise self.error(
                            node, f"dim {i}: a slice of {size} elements does not fit {spec}"
                        )
                    offsets.append(
                        start if isinstance(start, int) else self.materialize(start, node)
                    )
                    sizes.append(size)
                    dims.append(Dim(size, size))
                    keep.append(True)
                    continue
                if size > 0 and self.index_facts().slice_in_bounds(value.ssa, i, start, size):
                    # provably inside the dim on every run (a loop over its whole tiles,
                    # `legato.frontend.bounds`): the static size, as on a static dim
                    offsets.append(self.materialize(start, node))
                    sizes.append(size)
                    dims.append(Dim(size, size))
                    keep.append(True)
                    continue
                # a dynamic dim: clamp to the runtime extent, as Python slicing does
                bound = min(size, d.bound - start if isinstance(start, int) else d.bound)
                if bound <= 0:
                    raise self.error(node, f"dim {i}: this slice is empty for every size of {d}")
                rest = _affine(self.dim_of(value, i, node), start, -1, self.region)
                clamped = self.scalar_minmax(node, min, [rest, size])
                clamped = self.scalar_minmax(node, max, [clamped, 0])
                offsets.append(start if isinstance(start, int) else self.materialize(start, node))
                sizes.append(self.materialize(clamped, node))
                dims.append(Dim(None, bound))
                keep.append(True)
            elif isinstance(it, IRScalar) or (isinstance(it, int) and not isinstance(it, bool)):
                if isinstance(it, int):
                    if d.is_dynamic:
                        raise self.error(node, f"dim {i} of {spec} is dynamic; index it with `:`")
                    j = it + d.size if it < 0 else it
                    if not 0 <= j < d.size:
                        raise self.error(node, f"index {it} is out of range for dim {i} of {spec}")
                    offsets.append(j)
                else:
                    offsets.append(self.materialize(it, node))
                sizes.append(1), dims.append(Dim(1, 1)), keep.append(False)
            else:
                raise self.error(
                    node,
                    f"tensor indices must be ints, runtime indices or slices, got {_describe(it)}",
                )
        rt = L.TensorType(dims, spec.dtype, spec.memory)
        result = self.emit_value(L.DynamicSliceOp, node, value.ssa, offsets, sizes, rt)
        if not all(keep):
            kept = [d for d, k in zip(result.spec.dims, keep) if k]
            result = self.emit_value(L.ReshapeOp, node, result.ssa, None, kept)
        return result

    # -- core-side loads, SPMD, sync -----------------------------------------------------------

    def _op_load(self, node: ast.Call):
        op = "load"
        region = self.require_region(node, op, core_only=True)
        b = self.bind_op_args(node, op)
        src = self.tensor_arg(b, "src", op)
        memory = self.memory_arg(
            b, "memory", op, allowed=tuple(s for s in CORE_SPACES if s != "mpu_weight")
        )
        del region
        return self.emit_value(L.LoadOp, node, src.ssa, memory)

    def _op_core_id(self, node: ast.Call):
        if node.args or node.keywords:
            raise self.error(node, "legato.core_id() takes no arguments")
        region = self.region
        if region is None or region.ctx.kind == "top":
            raise self.error(
                node,
                "legato.core_id() gives the running core's index: use it in a "
                "`with device.get_all_cores():` (or get_core(i)) region, not "
                + ("outside a region" if region is None else "on top"),
            )
        if region.ctx.is_core:
            return region.ctx.index  # a single-core region: a compile-time value
        s = self.new_scalar(self.emit(L.CoreIdOp(), node).results[0])
        s.name = "core_id"
        return s

    def request_load_all_cores(self, node: ast.Call, src, memory: str, queue: int) -> None:
        """`request_load(x, device.get_all_cores(), ...)`: one transfer of `x` to every core."""
        for i in range(self.model.num_cores):
            self.emit(L.RequestLoadOp(src.ssa, L.ContextAttr.core(i), memory, queue), node)
            self.sends.setdefault((i, memory, queue), []).append((node, self.frame.source))

    def request_load_runtime_core(
        self, node: ast.Call, tnode, src, index: IRScalar, memory: str, queue: int
    ) -> None:
        """`request_load(x, device.get_core(i), ...)` with a runtime `i`, in an all-cores region:
        every core sends to the core `i` evaluates to on it (see legato_to_core)."""
        if self.region is None or self.region.ctx.kind != "all_cores":
            raise self.error(
                tnode,
                "request_load to a core chosen at run time (device.get_core of a runtime index) "
                "is only supported in a `with device.get_all_cores():` region, where every "
                "core has the same receive buffers",
            )
        if memory != "sram":
            raise self.error(
                node,
                f"request_load to a core chosen at run time supports memory 'sram' only, "
                f"got '{memory}'",
            )
        self.emit(L.RequestLoadOp(src.ssa, self.materialize(index, tnode), memory, queue), node)

    def _sync_int(self, b: dict, name: str, op: str, low: int) -> int:
        value, n = b[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.error(
                n, f"legato.sync.{op}: {name} must be a compile-time int >= {low}, got {value!r}"
            )
        return value

    def _op_sync_barrier(self, node: ast.Call):
        region = self.region
        if region is None or region.ctx.kind != "all_cores":
            raise self.error(
                node,
                "legato.sync.barrier() synchronizes the cores of a `with "
                "device.get_all_cores():` region; between other contexts use "
                "legato.sync.signal / legato.sync.wait",
            )
        if node.args or node.keywords:
            raise self.error(node, "legato.sync.barrier() takes no arguments")
        self.emit(L.BarrierOp(), node)

    def _op_sync_signal(self, node: ast.Call):
        if self.region is None:
            raise self.error(node, "legato.sync.signal must run in an execution context")
        b = self.bind_op_args(
            node, "sync.signal", ["target", "sem", "count"], {"sem": 0, "count": 1}
        )
        target, tnode = b["target"]
        if (
            not isinstance(target, ExecContext)
            or target.kind == "all_cores"
            or (target.is_runtime_core)
        ):
            raise self.error(
                tnode,
                "legato.sync.signal: the target must be device.get_top() or device.get_core(i) "
                "of a compile-time i, "
                f"got {_describe(target)}",
            )
        sem = self._sync_int(b, "sem", "signal", 0)
        count = self._sync_int(b, "count", "signal", 1)
        self.emit(L.SignalOp(L.context_from_str(str(target)), sem, count), node)

    def _op_sync_wait(self, node: ast.Call):
        if self.region is None:
            raise self.error(node, "legato.sync.wait must run in an execution context")
        if self.region.ctx.kind == "all_cores":
            raise self.error(
                node,
                "legato.sync.wait cannot run in an all-cores region (every core would wait on "
                "one semaphore); use legato.sync.barrier() there, or wait on top or in a "
                "get_core(i) region",
            )
        b = self.bind_op_args(node, "sync.wait", ["sem", "count"], {"sem": 0, "count": 1})
        sem = self._sync_int(b, "sem", "wait", 0)
        count = self._sync_int(b, "count", "wait", 1)
        self.emit(L.WaitOp(sem, count), node)

    # -- kernel debugging ----------------------------------------------------------------------

    def _debug_value(self, op: str, value, node: ast.AST) -> SSAValue | str:
        """A device_print / device_assert operand: a tensor's or index's SSA value, or the text
        of a compile-time value (printed into the message)."""
        if isinstance(value, IRValue):
            return value.ssa
        if isinstance(value, IRScalar):
            return self.materialize(value, node)
        if isinstance(value, (bool, int, float, str)):
            return str(value)
        raise self.error(
            node,
            f"legato.{op}: a value must be a tensor, a runtime index or a compile-time number "
            f"or string, got {_describe(value)}",
        )

    def _op_device_print(self, node: ast.Call):
        if self.region is None:
            raise self.error(
                node,
                "legato.device_print must run in an execution context; put it inside a "
                "`with device.get_top():` / `get_core(i)` / `get_all_cores()` region",
            )
        if node.keywords:
            raise self.error(node.keywords[0].value, "legato.device_print takes no keywords")
        words: list[str] = []
        values: list[SSAValue] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.error(a, "`*` arguments are not supported for legato.device_print")
            v = self._debug_value("device_print", self.eval(a), a)
            if isinstance(v, str):
                if values:  # a constant after a runtime value would print out of order
                    raise self.error(
                        a,
                        "legato.device_print: compile-time values (the message) come before "
                        "the tensors and runtime indices",
                    )
                words.append(v)
            else:
                values.append(v)
        self.emit(L.DevicePrintOp(" ".join(words), values), node)

    def _op_device_assert(self, node: ast.Call):
        if self.region is None:
            raise self.error(
                node,
                "legato.device_assert must run in an execution context; put it inside a "
                "`with device.get_top():` / `get_core(i)` / `get_all_cores()` region",
            )
        b = self.bind_op_args(node, "device_assert", ["cond", "message"], {"message": ""})
        (cond, cnode), (message, mnode) = b["cond"], b["message"]
        if not isinstance(message, str):
            raise self.error(
                mnode, f"legato.device_assert: the message must be a string, got {message!r}"
            )
        c = self._debug_value("device_assert", cond, cnode)
        if isinstance(c, str):  # a compile-time condition: checked now
            if not cond:
                raise self.error(
                    node, f"legato.device_assert: the condition is false at compile time: {message}"
                )
            return None
        self.emit(L.DeviceAssertOp(c, message), node)
        return None
