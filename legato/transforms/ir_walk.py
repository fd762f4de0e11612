"""Walks of the IR that the passes run over whole kernels, cheaper than xDSL's `Operation.walk`
(a generator per op, region and block: four generator steps per op of a flat program).

`walk(op)` is `op.walk()`: `op`, then every op nested in it, in pre-order, each op's successor
read before the op is yielded (so the op just yielded may be erased, as with xDSL's). `ops_of(root,
cls)` is the ops of class `cls` that `root.walk()` yields, when such ops never hold one another
(a kernel in a module, a program in a kernel): it does not walk into the ops it yields.
`block_ops(block)` is `list(block.ops)`."""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.ir import Block, Operation


def walk(op: Operation) -> Iterator[Operation]:
    yield op
    for region in op.regions:
        for block in region.blocks:
            inner = block.first_op
            while inner is not None:
                after = inner._next_op  # noqa: SLF001 (what the `next_op` property reads)
                if inner.regions:
                    yield from walk(inner)
                else:
                    yield inner
                inner = after


def block_ops(block: Block) -> list[Operation]:
    """`list(block.ops)`, without its length hint: `len(block.ops)` counts the ops by walking
    the block in Python, so `list` walked every block twice."""
    out = []
    op = block.first_op
    while op is not None:
        out.append(op)
        op = op._next_op  # noqa: SLF001 (`next_op` is a property reading it)
    return out


def ops_of(root: Operation, cls: type | tuple[type, ...]) -> Iterator[Operation]:
    for region in root.regions:
        for block in region.blocks:
            inner = block.first_op
            while inner is not None:
                after = inner._next_op  # noqa: SLF001 (what the `next_op` property reads)
                if isinstance(inner, cls):
                    yield inner
                elif inner.regions:
                    yield from ops_of(inner, cls)
                inner = after
