"""`rows_attention_shared`: the all-core prefill attention whose K and V of a key/value head are
read from DRAM once (a piece a core) and shared core to core, against torch's eager SDPA (and
its CPU flash op's logsumexp), and against `rows_attention` (every core loads its head's whole
K and V) in the emulator's DRAM bytes. The resolver's choice between them on fx nodes."""

import math

import pytest
import torch
from test_chip_attention import (
    NC,
    _all_cores_ran,
    _check,
    _ctx,
    _reference,
    _sdpa_node,
    four_cores,
    run_append,
    run_rows,
    tt,
)

import legato
from legato.torch.library import chip_attention as ca


def run_shared(q, k, v, mask, causal, rows, mask_b=False, mask_h=False, diag=False):
    """(out, lse, the emulator's RunResult) of rows_attention_shared on NC cores."""
    nb, nh, s, d = q.shape
    out, lse = torch.zeros_like(q), torch.zeros(nb, nh, s)
    m = mask if mask is not None else torch.zeros(1, dtype=q.dtype)
    has_mask, scale = mask is not None, 1 / math.sqrt(d)

    @legato.compile(backend=four_cores)
    def prefill(qa: tt(q), ka: tt(k), va: tt(v), ma: tt(m), o: tt(out), ls: tt(lse)):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            ca.rows_attention_shared(
                qa, ka, va, ma, scale, causal, has_mask, mask_b, mask_h, rows, diag, o, ls
            )

    prefill(q, k, v, m, out, lse)
    _all_cores_ran(prefill)
    return out, lse, prefill.last_run


def _nbytes(*ts):
    return sum(t.numel() * t.element_size() for t in ts)


def _check_against_both(q, k, v, mask, causal, rows, eager_ulps=8, **flags):
    """The shared form against eager (as the row blocks' own tolerance) and against
    rows_attention on the same cores; returns the shared run."""
    out, lse, run = run_shared(q, k, v, mask, causal, rows, **flags)
    _check(out, lse, *_reference(q, k, v, mask, causal), ulps=eager_ulps)
    ref_out, ref_lse = run_rows(q, k, v, mask, causal, rows, **flags)
    # the same p (one max over every key), o summed piece by piece and l in another order:
    # within an ulp or two of the one-piece form
    _check(out, lse, ref_out, ref_lse, ulps=2)
    return run


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_shared_causal_prefill_gqa_matches_torch(dtype):
    # 2 query heads on one KV head, 2 items of one 16-row block each per head: the 4 cores
    # share the KV head, 16 keys a piece; the causal rows at each piece's (runtime) keys
    torch.manual_seed(4)
    q = torch.randn(1, 2, 64, 32, dtype=dtype)
    k, v = (torch.randn(1, 1, 64, 32, dtype=dtype) for _ in range(2))
    _check_against_both(q, k, v, None, True, rows=16)


def test_shared_causal_prefill_two_blocks_an_item():
    # one head of 8 blocks of 8 rows: 4 items of 2 blocks (unrolled), the pieces reused by both
    torch.manual_seed(7)
    dt = torch.bfloat16
    q = torch.randn(1, 1, 64, 32, dtype=dt)
    k, v = (torch.randn(1, 1, 64, 32, dtype=dt) for _ in range(2))
    _check_against_both(q, k, v, None, True, rows=8)


def test_shared_prefill_with_additive_mask_per_head():
    # 2 heads, 2 items each: pairs of cores share their head's 40 keys (pieces of 20), the
    # mask's rows of each piece's keys taken from its on-chip rows at a runtime offset
    torch.manual_seed(6)
    dt = torch.bfloat16
    q = torch.randn(1, 2, 32, 32, dtype=dt)
    k, v = (torch.randn(1, 2, 40, 32, dtype=dt) for _ in range(2))
    mask = torch.randn(1, 2, 32, 40, dtype=dt)
    mask[..., 30:] = -math.inf  # the second piece's last 10 keys masked for every row
    _check_against_both(q, k, v, mask, False, rows=8, mask_h=True)


def test_shared_prefill_reads_k_and_v_from_dram_once():
    # 1 query head of 4 items (one a core): rows_attention loads the whole K and V on every
    # core (4 copies), the shared form one piece a core (one copy); the emulator's DRAM bytes
    # are exactly q, K, V, the mask rows, out and lse once
    torch.manual_seed(8)
    dt = torch.bfloat16
    q = torch.randn(1, 1, 64, 64, dtype=dt)
    k, v = (torch.randn(1, 1, 128, 64, dtype=dt) for _ in range(2))
    mask = torch.randn(1, 1, 64, 128, dtype=dt)
    out, lse, shared = run_shared(q, k, v, mask, False, rows=16)
    _check(out, lse, *_reference(q, k, v, mask), ulps=8)
    assert shared.dram_bytes == _nbytes(q, k, v, mask, out, lse)

    def rows_run():
        nb, nh, s, d = q.shape
        o, ls = torch.zeros_like(q), torch.zeros(nb, nh, s)

        @legato.compile(backend=four_cores)
        def prefill(qa: tt(q), ka: tt(k), va: tt(v), ma: tt(mask), oa: tt(o), la: tt(ls)):
            device = legato.get_context().get_device()
            with device.get_all_cores():
                ca.rows_attention(
                    qa, ka, va, ma, 1 / math.sqrt(d), False, True, False, False, 16, 128, oa, la
                )

        prefill(q, k, v, mask, o, ls)
        return prefill.last_run

    unshared = rows_run()
    assert unshared.dram_bytes - shared.dram_bytes == (NC - 1) * _nbytes(k, v)


def test_resolver_shares_kv_when_the_items_are_the_cores():
    # the tiny Llama prefill's attention (4 heads of 128 rows x 128 keys, D 128): 32 cores =
    # 4 heads x 8 blocks of 16 rows, each head's 8 cores share its K and V (16 keys a piece)
    q = torch.randn(1, 4, 128, 128, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_sdpa_node(q, q, q, is_causal=True), _ctx(32))
    assert impl.fn is ca.rows_attention_shared and impl.args[5:] == (True, False) + (
        False,
        False,
        16,
        False,
    )
    assert "shared by 8 cores" in impl.name
    # EVT1's 64 cores: 16 blocks of 8 rows a head, pieces of 8 keys
    impl = ca.resolve_chip_sdpa(_sdpa_node(q, q, q, is_causal=True), _ctx(64))
    assert impl.fn is ca.rows_attention_shared and impl.args[-2] == 8
    # keys that do not split into the 8 pieces, or more than one KV block of torch's: every
    # core loads its head's K and V (rows_attention)
    k = torch.randn(1, 4, 132, 128, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_sdpa_node(q, k, k), _ctx(32))
    assert impl.fn is ca.rows_attention
    qlong = torch.randn(1, 4, 1024, 64, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_sdpa_node(qlong, qlong, qlong, is_causal=True), _ctx(32))
    assert impl.fn is ca.rows_attention


@pytest.mark.parametrize("on_chip", [False, True], ids=["dram", "onchip"])
def test_decode_partials_go_core_to_core(on_chip):
    # one KV group (2 query heads) split over the 4 cores, one item a core: the partials go
    # core to core (`_finish_shared`), so DRAM sees only q, the cache read once, the new rows,
    # the appended caches, out and lse (no scratch round trip: 4 partials of 2 x 66 f32
    # written and read back through DRAM before)
    torch.manual_seed(13)
    dt = torch.bfloat16
    q = torch.randn(1, 2, 1, 64, dtype=dt)
    ko, vo = (torch.randn(1, 1, 128, 64, dtype=dt) for _ in range(2))
    kn, vn = (torch.randn(1, 1, 1, 64, dtype=dt) for _ in range(2))
    out, lse, k_all, v_all, run = run_append(q, ko, kn, vo, vn, NC, on_chip=on_chip)
    k, v = torch.cat([ko, kn], 2), torch.cat([vo, vn], 2)
    assert torch.equal(k_all, k) and torch.equal(v_all, v)
    # four chunks of 32 keys, each with its own max (torch: one block of 129): as the split
    # form through the DRAM scratch, a few elements 5-8 ulps from eager
    _check(out, lse, *_reference(q, k, v), ulps=8)
    # every core reads q (its group's query heads), and with `on_chip` the new rows too (the
    # harness loads them on every core, as a fused prologue computes them on every core)
    copies = NC * _nbytes(q) + (NC if on_chip else 1) * _nbytes(kn, vn)
    assert run.dram_bytes == copies + _nbytes(ko, vo, k_all, v_all, out, lse)


def test_shared_prefill_small_pieces_concatenated():
    # 32 keys over the 4 cores: pieces of 8 keys (fewer than SHARE_CAT_KEYS), their scores
    # concatenated in the received order before one softmax; causal, then a padding mask
    torch.manual_seed(14)
    dt = torch.bfloat16
    q = torch.randn(1, 1, 64, 32, dtype=dt)
    k, v = (torch.randn(1, 1, 32, 32, dtype=dt) for _ in range(2))
    assert 32 // NC < ca.SHARE_CAT_KEYS
    _check_against_both(q, k, v, None, True, rows=8)
    mask = torch.zeros(1, 1, 64, 32, dtype=dt)
    mask[..., :5] = -math.inf  # left padding: part of the first piece
    mask[:, :, 40:, 27:] = -2.0
    # one element 10.25 ulps from eager: rows_attention's result, bit for bit, too (eager's
    # vectorized exp rounds a p differently)
    _check_against_both(q, k, v, mask, False, rows=8, eager_ulps=12)
