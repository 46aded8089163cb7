"""Textual messages the game posts to the interface, and what the human's seat may see of events.

The game runs in a worker; everything it tells the interface arrives as one of the
messages below.  Engine events carry every seat's private data (calendar renders,
thinking, labels inside prompts), so they never reach a widget as they are:
:func:`seat_event` projects an event onto what seat ``seat`` may see (SPEC §5) — its own
data, the messages delivered to it, and the public course of the game (round, phase,
whose turn, which seat failed to answer) — and drops the rest.  It is the interface's
privacy boundary, the twin of ``engine.observe``; ``tests/tui/test_privacy_screens.py``
checks the screens built from it.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from engine.events import MESSAGE_EVENTS
#: Events whose bare fact (who, when) is public; their contents are not.
_PUBLIC_FACTS = ("turn_start", "turn_end", "decide_start", "decide_end", "batch_applied",
                 "batch_rejected", "batch_rolled_back", "seat_timeout", "parse_error", "agent_registered",
                 "context_overflow")


def seat_event(event: dict[str, Any], seat: int) -> dict[str, Any] | None:
    """What seat ``seat`` may see of one engine event, or None.

    The result is a flat dict: ``type``, ``seq``, ``round``, ``turn``, ``phase``,
    ``agent_id`` and, depending on the type, a few whitelisted keys.  Anything not
    whitelisted here never reaches the screen.
    """
    t = event.get("type")
    d = event.get("data") or {}
    out: dict[str, Any] = {"type": t, "seq": event.get("seq"), "round": d.get("round"),
                           "turn": d.get("turn"), "phase": d.get("phase"), "agent_id": d.get("agent_id")}
    own = d.get("agent_id") == seat
    if t == "game_start":
        for k in ("num_agents", "num_slots", "communication_protocol", "agent_types", "agent_models", "task_id"):
            out[k] = d.get(k)
        return out
    if t == "round_start":
        m = d.get("meeting") or {}
        out["meeting"] = {k: m.get(k) for k in ("id", "participants", "speaker_order", "cost", "duration")}
        return out
    if t in MESSAGE_EVENTS:
        recipients = d.get("recipients")
        if recipients is None:
            recipients = [d.get("to_agent")]
        if d.get("from_agent") != seat and seat not in recipients:
            return None
        for k in ("from_agent", "to_agent", "meeting_id", "content", "channel", "payload"):
            out[k] = d.get(k)
        out["recipients"] = list(recipients)
        return out
    if t == "resolution":
        m_parts = [int(a) for a in (d.get("per_agent_slot") or {})]
        if seat in m_parts:
            out["meeting_id"] = d.get("meeting_id")
            out["coordinated"] = d.get("coordinated")
            out["my_slot"] = (d.get("per_agent_slot") or {}).get(str(seat))
            out["participant"] = True
        else:
            out["participant"] = False
        cals = d.get("calendars")
        if isinstance(cals, list) and 0 <= seat < len(cals):
            out["my_calendar"] = cals[seat]
        return out
    if t == "meeting_broken":
        return out | {"meeting_id": d.get("meeting_id")} if own else None
    if t in _PUBLIC_FACTS:
        if t == "agent_registered":
            out["agent_type"] = d.get("agent_type")
            return out
        if own:
            for k in ("calendar_after", "cost", "conflict_description", "attempt", "status",
                      "error", "detail", "retry_count", "reason"):
                if k in d:
                    out[k] = d[k]
        elif t in ("seat_timeout", "parse_error", "context_overflow"):
            out["error"] = d.get("error")  # the kind of failure only ("seat_timeout", ...)
        return out
    if t == "game_end":
        return out
    return None


class GameEvent(Message):
    """One engine event, already projected by :func:`seat_event`."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__()
        self.event = event


class HumanTurn(Message):
    """The engine waits for the human: ``request`` is a ``personas.human.HumanRequest``."""

    def __init__(self, request: Any) -> None:
        super().__init__()
        self.request = request


class GameOver(Message):
    """The game finished; ``result`` is the engine's ``GameResult``."""

    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result


class GameFailed(Message):
    """The game could not go on (an engine or store error); ``error`` says why."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class AppSink:
    """An engine event sink that posts :class:`GameEvent` messages for one seat's eyes."""

    def __init__(self, target: Any, seat: int) -> None:
        self.target = target
        self.seat = seat

    async def emit(self, event: dict[str, Any]) -> None:
        view = seat_event(event, self.seat)
        if view is not None:
            self.target.post_message(GameEvent(view))
