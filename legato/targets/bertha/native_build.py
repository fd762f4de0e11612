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

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = "legato.targets.bertha._native"

CDEF = """
int mpu_weight(const uint16_t *w, int K, int N, double *f64, double *cm, double *v,
               double *vmax);
void mpu_rows(const uint16_t *a, int M, int K, double *f64, double *rs, double *u);
typedef struct {
    int32_t op, a, b, c;
    int64_t imm;
} sins;
long scalar_run(const sins *code, long n, int64_t *r, long *pc, long budget, int core,
                int num_cores, int64_t window_base, int64_t window_size, int *status);
long mpu_finish(const double *s, int M, int K, int N, const double *rs, const double *u,
                const double *cm, const double *v, double vmax, const float *acc, float *out,
                long *todo);
"""
SOURCES = ["native/mpu.c", "native/scalar.c"]


def build(out_dir: str = HERE) -> str:
    """Compile the extension into `out_dir` (default: this package); returns its path."""
    import cffi  # a build-time dependency (pyproject's dependencies pin it)

    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    src = "\n".join(open(os.path.join(HERE, s)).read() for s in SOURCES)
    ffi.set_source(MODULE, src, extra_compile_args=["-O3", "-std=c99", "-fno-fast-math"])
    with tempfile.TemporaryDirectory(prefix="legato-native-") as tmp:
        so = ffi.compile(tmpdir=tmp, verbose=False)
        name = os.path.basename(so)
        dest = os.path.join(out_dir, name)
        os.replace(so, dest)
    return dest


if __name__ == "__main__":
    print(f"built {build(sys.argv[1] if len(sys.argv) > 1 else HERE)}")
