"""`python -m bench`: see bench/runner.py and bench/README.md.

`--plot out.png|svg` also draws the roofline plot of the rows (bench/plot.py); with
`--rows FILE.json` (the output of `--json`) it draws those rows without running anything."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.runner import main


def _take(argv: list[str], flag: str) -> tuple[str | None, list[str]]:
    """The value of `flag VALUE` / `flag=VALUE` in argv, and argv without it."""
    rest, value, it = [], None, iter(argv)
    for a in it:
        if a == flag:
            value = next(it, None)
            if value is None:
                sys.exit(f"python -m bench: error: {flag} needs a file name")
        elif a.startswith(flag + "="):
            value = a.split("=", 1)[1]
        else:
            rest.append(a)
    return value, rest


def run(argv: list[str]) -> int:
    import json

    plot_path, argv = _take(argv, "--plot")
    rows_path, argv = _take(argv, "--rows")
    if plot_path is None:
        if rows_path is not None:
            sys.exit("python -m bench: error: --rows is for --plot")
        return main(argv)
    from bench.plot import plot

    if rows_path is not None:
        with open(rows_path) as f:
            rows = json.load(f)
        status = 0
    else:
        rows = []
        status = main(argv, rows_out=rows)
    print(f"roofline plot of {len(rows)} rows: {plot(rows, plot_path)}")
    return status


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
