"""What ran where, and the simulated Bertha time of every forward step.

Every forward graph compiled by `vllm_legato.compile` registers its Legato placement summaries
here; every call of it adds a step: tokens, requests (from vLLM's attention metadata), and the
simulated cycles of the Legato kernels it ran. Steps are kept in the process that runs the model
(vLLM's worker). With $LEGATO_VLLM_REPORT set, the report is also written there as JSON after
every step, so it can be read from the process that called `LLM.generate` (vLLM runs the worker
in a separate process by default). `vllm_legato.report()` loads it.

Simulated time per generated token: a forward step samples one token for each request in it,
so `cycles / requests` of the step; the report gives the mean over decode steps (one token per
request) and over all steps, in cycles and in microseconds at the generation's clock.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field

REPORT_ENV = "LEGATO_VLLM_REPORT"

_lock = threading.Lock()


@dataclass
class Step:
    graph: int
    tokens: int
    requests: int | None
    decode: bool | None
    cycles: int
    # the plugin's attention backend (vllm_legato.attention): its Legato kernels of the step
    attn_cycles: int = 0
    attn_dram_bytes: int = 0
    kv_write_dram_bytes: int = 0
    # the step's work (vllm_legato.work): on Legato measured, on the host estimated
    legato_dram_bytes: int = 0
    legato_macs: int = 0
    host_dram_bytes: int = 0
    host_macs: int = 0
    # the plugin's op kernels (vllm_legato.ops) of the step: {op: [cycles, DRAM bytes]}
    plugin_ops: dict = field(default_factory=dict)
    # the host's estimated DRAM bytes per extern node of the graph: {node: bytes}
    host_nodes: dict = field(default_factory=dict)
    # the LM head (vllm_legato.lm_head, run after the forward on its hidden states): its
    # Legato kernels' [cycles, DRAM bytes] (in cycles and legato_dram_bytes too) and its host
    # nodes' estimated DRAM bytes (in host_dram_bytes); None: the LM head ran on the host
    # (vLLM's CPU kernel), estimated in host_dram_bytes
    lm_head: list | None = None
    lm_head_host_bytes: int = 0


@dataclass
class GraphInfo:
    index: int
    bound: int
    placement: list[dict] = field(default_factory=list)  # one per ATen graph
    vllm_ops: dict[str, int] = field(default_factory=dict)  # vLLM's ops (attention, KV cache)
    modules: dict[str, str] = field(default_factory=dict)  # host node -> vLLM layer class


@dataclass
class Report:
    device: str | None = None
    clock_ghz: float | None = None
    graphs: list[GraphInfo] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    attention_backend: str | None = None  # the backend vLLM built the attention layers with
    # the platform's token-budget decision (vllm_legato.budget.Decision as a dict)
    budget: dict | None = None
    # the LM head's graphs (vllm_legato.lm_head): their placement
    lm_head_graphs: list[dict] = field(default_factory=list)

    # -- aggregates ----------------------------------------------------------------------
    def _served(self):
        return [s for s in self.steps if s.requests]

    @property
    def legato_kernels(self) -> int:
        return sum(len(p["kernels"]) for g in self.graphs for p in g.placement)

    @property
    def legato_nodes(self) -> int:
        return sum(len(k["nodes"]) for g in self.graphs for p in g.placement for k in p["kernels"])

    def extern_ops(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.graphs:
            for p in g.placement:
                for e in p["extern"]:
                    if e["op"].startswith("vllm_legato."):
                        continue  # the plugin's ops run Legato kernels (vllm_ops)
                    out[e["op"]] = out.get(e["op"], 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def vllm_ops(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.graphs:
            for k, v in g.vllm_ops.items():
                out[k] = out.get(k, 0) + v
        return out

    def legato_ops(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.graphs:
            for p in g.placement:
                for k in p["kernels"]:
                    for n in k["nodes"]:
                        op = n.split(": ", 1)[-1].split(" ", 1)[0]
                        out[op] = out.get(op, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def where(self, decode: bool = True) -> list[dict]:
        """What ran where and why, per op, for the served decode (or other) steps: one row per
        (op, vLLM layer, place, reason) with its node count in the graphs, and the mean per
        step of its DRAM bytes (Legato: measured; host: estimated) and Legato cycles. Places:
        "legato" (a kernel of the forward graph, bytes not split per op), "legato (plugin op)"
        (`vllm_legato.ops`), "legato (attention backend)", "host" (extern, with the legato
        backend's reason)."""
        steps = [s for s in self._served() if bool(s.decode) == decode]
        n = max(1, len(steps))
        rows: dict[tuple, dict] = {}

        def row(op, module, where, reason=""):
            key = (op, module, where, reason)
            return rows.setdefault(
                key,
                dict(
                    op=op, module=module, where=where, reason=reason, nodes=0, bytes=0.0, cycles=0.0
                ),
            )

        for op, c in self.legato_ops().items():
            row(op, "", "legato")["nodes"] = c
        for g in self.graphs:
            gsteps = [s for s in steps if s.graph == g.index]
            for p in g.placement:
                # host shape / index work the backend keeps on the host by design
                for h in p["host"]:
                    name, _, rest = h.partition(": ")
                    op, _, note = rest.partition(" (")
                    if not op.startswith(("aten.", "prims.")):
                        continue
                    why = note.rstrip(")") or "shape bookkeeping"
                    r = row(op, g.modules.get(name, ""), "host", f"{why} (host by design)")
                    r["nodes"] += 1
                    r["bytes"] += sum(s.host_nodes.get(name, 0) for s in gsteps) / n
                for e in p["extern"]:
                    if not e["op"].startswith(("aten.", "prims.")):
                        continue  # vLLM's and the plugin's ops: their own rows below
                    r = row(e["op"], g.modules.get(e["node"], ""), "host", _short(e["reason"]))
                    r["nodes"] += 1
                    r["bytes"] += sum(s.host_nodes.get(e["node"], 0) for s in gsteps) / n
        for op, c in self.vllm_ops().items():
            if op.startswith("vllm_legato."):
                r = row(op, "", "legato (plugin op)")
                r["nodes"] = c
                name = op.split(".", 1)[1]
                r["cycles"] = sum(s.plugin_ops.get(name, (0, 0))[0] for s in steps) / n
                r["bytes"] = sum(s.plugin_ops.get(name, (0, 0))[1] for s in steps) / n
            elif "attention" in op or "kv_cache" in op:
                r = row(op, "Attention", "legato (attention backend)")
                r["nodes"] = c
        attn = row("attention + KV-cache write kernels", "Attention", "legato (attention backend)")
        attn["cycles"] = sum(s.attn_cycles for s in steps) / n
        attn["bytes"] = sum(s.attn_dram_bytes for s in steps) / n
        head_host = (
            sum(s.host_dram_bytes - sum(s.host_nodes.values()) for s in steps) / n
        )  # vLLM's CPU kernel (estimated), or the Legato LM head's host nodes
        if any(s.lm_head and s.lm_head[0] for s in steps):  # its kernels ran
            head = row("LM head (compute_logits)", "LogitsProcessor", "legato (plugin op)")
            head["nodes"] = 1
            head["cycles"] = sum(s.lm_head[0] for s in steps if s.lm_head) / n
            head["bytes"] = sum(s.lm_head[1] for s in steps if s.lm_head) / n
            if head_host:
                reasons = {_short(e["reason"]) for p in self.lm_head_graphs for e in p["extern"]}
                why = "; ".join(sorted(reasons)) or "host nodes of the LM head's graph"
                row("LM head (compute_logits)", "LogitsProcessor", "host", why)["bytes"] = head_host
        else:
            head = row(
                "LM head (compute_logits)",
                "LogitsProcessor",
                "host",
                "outside the compiled forward",
            )
            head["bytes"] = head_host
        return list(rows.values())

    def where_table(self, decode: bool = True) -> str:
        """`where()` as a text table, host rows first (largest bytes first)."""
        rows = sorted(self.where(decode), key=lambda r: (r["where"] != "host", -r["bytes"]))
        out = [
            f"  what ran where ({'decode' if decode else 'prefill / mixed'} steps, mean per step):"
        ]
        for r in rows:
            what = f"{r['op']}" + (f" [{r['module']}]" if r["module"] else "")
            nums = []
            if r["nodes"]:
                nums.append(f"{r['nodes']} node(s)")
            if r["bytes"]:
                nums.append(f"{r['bytes']:.0f} B")
            if r["cycles"]:
                nums.append(f"{r['cycles']:.0f} cycles")
            why = f": {r['reason']}" if r["reason"] else ""
            out.append(f"    {r['where']:<27} {what} ({', '.join(nums) or '-'}){why}")
        return "\n".join(out)

    def cycles_per_token(self, decode_only: bool = True) -> float | None:
        steps = [s for s in self._served() if (s.decode or not decode_only)]
        if not steps:
            return None
        return sum(s.cycles for s in steps) / sum(s.requests for s in steps)

    def share(self, what: str, decode: bool) -> float:
        """Mean over the served decode (or other) steps of the share of the step's `what`
        ("dram_bytes" or "macs") that ran on Legato."""
        from vllm_legato.work import share

        vals = [
            share(getattr(s, f"legato_{what}"), getattr(s, f"host_{what}"))
            for s in self._served()
            if bool(s.decode) == decode
        ]
        vals = [v for v in vals if v == v]
        return sum(vals) / len(vals) if vals else float("nan")

    def us_per_token(self, decode_only: bool = True) -> float | None:
        c = self.cycles_per_token(decode_only)
        return None if c is None or not self.clock_ghz else c / (self.clock_ghz * 1e3)

    def to_json(self) -> dict:
        return {
            "device": self.device,
            "clock_ghz": self.clock_ghz,
            "graphs": [asdict(g) for g in self.graphs],
            "steps": [asdict(s) for s in self.steps],
            "attention_backend": self.attention_backend,
            "budget": self.budget,
            "lm_head_graphs": self.lm_head_graphs,
        }

    @staticmethod
    def from_json(d: dict) -> Report:
        return Report(
            d.get("device"),
            d.get("clock_ghz"),
            [GraphInfo(**g) for g in d.get("graphs", [])],
            [Step(**s) for s in d.get("steps", [])],
            d.get("attention_backend"),
            d.get("budget"),
            d.get("lm_head_graphs", []),
        )

    def __str__(self) -> str:
        lines = [
            (
                f"vllm-legato on {self.device} ({self.clock_ghz} GHz): "
                f"{len(self.graphs)} forward graph(s), {self.legato_kernels} Legato kernel(s) "
                f"covering {self.legato_nodes} ATen node(s); attention backend "
                f"{self.attention_backend}"
            )
        ]
        if self.budget:
            b = self.budget
            lines.append(
                f"  token budget {b['budget']} (vLLM's {b['requested']}, "
                f"{'lowered' if b['capped'] else 'kept'}): {b['reason']}"
            )
        if self.legato_ops():
            lines.append(
                "  on Legato: " + ", ".join(f"{k} x{v}" for k, v in self.legato_ops().items())
            )
        if self.extern_ops():
            lines.append(
                "  extern:    " + ", ".join(f"{k} x{v}" for k, v in self.extern_ops().items())
            )
        if self.vllm_ops():
            lines.append(
                "  vLLM's and the plugin's ops (opaque to the graph; attention and the KV-cache "
                "write run as Legato kernels of the LEGATO_ATTN backend, vllm_legato.* as "
                "those of vllm_legato.ops): "
                + ", ".join(f"{k} x{v}" for k, v in self.vllm_ops().items())
            )
        for decode, what in ((True, "decode"), (False, "prefill / mixed")):
            sel = [s for s in self._served() if bool(s.decode) == decode]
            if sel and any(s.legato_dram_bytes + s.host_dram_bytes for s in sel):
                lines.append(
                    f"  share on Legato per {what} step (mean of {len(sel)}): DRAM bytes "
                    f"{self.share('dram_bytes', decode):.1%}, MACs {self.share('macs', decode):.1%}"
                    " (the rest: the host rows below, the LM head's among them when it is not on Legato)"
                )
        attn = [s for s in self.steps if s.attn_cycles]
        if attn:
            lines.append(
                f"  attention on Legato in {len(attn)} step(s): "
                f"{sum(s.attn_cycles for s in attn) / len(attn):.0f} cycles and "
                f"{sum(s.attn_dram_bytes for s in attn) / len(attn):.0f} DRAM bytes per step "
                f"(KV-cache writes {sum(s.kv_write_dram_bytes for s in attn) / len(attn):.0f})"
            )
        served = self._served()
        for decode in (True, False):
            if any(bool(s.decode) == decode for s in served):
                lines.append(self.where_table(decode))
        lines.append(f"  steps: {len(self.steps)} ({len(served)} serving requests)")
        for decode_only, what in ((True, "decode"), (False, "all steps")):
            c = self.cycles_per_token(decode_only)
            if c is not None:
                lines.append(
                    f"  simulated Legato time per generated token ({what}): "
                    f"{c:.0f} cycles = {self.us_per_token(decode_only):.3f} us"
                )
        return "\n".join(lines)


def _short(reason: str) -> str:
    """A placement reason without the generated kernel's path: "kernel failed: error: ..."."""
    import re

    return re.sub(r"\S+\.py:\d+:\d+: ", "", reason)


# One report per $LEGATO_VLLM_REPORT path (None: unset), so that engines started one after the
# other in one process (each with its own path) keep apart.
_reports: dict[str | None, Report] = {}


def current() -> Report:
    """The report of this process (the worker's, when the model runs here)."""
    return _reports.setdefault(os.environ.get(REPORT_ENV), Report())


def load_report(path=None) -> Report:
    path = path or os.environ.get(REPORT_ENV)
    if path and os.path.exists(path):
        with open(path) as f:
            return Report.from_json(json.load(f))
    return _reports.get(path, Report())


def _write(report: Report, path: str | None) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(report.to_json(), f)
    os.replace(tmp, path)


def _placement(summary) -> dict:
    return {
        "graph": summary.graph,
        "kernels": [
            {"name": k.name, "nodes": list(k.nodes), "source": k.source_path}
            for k in summary.kernels
        ],
        "extern": [{"node": e.node, "op": e.op, "reason": e.reason} for e in summary.extern],
        "host": list(summary.host),
    }


def add_lm_head_graph(summary) -> None:
    """Record the placement of a compiled LM-head graph (vllm_legato.lm_head)."""
    rep = current()
    with _lock:
        rep.lm_head_graphs.append(_placement(summary))


def add_lm_head(cycles: int, dram: int, macs: int, host_bytes: int, host_macs: int) -> None:
    """Add one LM-head call's work to the last forward step (whose hidden states it read), in
    place of the step's estimate of vLLM's CPU LM head."""
    from vllm_legato import work

    path = os.environ.get(REPORT_ENV)
    rep = current()
    with _lock:
        if not rep.steps:
            return
        s = rep.steps[-1]
        if s.lm_head is None:
            b, m = work.lm_head_work(s.requests or 0)
            s.host_dram_bytes -= b
            s.host_macs -= m
            s.lm_head = [0, 0]
        s.lm_head[0] += cycles
        s.lm_head[1] += dram
        s.cycles += cycles
        s.legato_dram_bytes += dram
        s.legato_macs += macs
        s.lm_head_host_bytes += host_bytes
        s.host_dram_bytes += host_bytes
        s.host_macs += host_macs
        _write(rep, path)


def _step_shape():
    """(requests, decode-only) of the current forward step from vLLM's attention metadata."""
    try:
        from vllm.forward_context import get_forward_context, is_forward_context_available

        if not is_forward_context_available():
            return None, None
        md = get_forward_context().attn_metadata
        if isinstance(md, list):
            md = md[0] if md else None
        if not md:
            return None, None
        m = next(iter(md.values()))
        reqs = int(m.query_start_loc.numel()) - 1
        tokens = int(getattr(m, "num_actual_tokens", reqs))
        return reqs, tokens == reqs
    except Exception:  # noqa: BLE001 -- metadata layouts differ between backends: the step is still counted
        return None, None


def _num_tokens(args) -> int:
    import torch

    for a in args:
        if isinstance(a, torch.Tensor) and a.dim() >= 1:
            return int(a.shape[0])
    return 0


def instrument(
    compiled,
    graphs,
    device: str,
    bound: int,
    vllm_ops: dict | None = None,
    gm=None,
):
    """Wrap a compiled forward: record its placement now and a `Step` per call. `gm`: the
    partitioned graph (its kernel modules and host nodes give the step's work)."""
    from legato.model.bertha import _EVT0, _EVT1
    from vllm_legato import budget, ops, work

    path = os.environ.get(REPORT_ENV)
    rep = current()
    decision = budget.Decision.from_env()
    with _lock:
        rep.device = device
        rep.budget = asdict(decision) if decision is not None else None
        rep.clock_ghz = (_EVT1 if device == "bertha-evt1" else _EVT0)["clock_ghz"]
        info = GraphInfo(
            len(rep.graphs),
            bound,
            [_placement(s) for s in graphs],
            dict(vllm_ops or {}),
            work.node_modules(gm) if gm is not None else {},
        )
        rep.graphs.append(info)
        _write(rep, path)

    def total_cycles():
        return sum(k.total_cycles for s in graphs for k in s.kernels)

    from vllm_legato.attention import STATS

    mods = work.kernel_modules(gm) if gm is not None else []
    host = work.host_nodes(gm) if gm is not None else []

    def run(*args):
        before = total_cycles()
        calls = [m.info.calls for m in mods]
        a0 = (STATS.cycles, STATS.dram_bytes, STATS.write_dram_bytes, STATS.macs)
        o0, om0 = ops.STATS.snapshot(), ops.STATS.total_macs()
        out = compiled(*args)
        attn = (STATS.cycles - a0[0], STATS.dram_bytes - a0[1], STATS.write_dram_bytes - a0[2])
        plugin = {}
        for op, (c, b) in ops.STATS.snapshot().items():
            c0, b0 = o0.get(op, (0, 0))
            if c > c0:
                plugin[op] = [c - c0, b - b0]
        cycles = total_cycles() - before + attn[0] + sum(c for c, _ in plugin.values())
        reqs, decode = _step_shape()
        tokens = _num_tokens(args)
        lb = attn[1] + sum(b for _, b in plugin.values())
        lm = STATS.macs - a0[3] + ops.STATS.total_macs() - om0
        for m, c in zip(mods, calls):
            if m.info.calls > c and m.kernel.last_run is not None:
                lb += int(sum(m.kernel.last_run.dram_bytes_per_channel))
                lm += int(m.kernel.last_run.mac_count)
        hb = hm = 0
        per_node = {}
        if gm is not None:
            for n in host:
                b, mm = work.node_work(n, tokens)
                hb, hm = hb + b, hm + mm
                if b:
                    per_node[n.name] = b
            b, mm = work.lm_head_work(reqs or 0)
            hb, hm = hb + b, hm + mm
        step = Step(info.index, tokens, reqs, decode, cycles, *attn, lb, lm, hb, hm)
        step.plugin_ops, step.host_nodes = plugin, per_node
        with _lock:
            rep.steps.append(step)
            _write(rep, path)
        return out

    run.__wrapped__ = compiled
    return run
