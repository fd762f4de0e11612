"""Placement summary: which nodes ran as Legato kernels and which ran extern (and why)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class KernelInfo:
    name: str
    nodes: list[str]  # "name: aten.op" of the nodes fused into the kernel
    source_path: str
    calls: int = 0
    last_cycles: int | None = None
    total_cycles: int = 0
    eager_calls: int = 0  # calls the kernel could not take, run eagerly (eager_reason)
    eager_reason: str | None = None


@dataclass
class ExternInfo:
    node: str
    op: str
    reason: str  # "no resolver" | "resolver refused: ..." | "kernel failed: ..." | ...


@dataclass
class PlacementSummary:
    """For one graph compiled by the legato backend."""

    graph: str
    device: str
    kernels: list[KernelInfo] = field(default_factory=list)
    extern: list[ExternInfo] = field(default_factory=list)
    host: list[str] = field(default_factory=list)  # SymInt bookkeeping / runtime size asserts
    matmul_flops: int = 0  # of mm/addmm/bmm/baddbmm/attention nodes (2 per multiply-add)
    matmul_flops_legato: int = 0  # those in Legato kernels

    @property
    def num_kernels(self) -> int:
        return len(self.kernels)

    @property
    def num_extern(self) -> int:
        return len(self.extern)

    @property
    def legato_nodes(self) -> int:
        return sum(len(k.nodes) for k in self.kernels)

    @property
    def node_share(self) -> float:
        """The share of the graph's compute nodes (host shape work aside) in Legato kernels."""
        total = self.legato_nodes + self.num_extern
        return self.legato_nodes / total if total else 1.0

    @property
    def matmul_flop_share(self) -> float:
        """The share of the graph's matmul and attention FLOPs that run in Legato kernels."""
        return self.matmul_flops_legato / self.matmul_flops if self.matmul_flops else 1.0

    @property
    def last_cycles(self) -> int:
        """Simulated cycles of the last call of the graph (sum over its kernels)."""
        return sum(k.last_cycles or 0 for k in self.kernels)

    def extern_ops(self) -> Counter:
        return Counter(e.op for e in self.extern)

    def __str__(self) -> str:
        lines = [
            f"legato placement of {self.graph} on {self.device}: {self.num_kernels} Legato "
            f"kernel(s) covering {self.legato_nodes} node(s), {self.num_extern} extern node(s)"
            + (f", {len(self.host)} host shape node(s)" if self.host else "")
            + (
                f"; matmul FLOPs on Legato: {self.matmul_flop_share:.0%}"
                if self.matmul_flops
                else ""
            )
        ]
        for k in self.kernels:
            cyc = "not run yet" if k.last_cycles is None else f"{k.last_cycles} cycles (last call)"
            lines.append(f"  kernel {k.name}: {len(k.nodes)} node(s), {cyc}, {k.calls} call(s)")
            if k.eager_calls:
                lines.append(f"      {k.eager_calls} call(s) ran eagerly: {k.eager_reason}")
            for n in k.nodes:
                lines.append(f"      {n}")
            lines.append(f"      source: {k.source_path}")
        for e in self.extern:
            lines.append(f"  extern {e.node} ({e.op}): {e.reason}")
        return "\n".join(lines)


_history: list[PlacementSummary] = []


def record(summary: PlacementSummary) -> None:
    _history.append(summary)


def summaries() -> list[PlacementSummary]:
    """Every graph compiled by the legato backend in this process, oldest first."""
    return list(_history)


def last_summary() -> PlacementSummary | None:
    return _history[-1] if _history else None


def clear() -> None:
    _history.clear()
