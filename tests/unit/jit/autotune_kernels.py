"""Small kernels for tests/unit/jit/test_autotune.py (in a file of their own: a second process
imports them to find the first one's stored choice)."""

import numpy as np

import legato
import legato.model.bertha as bertha

F32 = legato.types.float("float32")
ROWS = 8


def two_cores(ctx):
    return bertha.Bertha(ctx, "bertha", 2, False, 8, 1 << 30)


T = legato.get_model().tensor_type(F32, [ROWS, 256], "shared_dram")


def plus_one(x: T, out: T, rows: legato.constexpr):
    """out = x + 1, `rows` rows per load; a `rows` that does not divide ROWS leaves the last
    rows unwritten (a wrong result), one above ROWS is refused at compile time."""
    device = legato.get_context().get_device()
    assert rows <= ROWS, "at most ROWS rows per tile"
    with device.get_core(0):
        for i in legato.static_range(ROWS // rows):
            t = legato.tensor.load(x[i * rows : (i + 1) * rows, :])
            legato.tensor.memcpy(out[i * rows : (i + 1) * rows, :], t + 1.0)


CONFIGS = [legato.Config(rows=r) for r in (1, 2, 3, 8, 16)]


def reference(x, out):
    return np.asarray(x) + 1.0


def make(**kw):
    """A fresh tuner over plus_one (a new Kernel: nothing cached in the object)."""
    kernel = legato.compile(backend=two_cores)(plus_one)
    return legato.autotune(configs=CONFIGS, key=["x"], workers=2, **kw)(kernel)


def second_process():
    """What a second process prints: does it find the stored choice?"""
    import json

    tuner = make()
    x = np.arange(ROWS * 256, dtype=np.float32).reshape(ROWS, 256)
    out = np.zeros_like(x)
    tuner(x, out)
    assert np.array_equal(out, x + 1.0)
    print(json.dumps({"tune_count": tuner.tune_count, "best": tuner.best_config,
                      "compiles": tuner.compile_count}))  # fmt: skip
