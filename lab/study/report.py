"""``calbench report --study PATH``: Table 2 by condition and seat kind, with N and 95%
bootstrap intervals, plus the human-observer VPS.

Rows are (condition, kind) with kind ∈ human / llm / protocol, over the study's
non-practice games of *real* participants (``include_simulated=True`` adds the dry run's).
Each cell is the mean over seat-games with a percentile bootstrap interval (2000
resamples of seat-games, seeded, so the same data give the same intervals).  Columns:
N (seat-games), Coord. (game coordination rate), Success (the seat's meetings scheduled),
Excess (shown units), Fair., VPS (estimated, the seat as target), Obs. VPS (human seats:
stated-belief VPS) and Est. VPS on the same pairs, Obs. Brier (the stated beliefs' Brier
score against the truth: the headline for what the observer learned) and Est. Brier on the
same cells.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from .export import study_rows

__all__ = ["bootstrap_ci", "study_table", "format_table", "StudyReportError"]

METRICS = (("coordination", "Coord."), ("success", "Success"), ("excess_cost", "Excess"), ("fairness", "Fair."),
           ("vps", "VPS"), ("observer_vps", "Obs. VPS"), ("estimator_vps_same_pairs", "Est. VPS"),
           ("observer_brier", "Obs. Brier"), ("estimator_brier_same_cells", "Est. Brier"))
KINDS = ("human", "llm", "protocol")


def bootstrap_ci(xs: Sequence[float], *, reps: int = 2000, seed: int = 0, level: float = 0.95
                 ) -> tuple[float | None, float | None, float | None]:
    """(mean, low, high): percentile bootstrap of the mean; (None, None, None) with no data."""
    xs = [float(x) for x in xs]
    if not xs:
        return None, None, None
    m = sum(xs) / len(xs)
    if len(xs) == 1:
        return m, m, m
    rng = random.Random(seed)
    n = len(xs)
    means = sorted(sum(xs[rng.randrange(n)] for _ in range(n)) / n for _ in range(reps))
    lo = means[int((1 - level) / 2 * reps)]
    hi = means[min(reps - 1, int((1 + level) / 2 * reps))]
    return m, lo, hi


def _num(v: Any) -> float | None:
    if v in (None, ""):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class StudyReportError(ValueError):
    """The report cannot be made as asked; the message is one line saying what to do."""


async def study_table(study, store, *, include_simulated: bool = False, reps: int = 2000) -> dict[str, Any]:
    """Raises :class:`StudyReportError` when games were played under a condition the file no
    longer names (a rename without ``renamed_from``): the report never drops games silently."""
    everything = await study_rows(study, store)
    rows = everything["games.csv"]
    rows = [r for r in rows if not r["practice"] and r["status"] == "completed"
            and (include_simulated or not r["simulated"])]
    names = {c.name for c in study.conditions}
    lost: dict[str, set[str]] = {}
    for r in rows:
        if r["condition"] not in names:
            lost.setdefault(r["condition"], set()).add(r["game_id"])
    if lost:
        name, games = sorted(lost.items())[0]
        more = f" (and {len(lost) - 1} more such condition(s))" if len(lost) > 1 else ""
        raise StudyReportError(
            f"{len(games)} completed game(s) were played under condition {name!r}, which the study file no longer "
            f"names{more}; if it was renamed, add renamed_from = [\"{name}\"] to that condition (its games then "
            "count under the new name), or put the old name back")
    out = []
    for cond in [c.name for c in study.conditions]:
        for kind in KINDS:
            sel = [r for r in rows if r["condition"] == cond and r["kind"] == kind]
            if not sel:
                continue
            row: dict[str, Any] = {"condition": cond, "kind": kind, "n": len(sel),
                                   "participants": len({r["participant"] for r in sel})}
            for i, (key, _) in enumerate(METRICS):
                xs = [x for r in sel if (x := _num(r[key])) is not None]
                m, lo, hi = bootstrap_ci(xs, reps=reps, seed=study.study.seed + i)
                row[key] = {"mean": m, "low": lo, "high": hi, "n": len(xs)}
            out.append(row)
    return {"study": study.name, "include_simulated": include_simulated, "rows": out,
            "games": len({r["game_id"] for r in rows}), "renamed": everything.get("_renamed") or {}}


def _cell(c: dict[str, Any]) -> str:
    if c["mean"] is None:
        return "—"
    return f"{c['mean']:.2f} [{c['low']:.2f}, {c['high']:.2f}]"


def format_table(t: dict[str, Any]) -> str:
    head = ["Condition", "Kind", "N"] + [label for _, label in METRICS]
    body = [[r["condition"], r["kind"], str(r["n"])] + [_cell(r[k]) for k, _ in METRICS] for r in t["rows"]]
    widths = [max(len(x) for x in col) for col in zip(head, *body)] if body else [len(h) for h in head]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    out = [f"Study {t['study']}: Table 2 by condition and seat kind (mean [95% bootstrap CI]), "
           f"{t['games']} games{' incl. simulated' if t['include_simulated'] else ''}",
           line(head), line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    if not body:
        out.append("(no completed games yet" + ("" if t["include_simulated"] else
                                                 "; --include-simulated shows the dry run's") + ")")
    for old_name, r in sorted((t.get("renamed") or {}).items()):
        out.append(f"Condition {old_name!r} is now {r['to']!r} (renamed_from): its games count under {r['to']!r}.")
    out.append("Obs. VPS: the participant's stated beliefs (belief grid) scored with SPEC §8's loss; "
               "Est. VPS: the estimator on the same (round, target) pairs. Obs. Brier (the headline for what the "
               "observer learned): the stated beliefs' Brier score against the truth (0 = right on every cell, "
               "0.25 = no idea, more = confidently wrong); Est. Brier: the estimator on the same cells.")
    return "\n".join(out)


#: The panels of ``report --study --plot``: one per measure, bars by condition, one colour per seat kind.
PLOT_METRICS = (("coordination", "Coordination rate"), ("excess_cost", "Excess cost (shown units)"),
                ("vps", "VPS (estimated, seat as target)"), ("observer_vps", "Observer VPS (belief grid)"),
                ("observer_brier", "Observer Brier (belief grid; 0.25 = no idea)"))
#: Panels whose measure lies in 0..1 (a rate, a Brier score): their axis is fixed at 0-1, so
#: panels and reports compare at a glance (matplotlib would zoom in on the bars).
UNIT_AXIS = ("coordination", "success", "observer_brier")


def write_study_plot(t: dict[str, Any], path: str) -> str:
    """One PNG: a panel per measure (:data:`PLOT_METRICS`), a bar per (condition, seat kind)
    at its mean with the 95% bootstrap interval as the error bar and N under it.  Returns
    the file written.  A table with no rows still gets a figure that says so."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rows = t["rows"]
    conds = list(dict.fromkeys(r["condition"] for r in rows))
    kinds = [k for k in KINDS if any(r["kind"] == k for r in rows)]
    fig, axes = plt.subplots(1, len(PLOT_METRICS), figsize=(4.2 * len(PLOT_METRICS), 4.2), squeeze=False)
    cmap = plt.get_cmap("tab10")
    width = 0.8 / max(1, len(kinds))
    for ax, (key, label) in zip(axes[0], PLOT_METRICS):
        drawn = False
        for j, kind in enumerate(kinds):
            xs, ms, lo, hi, ns = [], [], [], [], []
            for i, cond in enumerate(conds):
                r = next((r for r in rows if r["condition"] == cond and r["kind"] == kind), None)
                c = r[key] if r else None
                if not c or c["mean"] is None:
                    continue
                xs.append(i + (j - (len(kinds) - 1) / 2) * width)
                ms.append(c["mean"])
                lo.append(c["mean"] - c["low"])
                hi.append(c["high"] - c["mean"])
                ns.append(c["n"])
            if not xs:
                continue
            drawn = True
            ax.bar(xs, ms, width=width, yerr=[lo, hi], capsize=3, color=cmap(KINDS.index(kind)), label=kind,
                   edgecolor="black", linewidth=0.5)
            for x, n in zip(xs, ns):
                ax.annotate(f"N={n}", (x, 0), textcoords="offset points", xytext=(0, -22), ha="center", fontsize=7)
        if key in UNIT_AXIS:
            ax.set_ylim(0, 1)
        ax.set_xticks(range(len(conds)))
        ax.set_xticklabels(conds, fontsize=8)
        ax.set_title(label if drawn else f"{label}: no data", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        if drawn:
            ax.legend(fontsize=7, title="seat kind", title_fontsize=7)
    sim = " incl. simulated" if t.get("include_simulated") else ""
    fig.suptitle(f"Study {t['study']}: mean and 95% bootstrap CI by condition and seat kind, "
                 f"{t['games']} games{sim}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
