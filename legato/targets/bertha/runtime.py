"""The Bertha runtime: validate a binary against the chip and the arguments, then run it.

`run_binary(binary_bytes, model, args)` refuses, before anything runs and with a message saying
what differs: a malformed or tampered binary (`BinaryError` / `ChecksumError`), a binary for
another target (`TargetMismatchError`), and arguments whose count, dtype, rank, static size or
dynamic bound do not match the binary's `.legato.args` (`ABIError`).  It then allocates every
argument and the Instruction Table in emulated shared DRAM, runs the emulator and copies every
argument whose access is `write`/`readwrite` back into the caller's arrays, in place. On a
`device.Device` (`device=`, or `with dev.active():`), whose shared DRAM outlives the run, an
argument that is the device's memory is bound at its address instead, and nothing is copied.

Trust: the checksum is integrity only (anyone can recompute it). `key=` requires the binary to
carry a `.legato.signature` made with that key (`elf.sign_binary`), for binaries that cross a
trust boundary. `expected_access=` is the kernel's own signature (the JIT passes what its
compiler recorded): a binary whose metadata marks an argument otherwise (an input flipped to
`write`, so that the runtime would write into the caller's input) is refused.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

import numpy as np

from legato.binding import check_writes
from legato.errors import LegatoRuntimeError
from legato.targets.bertha import deadlock
from legato.targets.bertha.abi import ABIError, ArgLayout, ScalarSpec, TupleSpec, scalar_bits
from legato.targets.bertha.arch import pim
from legato.targets.bertha.arch.address_map import CORE_SPACE_OFFSET
from legato.targets.bertha.arch.bounds import resolve as resolve_bounds
from legato.targets.bertha.arch.hazards import HazardError
from legato.targets.bertha.device import Device, active_device
from legato.targets.bertha.elf import BinaryError, check_target, read_elf, verify_signature
from legato.targets.bertha.emulator import SHARED_BINARY, DeadlockError, Emulator, EmulatorFault
from legato.targets.bertha.timing import RunResult
from legato.types import TensorSpec, dtype_of

__all__ = [
    "ABIError",
    "BinaryError",
    "Limits",
    "load_binary",
    "resolve_hazards",
    "resolve_limits",
    "run_binary",
]

HAZARD_ENV = "LEGATO_HAZARDS"


@dataclass(frozen=True)
class Limits:
    """The bounds of one run: wall-clock seconds, simulated cycles, host bytes backing the
    simulated memory (None: unbounded)."""

    time: float | None
    cycles: int | None
    memory: int | None


# Far above anything the tests and benchmarks do (the largest bench kernel, the 7B decoder
# layer, runs 0.84 M cycles in about a minute), low enough that a runaway run stops.
DEFAULT_LIMITS = Limits(time=1800.0, cycles=10_000_000_000, memory=8 << 30)
LIMIT_ENV = {
    "time": "LEGATO_TIME_LIMIT",
    "cycles": "LEGATO_CYCLE_LIMIT",
    "memory": "LEGATO_MEMORY_LIMIT",
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def _parse_limit(field: str, text: str):
    """The value of `$LEGATO_*_LIMIT` text: seconds, cycles, or bytes (`8G`, `512M`, `4096`);
    `0`, `none` or `off` for unbounded."""
    env = LIMIT_ENV[field]
    if text.strip().lower() in ("0", "none", "off"):
        return None
    try:
        if field == "time":
            value = float(text)
            if not value > 0:
                raise ValueError
            return value
        if field == "cycles":
            return int(text.replace("_", ""))
        m = _SIZE.match(text)
        if not m:
            raise ValueError
        return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))
    except ValueError:
        raise LegatoRuntimeError(
            f"${env}={text!r} is not a valid limit: expected "
            + {
                "time": "seconds (e.g. 600)",
                "cycles": "a cycle count",
                "memory": "bytes (e.g. 8G)",
            }[field]
            + ", or 0/none/off for no limit"
        ) from None


def resolve_limits(time=None, cycles=None, memory=None) -> Limits:
    """Each bound: the value given (a session option), else its environment variable
    (`LEGATO_TIME_LIMIT` seconds, `LEGATO_CYCLE_LIMIT`, `LEGATO_MEMORY_LIMIT` bytes), else
    `DEFAULT_LIMITS`. A given 0 or an environment `0`/`none`/`off` means unbounded."""
    out = {}
    for field, given in (("time", time), ("cycles", cycles), ("memory", memory)):
        if given is not None:
            if isinstance(given, bool) or not isinstance(given, (int, float)) or given < 0:
                raise LegatoRuntimeError(
                    f"{field} limit must be a non-negative number, got {given!r}"
                )
            out[field] = given or None
        elif LIMIT_ENV[field] in os.environ:
            out[field] = _parse_limit(field, os.environ[LIMIT_ENV[field]])
        else:
            out[field] = getattr(DEFAULT_LIMITS, field)
    return Limits(**out)


def resolve_hazards(given: bool | None = None) -> bool:
    """Whether a run checks hazards (`arch.hazards`): `given` (a session option), else
    `$LEGATO_HAZARDS` (`1`/`on`/`true` or `0`/`off`/`false`), else off (the checker costs host
    time, docs/isa.md; the tests turn it on)."""
    if given is not None:
        return bool(given)
    text = os.environ.get(HAZARD_ENV)
    if text is None:
        return False
    v = text.strip().lower()
    if v in ("1", "on", "true", "yes"):
        return True
    if v in ("0", "off", "false", "no", ""):
        return False
    raise LegatoRuntimeError(f"${HAZARD_ENV}={text!r} is not valid: expected 1/on or 0/off")


def _read(binary_bytes: bytes, key: bytes | None):
    return read_elf(binary_bytes) if key is None else verify_signature(binary_bytes, key)


# The parsed binaries of the last runs, by (bytes, key): the JIT's cached call runs the same
# bytes again, and parsing and validating them cost more than a small kernel's run (10 ms of
# 40 for RMSNorm [32,4096]). Read-only users only (`run_binary`); a binary that fails to parse
# raises every time (exceptions are not cached). 256: the lpu device's tiny Llama forward
# cycles through 36 kernels, which thrashed a cache of 32 (every call parsed its binary again).
_read_cached = functools.lru_cache(maxsize=256)(_read)


def load_binary(binary_bytes: bytes, model, key: bytes | None = None, *, cached: bool = False):
    """Read, validate and target-check a binary; returns the `Binary`. With `key`, the binary
    must be signed with it (`elf.verify_signature`, else `SignatureError`). `cached`: the
    `Binary` may be one returned before for the same bytes and key (its caller must not modify
    it); the target checks run every time."""
    if cached and type(binary_bytes) is bytes and (key is None or type(key) is bytes):
        binary = _read_cached(binary_bytes, key)
        vars(binary).setdefault(SHARED_BINARY, {})  # (never modified: the emulator's caches)
    else:
        binary = _read(binary_bytes, key)
    check_target(binary, model)
    # The checks below depend on the binary and the chip (its name, cores and core-memory
    # sizes) only: once per binary and chip (a cached `Binary` is shared, never modified).
    chip = (model.name, model.num_cores, *(model.memory_size(s) for s in CORE_SPACE_OFFSET))
    checked = vars(binary).setdefault(_CHECKED_ATTR, set()) if PER_BINARY_CACHES else set()
    if chip not in checked:
        _check_programs(binary, model)
        checked.add(chip)
    return binary


_CHECKED_ATTR = "_legato_checked_chips"


def _check_programs(binary, model) -> None:
    """BinaryError unless every program of `binary` fits `model`: one program per core, its
    declared memory within the core's, its core on the chip."""
    owner: dict = {}
    for p in binary.programs:
        cores = (
            [None]
            if p.kind == "top"
            else [p.core]
            if p.kind == "core"
            else list(range(model.num_cores))
        )
        for c in cores:
            if c in owner:
                what = "top" if c is None else f"core {c}"
                raise BinaryError(f"{what} would run two programs: {owner[c]!r} and {p.name!r}")
            owner[c] = p.name
        for space, n in (p.memory or {}).items():
            cap = model.memory_size(space)
            if n > cap:
                raise BinaryError(
                    f"program {p.name!r} needs {n} bytes of {space} but a core of "
                    f"{model.name} has {cap}"
                )
        kind, core = p.kind, p.core
        if kind == "core" and core >= model.num_cores:
            raise BinaryError(
                f"program {p.name!r} runs on core {core} but {model.name} has "
                f"{model.num_cores} cores"
            )


def _source_text(loc) -> str:
    import linecache

    file, line, col = loc
    text = linecache.getline(file, line).strip()
    return f"{file}:{line}:{col}" + (f": {text}" if text else "")


def source_near(binary, program: str, pc: int) -> tuple[tuple[str, int, int] | None, bool]:
    """(the kernel source line of `pc` of `program`, whether it is `pc`'s own). An instruction
    the lowering adds around an op (the `li`/`lsa` setting up its operands, the argument-table
    `ld`s, a trailing `dmawait` or `halt`) has no line of its own: it gets the nearest line
    after it in its program (the op it sets up), else the nearest before it, so that every
    fault, limit, deadlock and hazard names a line of the kernel when the binary has a table."""
    loc = binary.source_of(program, pc)
    if loc is not None:
        return loc, True
    table = binary.lines.get(program) or []
    after = (t for t in table[pc + 1 :] if t is not None)
    before = (t for t in reversed(table[: max(pc, 0)]) if t is not None)
    return next(after, None) or next(before, None), False


def _located(binary, program: str, pc: int) -> tuple[tuple | None, str]:
    """`source_near`, and its text for a report ('' when the binary has no line for it)."""
    loc, own = source_near(binary, program, pc)
    if loc is None:
        return None, ""
    return loc, _source_text(loc) + ("" if own else f" (the nearest line: pc {pc} has none)")


def with_source_lines(e, binary, num_cores: int | None = None):
    """`e` (an EmulatorFault, DeadlockError or HazardError) naming the kernel's source line of
    each PC it names, from the binary's line table (`source_near`): `source` (file, line, col)
    on a fault, on each of a hazard's two accesses, `sources` (one per blocked module) on a
    deadlock, and the lines in the message. A deadlock also gets the
    cycle of waits (`deadlock.explain`; `num_cores` for `all_cores` programs): `cycle`, the
    steps of one cycle of blocked modules each waiting on the next, and `unreleasable`, the
    waits no running module can release."""
    if isinstance(e, HazardError):
        extra = []
        for a in (e.first, e.second):
            a.source, text = _located(binary, a.program, a.pc)
            if text:
                extra.append(f"  {a.module} pc {a.pc} ({a.access}) is at {text}")
    elif isinstance(e, DeadlockError):
        found = [_located(binary, prog, pc) for _m, prog, pc, _i, _w in e.waits]
        e.sources = [loc for loc, _text in found]
        extra = [
            f"  {mod} pc {pc} is at {text}"
            for (mod, _p, pc, _i, _w), (_loc, text) in zip(e.waits, found)
            if text
        ]

        def at(program, pc):
            loc = source_near(binary, program, pc)[0]
            return f" ({loc[0]}:{loc[1]}:{loc[2]})" if loc is not None else ""

        cores = num_cores if num_cores is not None else binary.target.get("num_cores", 1)
        e.cycle, e.unreleasable = deadlock.explain(binary, cores, e.waits)
        extra += deadlock.describe(e.cycle, e.unreleasable, at)
    else:
        e.source, text = _located(binary, e.program, e.pc)
        extra = [f"  at {text}"] if text else []
    if extra:
        e.args = ("\n".join([str(e), *extra]),)
    return e


def _arg_what(name: str, spec: TensorSpec, shape) -> str:
    dims = ", ".join(str(d) for d in shape)
    return f"argument {name!r} ([{dims}] {spec.dtype.name})"


def check_access(binary, expected: list[str]) -> None:
    """Refuse (BinaryError) a binary whose `.legato.args` marks an argument's access otherwise
    than `expected` (the kernel's own signature): the runtime writes back only what the kernel
    writes, whatever the metadata says."""
    layout = binary.layout
    if len(expected) != len(layout.args):
        raise BinaryError(
            f"binary of kernel {binary.kernel!r} has {len(layout.args)} arguments, its "
            f"signature {len(expected)}"
        )
    for a, want in zip(layout.args, expected):
        if a.access != want:
            raise BinaryError(
                f"argument {a.name!r}: the binary's metadata marks it {a.access!r} but the "
                f"kernel's signature says {want!r}; refusing the binary (its metadata was "
                "modified)"
            )


def _as_array(value, name: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    raise ABIError(f"argument {name!r} must be a numpy array, got {type(value).__name__}")


def _check_argument(layout: ArgLayout, i: int, path: tuple, t, value) -> None:
    """Argument `i` (at `path` inside its tuples) is a value of type `t` (ABIError if not)."""
    name = layout._name(i, path)
    if isinstance(t, TensorSpec):
        arr = _as_array(value, name)
        try:
            dt = dtype_of(arr)
        except TypeError as e:
            raise ABIError(f"argument {name!r}: {e}") from None
        layout.check_tensor(i, dt, arr.shape, path)
    elif isinstance(t, TupleSpec):
        if not isinstance(value, (tuple, list)) or len(value) != len(t.elements):
            raise ABIError(f"argument {name!r} must be a tuple of {len(t.elements)} elements")
        for j, e in enumerate(t.elements):
            _check_argument(layout, i, path + (j,), e, value[j])
    else:
        assert isinstance(t, ScalarSpec)
        scalar_bits(t.dtype, value, name)  # raises ABIError unless it is one


def _place(layout: ArgLayout, extents: dict, bind, i: int, path: tuple, t, value) -> tuple:
    """(table value, shape) of argument `i` at `path` (recursively for tuples), its tensors
    bound by `bind(i, path, t, array)` -> (address, bytes), a whole argument's extent into
    `extents`. (A module function: a nested one calling itself is a reference cycle, which
    the garbage collector would free with every run's objects it reaches.)"""
    if isinstance(t, TensorSpec):
        addr, nbytes = bind(i, path, t, value)
        if not path:
            extents[i] = (addr, nbytes, _arg_what(layout._name(i, path), t, value.shape))
        return addr, tuple(value.shape)
    if isinstance(t, TupleSpec):
        pairs = [
            _place(layout, extents, bind, i, path + (j,), e, value[j])
            for j, e in enumerate(t.elements)
        ]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return value, None


def _leaves(layout: ArgLayout, args, views) -> list[tuple[str, str, np.ndarray]]:
    """(name, access, array) of every tensor argument, tuples flattened; `views` (same nesting
    as `args`, arrays sharing the caller's memory) replace `args` for the aliasing checks."""
    out: list = []
    for i, a in enumerate(layout.args):
        _leaf(layout, out, i, (), a.type, (views if views is not None else args)[i])
    return out


def _leaf(layout: ArgLayout, out: list, i: int, path: tuple, t, value) -> None:
    """`_leaves`' entries of argument `i` at `path` into `out`."""
    if isinstance(t, TensorSpec):
        out.append((layout._name(i, path), layout.args[i].access, value))
    elif isinstance(t, TupleSpec):
        for j, e in enumerate(t.elements):
            _leaf(layout, out, i, path + (j,), e, value[j])


def check_aliasing(layout: ArgLayout, args, views=None) -> None:
    """Refuse (ABIError) a written argument that is read-only, and two written arguments that
    share memory (`legato.binding.check_writes`)."""
    leaves = _leaves(layout, args, views)
    check_writes([(n, arr) for n, acc, arr in leaves if acc != "read"], ABIError)


class ResolvedBounds(dict):
    """One program's resolved extents (`arch.bounds.resolve`: pc -> its bounded operands),
    with `token`, an object made with it: the emulator keys what it derives from them (the
    compiled loop's rows, `Emulator._loop_bounds`) on the token instead of hashing every row.
    Never modified after it is made."""

    __slots__ = ("token",)

    def __init__(self, rows):
        super().__init__(rows)
        self.token = object()


PER_BINARY_CACHES = True
"""Keep, on a `Binary`, its program checks per chip (`load_binary`) and its resolved bounds per
argument layout (`resolved_bounds`); False: both made again on every run (a benchmark's
before, bench/emu_ab.py --flag runtime.PER_BINARY_CACHES)."""

# A binary's resolutions kept per argument layout (`resolved_bounds`): a JIT call or a device
# run with new allocations each time makes a new one; the oldest goes past this many.
RESOLVED_PER_BINARY = 8
_RESOLVED_ATTR = "_legato_resolved_bounds"


def resolved_bounds(binary, extents: dict[int, tuple[int, int, str]]) -> dict:
    """{program: `ResolvedBounds`} of `binary`'s `.legato.bounds` on the arguments' allocations
    `extents` (index -> (address, bytes, name)), resolved once per binary and layout: the
    resolution is a function of the binary's rows and `extents` alone, so the cache (on the
    `Binary`, which `load_binary(cached=True)` shares between runs of the same bytes and
    must not be modified) is keyed on every address, size and name in `extents`. A program
    without bounded pcs is absent."""
    key = tuple(sorted(extents.items()))
    cache = vars(binary).setdefault(_RESOLVED_ATTR, {}) if PER_BINARY_CACHES else {}
    got = cache.get(key)
    if got is None:
        got = {}
        for name, rows in binary.bounds.items():
            if rows:
                r = resolve_bounds(rows, extents)
                if r:
                    got[name] = ResolvedBounds(r)
        if len(cache) >= RESOLVED_PER_BINARY:
            del cache[next(iter(cache))]
        cache[key] = got
    return got


class _Launch:
    """The shared-DRAM allocations of one run. Without a device, the emulator's own memory's
    (a fresh address space per run). With one, the device's: its allocations the run binds are
    mapped at their addresses, and the run's own (the Instruction Table, staged host arrays)
    are temporary allocations of the device, freed after the run; an allocation bound only
    as `read` arguments is read-only while the kernel runs."""

    def __init__(self, mem, device: Device | None):
        self.mem, self.device = mem, device
        self.temps: list = []  # the device's temporary buffers of this run
        self.mapped: dict[int, object] = {}  # base -> a device region mapped for this run
        self.read_bases: set[int] = set()
        self.written_bases: set[int] = set()

    def _map(self, region) -> None:
        if region.base not in self.mapped:
            self.mem.add(region)
            self.mapped[region.base] = region

    def allocate(self, nbytes: int, name: str) -> int:
        if self.device is None:
            return self.mem.allocate(nbytes, name)
        buf = self.device.allocate(nbytes, name)
        self.temps.append(buf)
        self._map(self.device.region(buf))
        return buf.addr

    def copy_in(self, data: np.ndarray, name: str) -> int:
        addr = self.allocate(data.nbytes, name)
        if data.nbytes:
            self.mem.write(addr, data)
        if self.device is not None:
            self.device.transfers.count("staged", data.nbytes, "host argument")
        return addr

    def map_read_only(self, data: np.ndarray, name: str) -> int:
        """A `read` host array: mapped uncopied on the emulator's memory, staged on a device."""
        if self.device is None:
            return self.mem.map_read_only(data, name)
        addr = self.copy_in(data, name)
        self.read_bases.add(addr)
        return addr

    def resident(self, region, addr: int, access: str) -> int:
        self._map(region)
        (self.read_bases if access == "read" else self.written_bases).add(region.base)
        return addr

    def protect(self, on: bool) -> None:
        """Make the device regions only read by the run read-only (`on`), or writable again."""
        for base in self.read_bases - self.written_bases:
            region = self.mapped.get(base)
            if region is not None:
                region.read_only = on


def run_binary(
    binary_bytes: bytes,
    model,
    args: list,
    *,
    instruction_limit: int | None = None,
    trace: bool = True,
    views: list | None = None,
    key: bytes | None = None,
    expected_access: list[str] | None = None,
    limits: Limits | None = None,
    map_written: bool = False,
    hazards: bool | None = None,
    device: Device | None = None,
) -> RunResult:
    """Validate and run. `views`: optional arrays sharing the caller's memory, one per argument
    (same nesting), when `args` are copies (the JIT copies non-contiguous tensors): the
    aliasing and writeability checks look at them instead of `args`. `key`: refuse a binary
    not signed with it. `expected_access`: the access (`read`/`write`/`readwrite`) of each
    argument in the kernel's own signature; a binary whose metadata says otherwise is refused
    (BinaryError) before anything runs. `limits`: the run's bounds (default
    `resolve_limits()`: the environment, else `DEFAULT_LIMITS`); past one, the run ends in a
    `LimitError` (a LegatoRuntimeError) naming the bound, its value, the module and the PC.
    `map_written`: an argument the kernel writes that is a C-contiguous, writeable array is
    mapped (the kernel writes the caller's memory in place; a run that fails may leave it
    partly written) instead of copied in and back: for a large tensor a kernel updates in a few
    places, such as a paged KV cache. `hazards`: check for unsynchronised accesses (default
    `resolve_hazards()`); one ends the run with a `HazardError` naming both accesses' lines.
    `device` (default: the one of `with device.active():`, `device.active_device()`): launch
    on that device's persistent shared DRAM (`targets.bertha.device`): an argument that is its
    memory is bound at its device address and not copied; any other array is staged in a
    temporary allocation (copied in, and back when written; counted in its `transfers`)."""
    if device is None:
        device = active_device()
    binary = load_binary(binary_bytes, model, key, cached=True)
    shared = vars(binary).get(SHARED_BINARY)
    layout: ArgLayout | None = None if shared is None else shared.get("layout")
    if layout is None:  # (parsed from the binary's metadata: once per shared binary)
        layout = binary.layout
        if shared is not None:
            shared["layout"] = layout
    if expected_access is not None:
        check_access(binary, expected_access)
    if len(args) != len(layout.args):
        names = ", ".join(a.name for a in layout.args)
        raise ABIError(
            f"kernel {binary.kernel!r} takes {len(layout.args)} arguments ({names}), "
            f"got {len(args)}"
        )
    recorded = binary.args_meta.get("max_table_size")
    if recorded is not None and layout.size_bytes > recorded:
        raise BinaryError(
            f"Instruction Table needs {layout.size_bytes} bytes but the binary's "
            f"maximum is {recorded}"
        )

    # validate everything before allocating anything
    for i, a in enumerate(layout.args):
        _check_argument(layout, i, (), a.type, args[i])
    check_aliasing(layout, args, views)

    if limits is None:
        limits = resolve_limits()
    emu = Emulator(
        binary,
        model,
        instruction_limit=instruction_limit,
        trace=trace,
        time_limit=limits.time,
        cycle_limit=limits.cycles,
        memory_limit=limits.memory,
        hazards=resolve_hazards(hazards),
    )
    mem = emu.memory
    launch = _Launch(mem, device)
    copies: list[tuple[np.ndarray, int]] = []
    extents: dict[int, tuple[int, int, str]] = {}  # argument -> (address, bytes, name)

    def bind_tensor(i, path, t, arr) -> tuple[int, int]:
        """(address, bytes) where tensor argument `arr` is bound for the run."""
        name = layout._name(i, path)
        access = layout.args[i].access
        if t.memory == "pim_dram":  # a weight for the PIM units, laid out (docs/pim.md)
            data = pim.pack_argument(model, np.ascontiguousarray(arr), name)
            return launch.map_read_only(data, name), data.nbytes
        if device is not None:
            found = device.resident(arr)
            if found is not None:  # device memory: bound where it lies, nothing copied
                device.bound_bytes += arr.nbytes
                return launch.resident(*found, access), arr.nbytes
        data = np.ascontiguousarray(arr)
        if access == "read" and data.nbytes:
            # Mapped, not copied (the decoder's weights are 400 MiB): the kernel cannot
            # write it, and nothing writes the caller's array while the kernel runs.
            return launch.map_read_only(data, name), data.nbytes
        if (
            map_written
            and device is None
            and data is arr
            and data.nbytes
            and data.flags.writeable
            and access in ("write", "readwrite")
        ):
            return mem.map_writable(data, name), data.nbytes
        addr = launch.copy_in(data, name)
        if access in ("write", "readwrite"):
            copies.append((arr, addr))
        return addr, data.nbytes

    values, shapes = [], []
    for i, a in enumerate(layout.args):
        v, s = _place(layout, extents, bind_tensor, i, (), a.type, args[i])
        values.append(v)
        shapes.append(s)
    table = layout.pack(values, shapes)
    # The table the code was compiled to read: its size is fixed by the signature and must not
    # exceed the maximum the compiler recorded (word 0 holds it).
    if len(table) != layout.size_bytes or (recorded is not None and len(table) > recorded):
        raise BinaryError(
            f"Instruction Table is {len(table)} bytes but the binary's maximum is {recorded}"
        )
    table_addr = launch.allocate(len(table), "instruction_table")
    mem.write(table_addr, table)
    if device is not None:
        device.launches += 1
        device.transfers.count("launch", len(table), "instruction table")
    if binary.bounds:  # the extents the compiler recorded, on this run's allocations
        emu.set_bounds(resolved_bounds(binary, extents))

    launch.protect(True)
    try:
        try:
            result = emu.run(table_addr)
        except (EmulatorFault, DeadlockError, HazardError) as e:
            raise with_source_lines(e, binary, model.num_cores) from None

        for arr, addr in copies:
            out = mem.read_array(addr, arr.size, arr.dtype).reshape(arr.shape)
            arr[...] = out
            if device is not None:
                device.transfers.count("staged", out.nbytes, "written host argument")
    finally:
        launch.protect(False)
        mem.release()  # the core memories' arrays serve the next run (nothing here keeps a view)
        launch.temps.clear()  # the device's temporary allocations are freed
    return result
