"""The roofline plot of bench rows (`python -m bench --plot out.png|svg`).

One panel per unit the rows' work runs on: x is the arithmetic intensity of a row (its MACs, or
VPU element-ops for a kernel without MACs, per shared-DRAM byte), y the work per cycle it
achieved (work / simulated cycles). Each target draws its ceilings from its ComputeModel: the
DRAM slope (all channels' bytes per cycle times the intensity) and the flat peak of the unit
(all cores). A point's distance below the ceiling at its x is the efficiency the bench reports
(for the row's bound resource).
"""

from __future__ import annotations

from pathlib import Path

from legato.model.targets import target_model

_UNITS = {
    "mpu": ("mac_count", "MACs", lambda m: m.num_cores * m.mpu_macs_per_cycle),
    "vpu": ("vpu_element_ops", "VPU element-ops", lambda m: m.num_cores * m.vpu_lanes),
}


def work_unit(row: dict) -> str:
    """ "mpu" for a row that does MACs, else "vpu": the unit its intensity is counted in."""
    return "mpu" if row.get("mac_count") else "vpu"


def points(rows: list[dict]) -> list[dict]:
    """Per row: its unit, intensity (work per DRAM byte) and achieved work per cycle."""
    out = []
    for r in rows:
        unit = work_unit(r)
        work = r.get(_UNITS[unit][0]) or 0
        if not r.get("cycles") or not work or not r.get("dram_bytes"):
            continue  # nothing to place on a log-log plot
        out.append(
            {
                "name": r["name"],
                "target": r["target"],
                "unit": unit,
                "intensity": work / r["dram_bytes"],
                "per_cycle": work / r["cycles"],
                "efficiency": r.get("efficiency"),
            }
        )
    return out


def plot(rows: list[dict], path: str | Path) -> Path:
    """Draw the roofline plot of `rows` (the bench's JSON rows) to `path`; the format is the
    suffix's (.png, .svg, .pdf). Returns the path."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    path = Path(path)
    pts = points(rows)
    units = [u for u in _UNITS if any(p["unit"] == u for p in pts)] or ["mpu"]
    fig, axes = plt.subplots(1, len(units), figsize=(6.5 * len(units), 5), squeeze=False)
    targets = sorted({r["target"] for r in rows})
    colors = {t: f"C{i}" for i, t in enumerate(targets)}
    for ax, unit in zip(axes[0], units):
        _, label, peak_of = _UNITS[unit]
        mine = [p for p in pts if p["unit"] == unit]
        xs = [p["intensity"] for p in mine] or [1.0]
        lo, hi = min(xs) / 4, max(xs) * 4
        for t in targets:
            model = target_model(t)
            bw = model.num_memory_channels * model.dram_bytes_per_cycle_per_channel
            peak = peak_of(model)
            knee = peak / bw
            x0, x1 = min(lo, knee / 4), max(hi, knee * 4)
            ax.plot([x0, knee, x1], [bw * x0, peak, peak], color=colors[t], lw=1.5, label=t)
        for p in mine:
            ax.scatter(p["intensity"], p["per_cycle"], color=colors[p["target"]], zorder=3)
            eff = f" {p['efficiency']:.0%}" if p["efficiency"] is not None else ""
            ax.annotate(
                p["name"] + eff,
                (p["intensity"], p["per_cycle"]),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{label} per shared-DRAM byte")
        ax.set_ylabel(f"{label} per cycle")
        ax.set_title(f"roofline: {unit.upper()} work")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
