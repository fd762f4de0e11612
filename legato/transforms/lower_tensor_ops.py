"""Lowering of legato tensor ops to core VPU/MPU/DMA ops (part of `convert-legato-to-core`).

Every function takes the kernel lowering `L` (`lowering_state.LoweringState`), the program
being built and the legato op; it emits core ops into the program and binds the op's result to a
buffer. The core ops emitted are the shapes the units accept, so instruction selection maps each
to one instruction (or a short unrolled sequence):

- elementwise ops compute on contiguous buffers; an operand that broadcasts is either one of the
  VPU's broadcast forms (`bc.scalar`, `bc.row(P)`, `bc.col(P)`, see `vpu_shapes`), swapped to
  the right for a commutative op, or materialized by a broadcasting `copy` (unrolled over static
  leading dims when the pattern needs it);
- reductions run over the last axis (`rsum`/`rmax`); another axis is first moved last with
  `vpu_transpose`; `amin` is `-max(-x)`; `mean` sums in f32 and divides once in f32, then
  rounds (the rules of `legato.interp.semantics`);
- reshape is a `core.view`, a unit-stride slice a `core.subview` (copied when a unit needs it
  contiguous), cat DMAs each input into a subview of the result, broadcast_to materializes;
- matmul tiles to the MPU's weight tile (`mpu_tile_k` x `mpu_tile_n`): K tiles accumulate into
  an f32 buffer (`accumulate = true`), converted once to the result dtype. Weight tiles must be
  contiguous in mpu_buffer: a weight wider than a tile is transposed (VPU) so that each column
  block becomes a contiguous row block, and transposed back per block into mpu_buffer; lhs
  column blocks (K > tile) are produced the same way. Column blocks of the result are gathered
  through a transposed f32 buffer. f32 operands are split into bf16 hi/lo on the VPU (cast, sub,
  cast) and multiplied in three passes into the same accumulator
  (`legato.numerics.matmul_f32_split`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Operation, SSAValue

from legato import opset
from legato.dialects import core
from legato.dialects import legato as lg
from legato.transforms.diagnostics import error_at
from legato.transforms.lowering_state import Buffer
from legato.transforms.vpu_shapes import broadcast_form
from legato.types import Dim

if TYPE_CHECKING:
    from legato.transforms.lowering_state import Buffer as _Buffer
    from legato.transforms.lowering_state import LoweringState as _KernelLowering
    from legato.transforms.lowering_state import ProgramState as _Program

LOCAL = ("sram", "private_dram", "mpu_buffer")
VPU_DTYPES = opset.FLOATS

BINARY_KINDS: dict[type, str] = {lg.ELEMENTWISE_OPS[o.name]: o.kind for o in opset.legato_binary()}
"""legato binary op class -> its `core.vpu_binary` kind (the op table's rows)."""
COMMUTATIVE = tuple(o.kind for o in opset.legato_binary() if o.commutative)
UNARY_KINDS: dict[type, str] = {lg.ELEMENTWISE_OPS[o.name]: o.kind for o in opset.legato_unary()}
"""legato unary op class -> its `core.vpu_unary` kind."""
REDUCE_KINDS: dict[type, str] = {
    lg.SumOp: "sum",
    lg.MeanOp: "mean",
    lg.AmaxOp: "max",
    lg.AminOp: "min",
}

DimB = tuple  # (int | SSAValue value, int bound)


# -- small builders ----------------------------------------------------------------------------


def dimsb(buf: _Buffer) -> list[DimB]:
    return list(zip(buf.dims, buf.bounds))


def buf_type(dims: list[DimB], elem, space: str) -> core.BufType:
    return core.BufType(
        [Dim(v, v) if isinstance(v, int) else Dim(None, b) for v, b in dims], elem, space
    )


def alloc(L: _KernelLowering, prog: _Program, dims: list[DimB], elem, space: str, at) -> _Buffer:
    return L.alloc(prog, buf_type(dims, elem, space), [v for v, _ in dims], at)


def index_const(prog: _Program, v: int, at: Operation) -> SSAValue:
    return prog.emit(arith.ConstantOp.from_int_and_width(v, IndexType()), at).results[0]


def prod(prog: _Program, dims: list[DimB], at: Operation) -> DimB:
    """The product of dims: an int when all are static, else an index value (and its bound)."""
    static = math.prod(v for v, _ in dims if isinstance(v, int))
    dyn = [v for v, _ in dims if not isinstance(v, int)]
    bound = math.prod(b for _, b in dims)
    if not dyn:
        return (static, static)
    acc = dyn[0]
    for d in dyn[1:]:
        acc = prog.emit(arith.MuliOp(acc, d), at).results[0]
    if static != 1:
        acc = prog.emit(arith.MuliOp(acc, index_const(prog, static, at)), at).results[0]
    return (acc, bound)


def view(prog: _Program, buf: _Buffer, dims: list[DimB], at: Operation) -> _Buffer:
    """`buf` (contiguous) seen with other dims."""
    t = buf_type(dims, buf.type.element_type, buf.type.space)
    if t == buf.type and [v for v, _ in dims] == list(buf.dims):
        return buf
    assert buf.contiguous, "core.view of a strided buffer"
    op = prog.emit(core.ViewOp(buf.value, t, [v for v, _ in dims if not isinstance(v, int)]), at)
    return Buffer(op.results[0], [v for v, _ in dims])


def subview(
    prog: _Program, buf: _Buffer, offsets: list, sizes: list[DimB], at: Operation
) -> _Buffer:
    t = buf_type(sizes, buf.type.element_type, buf.type.space)
    op = prog.emit(core.SubviewOp(buf.value, offsets, [v for v, _ in sizes], t), at)
    partial = [i for i, ((s, _), p) in enumerate(zip(sizes, buf.dims)) if s is not p and s != p]
    contiguous = buf.contiguous and (
        not partial or all(sizes[k][0] == 1 for k in range(partial[-1]))
    )
    return Buffer(op.results[0], [v for v, _ in sizes], contiguous)


def copy_dma(L: _KernelLowering, prog: _Program, src: _Buffer, dst: _Buffer, at) -> None:
    """A DMA of `src` into `dst`. Into this core's memory it is not waited for: the units that
    read `dst` later (DMA, MPU, VPU, `ld`) wait for it in the scoreboard, so the copy overlaps
    whatever runs before its first use (a prefetch)."""
    prog.emit(core.DmaOp(src.value, dst.value), at)
    if dst.type.space not in LOCAL:
        prog.emit(core.DmaWaitOp(), at)
    prog.issued_dma = True


def contiguous(L: _KernelLowering, prog: _Program, buf: _Buffer, at: Operation) -> _Buffer:
    """`buf`, or a contiguous copy of it (a strided view: a slice)."""
    if buf.contiguous:
        return buf
    space = buf.type.space if buf.type.space in LOCAL else "sram"
    out = alloc(L, prog, dimsb(buf), buf.type.element_type, space, at)
    copy_dma(L, prog, buf, out, at)
    return out


def local(L: _KernelLowering, prog: _Program, value: SSAValue, op: Operation, role: str) -> _Buffer:
    buf = L.lookup(prog, value, op)
    space = buf.type.space
    if space not in LOCAL:
        raise error_at(
            op,
            f"{op.name}: the {role} is in {space}; tensor ops compute in a core's memory "
            "(sram, private_dram, mpu_buffer): receive it or memcpy it into sram first",
        )
    return contiguous(L, prog, buf, op)


INT_KINDS = tuple(o.name for o in opset.OPS if o.name and not o.float_only)
"""The legato ops the VPU computes on i32 too."""


def check_vpu_dtype(op: Operation, t: lg.ShapedSpaceType, int_ok: bool = False) -> None:
    if int_ok and t.dtype.name in opset.INTS:
        return
    if t.dtype.name not in VPU_DTYPES:
        raise error_at(
            op,
            f"{op.name} on {t.dtype.name} is not supported: the VPU computes on bf16, f32 and "
            f"f16 (i32: {', '.join(INT_KINDS)}); cast with legato.tensor.to(x, ...) first",
        )


def result_space(op: Operation, t: lg.ShapedSpaceType) -> str:
    if t.space not in LOCAL:
        raise error_at(
            op,
            f"{op.name}: the result would be in {t.space}; tensor ops compute in a core's "
            "memory (sram): compute in sram and memcpy the result out",
        )
    return t.space


def _rtype(op: Operation) -> lg.TensorType:
    t = op.results[0].type
    assert isinstance(t, lg.TensorType)
    return t


# -- broadcasting ------------------------------------------------------------------------------


def broadcast_dims(operands: list[tuple[_Buffer, core.BufType]], rt: lg.TensorType) -> list[DimB]:
    """Runtime dims of a broadcast result: static from the type, dynamic from an operand."""
    out: list[DimB] = []
    for i, d in enumerate(rt.dims):
        if not d.is_dynamic:
            out.append((d.size, d.size))
            continue
        for buf, t in operands:
            j = i - (rt.rank - t.rank)
            if j >= 0 and t.dims[j].is_dynamic:
                out.append((buf.dims[j], d.bound))
                break
        else:  # pragma: no cover - the verifier guarantees one
            raise AssertionError("dynamic broadcast dim without a dynamic operand dim")
    return out


def bcast_copy(L: _KernelLowering, prog: _Program, src: _Buffer, dst: _Buffer, at) -> None:
    """Write `src` broadcast (torch rules) into `dst`."""
    form, _ = broadcast_form(src.type.dims, dst.type.dims)
    if form is not None:
        prog.emit(core.VpuUnaryOp("copy", src.value, dst.value), at)
        return
    if not (src.type.is_static and dst.type.is_static):
        raise error_at(
            at,
            f"broadcasting {src.type.dims_str()} to {dst.type.dims_str()} over dynamic dims is "
            "not supported; broadcast along the leading or trailing dims only, or use static "
            "shapes",
        )
    r = dst.type.rank
    pad = [(1, 1)] * (r - src.type.rank) + dimsb(src)
    src_p = view(prog, src, pad, at)
    dsz = dimsb(dst)
    i0 = next(i for i, (v, _) in enumerate(dsz) if v != 1)
    for k in range(dsz[i0][0]):
        so = [0] * r
        so[i0] = k if pad[i0][0] != 1 else 0
        ssz = list(pad)
        ssz[i0] = (1, 1)
        do = [0] * r
        do[i0] = k
        dsub = list(dsz)
        dsub[i0] = (1, 1)
        bcast_copy(L, prog, subview(prog, src_p, so, ssz, at), subview(prog, dst, do, dsub, at), at)


def materialize(L: _KernelLowering, prog: _Program, src: _Buffer, like: _Buffer, at) -> _Buffer:
    tmp = alloc(L, prog, dimsb(like), src.type.element_type, src.type.space, at)
    bcast_copy(L, prog, src, tmp, at)
    return tmp


# -- elementwise -------------------------------------------------------------------------------


def binary(L: _KernelLowering, prog: _Program, op: lg.ElementwiseBinaryOp) -> None:
    kind = BINARY_KINDS[type(op)]
    rt = _rtype(op)
    check_vpu_dtype(op, rt, int_ok=not op.ROW.float_only)
    a = local(L, prog, op.lhs, op, "left operand")
    b = local(L, prog, op.rhs, op, "right operand")
    space = result_space(op, rt)
    out = alloc(L, prog, broadcast_dims([(a, a.type), (b, b.type)], rt), rt.element_type, space, op)
    fa, _ = broadcast_form(a.type.dims, out.type.dims)
    fb, _ = broadcast_form(b.type.dims, out.type.dims)
    if fa != "full" and fb == "full" and kind in COMMUTATIVE:
        a, b, fa, fb = b, a, fb, fa
    if fa != "full":
        a = materialize(L, prog, a, out, op)
    if fb is None:
        b = materialize(L, prog, b, out, op)
    prog.emit(core.VpuBinaryOp(kind, a.value, b.value, out.value), op)
    prog.values[op.result] = out


def unary(L: _KernelLowering, prog: _Program, op: lg.ElementwiseUnaryOp) -> None:
    rt = _rtype(op)
    check_vpu_dtype(op, rt, int_ok=not op.ROW.float_only)
    x = local(L, prog, op.input, op, "operand")
    out = alloc(L, prog, dimsb(x), rt.element_type, result_space(op, rt), op)
    prog.emit(core.VpuUnaryOp(UNARY_KINDS[type(op)], x.value, out.value), op)
    prog.values[op.result] = out


def clamp(L: _KernelLowering, prog: _Program, op: lg.ClampOp) -> None:
    """`min(max(x, lo), hi)`: each bound a one-element fill broadcast by `bc.scalar`."""
    rt = _rtype(op)
    check_vpu_dtype(op, rt, int_ok=True)
    x = local(L, prog, op.input, op, "operand")
    space = result_space(op, rt)
    cur = x
    for kind, bound in (("max", op.lo), ("min", op.hi)):
        if bound is None:
            continue
        c = alloc(L, prog, [], rt.element_type, space, op)
        prog.emit(core.VpuFillOp(bound, c.value), op)
        out = alloc(L, prog, dimsb(x), rt.element_type, space, op)
        prog.emit(core.VpuBinaryOp(kind, cur.value, c.value, out.value), op)
        cur = out
    prog.values[op.result] = cur


def cast(L: _KernelLowering, prog: _Program, op: lg.CastOp) -> None:
    rt = _rtype(op)
    it = op.input.type
    assert isinstance(it, lg.TensorType)
    check_vpu_dtype(op, it)
    check_vpu_dtype(op, rt)
    x = local(L, prog, op.input, op, "operand")
    out = alloc(L, prog, dimsb(x), rt.element_type, result_space(op, rt), op)
    kind = "copy" if it.element_type == rt.element_type else "cast"
    prog.emit(core.VpuUnaryOp(kind, x.value, out.value), op)
    prog.values[op.result] = out


def constant(L: _KernelLowering, prog: _Program, op: lg.ConstantOp) -> None:
    rt = _rtype(op)
    check_vpu_dtype(op, rt, int_ok=True)
    dims = [(d.size, d.size) for d in rt.dims]
    out = alloc(L, prog, dims, rt.element_type, result_space(op, rt), op)
    prog.emit(core.VpuFillOp(op.value, out.value), op)
    prog.values[op.result] = out


def broadcast_to(L: _KernelLowering, prog: _Program, op: lg.BroadcastToOp) -> None:
    rt = _rtype(op)
    check_vpu_dtype(op, rt)
    x = local(L, prog, op.input, op, "operand")
    out = alloc(
        L, prog, broadcast_dims([(x, x.type)], rt), rt.element_type, result_space(op, rt), op
    )
    bcast_copy(L, prog, x, out, op)
    prog.values[op.result] = out


# -- selection and gathers ---------------------------------------------------------------------


def where(L: _KernelLowering, prog: _Program, op: lg.WhereOp) -> None:
    """`out = b` (broadcast copy), then `vpu_select` merges `a` where `cond` is nonzero; `a` and
    a float `cond` are materialized to the output's shape when they broadcast."""
    rt = _rtype(op)
    check_vpu_dtype(op, rt)
    ct = op.cond.type
    assert isinstance(ct, lg.TensorType)
    if ct.dtype.name != "i1":
        check_vpu_dtype(op, ct)
    c = local(L, prog, op.cond, op, "condition")
    a = local(L, prog, op.lhs, op, "first value")
    b = local(L, prog, op.rhs, op, "second value")
    space = result_space(op, rt)
    dims = broadcast_dims([(c, c.type), (a, a.type), (b, b.type)], rt)
    out = alloc(L, prog, dims, rt.element_type, space, op)
    bcast_copy(L, prog, b, out, op)
    if broadcast_form(a.type.dims, out.type.dims)[0] != "full":
        a = materialize(L, prog, a, out, op)
    if broadcast_form(c.type.dims, out.type.dims)[0] != "full":
        if ct.dtype.name == "i1":
            raise error_at(
                op,
                f"legato.where: the i1 condition {c.type.dims_str()} broadcasts to "
                f"{out.type.dims_str()}; the VPU moves only float elements, so an i1 condition "
                "must have the result's shape (or use a float mask)",
            )
        c = materialize(L, prog, c, out, op)
    d = dimsb(out)
    prog.emit(
        core.VpuSelectOp(view(prog, c, d, op).value, view(prog, a, d, op).value, out.value), op
    )
    prog.values[op.result] = out


def gather(L: _KernelLowering, prog: _Program, op: lg.GatherOp) -> None:
    """A runtime loop over the indices: each is read into a register (`core.load_index`) and
    its table row is DMA'd into the result; one wait after the loop."""
    from xdsl.dialects import scf
    from xdsl.ir import Block, Region

    rt = _rtype(op)
    if prog.ctx.is_top:
        raise error_at(op, "legato.gather runs in a core context, not on top")
    table = L.lookup(prog, op.table, op)
    L.note_access(op.table, "read")
    idx = local(L, prog, op.indices, op, "index tensor")
    row = dimsb(table)[1:]
    n = prod(prog, dimsb(idx), op)
    out = alloc(L, prog, dimsb(idx) + row, rt.element_type, rt.space, op)
    out2 = view(prog, out, [n] + row, op)
    idx1 = view(prog, idx, [n], op)
    zeros = [0] * len(row)
    block = Block(arg_types=[IndexType()])
    i = block.args[0]
    i.name_hint = "row"
    saved, prog.body = prog.body, []
    try:
        rid = prog.emit(core.LoadIndexOp(idx1.value, i), op).results[0]
        src = subview(prog, table, [rid, *zeros], [(1, 1), *row], op)
        dst = subview(prog, out2, [i, *zeros], [(1, 1), *row], op)
        prog.emit(core.DmaOp(src.value, dst.value), op)
        body = prog.body
    finally:
        prog.body = saved
    for o in body:
        block.add_op(o)
    y = scf.YieldOp()
    y.location = op.location
    block.add_op(y)
    lb, step = index_const(prog, 0, op), index_const(prog, 1, op)
    ub = n[0] if not isinstance(n[0], int) else index_const(prog, n[0], op)
    prog.emit(scf.ForOp(lb, ub, step, [], Region(block)), op)
    prog.emit(core.DmaWaitOp(), op)
    prog.issued_dma = True
    prog.values[op.result] = out


# -- transposes and reductions -----------------------------------------------------------------


def transpose3(
    L: _KernelLowering,
    prog: _Program,
    x: _Buffer,
    lead: list[DimB],
    a: list[DimB],
    b: list[DimB],
    at: Operation,
    space: str | None = None,
) -> _Buffer:
    """`x` of dims lead + a + b (contiguous) -> a new buffer of dims lead + b + a."""
    n_lead, _ = prod(prog, lead, at)
    if not isinstance(n_lead, int):
        raise error_at(
            at,
            f"{at.name}: moving dims past a dynamic leading dim is not supported; transpose "
            "or reduce over trailing dims, or make the leading dims static",
        )
    ap = prod(prog, a, at)
    bp = prod(prog, b, at)
    out = alloc(L, prog, lead + b + a, x.type.element_type, space or x.type.space, at)
    if n_lead == 1:
        prog.emit(
            core.VpuTransposeOp(
                view(prog, x, [ap, bp], at).value, view(prog, out, [bp, ap], at).value
            ),
            at,
        )
        return out
    x3 = view(prog, x, [(n_lead, n_lead), ap, bp], at)
    o3 = view(prog, out, [(n_lead, n_lead), bp, ap], at)
    for i in range(n_lead):
        src = view(prog, subview(prog, x3, [i, 0, 0], [(1, 1), ap, bp], at), [ap, bp], at)
        dst = view(prog, subview(prog, o3, [i, 0, 0], [(1, 1), bp, ap], at), [bp, ap], at)
        prog.emit(core.VpuTransposeOp(src.value, dst.value), at)
    return out


def transpose(L: _KernelLowering, prog: _Program, op: lg.TransposeOp) -> None:
    perm = list(op.perm.get_values())
    r = len(perm)
    rt = _rtype(op)
    x = local(L, prog, op.input, op, "operand")
    k = next((i for i, p in enumerate(perm) if p != i), None)
    if k is None:
        prog.values[op.result] = x
        return
    m = perm[k]
    if perm[k:] != list(range(m, r)) + list(range(k, m)):
        raise error_at(
            op,
            f"transpose with permutation {perm} is not supported: the VPU swaps two trailing "
            "groups of dims (e.g. [1, 0] or [0, 2, 1]); compose such transposes",
        )
    check_vpu_dtype(op, rt)
    result_space(op, rt)
    d = dimsb(x)
    prog.values[op.result] = transpose3(L, prog, x, d[:k], d[k:m], d[m:], op)


def reduce(L: _KernelLowering, prog: _Program, op: lg.ReductionOp) -> None:
    kind = REDUCE_KINDS[type(op)]
    rt = _rtype(op)
    it = op.input.type
    assert isinstance(it, lg.TensorType)
    check_vpu_dtype(op, it)
    space = result_space(op, rt)
    x0 = local(L, prog, op.input, op, "operand")
    d = op.dim.data
    keep = bool(op.keepdim.value.data)
    orig = dimsb(x0)
    x = x0
    if d != it.rank - 1:
        x = transpose3(L, prog, x0, orig[:d], [orig[d]], orig[d + 1 :], op)
    xd = dimsb(x)
    # the reduced dims; kept as a trailing 1 when that is the result's layout (no view needed)
    red = xd[:-1] + ([(1, 1)] if keep and d == it.rank - 1 else [])
    elem = rt.element_type
    o = alloc(L, prog, red, elem, space, op)
    if kind in ("sum", "max"):
        prog.emit(core.VpuReduceOp(kind, x.value, o.value), op)
    elif kind == "min":
        nx = alloc(L, prog, xd, elem, x.type.space, op)
        prog.emit(core.VpuUnaryOp("neg", x.value, nx.value), op)
        m = alloc(L, prog, red, elem, space, op)
        prog.emit(core.VpuReduceOp("max", nx.value, m.value), op)
        prog.emit(core.VpuUnaryOp("neg", m.value, o.value), op)
    else:  # mean: f32 sum, one f32 division, one rounding
        n = xd[-1][0]
        if not isinstance(n, int):
            raise error_at(
                op,
                "mean over a dynamic dim is not supported (its size is not known when the "
                "divisor is built); use sum and divide by the size",
            )
        f32 = "f32"
        x32 = x
        if it.dtype.name != "f32":
            x32 = alloc(L, prog, xd, f32, x.type.space, op)
            prog.emit(core.VpuUnaryOp("cast", x.value, x32.value), op)
        s = alloc(L, prog, red, f32, space, op)
        prog.emit(core.VpuReduceOp("sum", x32.value, s.value), op)
        c = alloc(L, prog, [], f32, space, op)
        prog.emit(core.VpuFillOp(float(n), c.value), op)
        if it.dtype.name == "f32":
            prog.emit(core.VpuBinaryOp("div", s.value, c.value, o.value), op)
        else:
            q = alloc(L, prog, red, f32, space, op)
            prog.emit(core.VpuBinaryOp("div", s.value, c.value, q.value), op)
            prog.emit(core.VpuUnaryOp("cast", q.value, o.value), op)
    rdims = orig[:d] + ([(1, 1)] if keep else []) + orig[d + 1 :]
    prog.values[op.result] = view(prog, o, rdims, op)


# -- shape ops ---------------------------------------------------------------------------------


def reshape(L: _KernelLowering, prog: _Program, op: lg.ReshapeOp) -> None:
    rt = _rtype(op)
    x = L.lookup(prog, op.input, op)
    if not x.contiguous:
        x = local(L, prog, op.input, op, "operand")
    dyn = [i for i, d in enumerate(rt.dims) if d.is_dynamic]
    if len(dyn) > 1:
        raise error_at(
            op,
            f"reshape to {rt.dims_str()} has {len(dyn)} dynamic dims; their runtime sizes "
            "cannot be inferred (at most one dynamic dim)",
        )
    dims: list[DimB] = [(d.size, d.size) for d in rt.dims]
    if dyn:
        static = math.prod(d.size for d in rt.dims if not d.is_dynamic)  # type: ignore[misc]
        xd = dimsb(x)
        # reuse the input's dynamic dim when the static sizes around it match
        total, _ = prod(prog, xd, op)
        assert not isinstance(total, int)
        val = total
        if static != 1:
            val = prog.emit(arith.DivUIOp(total, index_const(prog, static, op)), op).results[0]
        dims[dyn[0]] = (val, rt.dims[dyn[0]].bound)
    prog.values[op.result] = view(prog, x, dims, op)


def slice_(L: _KernelLowering, prog: _Program, op: lg.SliceOp) -> None:
    x = L.lookup(prog, op.input, op)
    offsets = list(op.static_offsets.get_values())
    sizes = list(op.static_sizes.get_values())
    strides = list(op.static_strides.get_values())
    if any(st != 1 and s > 1 for st, s in zip(strides, sizes)):
        raise error_at(
            op,
            f"slices with a step (strides {strides}) are not supported; slice with step 1",
        )
    sz: list[DimB] = []
    for i, s in enumerate(sizes):
        if s == -1:
            sz.append((x.dims[i], x.bounds[i]))
        else:
            sz.append((s, s))
    prog.values[op.result] = subview(prog, x, offsets, sz, op)


def cat(L: _KernelLowering, prog: _Program, op: lg.CatOp) -> None:
    rt = _rtype(op)
    space = result_space(op, rt)
    d = op.dim.data
    bufs = [L.lookup(prog, v, op) for v in op.inputs]
    for b in bufs:
        if not isinstance(b.dims[d], int):
            raise error_at(
                op,
                f"cat along dim {d}, which is dynamic in an input, is not supported; "
                "concatenate along a static dim",
            )
    first = dimsb(bufs[0])
    total = sum(b.dims[d] for b in bufs)
    dims = list(first)
    dims[d] = (total, total)
    out = alloc(L, prog, dims, rt.element_type, space, op)
    off = 0
    for b in bufs:
        offsets = [0] * len(dims)
        offsets[d] = off
        dst = subview(prog, out, offsets, dimsb(b), op)
        prog.emit(core.DmaOp(b.value, dst.value), op)
        off += b.dims[d]
    prog.emit(core.DmaWaitOp(), op)
    prog.issued_dma = True
    prog.values[op.result] = out


# -- matmul ------------------------------------------------------------------------------------


def _stage(L: _KernelLowering, prog: _Program, w: _Buffer, at) -> _Buffer:
    """A contiguous copy of weight tile `w` in mpu_buffer (where mpu.ldw reads)."""
    st = alloc(L, prog, dimsb(w), w.type.element_type, "mpu_buffer", at)
    copy_dma(L, prog, w, st, at)
    return st


def _split_bf16(L: _KernelLowering, prog: _Program, x: _Buffer, space: str, at) -> list[_Buffer]:
    """f32 `x` as bf16 `[hi, lo]` (`legato.numerics.split_bf16`): hi = cvt(x),
    lo = cvt(x - cvt(hi)), the subtraction in f32 (exact)."""
    dims = dimsb(x)
    hi = alloc(L, prog, dims, "bf16", space, at)
    prog.emit(core.VpuUnaryOp("cast", x.value, hi.value), at)
    t = alloc(L, prog, dims, "f32", "sram", at)
    prog.emit(core.VpuUnaryOp("cast", hi.value, t.value), at)
    d = alloc(L, prog, dims, "f32", "sram", at)
    prog.emit(core.VpuBinaryOp("sub", x.value, t.value, d.value), at)
    lo = alloc(L, prog, dims, "bf16", space, at)
    prog.emit(core.VpuUnaryOp("cast", d.value, lo.value), at)
    return [hi, lo]


def matmul(L: _KernelLowering, prog: _Program, op: lg.MatmulOp) -> None:
    """bf16 operands: one MPU pass per tile. f32 operands (`legato.numerics.matmul_f32_split`):
    each is split into bf16 hi + lo on the VPU, then the passes a_hi@w_hi, a_hi@w_lo, a_lo@w_hi
    (in that order, each over every K tile in order) accumulate into one f32 buffer."""
    lt, wt_, res_t = op.lhs.type, op.rhs.type, _rtype(op)
    assert isinstance(lt, lg.TensorType) and isinstance(wt_, lg.TensorType)
    split = lt.dtype.name == "f32" and wt_.dtype.name == "f32"
    if not split and (lt.dtype.name != "bf16" or wt_.dtype.name != "bf16"):
        raise error_at(
            op,
            f"the MPU multiplies bf16 operands (f32 as three bf16 passes); got {lt.dtype.name} "
            f"@ {wt_.dtype.name} (cast with legato.tensor.to(x, bfloat16) or float32)",
        )
    if lt.space not in LOCAL:
        raise error_at(op, f"matmul's left operand must be in core memory (sram), not {lt.space}")
    a = local(L, prog, op.lhs, op, "left operand")
    w = L.lookup(prog, op.rhs, op)
    if w.type.space not in LOCAL:
        raise error_at(
            op,
            f"matmul's right operand must be an MPU weight (mpu_weight or mpu_buffer), "
            f"not {w.type.space}; receive it with memory 'mpu_buffer'",
        )
    if not w.type.is_static:
        raise error_at(op, "an MPU weight must have static dims")
    w = contiguous(L, prog, w, op)
    space = result_space(op, res_t)
    k, n = w.type.get_shape()
    ad = dimsb(a)
    m = prod(prog, ad[:-1], op)
    a2 = view(prog, a, [m, ad[-1]], op)
    kt, nt = L.model.mpu_tile_k, L.model.mpu_tile_n
    small = k <= kt and n <= nt
    out = alloc(L, prog, ad[:-1] + [(n, n)], res_t.element_type, space, op)
    out2 = view(prog, out, [m, (n, n)], op)
    prog.values[op.result] = out
    if split:
        a_parts = _split_bf16(L, prog, a2, "sram", op)
        w_parts = _split_bf16(L, prog, w, "mpu_buffer" if small else "sram", op)
        passes = [(0, 0), (0, 1), (1, 0)]  # (a part, w part): hi@hi, hi@lo, lo@hi
    else:
        a_parts, w_parts, passes = [a2], [w], [(0, 0)]
    if small:
        if split:
            # the result is f32: the accumulator itself
            for p, (ia, iw) in enumerate(passes):
                prog.emit(core.MpuLoadWeightOp(w_parts[iw].value), op)
                prog.emit(core.MpuMatmulOp(a_parts[ia].value, out2.value, p > 0), op)
            prog.loaded_weight = None
            return
        if prog.loaded_weight is not op.rhs:
            tile = w if w.type.space == "mpu_buffer" else _stage(L, prog, w, op)
            prog.emit(core.MpuLoadWeightOp(tile.value), op)
            prog.loaded_weight = op.rhs
        prog.emit(core.MpuMatmulOp(a2.value, out2.value, False), op)
        return
    nk, nn = -(-k // kt), -(-n // nt)
    # lhs column blocks [M, kw], contiguous
    a_tiles: list[list[_Buffer]] = []
    for ap in a_parts:
        if nk > 1:
            a_t = transpose3(L, prog, ap, [], [m], [(k, k)], op)  # [K, M]
            tiles = []
            for i in range(nk):
                kw = min(kt, k - i * kt)
                rows = subview(prog, a_t, [i * kt, 0], [(kw, kw), m], op)
                tiles.append(transpose3(L, prog, rows, [], [(kw, kw)], [m], op))
            a_tiles.append(tiles)
        else:
            a_tiles.append([ap])
    if nn > 1:
        w_ts = [
            transpose3(L, prog, wp, [], [(k, k)], [(n, n)], op, space="sram")  # [N, K]
            for wp in w_parts
        ]
        r_t = alloc(L, prog, [(n, n), m], "f32", "sram", op)  # the result, transposed
    acc = None
    for j in range(nn):
        nw = min(nt, n - j * nt)
        if nn > 1:
            wjs = []
            for w_t in w_ts:
                rows = subview(prog, w_t, [j * nt, 0], [(nw, nw), (k, k)], op)
                # f32: two weights per block, kept in sram; each tile is staged when used
                wspace = "sram" if split else "mpu_buffer"
                wjs.append(transpose3(L, prog, rows, [], [(nw, nw)], [(k, k)], op, space=wspace))
        else:
            wjs = w_parts
        acc = alloc(L, prog, [m, (nw, nw)], "f32", "sram", op)
        for p, (ia, iw) in enumerate(passes):
            wj = wjs[iw]
            for i in range(nk):
                kw = min(kt, k - i * kt)
                tile = subview(prog, wj, [i * kt, 0], [(kw, kw), (nw, nw)], op) if nk > 1 else wj
                if tile.type.space != "mpu_buffer":
                    tile = _stage(L, prog, tile, op)
                prog.emit(core.MpuLoadWeightOp(tile.value), op)
                prog.emit(core.MpuMatmulOp(a_tiles[ia][i].value, acc.value, p > 0 or i > 0), op)
        if nn > 1:
            dst = subview(prog, r_t, [j * nt, 0], [(nw, nw), m], op)
            prog.emit(core.VpuTransposeOp(acc.value, dst.value), op)
    assert acc is not None
    r32 = transpose3(L, prog, r_t, [], [(n, n)], [m], op) if nn > 1 else acc
    same = res_t.dtype.name == "f32"  # an f32 result is the accumulator itself
    prog.emit(core.VpuUnaryOp("copy" if same else "cast", r32.value, out2.value), op)
    prog.loaded_weight = None
