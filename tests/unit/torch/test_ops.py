"""Resolvers the Hugging Face zoo needs (issue 13 item 3): each case runs wholly on Legato in
strict mode and matches eager (torch computes these bf16 ops in f32 and rounds once, as the
implementations do)."""

import pytest
import torch
import torch.nn.functional as F

import legato.torch as lt

BF16 = torch.bfloat16


def _r(*shape, dtype=BF16):
    return torch.randn(*shape, dtype=dtype)


CASES = {
    "layer_norm_bf16": (
        lambda x, w, b: F.layer_norm(x * 2, (64,), w, b, 1e-5) + 1,
        [_r(4, 64), _r(64), _r(64)],
    ),
    "layer_norm_f32": (
        lambda x, w, b: F.layer_norm(x * 2, (64,), w, b, 1e-5) + 1,
        [_r(4, 64, dtype=torch.float32), _r(64, dtype=torch.float32), _r(64, dtype=torch.float32)],
    ),
    "layer_norm_without_affine": (lambda x: F.layer_norm(x * 2, (64,)) + 1, [_r(2, 4, 64)]),
    "split": (lambda x: [t * 2 for t in (x + 1).split(16, dim=-1)], [_r(4, 64)]),
    "split_with_sizes": (lambda x: [t * 2 for t in (x + 1).split([8, 40, 16], -1)], [_r(4, 64)]),
    "gelu_tanh_bf16": (lambda x: F.gelu(x * 2, approximate="tanh") + 1, [_r(4, 64)]),
    "gelu_tanh_f32": (
        lambda x: F.gelu(x * 2, approximate="tanh") + 1,
        [_r(4, 64, dtype=torch.float32)],
    ),
    "pow_3": (lambda x: (x * 2).pow(3.0) + 1, [_r(4, 64)]),
    # full reductions (every dim): of the flattened tensor, rounded once
    "sum_all_bf16": (lambda x: (x * 2).sum() + 1, [_r(32, 64)]),
    "mean_all_keepdim_f32": (
        lambda x: (x * 2).mean(dim=(0, 1), keepdim=True) + 1,
        [_r(32, 64, dtype=torch.float32)],
    ),
    "amax_all_bf16": (lambda x: torch.amax(x * 2, dim=(1, 0)) + 1, [_r(4, 64)]),
    "rsub_tensor": (lambda x, y: torch.rsub(x * 2, y) + 1, [_r(4, 64), _r(4, 64)]),
    # torch promotes bf16 with f32 to f32 (OLMo2's and F.rms_norm's weight multiply)
    "bf16_times_f32": (lambda x, w: (x * 2) * w + 1, [_r(4, 64), _r(64, dtype=torch.float32)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_on_legato_and_matches_eager(name):
    torch.manual_seed(0)
    f, args = CASES[name]
    with torch.no_grad():
        y = torch.compile(f, backend="legato", options={"legato.strict": True})(*args)
        ref = f(*args)
    ys, refs = (y, ref) if isinstance(ref, list) else ([y], [ref])
    for a, e in zip(ys, refs):
        assert a.dtype == e.dtype and a.shape == e.shape
        # one bf16 ulp of the largest value (f32: 1e-5 relative)
        tol = (torch.finfo(BF16).eps if e.dtype == BF16 else 1e-5) * e.float().abs().max()
        assert (a.float() - e.float()).abs().max() <= tol
    s = lt.last_summary()
    assert s.num_extern == 0 and s.num_kernels == 1, str(s)
