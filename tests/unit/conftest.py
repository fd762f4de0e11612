import os

# The tests verify the IR after every level (the compiler verifies only its input and output
# by default; legato/compiler.py `compile_kernel`).
os.environ.setdefault("LEGATO_VERIFY_EACH", "1")
