"""The emulator's compiled helpers (C through cffi, issue 15), if built: `lib` and `ffi` of
`legato.targets.bertha._native` (`native_build.py` builds it; scripts/bootstrap.sh runs that),
else None. Each helper has a Python reference that runs without them and gives the same bits:
the MPU numerics (`mpu_fast`) and the scalar ISA (`Emulator.native_scalars`).

`$LEGATO_NATIVE=0` makes `ENABLED` false: the references run even when the helpers are built.
"""

from __future__ import annotations

import os

try:
    from legato.targets.bertha import _native  # built by native_build.py
except ImportError:  # not built: the references run instead
    _native = None

lib = None if _native is None else _native.lib
ffi = None if _native is None else _native.ffi
ENABLED = lib is not None and os.environ.get("LEGATO_NATIVE", "1") != "0"
