"""Observations: the privacy boundary (SPEC §5).

Everything a persona ever receives is built here, from the game state and a seat id.
A seat sees its own calendar with its own labels, meeting labels only for meetings it
takes part in, the messages delivered to it and its own cumulative penalty — never
another seat's calendar, labels, costs or thinking.  The property tests in
``tests/engine/test_privacy_boundary.py`` check exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import Calendar, Labels, Meeting
from .render import render_calendar


@dataclass(frozen=True, slots=True)
class Delivered:
    """A message as its recipient sees it."""

    sender: int
    channel: str  # dm | participant_groupchat | all_groupchat
    meeting_id: int
    content: str
    round: int
    turn: int
    payload: dict[str, Any] | None = None
    to: int | None = None

    def to_json(self) -> dict[str, Any]:
        d = {"from_agent": self.sender, "channel": self.channel, "meeting_id": self.meeting_id,
             "content": self.content, "round": self.round, "turn": self.turn}
        if self.to is not None:
            d["to_agent"] = self.to
        if self.payload is not None:
            d["payload"] = self.payload
        return d


@dataclass(frozen=True, slots=True)
class MeetingView:
    id: int
    participants: tuple[int, ...]
    speaker_order: tuple[int, ...]
    cost: int
    duration: int
    label: str | None  # only for participants

    @property
    def initiator(self) -> int:
        return min(self.participants)


@dataclass(frozen=True, slots=True)
class SeatView:
    """What every observation of one seat carries: its private world."""

    seat: int
    num_agents: int
    num_slots: int
    calendar: Calendar
    labels: Labels  # already filtered to this seat
    prior_meetings: dict[int, tuple[int, ...]]  # meeting id -> participants, for meetings on this calendar
    penalty: int  # own cumulative cost, shown units
    cost_values: tuple[int, ...]
    channels: tuple[str, ...]

    def render(self) -> str:
        return render_calendar(self.calendar, seat=self.seat, labels=self.labels, participants=self.prior_meetings)


@dataclass(frozen=True, slots=True)
class SeatBriefing:
    """Given once, at registration."""

    view: SeatView
    max_turns_per_round: int
    decision_retries: int
    num_rounds: int
    variant: str | None = None


@dataclass(frozen=True, slots=True)
class TurnObservation:
    view: SeatView
    round: int
    turn: int
    max_turns: int
    meeting: MeetingView
    is_participant: bool
    inbox: tuple[Delivered, ...]
    phase: str = "CHEAP_TALK"

    @property
    def is_round_start(self) -> bool:
        return self.turn == 0 and self.is_participant

    @property
    def is_last_turn(self) -> bool:
        return self.turn + 1 >= self.max_turns


@dataclass(frozen=True, slots=True)
class VoluntaryObservation:
    view: SeatView
    round: int
    meeting: MeetingView
    round_messages: tuple[Delivered, ...]  # everything delivered to this seat this round
    attempt: int = 0
    max_attempts: int = 0
    rejection: str | None = None
    phase: str = "VOLUNTARY"


@dataclass(frozen=True, slots=True)
class DecisionObservation:
    view: SeatView  # frozen snapshot taken when DECISION begins
    round: int
    meeting: MeetingView
    round_messages: tuple[Delivered, ...]
    attempt: int = 0
    max_attempts: int = 3
    rejection: str | None = None  # set on a retry: the exact conflict
    phase: str = "DECISION"


Observation = TurnObservation | VoluntaryObservation | DecisionObservation


def meeting_view(meeting: Meeting, seat: int, labels: Labels) -> MeetingView:
    label = labels.meetings.get(meeting.id) if seat in meeting.participants else None
    return MeetingView(meeting.id, meeting.participants, meeting.speaker_order, meeting.cost,
                       meeting.duration, label.text if label else None)


def seat_view(
    seat: int,
    calendars: tuple[Calendar, ...],
    labels: Labels,
    meetings: tuple[Meeting, ...],
    penalty: int,
    cost_values: tuple[int, ...],
    channels: tuple[str, ...],
) -> SeatView:
    cal = calendars[seat]
    mine = {m.id for m in meetings if seat in m.participants}
    on_cal = {it.meeting_id for it in cal if it is not None and hasattr(it, "meeting_id")}
    prior = {m.id: m.participants for m in meetings if m.id in on_cal and m.id in mine}
    return SeatView(seat, len(calendars), len(cal), cal, labels.for_seat(seat, mine), prior,
                    penalty, cost_values, channels)


# -- the seat projection of events (what a seat's screen or a remote client may see) -----
MESSAGE_EVENTS = ("dm_sent", "participant_groupchat_sent", "all_groupchat_sent")
#: Events whose bare fact (who, when) is public; their contents are not.
_PUBLIC_FACTS = ("turn_start", "turn_end", "decide_start", "decide_end", "batch_applied",
                 "batch_rejected", "batch_rolled_back", "seat_timeout", "parse_error", "agent_registered")


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
        elif t in ("seat_timeout", "parse_error"):
            out["error"] = d.get("error")  # the kind of failure only ("seat_timeout", ...)
        return out
    if t == "game_end":
        return out
    return None
