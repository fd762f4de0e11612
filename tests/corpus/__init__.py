"""The differential corpus: kernels every level must agree on (see `kernels.py`)."""
