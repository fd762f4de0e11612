"""The plumbing of chip-scale (spmd) implementations (issue 14): `Impl(spmd=True, scratch=...)`
nodes become all-core kernels of their own, parameters given as `kernelgen.Layout` are laid out
once by the kernel module (again when they change), and their folded `t(W)` never runs.

The implementations here are toys written for the test (row-split add through a scratch tensor
and a barrier; a column-split mm on a pre-transposed weight); the library's real ones are tested
in test_chip_linear.py."""

import pytest
import torch

import legato
import legato.torch as lt
from legato.torch import kernelgen, registry, wrapper
from legato.torch.library.aten import val

F32 = legato.types.float("float32")


@legato.function
def spmd_add(x, y, out, part):
    """Core c adds rows [c*r, (c+1)*r) into the scratch, meets the others at a barrier, then
    copies the rows of the core after it from the scratch into `out` (so the result depends on
    the scratch and on the barrier)."""
    device = legato.get_context().get_device()
    p = device.num_cores
    r = x.shape[0] // p
    c = legato.core_id()
    s = legato.tensor.load(x[c * r : (c + 1) * r, :]) + legato.tensor.load(
        y[c * r : (c + 1) * r, :]
    )
    legato.tensor.memcpy(part[c * r : (c + 1) * r, :], s)
    legato.sync.barrier()
    o = (c + 1) % p
    legato.tensor.memcpy(
        out[o * r : (o + 1) * r, :], legato.tensor.load(part[o * r : (o + 1) * r, :])
    )


@legato.function
def spmd_mm_wt(x, wt, out):
    """out[:, c*tn:(c+1)*tn] = x @ wt[c] on core c (wt[c] = W^T's column block c, [K, tn])."""
    device = legato.get_context().get_device()
    tn = wt.shape[2]
    c = legato.core_id()
    w = legato.tensor.load(wt[c], "sram")
    y = legato.tensor.matmul(legato.tensor.load(x), w, F32)
    legato.tensor.memcpy(out[:, c * tn : (c + 1) * tn], legato.tensor.cast(y, out.dtype))
    assert device.num_cores * tn == out.shape[1]


def _add_resolver(node, ctx):
    x, y = node.args
    assert isinstance(y, torch.fx.Node) and val(x).shape == val(y).shape
    rows = val(x).shape[0]
    assert rows % ctx.model.num_cores == 0
    return registry.Impl(
        spmd_add, (x, y), spmd=True, scratch=((tuple(val(x).shape), val(x).dtype),)
    )


def _mm_resolver(node, ctx):
    x, wt_node = node.args
    assert wt_node.target is torch.ops.aten.t.default, "toy: mm(x, t(W)) only"
    w = wt_node.args[0]
    assert w.op == "placeholder" and w.meta.get(kernelgen.PARAM_META), "W is not a parameter"
    n, k = val(w).shape
    p = ctx.model.num_cores
    tn = n // p

    def lay(t):  # W[N, K] -> wt[p, K, tn]: core c's columns of W^T, contiguous
        return t.t().reshape(k, p, tn).permute(1, 0, 2)

    layout = kernelgen.Layout(w, lay, (p, k, tn), val(w).dtype, "shared_dram", fold=(wt_node,))
    return registry.Impl(spmd_mm_wt, (x, layout), spmd=True)


@pytest.fixture
def toy_resolvers():
    got = [
        (torch.ops.aten.add.Tensor, registry.register(torch.ops.aten.add.Tensor, _add_resolver)),
        (torch.ops.aten.mm.default, registry.register(torch.ops.aten.mm.default, _mm_resolver)),
    ]
    yield
    for op, r in got:
        registry.unregister(op, r)


def _per_core_instructions(run):
    return {k: v for k, v in run.instructions.items() if k.startswith("core")}


def test_spmd_node_is_an_all_core_kernel_of_its_own(toy_resolvers):
    """relu(a) + b, then * 2: the add is an spmd partition of its own between the relu's and the
    mul's kernels (without chains); every core runs it; scratch and barrier carry the result.
    With chains (the default) the relu and the mul are core-0 phases of its kernel
    (`wrapper._serial_phase`): one kernel."""

    def f(a, b):
        return (torch.relu(a) + b) * 2

    a, b = torch.randn(64, 128), torch.randn(64, 128)
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options={"legato.strict": True})(a, b)
    torch.testing.assert_close(y, f(a, b), rtol=1e-6, atol=1e-6)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (mod,) = wrapper.last_wrapper().kernel_modules()
    assert mod.gen.spmd and mod.gen.source.count("# core 0") == 2, mod.gen.source
    torch._dynamo.reset()
    opts = {"legato.strict": True, "legato.fuse_chains": False}
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options=opts)(a, b)
    torch.testing.assert_close(y, f(a, b), rtol=1e-6, atol=1e-6)
    s = lt.last_summary()
    assert s.num_kernels == 3 and s.num_extern == 0, str(s)
    mods = wrapper.last_wrapper().kernel_modules()
    spmd = [m for m in mods if m.gen.spmd]
    assert len(spmd) == 1 and "with device.get_all_cores():" in spmd[0].gen.source
    counts = _per_core_instructions(spmd[0].kernel.last_run)
    assert len(counts) == 32 and all(v > 0 for v in counts.values()), counts


def test_parameter_laid_out_once_and_again_when_it_changes(toy_resolvers):
    lin = torch.nn.Linear(128, 256, bias=False)
    g = torch.compile(lin, backend="legato", options={"legato.strict": True})
    x = torch.randn(4, 128)
    with torch.no_grad():
        y1 = g(x)
        y2 = g(x)
    torch.testing.assert_close(y1, lin(x), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(y2, y1, rtol=0, atol=0)
    (mod,) = wrapper.last_wrapper().kernel_modules()
    assert mod.gen.spmd and mod.layout_count == 1
    # the folded t(W) is in the kernel's partition but not in its source: it never runs
    assert "t: aten.t.default" in " ".join(mod.info.nodes)
    assert "transpose" not in mod.gen.source
    with torch.no_grad():
        lin.weight.mul_(-1.0)  # in place: same data_ptr, new _version
        y3 = g(x)
    assert mod.layout_count == 2
    torch.testing.assert_close(y3, -y1, rtol=1e-2, atol=1e-2)
