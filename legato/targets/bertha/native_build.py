"""Build the emulator's compiled helpers (`legato.targets.bertha._native`, issue 15) with cffi.

    python -m legato.targets.bertha.native_build      # scripts/bootstrap.sh runs it

Compiles `native/*.c` (C99, -O3, no fast-math: each float operation stays one IEEE operation)
into an extension module next to this file. Without it the emulator runs the Python reference
of each helper (`legato.targets.bertha.mpu_fast`), which gives the same bits, only slower.
"""

from __future__ import annotations

import os
import sys
import tempfile

from legato.targets.bertha.native import CDEF, HERE, SOURCES, source_hash

MODULE = "legato.targets.bertha._native"


def build(out_dir: str = HERE) -> str:
    """Compile the extension into `out_dir` (default: this package); returns its path."""
    import cffi  # a build-time dependency (pyproject's dependencies pin it)

    ffi = cffi.FFI()
    ffi.cdef(CDEF + "const char *legato_source_hash(void);\n")
    src = "\n".join(open(os.path.join(HERE, s)).read() for s in SOURCES)
    src += f'\nconst char *legato_source_hash(void) {{ return "{source_hash()}"; }}\n'
    # (libdl: native/vpu.c finds libmvec's vector exp with dlopen; a stub in glibc >= 2.34)
    ffi.set_source(
        MODULE,
        src,
        extra_compile_args=["-O3", "-std=c99", "-fno-fast-math"],
        libraries=["dl"],
    )
    with tempfile.TemporaryDirectory(prefix="legato-native-") as tmp:
        so = ffi.compile(tmpdir=tmp, verbose=False)
        name = os.path.basename(so)
        dest = os.path.join(out_dir, name)
        os.replace(so, dest)
    return dest


if __name__ == "__main__":
    print(f"built {build(sys.argv[1] if len(sys.argv) > 1 else HERE)}")
