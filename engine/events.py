"""Events as they happen, and where they go (SPEC §12).

An event is ``{"seq": n, "type": "...", "timestamp": "ISO-8601", "data": {...}}`` and
every ``data`` has ``round``, ``turn``, ``phase`` and ``agent_id``.  The game loop hands
each event to a *sink* as soon as it exists; the SQLite store is one sink, an in-memory
list another.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Protocol


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
        return await self.add(self.make(type_, round=round, turn=turn, phase=phase, agent_id=agent_id, **data))


MESSAGE_EVENT_TYPES = {"dm": "dm_sent", "participant_groupchat": "participant_groupchat_sent",
                       "all_groupchat": "all_groupchat_sent"}
#: The event types that carry a message (one per channel), declared once; import it.
MESSAGE_EVENTS: tuple[str, ...] = tuple(MESSAGE_EVENT_TYPES.values())
