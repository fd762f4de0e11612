"""`TypedPatternApplier` tries the same patterns in the same order as xDSL's greedy applier,
skipping only those whose `@op_type_rewrite_pattern` class cannot match the op."""

from __future__ import annotations

from xdsl.dialects import arith, test
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from legato.transforms.pattern_dispatch import TypedPatternApplier, matched_classes


class Log:
    def __init__(self):
        self.calls: list[tuple[str, str]] = []


class OnConstant(RewritePattern):
    def __init__(self, log: Log, act: bool):
        self.log, self.act = log, act

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter) -> None:
        self.log.calls.append(("constant", op.name))
        if self.act:
            rewriter.replace(op, [arith.ConstantOp(IntegerAttr(op.value.value.data + 1, i32))])


class OnAddOrMul(RewritePattern):
    def __init__(self, log: Log):
        self.log = log

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.AddiOp | arith.MuliOp, rewriter: PatternRewriter) -> None:
        self.log.calls.append(("add|mul", op.name))


class Untyped(RewritePattern):
    def __init__(self, log: Log):
        self.log = log

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        self.log.calls.append(("any", op.name))


def _module() -> ModuleOp:
    a = arith.ConstantOp(IntegerAttr(1, i32))
    b = arith.ConstantOp(IntegerAttr(2, i32))
    add = arith.AddiOp(a, b)
    mul = arith.MuliOp(add, b)
    sub = arith.SubiOp(mul, a)
    return ModuleOp([a, b, add, mul, sub, test.TestOp((sub.result,))])


def test_matched_classes_reads_the_decorated_annotation():
    log = Log()
    assert matched_classes(OnConstant(log, False)) == (arith.ConstantOp,)
    assert matched_classes(OnAddOrMul(log)) == (arith.AddiOp, arith.MuliOp)
    assert matched_classes(Untyped(log)) is None


def _run(applier_cls, act: bool) -> tuple[list, str]:
    log = Log()
    patterns = [Untyped(log), OnConstant(log, act), OnAddOrMul(log), Untyped(log)]
    module = _module()
    if applier_cls is GreedyRewritePatternApplier:
        applier = GreedyRewritePatternApplier(patterns, dce_enabled=False)
    else:
        applier = TypedPatternApplier(patterns)
    PatternRewriteWalker(applier, apply_recursively=False).rewrite_module(module)
    return log.calls, str(module)


def test_same_patterns_same_order_same_result_as_greedy():
    for act in (False, True):
        greedy_calls, greedy_ir = _run(GreedyRewritePatternApplier, act)
        typed_calls, typed_ir = _run(TypedPatternApplier, act)
        # the typed patterns are only called on ops they match: their recorded calls are the
        # greedy run's calls that did something; the untyped ones see every op in both
        assert typed_calls == greedy_calls
        assert typed_ir == greedy_ir
    # an acting pattern stops the rest: the second untyped pattern never sees a constant
    calls, ir = _run(TypedPatternApplier, True)
    assert ("constant", "arith.constant") in calls
    assert calls.count(("any", "arith.constant")) == 2  # the first untyped one, for each
    assert "arith.constant 2 : i32" in ir and "arith.constant 3 : i32" in ir
