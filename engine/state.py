"""Game state and its pure transitions (SPEC §4).

``GameState`` is immutable; every transition returns a new one.  The async orchestrator
(``engine.game``) is the only place that awaits seats; replay (``engine.trace``) folds
recorded batches through the same functions and never calls a persona.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable

import orjson

from .model import Calendar, Errand, MeetingCopy, Task, calendar_to_json
from .quickinit import quick_init
from .rules import BatchOutcome


@quick_init
@dataclass(frozen=True, slots=True)
class Resolution:
    meeting_id: int
    per_agent_slot: dict[int, int | None]
    coordinated: bool
    slot_conflicts: dict[str, list[int]]  # slot -> agents holding the meeting there (only when not coordinated)
    consistency_violated_meeting_ids: tuple[int, ...]
    blocked_slot_violations: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "meeting_id": self.meeting_id,
            "per_agent_slot": {str(a): s for a, s in self.per_agent_slot.items()},
            "coordinated": self.coordinated,
            "slot_conflicts": self.slot_conflicts,
            "consistency_violated_meeting_ids": list(self.consistency_violated_meeting_ids),
            "blocked_slot_violations": list(self.blocked_slot_violations),
        }


@quick_init
@dataclass(frozen=True, slots=True)
class GameState:
    calendars: tuple[Calendar, ...]
    costs: tuple[int, ...]  # per agent, shown units
    costs_levels: tuple[int, ...]  # per agent, cost levels (1/2/3)
    round: int = 0  # rounds resolved so far
    resolutions: tuple[Resolution, ...] = ()
    scheduled: frozenset[int] = frozenset()  # meetings scheduled at the last resolution


def initial_state(task: Task) -> GameState:
    n = task.num_agents
    return GameState(task.calendars, (0,) * n, (0,) * n)


def batch_cost_levels(task: Task, outcome: BatchOutcome) -> int:
    total = 0
    for mv in outcome.moves:
        if isinstance(mv.item, Errand):
            total += task.level(mv.item.cost)
        elif isinstance(mv.item, MeetingCopy):
            total += mv.item.cost
    return total


def apply_outcome(state: GameState, task: Task, seat: int, outcome: BatchOutcome) -> GameState:
    """Write a validated batch to ``seat``'s calendar and charge its cost."""
    cals = list(state.calendars)
    cals[seat] = outcome.calendar
    costs = list(state.costs)
    costs[seat] += outcome.cost
    levels = list(state.costs_levels)
    levels[seat] += batch_cost_levels(task, outcome)
    # built directly (not dataclasses.replace): every applied batch of every fold passes here
    return GameState(tuple(cals), tuple(costs), tuple(levels), state.round, state.resolutions, state.scheduled)


def meeting_slot(calendar: Calendar, meeting_id: int) -> int | None:
    for s, it in enumerate(calendar):
        if isinstance(it, MeetingCopy) and it.meeting_id == meeting_id:
            return s
    return None


def _one_slot(slots: Iterable[int | None]) -> bool:
    """Whether every participant holds the meeting (no None), all in the same slot."""
    held = set(slots)
    return len(held) == 1 and None not in held


def is_scheduled(calendars: tuple[Calendar, ...], participants: tuple[int, ...], meeting_id: int) -> bool:
    return _one_slot(meeting_slot(calendars[a], meeting_id) for a in participants)


def scheduled_meetings(state: GameState, task: Task) -> list[int]:
    """Meetings whose participants all hold them in one common slot (in task order)."""
    return [m.id for m in task.meetings if is_scheduled(state.calendars, m.participants, m.id)]


def _meeting_slots(calendar: Calendar) -> dict[int, int]:
    """Meeting id -> the first slot holding a copy of it (:func:`meeting_slot` for every meeting at once)."""
    out: dict[int, int] = {}
    for s, it in enumerate(calendar):
        if isinstance(it, MeetingCopy) and it.meeting_id not in out:
            out[it.meeting_id] = s
    return out


def resolve_round(state: GameState, task: Task, round_index: int) -> tuple[GameState, Resolution]:
    meeting = task.meetings[round_index]
    where: dict[int, dict[int, int]] = {}  # seat -> its calendar's meeting slots, read once a round

    def slot(a: int, meeting_id: int) -> int | None:
        ix = where.get(a)
        if ix is None:
            ix = where[a] = _meeting_slots(state.calendars[a])
        return ix.get(meeting_id)

    per_agent = {a: slot(a, meeting.id) for a in meeting.participants}
    coordinated = _one_slot(per_agent.values())
    conflicts: dict[str, list[int]] = {}
    if not coordinated:
        for a, s in per_agent.items():
            conflicts.setdefault(str(s), []).append(a)
    held = [m.id for m in task.meetings[: round_index + 1] if _one_slot(slot(a, m.id) for a in m.participants)]
    # A prior meeting is violated when it counted as scheduled at the previous
    # resolution but its copies no longer sit in one common slot.
    kept = set(held)
    violated = tuple(m.id for m in task.meetings[:round_index] if m.id in state.scheduled and m.id not in kept)
    now = frozenset(held)
    res = Resolution(meeting.id, per_agent, coordinated, conflicts, violated)
    return GameState(state.calendars, state.costs, state.costs_levels, round_index + 1,
                     state.resolutions + (res,), now), res


def state_hash(calendars: tuple[Calendar, ...], *, as_json: list | None = None) -> str:
    """A short, stable digest of all calendars (recorded after every round).

    ``as_json``: the same calendars already written as JSON (``calendar_to_json``)."""
    cals = as_json if as_json is not None else [calendar_to_json(c) for c in calendars]
    # orjson writes the same bytes as json.dumps(sort_keys, compact) for ASCII-only data
    # (ints, bools, nulls, ASCII keys), at a tenth of the cost; anything else takes json.
    blob = orjson.dumps(cals, option=orjson.OPT_SORT_KEYS)
    if not blob.isascii():
        blob = json.dumps(cals, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
