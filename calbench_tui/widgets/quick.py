"""Quick actions: English a person can read plus the typed payload the scripted seats understand.

Each builder returns ``engine.actions.Message`` objects for one quick action.  The English
names every slot explicitly (the scripted bots and the free-text estimator both read
"slot N"), and the payload follows the scripted protocols' conventions
(``personas/scripted/protocol.py``: ``{"protocol", "kind", "meeting_id", ...}``) with
IMAP's kinds (``cost_request``, ``costs``, ``decision``), so an IMAP bot — the default
table — answers a human's "ask for costs" exactly as it answers another bot.  Bots of
other protocols ignore a payload that is not theirs and read the English; accept and
decline are English only (IMAP has no typed form for them).  Costs shared by a human are computed from the seat's
own calendar with the same rule the IMAP bots use (:func:`personas.base.insertion_costs`):
0 for a free slot, the errand's shown cost when it can move, "no" otherwise.

Slot mentions in received messages (payloads first, then "slot N" in the text) feed the
calendar's "being talked about" highlight and the batch builder's suggested slot.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from engine.actions import Message

#: Protocols whose typed payloads the quick actions can write (``personas/scripted/imap.py``).
TYPED_PROTOCOLS = ("imap",)


def _slots_words(slots: Sequence[int]) -> str:
    slots = sorted(set(slots))
    if not slots:
        return "no slot"
    if len(slots) == 1:
        return f"slot {slots[0]}"
    if len(slots) > 2 and slots == list(range(slots[0], slots[-1] + 1)):
        return f"slots {slots[0]}-{slots[-1]}"
    return "slots " + ", ".join(map(str, slots[:-1])) + f" and {slots[-1]}"


def _send(channel: str, to: Iterable[int] | None, content: str, payload: dict[str, Any] | None) -> list[Message]:
    if channel == "dm":
        return [Message("dm", content, t, payload) for t in (to or [])]
    return [Message(channel, content, None, payload)]


def _payload(protocol: str | None, kind: str, meeting_id: int, **fields: Any) -> dict[str, Any] | None:
    """The typed payload in the scripted protocols' shape (``personas/scripted/protocol.py``):
    ``{"protocol": ..., "kind": ..., "meeting_id": k, ...}``.  None (free text only) when the
    recipients speak no protocol we can type for, or the action has no typed form in theirs;
    the bots then read the English, which names every slot."""
    if protocol not in TYPED_PROTOCOLS or kind is None:
        return None
    return {"protocol": protocol, "kind": kind, "meeting_id": meeting_id, **fields}


def ask_costs(seat: int, meeting_id: int, slots: Sequence[int], *, channel: str, to: Sequence[int],
              protocol: str | None = "imap") -> list[Message]:
    """IMAP ``cost_request``: ask the others what each slot would cost them."""
    slots = sorted(set(slots))
    content = f"Agent {seat} asks your costs for meeting M{meeting_id} at {_slots_words(slots)}. What are your costs?"
    return _send(channel, to, content, _payload(protocol, "cost_request", meeting_id, slots=slots))


def share_costs(seat: int, meeting_id: int, costs: dict[int, int | None], *, channel: str,
                to: Sequence[int], protocol: str | None = "imap") -> list[Message]:
    """IMAP ``costs``: my cost per slot (0 free, the errand's cost, None impossible)."""
    items = sorted(costs.items())
    free = [s for s, c in items if c == 0]
    parts = [f"My costs for meeting M{meeting_id}: free at {_slots_words(free)}" if free
             else f"My costs for meeting M{meeting_id}: no free slot"]
    for value in sorted({c for _, c in items if c}):
        parts.append(f"{_slots_words([s for s, c in items if c == value])} cost {value}")
    bad = [s for s, c in items if c is None]
    if bad:
        parts.append(f"I can't do {_slots_words(bad)}")
    content = "; ".join(parts) + "."
    return _send(channel, to, content,
                 _payload(protocol, "costs", meeting_id, costs={str(s): c for s, c in items}))


def propose(seat: int, meeting_id: int, slots: Sequence[int], *, channel: str, to: Sequence[int],
            protocol: str | None = "imap") -> list[Message]:
    """Propose a slot (IMAP ``decision`` when it is one slot) or a few (English only)."""
    slots = sorted(set(slots))
    if len(slots) == 1:
        content = f"Let's meet at slot {slots[0]} for meeting M{meeting_id}."
        payload = _payload(protocol, "decision", meeting_id, slot=slots[0])
    else:
        content = f"How about {_slots_words(slots)} for meeting M{meeting_id}? Which works for you?"
        payload = None
    return _send(channel, to, content, payload)


def accept(seat: int, meeting_id: int, slot: int | None, *, channel: str, to: Sequence[int],
           protocol: str | None = "imap") -> list[Message]:
    where = f"slot {slot}" if slot is not None else "that"
    content = f"Yes, {where} works for me for meeting M{meeting_id}. Agreed."
    return _send(channel, to, content, None)


def decline(seat: int, meeting_id: int, slot: int | None, *, channel: str, to: Sequence[int],
            protocol: str | None = "imap") -> list[Message]:
    where = f"slot {slot}" if slot is not None else "that"
    content = f"No, I can't do {where} for meeting M{meeting_id}."
    return _send(channel, to, content, None)


# -- reading what others said ------------------------------------------------------------------
_SLOT_GROUP = re.compile(r"\bslots?\s+(\d+(?:\s*(?:,|and|or|&|-|–|to)\s*\d+)*)", re.I)
_NUM = re.compile(r"\d+")
_RANGE = re.compile(r"(\d+)\s*(?:-|–|to)\s*(\d+)")


def slots_in_text(text: str, num_slots: int) -> list[int]:
    out: list[int] = []
    for m in _SLOT_GROUP.finditer(text or ""):
        group = m.group(1)
        for a, b in _RANGE.findall(group):
            lo, hi = int(a), int(b)
            if lo <= hi and hi - lo < num_slots:
                out.extend(range(lo, hi + 1))
        for n in _NUM.findall(_RANGE.sub(" ", group)):
            out.append(int(n))
    seen: list[int] = []
    for s in out:
        if 0 <= s < num_slots and s not in seen:
            seen.append(s)
    return seen


def payload_kind(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return None
    k = payload.get("kind") or payload.get("type")
    if k in ("text", "chat", "free_text", "note", "fallback"):
        return None
    return str(k) if k is not None else None


def slots_in_payload(payload: Any, num_slots: int) -> list[int]:
    if not isinstance(payload, dict):
        return []
    out: list[int] = []
    for key in ("slot", "proposed_slot", "confirmed_slot"):
        v = payload.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            out.append(v)
    for key in ("slots", "offer", "offers", "proposed_slots"):
        v = payload.get(key)
        if isinstance(v, list):
            out.extend(x for x in v if isinstance(x, int) and not isinstance(x, bool))
        elif isinstance(v, dict):
            out.extend(int(x) for x in v if str(x).lstrip("-").isdigit())
    for key in ("costs", "scores"):
        v = payload.get(key)
        if isinstance(v, dict):
            out.extend(int(x) for x, c in v.items() if str(x).lstrip("-").isdigit() and c is not None)
        elif isinstance(v, list):
            out.extend(i for i, c in enumerate(v) if c is not None)
    return [s for s in dict.fromkeys(out) if 0 <= s < num_slots]


def costs_in_payload(payload: Any) -> dict[int, int | None] | None:
    """A typed ``costs`` payload as ``{slot: cost or None}``; None for anything else."""
    if payload_kind(payload) != "costs" or not isinstance(payload.get("costs"), dict):
        return None
    out: dict[int, int | None] = {}
    for k, v in payload["costs"].items():
        try:
            s = int(k)
        except (TypeError, ValueError):
            continue
        out[s] = v if isinstance(v, int) and not isinstance(v, bool) else None
    return out


def mentioned_slots(event: dict, num_slots: int) -> list[int]:
    """Slots a (projected) message event talks about: its payload's, else its text's."""
    return slots_in_payload(event.get("payload"), num_slots) or slots_in_text(event.get("content") or "", num_slots)


def is_request_for_costs(event: dict) -> bool:
    kind = payload_kind(event.get("payload"))
    if kind:
        return kind in ("cost_request", "request_costs", "ask_costs")
    text = (event.get("content") or "").lower()
    return "cost" in text and ("?" in text or "ask" in text or "what" in text)


def is_proposal(event: dict) -> bool:
    kind = payload_kind(event.get("payload"))
    if kind:
        return kind in ("decision", "propose", "proposal", "offer", "confirm", "propose_reschedule")
    text = (event.get("content") or "").lower()
    return any(w in text for w in ("propose", "let's meet", "how about", "meet at", "suggest"))
