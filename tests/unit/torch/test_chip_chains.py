"""Chains of chip-scale kernels (issue 14, item 3: `LegatoGraphWrapper._chains`,
`kernelgen.generate_chain`): consecutive spmd nodes of a partition run as the phases of one
all-core kernel, a barrier between two, their activations through shared DRAM, while the
largest phase fits one core's sram and the chain's arguments stay within
`wrapper.CHAIN_ARGUMENTS`. Results match eager; every core executes instructions; the
kernel count of a layer is read from the placement summary."""

import re

import pytest
import torch

import legato.torch as lt
from bench.torch_path import _llama_layer
from legato.torch import kernelgen, wrapper
from tests.unit.torch.test_chip_fusion import Block
from tests.unit.torch.torch_backend_helpers import assert_close_bf16


def _compile(mod, **options):
    return torch.compile(
        mod,
        backend="legato",
        options={"legato.device": "bertha", "legato.strict": True, **options},
    )


def _matches_eager(*sizes) -> None:
    """`Block(*sizes)` in bf16 on one decode row through the backend (EVT0, strict): as
    eager."""
    torch.manual_seed(0)
    mod = Block(*sizes).bfloat16()
    x = torch.randn(1, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y = _compile(mod)(x)
        ref = mod(x)
    assert_close_bf16(y, ref)


def _every_core(mod, n=32):
    cores = {k: v for k, v in mod.kernel.last_run.instructions.items() if k.startswith("core")}
    assert len(cores) == n and all(v > 0 for v in cores.values()), cores


def _phases(mod) -> int:
    """The phases of a generated chain: barriers between phases, plus one."""
    return mod.gen.source.count("legato.sync.barrier()  # the previous phase's writes") + 1


def test_mlp_block_is_one_kernel_of_two_phases():
    """norm -> gate/up (+ SiLU * up) -> down (+ residual): the two spmd kernels of
    test_chip_fusion's block are one chain; SiLU(gate) * up goes through shared DRAM (a
    kernel extra, not an output)."""
    _matches_eager()
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert k.gen.spmd and _phases(k) == 2, k.gen.source
    _every_core(k)
    # the activation between the phases is an extra argument (allocated once), not an output
    assert len(k.gen.outputs) == 1 and any(sh == (1, 1024) for sh, _ in k.gen.extras), k.gen.extras


def test_chain_off_is_one_kernel_per_projection():
    torch.manual_seed(0)
    mod = Block().bfloat16()
    x = torch.randn(1, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y = _compile(mod, **{"legato.fuse_chains": False})(x)
        ref = mod(x)
    assert_close_bf16(y, ref)
    assert lt.last_summary().num_kernels == 2


def test_argument_budget_cuts_the_chain(monkeypatch):
    """A chain whose arguments would exceed `CHAIN_ARGUMENTS` is cut before the phase that
    passes it."""
    monkeypatch.setattr(wrapper, "CHAIN_ARGUMENTS", 4)
    _matches_eager()
    assert lt.last_summary().num_kernels == 2


def test_sram_budget_cuts_the_chain(monkeypatch):
    """A phase that would not fit one core's sram (here: an `onchip` larger than it) starts
    a new kernel."""
    w = None

    real = wrapper.LegatoGraphWrapper._phase_sram

    def big(self, group):
        nonlocal w
        w = self
        if any("down" in str(n.meta.get("stack_trace", "")) for n in group):
            return self.model.sram_size + 1
        return real(self, group)

    monkeypatch.setattr(wrapper.LegatoGraphWrapper, "_phase_sram", big)
    _matches_eager()
    assert w is not None and lt.last_summary().num_kernels == 2


def test_failing_chain_compiles_its_phases_apart(monkeypatch, caplog):
    real = kernelgen.generate_chain

    def failing(name, inputs, phases, *a, **kw):
        if len(phases) > 1:
            raise AssertionError("chain refused (test)")
        return real(name, inputs, phases, *a, **kw)

    monkeypatch.setattr(kernelgen, "generate_chain", failing)
    torch.manual_seed(0)
    mod = Block().bfloat16()
    x = torch.randn(1, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y = torch.compile(mod, backend="legato")(x)
        ref = mod(x)
    assert_close_bf16(y, ref)
    assert lt.last_summary().num_kernels == 2
    assert "fails to compile as one kernel" in caplog.text


@pytest.mark.parametrize("chains, kernels", [(True, 1), (False, 5)])
def test_decoder_layer_kernel_count(chains, kernels):
    """bench's plain-torch Llama layer at the tiny model's sizes (hidden 512, 4 heads, MLP
    1536, 256 cached tokens) in decode: 5 spmd kernels one per node (q/k/v + norm, attention +
    rotary + appends, o + residual, gate/up + norm + SiLU * up, down + residual); chained,
    one kernel of 5 phases. Outputs (the layer's and both appended caches) match eager; every
    kernel runs on every core."""
    layer, args = _llama_layer(512, 4, 1536, 256)(torch)
    with torch.no_grad():
        got = _compile(layer, **{"legato.fuse_chains": chains})(*args)
        ref = layer(*args)
    for g, r in zip(got, ref, strict=True):
        torch.testing.assert_close(g.float(), r.float(), rtol=2e-2, atol=2e-2)
    s = lt.last_summary()
    assert s.num_kernels == kernels and s.num_extern == 0, str(s)
    mods = wrapper.last_wrapper().kernel_modules()
    for m in mods:
        assert m.gen.spmd
        _every_core(m)
    assert sum(_phases(m) for m in mods) == 5


def test_next_phase_weight_tiles_load_in_the_phase_before():
    """down's first weight tiles (`chip_linear.first_tiles`, kernel inputs only) are loaded
    in the gate/up phase, before its prologue's steps and its call, not after the barrier."""
    _matches_eager()
    (k,) = wrapper.last_wrapper().kernel_modules()
    body = k.gen.source.split("with device.get_all_cores():", 1)[1].splitlines()
    pres = [i for i, ln in enumerate(body) if "pre_first_tiles" in ln]
    calls = [i for i, ln in enumerate(body) if "impl__cols" in ln]
    barrier = next(i for i, ln in enumerate(body) if "legato.sync.barrier()" in ln)
    steps = [i for i, ln in enumerate(body) if "impl_unary(" in ln or "impl_reduce(" in ln]
    # gate/up's own preload and down's, both before the norm's steps and gate/up's call
    assert len(pres) == 2 and len(calls) == 2, body
    assert max(pres) < min(steps) and max(pres) < calls[0] < barrier < calls[1], body


def _barriers(mod, cores: int) -> int:
    """The barriers the kernel's last run passed (the emulator's trace: one event per core)."""
    events = [e for e in mod.kernel.last_run.trace_events if e.get("name") == "barrier"]
    assert len(events) % cores == 0, len(events)
    return len(events) // cores


def test_evt1_down_projection_needs_no_split_k_barrier():
    """EVT1 (64 cores), the MLP block: down's 512 columns are a block of 8 on each core, its
    tiles preloaded in the gate/up phase, not K split over two cores with its f32 partials
    through DRAM and a barrier inside the phase (`chip_linear._decode_tiles`): the emulator
    passes one barrier, the one between the two phases, and no scratch is allocated. Matches
    eager."""
    from legato.jit.session import session

    torch.manual_seed(0)
    mod = Block().bfloat16()
    x = torch.randn(1, 512, dtype=torch.bfloat16)
    g = _compile(mod, **{"legato.device": "bertha-evt1"})
    with torch.no_grad():
        g(x)
        with session(trace=True):
            y = g(x)
        ref = mod(x)
    assert_close_bf16(y, ref)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert "linear_cols(tn=8, split=1), 4 tiles preloaded" in " ".join(k.info.nodes), k.info.nodes
    assert _phases(k) == 2 and _barriers(k, 64) == 1, k.gen.source
    assert not any(dt == torch.float32 for _, dt in k.gen.extras), k.gen.extras
    _every_core(k, 64)
    # every weight byte read once
    weight = 3 * 512 * 1024 * 2
    assert k.kernel.last_run.dram_bytes <= weight + 64 * (2 * 512 + 1024) * 2 * 2, (
        k.kernel.last_run.dram_bytes
    )


def test_whole_block_preloaded_when_it_fits():
    """The tiny Llama's MLP (hidden 512, MLP 1536) on EVT0: gate/up's two [256, 96] weight
    tiles a core (96 KiB, `chip_linear.WHOLE_PRELOAD_BYTES`) are both loaded ahead, before
    its RMSNorm prologue's steps, none after them; down's six as well, in the gate/up phase.
    Matches eager."""
    _matches_eager(512, 1536)
    (k,) = wrapper.last_wrapper().kernel_modules()
    nodes = " ".join(k.info.nodes)
    assert "linear_cols(2 projections, tn=48, split=1), 2 tiles preloaded" in nodes, nodes
    assert "linear_cols(tn=16, split=1), 6 tiles preloaded" in nodes, nodes
    _every_core(k)


def test_tiny_llama_decode_stack_is_one_kernel():
    """bench's tiny HF Llama (hidden 512, 4 layers, 256 cached tokens), one decode step: the
    embedding gather, the 4 layers and the final norm + lm_head are one all-core kernel, whose
    arguments (more than the 29 scalar registers hold) the program re-loads from an sram copy of
    its argument table (`backend-allocate-registers`). Logits match eager."""
    from bench.torch_path import _tiny_llama

    model, fresh = _tiny_llama(torch)
    with torch.no_grad():
        a, kw = fresh()
        got = _compile(model)(*a, **kw).logits
        a, kw = fresh()
        ref = model(*a, **kw).logits
    torch.testing.assert_close(got.float(), ref.float(), rtol=2e-2, atol=2e-2)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert k.gen.spmd and _phases(k) > 4 * 5, k.gen.source
    assert len(k.gen.inputs) + len(k.gen.outputs) + len(k.gen.extras) > 29
    _every_core(k)


def _row_phases(mod) -> int:
    """The row-local phases of a generated chain (`kernelgen.RowsPhase`): their block loops."""
    return sum(
        1
        for ln in mod.gen.source.splitlines()
        if ln.lstrip().startswith("for blk") and "in range(legato.core_id()," in ln
    )


@pytest.mark.parametrize("chains, kernels", [(True, 1), (False, 4)])
def test_prefill_block_norm_is_a_row_phase(chains, kernels):
    """test_chip_fusion's MLP block on 128 rows (a prefill): its RMSNorm is row-local work
    too large for a prologue (every core would load and normalize all 128 rows), and gate/up
    and down take the prefill form (`linear_rows_cols`), whose only fused epilogue is one of
    its own results (`Impl.epilogue_own`): SiLU(gate) * up, computed on each core's pieces on
    chip (gate and up never written: the gate/up kernel's DRAM bytes are the weights, x's
    copies and SiLU(gate) * up, not gate and up too); the residual add (a load of x) is
    row-local. Apart each is a kernel (the row-local ones row-split, `chip_rows`); chained
    they are the 4 phases of one kernel, 2 of them row-local (`kernelgen.RowsPhase`: each core
    its blocks of rows, then a barrier), with the norm's piece prologue off
    (`legato.fuse_pieces`; on: `test_prefill_norm_is_the_projections_piece_prologue`). Matches
    eager; every core runs."""
    torch.manual_seed(0)
    mod = Block().bfloat16()
    x = torch.randn(128, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y = _compile(mod, **{"legato.fuse_chains": chains, "legato.fuse_pieces": False})(x)
        ref = mod(x)
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
    s = lt.last_summary()
    assert s.num_kernels == kernels and s.num_extern == 0, str(s)
    mods = wrapper.last_wrapper().kernel_modules()
    for m in mods:
        assert m.gen.spmd
        _every_core(m)
    if chains:
        (k,) = mods
        assert _phases(k) == 4 and _row_phases(k) == 2, k.gen.source
        assert "def epi_" in k.gen.source and "silu" in k.gen.source.split("def epi_")[1]
    else:
        (gu,) = [m for m in mods if "linear_rows_cols(2 projections" in " ".join(m.info.nodes)]
        assert "silu" in " ".join(gu.info.nodes), gu.info.nodes
        run = gu.kernel.last_run
        weights = 2 * 512 * 1024 * 2
        h = 128 * 1024 * 2  # SiLU(gate) * up, written once
        x_copies = 32 // 8 * 128 * 512 * 2  # a group of 8 cores reads x once
        assert weights + h <= run.dram_bytes <= weights + h + x_copies + 16384, run.dram_bytes


@pytest.mark.parametrize("device", ["bertha", "bertha-evt1"])
def test_prefill_norm_is_the_projections_piece_prologue(device):
    """test_chip_fusion's MLP block on 128 rows (a prefill), both generations: the RMSNorm
    before gate/up is not a row phase of its own but gate/up's piece prologue
    (`Impl.rows_prologue`, `kernelgen.PiecePhase`): each core normalizes the rows of x it
    reads on chip (`def pro...` in the kernel, called by the projection with `pro=`), so the
    normalized x never goes through shared DRAM (one activation buffer less) and the chain
    has one phase (one barrier) less than with `legato.fuse_pieces` off: 3 phases (gate/up +
    norm, down, the residual add's row phase) against 4. Both match eager."""
    torch.manual_seed(0)
    mod = Block().bfloat16()
    x = torch.randn(128, 512, dtype=torch.bfloat16)
    got = {}
    for pieces in (True, False):
        with torch.no_grad():
            y = _compile(mod, **{"legato.device": device, "legato.fuse_pieces": pieces})(x)
            ref = mod(x)
        torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
        assert lt.last_summary().num_kernels == 1, str(lt.last_summary())
        (k,) = wrapper.last_wrapper().kernel_modules()
        _every_core(k, 32 if device == "bertha" else 64)
        got[pieces] = k
        torch._dynamo.reset()
    on, off = got[True].gen, got[False].gen
    assert _phases(got[False]) == 4 and _row_phases(got[False]) == 2, off.source
    assert _phases(got[True]) == 3 and _row_phases(got[True]) == 1, on.source
    assert on.source.count("pro=(") == 1 and "pro=(" not in off.source
    pro = on.source.split("def pro(")[1].split("@legato")[0]
    assert "rsqrt" in pro and "rsqrt" not in on.source.split("def graph")[1]
    assert len(on.extras) == len(off.extras) - 1, (on.extras, off.extras)


def test_tiny_llama_prefill_stack_is_one_kernel():
    """bench's tiny HF Llama (hidden 512, 4 layers) on a 128-token prompt without a cache (the
    `torch_tiny_llama_prefill` row): the embedding, the 4 layers and the final norm + lm_head
    are one all-core kernel of 23 phases (39 kernels before, 27 with the head views + rotary
    as a row phase of each layer). Per layer 5: q/k/v with the
    RMSNorm as its piece prologue (`Impl.rows_prologue`: each core normalizes the rows it
    reads; the first layer's cos/sin tables and mask, which the norm does not need, after the
    projection on every core's blocks of rows, no barrier of their own; the other layers' with
    the residual add before the norm), the attention with the head views + rotary on chip
    (`rows_attention_rotary`, `Impl.takes`), o with the transpose back to tokens as its piece prologue, gate/up with the residual add +
    RMSNorm as its piece prologue and SiLU(gate) * up as its epilogue (on chip,
    `Impl.epilogue_own`), down (the projections in the prefill form, `linear_rows_cols`); then
    the residual add + final norm (a row phase) and the lm_head. 12 piece prologues, 1 row
    phase and the first layer's row loop after q/k/v. Logits match eager."""
    from bench.torch_path import _tiny_llama_prefill

    model, fresh = _tiny_llama_prefill(torch)
    with torch.no_grad():
        a, kw = fresh()
        got = _compile(model)(*a, **kw).logits
        a, kw = fresh()
        ref = model(*a, **kw).logits
    torch.testing.assert_close(got.float(), ref.float(), rtol=2e-2, atol=2e-2)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (k,) = wrapper.last_wrapper().kernel_modules()
    assert k.gen.spmd and _phases(k) == 4 * 5 + 3 and _row_phases(k) == 1 + 1, k.gen.source
    assert k.gen.source.count("pro=(") == 4 * 3
    assert len(re.findall(r"impl_rows_attention_rotary(_\d+)?\(", k.gen.source)) == 4
    assert k.gen.source.count("def epi_") >= 4
    _every_core(k)


def test_row_phase_over_the_sram_budget_is_a_kernel_of_its_own(monkeypatch):
    """A row phase counts in the chain's on-chip budget as one block of each of its tensors
    (`chip_rows.block_bytes`); one that would not fit a core's sram (here: made larger than
    it) is not chained: of the prefill block's 4 phases the two row-local ones (the norm, the
    residual add) are kernels of their own, gate/up (+ SiLU(gate) * up, its epilogue) and down
    still one chain: 3 kernels, matching eager."""
    from legato.torch.library import chip_rows

    seen = []

    def big(*a, **kw):
        seen.append(a)
        return 4 * 1024 * 1024 * 1024

    monkeypatch.setattr(chip_rows, "block_bytes", big)
    torch.manual_seed(0)
    mod = Block().bfloat16()
    x = torch.randn(128, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        y = _compile(mod)(x)
        ref = mod(x)
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
    assert seen and lt.last_summary().num_kernels == 3, str(lt.last_summary())
