"""`legato-run`: run a .mlir file at its IR level (like `xdsl-run`) and print the results.

    legato-run kernel.mlir -a a.npy -a 'rand:1@7x256' -a zeros [--level core] [--print out]

One `-a` per kernel argument, in signature order, or named as the IR names it (`-a x=rand`,
`-a %x=rand`; the legato kernel's names, kept on the core and backend kernels):

  FILE.npy                  an array saved by numpy (bf16 as ml_dtypes.bfloat16, or any float
                            array, rounded to the argument's element type)
  zeros | ones | arange     filled to the argument's shape
  rand | rand:SEED          standard normal values (seed 0 by default), rounded to the dtype
  [[1, 2], [3, 4]] | 2.5    an inline literal (Python syntax), converted to the element type
  ...@7x256                 suffix giving the runtime shape (needed for dynamic dims; without
                            it a dynamic dim takes its bound)

A Bertha binary (`FILE.elf`, or any file starting with the ELF magic) runs on the emulator
(`run_binary`), its arguments made from its `.legato.args` the same way. `--key KEYFILE` refuses
a binary that is not signed with that key (for binaries from elsewhere: the checksum is integrity
only); `--sign KEYFILE -o OUT.elf` writes a signed copy instead of running.

After the run every tensor argument is printed (`--print NAME_OR_INDEX` to choose, repeatable),
with its final contents (outputs are written in place). `--save DIR` writes them as .npy (a bf16
array's header says `bfloat16`: `np.load` returns it as `ml_dtypes.bfloat16` once ml_dtypes is
imported),
`--stats` prints the ops each context executed. Errors (parse, verification, argument mismatch,
deadlock, unsupported op) are printed as `legato-run: error: ...` with exit status 1.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from pathlib import Path

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import ArrayAttr

from legato.arrays import save_npy
from legato.errors import LegatoError
from legato.interp import api
from legato.interp.backend import kernel_specs as backend_specs
from legato.interp.core import kernel_specs as core_specs
from legato.interp.legato import kernel_specs as legato_specs
from legato.interp.semantics import cast
from legato.model import bertha
from legato.model.targets import target_model, target_names
from legato.targets.bertha.abi import ARG_NAMES_ATTR
from legato.types import TensorSpec


def _parse_shape(text: str) -> tuple[int, ...]:
    if text in ("", "scalar"):
        return ()
    return tuple(int(x) for x in text.lower().split("x"))


def make_arg(spec_text: str, spec, index: int):
    """Build one argument from its command-line text and the signature entry `spec`; text it
    cannot read is a LegatoError naming the argument, never a Python exception."""
    try:
        return _make_arg(spec_text, spec, index)
    except LegatoError:
        raise
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as e:
        raise LegatoError(
            f"argument {index}: cannot read {spec_text!r} ({type(e).__name__}: {e}); expected "
            "FILE.npy, zeros, ones, arange, rand[:SEED] or a Python literal, optionally "
            "followed by @SHAPE (e.g. @7x256)"
        ) from None


def _make_arg(spec_text: str, spec, index: int):
    text = spec_text.strip()
    shape_override = None
    if "@" in text and not text.startswith("["):
        text, shape_text = text.rsplit("@", 1)
        shape_override = _parse_shape(shape_text)
    if not isinstance(spec, TensorSpec):
        value = ast.literal_eval(text)
        return value
    dtype = spec.dtype.numpy
    shape = shape_override if shape_override is not None else spec.bounds
    if text.endswith(".npy"):
        arr = np.load(text, allow_pickle=False)
        if (
            arr.dtype.kind == "V"
            and arr.dtype.itemsize == 2
            and dtype == np.dtype(ml_dtypes.bfloat16)
        ):
            arr = arr.view(ml_dtypes.bfloat16)
        return np.ascontiguousarray(_convert(arr, dtype))
    if text == "zeros":
        return np.zeros(shape, dtype)
    if text == "ones":
        return np.ones(shape, dtype)
    if text == "arange":
        return _convert(np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape), dtype)
    if text == "rand" or text.startswith("rand:"):
        seed = int(text.split(":", 1)[1]) if ":" in text else 0
        values = np.random.default_rng(seed).standard_normal(shape)
        return _convert(values, dtype)
    try:
        literal = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise LegatoError(
            f"argument {index}: cannot read {spec_text!r}: expected FILE.npy, zeros, ones, "
            "arange, rand[:SEED] or a Python literal, optionally followed by @SHAPE"
        ) from None
    arr = np.array(literal, dtype=np.float64 if spec.dtype.is_float else np.int64)
    if arr.ndim == 0 and shape:
        arr = np.full(shape, arr)
    elif shape_override is not None:
        arr = arr.reshape(shape_override)
    return _convert(arr, dtype)


def _convert(arr: np.ndarray, dtype) -> np.ndarray:
    if arr.dtype == np.float64 and np.dtype(dtype) in (np.dtype(ml_dtypes.bfloat16),):
        arr = arr.astype(np.float32)
    return cast(arr, dtype)


def signature(module, level: str, kernel: str | None):
    """(kernel name, per-argument TensorSpec or scalar type, per-argument names)."""
    k = api.find_kernel(module, level, kernel)
    if level == "legato":
        specs = legato_specs(k)  # type: ignore[arg-type]
        names = [a.name_hint or f"arg{i}" for i, a in enumerate(k.body.block.args)]  # type: ignore[attr-defined]
        return k.sym_name.data, specs, names  # type: ignore[attr-defined]
    if level == "core":
        specs = core_specs(k)
    else:
        specs = backend_specs(k)
    name = getattr(getattr(k, "sym_name", None), "data", "kernel")
    # the legato kernel's argument names, which the lowering keeps on the core and backend
    # kernels (`arg_names`); a hand-written module without them numbers its arguments
    attr = k.attributes.get(ARG_NAMES_ATTR) if hasattr(k, "attributes") else None
    names = [a.data for a in attr.data] if isinstance(attr, ArrayAttr) else []
    if len(names) != len(specs):
        names = [f"arg{i}" for i in range(len(specs))]
    return name, specs, names


def bind_args(texts: list[str], specs, names: list[str], kernel: str) -> list[tuple[int, str]]:
    """(argument index, its `-a` text) for every argument, from `-a` options given in
    signature order (`-a rand`) or by the IR's argument name (`-a x=rand`, `-a %x=rand`), not
    both for one argument; a missing, unknown or repeated one is a LegatoError listing the
    signature."""
    sig = ", ".join(names)
    given: dict[int, str] = {}
    positional = 0
    for text in texts:
        key, eq, value = text.partition("=")
        key = key.strip().lstrip("%")
        if eq and key in names:
            i = names.index(key)
        elif eq and key.isidentifier() and not key.startswith("rand"):
            raise LegatoError(f"-a {text}: kernel '{kernel}' has no argument named {key!r} ({sig})")
        else:
            i, value = positional, text
            positional += 1
            while i in given:
                i, positional = positional, positional + 1
        if i >= len(specs):
            raise LegatoError(
                f"kernel '{kernel}' takes {len(specs)} argument(s) ({sig}), got {len(texts)} "
                "-a option(s)"
            )
        if i in given:
            raise LegatoError(f"-a {text}: argument '{names[i]}' is given twice")
        given[i] = value
    missing = [names[i] for i in range(len(specs)) if i not in given]
    if missing:
        raise LegatoError(
            f"kernel '{kernel}' takes {len(specs)} argument(s) ({sig}), got {len(texts)} -a "
            f"option(s): missing {', '.join(missing)}"
        )
    return sorted(given.items())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="legato-run", description="Run a Legato .mlir file at its IR level."
    )
    p.add_argument("file", help="the .mlir file ('-' for stdin)")
    p.add_argument("-a", "--arg", action="append", default=[], help="one kernel argument")
    p.add_argument("--level", choices=("legato", "core", "backend"), help="default: detected")
    p.add_argument("--kernel", help="the kernel to run when the module holds several")
    p.add_argument(
        "--model",
        default=None,
        help="ComputeModel: bertha (EVT0, default), bertha-evt1, or bertha:NUM_CORES",
    )
    p.add_argument(
        "--print",
        dest="print_",
        action="append",
        default=None,
        help="argument (name or index) to print; default: every tensor argument",
    )
    p.add_argument("--full", action="store_true", help="print whole arrays (no '...')")
    p.add_argument("--save", help="directory to write the arguments to, as NAME.npy")
    p.add_argument("--stats", action="store_true", help="print ops executed per context")
    p.add_argument("--max-steps", type=int, default=None, help="op budget (default 5e7)")
    p.add_argument(
        "--key", help="binaries: refuse one not signed with the key in this file (see --sign)"
    )
    p.add_argument("--sign", metavar="KEYFILE", help="binaries: write a signed copy to -o")
    p.add_argument("-o", "--output", help="where --sign writes the signed binary")
    ns = p.parse_args(argv)

    try:
        return _run(ns)
    except LegatoError as e:
        sys.stdout.flush()
        print(f"legato-run: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        sys.stdout.flush()
        print(f"legato-run: error: {e}", file=sys.stderr)
        return 1


def _model(text: str | None):
    if text is None:
        return None
    name, _, cores = text.partition(":")
    base = target_model(name)
    if base is None:
        raise LegatoError(f"unknown model {name!r}; expected one of {tuple(target_names())}")
    if cores:
        return bertha.Bertha(
            None, base.name, int(cores), False, base.num_memory_channels, base.shared_memory_size
        )
    return base


def _read_key(path: str) -> bytes:
    return Path(path).read_bytes()


def _run_binary(ns, data: bytes) -> int:
    from legato.targets.bertha import elf, runtime

    if ns.sign:
        if not ns.output:
            raise LegatoError("--sign needs -o OUT.elf, the file to write the signed binary to")
        Path(ns.output).write_bytes(elf.sign_binary(data, _read_key(ns.sign)))
        return 0
    if ns.level or ns.kernel or ns.max_steps is not None or ns.stats:
        raise LegatoError("--level, --kernel, --max-steps and --stats apply to .mlir files only")
    key = _read_key(ns.key) if ns.key else None
    binary = elf.verify_signature(data, key) if key is not None else elf.read_elf(data)
    model = _model(ns.model)
    if model is None:
        model = _model(f"{binary.target.get('chip')}:{binary.target.get('num_cores')}")
    layout = binary.layout
    specs = [a.type for a in layout.args]
    names = [a.name for a in layout.args]
    args = [make_arg(t, specs[i], i) for i, t in bind_args(ns.arg, specs, names, binary.kernel)]
    runtime.run_binary(data, model, args, key=key, trace=False)
    _report(ns, names, specs, args)
    return 0


def _run(ns) -> int:
    if ns.file != "-":
        data = Path(ns.file).read_bytes()
        if data[:4] == b"\x7fELF" or ns.file.endswith(".elf"):
            return _run_binary(ns, data)
    if ns.key or ns.sign:
        raise LegatoError("--key and --sign apply to binaries (.elf) only")
    text = sys.stdin.read() if ns.file == "-" else Path(ns.file).read_text()
    module = api.parse_module(text, ns.file)
    api.verify(module)
    found = api.detect_level(module)
    level = ns.level or found
    if level != found:
        raise LegatoError(f"the module is at the {found} level, not the {level} level")
    kname, specs, names = signature(module, level, ns.kernel)
    args = [make_arg(t, specs[i], i) for i, t in bind_args(ns.arg, specs, names, kname)]
    kwargs = {}
    if ns.max_steps is not None:
        kwargs["max_steps"] = ns.max_steps
    result = api.run(module, level, args, _model(ns.model), kernel=ns.kernel, **kwargs)
    _report(ns, names, specs, [result[i] for i in range(len(specs))])
    if ns.stats:
        st = result.stats
        print(
            f"// {st.level} level, kernel {st.kernel}: {st.total_ops} ops, "
            f"{st.transfers} transfers, {st.wall_seconds * 1e3:.1f} ms"
        )
        for task, n in st.ops_per_task.items():
            print(f"//   {task}: {n} ops")
    return 0


def _report(ns, names, specs, values) -> None:
    """Print (`--print`) and save (`--save`) the arguments' final contents."""
    selected = range(len(specs))
    if ns.print_ is not None:
        selected = []
        for key in ns.print_:
            if key.isdigit():
                selected.append(int(key))
            elif key.lstrip("%") in names:
                selected.append(names.index(key.lstrip("%")))
            else:
                raise LegatoError(f"--print {key}: no such argument ({', '.join(names)})")
    opts = {"threshold": sys.maxsize} if ns.full else {}
    with np.printoptions(**opts, linewidth=100):
        for i in selected:
            if not isinstance(specs[i], TensorSpec):
                continue
            arr = np.asarray(values[i])
            print(f"%{names[i]} : {specs[i]} = {_format(arr)}")
    if ns.save:
        out = Path(ns.save)
        out.mkdir(parents=True, exist_ok=True)
        for i, n in enumerate(names):
            if isinstance(specs[i], TensorSpec):
                save_npy(out / f"{n}.npy", np.asarray(values[i]))


def _format(arr: np.ndarray) -> str:
    if arr.dtype == np.dtype(ml_dtypes.bfloat16):
        body = np.array2string(arr.astype(np.float32), separator=", ")
        return body
    return np.array2string(arr, separator=", ")


def entry() -> None:  # console script
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
