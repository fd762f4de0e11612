"""`verify_op` gives `op.verify_()`'s verdict and error: the definition's checks are skipped
only for an op shape that passed them, the custom verifier always runs, a failure is not
remembered, and ops whose traits read their place are verified whole."""

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, i32
from xdsl.ir import Block
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from legato.dialects import fast_verify
from legato.dialects import legato as lg
from legato.dialects.fast_verify import verify_op


@irdl_op_definition
class FirstArgOp(IRDLOperation):
    """Refuses (in its custom verifier) an operand that is not its block's first argument:
    something the op's shape does not show."""

    name = "test.first_arg"
    x = operand_def(IndexType)
    traits = traits_def(Pure())

    def verify_(self):
        if self.x.index != 0:
            raise VerifyException("not the first argument")


def _error(fn) -> str:
    with pytest.raises(VerifyException) as e:
        fn()
    return str(e.value)


def test_a_shape_that_passed_does_not_let_another_shape_pass():
    block = Block(arg_types=[IndexType(), IndexType(), i32])
    a, b, c = block.args
    verify_op(arith.AddiOp(a, b))
    assert fast_verify._PASSED[arith.AddiOp]
    bad = arith.AddiOp(a, c, result_type=IndexType())
    assert _error(lambda: verify_op(bad)) == _error(bad.verify_)
    assert _error(lambda: verify_op(bad)) == _error(bad.verify_)  # not remembered


def test_the_custom_verifier_runs_for_a_remembered_shape():
    block = Block(arg_types=[IndexType(), IndexType()])
    verify_op(FirstArgOp(operands=[block.args[0]]))
    assert fast_verify._PASSED[FirstArgOp]
    second = FirstArgOp(operands=[block.args[1]])
    assert _error(lambda: verify_op(second)) == "not the first argument"


def test_an_op_whose_trait_reads_its_place_is_verified_whole():
    assert fast_verify._parts(lg.ReturnOp) is None  # HasParent(KernelOp)
    assert fast_verify._parts(arith.AddiOp) is not None  # Pure, an empty folder interface
