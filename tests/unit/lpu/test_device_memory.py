"""lpu tensors live in the emulated shared DRAM of one Bertha device between ops: a chain of
ops copies bytes between host and device only at `.to("lpu")` and `.cpu()`, kernels are
launched with their operands bound to their allocations, allocations are freed with their
tensors; scalars are kernel arguments (one kernel for `x * 0.5` and `x * 0.25`); CPU and lpu
operands do not mix, as on CUDA (but 0-d CPU scalars); a simple backward runs on lpu.

The runtime half (`run_binary` on a `Device`: resident arguments bound at their address,
host arrays staged and counted) is tested with a DSL kernel, against numpy."""

import gc

import numpy as np
import pytest
import torch

import legato
import legato.lpu as lpu
from legato.targets.bertha.device import Device

BF16 = torch.bfloat16


@pytest.fixture(autouse=True)
def _fresh():
    lpu.reset()
    yield


def _delta(before, after) -> dict:
    return {k: getattr(after, k) - before[k] for k in after.KINDS}


def _snap(t) -> dict:
    return {k: getattr(t, k) for k in t.KINDS}


def test_a_chain_of_ops_copies_only_at_to_and_cpu():
    torch.manual_seed(0)
    a, w, b = torch.randn(16, 64), torch.randn(64, 32), torch.randn(32)
    tr = lpu.device().transfers
    start = _snap(tr)
    x, wl, bl = a.to("lpu"), w.to("lpu"), b.to("lpu")
    moved = _delta(start, tr)
    assert moved["to_device"] == a.nbytes + w.nbytes + b.nbytes
    assert moved["to_host"] == moved["staged"] == 0

    start = _snap(tr)
    launches, bound = lpu.device().launches, lpu.device().bound_bytes
    addr = lpu.address(wl)
    h = torch.tanh(x @ wl + bl)
    y = torch.softmax(h * 0.5, dim=-1).sum(dim=0)
    z = torch.exp(y - y.max())
    chain = _delta(start, tr)
    # every op ran as a kernel on the device: no byte of data crossed, nothing was staged
    assert chain["to_device"] == chain["to_host"] == chain["staged"] == 0, str(tr)
    assert chain["on_device"] == 0 and chain["launch"] > 0
    s = lpu.stats()
    assert s.kernel_calls == 9 and not s.cpu_ops, str(s)
    # nine launches on the device, each binding its operands and result where they lie
    assert lpu.device().launches - launches == 9
    assert lpu.device().bound_bytes - bound >= a.nbytes + w.nbytes + 16 * 32 * 4
    assert lpu.address(wl) == addr  # the weight stayed where it was

    start = _snap(tr)
    got = z.cpu()
    back = _delta(start, tr)
    assert back["to_host"] == got.nbytes and back["to_device"] == back["staged"] == 0
    ref_y = torch.softmax(torch.tanh(a @ w + b) * 0.5, dim=-1).sum(dim=0)
    torch.testing.assert_close(got, torch.exp(ref_y - ref_y.max()), rtol=1e-4, atol=1e-5)


def test_results_are_allocations_of_the_device_freed_with_their_tensors():
    dev = lpu.device()
    x = torch.randn(8, 128, device="lpu")
    gc.collect()
    live = dev.live
    y = torch.exp(x)
    assert dev.live == live + 1
    assert lpu.address(y) != lpu.address(x)
    # the kernel wrote the device allocation itself: its bytes are y's
    region = dev.region(y._buf)
    raw = region.data[: y.numel() * 4].view(np.float32).reshape(8, 128)
    np.testing.assert_array_equal(raw, y.cpu().numpy())
    addr = lpu.address(y)
    del y, raw, region
    gc.collect()
    assert dev.live == live
    again = torch.exp(x)  # the freed range is free again: first fit takes it or a lower one
    assert lpu.address(again) <= addr


def test_a_non_contiguous_operand_is_made_dense_on_the_device():
    a = torch.randn(32, 16)
    x = a.to("lpu")
    tr = lpu.device().transfers
    start = _snap(tr)
    y = torch.exp(x.t())
    d = _delta(start, tr)
    assert d["on_device"] == a.nbytes and d["to_device"] == d["to_host"] == d["staged"] == 0
    torch.testing.assert_close(y.cpu(), torch.exp(a.t()), rtol=1e-5, atol=1e-6)


def test_a_cpu_fallback_reads_its_operands_and_writes_its_results():
    x = torch.randn(6, 6, device="lpu")
    tr = lpu.device().transfers
    start = _snap(tr)
    with pytest.warns(UserWarning, match="falls back to run on the CPU"):
        y = torch.tril(x)
    d = _delta(start, tr)
    assert d["to_host"] == d["to_device"] == 6 * 6 * 4
    torch.testing.assert_close(y.cpu(), torch.tril(x.cpu()), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, BF16])
def test_scalars_are_kernel_arguments(dtype):
    a = torch.randn(4, 32, dtype=dtype)
    x = a.to("lpu")
    torch.mul(x, 3.0)  # compiles (or finds) the kernels of these signatures
    torch.add(x, 7.0)
    before = lpu.stats().kernels_compiled
    ys = [x * s for s in (0.5, 0.25, -2.0, 3)]
    adds = [x + s for s in (1.0, -4.0)]
    # one kernel for every value
    assert lpu.stats().kernels_compiled == before, str(lpu.stats())
    for y, s in zip(ys, (0.5, 0.25, -2.0, 3)):
        torch.testing.assert_close(y.cpu(), a * s, rtol=0, atol=0)
        assert y.dtype == dtype
    for y, s in zip(adds, (1.0, -4.0)):
        torch.testing.assert_close(y.cpu(), a + s, rtol=0, atol=0)
    # the Scalar overloads (decompositions make them) take the Tensor overload's kernel
    before = lpu.stats().kernels_compiled
    z = torch.ops.aten.mul.Scalar(x, 0.75)
    w = torch.ops.aten.add.Scalar(x, 2.0, alpha=1)
    assert lpu.stats().kernels_compiled == before, str(lpu.stats())
    torch.testing.assert_close(z.cpu(), a * 0.75, rtol=0, atol=0)
    torch.testing.assert_close(w.cpu(), a + 2.0, rtol=0, atol=0)


def test_a_scalar_bf16_does_not_hold_keeps_its_value_in_the_kernel():
    """0.1 is not a bf16: lifted to a bf16 argument it would be rounded before the multiply,
    which torch does not do, so it stays a constant of its own kernel (as before)."""
    a = torch.randn(4, 32, dtype=BF16)
    x = a.to("lpu")
    x * 0.1
    before = lpu.stats().kernels_compiled
    x * 0.3  # a value of its own: a kernel of its own
    assert lpu.stats().kernels_compiled == before + 1
    y = x * 0.1
    assert lpu.stats().kernels_compiled == before + 1  # its own kernel, cached
    torch.testing.assert_close(y.cpu().float(), (a * 0.1).float(), rtol=1.6e-2, atol=1e-3)


def test_cpu_and_lpu_operands_do_not_mix_but_cpu_scalars_do():
    x = torch.randn(3, 4, device="lpu")
    c = torch.randn(3, 4)
    for f in (lambda: x + c, lambda: c * x, lambda: torch.mm(x, c.t()), lambda: torch.tril(c + x)):
        with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device"):
            f()
    with pytest.raises(RuntimeError, match=r"aten\.add\.Tensor got a cpu tensor of shape \(3, 4\)"):
        x + c
    s = torch.tensor(2.5)  # a 0-d CPU tensor is a scalar, as on CUDA
    y = x * s
    assert y.device.type == "lpu"
    torch.testing.assert_close(y.cpu(), x.cpu() * 2.5, rtol=0, atol=0)
    # the explicit transfers still take either device
    x.copy_(c)
    torch.testing.assert_close(x.cpu(), c, rtol=0, atol=0)


def test_a_simple_backward_runs_on_lpu_and_matches_the_cpu():
    torch.manual_seed(0)
    a, w = torch.randn(4, 8), torch.randn(8, 3)
    x = a.to("lpu").requires_grad_()
    wl = w.to("lpu").requires_grad_()
    loss = (torch.tanh(x @ wl) * 2.0).sum()
    loss.backward()
    assert x.grad.device.type == "lpu" and wl.grad.device.type == "lpu"
    ac, wc = a.clone().requires_grad_(), w.clone().requires_grad_()
    (torch.tanh(ac @ wc) * 2.0).sum().backward()
    torch.testing.assert_close(
        loss.detach().cpu(), (torch.tanh(a @ w) * 2.0).sum(), rtol=1e-4, atol=1e-4
    )
    torch.testing.assert_close(x.grad.cpu(), ac.grad, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(wl.grad.cpu(), wc.grad, rtol=1e-3, atol=1e-4)
    s = lpu.stats()
    assert s.legato_ops["aten.mm.default"] == 3, str(s)  # forward, and both gradients


# -- the runtime on a device ----------------------------------------------------------------

F32 = legato.types.float("float32")


@legato.compile(backend="bertha")
def scale_add(
    x: legato.get_model().tensor_type(F32, [8, 64], "shared_dram"),
    y: legato.get_model().tensor_type(F32, [8, 64], "shared_dram"),
    out: legato.get_model().tensor_type(F32, [8, 64], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_core(0):
        a = legato.tensor.load(x, "sram")
        b = legato.tensor.load(y, "sram")
        legato.tensor.memcpy(out, a * 2.0 + b)


def _on(dev: Device, arr: np.ndarray) -> np.ndarray:
    buf = dev.allocate(arr.nbytes, "t")
    view = buf.array[: arr.nbytes].view(arr.dtype).reshape(arr.shape)
    view[...] = arr
    return view, buf  # the caller keeps `buf`: the allocation lives as long


def test_run_binary_binds_device_memory_at_its_address_and_stages_host_arrays():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 64)).astype(np.float32)
    b = rng.standard_normal((8, 64)).astype(np.float32)
    dev = Device(1 << 30)
    xa, xbuf = _on(dev, a)
    ya, ybuf = _on(dev, b)
    oa, obuf = _on(dev, np.zeros((8, 64), np.float32))
    with dev.active():
        scale_add(xa, ya, oa)
    np.testing.assert_array_equal(oa, a * np.float32(2) + b)
    assert dev.transfers.staged == 0 and dev.transfers.launch > 0
    assert dev.launches == 1 and dev.bound_bytes == 3 * a.nbytes
    # a host array in a device launch is staged: copied in, and back since it is written
    host_out = np.zeros((8, 64), np.float32)
    with dev.active():
        scale_add(xa, ya, host_out)
    np.testing.assert_array_equal(host_out, a * np.float32(2) + b)
    assert dev.transfers.staged == 2 * host_out.nbytes
    # the launch's temporary allocations are gone; the three tensors stay
    gc.collect()
    assert dev.live == 3
    # without a device, the same kernel runs on a fresh DRAM per call, as always
    other = np.zeros((8, 64), np.float32)
    scale_add(a, b, other)
    np.testing.assert_array_equal(other, a * np.float32(2) + b)


def test_a_device_allocation_is_freed_and_its_range_reused():
    dev = Device(1 << 20)
    first = dev.allocate(5000)
    second = dev.allocate(100)
    addr = first.addr
    assert second.addr >= addr + 8192  # 4 KiB aligned
    del first
    gc.collect()
    assert dev.allocate(4096).addr == addr
    from legato.errors import LegatoRuntimeError

    with pytest.raises(LegatoRuntimeError, match="shared DRAM exhausted allocating"):
        dev.allocate(2 << 20)


def test_factories_out_and_indexing_as_on_cuda():
    # factories whose composite resizes an out= tensor have kernels of their own
    torch.testing.assert_close(torch.eye(3, device="lpu").cpu(), torch.eye(3), rtol=0, atol=0)
    got = torch.arange(1, 10, 2, device="lpu")
    assert got.device.type == "lpu" and got.cpu().tolist() == [1, 3, 5, 7, 9]
    assert got.tolist() == [1, 3, 5, 7, 9]  # .tolist() copies to the host, as on CUDA
    a, b = torch.randn(6, 8), torch.randn(6, 8)
    x, y = a.to("lpu"), b.to("lpu")
    # out= runs the functional op's kernel (add.Tensor, not TorchScript's Scalar add.default)
    out = torch.empty_like(x)
    torch.add(x, y, out=out)
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)
    assert lpu.stats().legato_ops["aten.add.Tensor"] == 1 and not lpu.stats().cpu_ops
    # a CPU index tensor is taken, as on CUDA (uploaded for the op)
    idx = torch.tensor([0, 2, 5])
    torch.testing.assert_close(x[idx].cpu(), a[idx], rtol=0, atol=0)


def test_a_linears_transposed_weight_is_made_dense_once_per_version():
    torch.manual_seed(0)
    lin = torch.nn.Linear(32, 16, bias=False)
    a = torch.randn(4, 32)
    ref = lin(a).detach()
    m = lin.to("lpu")
    tr = lpu.device().transfers
    with torch.no_grad():
        x = a.to("lpu")
        first = _snap(tr)
        y1 = m(x)
        once = _delta(first, tr)["on_device"]
        second = _snap(tr)
        y2 = m(x)
        assert once == 32 * 16 * 4 and _delta(second, tr)["on_device"] == 0
        torch.testing.assert_close(y1.cpu(), ref, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(y2.cpu(), ref, rtol=1e-4, atol=1e-5)
        m.weight.mul_(2.0)  # an in-place update: a new version, a new dense copy
        third = _snap(tr)
        y3 = m(x)
        assert _delta(third, tr)["on_device"] == once  # made dense again
    torch.testing.assert_close(y3.cpu(), 2 * ref, rtol=1e-4, atol=1e-5)
