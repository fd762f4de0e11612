"""The Python builders of the three dialects: inferred result types, verification, and the
backend's one-op-per-instruction coverage of the ISA table."""

import re

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from legato.dialects import backend as B
from legato.dialects import core as C
from legato.dialects import legato as L
from legato.types import Dim


def T(dims, dtype="f32", space="sram"):
    return L.TensorType(dims, dtype, space)


def test_legato_builders_infer_types():
    k = L.KernelOp(
        "k", [T([(-1, 10), 256], "bf16", "shared_dram"), T([256, 128], "bf16", "mpu_dram")]
    )
    a, w = k.args
    top = L.OnOp(L.ContextAttr.top())
    top.body.block.add_ops(
        [
            L.RequestLoadOp(a, "core(0)", "sram", 0),
            L.RequestLoadOp(w, "core(0)", "mpu_buffer", 1),
            L.YieldOp(),
        ]
    )
    la = L.ReceiveOp(a, 0, "sram")
    lw = L.ReceiveTypeOp(T([256, 128], "bf16", "mpu_weight"), 1, "mpu_buffer")
    mm = L.MatmulOp(la, lw)
    assert mm.result.type == T([(-1, 10), 128], "bf16", "sram")
    c = L.ConstantOp(2.0, T([], "bf16"))
    add = L.AddOp(mm, c)
    assert add.result.type == mm.result.type
    e = L.ExpOp(add)
    cast = L.CastOp(e, "f32")
    assert cast.result.type == T([(-1, 10), 128], "f32")
    s = L.SumOp(cast, -1, keepdim=True)
    assert s.dim.data == 1 and s.result.type == T([(-1, 10), 1], "f32")
    m = L.MeanOp(cast, 0)
    assert m.result.type == T([128], "f32")
    sub = L.SubOp(cast, s)
    tr = L.TransposeOp(sub, [1, 0])
    assert tr.result.type == T([128, (-1, 10)], "f32")
    rs = L.ReshapeOp(sub, dims=[(-1, 10), 2, 64])
    bc = L.BroadcastToOp(s, dims=[3, (-1, 10), 128])
    sl = L.SliceOp(sub, [0, 64], [-1, 64])
    assert sl.result.type == T([(-1, 10), 64], "f32")
    cat = L.CatOp([sl, sl], -1)
    assert cat.dim.data == 1 and cat.result.type == T([(-1, 10), 128], "f32")
    cid = L.CoreIdOp()
    ops = [la, lw, mm, c, add, e, cast, s, m, sub, tr, rs, bc, sl, cat, cid]
    on = L.OnOp("core(0)", result_types=[cat.result.type])
    on.body.block.add_ops([*ops, L.YieldOp(cat)])
    on2 = L.OnOp("core(0)", inputs=[on.res[0]])
    on2.body.block.add_ops([L.NegOp(on2.body.block.args[0]), L.YieldOp()])
    k.body.block.add_ops([top, on, on2, L.ReturnOp()])
    ModuleOp([k]).verify()


def test_inference_errors_raise_at_build_time():
    blk = Block(arg_types=[T([4, 256]), T([128, 64])])
    with pytest.raises(VerifyException, match="inner dimensions differ"):
        L.MatmulOp(*blk.args)
    blk = Block(arg_types=[T([4, 3]), T([4])])
    with pytest.raises(VerifyException, match="not broadcastable"):
        L.AddOp(*blk.args)


def test_scoping_rule_message():
    k = L.KernelOp("k", [T([4], "f32", "shared_dram")])
    on1 = L.OnOp("core(0)", result_types=[T([4])])
    r = L.ReceiveOp(k.args[0], 0, "sram")
    on1.body.block.add_ops([r, L.YieldOp(r)])
    on2 = L.OnOp("core(0)")
    on2.body.block.add_ops([L.ExpOp(on1.res[0]), L.YieldOp()])
    k.body.block.add_ops([on1, on2, L.ReturnOp()])
    with pytest.raises(VerifyException, match="values cross regions only by `legato.yield`"):
        ModuleOp([k]).verify()


def test_core_builders():
    args = [C.ArgAttr(0, C.BufType([(-1, 10), 256], "bf16", "shared_dram"), "read")]
    k = C.KernelOp("k", args)
    p = C.ProgramOp("core0", "core(0)")
    a = C.ArgOp(0, args[0].type)
    n = C.DimOp(a, 0)
    buf = C.AllocOp(C.BufType([(-1, 10), 256], "bf16", "sram"), [n], offset=0)
    w = C.AllocOp(C.BufType([256, 128], "bf16", "mpu_buffer"), core=0)
    acc = C.AllocOp(C.BufType([(-1, 10), 128], "f32", "sram"), [n])
    row = C.SubviewOp(buf, [0, 0], [1, 256])
    assert row.result.type == C.BufType([1, 256], "bf16", "sram")
    dyn = C.SubviewOp(buf, [0, 0], [n, 256], result_type=buf.result.type)
    red = C.AllocOp(C.BufType([(-1, 10), 1], "f32", "sram"), [n])
    p.body.block.add_ops(
        [
            a,
            n,
            buf,
            w,
            acc,
            row,
            dyn,
            red,
            C.DmaOp(a, buf, notify=(0, "sram", 0)),
            C.WaitQueueOp("sram", 0),
            C.MpuLoadWeightOp(w),
            C.MpuMatmulOp(buf, acc, accumulate=True),
            C.VpuReduceOp("max", acc, red),
            C.VpuBinaryOp("sub", acc, red, acc),
            C.VpuUnaryOp("exp", acc, acc),
            C.VpuFillOp(float("-inf"), red),
            C.DmaWaitOp(),
            C.BarrierOp(0, 4),
            C.CoreIdOp(),
            C.EndOp(),
        ]
    )
    k.body.block.add_op(p)
    ModuleOp([k]).verify()
    assert buf.offset.value.data == 0 and w.core == L.ContextAttr.core(0)
    assert k.programs == [p]


def test_backend_covers_the_isa_table():
    isa = pytest.importorskip("legato.targets.bertha.isa")
    assert set(B.BY_MNEMONIC) == set(isa.BY_MNEMONIC), (
        "backend ops and the ISA table differ: "
        f"missing ops {sorted(set(isa.BY_MNEMONIC) - set(B.BY_MNEMONIC))}, "
        f"extra ops {sorted(set(B.BY_MNEMONIC) - set(isa.BY_MNEMONIC))}"
    )


def test_backend_assembly_is_what_the_assembler_reads():
    asm = pytest.importorskip("legato.targets.bertha.asm")
    r = B.reg
    t = B.EntryRegOp("r1")
    a = B.LdOp(t, 8, r(3))
    n = B.LiOp(64, r(5))
    d = B.LsaOp("sram", 0, core=1, rd=r(4))
    top = B.ProgramOp(
        "top", "top", [t, a, n, d, B.DmaOp(d, a, n, notify=(1, "sram", 0)), B.HaltOp()]
    )
    c = B.EntryRegOp("r2")
    s = B.LsaOp("sram", 0, rd=r(6))
    i0 = B.LiOp(0, r(7))
    i1 = B.AddiOp(i0, 1, r(7))
    core = B.ProgramOp(
        "core1",
        "core(1)",
        [
            c,
            s,
            i0,
            B.LabelOp("L"),
            B.QwaitOp("sram", 0),
            i1,
            B.BltOp(i1, c, "L"),
            B.VpuExpOp(s, s, i1, "f32"),
            B.HaltOp(),
        ],
        mem={"sram": 256},
    )
    m = ModuleOp([B.KernelOp("k", [top, core])])
    m.verify()
    text = B.print_assembly(m)
    module = asm.assemble(text)
    assert [p.name for p in module.programs] == ["top", "core1"]
    assert module.program("core1").memory == {"sram": 256}
    # Every instruction line survives a disassembly unchanged (labels are renamed).
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith("    ")]
    dis = [ln.strip() for ln in asm.disassemble(module).splitlines() if ln.startswith("    ")]
    label = re.compile(r"\bL\d*$")
    assert [label.sub("X", ln) for ln in lines] == [label.sub("X", ln) for ln in dis]


def test_register_type():
    assert str(B.reg()) == "!backend.reg"
    assert str(B.reg(5)) == "!backend.reg<r5>"
    assert B.reg("r31").register_name == "r31"
    assert B.reg(7) == B.RegType.from_name("r7")
    assert len(B.RegType.allocatable_registers()) == 29
    with pytest.raises(ValueError):
        B.reg(32)


def test_dim_helpers():
    t = C.BufType([Dim(None, 8), 4], "bf16", "sram")
    assert t.max_bytes == 64 and not t.is_static and t.dynamic_dims == (0,)


@pytest.mark.parametrize(
    "print_op, assert_op, value_type, kind, hint",
    [
        (
            L.DevicePrintOp,
            L.DeviceAssertOp,
            T,
            "tensor",
            "; print the tensor before it is loaded as a weight",
        ),
        (C.PrintOp, C.AssertOp, C.BufType, "buffer", ""),
    ],
    ids=["legato", "core"],
)
def test_debug_ops_check_their_operands(print_op, assert_op, value_type, kind, hint):
    """The debug ops of both levels (one shared definition, legato/dialects/debug.py) accept an
    index and a value of their level's type, refuse a value of the other level's type,
    mpu_weight and two dynamic dims, naming the op and the operand."""
    from xdsl.dialects.builtin import IndexType
    from xdsl.dialects.test import TestOp

    def value(t):
        return TestOp(result_types=[t]).results[0]

    good, n = value(value_type([4, 8], "f32", "sram")), value(IndexType())
    p = print_op("x =", [good, n])
    p.verify()
    assert p.message.data == "x =" and list(p.values) == [good, n]
    assert_op(good, "ok").verify()
    other = (C.BufType if kind == "tensor" else T)([4], "f32", "sram")
    with pytest.raises(VerifyException, match=rf"{p.name}: value 0 must be a {kind} or an index"):
        print_op("x", [value(other)]).verify()
    weight = value(value_type([256, 128], "bf16", "mpu_weight"))
    with pytest.raises(VerifyException, match=r"the condition is in mpu_weight") as e:
        assert_op(weight, "w").verify()
    assert str(e.value).endswith("which has no address" + hint)
    two_dyn = value(value_type([(-1, 4), (-1, 8)], "f32", "sram"))
    with pytest.raises(VerifyException, match="value 0 .* has more than one dynamic dim"):
        print_op("x", [two_dyn]).verify()
