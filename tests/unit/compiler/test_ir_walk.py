"""`ir_walk.walk` yields what xDSL's `Operation.walk` yields (pre-order, nested loops included,
the yielded op erasable), `ops_of` the ops of a class that it yields."""

from legato.compiler import context
from legato.dialects import core
from legato.model.ir import attach_model
from legato.transforms import pipelines
from legato.transforms.ir_walk import ops_of, walk
from tests.corpus.runtime_kernels import spmd_stream


def _core_module():
    module = spmd_stream.emit_module()
    attach_model(module, spmd_stream.model)
    pipelines.legato_to_core(spmd_stream.model).apply(context(), module)
    return module


def test_walk_is_xdsls_walk():
    module = _core_module()
    ops = list(module.walk())
    assert any(op.regions and not isinstance(op, core.ProgramOp | core.KernelOp) for op in ops)
    assert list(walk(module)) == ops
    for op in ops:
        assert list(walk(op)) == list(op.walk())


def test_ops_of_is_the_walk_filtered():
    module = _core_module()
    for cls in (core.KernelOp, core.ProgramOp, core.DmaOp, (core.AllocOp, core.WaitQueueOp)):
        assert list(ops_of(module, cls)) == [op for op in module.walk() if isinstance(op, cls)]


def test_the_op_just_yielded_can_be_erased():
    module, twin = _core_module(), _core_module()

    def erase_views(ops) -> list[str]:
        seen = []
        for op in ops:
            seen.append(op.name)
            if isinstance(op, core.ViewOp) and not op.results[0].uses:
                op.detach()
                op.erase()
        return seen

    assert erase_views(walk(module)) == erase_views(twin.walk())
    assert [o.name for o in module.walk()] == [o.name for o in twin.walk()]
