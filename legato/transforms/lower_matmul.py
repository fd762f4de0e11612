"""Rewrite patterns lowering `legato.matmul` to the MPU (part of `convert-legato-to-core`;
conventions of `lowering_state`).

matmul tiles to the MPU's weight tile (`mpu_tile_k` x `mpu_tile_n`): K tiles accumulate into an
f32 buffer (`accumulate = true`), converted once to the result dtype. Weight tiles must be
contiguous in mpu_buffer: a weight wider than a tile is transposed (VPU) so that each column block
becomes a contiguous row block, and transposed back per block into mpu_buffer; lhs column blocks
(K > tile) are produced the same way. Column blocks of the result are gathered through a
transposed f32 buffer. f32 operands are split into bf16 hi/lo on the VPU (cast, sub, cast) and
multiplied in three passes into the same accumulator (`legato.numerics.matmul_f32_split`). A
weight tile already in the MPU (`ProgramState.loaded_weight`: received as `mpu_weight`, or used
by the previous matmul) is not loaded again.
"""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from legato.dialects import core
from legato.dialects import legato as lg
from legato.targets.bertha.arch.pim import PimLayout
from legato.transforms.diagnostics import error_at
from legato.transforms.lower_tensor_ops import (
    LOCAL,
    TensorOpPattern,
    alloc,
    contiguous,
    copy_dma,
    dimsb,
    local,
    prod,
    result_space,
    result_type,
    subview,
    transpose3,
    view,
)
from legato.transforms.lowering_state import Buffer, LoweringState, ProgramState


def _stage(L: LoweringState, prog: ProgramState, w: Buffer, at) -> Buffer:
    """A contiguous copy of weight tile `w` in mpu_buffer (where mpu.ldw reads)."""
    st = alloc(L, prog, dimsb(w), w.type.element_type, "mpu_buffer", at)
    copy_dma(L, prog, w, st, at)
    return st


def _split_bf16(L: LoweringState, prog: ProgramState, x: Buffer, space: str, at) -> list[Buffer]:
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


def pim_matvec(L: LoweringState, prog: ProgramState, op: lg.MatmulOp) -> Buffer:
    """`x[1, K] @ W[K, N]` with W in `pim_dram` (docs/pim.md): the PIM units compute the
    product (`core.pim_gemv`, fp32 into a buffer of every unit's padded columns); the first N
    columns are then converted to the result dtype (one rounding, as an MPU matmul's)."""
    res_t = result_type(op)
    model = L.model
    if not model.use_pim:
        raise error_at(
            op,
            f"the weight of this matmul is in pim_dram, but {model.name} has no PIM units "
            "(build the chip with use_pim=True, or pass the weight in shared_dram / mpu_dram)",
        )
    if op.lhs.type.dtype.name != "bf16" or op.rhs.type.dtype.name != "bf16":
        raise error_at(op, "the PIM units multiply bf16 operands (cast x with legato.tensor.to)")
    a = contiguous(L, prog, local(L, prog, op.lhs, op, "left operand"), op)
    w = L.lookup(prog, op.rhs, op)
    if not w.type.is_static:
        raise error_at(op, "a weight in pim_dram must have static dims")
    k, n = w.type.get_shape()
    ad = dimsb(a)
    if prod(prog, ad[:-1], op) != (1, 1):
        raise error_at(
            op,
            "the PIM units compute a matrix-vector product: the left operand must have one row "
            f"(static), got {a.type.dims_str()}",
        )
    layout = PimLayout(k, n, model.num_memory_channels)
    padded = layout.n_unit * layout.channels
    acc = alloc(L, prog, [(padded, padded)], "f32", "sram", op)
    prog.emit(core.PimGemvOp(view(prog, a, [(k, k)], op).value, w.value, acc.value), op)
    out = alloc(L, prog, ad[:-1] + [(n, n)], res_t.element_type, result_space(op, res_t), op)
    cols = subview(prog, acc, [0], [(n, n)], op)
    prog.emit(core.VpuUnaryOp("cast", cols.value, view(prog, out, [(n, n)], op).value), op)
    return out


def matmul(L: LoweringState, prog: ProgramState, op: lg.MatmulOp) -> Buffer:
    """bf16 operands: one MPU pass per tile. f32 operands (`legato.numerics.matmul_f32_split`):
    each is split into bf16 hi + lo on the VPU, then the passes a_hi@w_hi, a_hi@w_lo, a_lo@w_hi
    (in that order, each over every K tile in order) accumulate into one f32 buffer."""
    lt, wt_, res_t = op.lhs.type, op.rhs.type, result_type(op)
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
    if wt_.space == "pim_dram":
        return pim_matvec(L, prog, op)
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
            return out
        if prog.loaded_weight is not op.rhs:
            tile = w if w.type.space == "mpu_buffer" else _stage(L, prog, w, op)
            prog.emit(core.MpuLoadWeightOp(tile.value), op)
            prog.loaded_weight = op.rhs
        prog.emit(core.MpuMatmulOp(a2.value, out2.value, False), op)
        return out
    nk, nn = -(-k // kt), -(-n // nt)
    # lhs column blocks [M, kw], contiguous
    a_tiles: list[list[Buffer]] = []
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
    return out


class LowerMatmul(TensorOpPattern):
    lower = staticmethod(matmul)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: lg.MatmulOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


def matmul_patterns(state: LoweringState) -> list[RewritePattern]:
    """The MPU family's patterns over `state`."""
    return [LowerMatmul(state)]
