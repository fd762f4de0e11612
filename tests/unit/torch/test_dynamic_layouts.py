"""Slices, splits, selects, cats and transposes over a dynamic dim (issue 13 item 1: a
resolver never accepts what the compiler then refuses). torch.compile's default dynamic
shapes make a prompt's length dynamic on its second call; the compiler lays strided copies out
with static strides only and transposes only past static leading dims, and
`legato.torch.capabilities.part_copy` / `transpose_steps` answer that before the resolvers
accept. Each case is checked both ways against the compiler itself: with the answers, strict
mode compiles (a refused node runs eagerly with the compiler's reason) and matches eager;
without them (the resolvers accept), strict mode raises the compiler's error exactly for the
cases the answers refuse."""

import pytest
import torch

import legato.torch as lt
from legato.torch import capabilities

STRICT = {"legato.strict": True}
CONSERVATIVE = 2  # refused by the answer, though the compiler takes this one

# name -> (function, input shape with None for the dynamic dim, 1 when the compiler refuses it)
CASES = {
    # rotary's x[..., :d/2] of [1, heads, ?S, d]: heads' stride is ?S * d
    "slice_last_dim_under_a_dynamic_dim": (lambda x: (x * 2)[..., :8] + 1, (1, 4, None, 16), 1),
    "slice_last_dim_of_a_dynamic_outer_dim": (lambda x: (x * 2)[:, 3:40] + 1, (None, 64), 0),
    "slice_of_a_static_outer_dim": (lambda x: (x * 2)[1:3] + 1, (4, None, 16), 0),
    "strided_slice_of_a_dynamic_outer_dim": (lambda x: (x * 2)[:, 1::2] + 1, (None, 64), 0),
    "strided_slice_under_a_dynamic_dim": (lambda x: (x * 2)[..., ::2] + 1, (2, None, 16), 1),
    "split_last_dim_under_a_dynamic_dim": (
        lambda x: torch.cat([p * i for i, p in enumerate((x * 2).split(8, -1), 1)], 0),
        (2, None, 16),
        1,
    ),
    "select_under_a_dynamic_dim": (lambda x: (x * 2)[:, :, 3] + 1, (2, None, 16), 1),
    "cat_last_dim_size_1_outer": (lambda x: torch.cat([x * 2, x + 1], -1), (1, None, 8), 0),
    "cat_last_dim_under_a_dynamic_dim": (lambda x: torch.cat([x * 2, x + 1], -1), (2, None, 8), 1),
    # the VPU transposes of [1, ?S, 16, 4] -> [1, ?S, 4, 16] keep the leading [1, ?S]
    "transpose_past_a_dynamic_dim": (lambda x: (x * 2).transpose(2, 3) + 1, (1, None, 16, 4), 1),
    # [1, ?S, 4, 16] -> [1, 4, ?S, 16]: the leading dims kept are static ([1], then [1, 4])
    "transpose_of_the_dynamic_dim": (lambda x: (x * 2).transpose(1, 2) + 1, (1, None, 4, 16), 0),
    # refused by the answer, compiled by the compiler: the operands share x's dynamic size (the
    # answer cannot see that; two inputs' sizes are held apart: the split case above)
    "cat_of_a_static_outer_dim": (
        lambda x: torch.cat([x * 2, x + 1], 0),
        (2, None, 8),
        CONSERVATIVE,
    ),
    "transpose_after_static_leading_dims": (
        lambda x: (x * 2).transpose(1, 2) + 1,
        (2, None, 16),
        0,
    ),
    "transpose_of_the_dynamic_outer_dim": (lambda x: (x * 2).transpose(0, 1) + 1, (None, 4, 16), 0),
}


def _run(name, n):
    f, shape, _ = CASES[name]
    x = torch.randn(*(n if d is None else d for d in shape))
    torch._dynamo.mark_dynamic(x, shape.index(None), max=32)
    return f, x


def _compile(f):
    return torch.compile(f, backend="legato", options=STRICT)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_answer_agrees_with_the_compiler(name, monkeypatch):
    refused = CASES[name][2]
    g = None
    with torch.no_grad():
        f, x = _run(name, 11)
        g = _compile(f)
        assert torch.equal(g(x), f(x))
        s = lt.last_summary()
        reasons = [e.reason for e in s.extern]
        assert not any("kernel failed" in r for r in reasons), str(s)
        layout = [
            r
            for r in reasons
            if capabilities.STRIDED_DYNAMIC in r or capabilities.TRANSPOSE_DYNAMIC in r
        ]
        assert bool(layout) == bool(refused), str(s)
        f, x = _run(name, 7)  # another length: the same kernels
        assert torch.equal(g(x), f(x))
        assert lt.last_summary() is s

        # without the answers the resolvers accept, and the compiler refuses the same cases
        torch._dynamo.reset()
        monkeypatch.setattr(capabilities, "part_copy", lambda *a, **k: None)
        monkeypatch.setattr(capabilities, "transpose_steps", lambda *a, **k: None)
        f, x = _run(name, 11)
        if refused == 1:
            with pytest.raises(Exception, match="is not supported"):
                _compile(f)(x)
        else:
            assert torch.equal(_compile(f)(x), f(x))


def test_answers_for_static_shapes_accept_every_copy():
    assert capabilities.part_copy((2, 8, 16), (2, 8, 4), strided=True) is None
    assert capabilities.transpose_steps((2, 3, 4, 5), [(0, 2, 3, 1)]) is None
