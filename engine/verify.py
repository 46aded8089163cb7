"""Verification of a trace: the fold (:mod:`engine.trace`) plus the metrics scored again and diffed.

What ``calbench trace`` and ``calbench import`` check (issue 15): a trace whose moves,
hashes or calendars were changed fails the fold; one whose recorded ``metrics`` were
edited fails here, because every figure reports count is computed again from the folded
trace and compared.  Its own module, apart from the trace reader: it needs the engine's
metrics, which themselves read traces.
"""

from __future__ import annotations

from typing import Any

from .fold import fold_events
from .model import Task, TaskError
from .scoring import Scores, ScoreInput, counted_events, score
from .state import meeting_slot
from .trace import FoldResult, fold_trace

__all__ = ["CHECKED_METRICS", "CHECKED_SEAT_METRICS", "TOLERANCE", "check_metrics", "diff_scores", "rescore_trace",
           "same_value", "verify_trace"]


#: Headline metrics recomputed for our traces and compared with the recorded ones.  Since
#: issue 21 *every* key of ``metrics`` (and of ``metrics.per_seat[i]``) that the engine
#: computes is compared, recursively — these tuples name the headline figures reports read
#: and stay for callers; :data:`INFORMATIONAL` lists what is deliberately not compared.
CHECKED_METRICS = ("coordination_rate", "rounds_coordinated", "meetings_scheduled", "meetings_total",
                   "scheduled_meeting_ids", "realized_cost", "realized_cost_levels", "optimal_cost",
                   "oracle_cost_replayed", "oracle_per_agent_cost", "per_agent_excess_burden", "success", "excess",
                   "excess_shown", "total_excess_burden", "fairness", "fairness_shown", "adjusted_cost",
                   "messages_per_meeting", "total_cheap_talk_messages", "total_dms_sent",
                   "total_participant_groupchat_messages_sent", "total_all_groupchat_messages_sent",
                   "total_groupchat_messages_sent", "total_dm_chars", "vps", "vps_weighted", "vps_calibrated",
                   "per_target_vps", "per_target_vps_calibrated", "vps_mean_target", "participant_pair_vps",
                   "typed_vps", "freetext_vps", "gossip_vps", "observations", "semantic_leaks")
#: Per-seat metrics (``metrics.per_seat[i]``, what reports read) recomputed and compared.
CHECKED_SEAT_METRICS = ("meetings_assigned", "meetings_scheduled", "success", "cost", "cost_shown", "oracle_cost",
                        "oracle_cost_shown", "excess", "excess_shown", "signed_excess", "signed_excess_shown",
                        "adjusted_cost", "fairness", "fairness_shown", "messages_sent", "messages_received",
                        "messages_per_meeting", "vps")
#: Keys of our ``metrics`` that are *not* compared (docs/hardening.md, "Recorded metrics"):
#: labels the run wrote (they describe the game, the fold does not determine them), and
#: any key this version does not compute (a newer writer's addition).
INFORMATIONAL = ("communication_protocol", "cost_mode")
#: Keys of the authors' ``metrics`` compared with the fold (the rest is informational).
AUTHORS_CHECKED = ("meetings_scheduled", "coordination_rate", "total_cheap_talk_messages", "total_dms_sent",
                   "total_groupchat_messages_sent", "total_participant_groupchat_messages_sent",
                   "total_all_groupchat_messages_sent", "total_dm_chars", "efficiency", "realized_cost",
                   "optimal_cost", "oracle_cost_replayed", "oracle_per_agent_cost", "per_agent_excess_burden",
                   "total_excess_burden")


#: The one tolerance of every comparison of a recorded figure with a recomputed one
#: (``calbench trace``/``import`` and ``calbench rescore`` alike): relative, with an absolute
#: floor of the same size for figures near zero.  A figure is "verified" exactly when
#: ``rescore`` would call it unchanged (issue 35 item 6).
TOLERANCE = 1e-9


def same_value(a: Any, b: Any) -> bool:
    """Two recorded values equal, numbers within :data:`TOLERANCE` (booleans are not numbers)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(float(a) - float(b)) <= TOLERANCE * max(1.0, abs(float(a)), abs(float(b)))
    return a == b


def _differs(a: Any, b: Any) -> bool:
    return not same_value(a, b)


def _fmt_num(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else repr(v)


class _Cfg:
    def __init__(self, channels: Any) -> None:
        chans = channels if isinstance(channels, list) and all(isinstance(c, str) for c in channels) else ["dm"]
        self.communication_protocol = "+".join(chans)


def diff_scores(path: str, old: Any, new: Any, out: dict[str, tuple[Any, Any]], *,
                recorded_keys: bool = False) -> None:
    """The one diff of recorded figures against recomputed ones (``verify`` and ``rescore``):
    every place where ``old`` and ``new`` differ, as ``{path: (old, new)}`` — objects key by
    key, lists of equal length element by element, anything else whole (numbers within
    :data:`TOLERANCE`).  A key only one side has is ``(value, None)`` or ``(None, value)``;
    with ``recorded_keys`` only ``old``'s keys that ``new`` also has are compared (a newer
    writer's additions, and figures an older writer did not record, are not differences)."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = [k for k in old if k in new] if recorded_keys else list(old) + [k for k in new if k not in old]
        for k in keys:
            diff_scores(f"{path}.{k}", old.get(k), new.get(k), out, recorded_keys=recorded_keys)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            diff_scores(f"{path}[{i}]", a, b, out, recorded_keys=recorded_keys)
    elif not same_value(old, new):
        out[path] = (old, new)


def _compare_tree(path: str, recorded: Any, fresh: Any, problems: list[str], skip: tuple = ()) -> None:
    """Every value under ``recorded`` against the same place in ``fresh`` (:func:`diff_scores`,
    recorded keys), in words; a few lines per edited list say enough."""
    if isinstance(recorded, dict) and skip:
        recorded = {k: v for k, v in recorded.items() if k not in skip}
    found: dict[str, tuple[Any, Any]] = {}
    diff_scores(path, recorded, fresh, found, recorded_keys=True)
    per_list: dict[str, int] = {}
    for where, (old, new) in found.items():
        parent = where[:where.rfind("[")] if where.endswith("]") else where
        per_list[parent] = per_list.get(parent, 0) + 1
        if per_list[parent] > 3:
            continue
        if isinstance(old, dict) and not isinstance(new, dict):
            problems.append(f"{where} records an object but the folded trace gives {_fmt_num(new)}")
        elif isinstance(old, (int, float)) and not isinstance(old, bool):
            problems.append(f"{where} records {_fmt_num(old)} but the folded trace gives {_fmt_num(new)}")
        else:
            problems.append(f"{where} records {_short(old)} but the folded trace gives {_short(new)}")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def rescore_trace(trace: dict[str, Any], task: Task | None = None) -> Scores | str:
    """Our finished trace scored again by today's scorers (``engine.scoring``): its batches
    refolded (each re-validated), its events up to ``game_end`` scored, its ``judge``
    records (if any) too.  A one-line reason instead when it cannot be."""
    if task is None:
        row = trace.get("task")
        if not isinstance(row, dict):
            return "the trace has no task row, so it cannot be scored again"
        try:
            task = Task.from_row(row)
        except TaskError:
            return "the task row cannot be read, so the metrics cannot be checked"
    events = counted_events(trace.get("events") or [])
    fold = fold_events(task, events)  # the one fold (engine.fold): every batch re-validated
    if not fold.folds_cleanly:
        return "the metrics cannot be recomputed: the batches do not fold"
    state = fold.state
    cfg = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    judge = trace.get("judge") if isinstance(trace.get("judge"), dict) else None
    try:
        return score(ScoreInput(task, state, events, _Cfg(cfg.get("channels")).communication_protocol, judge=judge))
    except Exception as exc:  # a malformed message event, say
        return f"the metrics cannot be recomputed from the events ({type(exc).__name__}: {exc})"


def check_metrics(trace: dict[str, Any], res: FoldResult) -> list[str]:
    """Problems with a finished trace's recorded ``metrics``: each recomputed from the fold.

    Our traces (a task row): re-score and diff — :func:`rescore_trace` (today's scorers
    over the refolded state; the scheduled-only oracle is solved again), compared key by key over the whole
    ``metrics`` object — the VPS family, costs, counts, every seat's record — and the
    per-agent lists of ``final_state``; only :data:`INFORMATIONAL` keys are left out.
    The authors' traces: :func:`_check_authors`.  A stopped trace or one without metrics
    has nothing to check.
    """
    metrics = trace.get("metrics")
    if trace.get("stopped") or not isinstance(metrics, dict):
        return []
    events = [e for e in trace.get("events") or [] if isinstance(e, dict)]
    problems: list[str] = []

    row = trace.get("task")
    if isinstance(row, dict):
        try:
            task = Task.from_row(row)
        except TaskError:
            return ["the task row cannot be read, so the metrics cannot be checked"]
        scored = rescore_trace(trace, task)
        if isinstance(scored, str):
            return [scored]
        final, fresh = scored.final_state, scored.metrics
        seats = metrics.get("per_seat")
        if seats is not None and (not isinstance(seats, list) or len(seats) != len(fresh["per_seat"])):
            problems.append(f"metrics.per_seat should list {len(fresh['per_seat'])} seats")
            metrics = {k: v for k, v in metrics.items() if k != "per_seat"}
        elif isinstance(seats, list) and not all(isinstance(r, dict) for r in seats):
            bad = next(a for a, r in enumerate(seats) if not isinstance(r, dict))
            problems.append(f"metrics.per_seat[{bad}] is not an object")
            metrics = {k: v for k, v in metrics.items() if k != "per_seat"}
        _compare_tree("metrics", metrics, fresh, problems, skip=INFORMATIONAL)
        fs = trace.get("final_state")
        if isinstance(fs, dict):
            _compare_tree("final_state", fs, final, problems, skip=("calendars", "round_outcomes"))
        problems.extend(_game_end_problems(trace, events, trace["metrics"], set(fresh) | set(INFORMATIONAL)))
        recorded = trace.get("scoring")
        if problems and isinstance(recorded, dict) and recorded != scored.versions:
            problems.append(f"(scored by {_versions(recorded)}; today's scorers are {_versions(scored.versions)}: "
                            "'calbench rescore' scores a saved game again)")
        return problems
    return _check_authors(trace, res, metrics, events)


_FRAME = ("round", "turn", "phase", "agent_id")


def _game_end_problems(trace: dict[str, Any], events: list[dict[str, Any]], metrics: dict[str, Any],
                       known: set[str]) -> list[str]:
    """The ``game_end`` event records the metrics the game was scored with: the trace's
    ``metrics``, or, for a figure ``calbench rescore`` changed since, the value its first
    rescore replaced (``rescored[].changed``: events are never rewritten).  Keys today's
    scorers do not compute (``known`` are those they do) are a newer writer's: not compared."""
    end = next((e for e in reversed(events) if e.get("type") == "game_end"), None)
    if end is None:
        return []
    recorded = {k: v for k, v in (end.get("data") or {}).items() if k not in _FRAME and k in known}
    metrics = {k: v for k, v in metrics.items() if k in known}
    found: dict[str, tuple[Any, Any]] = {}
    diff_scores("metrics", recorded, metrics, found)
    first: dict[str, Any] = {}
    for h in trace.get("rescored") or ():
        changed = h.get("changed") if isinstance(h, dict) else None
        for path, pair in (changed.items() if isinstance(changed, dict) else ()):
            if isinstance(pair, list) and len(pair) == 2:
                first.setdefault(path, pair[0])
    out = []
    for path, (at_end, now) in found.items():
        if path in first and same_value(first[path], at_end):
            continue
        out.append(f"the game_end event records {path[len('metrics.'):]} = {_short(at_end)} but the trace's "
                   f"{path} is {_short(now)}")
        if len(out) >= 3:
            break
    return out


def _versions(v: dict[str, Any]) -> str:
    return ", ".join(f"{k} {n}" for k, n in v.items())


def _check_authors(trace: dict[str, Any], res: FoldResult, metrics: dict[str, Any],
                   events: list[dict[str, Any]]) -> list[str]:
    """The authors' trace: what the fold determines (meetings scheduled, coordination rate,
    realized cost, message counts and characters, their ``efficiency``) and their oracle
    figures.  Their per-agent excess burden is signed (cost − oracle split) and the total is
    its sum.  Their oracle split need not be ours: the split of the optimum is not unique.
    It verifies when it is *an* optimal split (its sum is the optimal cost and some optimal
    schedule gives every agent exactly that cost: :func:`engine.oracle.split_realised`),
    or, when its sum is their ``oracle_cost_replayed`` above the optimum, their replay of
    the oracle's schedule (meeting by meeting, an errand may move twice), which must then
    cost every agent at least what some optimal schedule costs it."""
    problems: list[str] = []

    def compare(key: str, recorded: Any, recomputed: Any, where: str = "metrics") -> None:
        if recorded is None or isinstance(recorded, (dict, list, str)):
            return
        if not isinstance(recorded, (int, float)):
            problems.append(f"{where}.{key} is {recorded!r}, not a number")
        elif _differs(recorded, recomputed):
            problems.append(f"{where}.{key} records {_fmt_num(recorded)} but the folded trace gives "
                            f"{_fmt_num(recomputed)}")

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
    kinds = {"dm_sent": 0, "participant_groupchat_sent": 0, "all_groupchat_sent": 0}
    dm_chars = 0
    for e in events:
        t = e.get("type")
        if t in kinds:
            kinds[t] += 1
            if t == "dm_sent":
                content = (e.get("data") or {}).get("content")
                dm_chars += len(content) if isinstance(content, str) else 0
    n_msgs = sum(kinds.values())
    compare("total_cheap_talk_messages", metrics.get("total_cheap_talk_messages"), n_msgs)
    compare("total_dms_sent", metrics.get("total_dms_sent"), kinds["dm_sent"])
    compare("total_participant_groupchat_messages_sent", metrics.get("total_participant_groupchat_messages_sent"),
            kinds["participant_groupchat_sent"])
    compare("total_all_groupchat_messages_sent", metrics.get("total_all_groupchat_messages_sent"),
            kinds["all_groupchat_sent"])
    compare("total_groupchat_messages_sent", metrics.get("total_groupchat_messages_sent"),
            kinds["participant_groupchat_sent"] + kinds["all_groupchat_sent"])
    compare("total_dm_chars", metrics.get("total_dm_chars"), dm_chars)
    if scheduled and isinstance(metrics.get("efficiency"), (int, float)):
        compare("efficiency", metrics.get("efficiency"), kinds["dm_sent"] / scheduled)
    fs = trace.get("final_state") if isinstance(trace.get("final_state"), dict) else {}
    cost = fs.get("per_agent_cost")
    if not (isinstance(cost, list) and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in cost)):
        return problems
    compare("realized_cost", metrics.get("realized_cost"), sum(cost))
    if isinstance(res.costs, list) and len(res.costs) == len(cost):
        for a in range(len(cost)):
            compare(f"per_agent_cost[{a}]", cost[a], res.costs[a], "final_state")
    oracle, burden = metrics.get("oracle_per_agent_cost"), metrics.get("per_agent_excess_burden")
    if not (isinstance(oracle, list) and isinstance(burden, list) and len(oracle) == len(burden) == len(cost)
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in oracle + burden)):
        return problems
    for key in ("oracle_per_agent_cost", "per_agent_excess_burden"):
        if isinstance(fs.get(key), list) and fs[key] != metrics.get(key):
            problems.append(f"final_state.{key} is {_short(fs[key])} but metrics.{key} is {_short(metrics[key])}")
    for a in range(len(cost)):  # theirs is signed: an agent may pay less than its share of the split
        compare(f"per_agent_excess_burden[{a}]", burden[a], cost[a] - oracle[a])
    compare("total_excess_burden", metrics.get("total_excess_burden"), sum(c - o for c, o in zip(cost, oracle)))
    if not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2 ** 53 for x in oracle):
        problems.append(f"metrics.oracle_per_agent_cost {_short(oracle)} must list whole costs")
        return problems
    try:
        problems.extend(_check_split(trace, res, metrics, list(oracle)))
    except Exception as exc:  # an oracle time limit, a task the solver refuses
        problems.append(f"the oracle split could not be checked ({type(exc).__name__}: {exc})")
    return problems


def _check_split(trace: dict[str, Any], res: FoldResult, metrics: dict[str, Any], split: list[int]) -> list[str]:
    from . import oracle as _oracle
    from .trace import task_for_trace

    task = task_for_trace(trace)
    if task is None or len(split) != task.num_agents:
        return ["the oracle split cannot be checked: the task cannot be rebuilt from the trace"]
    best = _oracle.solve(task)
    if not best.feasible:
        return ["the oracle finds no feasible schedule for this trace's task"]
    out: list[str] = []
    recorded_opt = metrics.get("optimal_cost")
    if isinstance(recorded_opt, (int, float)) and not isinstance(recorded_opt, bool) and recorded_opt != best.cost:
        out.append(f"metrics.optimal_cost records {_fmt_num(recorded_opt)} but the oracle gives {best.cost}")
    replayed = metrics.get("oracle_cost_replayed")
    total = sum(split)
    if isinstance(replayed, (int, float)) and not isinstance(replayed, bool) and replayed != total:
        out.append(f"metrics.oracle_cost_replayed records {_fmt_num(replayed)} but oracle_per_agent_cost "
                   f"sums to {total}")
    if total == best.cost:
        kind = "an optimal split" if _oracle.split_realised(task, split, total=best.cost) else None
        if kind is None:
            out.append(f"metrics.oracle_per_agent_cost {split} sums to the optimal cost {best.cost} but no "
                       "optimal schedule gives it")
    elif total > best.cost and replayed == total:
        kind = "their replay of the oracle's schedule"
        if not _oracle.split_realised(task, split, total=best.cost, at_most=True):
            out.append(f"metrics.oracle_per_agent_cost {split} (their replay, {total}) costs some agent less "
                       "than every optimal schedule does")
    else:
        kind = None
        out.append(f"metrics.oracle_per_agent_cost {split} sums to {total}, not the optimal cost {best.cost}")
    res.splits = {"recorded": split, "ours": list(best.agent_costs), "kind": kind,
                  "optimal_cost": best.cost}
    return out


def verify_trace(trace: dict[str, Any]) -> FoldResult:
    """``fold_trace`` plus :func:`check_metrics`: what ``calbench trace`` and ``calbench import`` check.

    Raises :class:`TraceError` for a trace that cannot be folded at all.  (A trace *file* is
    first checked by ``engine.tracecheck``, the import's checker: ``lab.archive.load_trace``.)
    """
    res = fold_trace(trace)
    extra = check_metrics(trace, res)
    if extra:
        res.problems.extend(extra)
        res.verified = False
    return res
