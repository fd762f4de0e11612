"""Run-time faults fixed at their cause (issue 13): each case compiles in strict mode (nothing may
fall back by catching an error), matches eager, and runs what it can on Legato."""

import pytest
import torch
import torch.nn.functional as F

import legato.torch as lt

BF16 = torch.bfloat16
STRICT = {"legato.strict": True}


def _bf(*shape):
    return torch.randn(*shape, dtype=BF16)


# name -> (function, inputs, extern op -> reason prefix expected, Legato kernels expected)
CASES = {
    # output shapes used to come from running the partition on meta tensors, which cannot
    # `_to_copy(device=cpu)` ("Cannot copy out of meta tensor") nor run bf16 rms_norm
    "to_copy_with_device": (
        lambda x: (x * 2).to(device="cpu", dtype=torch.float32) + 1,
        [_bf(4, 64)],
        {},
        1,
    ),
    "rms_norm_bf16": (
        lambda x, w: F.rms_norm(x, (64,), w, 1e-6) * 2,
        [_bf(4, 64), torch.rand(64, dtype=BF16)],
        {},  # its f32 * bf16 weight multiply is promoted (a cast), as torch does
        1,
    ),
    # a stride-0 (expanded) kernel output is written into a dense buffer
    "expand_output": (lambda x: (x * 2).expand(3, 4, 64), [_bf(1, 4, 64)], {}, 1),
    # DynamicCache's first cat: the legacy empty [0] tensor is skipped
    "cat_of_the_empty_kv_cache": (
        lambda c, k: torch.cat([c, k * 2], dim=-2),
        [torch.tensor([], dtype=BF16), _bf(1, 2, 8, 16)],
        {},
        1,
    ),
    # interleaved rotary's x[..., 0::2]: the resolver used to accept what the compiler refused;
    # now one strided `legato.slice` (strided DMAs: test_masks_and_strides checks the IR)
    "strided_slice": (lambda x: (x * 2)[..., 0::2] + 1, [_bf(4, 64)], {}, 1),
    "sum_to_0d_of_a_vector": (lambda x: (x * 2).sum(), [_bf(64)], {}, 1),
    "amax_of_0d": (lambda x: torch.amax(x * 2, dim=0), [torch.tensor(3.0, dtype=BF16)], {}, 1),
    "softmax_of_0d": (
        lambda x: torch.softmax(x * 2, dim=0),
        [torch.tensor(3.0, dtype=BF16)],
        {"aten._softmax.default": "resolver refused: softmax of a 0-d tensor"},
        1,
    ),
    "transpose_of_0d": (lambda x: (x * 2).t() + 1, [torch.tensor(3.0, dtype=BF16)], {}, 1),
    "mm_with_k_0": (
        lambda a, b: a @ b + 1,
        [_bf(4, 0), _bf(0, 8)],
        {"aten.mm.default": "empty tensor"},
        1,
    ),
    "softmax_of_empty_rows": (
        lambda x: torch.softmax(x * 2, dim=-1),
        [_bf(4, 0)],
        {"aten.mul.Tensor": "empty tensor", "aten._softmax.default": "empty tensor"},
        0,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault(name):
    torch.manual_seed(0)
    f, args, extern, kernels = CASES[name]
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options=STRICT)(*args)
        ref = f(*args)
    assert y.shape == ref.shape and y.dtype == ref.dtype
    torch.testing.assert_close(y.float(), ref.float(), rtol=2e-2, atol=2e-2)
    s = lt.last_summary()
    got = {e.op: e.reason for e in s.extern}
    assert set(got) == set(extern), str(s)
    for op, prefix in extern.items():
        assert got[op].startswith(prefix), str(s)
    assert s.num_kernels == kernels, str(s)
    assert all(k.calls == 1 and k.eager_calls == 0 for k in s.kernels), str(s)
