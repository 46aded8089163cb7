"""Reports over saved games — tables: Table 1, Table 2, regret, the whole report, CSV.

Table 2 rows are computed by :func:`lab.summary.table2_row`, the same function the suite
summary of ``calbench run`` uses.  See :mod:`lab.report.stats` for the definitions.
"""

from __future__ import annotations

import io
from collections import defaultdict
from typing import Any, Sequence

from lab.csvfile import write_rows
from lab.summary import GameTotals, table2_row

from .stats import (GROUP_BY, _mean, first_speaker, game_order_key, group_of, homogeneous_games, leaderboard, mode_rank,
                    seat_records, trace_facts)


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
    """Paper Table 2: per protocol (games where every seat has one persona) and cost setting.

    The pooled metrics are :func:`lab.summary.table2_row`, the suite summary's own.
    """
    homo = homogeneous_games(records)
    games: dict[tuple[str, str], dict[Any, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r["game_id"] in homo:
            games[(r["cost_mode"], homo[r["game_id"]])][r["game_id"]].append(r)
    out = []
    for (mode, persona), by_game in sorted(games.items(), key=lambda kv: (mode_rank(kv[0][0]), kv[0][1])):
        seats = [s for ss in by_game.values() for s in ss]
        t2 = table2_row([_game_totals(ss) for ss in by_game.values()])
        out.append({
            "persona": persona,
            "cost_mode": mode,
            "games": t2["games"],
            "seats": len(seats),
            "coordination": t2["coordination"],
            "excess": t2["excess"],
            "excess_shown": _mean(s["excess_shown"] for s in seats),
            "messages_per_meeting": t2["messages_per_meeting"],
            "fairness": t2["fairness"],
            "vps": t2["vps"],
        })
    return out


def _game_totals(seats: Sequence[dict[str, Any]]) -> GameTotals:
    """One game's Table 2 part from its per-seat records (unknown values left out)."""
    coord = seats[0]["game_coordination"]
    if coord is None:
        coord = _mean(s["success"] for s in seats)
    vps = sum(s["vps"] for s in seats) if all(s["vps"] is not None for s in seats) else None
    exc = [s["excess"] for s in seats if s["excess"] is not None]
    fair = [s["fairness"] for s in seats if s["fairness"] is not None]
    talk = [s for s in seats if s["messages_sent"] is not None]
    return GameTotals(coordination=coord, vps=vps, excess_sum=sum(exc), excess_n=len(exc),
                      fairness_sum=sum(fair), fairness_n=len(fair),
                      messages=sum(s["messages_sent"] for s in talk) if talk else None,
                      scheduled_participant_meetings=int(sum(s["meetings_scheduled"] or 0 for s in talk)))


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
    if traces is not None:  # the paper's message audit (issue 21): lab/report/audit.py
        from .audit import audit_section

        report["message_audit"] = audit_section(records, traces, group_by)
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
    write_rows(buf, columns, (["" if r.get(c) is None else (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c])
                               for c in columns] for r in rows))
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
