"""Fuzz `legato-opt` with mutations of the lit corpus: deleted, duplicated and swapped tokens
and lines, truncations. Whatever the input: exit status 0 or 1, never a Python traceback, never
a hang (each run is bounded by an alarm), every error names a line of the input
(`file:line[:col]`: zero unlocated errors, issue 17 item 7) and none prints the module (a
verifier error shows its op's first line, not xDSL's annotated dump of the whole IR)."""

import os
import re
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "tools"))

from opt_helpers import run_opt

CORPUS = sorted((ROOT / "tests" / "filecheck").rglob("*.mlir"))
TEXTS = {p: p.read_text() for p in CORPUS}
# whitespace, identifiers with their sigil (%x, @k, !legato.tensor, #core.arg, ^bb0), punctuation
# the first line of a diagnostic: `FILE:LINE[:COL]` (xDSL's parse errors end there; the rest
# say `: error: ...`); an error about no op in particular names its chunk's first line
LOCATED = re.compile(r"^\S+:\d+(:\d+)?(:|$)")
# what xDSL's verifier dump looks like: the module in generic form, the failing op boxed
IR_DUMP = re.compile(r'^\s*"builtin\.module"\(\)|^\s*\| Operation does not verify', re.M)
TOKEN = re.compile(r"\s+|[%@#!^]?[\w.$-]+|\S")
OPTIONS = [
    [],
    ["--split-input-file"],
    ["--split-input-file", "-p", "convert-legato-to-core"],
    ["--split-input-file", "-p", "legato-to-backend"],
    ["--split-input-file", "-p", "core-plan-memory,convert-core-to-backend"],
    ["--split-input-file", "-p", "backend-allocate-registers"],
    ["--split-input-file", "--verify-diagnostics"],
    ["--split-input-file", "-t", "asm"],
]


def mutate(text: str, kind: str, i: int, j: int) -> str:
    if kind == "truncate":
        return text[: i % (len(text) + 1)]
    units = TOKEN.findall(text) if kind.endswith("token") else text.splitlines(keepends=True)
    if not units:
        return text
    i, j = i % len(units), j % len(units)
    if kind.startswith("delete"):
        del units[i]
    elif kind.startswith("duplicate"):
        units.insert(j, units[i])
    else:
        units[i], units[j] = units[j], units[i]
    return "".join(units)


MUTATION = st.tuples(
    st.sampled_from(
        [
            "delete-token",
            "duplicate-token",
            "swap-token",
            "delete-line",
            "duplicate-line",
            "swap-line",
            "truncate",
        ]
    ),
    st.integers(0, 1 << 20),
    st.integers(0, 1 << 20),
)


def test_corpus_is_there():
    assert len(CORPUS) >= 20  # the fuzzer below has something to mutate


@settings(
    max_examples=100 * int(os.environ.get("LEGATO_FUZZ_SCALE", "1")),  # larger: raise the scale
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    path=st.sampled_from(CORPUS),
    mutations=st.lists(MUTATION, min_size=1, max_size=3),
    options=st.sampled_from(OPTIONS),
)
def test_mutated_corpus_never_crashes_legato_opt(tmp_path, path, mutations, options):
    text = TEXTS[path]
    for m in mutations:
        text = mutate(text, *m)
    src = tmp_path / "fuzz.mlir"
    src.write_text(text)
    status, out, err = run_opt(src, *options, timeout=30)
    assert status in (0, 1), (path.name, mutations, options, status, err[-2000:])
    assert "Traceback (most recent call last)" not in out + err, (path.name, mutations, options)
    if status == 1:  # every diagnostic says where: file:line[:col]
        first = err.lstrip().splitlines()[0] if err.strip() else ""
        assert LOCATED.match(first), (path.name, mutations, options, err[-2000:])
        assert not IR_DUMP.search(err), (path.name, mutations, options, err[:2000])
