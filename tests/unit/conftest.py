import os

# The tests verify the IR after every level (the compiler verifies only its input and output
# by default; legato/compiler.py `compile_kernel`).
os.environ.setdefault("LEGATO_VERIFY_EACH", "1")
# The emulator checks every run for unsynchronised accesses (`arch.hazards`); off by default
# outside the tests for speed (docs/isa.md).
os.environ.setdefault("LEGATO_HAZARDS", "1")
