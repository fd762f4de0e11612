"""A causal mask passed explicitly (transformers' sdpa attention builds it in the graph from
`arange`s and comparisons): `chip_attention.causal_attention_masks` recognizes it exactly (a
constant of the graph equal to torch's top-left causal mask, nothing else), and
`rows_attention_shared`'s diagonal form then reads only the mask's diagonal block and one row
per core, against torch's eager SDPA, the full-mask form and the DRAM bytes. A padding mask,
a sliding window, a mask that is a graph input: not recognized, the whole mask is read."""

import pytest
import torch
import torch.nn.functional as F
from test_chip_attention import NC, _check, _ctx, _reference
from test_chip_attention_shared import run_shared

from legato.torch.library import chip_attention as ca

NEG = float("-inf")


def _causal(s, lk, dtype=torch.bfloat16):
    i = torch.arange(s)[:, None]
    j = torch.arange(lk)[None, :]
    return torch.zeros(s, lk, dtype=dtype).masked_fill(j > i, NEG)


def test_is_causal_mask_exact():
    m = _causal(8, 8)
    assert ca.is_causal_mask(m, 8, 8)
    assert ca.is_causal_mask(m[None, None].expand(2, 3, 8, 8), 8, 8)
    # a padded batch row (key 0 masked for one batch), a sliding window of 4 keys, another
    # fill value (HF's eager min), a bottom-right mask (a cached prefix), one row changed
    pad = m[None, None].repeat(2, 1, 1, 1)
    pad[1, :, :, 0] = NEG
    window = m.masked_fill(torch.arange(8)[None, :] < torch.arange(8)[:, None] - 3, NEG)
    low = torch.zeros(8, 8).masked_fill(m == NEG, torch.finfo(torch.float32).min)
    bottom_right = torch.zeros(4, 8).masked_fill(
        torch.arange(8)[None, :] > torch.arange(4)[:, None] + 4, NEG
    )
    one = m.clone()
    one[5, 6] = 0.0
    for x, s, lk in ((pad, 8, 8), (window, 8, 8), (low, 8, 8), (bottom_right, 4, 8), (one, 8, 8)):
        assert not ca.is_causal_mask(x, s, lk)
    # a bool mask (True: attend), a mask that broadcasts over the query rows
    assert not ca.is_causal_mask(m == 0, 8, 8)
    assert not ca.is_causal_mask(m[7:], 8, 8)
    # top-left with fewer keys than rows is torch's causal mask too
    assert ca.is_causal_mask(m[:, :4], 8, 4)


def _sdpa_graph(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(fn, tracing_mode="fake")(*args)
    (node,) = [n for n in gm.graph.nodes if n.target is ca.SDPA_CPU]
    return gm, node


def _hf_like_mask(s, dtype):
    """transformers' masking_utils in the graph: (kv <= q) & (the same packed sequence), made
    0 / -inf by `where`."""
    pos = torch.arange(s)
    q_idx, kv_idx = pos[None, None, :, None], pos[None, None, None, :]
    seq = torch.cumsum(torch.cat([pos[:1] - 1, pos]).diff() != 1, -1)
    keep = (kv_idx <= q_idx) & (seq[q_idx] == seq[kv_idx])
    return torch.where(keep.expand(1, -1, s, s), 0.0, NEG).to(dtype)


@pytest.mark.parametrize("window", [None, 4], ids=["causal", "window"])
def test_graph_pass_marks_a_constant_causal_mask_only(window):
    s, dt = 16, torch.bfloat16
    q = torch.randn(1, 2, s, 32, dtype=dt)

    def fn(q, k, v):
        m = _hf_like_mask(s, dt)
        if window is not None:
            i = torch.arange(s)
            m = m.masked_fill(i[None, :] < i[:, None] - (window - 1), NEG)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    gm, node = _sdpa_graph(fn, q, q, q)
    before = [(n.op, n.target, n.args, n.kwargs) for n in gm.graph.nodes]
    assert ca.causal_attention_masks(gm) is False  # the graph is unchanged
    assert [(n.op, n.target, n.args, n.kwargs) for n in gm.graph.nodes] == before
    assert node.meta.get(ca.CAUSAL_META, False) is (window is None)


def test_graph_pass_leaves_a_mask_input_alone():
    # a runtime mask (a graph input: the user's attention_mask) is never assumed causal, even
    # when its example value is
    q = torch.randn(1, 2, 16, 32, dtype=torch.bfloat16)
    mask = _causal(16, 16)[None, None]
    gm, node = _sdpa_graph(
        lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m), q, mask
    )
    ca.causal_attention_masks(gm)
    assert ca.CAUSAL_META not in node.meta


def _marked_node(q, k):
    s = q.shape[2]
    gm, node = _sdpa_graph(
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=_hf_like_mask(s, q.dtype), enable_gqa=True
        ),
        q,
        k,
        k,
    )
    ca.causal_attention_masks(gm)
    return node


def test_resolver_takes_the_diagonal_form():
    # the tiny Llama prefill's attention on EVT0's 32 cores: 4 heads x 8 blocks of 16 rows,
    # pieces of 16 keys: each core's rows are its own piece's keys
    q = torch.randn(1, 4, 128, 128, dtype=torch.bfloat16)
    node = _marked_node(q, q)
    assert node.meta[ca.CAUSAL_META]
    impl = ca.resolve_chip_sdpa(node, _ctx(32))
    assert impl.fn is ca.rows_attention_shared and impl.args[-1] is True
    assert "diagonal blocks" in impl.name
    # EVT1's 64 cores: pieces of 8 keys (concatenated before the softmax): the full-mask form
    impl = ca.resolve_chip_sdpa(node, _ctx(64))
    assert impl.fn is ca.rows_attention_shared and impl.args[-1] is False
    # GQA (2 query heads a KV head): a core's rows are not its own piece's keys
    k = torch.randn(1, 2, 128, 128, dtype=torch.bfloat16)
    impl = ca.resolve_chip_sdpa(_marked_node(q, k), _ctx(32))
    assert impl.args[-1] is False


def _causal_case(nb=1, heads=1, s=64, d=32, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(nb, heads, s, d, generator=g).to(dtype)
    k, v = (torch.randn(nb, heads, s, d, generator=g).to(dtype) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("mdim", [2, 4])
def test_diagonal_form_matches_torch_and_the_full_mask(dtype, mdim):
    # one head on the NC = 4 cores: 4 blocks of 16 rows, pieces of 16 keys
    q, k, v = _causal_case(dtype=dtype, seed=mdim)
    mask = _causal(64, 64, dtype)
    if mdim == 4:
        mask = mask[None, None]
    assert ca.is_causal_mask(mask, 64, 64)
    out, lse, run = run_shared(q, k, v, mask, False, 16, diag=True)
    _check(out, lse, *_reference(q, k, v, mask, False), ulps=8)
    _check(out, lse, *_reference(q, k, v, None, True), ulps=8)
    full_out, full_lse, full_run = run_shared(q, k, v, mask, False, 16)
    # the same scores plus the same 0 / -inf (the block's last row gives a wholly visible or
    # masked piece's keys the value every row of it has): bit for bit
    assert torch.equal(out, full_out) and torch.equal(lse, full_lse)
    # each core reads the diagonal block [16, 16] and one row [1, 64], not its rows [16, 64]
    es = mask.element_size()
    assert full_run.dram_bytes - run.dram_bytes == NC * (16 * 64 - 16 * 16 - 64) * es


def test_diagonal_form_per_batch_mask():
    # two batches, a mask given per batch (both causal): 2 batches x 2 blocks of 32 rows
    q, k, v = _causal_case(nb=2, s=64, seed=9)
    mask = _causal(64, 64)[None, None].repeat(2, 1, 1, 1)
    out, lse, _ = run_shared(q, k, v, mask, False, 32, mask_b=True, diag=True)
    _check(out, lse, *_reference(q, k, v, mask, False), ulps=8)


def test_padded_mask_takes_the_whole_mask_and_stays_right():
    # a causal mask with a padded key: not causal, so the full-mask form, right against eager
    q, k, v = _causal_case(seed=3)
    mask = _causal(64, 64)[None, None].clone()
    mask[..., 1:, 0] = NEG
    assert not ca.is_causal_mask(mask, 64, 64)
    out, lse, _ = run_shared(q, k, v, mask, False, 16)
    _check(out, lse, *_reference(q, k, v, mask, False), ulps=8)


def test_hf_prompt_end_to_end():
    # transformers' LlamaForCausalLM (4 heads of 128, a 128-token prompt) through
    # torch.compile on 32 cores: the diagonal form is taken and the logits match eager
    transformers = pytest.importorskip("transformers")
    from legato.torch import wrapper

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        hidden_size=512,
        intermediate_size=256,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=256,
        max_position_embeddings=256,
    )
    model = transformers.LlamaForCausalLM(cfg).bfloat16().eval()
    ids = torch.randint(0, 256, (1, 128), generator=torch.Generator().manual_seed(1))
    torch._dynamo.reset()
    g = torch.compile(model, backend="legato", options={"legato.device": "bertha"})
    with torch.no_grad():
        got = g(ids, use_cache=False).logits
        want = model(ids, use_cache=False).logits
    impls = [d.impl for d in wrapper.last_wrapper().decisions.values() if d.impl is not None]
    # (its q and k are HF's rotary of the projections' head views: the rotary form)
    attn = [i for i in impls if i.fn in (ca.rows_attention_shared, ca.rows_attention_rotary)]
    assert len(attn) == 1 and attn[0].args[-1] is True, [i.name for i in impls]
    assert torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2)
