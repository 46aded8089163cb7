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

