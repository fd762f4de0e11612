"""The kernels `python -m bench` measures, each with its arguments and a torch eager reference.

Here today: the seed matmul (examples/simple_matmul.py), RMSNorm and softmax over [32, 4096]
bf16 with one row per core, and GEMV decode (`make_gemv`, all cores, pre-tiled weights). Issue 5's
GEMM / decoder-layer kernels join this list: add a `BenchKernel` with a plain (undecorated)
Legato function, an argument factory and the torch computation it must match.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import legato
from bench.decoder import PHASES as DECODER_PHASES
from bench.decoder import make_decoder_layer
from bench.gemm import default_spread, make_gemm_spmd
from legato.jit import autotuner as autotune

BF16 = legato.types.float("bfloat16")


def simple_matmul(
    a: legato.get_model().tensor_type(BF16, ((-1, 10), 256), "shared_dram"),
    b: legato.get_model().tensor_type(BF16, [256, 128], "mpu_dram"),
    out: legato.get_model().tensor_type(BF16, [10, 128], "shared_dram"),
):
    device = legato.get_context().get_device()
    with device.get_top():
        legato.tensor.request_load(a, device.get_core(0), "sram")
        legato.tensor.request_load(b, device.get_core(0), "mpu_buffer")
    with device.get_core(0):
        weight_type = legato.get_model().tensor_type(BF16, [256, 128], "mpu_weight")
        loaded_a = legato.tensor.receive(a, 0, "sram")
        loaded_b = legato.tensor.receive_type(weight_type, 0, None, "mpu_buffer")
        result = loaded_a @ loaded_b
        legato.tensor.memcpy(out, result)


def _matmul_args(torch, gen):
    a = torch.randn(10, 256, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(256, 128, dtype=torch.bfloat16, generator=gen)
    out = torch.zeros(10, 128, dtype=torch.bfloat16)
    return [a, b, out]


def _matmul_torch(torch, args):
    a, b, _ = args
    return a @ b


ROWS, HIDDEN = 32, 4096
F32 = legato.types.float("float32")


def rmsnorm_32x4096(
    x: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
    w: legato.get_model().tensor_type(BF16, [1, HIDDEN], "shared_dram"),
    out: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
):
    """One row per core (static unroll over the cores); f32 statistics, bf16 out."""
    device = legato.get_context().get_device()
    row = legato.get_model().tensor_type(BF16, [1, HIDDEN], "sram")
    with device.get_top():
        for i in legato.static_range(ROWS):
            legato.tensor.request_load(x[i : i + 1, :], device.get_core(i), "sram")
            legato.tensor.request_load(w, device.get_core(i), "sram", 1)
    for i in legato.static_range(ROWS):
        with device.get_core(i):
            xi = legato.tensor.cast(legato.tensor.receive_type(row, 0, None, "sram"), F32)
            wi = legato.tensor.cast(legato.tensor.receive_type(row, 1, None, "sram"), F32)
            ms = legato.tensor.mean(xi * xi, 1, keepdim=True)
            y = xi * legato.tensor.rsqrt(ms + 1e-6) * wi
            legato.tensor.memcpy(out[i : i + 1, :], legato.tensor.cast(y, BF16))


def softmax_32x4096(
    x: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
    out: legato.get_model().tensor_type(BF16, [ROWS, HIDDEN], "shared_dram"),
):
    """Numerically stable softmax over the last dim, one row per core."""
    device = legato.get_context().get_device()
    row = legato.get_model().tensor_type(BF16, [1, HIDDEN], "sram")
    with device.get_top():
        for i in legato.static_range(ROWS):
            legato.tensor.request_load(x[i : i + 1, :], device.get_core(i), "sram")
    for i in legato.static_range(ROWS):
        with device.get_core(i):
            xi = legato.tensor.cast(legato.tensor.receive_type(row, 0, None, "sram"), F32)
            e = legato.tensor.exp(xi - legato.tensor.max(xi, axis=1, keepdim=True))
            y = e / legato.tensor.sum(e, 1, keepdim=True)
            legato.tensor.memcpy(out[i : i + 1, :], legato.tensor.cast(y, BF16))


def _rows_args(torch, gen, with_weight: bool):
    x = torch.randn(ROWS, HIDDEN, generator=gen).bfloat16()
    args = [x]
    if with_weight:
        args.append(torch.randn(1, HIDDEN, generator=gen).bfloat16())
    args.append(torch.zeros(ROWS, HIDDEN, dtype=torch.bfloat16))
    return args


def _rmsnorm_torch(torch, args):
    x, w, _ = args
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * w.float()).bfloat16()


def _softmax_torch(torch, args):
    return torch.softmax(args[0].float(), dim=-1).bfloat16()


@dataclass
class BenchKernel:
    name: str
    fn: Callable  # the undecorated Legato function
    make_args: Callable  # (torch, generator) -> list of torch tensors (outputs included)
    torch_fn: Callable  # (torch, args) -> the output tensor, computed eagerly
    out_index: int  # which argument holds the result
    rtol: float = 2e-2  # agreement with torch eager (which may round differently)
    # For kernels whose argument layout depends on the chip (e.g. weights pre-tiled for the
    # target's core count): model -> the BenchKernel to run on that model. The runner calls it
    # with the target's ComputeModel before anything else.
    for_model: Callable | None = None
    # (torch, args) -> a zero-argument callable computing the output as torch runs it at its
    # best, on its own layout prepared here (W as nn.Linear holds it, not the MPU's tiles):
    # the runner times it beside `torch_fn` and reports the faster of the two, after checking
    # it gives torch_fn's result (torch_fn on the pre-tiled weight is a batched matmul, for
    # the GEMM twice as slow as one nn.Linear)
    torch_best: Callable | None = None

    def specialize(self, model) -> BenchKernel:
        return self.for_model(model) if self.for_model is not None else self


# GEMV decode: x[1, K] @ W[K, N] bf16 -> out[1, N] bf16, f32 accumulation on the MPU.
MPU_TK, MPU_TN = 256, 128  # the MPU weight tile (DESIGN section 5)


def gemv_tile_n(model, n: int) -> int:
    """The width of the weight tiles make_gemv streams on `model`: 128 (the MPU's widest tile)
    unless the chip has more cores than 128-column blocks, then n / num_cores (64 on EVT1 for
    n = 4096), so that every core owns whole columns and no split-K reduction is needed."""
    cores = model.num_cores
    if n // MPU_TN >= cores or n % cores:
        return MPU_TN
    return max(1, n // cores)


def make_gemv(
    k: int = 4096, n: int = 4096, name: str | None = None, tile_n: int | None = None
) -> BenchKernel:
    """A GEMV BenchKernel for x[1, k] @ W[k, n] (k a multiple of 256, n of the tile width).

    Weight layout (`mpu_dram`, shared DRAM laid out for streaming weights): the argument factory
    passes W pre-tiled as `wt[n // tn, k // 256, 256, tn]`, `wt[b, t] = W[256t:256t+256,
    tn*b:tn*b+tn]`: each MPU tile is one contiguous block, and the tiles of one output column
    block follow each other. The torch reference rebuilds W from `wt` and computes x @ W. The
    tile width `tn` follows the target (`for_model`, `gemv_tile_n`): 128 (the MPU's widest
    tile) on EVT0 (32 cores x 128 = 4096 columns), 64 on EVT1 (64 cores x 64), so that every
    core owns whole output columns: no split-K reduction, no barrier.

    A tile narrower than n / num_cores gives each core `bpc = (n // tn) / num_cores` whole
    column blocks, each streamed and written in turn (a search-space point of the tuner,
    `GEMV_SPACE`). Otherwise SPMD over every core, `device.num_cores = S * (n // tn)` for S in
    {1, 2}: core c owns
    output column block `c // S` and K-tiles `[(c % S) * kt / S, (c % S + 1) * kt / S)`. Its
    tile loads are unrolled (`static_range`), so the compiler issues them back to back ahead of
    the matmuls that use them (up to 8 DMAs in flight per core) and the MPU overlaps the stream.
    With S = 1 the core casts its f32 accumulator and writes its tn outputs. With S = 2 (a fixed
    `tile_n` with fewer blocks than cores) each core writes its f32 partial to the scratch
    argument `part[S, n]`, the cores meet at a barrier, and each finalizes tn / S of its block's
    columns (sum of the S partials, cast to bf16).
    """
    tn = tile_n or MPU_TN  # output columns per weight tile (= per core when split == 1)
    nb, kt = n // tn, k // MPU_TK
    assert nb * tn == n and kt * MPU_TK == k and tn <= MPU_TN, (
        "k % 256 == 0, n % tile_n == 0, tile_n <= 128"
    )
    max_split = 2  # rows of the scratch argument: up to 2 cores per column block

    def gemv(
        x: legato.get_model().tensor_type(BF16, [1, k], "shared_dram"),
        wt: legato.get_model().tensor_type(BF16, [nb, kt, MPU_TK, tn], "mpu_dram"),
        out: legato.get_model().tensor_type(BF16, [1, n], "shared_dram"),
        part: legato.get_model().tensor_type(F32, [max_split, n], "shared_dram"),
    ):
        device = legato.get_context().get_device()
        # (k and n also appear here so that they are closure variables: the annotations are
        # strings under `from __future__ import annotations`, evaluated in the closure's scope)
        assert x.shape[1] == k and out.shape[1] == n
        # more blocks than cores (a narrow tile): core c owns blocks [c * bpc, (c + 1) * bpc)
        bpc = max(1, nb // device.num_cores)
        assert bpc == 1 or bpc * device.num_cores == nb, (
            "the column blocks must split evenly between the cores"
        )
        split = device.num_cores // nb if bpc == 1 else 1
        assert bpc > 1 or (split * nb == device.num_cores and 1 <= split <= max_split), (
            "num_cores must be 1x or 2x the number of column blocks, or divide it"
        )
        assert kt % split == 0, "the K-tiles must split evenly between a block's cores"
        per = kt // split  # K-tiles per core
        with device.get_all_cores():
            c = legato.core_id()
            if bpc > 1:
                xs = legato.tensor.load(x)
                for b in legato.static_range(bpc):
                    acc = legato.tensor.full((1, tn), 0.0, F32)
                    for t in legato.static_range(kt):
                        wk = legato.tensor.load(wt[c * bpc + b, t], "sram")
                        acc = acc + legato.tensor.matmul(
                            xs[:, t * MPU_TK : (t + 1) * MPU_TK], wk, F32
                        )
                    j0 = (c * bpc + b) * tn
                    legato.tensor.memcpy(out[:, j0 : j0 + tn], legato.tensor.cast(acc, BF16))
            else:
                blk = c // split
                h = c % split
                k0 = h * (per * MPU_TK)
                xs = legato.tensor.load(x[:, k0 : k0 + per * MPU_TK])
                acc = legato.tensor.full((1, tn), 0.0, F32)
                for t in legato.static_range(per):
                    wk = legato.tensor.load(wt[blk, h * per + t], "sram")
                    acc = acc + legato.tensor.matmul(xs[:, t * MPU_TK : (t + 1) * MPU_TK], wk, F32)
                if split == 1:
                    legato.tensor.memcpy(
                        out[:, c * tn : (c + 1) * tn], legato.tensor.cast(acc, BF16)
                    )
                else:
                    legato.tensor.memcpy(part[h : h + 1, blk * tn : (blk + 1) * tn], acc)
                    legato.sync.barrier()
                    cols = tn // split
                    j0 = blk * tn + h * cols
                    both = legato.tensor.load(part[0:split, j0 : j0 + cols])
                    legato.tensor.memcpy(
                        out[:, j0 : j0 + cols],
                        legato.tensor.cast(legato.tensor.sum(both, 0, keepdim=True), BF16),
                    )

    def make_args(torch, gen):
        x = torch.randn(1, k, generator=gen).bfloat16()
        w = (torch.randn(k, n, generator=gen) / 64).bfloat16()
        wt = w.reshape(kt, MPU_TK, nb, tn).permute(2, 0, 1, 3).contiguous()
        return [
            x,
            wt,
            torch.zeros(1, n, dtype=torch.bfloat16),
            torch.zeros(max_split, n, dtype=torch.float32),
        ]

    def torch_fn(torch, args):
        """torch eager in bf16 (f32 accumulation inside), on the tiled weight read in place:
        wt[b] viewed as [k, tn] is W's column block b, so one batched matmul is x @ W."""
        x, wt = args[0], args[1]
        y = torch.bmm(x.unsqueeze(0).expand(nb, 1, k), wt.view(nb, k, tn))
        return y.permute(1, 0, 2).reshape(1, n)

    def torch_best(torch, args):
        """nn.Linear's own form: W^T [n, k] rebuilt from the tiles once, then one linear."""
        x, wt = args[0], args[1]
        w_nk = wt.permute(0, 3, 1, 2).reshape(n, k).contiguous()
        return lambda: torch.nn.functional.linear(x, w_nk)

    gemv.__name__ = gemv.__qualname__ = name or f"gemv_{k}x{n}"
    if tile_n is not None:
        return BenchKernel(gemv.__name__, gemv, make_args, torch_fn, 2, torch_best=torch_best)
    return BenchKernel(
        gemv.__name__,
        gemv,
        make_args,
        torch_fn,
        out_index=2,
        for_model=lambda model: make_gemv(k, n, name, gemv_tile_n(model, n)),
        torch_best=torch_best,
    )


# -- declared search spaces (issue 18): the bench's tile choices, tuned on simulated cycles ------

TUNED = Path(__file__).with_name("tuned.json")  # the shipped choices; `python -m bench --retune`


@dataclass
class SearchSpace:
    """A bench kernel's declared search space: `build(model, **config)` is the BenchKernel of
    one config laid out for `model` (the config may change the arguments' layout, so a config
    is not a constexpr of one kernel); `hand(model)` is the config the bench ran before it was
    tuned. The choice per target comes from `TUNED` (or the JIT cache directory's autotune
    records); a target with none is tuned on first use."""

    name: str
    configs: list[dict]
    build: Callable
    hand: Callable

    def __post_init__(self):
        self.store = autotune.ResultStore(self.configs, [TUNED])

    def identity(self, model) -> dict:
        return {
            "bench": self.name,
            "target": [model.name, model.fingerprint()],
            "configs": sorted(autotune.canonical(c) for c in self.configs),
        }

    def choice(self, model) -> dict:
        found = self.store.lookup(autotune.tuning_key(self.identity(model)))
        if found is not None:
            return dict(found[0]["config"])
        print(
            f"bench: {TUNED.name} has no choice for {self.name} on {model.name}: tuning now "
            "(`python -m bench --retune` ships it)",
            file=sys.stderr,
        )
        return self.tune(model).best.config

    def _candidate(self, model, config: dict) -> autotune.Candidate:
        def run():
            import torch

            from bench.runner import _to_numpy
            from legato.compiler import compile_kernel
            from legato.targets.bertha.runtime import run_binary

            torch.set_num_threads(1)  # the workers share the machine's cores
            bk = self.build(model, **config)
            args = [_to_numpy(t) for t in bk.make_args(torch, torch.Generator().manual_seed(0))]
            module = legato.compile(backend=model)(bk.fn).emit_module()
            binary = bytes(compile_kernel(module, model, bk.name).binary)
            return run_binary(binary, model, args).cycles, {"out": args[bk.out_index]}

        return autotune.Candidate(dict(config), run)

    def tune(self, model, workers: int | None = None) -> autotune.TuneReport:
        """Compile and run every config on `model` (at most 2 processes at once), check each
        output against torch eager (on the hand pick's layout: every layout holds the same
        matrices) and keep the fastest; the choice is stored (memory, cache directory)."""
        import torch

        from bench.runner import _to_numpy

        outcomes = autotune.run_candidates(
            [self._candidate(model, c) for c in self.configs], workers
        )
        hand = self.build(model, **self.hand(model))
        targs = hand.make_args(torch, torch.Generator().manual_seed(0))
        ref = {"out": _to_numpy(hand.torch_fn(torch, targs))}
        report = autotune.choose(
            f"{self.name} on {model.name}",
            outcomes,
            ref,
            rtol=hand.rtol,
            atol=hand.rtol,
            reference_what=f"torch eager (allclose {hand.rtol:g})",
        )
        identity = self.identity(model)
        self.store.store(autotune.tuning_key(identity), autotune.record_of(report, identity))
        return report

    def kernel(self) -> BenchKernel:
        """The bench row: EVT0's hand pick until the runner specializes it to the target's
        tuned choice."""
        from legato.model import bertha

        bk = self.build(bertha.evt0(), **self.hand(bertha.evt0()))
        bk.for_model = lambda model: self.build(model, **self.choice(model))
        bk.space = self
        return bk


def write_tuned(spaces) -> int:
    """Write the choices these spaces hold in memory to `TUNED`, merged with its others except
    those tuned over an older declaration of one of these spaces (other configs): no lookup
    can reach them any more."""
    records = [r for sp in spaces for r in sp.store.memory.values()]
    current = {sp.name: sorted(autotune.canonical(c) for c in sp.configs) for sp in spaces}
    old = autotune.read_results(TUNED) if TUNED.exists() else {}
    kept = [
        r
        for r in old.values()
        if current.get(r["identity"].get("bench"), r["identity"].get("configs"))
        == r["identity"].get("configs")
    ]
    root = str(TUNED.parent.parent) + "/"  # reasons name the checkout's files: keep them relative
    for r in records:
        for row in r.get("report", {}).get("rows", ()):
            row["reason"] = (row.get("reason") or "").replace(root, "")
    autotune.write_results(TUNED, kept + records, merge=False)
    return len(records)


def _gemv_build(k, n, name):
    return lambda model, tile_n: make_gemv(k, n, name, tile_n)


GEMV_SPACE = SearchSpace(
    "gemv_1x4096x4096",
    [{"tile_n": tn} for tn in (32, 64, 128)],
    _gemv_build(4096, 4096, "gemv_1x4096x4096"),
    lambda model: {"tile_n": gemv_tile_n(model, 4096)},
)


def _decoder_build(model, attn_split, **phase_cores):
    return make_decoder_layer(
        4096, 32, 11008, 1024, "decoder_layer_7b_ctx1024", attn_split, phase_cores=phase_cores
    ).specialize(model)


def _decoder_configs() -> list[dict]:
    """The attention split (cores per head) crossed with the GEMV phases' core counts: every
    core in every phase, or one phase on half of them (the others wait at its barrier)."""
    every = {ph: "P" for ph in DECODER_PHASES}
    return [
        {"attn_split": s, **every, **half}
        for s in (1, 2, 4)
        for half in [{}] + [{ph: "P/2"} for ph in DECODER_PHASES]
    ]


DECODER_SPACE = SearchSpace(
    "decoder_layer_7b_ctx1024",
    _decoder_configs(),
    _decoder_build,
    lambda model: {
        "attn_split": max(1, min(model.num_cores // 32, 1024 // 128)),
        **{ph: "P" for ph in DECODER_PHASES},
    },
)
GEMM_SPACE = SearchSpace(
    "gemm_512x4096x4096",
    [{"group": g, "spread": s} for g in (8, 16, 32) for s in (1, 2, 4)],
    lambda model, group, spread: make_gemm_spmd(
        512, 4096, 4096, "gemm_512x4096x4096", model.num_cores, group, spread
    ).specialize(model),
    lambda model: {
        "group": (g := min(model.num_cores, 8 if model.num_cores <= 32 else 16)),
        "spread": default_spread(model, model.num_cores, g),
    },
)
SPACES = [GEMV_SPACE, DECODER_SPACE, GEMM_SPACE]


KERNELS = [
    BenchKernel("simple_matmul", simple_matmul, _matmul_args, _matmul_torch, out_index=2),
    BenchKernel(
        "rmsnorm_32x4096",
        rmsnorm_32x4096,
        lambda t, g: _rows_args(t, g, True),
        _rmsnorm_torch,
        out_index=2,
    ),
    BenchKernel(
        "softmax_32x4096",
        softmax_32x4096,
        lambda t, g: _rows_args(t, g, False),
        _softmax_torch,
        out_index=1,
    ),
    GEMV_SPACE.kernel(),
    DECODER_SPACE.kernel(),
    GEMM_SPACE.kernel(),  # one SPMD program
]
