"""Actions and the agent response envelope (SPEC §4).

``{"thinking": "...", "actions": [...]}`` — parsed leniently: the JSON object may sit in
prose or in a code fence, and a bare list of actions is accepted too.  Anything that
cannot be read becomes an :class:`EnvelopeError`, which the game loop records as a
``parse_error`` event; it is never fatal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Union

MESSAGE_TYPES = ("dm", "participant_groupchat", "all_groupchat")
CHANNELS = MESSAGE_TYPES


@dataclass(frozen=True, slots=True)
class Message:
    """A message action: ``dm`` (with ``to``), ``participant_groupchat`` or ``all_groupchat``."""

    type: str
    content: str
    to: int | None = None
    payload: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.type}
        if self.type == "dm":
            d["to"] = self.to
        d["content"] = self.content
        if self.payload is not None:
            d["payload"] = self.payload
        return d


@dataclass(frozen=True, slots=True)
class Schedule:
    meeting_id: Any
    slot: Any
    type: str = field(default="schedule", init=False)

    def to_json(self) -> dict[str, Any]:
        return {"type": "schedule", "meeting_id": self.meeting_id, "slot": self.slot}


@dataclass(frozen=True, slots=True)
class Reschedule:
    item_id: Any
    from_slot: Any
    to_slot: Any
    justification: str = ""
    type: str = field(default="reschedule", init=False)

    def to_json(self) -> dict[str, Any]:
        return {"type": "reschedule", "item_id": self.item_id, "from_slot": self.from_slot,
                "to_slot": self.to_slot, "justification": self.justification}


Action = Union[Message, Schedule, Reschedule]
CalendarAction = Union[Schedule, Reschedule]


class EnvelopeError(ValueError):
    """The reply could not be read as an envelope; ``str()`` says why in plain words."""


def _int_or_raw(v: Any) -> Any:
    """Integers stay; numeric strings become integers; anything else is kept for rule 1."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"\s*-?\d+\s*", v):
        return int(v)
    return v


def action_from_json(raw: Any) -> Action:
    if not isinstance(raw, dict):
        raise EnvelopeError(f"an action must be an object, got {raw!r:.60}")
    kind = raw.get("type") or raw.get("tool") or raw.get("name")
    args = raw.get("arguments") if isinstance(raw.get("arguments"), dict) else raw
    payload = args.get("payload") if isinstance(args.get("payload"), dict) else None
    if kind in MESSAGE_TYPES:
        content = args.get("content", "")
        if not isinstance(content, str):
            content = json.dumps(content)
        if kind == "dm":
            to = _int_or_raw(args.get("to"))
            if not isinstance(to, int) or isinstance(to, bool):
                raise EnvelopeError(f"a dm needs an integer 'to', got {args.get('to')!r}")
            return Message("dm", content, to, payload)
        return Message(kind, content, None, payload)
    if kind == "schedule":
        return Schedule(_int_or_raw(args.get("meeting_id")), _int_or_raw(args.get("slot")))
    if kind == "reschedule":
        return Reschedule(_int_or_raw(args.get("item_id")), _int_or_raw(args.get("from_slot")),
                          _int_or_raw(args.get("to_slot")), str(args.get("justification") or ""))
    raise EnvelopeError(f"unknown action type {kind!r}; expected one of dm, participant_groupchat, "
                        "all_groupchat, schedule, reschedule")


@dataclass(frozen=True, slots=True)
class Envelope:
    thinking: str | None
    actions: tuple[Action, ...]


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def _candidates(text: str):
    for m in _FENCE.finditer(text):
        yield m.group(1).strip()
    yield text.strip()
    # The first balanced {...} or [...] anywhere in prose.
    dec = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                obj, _ = dec.raw_decode(text[i:])
            except ValueError:
                continue
            yield obj


def parse_envelope(text: Any) -> Envelope:
    """Read an envelope from a model's reply text (or an already-decoded object)."""
    obj: Any = None
    if isinstance(text, (dict, list)):
        obj = text
    elif isinstance(text, str):
        if not text.strip():
            raise EnvelopeError("the reply was empty")
        for cand in _candidates(text):
            if not isinstance(cand, str):
                obj = cand
                break
            try:
                obj = json.loads(cand)
                break
            except ValueError:
                continue
    if obj is None:
        raise EnvelopeError("no JSON object with 'actions' was found in the reply")
    thinking = None
    if isinstance(obj, dict):
        thinking = obj.get("thinking")
        if "actions" not in obj:
            if "type" in obj:  # a single bare action
                obj = {"actions": [obj]}
            else:
                raise EnvelopeError("the JSON object has no 'actions' list")
        raw_actions = obj.get("actions")
    else:
        raw_actions = obj
    if raw_actions is None:
        raw_actions = []
    if not isinstance(raw_actions, list):
        raise EnvelopeError("'actions' must be a list")
    actions = tuple(action_from_json(a) for a in raw_actions)
    return Envelope(thinking if isinstance(thinking, str) or thinking is None else json.dumps(thinking), actions)


def actions_to_json(actions) -> list[dict[str, Any]]:
    return [a.to_json() for a in actions]


def actions_from_json(raw: list[Any]) -> tuple[Action, ...]:
    return tuple(action_from_json(a) for a in raw)
