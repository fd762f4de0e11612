"""`python -m bench.tune [--target T ...] [--kernel K ...] [--workers N]`

Tunes the bench's declared search spaces (`bench.kernels.SPACES`: GEMV tile width, GEMM group
size and group spread, the decoder's attention split and per-phase core counts) on simulated
cycles, prints each report (every config's
cycles, the hand pick's among them, the dropped ones with their reason) and writes the choices
to `bench/tuned.json`, which `python -m bench` reads instead of tuning. `python -m bench
--retune` does the same before measuring.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

TARGETS = ("bertha", "bertha-evt1")


def retune(names: Sequence[str] | None, targets: Sequence[str], workers: int | None) -> list:
    """Tune each selected space on each target, write `bench/tuned.json`; the reports."""
    from bench.kernels import SPACES, write_tuned
    from bench.runner import _model_factory

    spaces = [s for s in SPACES if not names or s.name in names]
    reports = []
    for space in spaces:
        for target in targets:
            model = _model_factory(target)()
            report = space.tune(model, workers)
            hand = space.hand(model)
            hand_row = next(r for r in report.rows if r.config == hand)
            print(report)
            print(
                f"  hand pick {hand}: {hand_row.cycles} cycles; tuned {report.best.config}: "
                f"{report.best.cycles} cycles",
                flush=True,
            )
            reports.append(report)
    if spaces:
        write_tuned(spaces)
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tune", description=__doc__.split("\n\n")[1])
    ap.add_argument("--target", action="append", choices=TARGETS, help="default: both")
    ap.add_argument("--kernel", action="append", help="only this space (repeatable)")
    ap.add_argument("--workers", type=int, default=None, help="processes (default at most 2)")
    args = ap.parse_args(argv)
    retune(args.kernel, args.target or TARGETS, args.workers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
