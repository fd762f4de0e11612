"""`python -m bench.first_table` (issue 14's first table): the hand-written decoder layer and the
torch.compile'd one at the same shape, measured in one run (no timing assertions)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from bench import first_table  # noqa: E402
from bench.runner import measure  # noqa: E402


def test_small_layer_row_matches_torch_and_the_bench_runner():
    shape = first_table.SHAPES[0]
    row = first_table.measure(shape, "bertha")
    assert row["hand"]["matches_torch"] and row["torch"]["matches_torch"], row
    assert row["torch"]["kernels"] == 1, row
    assert row["ratio"] == row["torch"]["cycles"] / row["hand"]["cycles"]
    # the hand-written kernel as `python -m bench` measures it at that shape
    from bench.decoder import make_decoder_layer

    ref = measure(make_decoder_layer(*shape), "bertha", repeat=1)
    assert row["hand"]["cycles"] == ref["cycles"] and ref["matches_torch"]
    assert row["hand"]["roofline_cycles"] == ref["roofline_cycles"]
    text = first_table.table([row])
    assert f"| 256/2/256/128 | bertha | {row['hand']['cycles']} |" in text, text
