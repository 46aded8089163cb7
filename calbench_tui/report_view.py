"""Printing a report: Rich tables and character charts (``calbench report`` and the report screen).

The numbers come from :mod:`lab.report`; this module only draws them.
"""

from __future__ import annotations

from typing import Any, Sequence

from calbench_tui.safe_text import cell
from lab.report.plots import MIN_FIT_POINTS, fairness_bars, message_points, ols, plane_points


# ---------------------------------------------------------------------------------------
# Rich rendering (CLI and the report screen)
# ---------------------------------------------------------------------------------------
def fmt(v: Any, kind: str = "f2") -> str:
    if kind == "pm":
        return "" if v is None else f"±{v:.2f}"
    if v is None:
        return "—"
    if kind == "pct":
        return f"{v * 100:.2f}%"
    if kind == "int":
        return str(int(v))
    if kind == "f3":
        return f"{v:.3f}"
    return f"{v:.2f}"


_GROUP_TITLE = {"persona": "Persona", "model": "Model", "cost_mode": "Setting"}


def _table(title: str, columns: Sequence[tuple[str, str]]):
    from rich import box

    from calbench_tui.safe_text import safe_table

    t = safe_table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False)
    for k, (name, justify) in enumerate(columns):
        # The name column never wraps (a persona split over two lines reads as two); a narrow
        # terminal wraps the numeric columns' headers instead.
        t.add_column(name, justify=justify, no_wrap=k == 0, overflow="fold")
    return t


def _with_settings(table, rows, cells, width: int) -> None:
    mode = None
    for r in rows:
        if r["cost_mode"] != mode:
            mode = r["cost_mode"]
            table.add_row(cell(str(mode).capitalize(), style="bold"), *[""] * (width - 1))
        table.add_row(*cells(r))


def report_renderables(report: dict[str, Any]) -> list[Any]:
    """Rich tables for a report: Table 1, Table 2, regret, first speaker, leaderboard."""
    from rich.text import Text

    out: list[Any] = []
    g = report["group_by"]
    gt = _GROUP_TITLE[g]
    out.append(Text(f"{report['games']} games, {report['seats']} seats", style="dim"))
    if not report["table"]:
        out.append(Text("No completed games match; nothing to report.", style="yellow"))
        return out
    t = _table(f"Table 1 — per {gt.lower()} (levels; Coord. = mean success; Msgs/mtg pooled)",
               [(gt, "left"), ("N", "right"), ("Mtgs", "right"), ("Coord.", "right"), ("Excess", "right"),
                ("Msgs/mtg", "right"), ("Fair.", "right"), ("VPS", "right")])
    _with_settings(t, report["table"], lambda r: (
        "  " + r["group"], str(r["seats"]), fmt(r["meetings"]), fmt(r["coordination"], "pct"), fmt(r["excess"]),
        fmt(r["messages_per_meeting"]), fmt(r["fairness"], "f3"), fmt(r["vps"])), 8)
    out.append(t)
    if report["protocols"]:
        t = _table("Table 2 — per protocol (games where every seat has the same persona; VPS per game)",
                   [("Method", "left"), ("Games", "right"), ("Coord.", "right"), ("Excess", "right"),
                    ("Msgs.", "right"), ("Fair.", "right"), ("VPS", "right")])
        _with_settings(t, report["protocols"], lambda r: (
            "  " + r["persona"], str(r["games"]), fmt(r["coordination"], "pct"), fmt(r["excess"]),
            fmt(r["messages_per_meeting"]), fmt(r["fairness"], "f3"), fmt(r["vps"])), 7)
        out.append(t)
    t = _table("Completion-conditioned regret (paper G.1) — seats that scheduled every assigned meeting",
               [(gt, "left"), ("N", "right"), ("Full", "right"), ("Full %", "right"), ("Nonzero regret", "right"),
                ("Excess/mtg", "right")])
    _with_settings(t, report["regret"], lambda r: (
        "  " + r["group"], str(r["seats"]), str(r["full_completion"]), fmt(r["full_completion_share"], "pct"),
        fmt(r["nonzero_regret_share"], "pct"), fmt(r["excess_per_meeting"])), 6)
    out.append(t)
    fs = report.get("first_speaker")
    if fs:
        t = _table("First-speaker effect (paper G.2) — per participating agent-meeting; Δ = first − subsequent, "
                   "paired per agent-game, ±95%",
                   [(gt, "left"), ("Rows", "right"), ("VPS 1st", "right"), ("VPS rest", "right"),
                    ("Δ VPS ±95%", "right"), ("Exc. 1st", "right"), ("Exc. rest", "right"), ("Δ exc. ±95%", "right"),
                    ("Pairs", "right")])
        _with_settings(t, fs, lambda r: (
            "  " + r["group"], str(r["agent_meetings"]), fmt(r["first_vps"]), fmt(r["subsequent_vps"]),
            f"{fmt(r['delta_vps'])} {fmt(r['delta_vps_ci95'], 'pm')}".strip(), fmt(r["first_excess"]),
            fmt(r["subsequent_excess"]), f"{fmt(r['delta_excess'])} {fmt(r['delta_excess_ci95'], 'pm')}".strip(),
            str(r["vps_pairs"])), 9)
        out.append(t)
    ma = report.get("message_audit")
    if ma and ma["groups"]:
        out.append(audit_table(ma["groups"], gt))
    lb = report.get("leaderboard")
    if lb:
        out.extend(leaderboard_renderables(lb))
    return out


def audit_table(groups: Sequence[dict[str, Any]], title: str = "Persona"):
    """The message audit (paper §4.3): share of messages (and of talking rounds) with each."""
    t = _table("Message audit (paper §4.3) — share of messages sent with a proposal, availability, cost, "
               "question, refusal (in brackets: share of talking rounds)",
               [(title, "left"), ("Msgs", "right"), ("Free text", "right"), ("Proposal", "right"),
                ("Availability", "right"), ("Cost", "right"), ("Question", "right"), ("Refusal", "right")])

    def cell(r, c):
        return f"{fmt(r[c]['rate'], 'f3')} ({fmt(r[c]['round_rate'], 'f3')})"

    _with_settings(t, groups, lambda r: (
        "  " + r["group"], str(r["messages"]), fmt(r["free_text"] / r["messages"] if r["messages"] else None, "pct"),
        *(cell(r, c) for c in ("proposal", "availability", "cost", "question", "refusal"))), 8)
    return t


def leaderboard_renderables(lb: dict[str, Any]) -> list[Any]:
    from rich.text import Text

    out: list[Any] = []
    m = lb["margins"]
    t = _table(f"Leaderboard — OpenSkill (Plackett–Luce, margins coord. {m['coordination']}, excess {m['excess']}, "
               f"excess VPS {m['vps']}); raw means in parentheses",
               [("#", "right"), ("Name", "left"), ("Games", "right"), ("Rated", "right"), ("Coord. μ±σ", "right"),
                ("Excess μ±σ", "right"), ("Excess VPS μ±σ", "right"), ("MMR", "right")])
    for r in lb["models"]:
        t.add_row(str(r["rank"]), r["name"], str(r["games"]), str(r["rated_games"]),
                  f"{r['coordination_mu']:.2f}±{r['coordination_sigma']:.2f} ({fmt(r['coordination'], 'pct')})",
                  f"{r['excess_mu']:.2f}±{r['excess_sigma']:.2f} ({fmt(r['excess'])})",
                  f"{r['vps_mu']:.2f}±{r['vps_sigma']:.2f} ({fmt(r['excess_vps'])})", f"{r['mmr']:.2f}")
    if lb["models"]:
        out.append(t)
    else:
        out.append(Text("Leaderboard: no rated (non-scripted) seats.", style="dim"))
    if lb["protocols"]:
        t = _table("Reference protocols (not rated; by coordination ↓, excess ↑, excess VPS ↑)",
                   [("#", "right"), ("Protocol", "left"), ("Games", "right"), ("Coord.", "right"),
                    ("Excess (shown)", "right"), ("Excess VPS", "right")])
        for r in lb["protocols"]:
            t.add_row(str(r["rank"]), r["name"], str(r["games"]), fmt(r["coordination"], "pct"), fmt(r["excess"]),
                      fmt(r["excess_vps"]))
        out.append(t)
    return out


# ---------------------------------------------------------------------------------------
# Terminal charts (Rich text; the report screen)
# ---------------------------------------------------------------------------------------
MARKERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_STYLES = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta", "bright_green")


def text_scatter(series: dict[str, list[tuple[float, float]]], *, width: int = 48, height: int = 12,
                 x_label: str = "x", y_label: str = "y", title: str = "", lines: bool = False):
    """A character-grid scatter plot: one marker letter per series, a legend below."""
    from rich.text import Text

    pts = [(x, y) for ps in series.values() for x, y in ps]
    out = Text()
    if title:
        out.append(title + "\n", style="bold")
    if not pts:
        out.append("  (no data)\n", style="dim")
        return out
    xmax = max(max(p[0] for p in pts), 1e-9) * 1.05
    ymax = max(max(p[1] for p in pts), 1e-9) * 1.05
    grid: list[list[tuple[str, str]]] = [[(" ", "")] * width for _ in range(height)]

    def cell(x: float, y: float) -> tuple[int, int]:
        cx = min(width - 1, max(0, int(round(x / xmax * (width - 1)))))
        cy = min(height - 1, max(0, int(round(y / ymax * (height - 1)))))
        return cx, height - 1 - cy

    names = list(series)
    for i, name in enumerate(names):
        style = _STYLES[i % len(_STYLES)]
        if lines:
            fit = ols(series[name])
            if fit is not None:
                lo = min(p[0] for p in series[name])
                hi = max(p[0] for p in series[name])
                for k in range(width):
                    x = xmax * k / (width - 1)
                    if lo <= x <= hi:
                        y = fit[0] * x + fit[1]
                        if 0 <= y <= ymax:
                            cx, cy = cell(x, y)
                            if grid[cy][cx][0] == " ":
                                grid[cy][cx] = ("·", style)
        for x, y in series[name]:
            cx, cy = cell(x, y)
            mark = MARKERS[i % len(MARKERS)]
            prev = grid[cy][cx][0]
            grid[cy][cx] = ("*" if prev not in (" ", "·", mark) else mark, style if prev in (" ", "·", mark) else "bold")
    lab_w = max(len(f"{ymax:.2f}"), 4)
    for row_i, row in enumerate(grid):
        if row_i == 0:
            out.append(f"{ymax:>{lab_w}.2f} ┤", style="dim")
        elif row_i == height - 1:
            out.append(f"{0:>{lab_w}.2f} ┤", style="dim")
        else:
            out.append(" " * lab_w + " │", style="dim")
        for ch, style in row:
            out.append(ch, style=style)
        out.append("\n")
    out.append(" " * lab_w + " └" + "─" * width + "\n", style="dim")
    out.append(" " * (lab_w + 2) + f"0{'':<{max(0, width - len(f'{xmax:.2f}') - 1)}}{xmax:.2f}\n", style="dim")
    out.append(f"  x: {x_label}   y: {y_label}\n", style="dim")
    for i, name in enumerate(names):
        out.append(f"  {MARKERS[i % len(MARKERS)]}", style=_STYLES[i % len(_STYLES)] + " bold")
        out.append(f" {name} ({len(series[name])})")
    out.append("   * = several series\n", style="dim")
    return out


def text_bars(bars: Sequence[tuple[str, float, float | None]], *, width: int = 40, title: str = ""):
    """Horizontal bars ``(label, value, ±half-width)`` scaled to the largest value."""
    from rich.text import Text

    out = Text()
    if title:
        out.append(title + "\n", style="bold")
    if not bars:
        out.append("  (no data)\n", style="dim")
        return out
    top = max(max(b[1] + (b[2] or 0.0) for b in bars), 1e-9)
    lw = max(len(b[0]) for b in bars)
    for i, (label, v, ci) in enumerate(bars):
        n = int(round(v / top * width))
        out.append(f"  {label:<{lw}} ")
        out.append("█" * n, style=_STYLES[i % len(_STYLES)])
        if ci:
            out.append("─" * max(0, int(round((v + ci) / top * width)) - n), style="dim")
        out.append(f" {v:.3f}" + (f" ±{ci:.3f}" if ci else "") + "\n")
    return out


def text_charts(report: dict[str, Any], width: int = 56) -> list[Any]:
    """The three charts of ``--plot``, drawn with characters."""
    out: list[Any] = []
    plane = plane_points(report)
    for mode, pts in plane.items():
        out.append(text_scatter({name: [(x, y)] for name, x, y in pts}, width=width, height=10,
                                x_label="VPS per target", y_label="excess (levels)",
                                title=f"Privacy–cost plane — {mode} cost (closer to the origin is better)"))
    if not plane:
        out.append(text_scatter({}, title="Privacy–cost plane"))
    bars = [(f"{name} · {mode}", v, ci) for name, mode, v, ci in fairness_bars(report)]
    out.append(text_bars(bars, width=max(10, width - 20),
                         title=f"Fairness by {report['group_by'].replace('_', ' ')} (±95% CI)"))
    for mode, series in message_points(report).items():
        out.append(text_scatter(series, width=width, height=10, x_label="messages per meeting",
                                y_label="excess (levels)", lines=True,
                                title=f"Messages against excess — {mode} cost (· per-group OLS, ≥ {MIN_FIT_POINTS} "
                                      "points)"))
    return out
