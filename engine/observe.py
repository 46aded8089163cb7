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

from .events import MESSAGE_EVENTS
from .model import Calendar, Labels, Meeting
from .quickinit import quick_init
from .render import render_calendar


@quick_init
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


@quick_init
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


@quick_init
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

    def render(self, memo: dict | None = None) -> str:
        """The calendar as the seat reads it; ``memo``: lines kept from earlier renders of this
        seat's calendar in this game (``engine.render.render_calendar``)."""
        return render_calendar(self.calendar, seat=self.seat, labels=self.labels, participants=self.prior_meetings,
                               memo=memo)


@quick_init
@dataclass(frozen=True, slots=True)
class SeatBriefing:
    """Given once, at registration."""

    view: SeatView
    max_turns_per_round: int
    decision_retries: int
    num_rounds: int
    variant: str | None = None


@quick_init
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


@quick_init
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


@quick_init
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
    *,
    own_labels: Labels | None = None,
) -> SeatView:
    """``own_labels``: :func:`seat_labels` of this seat, when the caller keeps them (a game
    builds a seat's view each time its calendar changes; its labels never do)."""
    cal = calendars[seat]
    mine = {m.id for m in meetings if seat in m.participants}
    on_cal = {it.meeting_id for it in cal if it is not None and hasattr(it, "meeting_id")}
    prior = {m.id: m.participants for m in meetings if m.id in on_cal and m.id in mine}
    if own_labels is None:
        own_labels = labels.for_seat(seat, mine)
    return SeatView(seat, len(calendars), len(cal), cal, own_labels, prior, penalty, cost_values, channels)


def seat_labels(seat: int, labels: Labels, meetings: tuple[Meeting, ...]) -> Labels:
    """The labels ``seat`` may read (SPEC §5): its own errands', and those of the meetings it
    takes part in — what :func:`seat_view` puts in the seat's view."""
    return labels.for_seat(seat, {m.id for m in meetings if seat in m.participants})



# ---------------------------------------------------------------------------------------
# The seat's projection of engine events (the human's screen, a remote client)
# ---------------------------------------------------------------------------------------
# Engine events carry every seat's private data (calendar renders, prompts, thinking,
# every calendar after a round), so nothing outside the engine and the save file ever
# gets one as it is: :func:`seat_event` projects an event onto what one seat may see.
# Each event type has an explicit allow-list below; a type without one is dropped, and a
# key not listed never leaves.  A new event field is private until it is listed here.

#: Every projected event: ``type`` and ``seq``, and from ``data`` these keys.
EVENT_HEADER = ("round", "turn", "phase", "agent_id")


@dataclass(frozen=True, slots=True)
class EventAllowance:
    """What of one event type a seat may see, beyond :data:`EVENT_HEADER`.

    ``public``: keys every seat sees (``None`` when absent).  ``own``: keys only the
    event's own seat (``agent_id``) sees, and only when present.  ``others_see``: keys a
    seat other than the event's own sees (``None`` when absent).  ``own_only``: the
    other seats see nothing of the event.
    """

    public: tuple[str, ...] = ()
    own: tuple[str, ...] = ()
    others_see: tuple[str, ...] = ()
    own_only: bool = False


#: The allow-list, one entry per event type shown plainly.  ``round_start``, the message
#: events and ``resolution`` are shaped by :func:`seat_event` itself (see there);
#: ``reflection``, ``human_input`` and every unknown type are never shown.
EVENT_ALLOWANCES: dict[str, EventAllowance] = {
    "game_start": EventAllowance(public=("num_agents", "num_slots", "communication_protocol", "agent_types",
                                         "agent_models", "task_id")),
    "agent_registered": EventAllowance(public=("agent_type",)),
    "turn_start": EventAllowance(),
    "turn_end": EventAllowance(),
    "decide_start": EventAllowance(),
    "decide_end": EventAllowance(own=("status", "retry_count")),
    "batch_applied": EventAllowance(own=("calendar_after", "cost")),
    "batch_rejected": EventAllowance(own=("conflict_description", "attempt")),
    "batch_rolled_back": EventAllowance(own=("reason",)),
    # the kind of failure is public ("seat_timeout", ...); its detail only to the seat
    # "reason": the endpoint trouble in plain words ("timed out after 120 s, 5 tries; ..."), no game data
    "seat_timeout": EventAllowance(own=("error", "detail", "reason"), others_see=("error", "reason")),
    "parse_error": EventAllowance(own=("error", "detail"), others_see=("error",)),
    "context_overflow": EventAllowance(own=("error", "detail"), others_see=("error",)),
    "meeting_broken": EventAllowance(own=("meeting_id",), own_only=True),
    "game_end": EventAllowance(),
    # a resumed game plays the round that was cut short again (engine.game.run_game): every
    # seat is told which round starts again, nothing of what was set aside
    "round_restarted": EventAllowance(),
}
#: Of the round's meeting every seat sees these keys (never its label).
MEETING_KEYS = ("id", "participants", "speaker_order", "cost", "duration")
#: Of a message its sender and recipients see these keys (and ``recipients``).
MESSAGE_KEYS = ("from_agent", "to_agent", "meeting_id", "content", "channel", "payload")


def seat_event(event: dict[str, Any], seat: int) -> dict[str, Any] | None:
    """What seat ``seat`` may see of one engine event (SPEC §5), or None.

    A flat dict: ``type``, ``seq``, ``round``, ``turn``, ``phase``, ``agent_id`` and the
    keys :data:`EVENT_ALLOWANCES` lists for the type.  Shaped types:

    - ``round_start``: ``meeting`` with :data:`MEETING_KEYS` only;
    - message events: only for the sender and the recipients, with :data:`MESSAGE_KEYS`
      and ``recipients``;
    - ``resolution``: ``participant``; for a participant also ``meeting_id``,
      ``coordinated`` and ``my_slot``; for every seat ``my_calendar`` (its own calendar
      after the round) — never another seat's slot or calendar.
    """
    t = event.get("type")
    d = event.get("data") or {}
    out: dict[str, Any] = {"type": t, "seq": event.get("seq")}
    for k in EVENT_HEADER:
        out[k] = d.get(k)
    own = d.get("agent_id") == seat
    if t == "round_start":
        m = d.get("meeting") or {}
        out["meeting"] = {k: m.get(k) for k in MEETING_KEYS}
        return out
    if t in MESSAGE_EVENTS:
        recipients = d.get("recipients")
        if recipients is None:
            recipients = [d.get("to_agent")]
        if d.get("from_agent") != seat and seat not in recipients:
            return None
        for k in MESSAGE_KEYS:
            out[k] = d.get(k)
        out["recipients"] = list(recipients)
        return out
    if t == "resolution":
        slots = d.get("per_agent_slot") or {}
        if seat in [int(a) for a in slots]:
            out["meeting_id"] = d.get("meeting_id")
            out["coordinated"] = d.get("coordinated")
            out["my_slot"] = slots.get(str(seat))
            out["participant"] = True
        else:
            out["participant"] = False
        cals = d.get("calendars")
        if isinstance(cals, list) and 0 <= seat < len(cals):
            out["my_calendar"] = cals[seat]
        return out
    rule = EVENT_ALLOWANCES.get(t) if isinstance(t, str) else None
    if rule is None or (rule.own_only and not own):
        return None
    for k in rule.public:
        out[k] = d.get(k)
    if own:
        for k in rule.own:
            if k in d:
                out[k] = d[k]
    else:
        for k in rule.others_see:
            out[k] = d.get(k)
    return out
