"""Per-seat and per-game metrics (SPEC §6).

Costs are reported twice: in *levels* (1/2/3, the paper's tables) and in *shown* units
(1/10/100, the leaderboard).  The reference for excess cost is the scheduled-only
oracle: the best schedule of exactly the meetings this game scheduled, split per agent.

Adjusted cost (paper §4.2): ``C_adj_i = (Δc_i + m_miss_i · Δw_i) / M_i`` where
``Δw_i = max(0, w_i − o_i) / M_i``; ``w_i`` is agent i's cost (levels) under the task's
witness schedule (greedy when the row has no witness) and ``o_i`` its cost under the
full oracle — the per-meeting price of a missed meeting.  See docs/metrics.md.
"""

from __future__ import annotations

from typing import Any

from .events import MESSAGE_EVENTS
from .model import Errand, Task
from .state import GameState, scheduled_meetings


def oracle_cached(task: Task, meeting_ids: tuple[int, ...] | None = None):
    """The (scheduled-only) oracle for ``meeting_ids``, solved once per task object."""
    key = ("oracle", meeting_ids)
    if key not in task.cache:
        from .oracle import solve

        task.cache[key] = solve(task, meeting_ids=meeting_ids)
    return task.cache[key]


def optimal_cost_cached(task: Task) -> int | None:
    opt = task.row.get("optimal") or {}
    if "cost" in opt:
        return opt["cost"]
    return oracle_cached(task).cost


def greedy_cost_cached(task: Task) -> int | None:
    g = task.row.get("greedy") or {}
    if "cost" in g:
        return g["cost"]
    key = ("greedy",)
    if key not in task.cache:
        from .oracle import greedy

        task.cache[key] = greedy(task)[0]
    return task.cache[key]


def witness_agent_costs(task: Task) -> list[int] | None:
    """Per-agent cost (levels) of the row's witness schedule, on the initial calendars."""
    w = (task.row.get("witness_solution") or {}).get("assignments")
    if not w:
        return None
    costs = [0] * task.num_agents
    for m in task.meetings:
        slot = w.get(str(m.id), w.get(m.id))
        if slot is None:
            continue
        for a in m.participants:
            item = task.calendars[a][slot]
            if isinstance(item, Errand):
                costs[a] += task.level(item.cost)
    return costs


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def outcome_metrics(task: Task, state: GameState, events: list[dict[str, Any]],
                    communication_protocol: str) -> tuple[dict, dict]:
    """The ``outcome`` scorer's body (``engine.scoring``): ``(final_state, metrics)`` of a
    finished game without the privacy figures — coordination, costs against the
    scheduled-only oracle, fairness, adjusted cost, message counts, and ``per_seat``
    records (the scoring stage adds each seat's ``vps`` and the privacy keys)."""
    n = task.num_agents
    scheduled = scheduled_meetings(state, task)
    sched_set = set(scheduled)
    assigned = [sum(1 for m in task.meetings if a in m.participants) for a in range(n)]
    sched_of = [sum(1 for m in task.meetings if a in m.participants and m.id in sched_set) for a in range(n)]
    coord_at_res = sum(1 for r in state.resolutions if r.coordinated)

    oracle = oracle_cached(task, tuple(scheduled))
    o_lvl = list(oracle.agent_costs_levels) if oracle.feasible else [0] * n
    o_shown = list(oracle.agent_costs) if oracle.feasible else [0] * n
    real_lvl, real_shown = list(state.costs_levels), list(state.costs)
    signed = [real_lvl[a] - o_lvl[a] for a in range(n)]
    signed_shown = [real_shown[a] - o_shown[a] for a in range(n)]
    excess = [max(0, e) for e in signed]
    excess_shown = [max(0, e) for e in signed_shown]
    mean_e = _mean(signed)
    fair = [abs(e - mean_e) for e in signed]
    mean_es = _mean(signed_shown)
    fair_shown = [abs(e - mean_es) for e in signed_shown]

    full = oracle_cached(task, None)
    w = witness_agent_costs(task)
    if w is None:
        w = list(full.agent_costs_levels)  # no witness: the gap is zero by construction
    adjusted = []
    for a in range(n):
        if not assigned[a]:
            adjusted.append(None)
            continue
        dw = max(0, w[a] - full.agent_costs_levels[a]) / assigned[a]
        adjusted.append((excess[a] + (assigned[a] - sched_of[a]) * dw) / assigned[a])

    sent = [0] * n
    received = [0] * n
    chars = {"dm": 0, "participant_groupchat": 0, "all_groupchat": 0}
    counts = {"dm": 0, "participant_groupchat": 0, "all_groupchat": 0}
    for ev in events:
        if ev["type"] in MESSAGE_EVENTS:
            d = ev["data"]
            sent[d["from_agent"]] += 1
            counts[d["channel"]] += 1
            chars[d["channel"]] += d.get("content_chars", len(d.get("content", "")))
            for rcp in d.get("recipients") or [d.get("to_agent")]:
                if rcp is not None:
                    received[rcp] += 1
    total_msgs = sum(sent)
    sched_pm = sum(sched_of)

    per_seat = []
    for a in range(n):
        per_seat.append({
            "agent_id": a,
            "meetings_assigned": assigned[a],
            "meetings_scheduled": sched_of[a],
            "success": sched_of[a] / assigned[a] if assigned[a] else None,
            "cost": real_lvl[a],
            "cost_shown": real_shown[a],
            "oracle_cost": o_lvl[a],
            "oracle_cost_shown": o_shown[a],
            "excess": excess[a],
            "excess_shown": excess_shown[a],
            "signed_excess": signed[a],
            "signed_excess_shown": signed_shown[a],
            "adjusted_cost": adjusted[a],
            "fairness": fair[a],
            "fairness_shown": fair_shown[a],
            "messages_sent": sent[a],
            "messages_received": received[a],
            "messages_per_meeting": sent[a] / max(sched_of[a], 1),
        })

    m = len(task.meetings)
    metrics = {
        "coordination_rate": len(scheduled) / m if m else 0.0,
        "rounds_coordinated": coord_at_res,
        "meetings_scheduled": len(scheduled),
        "meetings_total": m,
        "scheduled_meeting_ids": scheduled,
        "success": _mean([s["success"] for s in per_seat if s["success"] is not None]),
        "fairness": _mean(fair),
        "fairness_shown": _mean(fair_shown),
        "excess": _mean(excess),
        "excess_shown": _mean(excess_shown),
        "total_excess_burden": sum(excess_shown),
        "adjusted_cost": _mean([x for x in adjusted if x is not None]),
        "realized_cost": sum(real_shown),
        "realized_cost_levels": sum(real_lvl),
        "optimal_cost": optimal_cost_cached(task),
        "oracle_cost_replayed": oracle.cost,
        "oracle_per_agent_cost": o_shown,
        "per_agent_excess_burden": excess_shown,
        "messages_per_meeting": total_msgs / sched_pm if sched_pm else float(total_msgs),
        "total_cheap_talk_messages": total_msgs,
        "total_dms_sent": counts["dm"],
        "total_participant_groupchat_messages_sent": counts["participant_groupchat"],
        "total_all_groupchat_messages_sent": counts["all_groupchat"],
        "total_groupchat_messages_sent": counts["participant_groupchat"] + counts["all_groupchat"],
        "total_dm_chars": chars["dm"],
        "communication_protocol": communication_protocol,
        "cost_mode": task.cost_mode,
        "per_seat": per_seat,
    }
    final_state = {
        "calendars": [[None if it is None else it.to_json() for it in cal] for cal in state.calendars],
        "per_agent_cost": real_shown,
        "per_agent_cost_levels": real_lvl,
        "oracle_per_agent_cost": o_shown,
        "oracle_per_agent_cost_levels": o_lvl,
        "per_agent_excess_burden": excess_shown,
        "per_agent_messages_sent": sent,
        "per_agent_messages_received": received,
        "round_outcomes": [r.to_json() for r in state.resolutions],
        "scheduled_meeting_ids": scheduled,
    }
    return final_state, metrics
