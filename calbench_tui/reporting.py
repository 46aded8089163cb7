"""Reports over saved games: the paper's tables, regret, first-speaker effect, leaderboard, plots.

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

import csv
import io
import math
from collections import defaultdict
from typing import Any, Iterable, Sequence

GROUP_BY = ("persona", "model", "cost_mode")
SCRIPTED = frozenset({"imap", "sdmap", "dsm-welfare", "dsm-private", "passive"})
#: OpenSkill score margins (SPEC §11): coordination ratio, excess cost (shown units), excess VPS.
MARGINS = {"coordination": 0.2, "excess": 10.0, "vps": 5.0}
METRICS = ("coordination", "excess", "vps")
#: The fixed per-game-target communication floor subtracted for "excess VPS" (paper F.3/F.5).
VPS_FLOOR = 5.0
P0 = 0.5
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


def mode_rank(mode: str | None) -> tuple[int, str]:
    return ({"uniform": 0, "varied": 1}.get(mode or "", 2), mode or "")


def canonical_persona(name: Any) -> str:
    """A seat's persona name with aliases resolved (``paper_dsm`` → ``dsm-welfare``)."""
    if not isinstance(name, str) or not name.strip():
        return "?"
    try:
        from personas.registry import canonical_name
    except ImportError:  # pragma: no cover - personas is part of the project
        return name.strip().lower()
    return canonical_name(name)


def is_scripted(persona: str) -> bool:
    return persona in SCRIPTED


def game_order_key(started_at: Any, game_id: Any) -> tuple[str, str]:
    """The fixed order games are processed in: started_at, then game id."""
    return (str(started_at or ""), str(game_id or ""))


# ---------------------------------------------------------------------------------------
# Tasks for traces (ours carry a task row; the authors' are rebuilt from their events)
# ---------------------------------------------------------------------------------------
def task_for_trace(trace: dict[str, Any]):
    """The trace's :class:`engine.model.Task`, or None when it cannot be rebuilt.

    Our traces carry the full row under ``task``.  The authors' traces carry none: the
    initial calendars come from the ``agent_registered`` events (JSON calendar, else the
    calendar render) and the meetings from ``round_start``.
    """
    from engine.model import Task, TaskError, calendar_to_json, item_from_json
    from engine.render import parse_calendar_render

    row = trace.get("task") if isinstance(trace, dict) else None
    if isinstance(row, dict):
        try:
            return Task.from_row(row)
        except TaskError:
            return None
    events = [e for e in (trace.get("events") or []) if isinstance(e, dict)] if isinstance(trace, dict) else []
    cals: dict[int, list] = {}
    meetings: dict[int, dict] = {}
    try:
        for ev in events:
            d = ev.get("data") or {}
            if ev.get("type") == "agent_registered" and isinstance(d.get("agent_id"), int):
                if isinstance(d.get("calendar"), list):
                    cal = [item_from_json(it) for it in d["calendar"]]
                elif isinstance(d.get("calendar_render"), str):
                    cal = list(parse_calendar_render(d["calendar_render"]))
                else:
                    continue
                cals[d["agent_id"]] = calendar_to_json(tuple(cal))
            elif ev.get("type") == "round_start" and isinstance(d.get("meeting"), dict) and isinstance(d.get("round"), int):
                meetings[d["round"]] = d["meeting"]
        if not cals or sorted(cals) != list(range(len(cals))):
            return None
        tid = (trace.get("config") or {}).get("task_id") or trace.get("game_id")
        return Task.from_row({"task_id": str(tid), "calendars": [cals[a] for a in range(len(cals))],
                              "meetings": [meetings[r] for r in sorted(meetings)]})
    except (TaskError, ValueError, KeyError, TypeError):
        return None


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
# Tables
# ---------------------------------------------------------------------------------------
def _pooled_messages(seats: Sequence[dict[str, Any]]) -> float | None:
    msgs = [s["messages_sent"] for s in seats if s["messages_sent"] is not None]
    if not msgs:
        return None
    sched = sum(s["meetings_scheduled"] or 0 for s in seats if s["messages_sent"] is not None)
    return sum(msgs) / max(sched, 1)


def table1(records: Sequence[dict[str, Any]], group_by: str = "persona") -> list[dict[str, Any]]:
    """Paper Table 1: one row per (cost setting, group); see the module docstring."""
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}")
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["cost_mode"], group_of(r, group_by))].append(r)
    out = []
    for (mode, name), seats in sorted(groups.items(), key=lambda kv: (mode_rank(kv[0][0]), kv[0][1])):
        row = {
            group_by: name,
            "group": name,
            "cost_mode": mode,
            "seats": len(seats),
            "games": len({s["game_id"] for s in seats}),
            "meetings": _mean(s["meetings_scheduled"] for s in seats),
            "coordination": _mean(s["success"] for s in seats),
            "excess": _mean(s["excess"] for s in seats),
            "excess_shown": _mean(s["excess_shown"] for s in seats),
            "messages_per_meeting": _pooled_messages(seats),
            "fairness": _mean(s["fairness"] for s in seats),
            "vps": _mean(s["vps"] for s in seats),
            "scripted": all(s["scripted"] for s in seats),
        }
        out.append(row)
    return out


def table2(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Paper Table 2: per protocol (games where every seat has one persona) and cost setting."""
    homo = homogeneous_games(records)
    games: dict[tuple[str, str], dict[Any, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r["game_id"] in homo:
            games[(r["cost_mode"], homo[r["game_id"]])][r["game_id"]].append(r)
    out = []
    for (mode, persona), by_game in sorted(games.items(), key=lambda kv: (mode_rank(kv[0][0]), kv[0][1])):
        seats = [s for ss in by_game.values() for s in ss]
        coord = []
        for ss in by_game.values():
            c = ss[0]["game_coordination"]
            if c is None:
                c = _mean(s["success"] for s in ss)
            coord.append(c)
        game_vps = [sum(s["vps"] for s in ss) if all(s["vps"] is not None for s in ss) else None
                    for ss in by_game.values()]
        out.append({
            "persona": persona,
            "cost_mode": mode,
            "games": len(by_game),
            "seats": len(seats),
            "coordination": _mean(coord),
            "excess": _mean(s["excess"] for s in seats),
            "excess_shown": _mean(s["excess_shown"] for s in seats),
            "messages_per_meeting": _pooled_messages(seats),
            "fairness": _mean(s["fairness"] for s in seats),
            "vps": _mean(game_vps),
        })
    return out


def regret(records: Sequence[dict[str, Any]], group_by: str = "persona") -> list[dict[str, Any]]:
    """Completion-conditioned regret (paper G.1): seats that scheduled all their meetings."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["cost_mode"], group_of(r, group_by))].append(r)
    out = []
    for (mode, name), seats in sorted(groups.items(), key=lambda kv: (mode_rank(kv[0][0]), kv[0][1])):
        full = [s for s in seats if s["meetings_assigned"] and s["meetings_scheduled"] == s["meetings_assigned"]]
        with_excess = [s for s in full if s["excess"] is not None]
        out.append({
            group_by: name,
            "group": name,
            "cost_mode": mode,
            "seats": len(seats),
            "full_completion": len(full),
            "full_completion_share": len(full) / len(seats) if seats else None,
            "nonzero_regret_share": (sum(1 for s in with_excess if s["excess"] > 0) / len(with_excess)
                                     if with_excess else None),
            "excess_per_meeting": _mean(s["excess"] / s["meetings_scheduled"] for s in with_excess),
        })
    return out


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
    from engine.model import Errand, MeetingCopy
    from engine.privacy import belief_updates
    from engine.replay import TraceError, fold_trace
    from engine.state import is_scheduled

    task = task or task_for_trace(trace)
    if task is None:
        return None
    events = [e for e in trace.get("events") or [] if isinstance(e, dict)]
    try:
        fold = fold_trace(trace)
    except TraceError:
        return None
    n = task.num_agents
    rounds: dict[int, dict[str, Any]] = {}
    for ev in events:
        d = ev.get("data") or {}
        if ev.get("type") == "round_start" and isinstance(d.get("round"), int) and isinstance(d.get("meeting"), dict):
            rounds[d["round"]] = d["meeting"]
    if not rounds:
        rounds = {r: m.to_json() for r, m in enumerate(task.meetings)}
    # VPS per (round, target): the last belief per (round, target, observer, slot).
    last: dict[tuple[int, int, int, int], float] = {}
    for u in belief_updates(task, events):
        last[(u["round"], u["target"], u["observer"], u["slot"])] = u["after"]
    vps_rt: dict[tuple[int, int], float] = defaultdict(float)
    per_target = [0.0] * n
    for (r, t, _o, _s), b in last.items():
        vps_rt[(r, t)] += abs(b - P0)
        if 0 <= t < n:
            per_target[t] += abs(b - P0)
    # Levels each agent's applied batches cost, per round.
    real: dict[tuple[int, int], int] = defaultdict(int)
    for i, ev in enumerate(events):
        if ev.get("type") != "batch_applied":
            continue
        d = ev.get("data") or {}
        a, r = d.get("agent_id"), d.get("round")
        seq = ev.get("seq", i)
        if not isinstance(a, int) or not isinstance(r, int) or not isinstance(seq, int) or not 0 <= a < n:
            continue
        before = fold.calendars_at(seq - 1)[a]
        for act in d.get("actions") or []:
            if not isinstance(act, dict) or act.get("type") != "reschedule":
                continue
            s = act.get("from_slot")
            item = before[s] if isinstance(s, int) and 0 <= s < len(before) else None
            if isinstance(item, Errand):
                real[(r, a)] += task.level(item.cost)
            elif isinstance(item, MeetingCopy):
                real[(r, a)] += item.cost
    cost_levels = [0] * n
    for (_r, a), c in real.items():
        cost_levels[a] += c
    final = fold.final_calendars
    scheduled = [m.id for m in task.meetings if is_scheduled(final, m.participants, m.id)]
    oracle = None
    oracle_levels: list[int] | None = [0] * n
    if scheduled:
        from engine.metrics import oracle_cached

        res = oracle_cached(task, tuple(scheduled))
        oracle = res.assignments if res.feasible else None
        oracle_levels = list(res.agent_costs_levels) if res.feasible else None
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


# ---------------------------------------------------------------------------------------
# The whole report
# ---------------------------------------------------------------------------------------
def build_report(rows: Sequence[dict[str, Any]], traces: Sequence[dict[str, Any]] | None = None, *,
                 group_by: str = "persona", with_leaderboard: bool = False) -> dict[str, Any]:
    """Everything ``calbench report`` prints, as one JSON-able dict.

    ``traces`` (optional) are folded for the first-speaker effect and to fill what
    imported traces lack; without them ``first_speaker`` is None.  Keys starting with
    ``_`` (the per-seat records, for charts) are not part of the printed JSON.
    """
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}")
    facts: dict[str, dict[str, Any]] = {}
    am_rows: list[dict[str, Any]] = []
    for tr in sorted(traces or [], key=lambda t: game_order_key(t.get("started_at"), t.get("game_id"))):
        f = trace_facts(tr)
        if f is None:
            continue
        facts[str(tr.get("game_id"))] = f
        am_rows.extend(f["rows"])
    records = seat_records(rows, facts)
    report: dict[str, Any] = {
        "group_by": group_by,
        "games": len({r["game_id"] for r in records}),
        "seats": len(records),
        "table": table1(records, group_by),
        "protocols": table2(records),
        "regret": regret(records, group_by),
        "first_speaker": first_speaker(am_rows, records, group_by) if traces is not None else None,
        "_records": records,
    }
    if with_leaderboard:
        report["leaderboard"] = leaderboard(records, group_by)
    return report


def public(report: dict[str, Any]) -> dict[str, Any]:
    """The report without its private keys (what --json prints)."""
    return {k: v for k, v in report.items() if not k.startswith("_")}


# ---------------------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------------------
TABLE1_COLUMNS = ("group", "cost_mode", "seats", "games", "meetings", "coordination", "excess", "messages_per_meeting",
                  "fairness", "vps")
LEADERBOARD_COLUMNS = ("pool", "rank", "name", "games", "seats", "rated_games", "coordination", "excess",
                       "excess_vps", "coordination_mu", "coordination_sigma", "excess_mu", "excess_sigma", "vps_mu",
                       "vps_sigma", "mmr")


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if r.get(c) is None else (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in columns])
    return buf.getvalue()


def report_csv(report: dict[str, Any]) -> str:
    """Table 1 as CSV, or (with a leaderboard) the leaderboard: models then protocols."""
    lb = report.get("leaderboard")
    if lb:
        rows = [dict(r, pool="models") for r in lb["models"]] + [dict(r, pool="protocols") for r in lb["protocols"]]
        return to_csv(rows, LEADERBOARD_COLUMNS)
    rows = [dict(r) for r in report["table"]]
    cols = list(TABLE1_COLUMNS)
    cols[0] = report["group_by"] if report["group_by"] != "cost_mode" else "group"
    for r in rows:
        r[cols[0]] = r["group"]
    return to_csv(rows, cols)


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
    from rich.table import Table

    t = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_edge=False,
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
            table.add_row(f"[bold]{mode.capitalize()}[/]", *[""] * (width - 1))
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
    lb = report.get("leaderboard")
    if lb:
        out.extend(leaderboard_renderables(lb))
    return out


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
