"""No two places in legato/ share a long duplicated block (issue 12, item 6).

    python scripts/duplicate_code.py          # exit 1 if a block is duplicated

Runs pylint's duplicate-code check (R0801, pylint pinned in pyproject's dev extras) with the
settings in pyproject's `[tool.pylint.*]`: blocks of 10 or more lines, imports, signatures,
docstrings and comments not counted. Why 10: a shorter run of equal lines is mostly the same few
statements said twice for a reason (a loop header, a raise with its message, a dataclass's
fields); ten lines are a whole piece of logic or a table, and each belongs in one place. (At 8
the check also reports two 10-line blocks of the interpreters that the machine-model work
merges; at 12 it misses the op-name tables below.)

A pair that is duplicated on purpose goes in ALLOWED below with the hash this script prints for
it and the reason; the hash covers the shared text, so an allowed pair that changes is reported
again.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# hash of the shared text -> why the two copies stay (for now)
ALLOWED: dict[str, str] = {
    # none today: the op-name lists that were here are derived from legato/opset.py now
}

_PLACE = re.compile(r"^==(\S+):\[(\d+):(\d+)\]$")


def findings() -> list[tuple[str, list[str], str]]:
    """(hash, ["module:[a:b]", ...], shared text) of every duplicated block pylint reports."""
    proc = subprocess.run(
        [sys.executable, "-m", "pylint", "--output-format=json", "legato"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode & 32 or not proc.stdout.strip():  # 32: usage error, no report
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"pylint did not run (exit {proc.returncode})")
    out = []
    for msg in json.loads(proc.stdout):
        if msg["symbol"] != "duplicate-code":
            continue
        lines = msg["message"].splitlines()[1:]
        places = [m.group(0)[2:] for line in lines if (m := _PLACE.match(line))]
        code = [line for line in lines if not _PLACE.match(line)]
        # the hash ignores indentation: pylint quotes the block as indented in either file
        text = "\n".join(line.strip() for line in code)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        out.append((digest, sorted(places), "\n".join(code)))
    return out


def main() -> int:
    found = findings()
    bad = [f for f in found if f[0] not in ALLOWED]
    stale = set(ALLOWED) - {f[0] for f in found}
    for digest, places, text in bad:
        print(f"duplicated block {digest}: {' and '.join(places)}")
        print("    " + text.replace("\n", "\n    "))
    for digest in sorted(stale):
        print(f"note: allowed duplicate {digest} is gone; remove it from ALLOWED")
    print(
        f"duplicate-code: {len(bad)} duplicated block(s) in legato/"
        + (f" ({len(found) - len(bad)} allowed)" if len(found) > len(bad) else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
