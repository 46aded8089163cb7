"""Reports over saved games — figures: the chart data and the image files (matplotlib, Agg).

The chart data is shared by the image files here and the terminal charts of the
interface (``calbench_tui/report_view.py``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

from .stats import _ci95, group_of, mode_rank


# ---------------------------------------------------------------------------------------
# Chart data (shared by the image files and the terminal charts)
# ---------------------------------------------------------------------------------------
def plane_points(report: dict[str, Any]) -> dict[str, list[tuple[str, float, float]]]:
    """Privacy–cost plane (paper Fig. 2): per cost setting, (group, mean VPS, mean excess)."""
    out: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for r in report["table"]:
        if r["vps"] is not None and r["excess"] is not None:
            out[r["cost_mode"]].append((r["group"], r["vps"], r["excess"]))
    return dict(sorted(out.items(), key=lambda kv: mode_rank(kv[0])))


def fairness_bars(report: dict[str, Any]) -> list[tuple[str, str, float, float | None]]:
    """Fairness by group and cost setting (paper Fig. 4): (group, mode, mean, 95% half-width)."""
    g = report["group_by"]
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for s in report.get("_records") or []:
        if s["fairness"] is not None:
            groups[(s["cost_mode"], group_of(s, g))].append(s["fairness"])
    return [(name, mode, sum(v) / len(v), _ci95(v))
            for (mode, name), v in sorted(groups.items(), key=lambda kv: (kv[0][1], mode_rank(kv[0][0])))]


def message_points(report: dict[str, Any]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Messages per meeting against excess (paper Fig. 3): mode -> group -> [(x, y)] per seat-game."""
    g = report["group_by"]
    out: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for s in report.get("_records") or []:
        if s["messages_per_meeting"] is not None and s["excess"] is not None:
            out[s["cost_mode"]][group_of(s, g)].append((s["messages_per_meeting"], s["excess"]))
    return {m: dict(sorted(v.items())) for m, v in sorted(out.items(), key=lambda kv: mode_rank(kv[0]))}


#: A trend line needs this many points (a line through two points says nothing).
MIN_FIT_POINTS = 5


def ols(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares line (slope, intercept); None with fewer than ``MIN_FIT_POINTS`` points or
    when x does not vary."""
    n = len(points)
    if n < MIN_FIT_POINTS:
        return None
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx <= 1e-12:
        return None
    slope = sum((p[0] - mx) * (p[1] - my) for p in points) / sxx
    return slope, my - slope * mx


# ---------------------------------------------------------------------------------------
# Image files (matplotlib, Agg)
# ---------------------------------------------------------------------------------------
def clipped_errors(means: Sequence[float], half: Sequence[float | None]) -> list[list[float]]:
    """Asymmetric error bars for a quantity that cannot be negative (fairness): the interval is
    clipped at 0, so the lower arm never reaches below the axis."""
    lower = [min(h or 0.0, max(m, 0.0)) for m, h in zip(means, half)]
    return [lower, [h or 0.0 for h in half]]


def _room_below_zero(ax, values: Sequence[float], axis: str = "y") -> None:
    """Start an axis a little below 0, so a point at exactly 0 is drawn whole, not cut in half."""
    top = max([v for v in values if v is not None] + [1e-9])
    pad = 0.05 * top
    (ax.set_ylim if axis == "y" else ax.set_xlim)(-pad, top + 2 * pad)
    (ax.axhline if axis == "y" else ax.axvline)(0, color="grey", linewidth=0.6)


def plot_paths(path: str) -> list[str]:
    """FILE.png -> [FILE.png, FILE-fairness.png, FILE-messages.png] (same extension)."""
    import os

    root, ext = os.path.splitext(path)
    ext = ext or ".png"
    return [root + ext, f"{root}-fairness{ext}", f"{root}-messages{ext}"]


def write_plots(report: dict[str, Any], path: str) -> list[str]:
    """Write the three figures; returns the file names.  See docs/reports.md."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plane_file, fair_file, msg_file = plot_paths(path)
    cmap = plt.get_cmap("tab10")
    groups = sorted({r["group"] for r in report["table"]})
    color = {g: cmap(i % 10) for i, g in enumerate(groups)}
    scripted = {r["group"] for r in report["table"] if r.get("scripted")}

    # 1. Privacy-cost plane, one panel per cost setting.  N (seats) beside each point; the
    #    marker shape is explained in a legend (squares: scripted protocols).
    from matplotlib.lines import Line2D

    seats_n = {(r["cost_mode"], r["group"]): r.get("seats") for r in report["table"]}
    plane = plane_points(report)
    modes = list(plane) or ["(no data)"]
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        pts = plane.get(mode, [])
        for name, x, y in pts:
            ax.scatter([x], [y], s=70, color=color.get(name, "grey"), marker="s" if name in scripted else "o",
                       label=name, edgecolors="black", linewidths=0.5)
            n = seats_n.get((mode, name))
            ax.annotate(f"{name} (N={n})" if n else name, (x, y), textcoords="offset points", xytext=(5, 4),
                        fontsize=8)
        _room_below_zero(ax, [p[1] for p in pts] or [1.0], "x")
        _room_below_zero(ax, [p[2] for p in pts] or [1.0], "y")
        shapes = [Line2D([], [], marker="s", linestyle="", color="grey", label="scripted protocol"),
                  Line2D([], [], marker="o", linestyle="", color="grey", label="model / persona")]
        present = (any(p[0] in scripted for p in pts), any(p[0] not in scripted for p in pts))
        if pts:
            ax.legend(handles=[h for h, shown in zip(shapes, present) if shown], fontsize=8, loc="best",
                      title="N = seats", title_fontsize=8)
        ax.set_title(f"{mode.capitalize()} cost" if pts else "no games with VPS and excess")
        ax.set_xlabel("VPS per target (mean, slot-equivalents)")
        ax.set_ylabel("Excess cost (mean, levels)")
        ax.grid(alpha=0.3)
    fig.suptitle("Privacy–cost plane (closer to the origin is better)")
    fig.tight_layout()
    fig.savefig(plane_file, dpi=120)
    plt.close(fig)

    # 2. Fairness by group and cost setting, with 95% intervals.
    bars = fairness_bars(report)
    fair_n: dict[tuple[str, str], int] = defaultdict(int)
    for rec in report.get("_records") or []:
        if rec["fairness"] is not None:
            fair_n[(group_of(rec, report["group_by"]), rec["cost_mode"])] += 1
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(groups) + 2), 4.5))
    if bars:
        modes_b = sorted({b[1] for b in bars}, key=mode_rank)
        names = sorted({b[0] for b in bars})
        width = 0.8 / len(modes_b)
        hatch = {m: h for m, h in zip(modes_b, ("", "//", "xx", ".."))}
        for j, mode in enumerate(modes_b):
            xs, ys, es = [], [], []
            for i, name in enumerate(names):
                b = next((b for b in bars if b[0] == name and b[1] == mode), None)
                if b is None:
                    continue
                xs.append(i + (j - (len(modes_b) - 1) / 2) * width)
                ys.append(b[2])
                es.append(b[3] or 0.0)
            ax.bar(xs, ys, width=width, yerr=clipped_errors(ys, es), capsize=3, label=mode,
                   hatch=hatch.get(mode, ""), color=[cmap(j % 10)] * len(xs), edgecolor="black", linewidth=0.5)
            for x, y, name in zip(xs, ys, [n for n in names if any(b[0] == n and b[1] == mode for b in bars)]):
                ax.annotate(f"N={fair_n[(name, mode)]}", (x, 0), textcoords="offset points", xytext=(0, 2),
                            ha="center", fontsize=7)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=20, ha="right")
        ax.set_ylim(bottom=0)
        ax.legend(title="cost setting")
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("Fairness cost |e_i − mean e| (levels)")
    ax.set_title("Fairness by " + report["group_by"].replace("_", " ") + " (error bars: 95% CI)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(fair_file, dpi=120)
    plt.close(fig)

    # 3. Messages per meeting against excess, per seat-game, with per-group OLS lines.
    mp = message_points(report)
    modes_m = list(mp) or ["(no data)"]
    fig, axes = plt.subplots(1, len(modes_m), figsize=(5.5 * len(modes_m), 4.5), squeeze=False)
    for ax, mode in zip(axes[0], modes_m):
        for name, pts in (mp.get(mode) or {}).items():
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            ax.scatter(xs, ys, s=18, alpha=0.6, color=color.get(name, "grey"), label=f"{name} (N={len(pts)})")
            fit = ols(pts)
            if fit is not None:
                lo, hi = min(xs), max(xs)
                if fit[0] < 0:  # excess cannot go below 0: stop the line where it would
                    hi = min(hi, -fit[1] / fit[0])
                elif fit[0] > 0:
                    lo = max(lo, -fit[1] / fit[0])
                ax.plot([lo, hi], [fit[0] * lo + fit[1], fit[0] * hi + fit[1]], linestyle="--",
                        color=color.get(name, "grey"), linewidth=1.2)
        ax.set_title(f"{mode.capitalize()} cost" if mode in mp else "no data")
        all_pts = [p for ps in (mp.get(mode) or {}).values() for p in ps]
        _room_below_zero(ax, [p[0] for p in all_pts] or [1.0], "x")
        _room_below_zero(ax, [p[1] for p in all_pts] or [1.0], "y")
        ax.set_xlabel("Messages per scheduled meeting (seat)")
        ax.set_ylabel("Excess cost (levels)")
        ax.grid(alpha=0.3)
        if mp.get(mode):
            ax.legend(fontsize=8)
    fig.suptitle(f"Message volume against excess cost\n(dashed: least-squares line per group with ≥ {MIN_FIT_POINTS} "
                 "points · N = seat-games)", fontsize=10)
    fig.tight_layout()
    fig.savefig(msg_file, dpi=120)
    plt.close(fig)
    return [plane_file, fair_file, msg_file]
