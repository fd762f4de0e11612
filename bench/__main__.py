"""`python -m bench`: see bench/runner.py and bench/README.md."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.runner import main

if __name__ == "__main__":
    sys.exit(main())
