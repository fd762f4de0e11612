"""Bench rows of the automatic path (issue 14): plain torch modules through
`torch.compile(backend="legato")`, measured on the emulator like the hand-written kernels.

- `torch_gemm_prefill`: nn.Linear(4096, 4096) (with bias) on x[512, 4096] bf16, against the MPU
  roofline of the same work and the hand-written `gemm_512x4096x4096`;
- `torch_lm_head_prefill`: TINY_LLAMA's lm_head, nn.Linear(512, 32000, bias=False), on
  x[TINY_PROMPT, 512] bf16 (a prefill's logits), against the roofline of the same work; and
  `torch_lm_head_prefill_runtime_m`, the same with a runtime row count (mark_dynamic, at most
  TINY_PROMPT) run at M = 100: one kernel for every M;
- `torch_linear_decode`: nn.Linear(4096, 4096, bias=False) on x[1, 4096] bf16, against the DRAM
  roofline and the hand-written `gemv_1x4096x4096`;
- `torch_llama7b_layer_decode`: a Llama-7B-shaped decoder layer written as a plain nn.Module
  (`_llama_layer`: RMSNorm, q/k/v/o, rotary, the KV cache appended with `torch.cat` as a
  DynamicCache does, SDPA, SiLU MLP) in decode over 1024 cached tokens, against the DRAM roofline
  and the hand-written `decoder_layer_7b_ctx1024`. Its work: every weight read once, the cache
  read once and the appended cache (returned, as the module returns it) written once;
- `torch_tiny_llama_decode`: a whole transformers LlamaForCausalLM (`TINY_LLAMA`: hidden 512,
  4 layers, 4 heads, MLP 1536, vocab 32000, random seeded weights) in one decode step over a
  DynamicCache of 256 tokens, against the DRAM roofline of that step (`_tiny_llama_work`); no
  hand-written counterpart (`hand_ratio` 0);
- `torch_tiny_llama_prefill`: the same model on a prompt of TINY_PROMPT tokens without a cache
  (the logits of every token), against the roofline of that forward (`_tiny_llama_prefill_work`).

Cycles are the sum over the graph's Legato kernels of the second call (the first lays the
weight out); the roofline is that of the work itself (weight, activations and output moved
once, M*K*N MACs), not of the bytes the kernels happened to move. `hand_ratio` is the
hand-written kernel's cycles over ours on the same target.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class TorchRow:
    name: str
    make: Callable  # (torch) -> (module, input)
    hand: str | None  # the hand-written bench kernel at the same shapes
    macs: int
    ideal_bytes: int
    # None: every element within 2 bf16 ulps of eager (one op, one rounding); else
    # allclose(rtol=atol=rtol) as the hand-written row's check (a layer's chain of roundings
    # differs from eager's by more than a single op's)
    rtol: float | None = None
    # `make` returns (module, fresh) instead of (module, input): fresh() -> (args, kwargs) of
    # one call (a decode step gets its own copy of the KV cache, so every call sees the same
    # cache length and the same graph); `result(out)` -> the tensors checked against eager
    fresh: bool = False
    result: Callable | None = None

    def measure(self, target: str, repeat: int = 1) -> dict:
        return measure(self, target, repeat)


def _linear(m: int, k: int, n: int, bias: bool):
    def make(torch):
        torch.manual_seed(0)
        lin = torch.nn.Linear(k, n, bias=bias).bfloat16()
        x = torch.randn(m, k, dtype=torch.bfloat16)
        return lin, x

    return make


def _linear_runtime_rows(m: int, bound: int, k: int, n: int, bias: bool):
    """nn.Linear(k, n) on x[m, k] bf16 whose row count is a runtime size (mark_dynamic, at most
    `bound`): the kernel is compiled for every M up to the bound and run at M = m."""

    def make(torch):
        import legato.torch as lt

        torch.manual_seed(0)
        lin = torch.nn.Linear(k, n, bias=bias).bfloat16()
        x = torch.randn(m, k, dtype=torch.bfloat16)
        lt.mark_dynamic(x, 0, max=bound)
        return lin, x

    return make


def _llama_layer(hidden: int, heads: int, ffn: int, ctx: int):
    """A Llama decoder layer in decode as a user would write it in plain torch (HF's math:
    f32 RMSNorm statistics, rotate-half rotary, SDPA over [cache; new token], SiLU MLP). Inputs:
    x [1, hidden], the K/V caches [1, heads, ctx, 128], cos/sin [1, 1, 1, 128] of the position.
    Returns the layer's output and the appended caches."""

    def make(torch):
        nn, F = torch.nn, torch.nn.functional
        d = hidden // heads

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                lin = lambda i, o: nn.Linear(i, o, bias=False)  # noqa: E731
                self.q, self.k, self.v, self.o = (lin(hidden, hidden) for _ in range(4))
                self.gate, self.up, self.down = lin(hidden, ffn), lin(hidden, ffn), lin(ffn, hidden)
                self.w1 = nn.Parameter(1 + torch.randn(hidden) / 8)
                self.w2 = nn.Parameter(1 + torch.randn(hidden) / 8)

            @staticmethod
            def norm(x, w):
                xf = x.float()
                xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
                return w * xf.to(x.dtype)

            @staticmethod
            def rope(t, cos, sin):
                t1, t2 = t[..., : d // 2], t[..., d // 2 :]
                return t * cos + torch.cat((-t2, t1), dim=-1) * sin

            def forward(self, x, kc, vc, cos, sin):
                xn = self.norm(x, self.w1)
                q = self.q(xn).view(1, 1, heads, d).transpose(1, 2)
                k = self.k(xn).view(1, 1, heads, d).transpose(1, 2)
                v = self.v(xn).view(1, 1, heads, d).transpose(1, 2)
                q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
                kk, vv = torch.cat([kc, k], dim=2), torch.cat([vc, v], dim=2)
                o = F.scaled_dot_product_attention(q, kk, vv)
                h = x + self.o(o.transpose(1, 2).reshape(1, hidden))
                hn = self.norm(h, self.w2)
                out = h + self.down(F.silu(self.gate(hn)) * self.up(hn))
                return out, kk, vv

        torch.manual_seed(0)
        layer = Layer()
        with torch.no_grad():
            for m in (layer.q, layer.k, layer.v, layer.o, layer.gate, layer.up, layer.down):
                m.weight.normal_(0, 1 / math.sqrt(m.in_features))
        layer = layer.bfloat16()
        bf = torch.bfloat16
        pos = torch.arange(0, d, 2, dtype=torch.float32) / d
        ang = ctx / (10000.0**pos)
        cos = torch.cat([ang.cos(), ang.cos()]).view(1, 1, 1, d).to(bf)
        sin = torch.cat([ang.sin(), ang.sin()]).view(1, 1, 1, d).to(bf)
        x = torch.randn(1, hidden, dtype=bf)
        kc = torch.randn(1, heads, ctx, d, dtype=bf)
        vc = torch.randn(1, heads, ctx, d, dtype=bf)
        return layer, (x, kc, vc, cos, sin)

    return make


TINY_LLAMA = dict(
    hidden_size=512,
    intermediate_size=1536,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=32000,
    max_position_embeddings=2048,
)
TINY_CTX = 256  # tokens in the KV cache before the decode step


def _tiny_llama(torch):
    """transformers' LlamaForCausalLM from a config (TINY_LLAMA, random seeded weights, bf16),
    its DynamicCache filled by an eager prefill of TINY_CTX tokens; each call is one decode
    step of one token on its own copy of that cache (`fresh`)."""
    import copy

    import transformers

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY_LLAMA))
    model = model.bfloat16().eval()
    ids = torch.randint(0, TINY_LLAMA["vocab_size"], (1, TINY_CTX), generator=_gen(torch))
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
    nxt = torch.tensor([[123]])

    def fresh():
        return (nxt,), {"past_key_values": copy.deepcopy(cache), "use_cache": True}

    return model, fresh


TINY_PROMPT = 128  # tokens of the prefill row


def _tiny_llama_prefill(torch):
    """TINY_LLAMA (as `_tiny_llama`) on a prompt of TINY_PROMPT random tokens, no cache."""
    import transformers

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY_LLAMA))
    model = model.bfloat16().eval()
    ids = torch.randint(0, TINY_LLAMA["vocab_size"], (1, TINY_PROMPT), generator=_gen(torch))

    def fresh():
        return (ids,), {"use_cache": False}

    return model, fresh


def _tiny_llama_prefill_work() -> tuple[int, int]:
    """(MACs, bytes) of TINY_LLAMA's forward over TINY_PROMPT tokens: every projection and the
    lm_head for every token, q @ K^T and p @ V over the whole (unmasked) S x S; every weight
    read once, the prompt's embedding rows read and every token's logits written."""
    h, f, n = (TINY_LLAMA[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers"))
    v, heads = TINY_LLAMA["vocab_size"], TINY_LLAMA["num_attention_heads"]
    kv = TINY_LLAMA["num_key_value_heads"] * (h // heads)
    s = TINY_PROMPT
    layer = 2 * h * h + 2 * h * kv + 3 * h * f
    macs = s * (n * layer + h * v) + n * 2 * heads * s * s * (h // heads)
    weights = (n * (layer + 2 * h) + h + h * v) * 2
    return macs, weights + s * h * 2 + s * v * 2


def _gen(torch):
    return torch.Generator().manual_seed(1)


def _tiny_llama_work() -> tuple[int, int]:
    """(MACs, bytes) of one decode step of TINY_LLAMA over TINY_CTX cached tokens: every
    weight read once (the embedding: one row), each layer's cache read once and its appended
    cache written once, the logits written."""
    h, f, n = (TINY_LLAMA[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers"))
    v, heads = TINY_LLAMA["vocab_size"], TINY_LLAMA["num_attention_heads"]
    kv = TINY_LLAMA["num_key_value_heads"] * (h // heads)  # k/v projection width
    layer = 2 * h * h + 2 * h * kv + 3 * h * f  # q, o, k, v, gate, up, down
    macs = n * (layer + 2 * heads * (TINY_CTX + 1) * (h // heads)) + h * v
    weights = (n * (layer + 2 * h) + h + h * v) * 2  # projections, norms, final norm, lm_head
    cache = n * 2 * kv * (2 * TINY_CTX + 1) * 2  # read L rows, write L + 1 rows, K and V
    return macs, weights + cache + h * 2 + v * 2  # + the embedding row, the logits


def _hand_cycles(name: str, target: str) -> int:
    """Cycles of the hand-written bench kernel `name` on `target` (one compile, one run)."""
    import torch

    import legato
    from bench.kernels import KERNELS
    from bench.runner import _model_factory, _to_numpy
    from legato.compiler import compile_kernel
    from legato.targets.bertha.runtime import run_binary

    factory = _model_factory(target)
    model = factory()
    bk = next(k for k in KERNELS if k.name == name).specialize(model)
    kernel = legato.compile(backend=factory)(bk.fn)
    binary = bytes(compile_kernel(kernel.emit_module(), model, bk.name).binary)
    args = [_to_numpy(t) for t in bk.make_args(torch, torch.Generator().manual_seed(0))]
    return run_binary(binary, model, args).cycles


def measure(row: TorchRow, target: str, repeat: int = 1) -> dict:
    import torch

    from bench.runner import _best, _model_factory
    from legato.targets.bertha import timing
    from legato.torch import wrapper

    model = _model_factory(target)()
    # a fresh dynamo per row: a code object compiled before with other shapes (nn.Linear's
    # forward in the GEMM row, then the GEMV row; LlamaForCausalLM's in decode, then prefill)
    # would be recompiled with dynamic sizes, another graph than the row's own
    torch._dynamo.reset()
    mod, x = row.make(torch)
    if row.fresh:
        fresh = x
    else:
        args = x if isinstance(x, tuple) else (x,)

        def fresh():
            return args, {}

    def call(m):
        a, kw = fresh()
        out = m(*a, **kw)
        return row.result(out) if row.result is not None else out

    g = torch.compile(mod, backend="legato", options={"legato.device": target})
    with torch.no_grad():
        t0 = time.perf_counter()
        y = call(g)
        first = time.perf_counter() - t0
        cached = _best(lambda: call(g), repeat)
        # the kernels of the graph the last call ran (a model's first call may compile others)
        kmods = wrapper.last_wrapper().kernel_modules()
        y = call(g)
        ref = call(mod)
        torch_wall = _best(lambda: call(mod), 20)
    # a module returning several tensors (the layer: output, appended caches): all are checked
    ys = y if isinstance(y, tuple) else (y,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    runs = [k.kernel.last_run for k in kmods]
    cycles = sum(r.cycles for r in runs)
    dram = sum(r.dram_bytes for r in runs)
    roof = timing.roofline(
        model,
        row.ideal_bytes,
        row.macs,
        sum(r.vpu_element_ops for r in runs),
        sum(r.vpu_transcendental_ops for r in runs),
    )
    eps = torch.finfo(torch.bfloat16).eps

    def close(a, b):
        if row.rtol is not None:
            return torch.allclose(a.float(), b.float(), rtol=row.rtol, atol=row.rtol)
        return bool(
            ((a.float() - b.float()).abs() <= 2 * eps * b.float().abs().clamp_min(1 / 64)).all()
        )

    ok = all(close(a, b) for a, b in zip(ys, refs, strict=True))
    err = max((a.float() - b.float()).abs().max().item() for a, b in zip(ys, refs, strict=True))
    hand = _hand_cycles(row.hand, target) if row.hand else 0
    secs = cycles / (model.clock_ghz * 1e9)
    return {
        "name": row.name,
        "target": target,
        "cycles": cycles,
        "roofline_cycles": roof.cycles,
        "efficiency": roof.cycles / cycles if cycles else 0.0,
        "bound": roof.bound,
        "roofline": roof.as_dict(),
        "dram_bytes": dram,
        "dram_gbps": dram / secs / 1e9 if secs else 0.0,
        "kernels": len(runs),
        "cores_running": min(
            sum(1 for k, v in r.instructions.items() if k.startswith("core") and v > 0)
            for r in runs
        ),
        "layouts": sum(k.layout_count for k in kmods),
        # every module's instructions over the graph's kernels (the table's emu Minstr/s)
        "instructions": sum(sum(r.instructions.values()) for r in runs),
        "hand_kernel": row.hand,
        "hand_cycles": hand,
        "hand_ratio": hand / cycles if cycles else 0.0,
        "simulated_s": secs,
        # torch.compile's first call: dynamo, aot_autograd, Legato compile, weight layout, run
        "frontend_s": 0.0,
        "compile_s": first - cached,
        "wall_s": cached,
        "torch_wall_s": torch_wall,
        "wall_ratio": cached / torch_wall if torch_wall else None,
        "first_call_s": first,
        "cached_call_s": cached,
        "disk_cached_call_s": math.nan,
        "cached_call_overhead_s": math.nan,  # not split out of a torch.compile'd call
        "matches_torch": ok,
        "max_abs_err_vs_torch": err,
    }


ROWS = [
    TorchRow(
        "torch_gemm_prefill",
        _linear(512, 4096, 4096, True),
        "gemm_512x4096x4096",
        512 * 4096 * 4096,
        (512 * 4096 + 4096 * 4096 + 4096 + 512 * 4096) * 2,
    ),
    TorchRow(
        "torch_lm_head_prefill",
        _linear(TINY_PROMPT, 512, 32000, False),
        None,  # no hand-written kernel of this shape
        TINY_PROMPT * 512 * 32000,
        (TINY_PROMPT * 512 + 512 * 32000 + TINY_PROMPT * 32000) * 2,
    ),
    TorchRow(
        "torch_lm_head_prefill_runtime_m",
        _linear_runtime_rows(100, TINY_PROMPT, 512, 32000, False),
        None,
        100 * 512 * 32000,
        (100 * 512 + 512 * 32000 + 100 * 32000) * 2,
    ),
    TorchRow(
        "torch_linear_decode",
        _linear(1, 4096, 4096, False),
        "gemv_1x4096x4096",
        4096 * 4096,
        (4096 + 4096 * 4096 + 4096) * 2,
    ),
    TorchRow(
        "torch_llama7b_layer_decode",
        _llama_layer(4096, 32, 11008, 1024),
        "decoder_layer_7b_ctx1024",
        # the projections, q @ K^T and p @ V over the 1025 keys
        4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 32 * 1025 * 128,
        # weights once; the cache read once; the appended cache written once; x, out, cos/sin
        (4 * 4096 * 4096 + 3 * 4096 * 11008) * 2
        + 2 * 32 * 1024 * 128 * 2
        + 2 * 32 * 1025 * 128 * 2
        + (2 * 4096 + 2 * 4096 + 4 * 128) * 2,
        rtol=2e-2,  # as decoder_layer_7b_ctx1024's check (bench/kernels.py BenchKernel.rtol)
    ),
    TorchRow(
        "torch_tiny_llama_decode",
        _tiny_llama,
        None,  # no hand-written kernel of a whole model
        *_tiny_llama_work(),
        rtol=2e-2,
        fresh=True,
        result=lambda out: out.logits,
    ),
    TorchRow(
        "torch_tiny_llama_prefill",
        _tiny_llama_prefill,
        None,
        *_tiny_llama_prefill_work(),
        rtol=2e-2,
        fresh=True,
        result=lambda out: out.logits,
    ),
]


def main() -> None:
    import sys

    targets = sys.argv[1:] or ["bertha", "bertha-evt1"]
    for row in ROWS:
        for t in targets:
            r = measure(row, t)
            print(
                f"{r['name']:22s} {t:12s} cycles {r['cycles']:8d} roofline {r['roofline_cycles']:8d}"
                f" ({r['bound']}) eff {r['efficiency']:.1%}  hand {r['hand_cycles']} "
                f"(ratio {r['hand_ratio']:.2f})  cores {r['cores_running']}  ok {r['matches_torch']}"
                f"  first call {r['first_call_s']:.1f}s"
            )


if __name__ == "__main__":
    main()
