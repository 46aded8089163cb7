"""What crosses the wire to a remote seat: observations as JSON, and back.

A seat played from another machine (``calbench serve``) is sent exactly what a local
persona is given — the observations built by :mod:`engine.observe`, the privacy boundary
— plus the seat's projection of the game's events (``engine.observe``'s seat projection).
This module only changes their form: every field of an observation becomes JSON and comes
back as the same frozen dataclass, so the client's screens are fed the very objects a
local game would feed them.  Nothing here reads the game state; it can only encode what
the privacy boundary already let through.

Decoding is strict: a value of the wrong shape raises :class:`WireError` (one line), never
a half-built observation.
"""

from __future__ import annotations

from typing import Any

from .model import Calendar, Labels, TaskError, calendar_to_json, item_from_json
from .observe import (DecisionObservation, Delivered, MeetingView, SeatBriefing, SeatView, TurnObservation,
                      VoluntaryObservation)

__all__ = ["WireError", "observation_to_wire", "observation_from_wire"]

_KINDS = {SeatBriefing: "briefing", TurnObservation: "turn", VoluntaryObservation: "voluntary",
          DecisionObservation: "decision"}


class WireError(ValueError):
    """A frame whose observation cannot be read; the message says what, in one line."""


# -- encode ----------------------------------------------------------------------------------

def _view_to_wire(v: SeatView) -> dict[str, Any]:
    return {"seat": v.seat, "num_agents": v.num_agents, "num_slots": v.num_slots,
            "calendar": calendar_to_json(v.calendar), "labels": v.labels.to_json(),
            "prior_meetings": {str(k): list(p) for k, p in sorted(v.prior_meetings.items())},
            "penalty": v.penalty, "cost_values": list(v.cost_values), "channels": list(v.channels)}


def _meeting_to_wire(m: MeetingView) -> dict[str, Any]:
    return {"id": m.id, "participants": list(m.participants), "speaker_order": list(m.speaker_order),
            "cost": m.cost, "duration": m.duration, "label": m.label}


def _delivered_to_wire(d: Delivered) -> dict[str, Any]:
    return {"sender": d.sender, "channel": d.channel, "meeting_id": d.meeting_id, "content": d.content,
            "round": d.round, "turn": d.turn, "payload": d.payload, "to": d.to}


def observation_to_wire(obs: Any) -> dict[str, Any]:
    """``{"kind": ..., ...fields}`` for a briefing or an observation."""
    kind = _KINDS.get(type(obs))
    if kind is None:
        raise WireError(f"cannot send a {type(obs).__name__} to a remote seat")
    out: dict[str, Any] = {"kind": kind, "view": _view_to_wire(obs.view)}
    if kind == "briefing":
        out.update(max_turns_per_round=obs.max_turns_per_round, decision_retries=obs.decision_retries,
                   num_rounds=obs.num_rounds, variant=obs.variant)
        return out
    out.update(round=obs.round, meeting=_meeting_to_wire(obs.meeting), phase=obs.phase)
    if kind == "turn":
        out.update(turn=obs.turn, max_turns=obs.max_turns, is_participant=obs.is_participant,
                   inbox=[_delivered_to_wire(d) for d in obs.inbox])
    else:
        out.update(round_messages=[_delivered_to_wire(d) for d in obs.round_messages], attempt=obs.attempt,
                   max_attempts=obs.max_attempts, rejection=obs.rejection)
    return out


# -- decode ----------------------------------------------------------------------------------

def _int(raw: Any, what: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise WireError(f"{what} must be an integer, got {type(raw).__name__}")
    return raw


def _ints(raw: Any, what: str) -> tuple[int, ...]:
    if not isinstance(raw, list):
        raise WireError(f"{what} must be a list of integers")
    return tuple(_int(x, what) for x in raw)


def _str_or_none(raw: Any, what: str) -> str | None:
    if raw is not None and not isinstance(raw, str):
        raise WireError(f"{what} must be text or null")
    return raw


def _obj(raw: Any, what: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise WireError(f"{what} must be an object")
    return raw


def _labels_from_wire(raw: Any) -> Labels:
    raw = _obj(raw, "labels")
    try:
        return Labels.from_json(raw)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise WireError(f"labels are malformed ({exc})") from None


def _calendar_from_wire(raw: Any) -> Calendar:
    if not isinstance(raw, list):
        raise WireError("calendar must be a list")
    try:
        return tuple(item_from_json(x, "calendar") for x in raw)
    except TaskError as exc:
        raise WireError(str(exc)) from None


def _view_from_wire(raw: Any) -> SeatView:
    d = _obj(raw, "view")
    prior = _obj(d.get("prior_meetings", {}), "prior_meetings")
    try:
        prior_meetings = {int(k): _ints(v, "prior meeting participants") for k, v in prior.items()}
    except ValueError:
        raise WireError("prior_meetings keys must be meeting ids") from None
    channels = d.get("channels")
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        raise WireError("channels must be a list of names")
    return SeatView(_int(d.get("seat"), "seat"), _int(d.get("num_agents"), "num_agents"),
                    _int(d.get("num_slots"), "num_slots"), _calendar_from_wire(d.get("calendar")),
                    _labels_from_wire(d.get("labels", {})), prior_meetings, _int(d.get("penalty"), "penalty"),
                    _ints(d.get("cost_values"), "cost_values"), tuple(channels))


def _meeting_from_wire(raw: Any) -> MeetingView:
    d = _obj(raw, "meeting")
    return MeetingView(_int(d.get("id"), "meeting id"), _ints(d.get("participants"), "participants"),
                       _ints(d.get("speaker_order"), "speaker_order"), _int(d.get("cost"), "meeting cost"),
                       _int(d.get("duration"), "duration"), _str_or_none(d.get("label"), "meeting label"))


def _delivered_from_wire(raw: Any) -> Delivered:
    d = _obj(raw, "message")
    payload = d.get("payload")
    if payload is not None and not isinstance(payload, dict):
        raise WireError("a message payload must be an object or null")
    to = d.get("to")
    content = d.get("content")
    if not isinstance(content, str) or not isinstance(d.get("channel"), str):
        raise WireError("a message needs text content and a channel")
    return Delivered(_int(d.get("sender"), "sender"), d["channel"], _int(d.get("meeting_id"), "meeting_id"),
                     content, _int(d.get("round"), "round"), _int(d.get("turn"), "turn"), payload,
                     None if to is None else _int(to, "to"))


def _messages(raw: Any, what: str) -> tuple[Delivered, ...]:
    if not isinstance(raw, list):
        raise WireError(f"{what} must be a list")
    return tuple(_delivered_from_wire(x) for x in raw)


def observation_from_wire(raw: Any):
    """The dataclass :func:`observation_to_wire` encoded."""
    d = _obj(raw, "observation")
    kind = d.get("kind")
    view = _view_from_wire(d.get("view"))
    if kind == "briefing":
        return SeatBriefing(view, _int(d.get("max_turns_per_round"), "max_turns_per_round"),
                            _int(d.get("decision_retries"), "decision_retries"), _int(d.get("num_rounds"), "num_rounds"),
                            _str_or_none(d.get("variant"), "variant"))
    if kind not in ("turn", "voluntary", "decision"):
        raise WireError(f"unknown observation kind {kind!r}")
    r, meeting = _int(d.get("round"), "round"), _meeting_from_wire(d.get("meeting"))
    phase = d.get("phase")
    if not isinstance(phase, str):
        raise WireError("phase must be text")
    if kind == "turn":
        if not isinstance(d.get("is_participant"), bool):
            raise WireError("is_participant must be true or false")
        return TurnObservation(view, r, _int(d.get("turn"), "turn"), _int(d.get("max_turns"), "max_turns"), meeting,
                               d["is_participant"], _messages(d.get("inbox"), "inbox"), phase)
    cls = VoluntaryObservation if kind == "voluntary" else DecisionObservation
    return cls(view, r, meeting, _messages(d.get("round_messages"), "round_messages"),
               _int(d.get("attempt"), "attempt"), _int(d.get("max_attempts"), "max_attempts"),
               _str_or_none(d.get("rejection"), "rejection"), phase)
