"""Reports over saved games — statistics: per-seat records, trace facts, first speaker, leaderboard.

The report is split in three (:mod:`lab.report.stats` here, tables and CSV in
:mod:`lab.report.tables`, figures in :mod:`lab.report.plots`); rendering it for a
terminal is the interface's (``calbench_tui/report_view.py``).

Pure functions (no Textual); the heavy imports (openskill, matplotlib, the oracle) happen
inside the functions that need them.  ``calbench report`` (``commands/report.py``) and the
report screen (``screens/report.py``) both call :func:`build_report` and render its
result; docs/reports.md explains every number.

Input: the rows of ``saves.store.Store.game_results`` — one per (game, seat) — and,
optionally, the games' traces (needed for the first-speaker effect and for the VPS of
imported traces that carry no per-seat metrics).  :func:`seat_records` turns the rows
into plain per-seat records; every table is computed from those.

* **Table 1** (paper Table 1), one row per (cost setting, group), where the group is the
  seat's persona, model or only the cost setting: ``seats`` (N), ``meetings`` (mean
  scheduled meetings per seat-game), ``coordination`` (mean success S_i, 0–1),
  ``excess`` (mean max(0, c_real − c_oracle) in levels), ``messages_per_meeting``
  (pooled: Σ messages sent / Σ scheduled participant-meetings), ``fairness`` (mean
  |e_i − mean_j e_j|, levels) and ``vps`` (mean per-target VPS of those seats).
* **Table 2** (paper Table 2), one row per (cost setting, protocol) over the games in
  which every seat has the same persona: coordination is the mean share of the game's
  meetings scheduled, VPS the mean game VPS (sum over targets); the rest as Table 1.
* **Regret** (paper G.1): among seats that scheduled every assigned meeting, the share
  with any excess and the mean excess per scheduled meeting.
* **First speaker** (paper G.2): per participating agent-meeting, whether the seat spoke
  first; the round's VPS about that seat and its excess cost for that meeting; paired
  first-minus-subsequent differences per agent-game with a 95% interval.
* **Leaderboard** (SPEC §11, paper App. E): OpenSkill Plackett–Luce ratings per metric
  with score margins, μ ± σ and an MMR; scripted protocols listed apart.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable, Sequence

from engine.trace import task_for_trace  # the one trace reader; re-exported for the report
from lab.summary import mode_rank
from personas.spec import SCRIPTED_NAMES, canonical_name

GROUP_BY = ("persona", "model", "cost_mode")
SCRIPTED = SCRIPTED_NAMES  # follows the protocols' registry
#: OpenSkill score margins (SPEC §11): coordination ratio, excess cost (shown units), excess VPS.
MARGINS = {"coordination": 0.2, "excess": 10.0, "vps": 5.0}
METRICS = ("coordination", "excess", "vps")
#: The fixed per-game-target communication floor subtracted for "excess VPS" (paper F.3/F.5).
VPS_FLOOR = 5.0
Z95 = 1.96


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------
def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _ci95(xs: Sequence[float]) -> float | None:
    """Half-width of a normal-approximation 95% interval of the mean (None below 2 values)."""
    n = len(xs)
    if n < 2:
        return None
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return Z95 * math.sqrt(var / n)




def canonical_persona(name: Any) -> str:
    """A seat's persona name with aliases resolved (``paper_dsm`` → ``dsm-welfare``)."""
    if not isinstance(name, str) or not name.strip():
        return "?"
    return canonical_name(name)


def is_scripted(persona: str) -> bool:
    # "dsm-private@paper": a scripted protocol played with --fidelity paper
    return persona in SCRIPTED or persona.split("@", 1)[0] in SCRIPTED


def game_order_key(started_at: Any, game_id: Any) -> tuple[str, str]:
    """The fixed order games are processed in: started_at, then game id."""
    return (str(started_at or ""), str(game_id or ""))


# ---------------------------------------------------------------------------------------
# Per-seat records
# ---------------------------------------------------------------------------------------
_SEAT_KEYS = ("meetings_assigned", "meetings_scheduled", "success", "excess", "excess_shown", "signed_excess",
              "signed_excess_shown", "fairness", "messages_sent", "messages_per_meeting", "vps", "cost", "cost_shown",
              "oracle_cost", "oracle_cost_shown", "adjusted_cost")


def seat_records(rows: Iterable[dict[str, Any]], facts: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Plain per-seat records from ``Store.game_results`` rows (sorted by game order, seat).

    Fallbacks for imported traces that lack our per-seat metrics (the authors' carry
    costs in shown units only and no VPS): ``facts`` (game id -> :func:`trace_facts`)
    supplies the cost and oracle share in levels and the per-target VPS; without them,
    a uniform game's level figures equal its shown ones.  Fairness is recomputed from
    the signed excess of the game's seats where missing.
    """
    recs: list[dict[str, Any]] = []
    for r in rows:
        seat = r.get("seat") if isinstance(r.get("seat"), dict) else {}
        rec: dict[str, Any] = {
            "game_id": r.get("game_id"),
            "task_id": r.get("task_id"),
            "agent_id": r.get("agent_id"),
            "started_at": r.get("started_at"),
            "cost_mode": r.get("cost_mode") or "unknown",
            "source": r.get("source"),
            "game_coordination": _num(r.get("coordination")),
        }
        persona = canonical_persona(r.get("persona") or seat.get("persona"))
        rec["persona"] = persona
        model = r.get("model") or seat.get("model")
        rec["model"] = str(model) if model else persona
        rec["scripted"] = is_scripted(persona)
        for k in _SEAT_KEYS:
            v = r.get(k)
            if v is None:
                v = seat.get(k)
            rec[k] = _num(v)
        f = (facts or {}).get(str(rec["game_id"]))
        a = rec["agent_id"]
        in_game = f is not None and isinstance(a, int) and 0 <= a < len(f["vps"])
        if rec["excess"] is None and in_game and f["oracle_levels"] is not None:
            signed = f["cost_levels"][a] - f["oracle_levels"][a]
            rec["cost"], rec["oracle_cost"] = float(f["cost_levels"][a]), float(f["oracle_levels"][a])
            rec["signed_excess"], rec["excess"] = float(signed), float(max(0, signed))
        if rec["vps"] is None and in_game:
            rec["vps"] = _num(f["vps"][a])
        if rec["cost_mode"] == "uniform":
            for lvl, shown in (("excess", "excess_shown"), ("signed_excess", "signed_excess_shown")):
                if rec[lvl] is None and rec[shown] is not None:
                    rec[lvl] = rec[shown]
        if rec["success"] is None and rec["meetings_assigned"]:
            if rec["meetings_scheduled"] is not None:
                rec["success"] = rec["meetings_scheduled"] / rec["meetings_assigned"]
        if rec["messages_per_meeting"] is None and rec["messages_sent"] is not None:
            rec["messages_per_meeting"] = rec["messages_sent"] / max(rec["meetings_scheduled"] or 0, 1)
        recs.append(rec)
    # Fairness from the game's signed excess where the row has none.
    by_game: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for rec in recs:
        by_game[rec["game_id"]].append(rec)
    for seats in by_game.values():
        if all(s["fairness"] is not None for s in seats):
            continue
        signed = [s["signed_excess"] for s in seats]
        if any(x is None for x in signed):
            continue
        m = sum(signed) / len(signed)
        for s in seats:
            if s["fairness"] is None:
                s["fairness"] = abs(s["signed_excess"] - m)
    recs.sort(key=lambda s: (game_order_key(s["started_at"], s["game_id"]), s["agent_id"] if isinstance(s["agent_id"], int) else -1))
    return recs


def group_of(rec: dict[str, Any], group_by: str) -> str:
    if group_by == "model":
        return rec["model"]
    if group_by == "cost_mode":
        return rec["cost_mode"]
    return rec["persona"]


def homogeneous_games(records: Sequence[dict[str, Any]]) -> dict[Any, str]:
    """game id -> persona, for games in which every seat has the same persona."""
    personas: dict[Any, set[str]] = defaultdict(set)
    for r in records:
        personas[r["game_id"]].add(r["persona"])
    return {g: next(iter(p)) for g, p in personas.items() if len(p) == 1}


# ---------------------------------------------------------------------------------------
# First-speaker effect (paper G.2)
# ---------------------------------------------------------------------------------------
def trace_facts(trace: dict[str, Any], task=None) -> dict[str, Any] | None:
    """What a report needs from one trace, computed by folding it (no persona is called).

    ``rows``: one per participating (agent, meeting) — ``first`` (the agent spoke first
    in the meeting's speaker order), ``vps`` (the round's VPS about that agent: sum over
    observers and slots of |Bel − p0| at the end of the round, the uniform estimator of
    engine.privacy) and ``excess`` (for a meeting scheduled at the end of the game:
    max(0, levels the agent's batches of that round cost − the level of the item at the
    scheduled-only oracle's slot for that meeting on the agent's initial calendar); None
    when the meeting was not scheduled).  ``cost_levels`` / ``oracle_levels``: per agent,
    the levels its applied batches cost and its share of the scheduled-only oracle.
    ``vps``: per-target VPS of the game.  None when the trace cannot be folded.
    """
    from engine.model import Errand
    from engine.privacy import vps_sums
    from engine.trace import played_levels

    task = task or task_for_trace(trace)
    if task is None:
        return None
    events = [e for e in trace.get("events") or [] if isinstance(e, dict)]
    levels = played_levels(trace, task)  # the one fold (engine.fold), in cost levels
    if levels is None:
        return None
    fold = levels.fold
    n = task.num_agents
    # the rounds played: their meetings as the round_start events gave them
    rounds = {r: fold.meetings[r] for r in fold.round_starts if r in fold.meetings}
    if not rounds:
        rounds = {r: m.to_json() for r, m in enumerate(task.meetings)}
    # VPS per (round, target): the engine's one reduction of the belief updates.
    vps_rt, per_target = vps_sums(task, events)
    real, cost_levels, scheduled = levels.by_round, levels.cost_levels, levels.scheduled
    oracle = levels.oracle.assignments if levels.oracle is not None and levels.oracle.feasible else None
    oracle_levels = levels.oracle_levels
    rows = []
    for r in sorted(rounds):
        m = rounds[r]
        mid = m.get("id")
        parts = [p for p in m.get("participants") or [] if isinstance(p, int)]
        order = m.get("speaker_order") or sorted(parts)
        first = order[0] if order else None
        for a in parts:
            excess = None
            if oracle is not None and mid in scheduled and mid in oracle and 0 <= a < n:
                it = task.calendars[a][oracle[mid]]
                o = task.level(it.cost) if isinstance(it, Errand) else 0
                excess = max(0, real.get((r, a), 0) - o)
            rows.append({"game_id": trace.get("game_id"), "round": r, "meeting_id": mid, "agent_id": a,
                         "first": a == first, "vps": vps_rt.get((r, a), 0.0), "excess": excess})
    return {"rows": rows, "cost_levels": cost_levels, "oracle_levels": oracle_levels, "vps": per_target}


def agent_meeting_rows(trace: dict[str, Any], task=None) -> list[dict[str, Any]]:
    """The per (agent, meeting) rows of :func:`trace_facts` (empty when it cannot fold)."""
    facts = trace_facts(trace, task)
    return facts["rows"] if facts else []


def _paired(rows: Sequence[dict[str, Any]], key: str) -> tuple[float | None, float | None, int]:
    """Mean first-minus-subsequent difference per agent-game, its 95% half-width, pairs."""
    by: dict[tuple[Any, Any], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for r in rows:
        if r[key] is None:
            continue
        by[(r["game_id"], r["agent_id"])][0 if r["first"] else 1].append(r[key])
    diffs = [sum(f) / len(f) - sum(s) / len(s) for f, s in by.values() if f and s]
    return (sum(diffs) / len(diffs) if diffs else None), _ci95(diffs), len(diffs)


def first_speaker(am_rows: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]],
                  group_by: str = "persona") -> list[dict[str, Any]]:
    """Paper G.2 per (cost setting, group), plus an ``(all)`` row per cost setting."""
    info = {(r["game_id"], r["agent_id"]): r for r in records}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in am_rows:
        rec = info.get((row["game_id"], row["agent_id"]))
        if rec is None:
            continue
        groups[(rec["cost_mode"], group_of(rec, group_by))].append(row)
        if group_by != "cost_mode":
            groups[(rec["cost_mode"], "(all)")].append(row)
    out = []
    for (mode, name), rows in sorted(groups.items(), key=lambda kv: (mode_rank(kv[0][0]), kv[0][1] == "(all)", kv[0][1])):
        first = [r for r in rows if r["first"]]
        rest = [r for r in rows if not r["first"]]
        dv, dv_ci, n_v = _paired(rows, "vps")
        dc, dc_ci, n_c = _paired(rows, "excess")
        out.append({
            group_by: name, "group": name, "cost_mode": mode,
            "agent_meetings": len(rows), "first_n": len(first), "subsequent_n": len(rest),
            "first_vps": _mean(r["vps"] for r in first), "subsequent_vps": _mean(r["vps"] for r in rest),
            "delta_vps": dv, "delta_vps_ci95": dv_ci, "vps_pairs": n_v,
            "first_excess": _mean(r["excess"] for r in first), "subsequent_excess": _mean(r["excess"] for r in rest),
            "delta_excess": dc, "delta_excess_ci95": dc_ci, "excess_pairs": n_c,
        })
    return out


# ---------------------------------------------------------------------------------------
# Leaderboard (SPEC §11, paper App. E)
# ---------------------------------------------------------------------------------------
def excess_vps(vps: float | None) -> float | None:
    return None if vps is None else max(0.0, vps - VPS_FLOOR)


def _raw_scores(seats: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Per-seat-group OpenSkill scores, higher is better: coordination, −excess, −excess VPS."""
    excess = _mean(s["excess_shown"] for s in seats)
    vps = _mean(excess_vps(s["vps"]) for s in seats)
    return {
        "coordination": _mean(s["success"] for s in seats),
        "excess": None if excess is None else -excess,
        "vps": None if vps is None else -vps,
    }


def leaderboard(records: Sequence[dict[str, Any]], group_by: str = "persona") -> dict[str, Any]:
    """OpenSkill ratings of the non-scripted seats, and the scripted protocols ranked apart.

    Games are processed in a fixed order (started_at, then game id).  In each game the
    non-scripted seats are grouped by identity (persona, or model with
    ``group_by="model"``); each identity is one team whose score per metric is the mean
    over its seats in that game.  A game with fewer than two identities rates nothing.
    Per metric, a Plackett–Luce model with that metric's score margin is updated from
    the scores.  MMR = mean over the three metrics of the ordinal μ − 3σ.
    """
    from openskill.models import PlackettLuce

    ident = "model" if group_by == "model" else "persona"
    models = {m: PlackettLuce(margin=MARGINS[m]) for m in METRICS}
    ratings: dict[str, dict[str, Any]] = {}
    rated_games: dict[str, int] = defaultdict(int)
    by_game: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    order: list[tuple[tuple[str, str], Any]] = []
    for r in records:
        if r["game_id"] not in by_game:
            order.append((game_order_key(r["started_at"], r["game_id"]), r["game_id"]))
        by_game[r["game_id"]].append(r)
    for name in sorted({r[ident] for r in records if not r["scripted"]}):
        ratings[name] = {m: models[m].rating(name=name) for m in METRICS}
    for _key, gid in sorted(order, key=lambda x: x[0]):
        teams: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in by_game[gid]:
            if not s["scripted"]:
                teams[s[ident]].append(s)
        if len(teams) < 2:
            continue
        names = sorted(teams)
        scores = {n: _raw_scores(teams[n]) for n in names}
        used = False
        for m in METRICS:
            present = [n for n in names if scores[n][m] is not None]
            if len(present) < 2:
                continue
            new = models[m].rate([[ratings[n][m]] for n in present], scores=[scores[n][m] for n in present])
            for n, team in zip(present, new):
                ratings[n][m] = team[0]
            used = True
        if used:
            for n in names:
                rated_games[n] += 1

    def raw(seats: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {
            "games": len({s["game_id"] for s in seats}),
            "seats": len(seats),
            "coordination": _mean(s["success"] for s in seats),
            "excess": _mean(s["excess_shown"] for s in seats),
            "excess_vps": _mean(excess_vps(s["vps"]) for s in seats),
        }

    seats_of: dict[tuple[bool, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        seats_of[(r["scripted"], r[ident] if not r["scripted"] else r["persona"])].append(r)
    rows = []
    for name, rs in ratings.items():
        row = {"name": name, **raw(seats_of[(False, name)]), "rated_games": rated_games.get(name, 0)}
        ords = []
        for m in METRICS:
            mu, sigma = float(rs[m].mu), float(rs[m].sigma)
            row[f"{m}_mu"] = mu
            row[f"{m}_sigma"] = sigma
            ords.append(mu - 3 * sigma)
        row["mmr"] = sum(ords) / len(ords)
        rows.append(row)
    rows.sort(key=lambda r: (-round(r["mmr"], 9), r["name"]))
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    protocols = []
    for (scripted, name), rs in seats_of.items():
        if scripted:
            protocols.append({"name": name, **raw(rs)})

    def pkey(r):
        c = r["coordination"] if r["coordination"] is not None else -1.0
        e = r["excess"] if r["excess"] is not None else math.inf
        v = r["excess_vps"] if r["excess_vps"] is not None else math.inf
        return (-c, e, v, r["name"])

    protocols.sort(key=pkey)
    for i, r in enumerate(protocols, 1):
        r["rank"] = i
    return {"identity": ident, "margins": dict(MARGINS), "vps_floor": VPS_FLOOR, "models": rows,
            "protocols": protocols}
