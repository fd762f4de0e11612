"""Bertha timing model (DESIGN section 5, docs/binary.md "Timing").

Every number comes from the `ComputeModel`; the only emulator constant is the interleave
granularity of shared DRAM over its channels (`DRAM_INTERLEAVE_BYTES`).

- instruction issue: `issue_per_cycle` per module per cycle, in order (1 in both generations);
  an `ld` from DRAM does not block issue: its register is ready after `dram_latency_cycles`
  and the first instruction naming it waits (register scoreboard).
- DMA (`dma`, and `dma2d`: one transfer of rows * row bytes, the rows' channels counted row by
  row): `dram_latency_cycles` (when either end is DRAM, shared or private) plus the data phase:
  the transfer's port (the core whose memory it touches; the issuer's own engine otherwise) moves
  `dma_port_bytes_per_cycle`, each shared-DRAM channel it touches moves its share of the bytes at
  `dram_bytes_per_cycle_per_channel`; ports and channels are timelines shared by every module,
  so concurrent DMAs contend.  At most `dma_max_in_flight` DMAs per port.
- MPU: weight load `ceil(K*N*2 / mpu_weight_load_bytes_per_cycle)`; matmul
  `ceil(M*K*N / mpu_macs_per_cycle)`.
- VPU: `ceil(elements / vpu_lanes)`, transcendental ops `ceil(elements / vpu_transcendental_per_cycle)`.

Roofline (DESIGN section 5), from the same ComputeModel so that efficiency never exceeds 1:
`max(DRAM bytes / (channels * bytes per cycle per channel), MACs / (cores * MPU MACs per cycle),
VPU time)` where VPU time = plain element-ops / (cores * lanes) + transcendental element-ops /
(cores * transcendental rate).  Each term is rounded up to a whole cycle; the emulator books at
least that much on the busiest channel, MPU or VPU, so `roofline_cycles <= cycles`.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field

from legato.targets.bertha import native

DRAM_INTERLEAVE_BYTES = 256
_I64 = 1 << 62  # times and addresses below this fit native/dram.c's int64 with room to add
PIM_BYTES_PER_CYCLE = 256
"""A PIM unit's internal read rate (DESIGN section 5, fixed; `arch.pim` re-exports it)."""


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def channel_bytes(
    addr: int, n: int, channels: int, granule: int = DRAM_INTERLEAVE_BYTES
) -> list[int]:
    """Bytes of [addr, addr+n) that fall on each channel (shared DRAM interleaved by `granule`)."""
    out = [0] * channels
    if n <= 0:
        return out
    end = addr + n
    first, last = addr // granule, (end - 1) // granule
    if first == last:
        out[first % channels] += n
        return out
    out[first % channels] += (first + 1) * granule - addr
    out[last % channels] += end - last * granule
    full = last - first - 1
    if full > 0:
        q, r = divmod(full, channels)
        if q:
            for c in range(channels):
                out[c] += q * granule
        for j in range(r):
            out[(first + 1 + j) % channels] += granule
    return out


def channel_bytes_2d(
    addr: int,
    rows: int,
    row_bytes: int,
    stride: int,
    channels: int,
    granule: int = DRAM_INTERLEAVE_BYTES,
) -> list[int]:
    """Bytes per channel of `rows` rows of `row_bytes` bytes, row r at `addr + r * stride` (a
    dma2d end in shared DRAM).  Rows whose start has the same offset modulo one interleave period
    (`granule * channels`) touch the same channels, so each distinct offset is counted once."""
    if rows <= 0 or row_bytes <= 0:
        return [0] * channels
    period = granule * channels
    counts: dict[int, int] = {}
    first = {}
    for r in range(min(rows, period)):
        a = addr + r * stride
        key = a % period
        if key in counts:
            break  # the offsets repeat from here with period r
        counts[key] = 0
        first[key] = a
    cycle = len(counts)
    keys = list(counts)
    full, rest = divmod(rows, cycle)
    out = [0] * channels
    for i, key in enumerate(keys):
        times = full + (1 if i < rest else 0)
        if times:
            for c, b in enumerate(channel_bytes(first[key], row_bytes, channels, granule)):
                out[c] += b * times
    return out


class Port:
    """One DMA engine/port: a bandwidth timeline plus its in-flight transfers."""

    def __init__(self, name: str):
        self.name = name
        self.free = 0  # the data phase timeline
        self.in_flight: list[int] = []  # end times
        self.busy = 0

    def slot_time(self, t: int, max_in_flight: int) -> int:
        """Earliest time >= t at which fewer than `max_in_flight` transfers are in flight."""
        live = sorted(e for e in self.in_flight if e > t)
        if len(live) < max_in_flight:
            return t
        return live[len(live) - max_in_flight]

    def admit(self, t: int, end: int) -> None:
        """A transfer issued at `t` is in flight until `end` (those that ended by `t` are
        dropped)."""
        self.in_flight = [e for e in self.in_flight if e > t]
        self.in_flight.append(end)


class DramTiming:
    """Ports and shared-DRAM channel timelines of the whole chip."""

    def __init__(self, model):
        self.model = model
        self.channels = model.num_memory_channels
        # int64 arrays (Python ints when read, as lists would be) that native/dram.c books in
        self.channel_free = array("q", [0] * self.channels)
        self.channel_bytes = array("q", [0] * self.channels)
        self.ports: dict[str, Port] = {}
        self._book = None  # native/dram.c's booking of a contiguous range, bound to them
        rate = model.dram_bytes_per_cycle_per_channel
        if self.native and native.lib is not None and type(rate) is int and rate > 0:
            ffi, lib = native.ffi, native.lib
            free = ffi.from_buffer("int64_t[]", self.channel_free)
            booked = ffi.from_buffer("int64_t[]", self.channel_bytes)
            channels, book = self.channels, lib.dram_book

            def _book(t, addr, n, data_end):
                return book(
                    free, booked, channels, DRAM_INTERLEAVE_BYTES, rate, t, addr, n, data_end
                )

            self._book = _book

    def ports_from(self, names: tuple, got: list, k: int) -> None:
        """`ports` as native/loop.c left them (`loop_final_shared`): from `got[k]` on, per
        port in the order of first use, its index in `names`, free, busy, n and its n
        in-flight ends. The `Port`s are made on the first use of `ports` (a run that ends
        reads only their busy cycles, `port_busy`)."""
        self.__dict__.pop("ports", None)
        self._ports_raw = (names, got, k)

    def __getattr__(self, name: str):
        """`ports` (`ports_from`'s), made on first use; no other attribute is made."""
        raw = self.__dict__.pop("_ports_raw", None) if name == "ports" else None
        if raw is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        names, got, k = raw
        ports = self.ports = {}  # (in the order of first use, `port_busy`'s)
        port_new = Port.__new__
        while k < len(got):
            i, free, busy, count = got[k : k + 4]
            p = ports[names[i]] = port_new(Port)  # (`Port(name)`'s fields, set at once)
            p.name, p.free, p.busy, p.in_flight = names[i], free, busy, got[k + 4 : k + 4 + count]
            k += 4 + count
        return ports

    def port_busy(self) -> dict[str, int]:
        """Each port's busy cycles, by name, in the order of first use."""
        raw = self.__dict__.get("_ports_raw")
        if raw is None:
            return {p.name: p.busy for p in self.ports.values()}
        names, got, k = raw
        out = {}
        while k < len(got):
            out[names[got[k]]] = got[k + 2]
            k += 4 + got[k + 3]
        return out

    native = native.ENABLED
    """Book contiguous shared-DRAM ranges through native/dram.c when it is built (False: the
    Python loop of `dma` only, the reference a differential test compares it with)."""

    def port(self, name: str) -> Port:
        p = self.ports.get(name)
        if p is None:
            p = self.ports[name] = Port(name)
        return p

    def dma(
        self,
        t: int,
        port_name: str,
        n: int,
        shared_ranges: list[tuple[int, int]],
        touches_dram: bool,
    ) -> tuple[int, int]:
        """Book a transfer of `n` bytes issued at `t`; returns (end time, data-phase cycles).

        `shared_ranges`: (address, bytes) of each end that lies in shared DRAM, or
        (address, rows, row bytes, stride) for a strided (dma2d) end."""
        m = self.model
        port = self.port(port_name)
        pstart = max(t, port.free)
        pdur = max(1, ceil_div(n, m.dma_port_bytes_per_cycle))
        port.free = pstart + pdur
        port.busy += pdur
        data_end = pstart + pdur
        free, booked = self.channel_free, self.channel_bytes
        rate = m.dram_bytes_per_cycle_per_channel
        book = self._book
        for rng in shared_ranges:
            if len(rng) == 2:
                if book is not None and 0 <= t < _I64 and 0 <= rng[0] and rng[0] + rng[1] < _I64:
                    end = book(t, rng[0], rng[1], data_end)
                    if end >= 0:
                        data_end = end
                        continue
                per_channel = channel_bytes(rng[0], rng[1], self.channels)
            else:
                per_channel = channel_bytes_2d(*rng, self.channels)
            # (inlined max and ceil_div: this loop runs per channel of every DRAM transfer)
            for c, b in enumerate(per_channel):
                if b:
                    cstart = free[c]
                    if cstart < t:
                        cstart = t
                    cend = cstart - (-b // rate)
                    free[c] = cend
                    booked[c] += b
                    if cend > data_end:
                        data_end = cend
        end = data_end + (m.dram_latency_cycles if touches_dram else 0)
        port.admit(t, end)
        return end, pdur

    def _port_book(self, t: int, port: Port, n: int) -> int:
        """Book `n` bytes on `port`'s data timeline from `t`; returns the end of its phase."""
        pstart = max(t, port.free)
        pdur = max(1, ceil_div(n, self.model.dma_port_bytes_per_cycle))
        port.free = pstart + pdur
        port.busy += pdur
        return pstart + pdur

    def _channel_book(self, t: int, channel: int, n: int) -> int:
        """Book `n` bytes on shared-DRAM channel `channel` from `t`; returns their end."""
        cstart = max(t, self.channel_free[channel])
        cend = cstart + ceil_div(n, self.model.dram_bytes_per_cycle_per_channel)
        self.channel_free[channel] = cend
        self.channel_bytes[channel] += n
        return cend

    def pim_gemv(
        self, t: int, port_name: str, channel: int, k: int, n: int, unit_free: int, compute: int
    ) -> tuple[int, int, int]:
        """Book a `pim.gemv` of `[k] @ [k, n]` issued at `t` on the unit of `channel` (free
        from `unit_free`; its operation takes `compute` cycles, `arch.pim.op_cycles`); returns
        (operation start, operation end, end). x moves in by a transfer over the issuing core's
        port and the channel (the DRAM latency after its data phase); the operation starts when
        x is in and the unit and the channel are free, the channel busy for all of it (ordinary
        accesses wait); the fp32 result moves out over the channel after it, then the latency.
        The port's timeline is booked in issue order, so the result's port cycles are booked
        at issue (right after x's): booking them after the operation would hold every later
        transfer of the port behind it. The port counts x's transfer in flight
        (`dma_max_in_flight`), not the result's: it starts only when the operation ends, and
        an in-flight slot is an end time (`Port.slot_time`), so counting it would hold a slot
        for the whole operation, while no byte of it moves."""
        m = self.model
        port = self.port(port_name)
        lat = m.dram_latency_cycles
        x_end = max(self._port_book(t, port, k * 2), self._channel_book(t, channel, k * 2)) + lat
        y_port = self._port_book(t, port, n * 4)
        start = max(x_end, unit_free, self.channel_free[channel])
        op_end = start + compute
        self.channel_free[channel] = op_end
        end = max(y_port, self._channel_book(op_end, channel, n * 4)) + lat
        port.admit(t, x_end)
        return start, op_end, end


def mpu_load_cycles(model, k: int, n: int) -> int:
    return max(1, ceil_div(k * n * 2, model.mpu_weight_load_bytes_per_cycle))


def mpu_matmul_cycles(model, m: int, k: int, n: int) -> int:
    return max(1, ceil_div(m * k * n, model.mpu_macs_per_cycle))


def vpu_cycles(model, elements: int, transcendental: bool) -> int:
    rate = model.vpu_transcendental_per_cycle if transcendental else model.vpu_lanes
    return max(1, ceil_div(elements, rate))


@dataclass(frozen=True)
class Roofline:
    """The three lower bounds of a run on a model, in cycles (each rounded up)."""

    dram_cycles: int
    mpu_cycles: int
    vpu_cycles: int

    @property
    def cycles(self) -> int:
        return max(self.dram_cycles, self.mpu_cycles, self.vpu_cycles)

    @property
    def bound(self) -> str:
        """Which resource sets the roofline: "dram", "mpu", "vpu" (or "none" for an empty run)."""
        if self.cycles == 0:
            return "none"
        return max(
            (self.dram_cycles, "dram"),
            (self.mpu_cycles, "mpu"),
            (self.vpu_cycles, "vpu"),
            key=lambda x: x[0],
        )[1]

    def as_dict(self) -> dict:
        return {
            "dram": self.dram_cycles,
            "mpu": self.mpu_cycles,
            "vpu": self.vpu_cycles,
            "cycles": self.cycles,
            "bound": self.bound,
        }


def roofline(
    model,
    dram_bytes: int,
    macs: int,
    vpu_ops: int,
    vpu_transcendental_ops: int = 0,
    pim_bytes: int = 0,
) -> Roofline:
    """The roofline of a kernel that moves `dram_bytes` over shared DRAM, does `macs` MACs and
    `vpu_ops` VPU element-ops (of which `vpu_transcendental_ops` at the transcendental rate),
    on `model`: every rate is the whole chip's (all cores, all channels). `pim_bytes`: weight
    bytes the PIM units read inside their channels (docs/pim.md): a channel moves either its
    external bytes at `dram_bytes_per_cycle_per_channel` or its PIM bytes at
    `arch.pim.PIM_BYTES_PER_CYCLE`, never both at once, so the DRAM term is
    `dram_bytes / external rate + pim_bytes / PIM rate` over all channels, rounded up once (the
    PIM MAC rate, 128 bf16 MACs per 256 bytes, is the same bound)."""
    if min(dram_bytes, macs, vpu_ops, vpu_transcendental_ops, pim_bytes) < 0:
        raise ValueError("roofline counts must be non-negative")
    if vpu_transcendental_ops > vpu_ops:
        raise ValueError("transcendental VPU ops are a subset of the VPU ops")
    cores = model.num_cores
    ext = model.num_memory_channels * model.dram_bytes_per_cycle_per_channel
    if pim_bytes:
        internal = model.num_memory_channels * PIM_BYTES_PER_CYCLE
        dram = ceil_div(dram_bytes * internal + pim_bytes * ext, ext * internal)
    else:
        dram = ceil_div(dram_bytes, ext)
    mpu = ceil_div(macs, cores * model.mpu_macs_per_cycle)
    lanes, trans = model.vpu_lanes, model.vpu_transcendental_per_cycle
    plain = vpu_ops - vpu_transcendental_ops
    # plain / (cores * lanes) + trans_ops / (cores * trans), exactly, rounded up once
    vpu = ceil_div(plain * trans + vpu_transcendental_ops * lanes, cores * lanes * trans)
    return Roofline(dram, mpu, vpu)


@dataclass
class RunResult:
    """What one emulator run reports.  Times are in cycles of the model's clock."""

    cycles: int
    clock_ghz: float
    module_cycles: dict[str, int]  # module -> cycle at which it halted
    unit_busy: dict[str, dict[str, int]]  # module -> {"dma", "mpu", "vpu"} -> busy cycles
    port_busy: dict[str, int]  # DMA port -> data-phase cycles
    dram_bytes_per_channel: list[int]
    instructions: dict[str, int]  # module -> instructions executed
    trace_events: list = field(default_factory=list, repr=False)
    mac_count: int = 0
    vpu_element_ops: int = 0  # every VPU element-op, transcendental ones included
    vpu_transcendental_ops: int = 0  # the element-ops of the transcendental rows of legato.opset
    roofline: Roofline | None = None  # set by the emulator from the model it ran on
    model_name: str = ""
    # `legato.device_print`s of the run (`arch.debug.PrintRecord`), in the order they ran
    prints: list = field(default_factory=list, repr=False)
    # weight bytes the PIM units read inside their channels (docs/pim.md; 0 without PIM)
    pim_bytes: int = 0

    @property
    def roofline_cycles(self) -> int:
        return self.roofline.cycles if self.roofline else 0

    @property
    def efficiency(self) -> float:
        """roofline cycles / simulated cycles (0 for an empty run); never above 1."""
        return self.roofline_cycles / self.cycles if self.cycles else 0.0

    @property
    def total_instructions(self) -> int:
        return sum(self.instructions.values())

    @property
    def dram_bytes(self) -> int:
        return sum(self.dram_bytes_per_channel)

    @property
    def dram_bandwidth_per_channel(self) -> list[float]:
        """Achieved bytes per cycle on each shared-DRAM channel over the whole run (the peak is
        the model's `dram_bytes_per_cycle_per_channel`)."""
        return [b / self.cycles if self.cycles else 0.0 for b in self.dram_bytes_per_channel]

    @property
    def dram_bandwidth_gbps(self) -> float:
        """Achieved shared-DRAM bandwidth of the run in GB/s (all channels)."""
        return self.dram_bytes / self.seconds / 1e9 if self.cycles else 0.0

    @property
    def seconds(self) -> float:
        return self.cycles / (self.clock_ghz * 1e9)

    def trace(self) -> dict:
        """Chrome trace JSON (Perfetto): one process per module, one thread per unit; `ts` and
        `dur` in microseconds at the chip's clock (a cycle is 1 / clock_ghz ns), the cycle kept
        in `args.cycle` (a slice's length in cycles in `args.cycles`)."""
        us_per_cycle = 1.0 / (self.clock_ghz * 1e3)
        out = []
        for ev in self.trace_events:
            if ev.get("ph") == "M":
                out.append(ev)
                continue
            ev = dict(ev)
            args = dict(ev.get("args") or {})
            if "ts" in ev:
                args["cycle"] = ev["ts"]
                ev["ts"] = ev["ts"] * us_per_cycle
            if "dur" in ev:
                args["cycles"] = ev["dur"]
                ev["dur"] = ev["dur"] * us_per_cycle
            ev["args"] = args
            out.append(ev)
        return {
            "traceEvents": out,
            "displayTimeUnit": "ns",
            "otherData": {
                "time_unit": "us at the chip's clock",
                "clock_ghz": self.clock_ghz,
                "cycles": self.cycles,
            },
        }

    def write_trace(self, path) -> None:
        with open(path, "w") as f:
            json.dump(self.trace(), f)

    def summary(self) -> str:
        lines = [
            f"cycles: {self.cycles} ({self.seconds * 1e6:.3f} us at {self.clock_ghz} GHz)"
            + (f" on {self.model_name}" if self.model_name else "")
        ]
        if self.roofline is not None:
            r = self.roofline
            lines.append(
                f"roofline: {r.cycles} cycles ({r.bound}-bound; dram {r.dram_cycles}, "
                f"mpu {r.mpu_cycles}, vpu {r.vpu_cycles}), efficiency "
                f"{self.efficiency:.1%}"
            )
        lines += [
            f"instructions: {self.total_instructions}",
            (
                f"MACs: {self.mac_count}, VPU element-ops: {self.vpu_element_ops} "
                f"({self.vpu_transcendental_ops} transcendental)"
            ),
            f"DRAM bytes: {self.dram_bytes} per channel {self.dram_bytes_per_channel}",
            f"DRAM bandwidth: {self.dram_bandwidth_gbps:.1f} GB/s; per channel (B/cycle) "
            + ", ".join(f"{b:.1f}" for b in self.dram_bandwidth_per_channel),
        ]
        if self.pim_bytes:
            lines.append(f"PIM bytes (read inside the channels): {self.pim_bytes}")
        for mod, units in self.unit_busy.items():
            lines.append(
                f"  {mod}: halted at {self.module_cycles.get(mod)}, "
                f"{self.instructions.get(mod, 0)} instructions, busy "
                + ", ".join(f"{u}={c}" for u, c in units.items())
            )
        return "\n".join(lines)
