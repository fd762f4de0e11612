"""A decoder layer whose single-core projections do not fit one core's mpu_buffer together
(issue 14, session 19): a Llama-shaped layer at hidden 256, 2 heads, MLP 256, 128 cached tokens
in decode. Its [256, 256] projections (one K-tile, 256 columns: no split-K nor tile-range
tiling over 32 or 64 cores) ran on core 0, as core-0 phases of the layer's chain
(`wrapper._serial_phase`), their prepared t(W) (128 KiB each) loaded into core 0's mpu_buffer.
EVT0's 256 KiB does not hold q, k and v (nor o, gate, up and down) at once: the segment was a
single-core kernel of its own that could not compile, bisected until 4 of the 7 matmuls ran
eagerly and their prepared t(W), left without their reader, failed as kernels of their own
("an MPU weight prepared once per parameter version is read by mm_2 in another kernel") and ran
eagerly too: 4 kernels, half of the matmul FLOPs on the host. Now such a segment is cut into
core-0 phases whose weights fit (`wrapper._serial_runs`), and if a matmul still runs eagerly
after a failed compile, its t(W) is a view on the host (`wrapper._host_views`), not a second
culprit. Since the same session the projections are chip-scale at this shape
(`chip_linear._decode_tiles`: a block of n / p columns on each core, down to
`MIN_STEP_TN`); the single-core placement is tested with that limit raised."""

import pytest
import torch

import legato.torch as lt
from bench.torch_path import _llama_layer
from legato.torch import wrapper
from legato.torch.library import chip_linear

SHAPE = (256, 2, 256, 128)  # hidden, heads, MLP, cached tokens
EAGER_VIEW = "a view of a graph input that only eagerly run nodes read"


def _run(target, options=None):
    """(outputs, eager outputs, summary) of the layer's second call compiled for `target`."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    mod, args = _llama_layer(*SHAPE)(torch)
    opts = {"legato.device": target, **(options or {})}
    g = torch.compile(mod, backend="legato", options=opts)
    with torch.no_grad():
        g(*args)
        got = g(*args)
        ref = mod(*args)
    return got, ref, lt.last_summary()


def _check(got, ref):
    # the layer's chain of bf16 roundings (as bench/torch_path.py's layer rows check it)
    for y, r in zip(got, ref, strict=True):
        torch.testing.assert_close(y.float(), r.float(), rtol=2e-2, atol=2e-2)


def _transposes(summary):
    return [e for e in summary.extern if e.op == "aten.t.default"]


def _single_core_projections(monkeypatch):
    """The placement before `MIN_STEP_TN`: the layer's projections on core 0."""
    monkeypatch.setattr(chip_linear, "MIN_STEP_TN", 1 << 30)


@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_layer_is_one_kernel_with_every_prepared_weight(target, monkeypatch):
    _single_core_projections(monkeypatch)
    # strict: a kernel that fails to compile raises instead of running eagerly
    got, ref, s = _run(target, {"legato.strict": True})
    _check(got, ref)
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    assert s.matmul_flop_share == 1.0, str(s)
    (mod,) = wrapper.last_wrapper().kernel_modules()
    prepared = [n for n in mod.info.nodes if "prepared from" in n]
    assert len(prepared) == 7, mod.info.nodes  # q, k, v, o, gate, up, down
    assert mod.layout_count == 7  # laid out on the first call only
    # core 0 runs the projections in phases whose MPU weights fit its mpu_buffer: EVT0's
    # 256 KiB holds two of the 128 KiB weights (q and k; v; o and gate; up and down), EVT1's
    # 512 KiB four (q, k and v; o, gate, up and down)
    assert mod.gen.source.count("# core 0") == (4 if target == "bertha" else 2), mod.gen.source


def test_an_eager_matmul_leaves_its_weight_on_the_host(monkeypatch):
    """Without the cut into phases that fit (simulated), the segment's kernel fails and the
    bisection makes matmuls eager; each one's t(W) is then a free view on the host, never a
    prepared step that fails in another kernel."""
    _single_core_projections(monkeypatch)
    monkeypatch.setattr(wrapper.LegatoGraphWrapper, "_serial_runs", lambda self, seg, inside: None)
    got, ref, s = _run("bertha")
    _check(got, ref)
    eager_mm = [e for e in s.extern if e.op == "aten.mm.default"]
    assert eager_mm and all(e.reason.startswith("kernel failed: ") for e in eager_mm), str(s)
    ts = _transposes(s)
    assert len(ts) == len(eager_mm), str(s)
    assert all(e.reason.startswith(EAGER_VIEW) for e in ts), str(s)


@pytest.mark.parametrize("target", ["bertha", "bertha-evt1"])
def test_layer_projections_on_every_core(target):
    """The projections as chip-scale linears (q/k/v and gate/up grouped): one kernel, every
    t(W) folded into a parameter layout, no matmul left on core 0."""
    got, ref, s = _run(target, {"legato.strict": True})
    _check(got, ref)
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    assert s.matmul_flop_share == 1.0, str(s)
    (mod,) = wrapper.last_wrapper().kernel_modules()
    nodes = mod.info.nodes
    assert sum("folded into the parameter layout" in n for n in nodes) == 7, nodes
    assert not any("aten.matmul" in n for n in nodes), nodes
    assert sum("chip_linear." in n for n in nodes) == 4, nodes  # q/k/v, o, gate/up, down
    # a block of 256 / cores columns of each projection on every core (EVT0 8, EVT1 4)
    tn = 256 // (32 if target == "bertha" else 64)
    for form in (f"(3 projections, tn={tn}, ", f"(2 projections, tn={tn}, ", f"(tn={tn}, "):
        assert any(f"linear_cols{form}" in n for n in nodes), nodes
