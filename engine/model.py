"""Core data model: calendar items, meetings and the task row (SPEC §1–2).

Inside the engine, calendars are tuples of small frozen dataclasses: immutable, hashable
and cheap to copy, which keeps the pure state transitions fast (a scripted suite plays
hundreds of games a second).  Pydantic is used at the boundaries, where untrusted JSON
comes in (task rows, agent envelopes); see ``engine.actions`` and ``Task.from_row``.

The task row *is* the authors' JSON-lines format, extended (SPEC §2): ``Task`` keeps the
original row dict untouched and parses only what the engine needs, so every key the
authors wrote survives a load/save round trip.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Union

from .quickinit import quick_init


class TaskError(ValueError):
    """A task row that cannot be used; the message names what is wrong, in plain words."""


@quick_init
@dataclass(frozen=True, slots=True)
class Errand:
    """A private commitment of one agent.  ``blocked`` errands never move."""

    errand_id: int
    cost: int
    blocked: bool = False

    @property
    def item_id(self) -> int:
        return self.errand_id

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"cost": self.cost, "errand_id": self.errand_id}
        if self.blocked:
            d["blocked"] = True
        return d


@quick_init
@dataclass(frozen=True, slots=True)
class MeetingCopy:
    """One participant's copy of a multi-agent meeting on its own calendar."""

    meeting_id: int
    cost: int = 1

    @property
    def item_id(self) -> int:
        return self.meeting_id

    @property
    def blocked(self) -> bool:
        return False

    def to_json(self) -> dict[str, Any]:
        return {"meeting_id": self.meeting_id, "cost": self.cost}


Item = Union[Errand, MeetingCopy, None]
Calendar = tuple[Item, ...]


#: Largest cost an errand, a meeting or a cost level may have.  The paper's costs are 1,
#: 10, 100 (the authors' harness uses up to 1000); anything near 2^63 would overflow the
#: store and the oracle's weights, and a negative cost turns the oracle's minimum into nonsense.
MAX_COST = 1_000_000
#: a task's cost modes (SPEC §2): every errand costs the same, or costs vary by level
COST_MODES = ("uniform", "varied")


def check_cost(value: int, where: str) -> int:
    """``value`` if it is a cost in 0..MAX_COST, else a TaskError saying where and why."""
    if not 0 <= value <= MAX_COST:
        shown = str(value) if len(str(value)) <= 12 else f"a {len(str(abs(value)))}-digit number"
        kind = "negative" if value < 0 else "too large"
        raise TaskError(f"{where}: cost {shown} is {kind} (costs must be 0 to {MAX_COST:,})")
    return value


#: Largest number of agents, slots or meetings a task row may have (the generator's
#: ``engine.generate.MAX_SIZE``; the paper's tasks have 2-10 agents and 16 slots).
MAX_TASK_SIZE = 500
_ID_MAX = 2 ** 63 - 1  # ids are stored as 64-bit integers


def whole(value: Any, what: str, *, lo: int | None = 0, hi: int | None = None) -> int:
    """``value`` as an int if it is a whole number (an integral float such as ``10.0``
    counts; ``1.5``, ``NaN``, ``Infinity``, ``true`` and strings do not), within
    ``lo``..``hi``; else a TaskError naming ``what``."""
    if type(value) is int and (lo is None or lo <= value) and (hi is None or value <= hi):
        return value  # the usual case, answered first (a bool is not ``type(...) is int``)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TaskError(f"{what} must be a whole number, not {_short(value)}")
    if isinstance(value, float):
        if not (value == value and abs(value) != float("inf")) or not value.is_integer():
            raise TaskError(f"{what} must be a whole number, not {_short(value)}")
        value = int(value)
    if lo is not None and value < lo:
        raise TaskError(f"{what} must be at least {lo}, not {_short(value)}")
    if hi is not None and value > hi:
        raise TaskError(f"{what} must be at most {hi:,}, not {_short(value)}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    if isinstance(value, int) and len(text) > 12:
        return f"a {len(text.lstrip('-'))}-digit number"
    return text if len(text) <= 40 else text[:37] + "..."


def item_from_json(raw: Any, where: str = "calendar") -> Item:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: expected null or an object, got {type(raw).__name__}")
    try:
        if "meeting_id" in raw:
            return MeetingCopy(whole(raw["meeting_id"], f"{where}: meeting_id", hi=_ID_MAX),
                               check_cost(whole(raw.get("cost", 1), f"{where}: cost", lo=None), where))
        if "errand_id" in raw:
            return Errand(whole(raw["errand_id"], f"{where}: errand_id", hi=_ID_MAX),
                          check_cost(whole(raw.get("cost", 1), f"{where}: cost", lo=None), where),
                          bool(raw.get("blocked", False)))
    except TaskError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise TaskError(f"{where}: bad item {raw!r} ({exc})") from None
    raise TaskError(f"{where}: an item needs 'errand_id' or 'meeting_id', got {sorted(raw)}")


#: Errands and labels already made, by their fields (see :func:`_shared`).
_ERRANDS: dict[tuple[int, int, bool], Errand] = {}
_LABELS: dict[tuple[str, str], "Label"] = {}
_SHARED_MAX = 1 << 16


def _shared(memo: dict[tuple, Any], cls: type, key: tuple) -> Any:
    """``cls(*key)``, made once per ``key`` while ``memo`` has room.  Errands and labels are frozen,
    so tasks can share them, and task rows repeat the same few row after row: making a frozen
    dataclass costs more than the rest of reading it.  Bounded, for files of ever-new values."""
    obj = memo.get(key)
    if obj is None:
        obj = cls(*key)
        if len(memo) < _SHARED_MAX:
            memo[key] = obj
    return obj


def _calendar_from_json(raw: list[Any], agent: int) -> Calendar:
    """``item_from_json`` of every item of ``agent``'s calendar.  The items rows are made of —
    ``null`` and an errand with int id and cost in range (and a bool ``blocked``, if any) — are
    read here; anything else (a meeting copy, ``10.0``, a bad cost, a non-object) goes through
    ``item_from_json``, which makes the same item or raises its error."""
    out: list[Item] = []
    for s, it in enumerate(raw):
        if it is None:
            out.append(None)
            continue
        if type(it) is dict and "meeting_id" not in it:
            eid, cost, blocked = it.get("errand_id"), it.get("cost", 1), it.get("blocked", False)
            if (type(eid) is int and type(cost) is int and type(blocked) is bool
                    and 0 <= eid <= _ID_MAX and 0 <= cost <= MAX_COST):
                out.append(_shared(_ERRANDS, Errand, (eid, cost, blocked)))
                continue
        out.append(item_from_json(it, f"calendar {agent} slot {s}"))
    return tuple(out)


def calendar_to_json(cal: Calendar) -> list[dict[str, Any] | None]:
    return [None if it is None else it.to_json() for it in cal]


@quick_init
@dataclass(frozen=True, slots=True)
class Meeting:
    """An incoming meeting: one per round, in task order."""

    id: int
    participants: tuple[int, ...]
    speaker_order: tuple[int, ...]
    cost: int = 1
    duration: int = 1

    @property
    def initiator(self) -> int:
        return min(self.participants)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "participants": list(self.participants),
            "speaker_order": list(self.speaker_order),
            "cost": self.cost,
            "duration": self.duration,
        }


@quick_init
@dataclass(frozen=True, slots=True)
class Label:
    text: str
    tier: str  # public | neutral | sensitive


def _label(text: Any, tier: Any) -> Label:
    """``Label(text, tier)``; shared (:func:`_shared`) when both are strings, as a row writes them."""
    if type(text) is str and type(tier) is str:
        return _shared(_LABELS, Label, (text, tier))
    return Label(text, tier)


@dataclass(frozen=True, slots=True)
class Labels:
    """Private natural-language labels, kept beside the calendars (SPEC §2).

    ``errands`` is keyed by ``(agent, errand_id)``; ``meetings`` by meeting id.
    """

    errands: dict[tuple[int, int], Label] = field(default_factory=dict)
    meetings: dict[int, Label] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "errands": {f"{a}:{e}": {"label": l.text, "tier": l.tier} for (a, e), l in sorted(self.errands.items())},
            "meetings": {str(m): {"label": l.text, "tier": l.tier} for m, l in sorted(self.meetings.items())},
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any] | None) -> "Labels":
        if not raw:
            return cls()
        errands: dict[tuple[int, int], Label] = {}
        for key, val in (raw.get("errands") or {}).items():
            a, e = key.split(":")
            errands[(int(a), int(e))] = _label(val["label"], val["tier"])
        meetings = {int(k): _label(v["label"], v["tier"]) for k, v in (raw.get("meetings") or {}).items()}
        return cls(errands, meetings)

    def for_seat(self, seat: int, meeting_ids: set[int]) -> "Labels":
        """Only what ``seat`` may see (SPEC §5): its own errands, its own meetings."""
        return Labels(
            {k: v for k, v in self.errands.items() if k[0] == seat},
            {k: v for k, v in self.meetings.items() if k in meeting_ids},
        )


#: Longest task id (``engine.inputs.MAX_ID_CHARS``).
MAX_TASK_ID = 200
#: What a task id may not hold: the C0 and C1 control characters (and DEL).
_CONTROL_CHAR = re.compile("[\x00-\x1f\x7f-\x9f]")


def _check_recorded(row: dict[str, Any]) -> None:
    """The figures a row records about itself (the authors' ``optimal``, ``greedy`` and
    ``witness_solution`` costs, the seed) are whole numbers: a NaN or infinite optimum
    would be compared with and shown as if it were one (issue 24 item 14)."""
    for key in ("optimal", "greedy", "witness_solution"):
        rec = row.get(key)
        if rec is None:
            continue
        if not isinstance(rec, dict):
            raise TaskError(f"'{key}' must be an object with a 'cost', got {type(rec).__name__}")
        if rec.get("cost") is not None:
            whole(rec["cost"], f"{key}.cost", hi=_ID_MAX)
    if row.get("seed") is not None:
        whole(row["seed"], "seed", lo=None, hi=_ID_MAX)
    for key in ("difficulty_score", "cost_per_total_agent"):
        v = row.get(key)
        if isinstance(v, float) and not (v == v and abs(v) != float("inf")):
            raise TaskError(f"{key} is {v!r}; a recorded figure must be a finite number")


def _drawn_speaker_orders(row: dict[str, Any], num_agents: int) -> list[Any]:
    """Per meeting of ``row``: its drawn speaking order (:func:`balanced_speaker_orders`,
    seeded by the row's ``seed``, 0 without one) when some meeting of the row gives none
    (an order a meeting does give is kept), else ``None`` for every meeting.  When some
    meeting's participants are not distinct agents 0..num_agents-1, nothing is drawn: each
    meeting gets its participants in seat order and the meeting's own checks say what is wrong."""
    ms = row["meetings"]
    if all(isinstance(m, dict) and m.get("speaker_order") for m in ms):
        return [None] * len(ms)
    lists = []
    try:
        for m in ms:
            parts = tuple(whole(p, "participant", hi=num_agents - 1) for p in m["participants"])
            if not parts or len(set(parts)) != len(parts):
                raise TaskError("participants")
            lists.append(parts)
    except (TaskError, KeyError, TypeError):
        return [sorted(m["participants"]) if isinstance(m, dict) and isinstance(m.get("participants"), list)
                and all(isinstance(p, (int, float)) for p in m["participants"]) else () for m in ms]
    seed = 0 if row.get("seed") is None else whole(row["seed"], "seed", lo=None, hi=_ID_MAX)
    return balanced_speaker_orders(seed, lists, num_agents)


#: How many steps the exact first-speaker search may take before the draw falls back to the
#: greedy pass (the authors' harness searches without a bound; their rows need < 100 steps).
SPEAKER_SEARCH_STEPS = 100_000


def balanced_speaker_orders(seed: int, participants: list[tuple[int, ...]], num_agents: int
                            ) -> list[tuple[int, ...]]:
    """The speaking order of every meeting of a row that gives none, drawn as the authors'
    harness draws it (docs/protocols.md, "Speaking order"): seeded by the row's seed,
    balancing how often each agent speaks first, the others following in seat order.

    One ``random.Random(seed)`` draws everything, in this sequence:

    * **exact balance**, when the meetings divide evenly among the agents (``M = k·N``,
      ``k ≥ 1``) and every agent attends at least ``k`` of them: each meeting's participants
      are shuffled (one shuffle per meeting, in meeting order); then a depth-first search
      gives each meeting, in order, a first speaker who has led fewer than ``k`` so far,
      trying its participants by (times already first, a fresh random number drawn for each
      in shuffled order), until every agent leads exactly ``k``;
    * otherwise (or when no such assignment exists), meeting by meeting: the participants
      are shuffled and the one who has led least so far speaks first, ties broken by a fresh
      random number drawn for each in shuffled order.
    """
    rng = random.Random(seed)
    lists = [sorted(set(p)) for p in participants]
    firsts = [0] * num_agents
    m = len(lists)
    k = m // num_agents if num_agents else 0

    def order(i: int, first: int) -> tuple[int, ...]:
        return (first, *(a for a in lists[i] if a != first))

    attends = [0] * num_agents
    for p in lists:
        for a in p:
            attends[a] += 1
    if k > 0 and m % num_agents == 0 and min(attends) >= k:
        shuffled = [list(p) for p in lists]
        for p in shuffled:
            rng.shuffle(p)
        chosen: list[int] = []
        steps = 0

        def search(i: int) -> bool:
            nonlocal steps
            if i == m:
                return all(c == k for c in firsts)
            steps += 1
            if steps > SPEAKER_SEARCH_STEPS:
                return False
            keyed = [((firsts[a], rng.random()), a) for a in shuffled[i]]
            for _key, a in sorted(keyed, key=lambda ka: ka[0]):
                if firsts[a] >= k:
                    continue
                firsts[a] += 1
                chosen.append(a)
                if search(i + 1):
                    return True
                chosen.pop()
                firsts[a] -= 1
            return False

        if search(0):
            return [order(i, a) for i, a in enumerate(chosen)]
        firsts = [0] * num_agents
    out = []
    for i, p in enumerate(lists):
        shuffled_p = list(p)
        rng.shuffle(shuffled_p)
        keyed = [((firsts[a], rng.random()), a) for a in shuffled_p]
        first = min(keyed, key=lambda ka: ka[0])[1]
        firsts[first] += 1
        out.append(order(i, first))
    return out


@dataclass(slots=True)
class Task:
    """One task row.  ``row`` is the original JSON object, kept verbatim."""

    row: dict[str, Any]
    task_id: str
    num_agents: int
    num_slots: int
    calendars: tuple[Calendar, ...]
    meetings: tuple[Meeting, ...]
    cost_values: tuple[int, ...]
    labels: Labels
    # Derived results (oracle solutions, feasible fraction) memoised per task object.
    cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    # -- loading ---------------------------------------------------------------------
    @classmethod
    def from_row(cls, row: Any) -> "Task":
        """The task of a row; any malformed part is a :class:`TaskError` saying what."""
        try:
            return cls._from_row(row)
        except TaskError:
            raise
        except (KeyError, TypeError, AttributeError, ValueError, OverflowError, IndexError) as exc:
            raise TaskError(f"the task row is malformed ({type(exc).__name__}: {exc})") from None

    @classmethod
    def _from_row(cls, row: Any) -> "Task":
        if not isinstance(row, dict):
            raise TaskError(f"a task row must be a JSON object, got {type(row).__name__}")
        for key in ("calendars", "meetings"):
            if key not in row:
                raise TaskError(f"task row is missing '{key}'")
        params = row.get("params") or {}
        raw_cals = row["calendars"]
        if not isinstance(raw_cals, list) or not raw_cals or not all(isinstance(c, list) for c in raw_cals):
            raise TaskError("'calendars' must be a non-empty list of lists")
        num_agents = len(raw_cals)
        num_slots = len(raw_cals[0])
        for what, n in (("agents (calendars)", num_agents), ("slots", num_slots), ("meetings", len(row["meetings"])
                                                                                  if isinstance(row["meetings"], list)
                                                                                  else 0)):
            if n > MAX_TASK_SIZE:
                raise TaskError(f"the task row has {n:,} {what}; the limit is {MAX_TASK_SIZE}")
        if any(len(c) != num_slots for c in raw_cals):
            raise TaskError("every calendar must have the same number of slots")
        if params.get("num_slots") not in (None, num_slots):
            raise TaskError(f"params.num_slots={params.get('num_slots')} but calendars have {num_slots} slots")
        calendars = tuple(_calendar_from_json(cal, a) for a, cal in enumerate(raw_cals))
        meetings = []
        if not isinstance(row["meetings"], list):
            raise TaskError("'meetings' must be a list")
        drawn = _drawn_speaker_orders(row, num_agents)
        for k, m in enumerate(row["meetings"]):
            try:
                if not isinstance(m["participants"], list):
                    raise TypeError("'participants' must be a list")
                parts = tuple(whole(p, f"meeting {k}: a participant") for p in m["participants"])
                order = tuple(whole(p, f"meeting {k}: speaker_order") for p in
                              m.get("speaker_order") or drawn[k])
                meetings.append(Meeting(whole(m["id"], f"meeting {k}: id", hi=_ID_MAX), parts, order,
                                        check_cost(whole(m.get("cost", 1), f"meeting {k}: cost", lo=None),
                                                   f"meeting {k}"),
                                        whole(m.get("duration", 1), f"meeting {k}: duration", lo=1, hi=1)))
            except TaskError:
                raise
            except (KeyError, TypeError, ValueError, OverflowError) as exc:
                raise TaskError(f"meeting {k}: needs integer 'id' and 'participants' ({exc})") from None
            mid = meetings[-1].id
            if any(not 0 <= p < num_agents for p in parts):
                raise TaskError(f"meeting {mid}: participant out of range 0..{num_agents - 1}")
            if not parts:
                raise TaskError(f"meeting {mid}: has no participants")
            if len(set(parts)) != len(parts):
                raise TaskError(f"meeting {mid}: lists a participant twice ({list(parts)})")
            if sorted(order) != sorted(parts):
                raise TaskError(f"meeting {mid}: speaker_order must list exactly its participants")
        if len({m.id for m in meetings}) != len(meetings):
            raise TaskError("meeting ids must be unique")
        cb = row.get("calbench") or {}
        cost_values = params.get("cost_values")
        if not cost_values:
            seen = {it.cost for cal in calendars for it in cal if isinstance(it, Errand)}
            cost_values = sorted(seen) or [1]
        try:
            cost_values = [check_cost(whole(c, "params.cost_values", lo=None), "params.cost_values")
                           for c in cost_values]
        except (TypeError, ValueError) as exc:
            if isinstance(exc, TaskError):
                raise
            raise TaskError(f"params.cost_values must be a list of integers ({exc})") from None
        _check_recorded(row)
        task_id = str(row.get("task_id", f"seed-{row.get('seed', '?')}"))
        if len(task_id) > MAX_TASK_ID or _CONTROL_CHAR.search(task_id):
            raise TaskError(f"task_id has {len(task_id):,} characters or control characters; an id has at most "
                            f"{MAX_TASK_ID} printable characters")
        return cls(
            row=row,
            task_id=task_id,
            num_agents=num_agents,
            num_slots=num_slots,
            calendars=calendars,
            meetings=tuple(meetings),
            cost_values=tuple(int(c) for c in cost_values),
            labels=Labels.from_json(cb.get("labels")),
        )

    # -- helpers ---------------------------------------------------------------------
    @property
    def seed(self) -> int | None:
        s = self.row.get("seed")
        return int(s) if s is not None else None

    @property
    def cost_mode(self) -> str:
        cb = self.row.get("calbench") or {}
        if cb.get("cost_mode"):
            return str(cb["cost_mode"])
        return "uniform" if len(self.cost_values) <= 1 else "varied"

    def level(self, shown_cost: int) -> int:
        """1-based rank of a shown cost in ``cost_values`` (SPEC §2); prior meetings are 1."""
        try:
            return self.cost_values.index(shown_cost) + 1
        except ValueError:
            # A value outside the list (e.g. a meeting copy's cost 1 in a [10, 100] task).
            return 1 + sum(1 for v in self.cost_values if v < shown_cost)

    def meeting(self, meeting_id: int) -> Meeting:
        for m in self.meetings:
            if m.id == meeting_id:
                return m
        raise KeyError(meeting_id)

    def to_row(self) -> dict[str, Any]:
        """The row as JSON, with the labels written under ``calbench``.

        A shallow copy: the nested values are shared with ``self.row``, which nobody
        mutates (treat both as read-only).
        """
        row = dict(self.row)
        if self.labels.errands or self.labels.meetings:
            if "labels_json" not in self.cache:
                self.cache["labels_json"] = self.labels.to_json()
            row["calbench"] = {**(row.get("calbench") or {}), "labels": self.cache["labels_json"]}
        return row

    def with_labels(self, labels: Labels) -> "Task":
        return Task(self.row, self.task_id, self.num_agents, self.num_slots, self.calendars,
                    self.meetings, self.cost_values, labels)
