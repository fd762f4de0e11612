"""Fuzz the frontend, the compiler and the runtime with malformed DSL kernels (issue 17, item 9).

Small valid kernels are mutated at the AST level (a number, a slice bound, a memory name, an
operator, a core index changed; a statement deleted, duplicated or moved; two arguments
swapped), written to a file and imported. Whatever the mutant:

* no traceback: defining, compiling, calling and interpreting it raise only `LegatoError`s
  (a `SyntaxError` of the mutant's Python, caught before Legato sees it, does not count);
* no silent wrong result: when both the compiled kernel (on the emulator) and the legato-level
  interpreter (the independent reference) run, their outputs are equal bit for bit; and when the
  interpreter refuses a run (an out-of-bounds slice, a deadlock), the compiled kernel must not
  complete silently.

Seeded and bounded: 12 mutants (about a second each) times `$LEGATO_FUZZ_SCALE` (default 1; the
other fuzzers, `test_opt_fuzz.py` and `tests/unit/targets/test_bertha_binary_fuzz.py`, scale by
it too), from `$LEGATO_FUZZ_SEED` (default 0).
"""

import ast
import importlib.util
import itertools
import os
import random
import textwrap

import pytest
import torch

from legato.errors import LegatoError

EXAMPLES = 12 * int(os.environ.get("LEGATO_FUZZ_SCALE", "1"))
SEED = int(os.environ.get("LEGATO_FUZZ_SEED", "0"))

PREAMBLE = """\
import legato
import legato.model.bertha as bertha

f32 = legato.types.float("float32")


def two_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 2, False, 4, 1 << 30)


def tt(shape, memory="shared_dram"):
    return legato.get_model().tensor_type(f32, shape, memory)

"""

KERNELS = [
    """
    @legato.compile(backend=two_cores)
    def k(x: tt([8, 16]), y: tt([8, 16]), out: tt([8, 16])):
        device = legato.get_context().get_device()
        with device.get_core(0):
            a = legato.tensor.load(x[0:4, :], "sram")
            b = legato.tensor.load(y[0:4, :], "sram")
            legato.tensor.memcpy(out[0:4, :], a * b + 1.0)
        with device.get_core(1):
            a = legato.tensor.load(x[4:8, :], "sram")
            legato.tensor.memcpy(out[4:8, :], legato.tensor.exp(a) - a)
    """,
    """
    @legato.compile(backend=two_cores)
    def k(x: tt(((-1, 32), 16)), out: tt(((-1, 32), 16)), total: tt([1, 16])):
        device = legato.get_context().get_device()
        with device.get_core(0):
            n = x.size(0)
            acc = legato.tensor.full((1, 16), 0.0, f32)
            for t in range((n + 7) // 8):
                tile = legato.tensor.load(x[t * 8:(t + 1) * 8, :])
                legato.tensor.memcpy(out[t * 8:(t + 1) * 8, :], tile * 2.0)
                acc = acc + legato.tensor.sum(tile, dim=0, keepdim=True)
            legato.tensor.memcpy(total, acc)
    """,
    """
    @legato.compile(backend=two_cores)
    def k(x: tt([8, 16]), out: tt([8, 16])):
        device = legato.get_context().get_device()
        with device.get_all_cores():
            c = legato.core_id()
            v = legato.tensor.load(x[c * 4:(c + 1) * 4, :])
            legato.tensor.memcpy(out[c * 4:(c + 1) * 4, :], legato.tensor.amax(v, dim=1, keepdim=True) - v)
    """,
    """
    @legato.compile(backend=two_cores)
    def k(x: tt([4, 16]), out: tt([4, 16])):
        device = legato.get_context().get_device()
        with device.get_top():
            legato.tensor.request_load(x, device.get_core(1), "sram", 0)
        with device.get_core(1):
            v = legato.tensor.receive(x, 0, "sram")
            legato.tensor.memcpy(out, legato.tensor.sigmoid(v) * v)
    """,
]

MEMORIES = ["sram", "shared_dram", "mpu_buffer", "private_dram", "sramm", "mpu_weight"]
OPS = [ast.Add(), ast.Sub(), ast.Mult(), ast.FloorDiv(), ast.Mod(), ast.Div(), ast.MatMult()]


def _mutate(tree: ast.Module, rng: random.Random) -> str:
    """One random mutation of the kernel in `tree`, as source text."""
    fn = tree.body[0]
    nodes = list(ast.walk(fn))
    kind = rng.choice(["number", "string", "operator", "delete", "duplicate", "move", "args"])
    if kind == "number":
        nums = [n for n in nodes if isinstance(n, ast.Constant) and type(n.value) in (int, float)]
        if nums:
            n = rng.choice(nums)
            n.value = rng.choice([0, 1, -1, 2, n.value + 1, n.value - 1, n.value * 2, 1 << 20])
    elif kind == "string":
        strs = [n for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        if strs:
            rng.choice(strs).value = rng.choice(MEMORIES)
    elif kind == "operator":
        ops = [n for n in nodes if isinstance(n, ast.BinOp)]
        if ops:
            rng.choice(ops).op = rng.choice(OPS)
    elif kind == "args":
        calls = [n for n in nodes if isinstance(n, ast.Call) and len(n.args) >= 2]
        if calls:
            c = rng.choice(calls)
            i, j = rng.sample(range(len(c.args)), 2)
            c.args[i], c.args[j] = c.args[j], c.args[i]
    else:
        bodies = [n.body for n in nodes if isinstance(n, (ast.With, ast.For, ast.FunctionDef))]
        body = rng.choice(bodies)
        i = rng.randrange(len(body))
        if kind == "delete" and len(body) > 1:
            del body[i]
        elif kind == "duplicate":
            body.insert(rng.randrange(len(body) + 1), body[i])
        else:
            body.insert(rng.randrange(len(body)), body.pop(i))
    return ast.unparse(ast.fix_missing_locations(tree))


def _load(tmp_path, source: str, n: int):
    path = tmp_path / f"fuzz_kernel_{n}.py"
    path.write_text(PREAMBLE + source + "\n")
    spec = importlib.util.spec_from_file_location(f"fuzz_kernel_{n}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


def _inputs(kernel, rng: random.Random):
    """Random tensors of the kernel's parameter types (dynamic dims at a random size)."""
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    out = []
    for p in kernel.params:
        if p.spec is None:
            raise LegatoError("a constexpr parameter")  # the mutants have none
        shape = [rng.randint(0, d.bound) if d.is_dynamic else d.size for d in p.spec.dims]
        out.append(torch.randn(*shape, generator=g).to(p.spec.dtype.torch))
    return out


def _outcome(fn, args):
    """('ok', outputs) or ('error', the LegatoError); any other exception propagates."""
    copies = [a.clone() for a in args]
    try:
        fn(*copies)
    except LegatoError as e:
        return "error", e
    return "ok", copies


CASES = list(itertools.islice(itertools.count(), EXAMPLES))


@pytest.mark.parametrize("case", CASES)
def test_mutated_kernels_fail_cleanly_or_agree_with_the_interpreter(case, tmp_path, monkeypatch):
    monkeypatch.setenv("LEGATO_CACHE_DIR", str(tmp_path / "cache"))
    rng = random.Random(SEED * 1_000_003 + case)
    base = textwrap.dedent(KERNELS[case % len(KERNELS)])
    tree = ast.parse(base)
    source = base
    for _ in range(rng.randint(1, 2)):
        source = _mutate(tree, rng)
    where = f"case {case} (seed {SEED}):\n{source}"
    try:
        compile(source, "mutant", "exec")
    except SyntaxError:
        pytest.skip("the mutant is not Python")
    try:
        kernel = _load(tmp_path, source, case)
        args = _inputs(kernel, rng)
    except LegatoError:
        return  # refused at definition (a bad annotation): clean
    except Exception as e:  # pragma: no cover - the failure this test exists to find
        pytest.fail(f"{type(e).__name__}: {e}\n{where}")
    try:
        ran, got = _outcome(kernel, args)
        ref, want = _outcome(lambda *a: kernel.interpret(*a, level="legato"), args)
    except Exception as e:  # pragma: no cover
        pytest.fail(f"not a LegatoError: {type(e).__name__}: {e}\n{where}")
    if ran == "ok" and ref == "ok":
        for i, (g, w) in enumerate(zip(got, want)):
            assert torch.equal(g.nan_to_num(), w.nan_to_num()), f"argument {i} differs\n{where}"
    if ran == "ok" and ref == "error":
        pytest.fail(f"the interpreter refused the run ({want}) but the binary ran\n{where}")
