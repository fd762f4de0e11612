"""`core-fuse-mpu-accumulate`: `acc = acc + a @ w`, with an f32 `acc` read only there, becomes one
`core.mpu_matmul {accumulate = true}` into acc's buffer.

`convert-legato-to-core` lowers the matmul into a fresh buffer `%m` and the add into another:

    %m = core.alloc sram : !core.buf<[M, N], f32, sram>
    core.mpu_matmul %a, %m {accumulate = false}          (%m, or a core.view of it)
    ...
    %s = core.alloc sram : !core.buf<[M, N], f32, sram>
    core.vpu_binary add %acc, %m to %s                   (or add %m, %acc)

The MPU's `mpu.mm ..., acc` is the matmul followed by one f32 add per element
(`numerics.mpu_matmul`), so the bits are those of the add: the pattern replaces the matmul by
`core.mpu_matmul %a, %acc {accumulate = true}` (through a `core.view` of %acc with the matmul's
shape when they differ), drops `%m`, the add and `%s`, and uses %acc wherever %s was used. It
applies when
- `%m` is f32, written by that one matmul and read by that one add, in the same block;
- %acc has %m's type, lives in memory the units compute in, and is a `core.alloc` (or a
  `core.view` chain of one) of the same block defined before the matmul;
- acc's buffer holds a value nothing but the add reads: no op touches it (or a view of it)
  between the matmul and the add or after the add, and no op before the matmul reads it after
  its last write (a read-modify-write, such as an earlier fused accumulation, is a write);
  an op nested in a loop counts as its loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from legato.dialects import core
from legato.dialects.legato import element_type_name


def _alloc_or_view_of_alloc(v: SSAValue) -> tuple[core.AllocOp, list[Operation]] | None:
    """The `core.alloc` `v` is (or is a `core.view` chain of), and the views on the way."""
    views: list[Operation] = []
    while isinstance(v.owner, core.ViewOp):
        views.append(v.owner)
        v = v.owner.source
    if not isinstance(v.owner, core.AllocOp):
        return None
    return v.owner, views


def runtime_dims(v: SSAValue) -> list[int | SSAValue]:
    """The runtime size of each dim of a `core.alloc` or `core.view` result: the static size, or
    the `index` operand giving it."""
    op = v.owner
    assert isinstance(op, core.AllocOp | core.ViewOp)
    t = v.type
    assert isinstance(t, core.BufType)
    dyn = iter(op.dyn_dims)
    return [next(dyn) if d.is_dynamic else d.size for d in t.dims]  # type: ignore[misc]


def _in_block(op: Operation, block: Block) -> Operation | None:
    """`op`, or its ancestor, that is an op of `block`."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        if parent is None:
            return None
        op = parent
    return op


def _touches(root: SSAValue) -> list[tuple[Operation, bool, bool]]:
    """Every op using `root` or a view of it (views excluded): (op, reads, writes). An op
    writes a buffer it takes as its `out` or `dst` operand, and reads the others (an
    accumulating matmul also reads its `out`)."""
    out: list[tuple[Operation, bool, bool]] = []
    stack = [root]
    while stack:
        v = stack.pop()
        for use in v.uses:
            op = use.operation
            if isinstance(op, core.ViewOp | core.SubviewOp) and use.index == 0:
                stack.append(op.results[0])
                continue
            dest = getattr(op, "out", None) is v or getattr(op, "dst", None) is v
            acc = isinstance(op, core.MpuMatmulOp) and op.is_accumulate
            out.append((op, not dest or acc, dest))
    return out


def _only_the_add_reads(
    root: SSAValue, mm: Operation, add: Operation, index: dict[Operation, float]
) -> bool:
    """The value acc's buffer holds when `mm` runs is read by `add` alone (module docstring);
    `index` orders the ops of mm's block."""
    block = mm.parent_block()
    assert block is not None
    at_mm, at_add = index[mm], index[add]
    last_write, reads = -1.0, []
    for op, reads_it, writes_it in _touches(root):
        if op is add:
            continue
        top = _in_block(op, block)
        if top is None or index[top] >= at_mm:
            return False  # touched after the matmul: the add would not see acc's value
        if writes_it:
            last_write = max(last_write, index[top])
        elif reads_it:
            reads.append(index[top])
    return at_mm < at_add and all(r <= last_write for r in reads)


@dataclass
class FuseMpuAccumulate(RewritePattern):
    """`acc + a @ w` into `mpu_matmul {accumulate = true}` (module docstring)."""

    # the order of each block's ops, numbered once (a rewrite keeps the others' order and puts
    # its new ops at the matmul's place)
    _order: dict[Block, dict[Operation, float]] = field(default_factory=dict)

    def _index(self, block: Block) -> dict[Operation, float]:
        if block not in self._order:
            self._order[block] = {o: float(i) for i, o in enumerate(block.ops)}
        return self._order[block]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, mm: core.MpuMatmulOp, rewriter: PatternRewriter) -> None:
        if mm.is_accumulate:
            return
        dest = mm.out
        m_view = dest.owner if isinstance(dest.owner, core.ViewOp) else None
        m = m_view.source if m_view is not None else dest
        if not isinstance(m.owner, core.AllocOp) or (m_view and dest.uses.get_length() != 1):
            return
        t = m.type
        assert isinstance(t, core.BufType)
        if element_type_name(t.element_type) != "f32" or m.uses.get_length() != 2:
            return
        add = next((u.operation for u in m.uses if u.operation is not (m_view or mm)), None)
        if not isinstance(add, core.VpuBinaryOp) or add.kind.data != "add":
            return
        if add.parent_block() is not mm.parent_block() or add.out is m:
            return
        if (add.lhs is m) == (add.rhs is m):
            return
        acc = add.rhs if add.lhs is m else add.lhs
        s = add.out
        if acc.type != t or s.type != t or not isinstance(s.owner, core.AllocOp):
            return
        found = _alloc_or_view_of_alloc(acc)
        if found is None or t.space not in core.VPU_SPACES:
            return
        root, views = found
        block = mm.parent_block()
        assert block is not None
        index = self._index(block)
        # by the numbering, not `is_before_in_block` (a walk of the block per matmul: ~70% of
        # this pass on a GEMM)
        if any(o.parent_block() is not block or not _before(o, mm, index) for o in [root, *views]):
            return
        if not _only_the_add_reads(root.result, mm, add, index):
            return
        target = acc
        new: list[Operation] = []
        if dest.type != acc.type or runtime_dims(acc) != runtime_dims(dest):
            dest_dims = dest.owner.dyn_dims  # type: ignore[union-attr]
            v = core.ViewOp(acc, dest.type, list(dest_dims))  # type: ignore[arg-type]
            v.location = mm.location
            new.append(v)
            target = v.result
        fused = core.MpuMatmulOp(mm.input, target, True)
        fused.location = mm.location
        new.append(fused)
        for k, o in enumerate(new):
            index[o] = index[mm] - 0.5 + k / (2 * len(new))
        rewriter.erase(add)
        rewriter.replace_all_uses_with(s, acc)
        rewriter.erase(s.owner)  # type: ignore[arg-type]
        rewriter.replace(mm, new, [])
        if m_view is not None:
            rewriter.erase(m_view)
        rewriter.erase(m.owner)  # type: ignore[arg-type]


def _before(a: Operation, b: Operation, index: dict[Operation, float]) -> bool:
    """Whether `a` comes before `b` (both in the block `index` numbers)."""
    ia, ib = index.get(a), index.get(b)
    if ia is None or ib is None:  # not numbered: count in the block itself
        return a.is_before_in_block(b)
    return ia < ib


@dataclass(frozen=True)
class CoreFuseMpuAccumulatePass(ModulePass):
    """Fuse every `acc + a @ w` the MPU can accumulate in place (module docstring)."""

    name = "core-fuse-mpu-accumulate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FuseMpuAccumulate()).rewrite_module(op)
