"""torch's own OpInfo samples through `torch.compile(backend="legato")`: what runs where.

`python -m legato.tools.opinfo_table [--cap N] [--op NAME ...] [--dtype bf16|f32]` runs the
samples of the LLM op set (`OPS`: torch's `op_db` entries, `sample_inputs` and
`reference_inputs`, at most `--cap` per op and dtype, spread evenly over the op's samples) on
the emulator and prints a Markdown table (kept in docs/torch.md): per op and dtype how many
samples ran on Legato and matched eager, ran on Legato and did not, ran eagerly (and why), or
crashed. `tests/unit/torch/test_opinfo.py` asserts zero wrong and zero crashes.

Needs torch's test utilities (`torch.testing._internal`, which imports `expecttest`: a dev
dependency).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field

import torch

# (op_db name, variant_test_name): the ops issue 13 names and the LLM op set
OPS: tuple[tuple[str, str], ...] = (
    ("add", ""),
    ("sub", ""),
    ("mul", ""),
    ("div", "no_rounding_mode"),
    ("rsub", ""),
    ("neg", ""),
    ("abs", ""),
    ("exp", ""),
    ("log", ""),
    ("log1p", ""),
    ("sqrt", ""),
    ("rsqrt", ""),
    ("tanh", ""),
    ("sigmoid", ""),
    ("cos", ""),
    ("sin", ""),
    ("erf", ""),
    ("pow", ""),
    ("nn.functional.silu", ""),
    ("nn.functional.gelu", ""),
    ("nn.functional.relu", ""),
    ("nn.functional.softplus", ""),
    ("maximum", ""),
    ("minimum", ""),
    ("max", "binary"),
    ("max", "reduction_with_dim"),
    ("max", "reduction_no_dim"),
    ("min", "reduction_with_dim"),
    ("min", "reduction_no_dim"),
    ("clamp", ""),
    ("clamp_min", ""),
    ("clamp_max", ""),
    ("eq", ""),
    ("ne", ""),
    ("lt", ""),
    ("le", ""),
    ("gt", ""),
    ("ge", ""),
    ("where", ""),
    ("masked_fill", ""),
    ("softmax", ""),
    ("log_softmax", ""),
    ("sum", ""),
    ("mean", ""),
    ("amax", ""),
    ("amin", ""),
    ("argmax", ""),
    ("argmin", ""),
    ("cumsum", ""),
    ("matmul", ""),
    ("mm", ""),
    ("bmm", ""),
    ("addmm", ""),
    ("baddbmm", ""),
    ("nn.functional.linear", ""),
    ("nn.functional.layer_norm", ""),
    ("nn.functional.rms_norm", ""),
    ("nn.functional.scaled_dot_product_attention", ""),
    ("nn.functional.embedding", ""),
    ("index_select", ""),
    ("t", ""),
    ("transpose", ""),
    ("permute", ""),
    ("reshape", ""),
    ("view", ""),
    ("unsqueeze", ""),
    ("squeeze", ""),
    ("expand", ""),
    ("cat", ""),
    ("stack", ""),
    ("split", ""),
    ("split_with_sizes", ""),
    ("narrow", ""),
    ("select", ""),
    ("__getitem__", ""),
    ("clone", ""),
    ("ones", ""),
    ("zeros", ""),
    ("full", ""),
    ("new_ones", ""),
    ("new_zeros", ""),
    ("new_full", ""),
    ("arange", ""),
    ("bitwise_and", ""),
)

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
INDEX_DTYPES = {"i64": torch.int64, "bool": torch.bool}
"""The dtypes of the int64/bool index and mask ops (`INDEX_OPS`), which take no float."""

INDEX_OPS = frozenset({"bitwise_and"})


def dtypes_of(name: str) -> dict:
    """The dtypes (name: torch dtype) `name`'s samples run in."""
    return INDEX_DTYPES if name in INDEX_OPS else DTYPES


CAP = 4
"""Samples per op and dtype by default (CI's time): spread evenly over the op's samples."""

# Relative to the largest |eager| value of the output (and elementwise rtol): bf16 two ulps;
# f32 the split-bf16 MPU matmul's ~2^-16 for the matmul family, else 1e-5.
_TOL = {torch.bfloat16: (2 * 2**-8, 2 * 2**-8), torch.float32: (1e-5, 1e-5)}
_MATMUL_TOL_F32 = 2**-14
_MATMUL_OPS = {
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "nn.functional.linear",
    "nn.functional.scaled_dot_product_attention",
}


@dataclass
class Outcome:
    """One sample: `status` is "legato" (all of its compute on Legato), "partial" (some),
    "eager" (none), "none" (no compute node), "torch" (torch.compile itself fails, with any
    backend) or "crash"; `wrong` when the result differs from eager (`detail` says how);
    `reasons`: why nodes ran eagerly."""

    op: str
    dtype: str
    sample: str
    status: str
    wrong: bool = False
    detail: str = ""
    reasons: list[str] = field(default_factory=list)


def _op_name(name, variant):
    return f"{name}.{variant}" if variant else name


def opinfos():
    """The OpInfo of each entry of `OPS`, in order (missing ones are an error)."""
    from torch.testing._internal.common_methods_invocations import op_db

    by = {(o.name, o.variant_test_name): o for o in op_db}
    missing = [k for k in OPS if k not in by]
    assert not missing, f"op_db has no {missing}"
    return [by[k] for k in OPS]


def _spread(items, cap):
    """At most `cap` of `items`, evenly spaced, the first and the last included."""
    if len(items) <= cap:
        return items
    if cap == 1:
        return items[:1]
    return [items[round(i * (len(items) - 1) / (cap - 1))] for i in range(cap)]


def samples(info, dtype, cap=CAP):
    """At most `cap` of the op's `reference_inputs` (its `sample_inputs` first, then the
    reference extras), spread evenly; None when the op does not take `dtype`."""
    if dtype not in info.supported_dtypes("cpu"):
        return None
    torch.manual_seed(0)
    items = list(info.reference_inputs("cpu", dtype, requires_grad=False))
    return _spread(items, cap)


def _describe(s) -> str:
    def d(x):
        if isinstance(x, torch.Tensor):
            return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(d(y) for y in x) + "]"
        return repr(x)

    parts = [d(s.input)] + [d(a) for a in s.args] + [f"{k}={d(v)}" for k, v in s.kwargs.items()]
    return ", ".join(parts)


def _compare(actual, expected, dtype, matmul) -> str:
    """'' when `actual` matches eager's `expected` (structure, dtypes, shapes, values within
    tolerance; NaN where eager has NaN), else what differs."""
    from torch.utils._pytree import tree_flatten

    a, sa = tree_flatten(actual)
    e, se = tree_flatten(expected)
    if sa != se:
        return f"result structure {sa} != eager's {se}"
    for i, (x, y) in enumerate(zip(a, e)):
        if not isinstance(y, torch.Tensor):
            if x != y:
                return f"output {i}: {x!r} != eager's {y!r}"
            continue
        if not isinstance(x, torch.Tensor):
            return f"output {i}: {type(x).__name__}, eager gives a tensor"
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"output {i}: {x.dtype}{list(x.shape)}, eager {y.dtype}{list(y.shape)}"
        if not (y.is_floating_point() or y.is_complex()):
            if not torch.equal(x, y):
                return f"output {i}: {int((x != y).sum())} element(s) differ (exact dtype)"
            continue
        xf, yf = x.double(), y.double()
        nan = torch.isnan(yf)
        if not torch.equal(torch.isnan(xf), nan):
            return f"output {i}: NaN where eager has none (or the reverse)"
        inf = torch.isinf(yf)
        if not torch.equal(xf[inf], yf[inf]) or torch.isinf(xf[~inf]).any():
            return f"output {i}: infinities differ from eager's"
        fin = ~(nan | inf)
        if not fin.any():
            continue
        rtol, atol = _TOL.get(dtype, (0.0, 0.0))
        if matmul and dtype == torch.float32:
            rtol = atol = _MATMUL_TOL_F32
        scale = max(yf[fin].abs().max().item(), 1.0)
        diff = (xf[fin] - yf[fin]).abs()
        bad = diff > atol * scale + rtol * yf[fin].abs()
        if bad.any():
            return (
                f"output {i}: {int(bad.sum())} of {int(fin.sum())} element(s) differ, max |diff| "
                f"{diff.max().item():.3g} (max |eager| {scale:.3g})"
            )
    return ""


def _callable(info):
    """The function a sample calls: the OpInfo's `op`, except where that wraps the op in
    `wrapper_set_seed` (a graph break for dynamo; the samples' dropout_p is 0, so no seed
    matters)."""
    if info.name == "nn.functional.scaled_dot_product_attention":
        return torch.nn.functional.scaled_dot_product_attention
    return info.op


def _run_compiled(info, sample, backend):
    """The sample's call compiled with `backend`; its tensors are closed over (dynamo lifts them
    to graph inputs), which traces far faster than rebuilding the arguments in the function."""
    op, inp, args, kwargs = _callable(info), sample.input, sample.args, sample.kwargs

    def f():
        return op(inp, *args, **kwargs)

    torch._dynamo.reset()
    with torch.no_grad():
        return torch.compile(f, backend=backend, dynamic=False)()


def run_sample(info, sample, dtype) -> Outcome:
    """Runs one sample through `torch.compile(backend="legato")` (default options: what Legato
    cannot run falls back) and eagerly, and classifies it (`Outcome`)."""
    import legato.torch as lt

    name = _op_name(info.name, info.variant_test_name)
    out = Outcome(name, _DTYPE_NAMES[dtype], _describe(sample), "none")
    with torch.no_grad():
        expected = _callable(info)(sample.input, *sample.args, **sample.kwargs)
    before = len(lt.summaries())
    try:
        actual = _run_compiled(info, sample, "legato")
    except Exception as e:  # noqa: BLE001 - classified: torch's own failure or Legato's crash
        out.detail = f"{type(e).__name__}: {_first_line(e)}"
        try:
            _run_compiled(info, sample, "aot_eager")
            out.status = "crash"
        except Exception:  # noqa: BLE001 - torch.compile fails without Legato too
            out.status = "torch"
        return out
    finally:
        torch._dynamo.reset()
    sums = lt.summaries()[before:]
    on = sum(s.legato_nodes for s in sums)
    ext = [e for s in sums for e in s.extern]
    eager_calls = [k.eager_reason for s in sums for k in s.kernels if k.eager_calls]
    out.reasons = [f"{e.op}: {e.reason}" for e in ext] + [f"call: {r}" for r in eager_calls]
    if on and not eager_calls:
        out.status = "partial" if ext else "legato"
    elif ext or eager_calls:
        out.status = "eager"
    out.detail = _compare(actual, expected, dtype, info.name in _MATMUL_OPS)
    out.wrong = bool(out.detail)
    return out


_DTYPE_NAMES = {v: k for k, v in (DTYPES | INDEX_DTYPES).items()}


def _first_line(e) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def run(ops=None, dtypes=("f32", "bf16"), cap=CAP, progress=None) -> list[Outcome]:
    """The outcomes of every sample of `OPS` (or of the op names in `ops`)."""
    outs = []
    for info in opinfos():
        name = _op_name(info.name, info.variant_test_name)
        if ops and name not in ops:
            continue
        dts = dtypes_of(name)
        for dn in dtypes if dts is DTYPES else dts:
            for s in samples(info, dts[dn], cap) or ():
                o = run_sample(info, s, dts[dn])
                if progress:
                    progress(o)
                outs.append(o)
    return outs


_LEGEND = (
    "Each count is per dtype: one number when f32 and bf16 agree, else f32 / bf16. "
    "Columns: samples run (at most the cap per op and dtype); on Legato and equal to eager "
    "within tolerance; on Legato and wrong; partly on Legato (some nodes ran eagerly); wholly "
    "eager (fallback); not traced (dynamo ran the call eagerly: a graph break, no Legato "
    "graph); crash (an exception Legato causes); and why nodes ran eagerly (distinct reasons)."
)


def _short(reason: str) -> str:
    op, _, why = reason.partition(": ")
    why = why.removeprefix("resolver refused: ")
    why = why.split(" (used by ")[0]  # a comparison's: the consumer is the graph output here
    why = why if len(why) <= 80 else why[:77] + "..."
    return f"`{op}` {why}" if why else reason[:80]


def table(outs: list[Outcome]) -> str:
    """The Markdown table of `outs`: one row per op, each count "f32 / bf16" (one number when
    both dtypes agree), and a line of totals."""
    rows: dict = {}
    for o in outs:
        rows.setdefault(o.op, {}).setdefault(o.dtype, []).append(o)

    def counts(group):
        c = Counter(o.status for o in group)
        return (
            len(group),
            sum(1 for o in group if o.status == "legato" and not o.wrong),
            sum(1 for o in group if o.wrong),
            c["partial"],
            c["eager"],
            c["none"] + c["torch"],
            c["crash"],
        )

    def cell(values):
        return str(values[0]) if len(set(values)) == 1 else " / ".join(map(str, values))

    lines = [
        "| op | samples | Legato, correct | Legato, wrong | partly eager | eager | not traced "
        "| crash | why eager (first reason per ATen op) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for op, by_dtype in rows.items():
        per = [counts(g) for g in by_dtype.values()]
        first: dict = {}
        for r in (r for g in by_dtype.values() for o in g for r in o.reasons):
            first.setdefault(r.partition(": ")[0], _short(r))
        why = "; ".join(first.values()).replace("|", "/")
        lines.append(f"| {op} | " + " | ".join(cell(v) for v in zip(*per)) + f" | {why} |")
    total = counts(outs)
    lines.append("")
    lines.append(
        f"{total[0]} samples ({', '.join(rows[next(iter(rows))]) if rows else ''}): "
        f"{total[1]} on Legato and correct, {total[2]} wrong, {total[3]} partly eager, "
        f"{total[4]} eager, {total[5]} not traced, {total[6]} crashes."
    )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cap", type=int, default=CAP)
    p.add_argument("--op", action="append")
    p.add_argument("--dtype", action="append", choices=sorted(DTYPES))
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)

    def progress(o):
        if a.verbose or o.wrong or o.status in ("crash", "torch"):
            wrong = "WRONG " if o.wrong else ""
            print(
                f"{o.op} {o.dtype} [{o.sample}]: {o.status} {wrong}{o.detail} {o.reasons[:2]}",
                file=sys.stderr,
                flush=True,
            )

    outs = run(a.op, tuple(a.dtype or ("f32", "bf16")), a.cap, progress)
    print(table(outs))
    print()
    print(_LEGEND)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
