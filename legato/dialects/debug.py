"""The kernel-debugging ops' shared definition (`legato.device_print` / `legato.device_assert`;
opset's DEBUG rows): the legato dialect's `DevicePrintOp` / `DeviceAssertOp` and the core
dialect's `PrintOp` / `AssertOp` have the same fields, assembly format, builder and checks, and
differ only in the type their operands have at that level (a tensor, a buffer). Each dialect
subclasses `PrintOpBase` / `AssertOpBase` with its `name` and `VALUE_TYPE`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IndexType, StringAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import operand_def, prop_def, var_operand_def
from xdsl.utils.exceptions import VerifyException

from legato import opset
from legato.dialects.fast_build import FastBuildOperation


class _DebugOpBase(FastBuildOperation):
    """What a debug op's operand may be: an index, or a value of `VALUE_TYPE` (called
    `VALUE_KIND` in messages) outside mpu_weight (which has no address) with at most one
    dynamic dim. `HINTS` (at mpu_weight, at several dynamic dims) end the messages with what
    to do at the user's level."""

    VALUE_TYPE: ClassVar[type[Attribute]]
    VALUE_KIND: ClassVar[str]
    HINTS: ClassVar[tuple[str, str]] = ("", "")

    def check_operand(self, v: SSAValue, role: str) -> None:
        t = v.type
        if isinstance(t, IndexType):
            return
        if not isinstance(t, self.VALUE_TYPE):
            raise VerifyException(
                f"{self.name}: {role} must be a {self.VALUE_KIND} or an index, got {t}"
            )
        if t.space == "mpu_weight":
            raise VerifyException(
                f"{self.name}: {role} is in mpu_weight, which has no address{self.HINTS[0]}"
            )
        if sum(d.is_dynamic for d in t.dims) > 1:
            raise VerifyException(
                f"{self.name}: {role} {t} has more than one dynamic dim{self.HINTS[1]}"
            )


class PrintOpBase(_DebugOpBase):
    """`<name> "x =" (%x, %n : T, index)`: report `message` and the values when the running
    context reaches it. Builder: `Op(message, values)`."""

    message = prop_def(StringAttr)
    values = var_operand_def()
    ROW: ClassVar[opset.OpKind] = opset.BY_KIND[opset.DEBUG, "print"]
    assembly_format = "$message (`(` $values^ `:` type($values) `)`)? attr-dict"

    def __init__(self, message: str | StringAttr, values: Sequence[SSAValue] = ()):
        if isinstance(message, str):
            message = StringAttr(message)
        super().__init__(operands=[list(values)], properties={"message": message})

    def verify_(self) -> None:
        for i, v in enumerate(self.values):
            self.check_operand(v, f"value {i}")


class AssertOpBase(_DebugOpBase):
    """`<name> %cond, "message" : T`: every element of `%cond` is nonzero, else the run stops
    with a `DeviceAssertError` at this op's location. Builder: `Op(cond, message)`."""

    cond = operand_def()
    message = prop_def(StringAttr)
    ROW: ClassVar[opset.OpKind] = opset.BY_KIND[opset.DEBUG, "assert"]
    assembly_format = "$cond `,` $message attr-dict `:` type($cond)"

    def __init__(self, cond: SSAValue, message: str | StringAttr = ""):
        if isinstance(message, str):
            message = StringAttr(message)
        super().__init__(operands=[cond], properties={"message": message})

    def verify_(self) -> None:
        self.check_operand(self.cond, "the condition")
