"""Rewrite patterns lowering legato's VPU tensor ops to core VPU/DMA ops (part of
`convert-legato-to-core`; conventions of `lowering_state`), and the buffer helpers every family
uses.

Each op has a function `(L, prog, op) -> Buffer` that emits the op's core ops into its program
and returns the buffer of its result; the op's pattern (`TENSOR_PATTERNS`) binds it. The core ops
emitted are the shapes the units accept, so instruction selection maps each to one instruction
(or a short unrolled sequence):

- elementwise ops compute on contiguous buffers; an operand that broadcasts is either one of the
  VPU's broadcast forms (`bc.scalar`, `bc.row(P)`, `bc.col(P)`, see `vpu_shapes`), swapped to
  the right for a commutative op, or materialized by a broadcasting `copy` (unrolled over static
  leading dims when the pattern needs it);
- reductions run over the last axis (`rsum`/`rmax`); another axis is first moved last with
  `vpu_transpose`; `amin` is `-max(-x)`; `mean` sums in f32 and divides once in f32, then
  rounds (the rules of `legato.interp.semantics`);
- reshape is a `core.view`, a unit-stride slice a `core.subview` (copied when a unit needs it
  contiguous), cat DMAs each input into a subview of the result, broadcast_to materializes;
- `where` copies the second value into the result, then selects the first where the condition
  holds; `gather` is a runtime loop of index reads and row DMAs.

The MPU's matmul is `lower_matmul`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from legato import opset
from legato.dialects import core
from legato.dialects import legato as lg
from legato.transforms.diagnostics import error_at
from legato.transforms.lowering_state import Buffer, LoweringPattern, LoweringState, ProgramState
from legato.transforms.vpu_shapes import broadcast_form
from legato.types import Dim

LOCAL = ("sram", "private_dram", "mpu_buffer")
VPU_DTYPES = opset.FLOATS

TRANSPOSE_DYNAMIC = "moving dims past a dynamic leading dim is not supported"
"""The refusal of a transpose whose kept leading dims have a runtime product
(legato.torch.capabilities.transpose_steps answers resolvers with it)."""

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


def dimsb(buf: Buffer) -> list[DimB]:
    return list(zip(buf.dims, buf.bounds))


def buf_type(dims: list[DimB], elem, space: str) -> core.BufType:
    return core.BufType(
        [Dim(v, v) if isinstance(v, int) else Dim(None, b) for v, b in dims], elem, space
    )


def alloc(L: LoweringState, prog: ProgramState, dims: list[DimB], elem, space: str, at) -> Buffer:
    return L.alloc(prog, buf_type(dims, elem, space), [v for v, _ in dims], at)


def index_const(prog: ProgramState, v: int, at: Operation) -> SSAValue:
    return prog.emit(arith.ConstantOp.from_int_and_width(v, IndexType()), at).results[0]


def prod(prog: ProgramState, dims: list[DimB], at: Operation) -> DimB:
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


def view(prog: ProgramState, buf: Buffer, dims: list[DimB], at: Operation) -> Buffer:
    """`buf` (contiguous) seen with other dims."""
    t = buf_type(dims, buf.type.element_type, buf.type.space)
    if t == buf.type and [v for v, _ in dims] == list(buf.dims):
        return buf
    assert buf.contiguous, "core.view of a strided buffer"
    op = prog.emit(core.ViewOp(buf.value, t, [v for v, _ in dims if not isinstance(v, int)]), at)
    return Buffer(op.results[0], [v for v, _ in dims])


def subview(
    prog: ProgramState, buf: Buffer, offsets: list, sizes: list[DimB], at: Operation
) -> Buffer:
    t = buf_type(sizes, buf.type.element_type, buf.type.space)
    op = prog.emit(core.SubviewOp(buf.value, offsets, [v for v, _ in sizes], t), at)
    partial = [i for i, ((s, _), p) in enumerate(zip(sizes, buf.dims)) if s is not p and s != p]
    contiguous = buf.contiguous and (
        not partial or all(sizes[k][0] == 1 for k in range(partial[-1]))
    )
    return Buffer(op.results[0], [v for v, _ in sizes], contiguous)


def copy_dma(L: LoweringState, prog: ProgramState, src: Buffer, dst: Buffer, at) -> None:
    """A DMA of `src` into `dst`. Into this core's memory it is not waited for: the units that
    read `dst` later (DMA, MPU, VPU, `ld`) wait for it in the scoreboard, so the copy overlaps
    whatever runs before its first use (a prefetch)."""
    prog.emit(core.DmaOp(src.value, dst.value), at)
    if dst.type.space not in LOCAL:
        prog.emit(core.DmaWaitOp(), at)
    prog.issued_dma = True


def contiguous(L: LoweringState, prog: ProgramState, buf: Buffer, at: Operation) -> Buffer:
    """`buf`, or a contiguous copy of it (a strided view: a slice)."""
    if buf.contiguous:
        return buf
    space = buf.type.space if buf.type.space in LOCAL else "sram"
    out = alloc(L, prog, dimsb(buf), buf.type.element_type, space, at)
    copy_dma(L, prog, buf, out, at)
    return out


def local(
    L: LoweringState, prog: ProgramState, value: SSAValue, op: Operation, role: str
) -> Buffer:
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


def result_type(op: Operation) -> lg.TensorType:
    t = op.results[0].type
    assert isinstance(t, lg.TensorType)
    return t


# -- broadcasting ------------------------------------------------------------------------------


def broadcast_dims(operands: list[tuple[Buffer, core.BufType]], rt: lg.TensorType) -> list[DimB]:
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


def bcast_copy(L: LoweringState, prog: ProgramState, src: Buffer, dst: Buffer, at) -> None:
    """Write `src` broadcast (torch rules) into `dst`."""
    form, _ = broadcast_form(src.type.dims, dst.type.dims)
    if form is not None:
        prog.emit(core.VpuUnaryOp("copy", src.value, dst.value), at)
        return
    r = dst.type.rank
    if not (src.type.is_static and dst.type.is_static):
        pad = [(1, 1)] * (r - src.type.rank) + dimsb(src)
        bcast_dma(L, prog, view(prog, src, pad, at), dst, src.type.dims_str(), at)
        return
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


def bcast_dma(L: LoweringState, prog: ProgramState, src: Buffer, dst: Buffer, what: str, at):
    """Write `src` (of dst's rank) broadcast into `dst` when a dim is dynamic: over each static
    dim src broadcasts along (size 1 there, not in dst), one strided copy of src into every
    slice of dst at that dim (`[?T, 1, 16] -> [?T, 2, 16]`: two DMAs of T rows of 16, each
    one dma2d over the runtime rows). The VPU's broadcast forms need contiguous operands, a
    dynamic dim cannot be unrolled; a dynamic dim src broadcasts along is refused."""
    sd, dd = dimsb(src), dimsb(dst)
    i0 = next((i for i, ((s, _), (d, _)) in enumerate(zip(sd, dd)) if s == 1 and d != 1), None)
    if i0 is None:  # the same shape: one copy
        copy_dma(L, prog, src, dst, at)
        return
    if not isinstance(dd[i0][0], int):
        raise error_at(
            at,
            f"broadcasting {what} to {dst.type.dims_str()} along a dynamic dim (dim {i0}) that "
            "is not a leading or trailing broadcast the VPU has is not supported; use static "
            "shapes there",
        )
    for k in range(dd[i0][0]):
        off = [0] * len(dd)
        off[i0] = k
        sub = list(dd)
        sub[i0] = (1, 1)
        bcast_dma(L, prog, src, subview(prog, dst, off, sub, at), what, at)


def materialize(L: LoweringState, prog: ProgramState, src: Buffer, like: Buffer, at) -> Buffer:
    tmp = alloc(L, prog, dimsb(like), src.type.element_type, src.type.space, at)
    bcast_copy(L, prog, src, tmp, at)
    return tmp


# -- elementwise -------------------------------------------------------------------------------


def binary(L: LoweringState, prog: ProgramState, op: lg.ElementwiseBinaryOp) -> Buffer:
    kind = BINARY_KINDS[type(op)]
    rt = result_type(op)
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
    return out


def unary(L: LoweringState, prog: ProgramState, op: lg.ElementwiseUnaryOp) -> Buffer:
    rt = result_type(op)
    check_vpu_dtype(op, rt, int_ok=not op.ROW.float_only)
    x = local(L, prog, op.input, op, "operand")
    out = alloc(L, prog, dimsb(x), rt.element_type, result_space(op, rt), op)
    prog.emit(core.VpuUnaryOp(UNARY_KINDS[type(op)], x.value, out.value), op)
    return out


def clamp(L: LoweringState, prog: ProgramState, op: lg.ClampOp) -> Buffer:
    """`min(max(x, lo), hi)`: each bound a one-element fill broadcast by `bc.scalar`."""
    rt = result_type(op)
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
    return cur


def cast(L: LoweringState, prog: ProgramState, op: lg.CastOp) -> Buffer:
    rt = result_type(op)
    it = op.input.type
    assert isinstance(it, lg.TensorType)
    check_vpu_dtype(op, it)
    if rt.dtype.name not in opset.CAST_INT_RESULTS:  # a float to an int index: vpu.cvt
        check_vpu_dtype(op, rt)
    x = local(L, prog, op.input, op, "operand")
    out = alloc(L, prog, dimsb(x), rt.element_type, result_space(op, rt), op)
    kind = "copy" if it.element_type == rt.element_type else "cast"
    prog.emit(core.VpuUnaryOp(kind, x.value, out.value), op)
    return out


def constant(L: LoweringState, prog: ProgramState, op: lg.ConstantOp) -> Buffer:
    rt = result_type(op)
    check_vpu_dtype(op, rt, int_ok=True)
    dims = [(d.size, d.size) for d in rt.dims]
    out = alloc(L, prog, dims, rt.element_type, result_space(op, rt), op)
    prog.emit(core.VpuFillOp(op.value, out.value), op)
    return out


def broadcast_to(L: LoweringState, prog: ProgramState, op: lg.BroadcastToOp) -> Buffer:
    rt = result_type(op)
    check_vpu_dtype(op, rt)
    x = local(L, prog, op.input, op, "operand")
    out = alloc(
        L, prog, broadcast_dims([(x, x.type)], rt), rt.element_type, result_space(op, rt), op
    )
    bcast_copy(L, prog, x, out, op)
    return out


# -- selection and gathers ---------------------------------------------------------------------


def where(L: LoweringState, prog: ProgramState, op: lg.WhereOp) -> Buffer:
    """`out = b` (broadcast copy), then `vpu_select` merges `a` where `cond` is nonzero; `a` and
    a float `cond` are materialized to the output's shape when they broadcast."""
    rt = result_type(op)
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
    return out


def _row_dma_loop(prog: ProgramState, op, n, idx1: Buffer, row_dma) -> None:
    """A runtime loop over the `n` indices of `idx1`: each is read into a register
    (`core.load_index`) and `row_dma(rid, i)` emits the DMA of one row for it; one wait after
    the loop. gather and scatter differ only in that DMA."""
    block = Block(arg_types=[IndexType()])
    i = block.args[0]
    i.name_hint = "row"
    with prog.building(block):
        rid = prog.emit(core.LoadIndexOp(idx1.value, i), op).results[0]
        row_dma(rid, i)
    y = scf.YieldOp()
    y.location = op.location
    block.add_op(y)
    lb, step = index_const(prog, 0, op), index_const(prog, 1, op)
    ub = n[0] if not isinstance(n[0], int) else index_const(prog, n[0], op)
    prog.emit(scf.ForOp(lb, ub, step, [], Region(block)), op)
    prog.emit(core.DmaWaitOp(), op)
    prog.issued_dma = True


def _wrap_negative(prog: ProgramState, op, rid, rows: int):
    """`rid + rows` where `rid < 0`, else `rid`, as torch's `x[idx]` counts a negative index from
    the end: `rid + rows * min(max(-rid, 0), 1)` (the scalar unit has no select). An index
    outside [-rows, rows) stays outside [0, rows), so the row DMA's bounds check reports it
    (a `rem rows` would silently wrap `rows + k` to row k: torch raises an IndexError)."""
    zero, one = index_const(prog, 0, op), index_const(prog, 1, op)
    neg = prog.emit(arith.SubiOp(zero, rid), op).results[0]
    neg = prog.emit(arith.MaxSIOp(neg, zero), op).results[0]
    neg = prog.emit(arith.MinSIOp(neg, one), op).results[0]  # 1 where rid < 0, else 0
    shift = prog.emit(arith.MuliOp(neg, index_const(prog, rows, op)), op).results[0]
    return prog.emit(arith.AddiOp(rid, shift), op).results[0]


def _outside(prog: ProgramState, op, rid, size: int, zero, one):
    """1 where the index `rid` lies outside [0, size), else 0 (the scalar unit has no compare
    into a register): `min(max(-rid, 0), 1) + min(max(rid - (size - 1), 0), 1)`."""
    below = prog.emit(arith.SubiOp(zero, rid), op).results[0]
    above = prog.emit(arith.SubiOp(rid, index_const(prog, size - 1, op)), op).results[0]
    flags = []
    for v in (below, above):
        v = prog.emit(arith.MaxSIOp(v, zero), op).results[0]
        flags.append(prog.emit(arith.MinSIOp(v, one), op).results[0])
    return prog.emit(arith.AddiOp(*flags), op).results[0]


def _clamped(prog: ProgramState, op, rid, lo, hi):
    """`rid` clamped to [lo, hi] (index values just outside the valid indices): an index in
    range is unchanged and one outside stays outside, but small enough that the row's byte
    offset (`rid * row bytes`, 64-bit) cannot wrap around into the table (2^57 * 128 bytes is
    0 mod 2^64: row 0, silently, where torch raises)."""
    rid = prog.emit(arith.MaxSIOp(rid, lo), op).results[0]
    return prog.emit(arith.MinSIOp(rid, hi), op).results[0]


def _poisoned(prog: ProgramState, op, rids: list, sizes: list[int]) -> list:
    """The indices of one multi-index gather row (`table[i0, i1, ...]`), with the first set
    to `sizes[0]` (one row past the table's end, which the row DMA's bounds check reports) and
    the others to 0 when any later index lies outside its dim: the combined row `i0 * s0 + i1 *
    s1 + ...` of an `i1` past its dim would otherwise land silently in a later row. An
    outside `i0` needs no flag: with the later indices in range, its row is outside the table."""
    zero, one = index_const(prog, 0, op), index_const(prog, 1, op)
    bad = None
    for rid, size in zip(rids[1:], sizes[1:]):
        flag = _outside(prog, op, rid, size, zero, one)
        bad = flag if bad is None else prog.emit(arith.AddiOp(bad, flag), op).results[0]
    bad = prog.emit(arith.MinSIOp(bad, one), op).results[0]
    keep = prog.emit(arith.SubiOp(one, bad), op).results[0]
    # i0 + bad * (size0 - i0): the scalar unit has no select
    gap = prog.emit(arith.SubiOp(index_const(prog, sizes[0], op), rids[0]), op).results[0]
    gap = prog.emit(arith.MuliOp(bad, gap), op).results[0]
    first = prog.emit(arith.AddiOp(rids[0], gap), op).results[0]
    return [first, *(prog.emit(arith.MuliOp(r, keep), op).results[0] for r in rids[1:])]


def gather(L: LoweringState, prog: ProgramState, op: lg.GatherOp) -> Buffer:
    """A runtime loop over the indices (`_row_dma_loop`), each index's table row DMA'd into the
    result. With several index tensors (`table[i0, i1, ...]`) each iteration also loads the
    later indices, and the row's address combines them on the scalar unit (the subview's
    offset arithmetic; the VPU has no int64 arithmetic); an index outside its dim sends the
    DMA past the table's end (`_poisoned`). With `offset` c, the first index's row is
    index + c (a 64-bit add, wrapping as torch's int64 add). Every index is clamped to just
    outside its valid range first (`_clamped`), so that no huge index wraps the row's address
    back into the table."""

    rt = result_type(op)
    if prog.ctx.is_top:
        raise error_at(op, "legato.gather runs in a core context, not on top")
    table = L.lookup(prog, op.table, op)
    L.note_access(op.table, "read")
    idx = local(L, prog, op.indices, op, "index tensor")
    more = [local(L, prog, m, op, "index tensor") for m in op.more]
    k = 1 + len(more)
    row = dimsb(table)[k:]
    n = prod(prog, dimsb(idx), op)
    out = alloc(L, prog, dimsb(idx) + row, rt.element_type, rt.space, op)
    out2 = view(prog, out, [n] + [(1, 1)] * len(more) + row, op)  # the source's row box
    idx1 = view(prog, idx, [n], op)
    more1 = [view(prog, m, [n], op) for m in more]
    zeros = [0] * len(row)
    sizes = [d[0] for d in dimsb(table)[:k]]
    offset = op.offset.value.data if op.offset is not None else 0
    if (op.wrap is not None or more or offset) and not all(isinstance(d, int) for d in sizes):
        what = (
            "wrap"
            if op.wrap is not None
            else "with an offset"
            if offset
            else "with several index tensors"
        )
        raise error_at(op, f"legato.gather {what}: the table's indexed dims must be static")

    # loop invariants, set before the loop: the offset, and each index's clamp bounds
    off = index_const(prog, offset, op) if offset else None
    # (a dynamic dim, only without wrap and with one index: [-1, its runtime size])
    low = (lambda d: -d - 1) if op.wrap is not None else (lambda d: -1)
    clamps = [
        (index_const(prog, low(d), op), index_const(prog, d, op))
        if isinstance(d, int)
        else (index_const(prog, -1, op), d)
        for d in sizes
    ]

    def row_dma(rid, i):
        rids = [rid, *(prog.emit(core.LoadIndexOp(m.value, i), op).results[0] for m in more1)]
        if off is not None:
            rids[0] = prog.emit(arith.AddiOp(rids[0], off), op).results[0]
        rids = [_clamped(prog, op, r, lo, hi) for r, (lo, hi) in zip(rids, clamps)]
        if op.wrap is not None:  # i + d for a negative i, else i
            rids = [_wrap_negative(prog, op, r, d) for r, d in zip(rids, sizes)]
        if more:
            rids = _poisoned(prog, op, rids, sizes)
        src = subview(prog, table, [*rids, *zeros], [(1, 1)] * k + row, op)
        dst = subview(prog, out2, [i, *[0] * len(more), *zeros], [(1, 1)] * k + row, op)
        prog.emit(core.DmaOp(src.value, dst.value), op)

    _row_dma_loop(prog, op, n, idx1, row_dma)
    return out


def scatter(L: LoweringState, prog: ProgramState, op: lg.ScatterOp) -> None:
    """`gather` the other way (`_row_dma_loop`): each index's row DMA'd from `rows` into the
    table; one wait after the loop (the table may be read back by a later gather of this
    program)."""
    if prog.ctx.is_top:
        raise error_at(op, "legato.scatter runs in a core context, not on top")
    table = L.lookup(prog, op.table, op)
    L.note_access(op.table, "write")
    idx = local(L, prog, op.indices, op, "index tensor")
    rows = local(L, prog, op.rows, op, "rows")
    L.note_access(op.rows, "read")
    row = dimsb(table)[1:]
    n = prod(prog, dimsb(idx), op)
    rows2 = view(prog, rows, [n] + row, op)
    idx1 = view(prog, idx, [n], op)
    zeros = [0] * len(row)

    def row_dma(rid, i):
        src = subview(prog, rows2, [i, *zeros], [(1, 1), *row], op)
        dst = subview(prog, table, [rid, *zeros], [(1, 1), *row], op)
        prog.emit(core.DmaOp(src.value, dst.value), op)

    _row_dma_loop(prog, op, n, idx1, row_dma)


# -- transposes and reductions -----------------------------------------------------------------


def transpose3(
    L: LoweringState,
    prog: ProgramState,
    x: Buffer,
    lead: list[DimB],
    a: list[DimB],
    b: list[DimB],
    at: Operation,
    space: str | None = None,
) -> Buffer:
    """`x` of dims lead + a + b (contiguous) -> a new buffer of dims lead + b + a."""
    n_lead, _ = prod(prog, lead, at)
    if not isinstance(n_lead, int):
        raise error_at(
            at,
            f"{at.name}: {TRANSPOSE_DYNAMIC}; transpose or reduce over trailing dims, or make "
            "the leading dims static",
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


def transpose(L: LoweringState, prog: ProgramState, op: lg.TransposeOp) -> Buffer:
    perm = list(op.perm.get_values())
    r = len(perm)
    rt = result_type(op)
    x = local(L, prog, op.input, op, "operand")
    k = next((i for i, p in enumerate(perm) if p != i), None)
    if k is None:
        return x
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
    return transpose3(L, prog, x, d[:k], d[k:m], d[m:], op)


def reduce(L: LoweringState, prog: ProgramState, op: lg.ReductionOp) -> Buffer:
    kind = REDUCE_KINDS[type(op)]
    rt = result_type(op)
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
    return view(prog, o, rdims, op)


# -- shape ops ---------------------------------------------------------------------------------


def reshape(L: LoweringState, prog: ProgramState, op: lg.ReshapeOp) -> Buffer:
    rt = result_type(op)
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
    return view(prog, x, dims, op)


def slice_(L: LoweringState, prog: ProgramState, op: lg.SliceOp) -> Buffer:
    x = L.lookup(prog, op.input, op)
    offsets = list(op.static_offsets.get_values())
    sizes = list(op.static_sizes.get_values())
    strides = list(op.static_strides.get_values())
    sz: list[DimB] = [(x.dims[i], x.bounds[i]) if s == -1 else (s, s) for i, s in enumerate(sizes)]
    stepped = [i for i, (st, s) in enumerate(zip(strides, sizes)) if st != 1 and s > 1]
    if not stepped:
        return subview(prog, x, offsets, sz, op)
    _refuse_written_strided_slice(op)
    if prog.ctx.is_top:
        raise error_at(
            op,
            f"a slice with a step (strides {strides}) on top: a strided slice is a copy made in "
            "a core's memory (the top module has none); slice in the core, e.g. "
            "`legato.tensor.load(x[:, ::2])`",
        )
    # the first stepped dim from `x` itself; the others from that (contiguous) copy
    first, *rest = stepped
    spans = [
        ((s - 1) * strides[i] + 1,) * 2 if i in rest else d
        for i, (s, d) in enumerate(zip(sizes, sz))
    ]
    out = _every_nth(L, prog, x, offsets, spans, first, strides[first], op)
    for d in rest:
        picked = [(sizes[d], sizes[d]) if i == d else b for i, b in enumerate(dimsb(out))]
        out = _every_nth(L, prog, out, [0] * len(sz), picked, d, strides[d], op)
    return out


def _every_nth(
    L: LoweringState,
    prog: ProgramState,
    x: Buffer,
    offsets: list[int],
    sizes: list[DimB],
    d: int,
    step: int,
    at: Operation,
) -> Buffer:
    """A contiguous copy of `x[offsets : offsets + sizes]`, but along dim `d` only the elements
    `offsets[d] + k * step` for k < `sizes[d]`, in `x`'s memory (in sram when `x` is in DRAM:
    the DMA gathers from DRAM). One strided DMA when `x` is contiguous and its
    dim `d` a multiple of `step` (`x` seen as [..., dims[d] / step, step, ...]); otherwise one
    DMA per element of dim `d`."""
    n = sizes[d][0]
    assert isinstance(n, int)
    space = x.type.space if x.type.space in LOCAL else "sram"  # a strided DMA out of DRAM
    out = alloc(L, prog, sizes, x.type.element_type, space, at)
    size = x.dims[d]
    if x.contiguous and isinstance(size, int) and size % step == 0:
        xd = dimsb(x)
        grid = view(prog, x, [*xd[:d], (size // step,) * 2, (step, step), *xd[d + 1 :]], at)
        q, r = divmod(offsets[d], step)
        picked = [*sizes[: d + 1], (1, 1), *sizes[d + 1 :]]
        src = subview(prog, grid, [*offsets[:d], q, r, *offsets[d + 1 :]], picked, at)
        prog.emit(core.DmaOp(src.value, view(prog, out, picked, at).value), at)
    else:
        for k in range(n):
            one = [*sizes[:d], (1, 1), *sizes[d + 1 :]]
            src = subview(
                prog, x, [*offsets[:d], offsets[d] + k * step, *offsets[d + 1 :]], one, at
            )
            dst = subview(prog, out, [0] * d + [k] + [0] * (len(sizes) - d - 1), one, at)
            prog.emit(core.DmaOp(src.value, dst.value), at)
    prog.emit(core.DmaWaitOp(), at)
    prog.issued_dma = True
    return out


_WRITES = {lg.MemcpyOp: "dst", lg.ScatterOp: "table"}
_VIEWS = (lg.SliceOp, lg.DynamicSliceOp, lg.ReshapeOp)


def _refuse_written_strided_slice(op: lg.SliceOp) -> None:
    """A strided slice is lowered as a copy: refuse one that is written (a memcpy or scatter
    into it, or into a view of it), since the write would not reach the sliced tensor."""
    todo = [op.results[0]]
    while todo:
        v = todo.pop()
        for use in list(v.uses):
            user = use.operation
            field = _WRITES.get(type(user))
            if field is not None and getattr(user, field) is v:
                raise error_at(
                    user,
                    "writing into a slice with a step is not supported (a strided slice is a "
                    "copy): write a step-1 slice, or scatter the rows",
                )
            if isinstance(user, _VIEWS):
                todo.append(user.results[0])


def cat(L: LoweringState, prog: ProgramState, op: lg.CatOp) -> Buffer:
    rt = result_type(op)
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
    return out


# -- patterns ----------------------------------------------------------------------------------

Lowering = Callable[[LoweringState, ProgramState, Operation], Buffer]


class TensorOpPattern(LoweringPattern):
    """Lowers an op with one tensor result by its lowering function (`lower`), binding the
    result to the buffer the function returns."""

    lower: Lowering

    def rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        prog = self.state.begin(op, rewriter)
        buf = type(self).lower(self.state, prog, op)
        self.state.bind(prog, op, buf, rewriter)


class ViewOpPattern(TensorOpPattern):
    """A tensor op whose result is a view of its input (writing it writes the input)."""

    def rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        prog = self.state.begin(op, rewriter)
        buf = type(self).lower(self.state, prog, op)
        self.state.bind(prog, op, buf, rewriter, view_of=op.operands[0])


class LowerElementwiseBinary(TensorOpPattern):
    lower = staticmethod(binary)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.ElementwiseBinaryOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerElementwiseUnary(TensorOpPattern):
    lower = staticmethod(unary)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.ElementwiseUnaryOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerClamp(TensorOpPattern):
    lower = staticmethod(clamp)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.ClampOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerCast(TensorOpPattern):
    lower = staticmethod(cast)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.CastOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerConstant(TensorOpPattern):
    lower = staticmethod(constant)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.ConstantOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerBroadcastTo(TensorOpPattern):
    lower = staticmethod(broadcast_to)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.BroadcastToOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerWhere(TensorOpPattern):
    lower = staticmethod(where)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.WhereOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerGather(TensorOpPattern):
    lower = staticmethod(gather)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.GatherOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerScatter(LoweringPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.ScatterOp, rewriter: PatternRewriter) -> None:
        scatter(self.state, self.state.begin(op, rewriter), op)
        rewriter.erase(op)


class LowerReduction(TensorOpPattern):
    lower = staticmethod(reduce)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.ReductionOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerTranspose(TensorOpPattern):
    lower = staticmethod(transpose)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.TransposeOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerCat(TensorOpPattern):
    lower = staticmethod(cat)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.CatOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerReshape(ViewOpPattern):
    lower = staticmethod(reshape)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.ReshapeOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerSlice(ViewOpPattern):
    lower = staticmethod(slice_)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.SliceOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


def tensor_patterns(state: LoweringState) -> list[RewritePattern]:
    """The VPU tensor-op family's patterns over `state`."""
    return [
        LowerElementwiseBinary(state),
        LowerElementwiseUnary(state),
        LowerClamp(state),
        LowerCast(state),
        LowerConstant(state),
        LowerBroadcastTo(state),
        LowerWhere(state),
        LowerGather(state),
        LowerScatter(state),
        LowerReduction(state),
        LowerTranspose(state),
        LowerCat(state),
        LowerReshape(state),
        LowerSlice(state),
    ]
