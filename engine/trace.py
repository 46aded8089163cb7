"""The one trace reader: our traces and the paper authors' (SPEC §12).

Everything that reads a finished or stopped game's trace goes through here: resume
(``engine.game``), replay and ``calbench trace`` (verification), the privacy fold
(``engine.privacy``), reports and the save store.

What it reads
    :func:`initial_calendars` (the task row in our traces; the ``agent_registered``
    calendars — JSON, else the calendar render — in the authors', which carry no task
    row), :func:`task_for_trace` (a :class:`~engine.model.Task`, rebuilt for the authors'
    traces from those calendars and the ``round_start`` meetings), :func:`cost_mode`,
    :func:`headline` (coordination, excess for the games listing) and
    :func:`seat_results` (one dict per seat: our ``metrics.per_seat``, else the authors'
    ``final_state`` columns).

The fold
    :func:`fold_trace` never calls a persona.  It is the one fold (:class:`engine.fold.Fold`,
    which starts from the initial calendars, re-validates every ``batch_applied`` with the
    same rules the game used and applies it) plus checks: after each round it compares the folded
    calendars with what the trace recorded: the ``resolution`` event's ``state_hash`` and
    ``calendars`` (ours), its ``per_agent_slot`` and ``coordinated`` (both), each batch's
    recorded calendar after (both), and ``final_state.calendars`` at the end.  Anything
    that does not match becomes a plain-words entry in ``problems``; a tampered or
    truncated trace is therefore detected.  The result answers "what did every calendar
    look like after event N" (:meth:`FoldResult.calendars_at`) and keeps each applied
    batch's :class:`~engine.rules.BatchOutcome` (``FoldResult.batches``); ``FoldResult.fold``
    is the fold itself, from which a resume plays on.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from .model import Calendar, Errand, Task, TaskError, calendar_to_json, item_from_json
from .render import parse_calendar_render
from .events import FOLDED_KINDS, Resolved
from .fold import Fold
from .rules import BatchOutcome
from .state import meeting_slot, state_hash

Calendars = tuple[Calendar, ...]


class TraceError(ValueError):
    """A trace that cannot be folded at all (no initial calendars, not a trace)."""


@dataclass
class FoldResult:
    game_id: str | None
    source: str  # "calbench" (our trace, with a task row) or "authors"
    verified: bool
    rounds: list[dict[str, Any]]  # {round, meeting_id, coordinated, state_hash, matches, seq}
    calendars: list[Calendars]  # folded calendars after each round, in round order
    initial_calendars: Calendars
    final_calendars: Calendars
    problems: list[str]
    metrics: dict[str, Any] | None = None
    costs: list[int] = field(default_factory=list)  # per agent, shown units, from the folded batches
    last_seq: int | None = None  # the last event folded
    #: the oracle's per-agent split: {"recorded", "ours", "kind"} (set by engine.verify)
    splits: dict[str, Any] | None = None
    batches: list[tuple[int, int, int, BatchOutcome]] = field(default_factory=list, repr=False)  # seq, agent, round
    _checkpoints: list[tuple[int, Calendars]] = field(default_factory=list, repr=False)
    #: the fold itself (engine.fold.Fold): state, meetings per round, round starts, outcomes, messages
    fold: Fold | None = field(default=None, repr=False, compare=False)

    def calendars_at(self, seq: int) -> Calendars:
        """All calendars after every event with sequence number ``<= seq`` was folded."""
        keys = [s for s, _ in self._checkpoints]
        i = bisect.bisect_right(keys, seq)
        return self.initial_calendars if i == 0 else self._checkpoints[i - 1][1]

    def to_json(self) -> dict[str, Any]:
        return {
            "game_id": self.game_id,
            "source": self.source,
            "verified": self.verified,
            "rounds": self.rounds,
            "final_calendars": [calendar_to_json(c) for c in self.final_calendars],
            "costs": self.costs,
            "metrics": self.metrics,
            "problems": self.problems,
        }


def _first_difference(a: Calendars, b: Calendars) -> str:
    """Where two sets of calendars first differ, in words: '(agent 3 slot 7)'."""
    if len(a) != len(b):
        return f"({len(a)} calendars folded, {len(b)} recorded)"
    for agent, (ca, cb) in enumerate(zip(a, b)):
        if len(ca) != len(cb):
            return f"(agent {agent}: {len(ca)} slots folded, {len(cb)} recorded)"
        for slot, (x, y) in enumerate(zip(ca, cb)):
            if x != y:
                return f"(agent {agent} slot {slot})"
    return ""


def _calendars_from_json(raw: Any, where: str) -> Calendars:
    if not isinstance(raw, list):
        raise TaskError(f"{where}: expected a list of calendars")
    return tuple(tuple(item_from_json(it, f"{where}, agent {a} slot {s}") for s, it in enumerate(cal))
                 for a, cal in enumerate(raw))


def _seq_of(ev: dict[str, Any], index: int) -> int:
    s = ev.get("seq")
    return s if isinstance(s, int) and not isinstance(s, bool) else index


def _initial(trace: dict[str, Any], events: list[dict[str, Any]]) -> tuple[Calendars, Task | None, str]:
    row = trace.get("task")
    if isinstance(row, dict):
        try:
            task = Task.from_row(row)
        except TaskError as exc:
            raise TraceError(f"the trace's task row cannot be read: {exc}") from None
        return task.calendars, task, "calbench"
    cals: dict[int, Calendar] = {}
    for ev in events:
        if ev.get("type") != "agent_registered":
            continue
        d = ev.get("data") or {}
        agent = d.get("agent_id")
        if not isinstance(agent, int):
            continue
        try:
            if isinstance(d.get("calendar"), list):
                cals[agent] = tuple(item_from_json(it, f"agent {agent} slot {s}") for s, it in enumerate(d["calendar"]))
            elif isinstance(d.get("calendar_render"), str):
                cals[agent] = parse_calendar_render(d["calendar_render"])
        except (TaskError, ValueError) as exc:
            raise TraceError(f"agent {agent}'s registered calendar cannot be read: {exc}") from None
    if not cals:
        raise TraceError("the trace has no task row and no agent_registered calendars, "
                         "so there is nothing to fold the batches over")
    n = max(cals) + 1
    missing = [a for a in range(n) if a not in cals]
    if missing:
        raise TraceError(f"no registered calendar for agent(s) {missing}")
    return tuple(cals[a] for a in range(n)), None, "calbench" if "calbench_version" in trace else "authors"


def _expected_rounds(trace: dict[str, Any], task: Task | None) -> int | None:
    if task is not None:
        return len(task.meetings)
    n = (trace.get("config") or {}).get("num_meetings")
    return n if isinstance(n, int) else None


def _restart_gap(ev: dict[str, Any], prev_seq: int, seq: int, aside: set) -> bool:
    """True when ``ev`` is a ``round_restarted`` event whose set-aside range (kept in the
    trace's ``interrupted_events``) is exactly the gap between ``prev_seq`` and ``seq``."""
    d = ev.get("data") or {}
    if ev.get("type") != "round_restarted" or d.get("from_seq") != prev_seq + 1 or d.get("to_seq") != seq - 1:
        return False
    return all(q in aside for q in range(prev_seq + 1, seq))


def _read_calendar_after(d: dict[str, Any]) -> Calendar | None:
    """The calendar a ``batch_applied`` recorded (ours: JSON; the authors': the render)."""
    if isinstance(d.get("calendar_after"), list):
        return tuple(item_from_json(it) for it in d["calendar_after"])
    if isinstance(d.get("calendar_render_after"), str):
        return parse_calendar_render(d["calendar_render_after"])
    return None


def _check_batch_record(d: dict[str, Any], seq: int, agent: int, outcome: BatchOutcome, problems: list[str]) -> None:
    """The folded calendar after a batch against the one the trace recorded."""
    where = f"round {d.get('round')}, agent {agent}"
    try:
        recorded = _read_calendar_after(d)
    except (TaskError, ValueError):
        problems.append(f"event {seq} ({where}): the recorded calendar after the batch cannot be read")
        return
    if recorded is not None and recorded != outcome.calendar:
        diff = _first_difference((outcome.calendar,), (recorded,)).replace("agent 0", f"agent {agent}")
        problems.append(f"event {seq} ({where}): the calendar after the batch differs from the "
                        f"recorded one {diff}")


def _check_round(fold: Fold, res: Resolved, h: str, problems: list[str]) -> tuple[bool | None, bool | None]:
    """A ``resolution`` against the folded calendars (``h``: their hash): (matches, coordinated as folded)."""
    r, mid, here = res.round, res.meeting_id, fold.calendars
    meeting = fold.meetings.get(r) if isinstance(r, int) else None
    label = f"round {r}"
    checks: list[bool] = []
    if meeting is not None and mid is not None and meeting.get("id") != mid:
        problems.append(f"{label}: the resolution is for meeting {mid} but the round's meeting is "
                        f"{meeting.get('id')}")
        checks.append(False)
    coordinated_folded = None
    if res.per_agent_slot is not None and isinstance(mid, int):
        slots = res.per_agent_slot
        folded = {a: meeting_slot(here[a], mid) if 0 <= a < len(here) else None for a in slots}
        coordinated_folded = len(set(folded.values())) == 1 and None not in folded.values()
        bad = [a for a in sorted(slots) if folded[a] != slots[a]]
        if bad:
            a = bad[0]
            problems.append(f"{label}: agent {a} holds meeting {mid} at slot {folded[a]} after the "
                            f"folded batches, but the trace records slot {slots[a]}")
        checks.append(not bad)
        if isinstance(res.coordinated, bool) and res.coordinated != coordinated_folded:
            problems.append(f"{label}: the trace records the meeting as "
                            f"{'coordinated' if res.coordinated else 'not coordinated'}, "
                            f"but the folded calendars say otherwise")
            checks.append(False)
    if res.state_hash is not None:
        ok = res.state_hash == h
        checks.append(ok)
        if not ok:
            problems.append(f"{label}: the state hash after the round differs from the recorded one")
    if res.calendars is not None:
        try:
            rec = _calendars_from_json(res.calendars, f"{label} recorded calendars")
        except TaskError as exc:
            problems.append(f"{label}: the recorded calendars cannot be read: {exc}")
            checks.append(False)
        else:
            diff = _first_difference(here, rec)
            if diff:
                problems.append(f"{label}: calendars after the round differ from the recorded state {diff}")
            checks.append(not diff)
    return (all(checks) if checks else None), coordinated_folded


def _check_end(trace: dict[str, Any], fold: Fold, task: Task | None, source: str, problems: list[str]) -> None:
    """A complete trace: every round there (or marked stopped), costs and final calendars as recorded."""
    if not trace.get("stopped"):
        expected = _expected_rounds(trace, task)
        resolved = len(fold.resolutions)
        if expected is not None and resolved < expected:
            problems.append(f"the trace ends after {resolved} of {expected} rounds but is not marked "
                            f"stopped (truncated?)")
        if not fold.ended:
            problems.append("the trace has no game_end event but is not marked stopped (truncated?)")
    fs = trace.get("final_state")
    recorded_costs = fs.get("per_agent_cost") if isinstance(fs, dict) else None
    costs = list(fold.state.costs)
    if source == "calbench" and isinstance(recorded_costs, list) and recorded_costs != costs:
        bad = next((a for a, (x, y) in enumerate(zip(costs, recorded_costs)) if x != y), len(costs))
        problems.append(f"the folded batches cost agent {bad} "
                        f"{costs[bad] if bad < len(costs) else '?'}, but the final state records "
                        f"{recorded_costs[bad] if bad < len(recorded_costs) else '?'}")
    if isinstance(fs, dict) and isinstance(fs.get("calendars"), list):
        try:
            rec = _calendars_from_json(fs["calendars"], "final_state.calendars")
        except TaskError as exc:
            problems.append(f"final_state.calendars cannot be read: {exc}")
        else:
            diff = _first_difference(fold.calendars, rec)
            if diff:
                problems.append(f"the folded final calendars differ from the recorded final state {diff}")


def fold_trace(trace: dict[str, Any], upto_seq: int | None = None, *, task: Task | None = None,
               verify: bool = True) -> FoldResult:
    """Fold ``trace``'s events (up to ``upto_seq``, inclusive) with :class:`engine.fold.Fold` and verify them.

    ``task``, when given, supplies the initial calendars and meetings instead of the
    trace (a resume, or the privacy fold, which already hold the task).  ``verify=False``
    only folds: every batch is still checked against the rules (one the rules refuse is
    not applied), but nothing is compared with what the trace recorded and the rounds
    carry no state hash (the privacy fold, run at the end of every game, needs only the
    calendars).
    """
    if not isinstance(trace, dict) or not isinstance(trace.get("events"), list):
        raise TraceError("not a trace: expected a JSON object with an 'events' list")
    events: list[dict[str, Any]] = [e for e in trace["events"] if isinstance(e, dict)]
    if task is not None:
        initial, source = task.calendars, "calbench"
    else:
        initial, task, source = _initial(trace, events)
    problems: list[str] = []
    fold = Fold(initial, task=task, problems=problems)
    rounds: list[dict[str, Any]] = []
    per_round: list[Calendars] = []
    prev_seq: int | None = None
    # events of a round cut short and played again (engine.game.run_game on resume): kept
    # beside ``events``; a ``round_restarted`` event accounts for their seq range
    aside = {e.get("seq") for e in trace.get("interrupted_events") or () if isinstance(e, dict)}

    for index, ev in enumerate(events):
        etype = ev.get("type")
        if not verify and etype not in FOLDED_KINDS:
            continue  # only folding: turns, prompts and the like change nothing the fold keeps
        seq = _seq_of(ev, index)
        if upto_seq is not None and seq > upto_seq:
            break
        if verify and prev_seq is not None and seq != prev_seq + 1 and not _restart_gap(ev, prev_seq, seq, aside):
            problems.append(f"events are missing or out of order: event {seq} follows event {prev_seq}")
        prev_seq = seq
        fold.last_seq = seq  # every event read counts, folded kind or not
        got = fold.apply(ev, seq)
        if not verify:
            if etype == "resolution":
                rounds.append({"round": got.round, "seq": seq, "meeting_id": got.meeting_id,
                               "coordinated": (ev.get("data") or {}).get("coordinated"),
                               "state_hash": None, "matches": None})
                per_round.append(fold.calendars)
            continue
        if isinstance(got, BatchOutcome):
            _check_batch_record(ev.get("data") or {}, seq, fold.batches[-1][1], got, problems)
        elif etype == "resolution":
            h = state_hash(fold.calendars)
            matches, coordinated_folded = _check_round(fold, got, h, problems)
            d = ev.get("data") or {}
            rounds.append({"round": got.round, "seq": seq, "meeting_id": got.meeting_id,
                           "coordinated": d.get("coordinated", coordinated_folded),
                           "state_hash": h, "matches": matches})
            per_round.append(fold.calendars)

    complete = upto_seq is None or not events or upto_seq >= _seq_of(events[-1], len(events) - 1)
    if complete and verify:
        _check_end(trace, fold, task, source, problems)

    return FoldResult(
        game_id=trace.get("game_id"),
        source=source,
        verified=not problems,
        rounds=rounds,
        calendars=per_round,
        initial_calendars=initial,
        final_calendars=fold.calendars,
        problems=problems,
        metrics=trace.get("metrics") if isinstance(trace.get("metrics"), dict) else None,
        costs=list(fold.state.costs),
        last_seq=fold.last_seq,
        batches=fold.batches,
        _checkpoints=fold.checkpoints,
        fold=fold,
    )


# ---------------------------------------------------------------------------------------
# What a trace says, ours or the authors'
# ---------------------------------------------------------------------------------------
def initial_calendars(trace: dict[str, Any]) -> tuple[Calendars, Task | None, str]:
    """``(calendars, task or None, source)`` at the start of the game; :class:`TraceError` if unreadable.

    ``source`` is ``"calbench"`` for our traces (a task row, or our version key) and
    ``"authors"`` otherwise.
    """
    events = [e for e in trace.get("events") or [] if isinstance(e, dict)] if isinstance(trace, dict) else []
    if not isinstance(trace, dict):
        raise TraceError("not a trace: expected a JSON object")
    return _initial(trace, events)


def task_for_trace(trace: dict[str, Any]) -> Task | None:
    """The trace's :class:`~engine.model.Task`, or None when it cannot be rebuilt.

    Our traces carry the full row under ``task``.  The authors' carry none: the initial
    calendars come from the ``agent_registered`` events (JSON calendar, else the calendar
    render) and the meetings from ``round_start``.
    """
    if not isinstance(trace, dict):
        return None
    row = trace.get("task")
    if isinstance(row, dict):
        try:
            return Task.from_row(row)
        except TaskError:
            return None
    events = [e for e in trace.get("events") or [] if isinstance(e, dict)]
    meetings: dict[int, dict] = {}
    for ev in events:
        d = ev.get("data") or {}
        if ev.get("type") == "round_start" and isinstance(d.get("meeting"), dict) and isinstance(d.get("round"), int):
            meetings[d["round"]] = d["meeting"]
    try:
        cals, _, _ = _initial({}, events)
        tid = (trace.get("config") or {}).get("task_id") or trace.get("game_id")
        return Task.from_row({"task_id": str(tid), "calendars": [calendar_to_json(c) for c in cals],
                              "meetings": [meetings[r] for r in sorted(meetings)]})
    except (TraceError, TaskError, ValueError, KeyError, TypeError):
        return None


def cost_mode_of_row(row: dict[str, Any] | None) -> str | None:
    """'uniform' or 'varied' for a task row (the engine's rule), None if unknown."""
    if not isinstance(row, dict):
        return None
    try:
        return Task.from_row(row).cost_mode
    except Exception:
        return None


def cost_mode(trace: dict[str, Any]) -> str | None:
    """'uniform' or 'varied': the task row's, else the registered calendars' errand costs."""
    row = trace.get("task") if isinstance(trace, dict) else None
    if isinstance(row, dict):
        return cost_mode_of_row(row)
    costs: set[int] = set()
    for ev in (trace.get("events") or []) if isinstance(trace, dict) else []:
        if isinstance(ev, dict) and ev.get("type") == "agent_registered":
            render = (ev.get("data") or {}).get("calendar_render")
            if isinstance(render, str):
                try:
                    costs |= {it.cost for it in parse_calendar_render(render) if isinstance(it, Errand)}
                except ValueError:
                    pass
    if not costs:
        return None
    return "varied" if len(costs) > 1 else "uniform"


def _number(v: Any) -> Any:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass
class PlayedLevels:
    """What a trace's seats paid and owed, in cost levels (:func:`played_levels`)."""

    fold: Any  # the FoldResult's fold the levels were read from
    by_round: dict[tuple[int, int], int]  # (round, agent) -> levels that agent's applied batches cost
    cost_levels: list[int]  # per agent, over the game
    scheduled: list[int]  # meeting ids held at the end
    oracle: Any  # the scheduled-only oracle's result (engine.oracle.OracleResult), None when nothing held

    @property
    def oracle_levels(self) -> list[int] | None:
        """Each agent's share of the scheduled-only optimum (all 0 when nothing was held)."""
        if not self.scheduled:
            return [0] * len(self.cost_levels)
        return list(self.oracle.agent_costs_levels) if self.oracle.feasible else None

    @property
    def excess(self) -> float | None:
        """The game's excess (mean over seats of max(0, paid - share)), in cost levels."""
        owed = self.oracle_levels
        if owed is None or not self.cost_levels:
            return None
        return sum(max(0, c - o) for c, o in zip(self.cost_levels, owed)) / len(self.cost_levels)


def played_levels(trace: dict[str, Any], task: Task | None = None) -> PlayedLevels | None:
    """Fold a trace (ours or the authors') and count, in cost levels, what each agent's batches
    cost and its share of the cheapest way to hold the meetings held; None when it cannot be
    folded.  The report and the saved-games headline of the authors' traces read it."""
    from .metrics import oracle_cached
    from .state import batch_cost_levels, is_scheduled

    task = task or task_for_trace(trace)
    if task is None:
        return None
    try:
        fold = fold_trace(trace).fold
    except TraceError:
        return None
    n = task.num_agents
    by_round: dict[tuple[int, int], int] = {}
    for _seq, a, r, outcome in fold.batches:
        if 0 <= a < n:
            by_round[(r, a)] = by_round.get((r, a), 0) + batch_cost_levels(task, outcome)
    cost_levels = [0] * n
    for (_r, a), c in by_round.items():
        cost_levels[a] += c
    scheduled = [m.id for m in task.meetings if is_scheduled(fold.calendars, m.participants, m.id)]
    oracle = oracle_cached(task, tuple(scheduled)) if scheduled else None
    return PlayedLevels(fold, by_round, cost_levels, scheduled, oracle)


def from_authors(trace: dict[str, Any]) -> bool:
    """Whether a trace came from the paper authors' harness: ours carry the task row or our version."""
    return not isinstance(trace.get("task"), dict) and "calbench_version" not in trace


def headline(trace: dict[str, Any]) -> tuple[float | None, float | None]:
    """(coordination, excess cost in levels) of a game: our metrics; else, for the authors'
    traces, their mean excess burden when costs are uniform (levels are the shown costs) and
    the levels folded from the trace when they vary (their burden is in shown units: 160.4
    where the report said 0.80)."""
    metrics = trace.get("metrics") if isinstance(trace.get("metrics"), dict) else {}
    fs = trace.get("final_state") if isinstance(trace.get("final_state"), dict) else {}
    coord = _number(metrics.get("coordination_rate"))
    excess = _number(metrics.get("excess"))
    if excess is None and from_authors(trace) and cost_mode(trace) == "varied":
        levels = played_levels(trace)
        return coord, (levels.excess if levels is not None else None)
    if excess is None:
        burden = metrics.get("per_agent_excess_burden") or fs.get("per_agent_excess_burden")
        if isinstance(burden, list):
            xs = [b for b in burden if _number(b) is not None]
            excess = sum(xs) / len(xs) if xs else None
    return coord, excess


def seat_results(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-seat results: ``metrics.per_seat`` (ours), else built from ``final_state`` (the authors').

    The authors' rows carry the shown costs (``cost_shown``, ``oracle_cost_shown``,
    ``excess_shown``, ``signed_excess_shown``), messages sent and received, meetings
    assigned (from ``round_start``) and scheduled (coordinated ``round_outcomes``).
    Empty when the trace has neither.
    """
    metrics = trace.get("metrics") if isinstance(trace.get("metrics"), dict) else {}
    fs = trace.get("final_state") if isinstance(trace.get("final_state"), dict) else {}
    if isinstance(metrics.get("per_seat"), list):
        return [dict(s) for s in metrics["per_seat"] if isinstance(s, dict)]
    cost = fs.get("per_agent_cost")
    if not isinstance(cost, list):
        return []
    n = len(cost)

    def col(key: str) -> list:
        v = fs.get(key)
        return v if isinstance(v, list) and len(v) == n else [None] * n

    oracle, excess, sent, received = (col("oracle_per_agent_cost"), col("per_agent_excess_burden"),
                                      col("per_agent_messages_sent"), col("per_agent_messages_received"))
    assigned, scheduled = [0] * n, [0] * n
    for ev in trace.get("events") or []:
        if isinstance(ev, dict) and ev.get("type") == "round_start":
            m = (ev.get("data") or {}).get("meeting") or {}
            for p in m.get("participants") or []:
                if isinstance(p, int) and 0 <= p < n:
                    assigned[p] += 1
    for out in fs.get("round_outcomes") or []:
        if isinstance(out, dict) and out.get("coordinated"):
            for p in (out.get("per_agent_slot") or {}):
                if str(p).isdigit() and int(p) < n:
                    scheduled[int(p)] += 1
    seats = []
    for a in range(n):
        signed = cost[a] - oracle[a] if _number(cost[a]) is not None and _number(oracle[a]) is not None else None
        seats.append({
            "agent_id": a, "meetings_assigned": assigned[a], "meetings_scheduled": scheduled[a],
            "success": scheduled[a] / assigned[a] if assigned[a] else None,
            "cost_shown": cost[a], "oracle_cost_shown": oracle[a],
            # their burden is signed (cost − their split); the excess is its positive part
            "excess_shown": max(0, signed) if signed is not None else excess[a],
            "signed_excess_shown": signed, "messages_sent": sent[a], "messages_received": received[a],
            "messages_per_meeting": (sent[a] / max(scheduled[a], 1)) if _number(sent[a]) is not None else None,
        })
    return seats


def errand_cost_values(calendars: Calendars) -> list[int]:
    """The distinct errand costs on some calendars (to tell uniform from varied)."""
    return sorted({it.cost for cal in calendars for it in cal if isinstance(it, Errand)})


__all__ = ["FoldResult", "PlayedLevels", "TraceError", "cost_mode", "cost_mode_of_row", "errand_cost_values",
           "fold_trace", "from_authors", "headline", "initial_calendars", "played_levels", "seat_results", "task_for_trace"]
