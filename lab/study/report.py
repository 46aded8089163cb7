"""``calbench report --study PATH``: Table 2 by condition and seat kind, with N and 95%
bootstrap intervals, plus the human-observer VPS.

Rows are (condition, kind) with kind ∈ human / llm / protocol, over the study's
non-practice games of *real* participants (``include_simulated=True`` adds the dry run's).
Each cell is the mean over seat-games with a percentile bootstrap interval (2000
resamples of seat-games, seeded, so the same data give the same intervals).  Columns:
N (seat-games), Coord. (game coordination rate), Success (the seat's meetings scheduled),
Excess (shown units), Fair., VPS (estimated, the seat as target), Obs. VPS (human seats:
stated-belief VPS) and Est. VPS on the same pairs.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from .export import study_rows

__all__ = ["bootstrap_ci", "study_table", "format_table"]

METRICS = (("coordination", "Coord."), ("success", "Success"), ("excess_cost", "Excess"), ("fairness", "Fair."),
           ("vps", "VPS"), ("observer_vps", "Obs. VPS"), ("estimator_vps_same_pairs", "Est. VPS"))
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


async def study_table(study, store, *, include_simulated: bool = False, reps: int = 2000) -> dict[str, Any]:
    rows = (await study_rows(study, store))["games.csv"]
    rows = [r for r in rows if not r["practice"] and r["status"] == "completed"
            and (include_simulated or not r["simulated"])]
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
            "games": len({r["game_id"] for r in rows})}


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
    out.append("Obs. VPS: the participant's stated beliefs (belief grid) scored with SPEC §8's loss; "
               "Est. VPS: the estimator on the same (round, target) pairs.")
    return "\n".join(out)
