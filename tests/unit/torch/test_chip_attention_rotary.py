"""The prefill attention's rotary form (`chip_attention.rows_attention_rotary`, session 19):
when q and k are HF's rotary embedding of head views of projection results and nothing else
reads those nodes (`_rotary_sources`), the attention takes them over (`Impl.takes`): each core
loads its head's rows straight from the projections' [S, H * D] results and rotates its query
rows and its K piece on chip, so no row phase writes the rotated heads to shared DRAM before
it. Against `rows_attention_shared` on torch's own rotary (bit for bit), against eager through
torch.compile on both generations, with the chain's phase count; a rotated K that is also
returned (a KV cache) keeps the form without it."""

import pytest
import torch
import torch.nn.functional as F
from test_chip_attention import _all_cores_ran, four_cores, tt
from test_chip_attention_shared import run_shared

import legato
import legato.torch as lt
from legato.torch import wrapper
from legato.torch.library import chip_attention as ca

HEADS, D, S = 4, 128, 128


def _rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


def _tables(s, d, dtype=torch.bfloat16):
    """HF's cos / sin tables [1, S, D] (f32 angles, cast to the activations' dtype)."""
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    ang = torch.arange(s).float()[:, None] * inv[None, :]
    emb = torch.cat((ang, ang), dim=-1)[None]
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _heads(y, h):
    s = y.shape[0]
    return y.view(1, s, h, -1).transpose(1, 2)


def _rope(x, cos, sin):
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return (x * c) + (_rotate_half(x) * s)


@pytest.mark.parametrize("heads, kv, s, rows", [(4, 4, 64, 16), (2, 2, 64, 8), (4, 2, 64, 16)])
def test_rotary_form_matches_the_shared_form_on_torchs_rotary(heads, kv, s, rows):
    """rows_attention_rotary on the flat projection results and cos / sin equals
    rows_attention_shared on the heads torch rotated (the same single-core implementations
    of mul / neg / cat / add: the same bits), causal, on 4 cores: query rows among the core's
    own K piece's keys (their cos / sin rows reused) and, with 2 query heads a KV head, not
    (loaded for them)."""
    torch.manual_seed(3)
    dt, d = torch.bfloat16, 32
    yq = torch.randn(s, heads * d, dtype=dt)
    yk, yv = (torch.randn(s, kv * d, dtype=dt) for _ in range(2))
    cos, sin = _tables(s, d)
    q, k = _rope(_heads(yq, heads), cos, sin), _rope(_heads(yk, kv), cos, sin)
    v = _heads(yv, kv)
    want, want_lse, _ = run_shared(q.contiguous(), k.contiguous(), v.contiguous(), None, True, rows)
    out, lse = torch.zeros(1, heads, s, d, dtype=dt), torch.zeros(1, heads, s)
    cu, su = cos.unsqueeze(1).contiguous(), sin.unsqueeze(1).contiguous()
    m = torch.zeros(1, dtype=dt)

    @legato.compile(backend=four_cores)
    def prefill(
        qa: tt(yq), ka: tt(yk), va: tt(yv), ca_: tt(cu), sa: tt(su), ma: tt(m), o: tt(out),
        ls: tt(lse),
    ):  # fmt: skip
        device = legato.get_context().get_device()
        with device.get_all_cores():
            ca.rows_attention_rotary(
                qa, ka, va, ca_, sa, ma, d**-0.5, True, False, False, False, rows,
                (heads, kv, d), False, o, ls,
            )  # fmt: skip

    prefill(yq, yk, yv, cu, su, m, out, lse)
    _all_cores_ran(prefill)
    assert torch.equal(out, want) and torch.equal(lse, want_lse)


class RopeAttention(torch.nn.Module):
    """HF Llama's attention block without its norm: q/k/v projections, their head views,
    the rotary of q and k, causal SDPA, the transpose back and o. `keep_k`: the rotated k
    is returned too (as a KV cache stores it)."""

    def __init__(self, keep_k=False):
        super().__init__()
        h = HEADS * D
        self.q, self.k, self.v, self.o = (torch.nn.Linear(h, h, bias=False) for _ in range(4))
        self.keep_k = keep_k

    def forward(self, x, cos, sin):
        q = _rope(self.q(x).view(1, S, HEADS, D).transpose(1, 2), cos, sin)
        k = _rope(self.k(x).view(1, S, HEADS, D).transpose(1, 2), cos, sin)
        v = self.v(x).view(1, S, HEADS, D).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = self.o(a.transpose(1, 2).reshape(1, S, HEADS * D))
        return (y, k) if self.keep_k else y


def _run(mod, device, *args):
    torch._dynamo.reset()
    g = torch.compile(
        mod, backend="legato", options={"legato.device": device, "legato.strict": True}
    )
    with torch.no_grad():
        got, want = g(*args), mod(*args)
    s = lt.last_summary()
    assert s.num_kernels == 1 and s.num_extern == 0, str(s)
    (k,) = wrapper.last_wrapper().kernel_modules()
    impls = [d.impl for d in wrapper.last_wrapper().decisions.values() if d.impl is not None]
    return got, want, k, [i.fn for i in impls]


def _phases(mod) -> int:
    return mod.gen.source.count("legato.sync.barrier()  # the previous phase's writes") + 1


@pytest.mark.parametrize("device", ["bertha", "bertha-evt1"])
def test_rotary_is_taken_by_the_attention(device):
    """Through torch.compile on both generations: the block is one kernel of 4 phases (q/k/v,
    with the cos / sin views after it on every core's rows; the attention with the rotary and
    head views on chip; o with the transpose back as its piece prologue; the output's view, a
    row phase), with no row phase between q/k/v and the attention; the rotated heads
    never go through shared DRAM (no activation buffer of [1, H, S, D] besides the
    attention's output); matches eager. With the rotated k also returned, the attention is
    the shared form, the rotary a row phase (5 phases), matching eager too."""
    torch.manual_seed(0)
    x = torch.randn(1, S, HEADS * D, dtype=torch.bfloat16)
    cos, sin = _tables(S, D)
    got, want, k, fns = _run(RopeAttention().bfloat16(), device, x, cos, sin)
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)
    assert ca.rows_attention_rotary in fns and ca.rows_attention_shared not in fns
    assert _phases(k) == 4, k.gen.source
    heads = [e for e in k.gen.extras if tuple(e[0]) == (1, HEADS, S, D)]
    assert len(heads) == 1, k.gen.extras  # the attention's output only
    assert "impl_rows_attention_rotary(" in k.gen.source
    assert "impl_concat" not in k.gen.source.split("def graph")[1]

    got, want, k, fns = _run(RopeAttention(keep_k=True).bfloat16(), device, x, cos, sin)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)
    assert ca.rows_attention_shared in fns and ca.rows_attention_rotary not in fns
    assert _phases(k) == 5, k.gen.source
