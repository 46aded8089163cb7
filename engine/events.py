"""Events as they happen, and where they go (SPEC §12).

An event is ``{"seq": n, "type": "...", "timestamp": "ISO-8601", "data": {...}}`` and
every ``data`` has ``round``, ``turn``, ``phase`` and ``agent_id``.  The game loop hands
each event to a *sink* as soon as it exists; the SQLite store is one sink, an in-memory
list another.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Protocol

from .quickinit import quick_init


class EventSink(Protocol):
    async def emit(self, event: dict[str, Any]) -> None: ...


class ListSink:
    """Keeps events in memory (tests, headless runs that save at the end)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)


class MultiSink:
    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = [s for s in sinks if s is not None]

    async def emit(self, event: dict[str, Any]) -> None:
        for s in self.sinks:
            await s.emit(event)


Clock = Callable[[], str]


class _Unwritten:
    """The value of a derived field a game left unwritten (see :data:`UNWRITTEN`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNWRITTEN"


#: In place of a calendar render (``calendar_render``, ``calendar_snapshot_render``,
#: ``calendar_render_after``) in a game played with ``renders=False``: the render is exactly
#: what ``engine.lean`` rebuilds from the task and the recorded calendars, and a game whose
#: events go only to lean packing (a scripted suite's batch save) need not write it.
#: ``engine.lean`` drops it when packing and writes the render in its place when asked for
#: full events (:func:`engine.lean.fill_unwritten`); no other reader ever sees it.
UNWRITTEN = _Unwritten()


_SECOND: tuple[int, str] = (-1, "")  # (unix second, its "YYYY-MM-DDTHH:MM:SS" in UTC)


def wall_clock() -> str:
    """Now, in UTC, as ``datetime.now(timezone.utc).isoformat()`` writes it.

    Formatted by hand (the date part once per second): every event is stamped, and a
    scripted game emits a few hundred events in milliseconds.
    """
    global _SECOND
    sec, us = divmod(time.time_ns() // 1000, 1_000_000)
    cached = _SECOND
    if cached[0] != sec:
        cached = _SECOND = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return f"{cached[1]}.{us:06d}+00:00" if us else f"{cached[1]}+00:00"


class LogicalClock:
    """A clock that ticks one millisecond per reading from a fixed epoch.

    With it (``--deterministic``) the same inputs give the same trace byte for byte.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self.t = start or datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> str:
        self.t += timedelta(milliseconds=1)
        return self.t.isoformat()


class EventLog:
    """Numbers events, stamps them, keeps them, and forwards them to the sink."""

    def __init__(self, sink: EventSink | None, clock: Clock, start_seq: int = 0) -> None:
        self.sink = sink
        self.clock = clock
        self.seq = start_seq
        self.events: list[dict[str, Any]] = []

    def make(self, type_: str, *, round: int, turn: int, phase: str, agent_id: int | None,
             **data: Any) -> dict[str, Any]:
        """An event not numbered yet (:meth:`add` numbers, stamps and records it)."""
        d = {"round": round, "turn": turn, "phase": phase, "agent_id": agent_id}
        d.update(data)
        # Key order: seq, type, timestamp, data (stable JSON for byte-identical traces).
        return {"seq": None, "type": type_, "timestamp": "", "data": d}

    async def add(self, event: dict[str, Any]) -> dict[str, Any]:
        event["seq"] = self.seq
        event["timestamp"] = self.clock()
        self.seq += 1
        self.events.append(event)
        if self.sink is not None:
            await self.sink.emit(event)
        return event

    async def emit(self, type_: str, *, round: int, turn: int, phase: str, agent_id: int | None,
                   **data: Any) -> dict[str, Any]:
        # :meth:`make` then :meth:`add`, in one step (every event of a game passes here)
        event = {"seq": self.seq, "type": type_, "timestamp": self.clock(),
                 "data": {"round": round, "turn": turn, "phase": phase, "agent_id": agent_id, **data}}
        self.seq += 1
        self.events.append(event)
        if self.sink is not None:
            await self.sink.emit(event)
        return event


MESSAGE_EVENT_TYPES = {"dm": "dm_sent", "participant_groupchat": "participant_groupchat_sent",
                       "all_groupchat": "all_groupchat_sent"}
#: The event types that carry a message (one per channel), declared once; import it.
MESSAGE_EVENTS: tuple[str, ...] = tuple(MESSAGE_EVENT_TYPES.values())


# ---------------------------------------------------------------------------------------
# The event kinds, declared once
# ---------------------------------------------------------------------------------------
#: Keys every event's ``data`` starts with, in this order.
HEADER: tuple[str, ...] = ("round", "turn", "phase", "agent_id")


@dataclass(frozen=True, slots=True)
class EventKind:
    """One event type: its name and the ``data`` keys after :data:`HEADER`.

    ``fields`` lists every key the engine may write (optional ones included), in the order
    it writes them; ``open`` kinds carry a mapping the engine does not fix (``game_end``:
    the metrics; ``human_input``: what a front end reports; ``seat_takeover``: a table's
    note).  ``folded``: :class:`engine.fold.Fold` reads it.  The on-disk JSON is the plain
    dict the engine emits; these declarations and the readers below never change a byte of it.
    """

    name: str
    fields: tuple[str, ...] = ()
    open: bool = False
    folded: bool = False


_REPLY = ("tool_calls", "text", "thinking", "usage", "latency_ms", "raw_api_response")
_FAILURE = ("error", "detail", "text", "failure", "reason")
_MESSAGE = ("from_agent", "to_agent", "meeting_id", "content", "content_chars", "channel", "recipients", "payload")

EVENT_KINDS: dict[str, EventKind] = {k.name: k for k in (
    EventKind("game_start", ("scenario_seed", "num_agents", "num_slots", "optimal_cost", "greedy_cost",
                             "nosy_agent_ids", "communication_protocol", "agent_types", "agent_models", "task_id")),
    EventKind("agent_registered", ("agent_type", "kind", "model", "is_nosy_agent", "system_prompt",
                                   "calendar_render", "calendar", "variant")),
    EventKind("round_start", ("meeting", "speaker_order", "communication_protocol"), folded=True),
    EventKind("turn_start", ("inbox_drained", "calendar_render", "prompt_sent")),
    EventKind("human_input", open=True),
    EventKind("turn_end", _REPLY + ("extra",)),
    EventKind("parse_error", _FAILURE),
    EventKind("seat_timeout", _FAILURE),
    EventKind("context_overflow", _FAILURE),
    EventKind("seat_takeover", open=True),
    EventKind("dm_sent", _MESSAGE, folded=True),
    EventKind("participant_groupchat_sent", _MESSAGE, folded=True),
    EventKind("all_groupchat_sent", _MESSAGE, folded=True),
    EventKind("decide_start", ("calendar_render", "calendar_snapshot_render", "prompt_sent")),
    EventKind("decide_end", _REPLY + ("retry_count", "status", "extra")),
    EventKind("batch_applied", ("actions", "calendar_render_after", "calendar_after", "cost"), folded=True),
    EventKind("batch_rejected", ("attempt", "conflict_description", "rule", "actions")),
    EventKind("batch_rolled_back", ("actions", "reason")),
    EventKind("resolution", ("meeting_id", "per_agent_slot", "coordinated", "slot_conflicts",
                             "consistency_violated_meeting_ids", "blocked_slot_violations", "state_hash",
                             "calendars"), folded=True),
    EventKind("meeting_broken", ("meeting_id",)),
    EventKind("reflection", ("model", "deltas", "problems", "text", "usage", "latency_ms", "raw_api_response",
                             "prompt_sent", "error", "error_detail")),
    EventKind("round_restarted", ("from_seq", "to_seq", "events", "messages")),
    EventKind("game_end", open=True, folded=True),
)}
#: The kinds :class:`engine.fold.Fold` reads; every other event leaves the fold as it was.
FOLDED_KINDS: frozenset[str] = frozenset(k.name for k in EVENT_KINDS.values() if k.folded)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# Typed readers of the folded kinds.  Lenient: a trace read from outside may lack a key or
# hold a wrong type; the reader gives None there and the fold says what it could not use.
@quick_init
@dataclass(frozen=True, slots=True)
class RoundStart:
    round: int | None
    meeting: dict[str, Any] | None  # the meeting as JSON (Meeting.to_json)

    @classmethod
    def read(cls, d: dict[str, Any]) -> "RoundStart":
        m = d.get("meeting")
        return cls(_int(d.get("round")), m if isinstance(m, dict) else None)


@quick_init
@dataclass(frozen=True, slots=True)
class BatchApplied:
    round: Any  # as recorded (the fold names a bad one in its problem line)
    agent: Any
    phase: Any
    actions: list  # the recorded actions (JSON), each with the cost it incurred
    calendar_after: list | None  # ours; JSON
    calendar_render_after: str | None  # the authors' (and ours): the render

    @classmethod
    def read(cls, d: dict[str, Any]) -> "BatchApplied":
        after, render = d.get("calendar_after"), d.get("calendar_render_after")
        return cls(d.get("round"), d.get("agent_id"), d.get("phase"), d.get("actions") or [],
                   after if isinstance(after, list) else None, render if isinstance(render, str) else None)


@quick_init
@dataclass(frozen=True, slots=True)
class Resolved:
    """A ``resolution`` event as recorded (what the round's end says happened)."""

    round: Any
    meeting_id: Any
    per_agent_slot: dict[int, Any] | None  # agent -> slot; None when unreadable
    coordinated: Any
    state_hash: str | None
    calendars: list | None  # ours: every calendar after the round, JSON

    @classmethod
    def read(cls, d: dict[str, Any]) -> "Resolved":
        raw = d.get("per_agent_slot")
        slots: dict[int, Any] | None = None
        if isinstance(raw, dict):
            try:
                slots = {int(k): v for k, v in raw.items()}
            except (TypeError, ValueError):
                slots = None
        h, cals = d.get("state_hash"), d.get("calendars")
        return cls(d.get("round"), d.get("meeting_id"), slots, d.get("coordinated"),
                   h if isinstance(h, str) else None, cals if isinstance(cals, list) else None)


@quick_init
@dataclass(frozen=True, slots=True)
class MessageSent:
    round: int | None
    sender: int | None
    channel: str  # "dm", "participant_groupchat", "all_groupchat" (from the event type)
    content: str

    @classmethod
    def read(cls, type_: str, d: dict[str, Any]) -> "MessageSent":
        c = d.get("content")
        return cls(_int(d.get("round")), _int(d.get("from_agent")), MESSAGE_CHANNEL[type_],
                   c if isinstance(c, str) else "")


#: message event type -> its channel (the inverse of :data:`MESSAGE_EVENT_TYPES`)
MESSAGE_CHANNEL: dict[str, str] = {t: c for c, t in MESSAGE_EVENT_TYPES.items()}
