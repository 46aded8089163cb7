"""Verification of a trace: the fold (:mod:`engine.trace`) plus the metrics recomputed from it.

What ``calbench trace`` and ``calbench import`` check (issue 15): a trace whose moves,
hashes or calendars were changed fails the fold; one whose recorded ``metrics`` were
edited fails here, because every figure reports count is computed again from the folded
trace and compared.  Its own module, apart from the trace reader: it needs the engine's
metrics, which themselves read traces.
"""

from __future__ import annotations

from typing import Any

from .actions import EnvelopeError, actions_from_json
from .metrics import game_metrics
from .model import Task, TaskError
from .rules import BatchOutcome, check_batch
from .state import apply_outcome, initial_state, meeting_slot, resolve_round
from .trace import FoldResult, fold_trace

__all__ = ["CHECKED_METRICS", "CHECKED_SEAT_METRICS", "check_metrics", "verify_trace"]


#: Game-level metrics recomputed for our traces and compared with the recorded ones.
CHECKED_METRICS = ("coordination_rate", "meetings_scheduled", "meetings_total", "realized_cost",
                   "realized_cost_levels", "success", "excess", "excess_shown", "total_excess_burden", "fairness",
                   "adjusted_cost", "messages_per_meeting", "total_cheap_talk_messages")
#: Per-seat metrics (``metrics.per_seat[i]``, what reports read) recomputed and compared.
CHECKED_SEAT_METRICS = ("meetings_assigned", "meetings_scheduled", "success", "cost", "cost_shown", "oracle_cost",
                        "oracle_cost_shown", "excess", "excess_shown", "signed_excess", "adjusted_cost",
                        "fairness", "messages_sent", "messages_received", "vps")


def _differs(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a != b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) > 1e-6 * max(1.0, abs(float(a)), abs(float(b)))
    return a != b


def _fmt_num(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else repr(v)


class _Cfg:
    def __init__(self, channels: Any) -> None:
        chans = channels if isinstance(channels, list) and all(isinstance(c, str) for c in channels) else ["dm"]
        self.communication_protocol = "+".join(chans)


def _refold_state(task: Task, events: list[dict[str, Any]]):
    """The engine's ``GameState`` at the end of ``events`` (every batch re-validated), or None."""
    state = initial_state(task)
    for ev in events:
        t, d = ev.get("type"), ev.get("data") or {}
        if t == "batch_applied":
            seat, r = d.get("agent_id"), d.get("round")
            if not (isinstance(seat, int) and isinstance(r, int) and 0 <= seat < task.num_agents
                    and 0 <= r < len(task.meetings)):
                return None
            meeting = task.meetings[r]
            try:
                actions = actions_from_json(d.get("actions") or [])
            except EnvelopeError:
                return None
            outcome = check_batch(state.calendars[seat], actions, meeting_id=meeting.id,
                                  require_schedule=d.get("phase") == "DECISION", meeting_cost=meeting.cost)
            if not isinstance(outcome, BatchOutcome):
                return None
            state = apply_outcome(state, task, seat, outcome)
        elif t == "resolution":
            r = d.get("round")
            if not isinstance(r, int) or not 0 <= r < len(task.meetings):
                return None
            state, _ = resolve_round(state, task, r)
    return state


def check_metrics(trace: dict[str, Any], res: FoldResult) -> list[str]:
    """Problems with a finished trace's recorded ``metrics``: each recomputed from the fold.

    Our traces (a task row): the engine's own ``game_metrics`` over the refolded state
    (the scheduled-only oracle is solved again), compared key by key — the headline
    figures and every seat's record, which is what reports count.  The authors' traces:
    the figures the fold determines (meetings scheduled, coordination rate, realized cost,
    message count) and the internal sums (per-agent excess = cost − oracle cost, total
    excess burden).  A stopped trace or one without metrics has nothing to check.
    """
    metrics = trace.get("metrics")
    if trace.get("stopped") or not isinstance(metrics, dict):
        return []
    events = [e for e in trace.get("events") or [] if isinstance(e, dict)]
    problems: list[str] = []

    def compare(key: str, recorded: Any, recomputed: Any, where: str = "metrics") -> None:
        if recorded is None or isinstance(recorded, (dict, list, str)):
            return
        if not isinstance(recorded, (int, float)):
            problems.append(f"{where}.{key} is {recorded!r}, not a number")
        elif _differs(recorded, recomputed):
            problems.append(f"{where}.{key} records {_fmt_num(recorded)} but the folded trace gives "
                            f"{_fmt_num(recomputed)}")

    row = trace.get("task")
    if isinstance(row, dict):
        try:
            task = Task.from_row(row)
        except TaskError:
            return ["the task row cannot be read, so the metrics cannot be checked"]
        state = _refold_state(task, events)
        if state is None:
            return ["the metrics cannot be recomputed: the batches do not fold"]
        cfg = trace.get("config") if isinstance(trace.get("config"), dict) else {}
        try:
            _, fresh = game_metrics(task, state, events, _Cfg(cfg.get("channels")))
        except Exception as exc:  # a malformed message event, say
            return [f"the metrics cannot be recomputed from the events ({type(exc).__name__}: {exc})"]
        for key in CHECKED_METRICS:
            if key in metrics:
                compare(key, metrics[key], fresh.get(key))
        seats = metrics.get("per_seat")
        if seats is not None:
            if not isinstance(seats, list) or len(seats) != len(fresh["per_seat"]):
                problems.append(f"metrics.per_seat should list {len(fresh['per_seat'])} seats")
            else:
                for a, (rec, new) in enumerate(zip(seats, fresh["per_seat"])):
                    if not isinstance(rec, dict):
                        problems.append(f"metrics.per_seat[{a}] is not an object")
                        continue
                    for key in CHECKED_SEAT_METRICS:
                        if key in rec:
                            compare(key, rec[key], new.get(key), f"metrics.per_seat[{a}]")
        return problems

    # the authors' trace: what the fold itself determines
    meetings: dict[int, tuple[int, ...]] = {}
    for ev in events:
        if ev.get("type") == "round_start":
            m = (ev.get("data") or {}).get("meeting")
            if isinstance(m, dict) and isinstance(m.get("id"), int) and isinstance(m.get("participants"), list):
                meetings[m["id"]] = tuple(p for p in m["participants"] if isinstance(p, int))
    final = res.final_calendars
    scheduled = 0
    for mid, parts in meetings.items():
        slots = {meeting_slot(final[a], mid) if 0 <= a < len(final) else None for a in parts}
        scheduled += len(slots) == 1 and None not in slots
    total = (trace.get("config") or {}).get("num_meetings") if isinstance(trace.get("config"), dict) else None
    if not isinstance(total, int) or total <= 0:
        total = len(meetings)
    if meetings:
        compare("meetings_scheduled", metrics.get("meetings_scheduled"), scheduled)
        if total:
            compare("coordination_rate", metrics.get("coordination_rate"), scheduled / total)
    n_msgs = sum(1 for e in events if e.get("type") in ("dm_sent", "participant_groupchat_sent", "all_groupchat_sent"))
    compare("total_cheap_talk_messages", metrics.get("total_cheap_talk_messages"), n_msgs)
    fs = trace.get("final_state") if isinstance(trace.get("final_state"), dict) else {}
    cost = fs.get("per_agent_cost")
    if isinstance(cost, list) and all(isinstance(c, (int, float)) for c in cost):
        compare("realized_cost", metrics.get("realized_cost"), sum(cost))
        oracle, burden = metrics.get("oracle_per_agent_cost"), metrics.get("per_agent_excess_burden")
        if (isinstance(oracle, list) and isinstance(burden, list) and len(oracle) == len(burden) == len(cost)
                and all(isinstance(x, (int, float)) for x in oracle + burden)):
            for a in range(len(cost)):
                compare(f"per_agent_excess_burden[{a}]", burden[a], max(0, cost[a] - oracle[a]))
            compare("total_excess_burden", metrics.get("total_excess_burden"), sum(max(0, c - o) for c, o in
                                                                                 zip(cost, oracle)))
    return problems


def verify_trace(trace: dict[str, Any]) -> FoldResult:
    """``fold_trace`` plus :func:`check_metrics`: what ``calbench trace`` and ``calbench import`` check.

    Raises :class:`TraceError` for a trace that cannot be folded at all.
    """
    res = fold_trace(trace)
    extra = check_metrics(trace, res)
    if extra:
        res.problems.extend(extra)
        res.verified = False
    return res
