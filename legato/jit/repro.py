"""Repro bundles: with `LEGATO_REPRO=DIR`, a kernel call or compile that fails writes one folder
under DIR that reproduces the failure on its own, so a bug report is that folder.

`DIR/<kernel>-<stage>-<n>/` holds:

- `repro.py`: a standalone script (it needs only an installed legato) that does again what
  failed and prints the error (`<ErrorClass>: <message>`), exit status 1; 0 and "did not
  reproduce" if it passes;
- `kernel.mlir`, `kernel.core.mlir`, `kernel.backend.mlir`: the IR at each level the compile
  reached (the legato level with its Python locations);
- `kernel.elf`: the binary, for a run failure;
- `inputs/`: the arguments as they were at the call (`argN.npy`, bf16 headed `bfloat16`, see
  `legato.arrays.save_npy`; scalars and tuples described in `meta.json`);
- `meta.json`: the kernel, the stage that failed (`frontend`, `compile` or `run`), the target's
  ComputeModel, the constexprs, the argument access and the run's limits; `error.txt`: the
  error as the caller saw it; `source.py`: a copy of the kernel's Python file.

A `frontend` failure is reproduced by importing the kernel's file (its original path, else the
copy) and emitting the kernel; a `compile` failure by compiling `kernel.mlir` for the model; a
`run` failure by running `kernel.elf` on the inputs. The bundle's path is added to the error as a
note (`repro bundle: ...`) and as its `repro_bundle` attribute.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
from pathlib import Path

import numpy as np

from legato.arrays import save_npy

ENV = "LEGATO_REPRO"
_counter = itertools.count()


def directory() -> Path | None:
    """The bundles' directory (`$LEGATO_REPRO`), or None: bundles off."""
    d = os.environ.get(ENV, "")
    return Path(d) if d else None


def snapshot(values: list) -> list:
    """Copies of the call's arguments (arrays copied, tuples recursed), taken before the run
    writes any of them."""
    return [_copy(v) for v in values]


def _copy(v):
    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, (tuple, list)):
        return [_copy(x) for x in v]
    return v


def compile_failed(kernel, constexprs: dict, error: BaseException) -> Path | None:
    """Write the bundle of a compile (or frontend) failure of `kernel`; None when bundles are
    off or the bundle itself cannot be written (the original error matters more)."""
    return _guarded(kernel, constexprs, error, None)


def run_failed(kernel, constexprs: dict, error: BaseException, run: dict) -> Path | None:
    """Write the bundle of a failed run: `run` has `binary`, `inputs` (a `snapshot`),
    `access` and `limits` (a runtime `Limits`)."""
    return _guarded(kernel, constexprs, error, run)


def _guarded(kernel, constexprs, error, run) -> Path | None:
    root = directory()
    if root is None or getattr(error, "repro_bundle", None) is not None:
        return None
    try:
        path = _write(root, kernel, constexprs, error, run)
    except Exception as e:  # noqa: BLE001 - a failing bundle must not hide the user's error
        error.add_note(f"(LEGATO_REPRO: could not write the repro bundle: {e})")
        return None
    error.repro_bundle = path
    error.add_note(f"repro bundle: {path} (python {path / 'repro.py'})")
    return path


def _write(root: Path, kernel, constexprs: dict, error, run) -> Path:
    from legato import compiler
    from legato.frontend.codegen import print_module

    stage = "run" if run else "compile"
    model = kernel.model
    try:
        module = kernel.emit_module(**constexprs)
    except Exception:  # noqa: BLE001 - the frontend is where it fails
        module = None
        if not run:
            stage = "frontend"
    out = root / f"{kernel.name}-{stage}-{os.getpid()}-{next(_counter)}"
    out.mkdir(parents=True, exist_ok=False)
    src = Path(kernel.source.file)
    if src.is_file():
        shutil.copyfile(src, out / "source.py")
    if module is not None:
        (out / "kernel.mlir").write_text(print_module(module))
        for level, suffix in (("core", ".core.mlir"), ("backend", ".backend.mlir")):
            try:
                compiler.lower(module, model, level)
            except Exception:  # noqa: BLE001 - the level the compile did not reach
                break
            (out / f"kernel{suffix}").write_text(compiler.print_ir(module))
    meta = {
        "kernel": kernel.name,
        "stage": stage,
        "source": str(src),
        "model": {k: v for k, v in dataclasses.asdict(model).items() if k != "extra"},
        "constexprs": _jsonable(constexprs),
        "error": {"class": type(error).__name__, "message": str(error)},
    }
    if run:
        (out / "kernel.elf").write_bytes(bytes(run["binary"]))
        (out / "inputs").mkdir()
        meta["args"] = [
            _save_arg(out / "inputs", f"arg{i}", v) for i, v in enumerate(run["inputs"])
        ]
        meta["access"] = run["access"]
        lim = run["limits"]
        meta["limits"] = {"time": lim.time, "cycles": lim.cycles, "memory": lim.memory}
        meta["map_written"] = run.get("map_written", False)
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    (out / "error.txt").write_text(f"{type(error).__name__}: {error}\n")
    (out / "repro.py").write_text(_SCRIPT.replace("@FIRST_LINE@", _first_line(error)))
    return out


def _first_line(error) -> str:
    text = f"{type(error).__name__}: {error}".splitlines()[0]
    return text.replace('"""', "'''")[:200]


def _save_arg(folder: Path, name: str, v):
    if isinstance(v, np.ndarray):
        save_npy(folder / f"{name}.npy", v)
        return {"kind": "array", "file": f"inputs/{name}.npy"}
    if isinstance(v, (list, tuple)):
        return {
            "kind": "tuple",
            "elements": [_save_arg(folder, f"{name}_{j}", x) for j, x in enumerate(v)],
        }
    return {"kind": "scalar", "value": v.item() if hasattr(v, "item") else v}


def _jsonable(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        try:
            json.dumps(v)
            out[k] = v
        except TypeError:
            out[k] = repr(v)
    return out


_SCRIPT = '''#!/usr/bin/env python3
"""Reproduces a Legato failure (written by LEGATO_REPRO): @FIRST_LINE@

Run it with the legato it was written by: `python repro.py`. It prints the error and exits 1,
or says the failure did not reproduce and exits 0. meta.json says what failed and where."""

import importlib.util
import json
import sys
from pathlib import Path

import ml_dtypes  # noqa: F401 - np.load of a bfloat16 .npy needs the dtype registered
import numpy as np

HERE = Path(__file__).resolve().parent
META = json.loads((HERE / "meta.json").read_text())


def model():
    from legato.model.compute_model import ComputeModel

    return ComputeModel(**META["model"])


def arg(spec):
    if spec["kind"] == "array":
        return np.load(HERE / spec["file"])
    if spec["kind"] == "tuple":
        return tuple(arg(e) for e in spec["elements"])
    return spec["value"]


def frontend():
    path = Path(META["source"])
    if not path.is_file():
        path = HERE / "source.py"
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the error may already be here (a decorator's check)
    for value in vars(module).values():
        if getattr(value, "_legato_kernel", False) and value.name == META["kernel"]:
            value.emit_module(**META["constexprs"])
            return
    raise SystemExit(f"kernel {META['kernel']} not found in {path}")


def compile_ir():
    from legato.compiler import compile_kernel
    from legato.interp.api import parse_module

    text = (HERE / "kernel.mlir").read_text()
    compile_kernel(parse_module(text, "kernel.mlir"), model(), META["kernel"])


def run():
    from legato.targets.bertha import runtime

    lim = META["limits"]
    runtime.run_binary(
        (HERE / "kernel.elf").read_bytes(),
        model(),
        [arg(a) for a in META["args"]],
        trace=False,
        expected_access=META["access"],
        limits=runtime.Limits(lim["time"], lim["cycles"], lim["memory"]),
        map_written=META["map_written"],
    )


def main():
    step = {"frontend": frontend, "compile": compile_ir, "run": run}[META["stage"]]
    try:
        step()
    except Exception as e:
        print(f"{type(e).__name__}: {e}")
        return 1
    print(f"did not reproduce: the {META['stage']} of {META['kernel']} succeeded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''
