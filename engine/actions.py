"""Actions and the agent response envelope (SPEC §4).

``{"thinking": "...", "actions": [...]}`` — parsed leniently: the JSON object may sit in
prose or in a code fence, and a bare list of actions is accepted too.  Anything that
cannot be read becomes an :class:`EnvelopeError`, which the game loop records as a
``parse_error`` event; it is never fatal.

Besides the game's actions a reply may use short ones: ``{"type": "pass"}`` (nothing
to add), ``{"type": "agree", "slot": n}`` ("I agree to slot n"; ``Envelope.agreed``) and
the talk moves of :data:`SHORT_ACTIONS` (``Envelope.short``: answer a cost request with
my costs, propose one slot, ask for costs), which an LLM persona turns into messages.  A
reply the endpoint cut off at its token limit is read whole or not at all
(:func:`repair_truncated`); a reply past the size limits (``MAX_*``) is refused whole.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Union

from .quickinit import quick_init

MESSAGE_TYPES = ("dm", "participant_groupchat", "all_groupchat")
#: Short talk moves a seat expands into messages itself (``personas/llm/talk.py``):
#: ``costs`` answers the latest cost request with my costs, ``propose`` (with ``slot``)
#: proposes one slot to the meeting's other participants, ``ask_costs`` asks them for costs.
SHORT_ACTIONS = ("costs", "propose", "ask_costs")
CHANNELS = MESSAGE_TYPES


@quick_init
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


@quick_init
@dataclass(frozen=True, slots=True)
class Schedule:
    meeting_id: Any
    slot: Any
    type: str = field(default="schedule", init=False)

    def to_json(self) -> dict[str, Any]:
        return {"type": "schedule", "meeting_id": self.meeting_id, "slot": self.slot}


@quick_init
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
    #: ``{"type": "agree", "slot": n}`` short actions, in order: a seat's "I agree to slot n",
    #: which an LLM persona turns into the messages of its channels (``pass`` leaves no trace).
    agreed: tuple[Any, ...] = ()
    #: True when a reply cut off at its token limit was closed (strings, lists, objects) to read it.
    repaired: bool = False
    #: The other short actions (:data:`SHORT_ACTIONS`), in order, as ``(type, slot or None)``.
    short: tuple[tuple[str, Any], ...] = ()


#: Limits on what one reply may carry (issue 24 item 10): a longer reply, more actions or a
#: longer message is refused whole (an :class:`EnvelopeError`, i.e. an agent failure),
#: never shortened.  The LLM schemas (``personas/llm/schema.py``) ask for less.
MAX_REPLY_CHARS = 32_000
MAX_ACTIONS = 40
MAX_MESSAGE_CHARS = 2_000
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def _top_level_starts(text: str):
    """Offsets of ``{`` / ``[`` that open a value at nesting depth 0 (outside strings).

    An object *inside* a larger unclosed one (an action of an envelope that was cut off)
    is never a candidate: reading it alone would silently drop the rest of the reply.
    """
    depth = 0
    in_str = esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch in "{[":
            if depth == 0:
                yield i
            depth += 1
        elif ch in "}]" and depth > 0:
            depth -= 1


def _candidates(text: str):
    for m in _FENCE.finditer(text):
        yield m.group(1).strip()
    yield text.strip()
    # The first balanced top-level {...} or [...] in prose.
    dec = json.JSONDecoder()
    tops = set()
    for i in _top_level_starts(text):
        tops.add(i)
        try:
            obj, _ = dec.raw_decode(text[i:])
        except (ValueError, RecursionError):
            continue
        yield obj
    # Prose with a stray "{" hides the envelope from the scan above: any object that is a
    # whole envelope (it has "actions") still counts — never a lone inner action.
    tried = 0
    for i, ch in enumerate(text):
        if ch == "{" and i not in tops:
            tried += 1
            if tried > 256:  # bounded work on a reply full of braces
                break
            try:
                obj, _ = dec.raw_decode(text[i:])
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict) and "actions" in obj:
                yield obj


def repair_truncated(text: str) -> Any:
    """The JSON value a reply cut off at its token limit was writing, closed, or None.

    The reply's first top-level ``{`` (or a code fence's) is read to its end: an open
    string is closed, a key left without a value (or a dangling ``,`` / ``:``) is dropped,
    and every open array and object is closed.  The result is the *whole* envelope the
    model was writing, never one inner object of it.
    """
    start = next((i for i in _top_level_starts(text) if text[i] == "{"), None)
    if start is None:
        return None
    body = text[start:]
    end, stack, in_str, esc = _scan(body, stop_when_closed=True)
    if not stack:  # it closed by itself: nothing to repair here
        return None
    s = body[:end]
    if in_str:
        if esc:
            s = s[:-1]
        s += '"'
    dec = json.JSONDecoder()
    # Close it as it is; else drop the last incomplete member or element (a key with no
    # value, a half-written number or literal) and try again, a few times.
    for _ in range(6):
        t = s.rstrip()
        while t and t[-1] in ",:":
            t = t[:-1].rstrip()
        closing = "".join(reversed(_open_stack(t)))
        try:
            obj, _ = dec.raw_decode(t + closing)
            return obj
        except (ValueError, RecursionError):
            pass
        cut = max(t.rfind(","), t.rfind("{"), t.rfind("["))
        if cut <= 0:
            return None
        s = t[:cut + 1] if t[cut] in "{[" else t[:cut]
    return None


def _scan(text: str, *, stop_when_closed: bool = False) -> tuple[int, list[str], bool, bool]:
    """Walk ``text`` as JSON: ``(characters read, closers still owed, inside a string?,
    just after a backslash in it?)``.  Brackets inside strings do not count; a closer with
    nothing open is passed over.  ``stop_when_closed``: stop just after the closer that
    leaves nothing open (or at a closer with nothing open)."""
    stack: list[str] = []
    in_str = esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if stack:
                stack.pop()
            if stop_when_closed and not stack:
                return i + 1, stack, in_str, esc
    return len(text), stack, in_str, esc


def _open_stack(text: str) -> list[str]:
    """The closers still owed at the end of ``text`` (outside strings)."""
    return _scan(text)[1]


def decode_envelope(text: Any, *, truncated: bool = False) -> tuple[Any, bool]:
    """``(the JSON value of a reply, repaired?)``; :class:`EnvelopeError` when there is none.

    ``truncated``: the endpoint said the reply was cut at its token limit
    (``finish_reason: length``).  Then only the whole envelope counts: the text is read
    as is when it is complete JSON after all, else closed by :func:`repair_truncated`;
    a lone inner object is never taken for the reply.
    """
    if isinstance(text, (dict, list)):
        return text, False
    if not isinstance(text, str):
        raise EnvelopeError("no JSON object with 'actions' was found in the reply")
    if not text.strip():
        raise EnvelopeError("the reply was empty")
    if len(text) > MAX_REPLY_CHARS:
        raise EnvelopeError(f"the reply is {len(text):,} characters long; at most {MAX_REPLY_CHARS:,} are read")
    for cand in _candidates(text):
        if not isinstance(cand, str):
            return cand, False
        try:
            return json.loads(cand), False
        except (ValueError, RecursionError):
            continue
    if truncated:
        obj = repair_truncated(text)
        if isinstance(obj, dict):
            return obj, True
    raise EnvelopeError("no JSON object with 'actions' was found in the reply")


def parse_envelope(text: Any, *, truncated: bool = False) -> Envelope:
    """Read an envelope from a model's reply text (or an already-decoded object).

    ``truncated``: the reply was cut off at its token limit; see :func:`decode_envelope`
    (a repaired envelope has ``repaired=True``; one with no ``actions`` yet is a pass).
    Limits: :data:`MAX_REPLY_CHARS`, :data:`MAX_ACTIONS`, :data:`MAX_MESSAGE_CHARS`.
    """
    obj, repaired = decode_envelope(text, truncated=truncated)
    thinking = None
    if isinstance(obj, dict):
        thinking = obj.get("thinking")
        if "actions" not in obj:
            if "type" in obj and not repaired:  # a single bare action
                obj = {"actions": [obj]}
            elif repaired and "thinking" in obj:  # cut off before its actions: it did nothing
                obj = {**obj, "actions": []}
            else:
                raise EnvelopeError("the JSON object has no 'actions' list")
        raw_actions = obj.get("actions")
    else:
        raw_actions = obj
    if raw_actions is None:
        raw_actions = []
    if not isinstance(raw_actions, list):
        raise EnvelopeError("'actions' must be a list")
    if len(raw_actions) > MAX_ACTIONS:
        raise EnvelopeError(f"the reply has {len(raw_actions):,} actions; at most {MAX_ACTIONS} are allowed")
    actions: list[Action] = []
    agreed: list[Any] = []
    short: list[tuple[str, Any]] = []
    for a in raw_actions:
        kind = a.get("type") if isinstance(a, dict) else None
        if kind == "pass":
            continue
        if kind == "agree":
            agreed.append(_int_or_raw(a.get("slot")))
            continue
        if kind in SHORT_ACTIONS:
            short.append((kind, _int_or_raw(a.get("slot")) if "slot" in a else None))
            continue
        act = action_from_json(a)
        if isinstance(act, Message) and len(act.content) > MAX_MESSAGE_CHARS:
            raise EnvelopeError(f"a message of {len(act.content):,} characters; at most {MAX_MESSAGE_CHARS:,} "
                                "are allowed")
        actions.append(act)
    if thinking is not None and not isinstance(thinking, str):
        thinking = json.dumps(thinking)
    return Envelope(thinking, tuple(actions), tuple(agreed), repaired, short=tuple(short))


def actions_to_json(actions) -> list[dict[str, Any]]:
    return [a.to_json() for a in actions]


def actions_from_json(raw: list[Any]) -> tuple[Action, ...]:
    return tuple(action_from_json(a) for a in raw)
